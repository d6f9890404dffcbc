#!/usr/bin/env bash
# check.sh: everything CI runs. Needs Go and a C compiler (go test -race
# needs cgo); the tests use the embedded store (set MONGODB_URI to run
# them against a MongoDB instead). With Node 20 or newer, the TypeScript
# client's tests run last (scripts/check-typescript.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== C compiler (for go test -race)"
cc=$(go env CC)
if ! command -v "${cc%% *}" >/dev/null 2>&1; then
  echo "check.sh: go test -race needs cgo, and so a C compiler: '${cc%% *}' was not found." >&2
  echo "  Install one (Debian/Ubuntu: apt-get install gcc; macOS: xcode-select --install)" >&2
  echo "  or point CC at one, then run this again." >&2
  exit 1
fi
if [ "$(go env CGO_ENABLED)" != 1 ]; then
  echo "check.sh: go test -race needs cgo, but CGO_ENABLED is $(go env CGO_ENABLED): unset it or set it to 1." >&2
  exit 1
fi

echo "== chromium (for the console's browser test)"
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
      echo "check.sh: installing chromium failed: the console's browser test will be skipped." >&2
  else
    echo "check.sh: no chromium (Debian/Ubuntu: apt-get install chromium): the console's browser test will be skipped." >&2
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
go tool staticcheck ./...

echo "== static binary (scripts/build.sh, as the Dockerfile builds it)"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
./scripts/build.sh "$bin/usersync"
"$bin/usersync" version

echo "== go test -race"
go test -race -count=1 ./... "$@"

# Apart from go test, and outside its time bounds: the TypeScript client's
# build and tests against a usersync it starts (about a minute, 30 s of it
# waiting for the change feed); it skips, saying why, without Node 20 or
# when npm cannot install its packages.
echo "== TypeScript client (scripts/check-typescript.sh)"
./scripts/check-typescript.sh
