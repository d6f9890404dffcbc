#!/usr/bin/env bash
# check.sh: everything CI runs. Needs only Go; the engine the tests use is
# embedded (set MONGODB_URI to run them against a MongoDB instead).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
go tool staticcheck ./...

echo "== go test -race"
go test -race -count=1 ./... "$@"
