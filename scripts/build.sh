#!/usr/bin/env bash
# build.sh [OUTPUT]: the static usersync binary (no cgo), stamped with its
# module version and VCS revision (`usersync version`). The Dockerfile and
# CI (check.sh) both build with this script, so the image's recipe is
# exercised on every run. OUTPUT defaults to ./usersync.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-./usersync}
CGO_ENABLED=0 go build -trimpath -buildvcs=auto -o "$out" ./cmd/usersync
