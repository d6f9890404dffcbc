#!/usr/bin/env bash
# faultrun.sh: usersync under load, with faults, then a check that nothing
# acknowledged was lost.
#
# The load generator runs while usersync (embedded store) is killed with
# SIGKILL and restarted KILLS times. (An outage of the database itself is
# tested in the api package: the embedded store has no process of its own
# to stop, and no MongoDB server runs here.)
#
# The generator retries as Svix does (same svix-id, signed again) and ends
# by checking through the API that every acknowledged event's user is in
# its newest state and that no user is duplicated; this script also checks
# that no event is left stored or failed. Loopback only; it stops by itself.
#
#   scripts/faultrun.sh            # USERS=200 UPDATES=4 KILLS=5
set -euo pipefail
cd "$(dirname "$0")/.."
USERS=${USERS:-200} UPDATES=${UPDATES:-4} KILLS=${KILLS:-5}
PORT=${PORT:-18480}
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; [ -n "${KEEP:-}" ] || rm -rf "$work"; echo "work dir: $work"; }
trap cleanup EXIT

echo "== building"
go build -o "$work/usersync" ./cmd/usersync
go build -o "$work/usersync-load" ./cmd/usersync-load

export CLERK_WEBHOOK_SECRET=$SECRET USERSYNC_API_KEYS=usk_fault_api_0123456789 USERSYNC_ADMIN_KEYS=usk_fault_admin_0123456789
export USERSYNC_ADDR=127.0.0.1:$PORT USERSYNC_SWEEP_INTERVAL=500ms USERSYNC_SWEEP_GRACE=2s
base=http://127.0.0.1:$PORT

wait_up() { # url
  for _ in $(seq 100); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "not up: $1"; return 1
}
start_server() { # extra env...
  env "$@" "$work/usersync" >>"$work/usersync.log" 2>&1 &
  server=$!; pids+=("$server")
  wait_up "$base/healthz"
}
settled() { # no event left stored or failed
  for _ in $(seq 300); do
    stats=$(curl -fs -H "Authorization: Bearer usk_fault_admin_0123456789" "$base/v1/events/stats" || true)
    if echo "$stats" | grep -q '"failed":0' && echo "$stats" | grep -q '"stored":0'; then
      echo "events: $stats"; return 0
    fi
    sleep 0.1
  done
  echo "events left unsettled: $stats"; return 1
}
load() { # seed
  "$work/usersync-load" -url "$base" -users "$USERS" -updates "$UPDATES" -attempts 10 \
    -concurrency 8 -timeout 4m -seed "$1" >"$work/load.out" 2>&1 &
  loader=$!
}

echo "== usersync killed $KILLS times under load"
start_server USERSYNC_DATA_DIR="$work/data"
load 1
for i in $(seq "$KILLS"); do
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 "$server"; wait "$server" 2>/dev/null || true
  echo "killed usersync ($i)"
  start_server USERSYNC_DATA_DIR="$work/data"
done
status=0; wait "$loader" || status=$?
cat "$work/load.out"
settled
[ "$status" -eq 0 ] || { echo "FAIL: the load generator's check failed"; exit 1; }
kill "$server"; wait "$server" 2>/dev/null || true

echo "faultrun: OK"
