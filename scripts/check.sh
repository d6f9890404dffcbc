#!/usr/bin/env bash
# check.sh: everything CI runs. Needs Go and a C compiler (go test -race
# needs cgo); the tests use the embedded store (set MONGODB_URI to run
# them against a MongoDB instead). With Node 20 or newer, the TypeScript
# client's tests run last (scripts/check-typescript.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase starts with "== name" and ends with its time; the times of
# all of them are printed again at the end (docs/performance.md keeps
# them). EPOCHREALTIME (bash 5) gives tenths; older shells whole seconds.
clock() { if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME/,/.}"; else echo "$SECONDS"; fi; }
phase_name="" phase_start="" check_start=$(clock) times=""
end_phase() {
  [ -n "$phase_name" ] || return 0
  local took
  took=$(awk -v a="$phase_start" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }')
  echo "   ($phase_name: $took s)"
  times+=$(printf '%8s s  %s' "$took" "$phase_name")$'\n'
  phase_name=""
}
phase() {
  end_phase
  phase_name=$1 phase_start=$(clock)
  echo "== $1"
}
bin=""
finish() {
  local status=$?
  end_phase
  [ -z "$bin" ] || rm -rf "$bin"
  printf '\n== time of each phase%s\n%s' "$([ "$status" = 0 ] || echo " (stopped: exit status $status)")" "$times"
  printf '%8s s  %s\n' "$(awk -v a="$check_start" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }')" "in all"
}
trap finish EXIT

phase "C compiler (for go test -race)"
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

phase "chromium (for the console's browser test)"
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
      echo "check.sh: installing chromium failed: the console's browser test will be skipped." >&2
  else
    echo "check.sh: no chromium (Debian/Ubuntu: apt-get install chromium): the console's browser test will be skipped." >&2
  fi
fi

phase "curl and jq (for the walkthroughs of the docs, run as written)"
missing=""
for tool in curl jq; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null) ||
      echo "check.sh: installing$missing failed: the walkthroughs' tests will be skipped." >&2
  else
    echo "check.sh: no$missing (Debian/Ubuntu: apt-get install$missing): the walkthroughs' tests will be skipped." >&2
  fi
fi

phase "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# The static binary first, then go vet and staticcheck in its build
# configuration (no cgo, -trimpath: usersync has no C of its own), so that
# they read the packages it compiled rather than compiling every one again
# (on a cold cache, the most of their time). go test -race below needs cgo.
phase "static binary (scripts/build.sh, as the Dockerfile builds it)"
bin=$(mktemp -d)
./scripts/build.sh "$bin/usersync"
"$bin/usersync" version

phase "go vet"
CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" go vet ./...

phase "staticcheck"
CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" go tool staticcheck ./...

phase "go test -race"
# -vet=off: go vet ran above with every analyzer; go test would run a
# subset of them again, on every package.
# -gcflags: the race detector also turns on checkptr, which checks each
# unsafe pointer conversion; modernc.org's SQLite is C translated to Go,
# where every memory access is one, and checkptr more than doubled the tests' CPU
# time in it. It stays on for usersync's own code; the race detector stays
# on everywhere.
go test -race -vet=off -gcflags='modernc.org/...=-d=checkptr=0' -count=1 ./... "$@"

# Apart from go test, and outside its time bounds: the TypeScript client's
# build and tests against a usersync it starts (about a minute, 30 s of it
# waiting for the change feed); it skips, saying why, without Node 20 or
# when npm cannot install its packages.
phase "TypeScript client (scripts/check-typescript.sh)"
./scripts/check-typescript.sh
