#!/usr/bin/env bash
# instances.sh: three usersync instances on one MongoDB database, started
# at once on a new database, then killed with SIGKILL and restarted under
# load; at the end every acknowledged event must be processed once and
# every user in its newest state.
#
# Needs MONGODB_URI (a MongoDB or a DocumentDB engine; the embedded store
# is one process per data dir). Each run uses a new database, dropped at
# the end unless KEEP is set. A load generator per instance delivers its
# own users' events to that instance, retrying as Svix does (same svix-id,
# signed again), and checks them through the API at the end; this script
# also checks that no event is left stored or failed. The first load
# generator is also an app with an outbound endpoint for every user event
# (its receiver takes 20 ms to answer each): every one of its users must
# arrive there in its final state, whichever instance dispatches and
# however often it is killed, and no user's deliveries may arrive two at
# once. Loopback only; it stops by itself.
#
#   MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' scripts/instances.sh
#   # USERS=150 UPDATES=4 KILLS=6 (kills spread over the three instances)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MONGODB_URI:?instances.sh needs MONGODB_URI: a MongoDB (or DocumentDB engine) to run three instances on}"
USERS=${USERS:-150} UPDATES=${UPDATES:-4} KILLS=${KILLS:-6}
PORT=${PORT:-18580}
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
ADMIN=usk_instances_admin_0123456789
export MONGODB_DATABASE=${MONGODB_DATABASE:-usersync_instances_$$_$RANDOM}

work=$(mktemp -d)
declare -A server
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ -z "${KEEP:-}" ] && [ -x "$work/dropdb" ]; then "$work/dropdb" || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$work"
  echo "work dir: $work; database: $MONGODB_DATABASE"
}
trap cleanup EXIT

echo "== building"
go build -o "$work/usersync" ./cmd/usersync
go build -o "$work/usersync-load" ./cmd/usersync-load
go build -o "$work/dropdb" ./scripts/instances/dropdb

export CLERK_WEBHOOK_SECRET=$SECRET USERSYNC_API_KEYS=usk_instances_api_0123456789 USERSYNC_ADMIN_KEYS=$ADMIN
export USERSYNC_SWEEP_INTERVAL=500ms USERSYNC_SWEEP_GRACE=2s USERSYNC_ENDPOINTS_ALLOW_PRIVATE=true

url() { echo "http://127.0.0.1:$((PORT + $1))"; }
up() { # instance
  for _ in $(seq 150); do curl -fs "$(url "$1")/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "instance $1 is not ready; its log:"; tail -5 "$work/usersync.$1.log"; return 1
}
start() { # instance
  USERSYNC_ADDR=127.0.0.1:$((PORT + $1)) "$work/usersync" >>"$work/usersync.$1.log" 2>&1 &
  server[$1]=$!; pids+=("$!")
}

echo "== three instances started at once on a new database ($MONGODB_DATABASE)"
for i in 0 1 2; do start "$i"; done
for i in 0 1 2; do
  up "$i" || { echo "FAIL: instance $i did not start"; exit 1; }
done

echo "== load on each instance, $KILLS SIGKILLs spread over them"
loaders=()
for i in 0 1 2; do
  app=()
  # A killed lease holder's lease runs out after a minute: then another
  # instance dispatches.
  [ "$i" -eq 0 ] && app=(-endpoint -endpoint-wait 4m -endpoint-latency 20ms)
  "$work/usersync-load" -url "$(url "$i")" -users "$USERS" -updates "$UPDATES" -attempts 10 \
    -concurrency 8 -timeout 4m -seed $((i + 11)) "${app[@]}" >"$work/load.$i.out" 2>&1 &
  loaders+=("$!")
done
for k in $(seq "$KILLS"); do
  sleep "0.$((RANDOM % 9 + 1))"
  i=$((RANDOM % 3))
  kill -9 "${server[$i]}"; wait "${server[$i]}" 2>/dev/null || true
  echo "killed instance $i ($k)"
  start "$i"; up "$i"
done
status=0
for i in 0 1 2; do
  wait "${loaders[$i]}" || status=1
  echo "-- load on instance $i"; cat "$work/load.$i.out"
done

settled=""
for _ in $(seq 300); do
  stats=$(curl -fs -H "Authorization: Bearer $ADMIN" "$(url 0)/v1/events/stats" || true)
  if echo "$stats" | grep -q '"failed":0' && echo "$stats" | grep -q '"stored":0'; then settled=1; break; fi
  sleep 0.2
done
echo "events: $stats"
[ -n "$settled" ] || { echo "FAIL: events left stored or failed"; exit 1; }
[ "$status" -eq 0 ] || { echo "FAIL: a load generator's check failed"; exit 1; }
echo "instances: OK"
