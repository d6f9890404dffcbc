#!/usr/bin/env bash
# check-typescript.sh: the TypeScript client's phase of check.sh. Its
# types are what api/openapi.json makes, it builds, and its tests pass
# against a real usersync, built from this checkout and served on a
# loopback port with a data dir, secrets and keys of its own. Without
# Node 20 or newer, or when npm cannot install the package's
# dependencies (no registry), it says so and skips: exit 0.
#
# check.sh runs it after go test, on its own: the Go test command's time
# bounds (go test's timeout, docs/performance.md's figures) do not count
# it. It waits 30 s for the change feed to serve what its tests delivered.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

skip() {
  echo "check-typescript.sh: $1: the TypeScript client's tests are skipped." >&2
  exit 0
}

command -v node >/dev/null 2>&1 || skip "no node (Node 20 or newer; https://nodejs.org)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || skip "node is $(node --version), not 20 or newer"
command -v npm >/dev/null 2>&1 || skip "no npm"

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cd clients/typescript
if ! npm ci --no-audit --no-fund >"$work/npm-ci.log" 2>&1; then
  tail -n 20 "$work/npm-ci.log" >&2
  skip "npm ci failed (is the npm registry reachable?)"
fi
npm run --silent check-generated

# A usersync of its own: the embedded store in the work dir, secrets made
# now, endpoints on loopback allowed (the tests' app listens there). Its
# environment is only this, so that a MONGODB_URI or a Clerk key of the
# caller's never reaches it.
(cd "$root" && go build -o "$work/usersync" ./cmd/usersync)
random() { node -p 'require("node:crypto").randomBytes(24).toString("base64")'; }
secret="whsec_$(random)" api_key=$(random) admin_key=$(random)
port=$(node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
env -i PATH="$PATH" HOME="$HOME" \
  USERSYNC_ADDR="127.0.0.1:$port" USERSYNC_DATA_DIR="$work/data" USERSYNC_LOG_LEVEL=warn \
  CLERK_WEBHOOK_SECRET="$secret" USERSYNC_API_KEYS="$api_key" USERSYNC_ADMIN_KEYS="$admin_key" \
  USERSYNC_ENDPOINTS_ALLOW_PRIVATE=true \
  "$work/usersync" serve >"$work/usersync.log" 2>&1 &
pid=$!
url="http://127.0.0.1:$port"
if ! node -e '
  const deadline = Date.now() + 30_000;
  (async function poll() {
    try { if ((await fetch(process.argv[1] + "/readyz")).ok) return; } catch {}
    if (Date.now() > deadline) process.exit(1);
    setTimeout(poll, 100);
  })();' "$url"; then
  cat "$work/usersync.log" >&2
  echo "check-typescript.sh: usersync did not answer on $url within 30 s" >&2
  exit 1
fi

if ! USERSYNC_URL="$url" USERSYNC_API_KEY="$api_key" USERSYNC_ADMIN_KEY="$admin_key" CLERK_WEBHOOK_SECRET="$secret" npm test; then
  echo "check-typescript.sh: usersync's log:" >&2
  cat "$work/usersync.log" >&2
  exit 1
fi
