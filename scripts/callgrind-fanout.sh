#!/usr/bin/env bash
# Counts apns-server's CPU instructions per fan-out delivery with callgrind, a figure
# that does not depend on the machine's load: one notification fanned out to a
# company of N1 and then of N2 stored devices (SQLite, one user each, as
# bench-server.sh seeds them), sent to an apns-mock that runs outside valgrind, and
#   instructions per delivery = (Ir(N2) - Ir(N1)) / (N2 - N1)
# which leaves out what a run costs whatever its size (start-up, TLS, the JWT).
#
#   scripts/callgrind-fanout.sh [BIN_DIR]  release binaries (default .build/release);
#                                          builds nothing: `swift build -c release
#                                          --product apns-server` and `--product apns-mock`
#   N1=10000 N2=30000                      the two fan-outs' sizes
#   KEEP=DIR                               keeps the profiles there, for
#                                          `callgrind_annotate --inclusive=yes`
#
# Each company is seeded through the bulk route by the server running natively (under
# valgrind that would take most of the run), which then stops; the server starts
# again under valgrind on the same database, takes one POST /v1/notifications, and
# stops once the outbox is empty (every delivery final and recorded). Only that
# second process is counted.
#
# The total moves by about 1 % from run to run: how many deliveries the hand-over
# leases and how many the other loop claims depends on timing, and the periodic
# readers (gauges, pollers) run for as long as the run lasts. The writer's
# functions per delivery (`callgrind_annotate --inclusive=yes` on the KEEP
# profiles, Ir(N2) - Ir(N1) of each) are steadier.
#
# valgrind runs the server about fifty times slower than it runs, while sleeps and
# the mock keep their pace; the lease is set to 10 minutes, so that lease renewals
# and the hand-over's give-up time (a third of a lease) stay as rare, relative to
# the work, as they are at full speed with the default 30 s. Two things valgrind 3.19
# needs here, as in callgrind-send.sh: it cannot read the DWARF Swift 6 writes, so
# apns-server runs as a copy without debug sections (objcopy --strip-debug; symbols
# stay); and it stops once libdispatch's dispatch_main() (the async main's) parks the
# main thread in pthread_exit, so a small preloaded library replaces dispatch_main()
# with a loop that drains the main queue on the main thread. For this measurement only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/.build/release}" && pwd)
n1=${N1:-10000} n2=${N2:-30000}
. "$(dirname "$0")/lib/require.sh"
need_tools callgrind-fanout valgrind callgrind_annotate objcopy cc python3 curl openssl
need_binaries callgrind-fanout "$bin" apns-server apns-mock

work=$(mktemp -d /tmp/callgrind-fanout.XXXXXX)
mock= server=
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null
  [ -n "$mock" ] && kill -INT "$mock" 2>/dev/null && wait "$mock" 2>/dev/null
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.cg "$KEEP"/ 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

bash "$root/scripts/gen-pki.sh" "$work/pki" >/dev/null
. "$work/pki/ids.env"
. "$root/scripts/lib/mock.sh"
. "$root/scripts/lib/server-config.sh"
. "$root/scripts/lib/server.sh"
objcopy --strip-debug "$bin/apns-server" "$work/apns-server"
cc -O2 -shared -fPIC -o "$work/drain.so" "$root/scripts/lib/dispatch-main-drain.c"

"$bin/apns-mock" --port 0 --cert "$work/pki/server.crt" --key "$work/pki/server.key" \
  --auth-key "$work/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$work/mock.out" 2>"$work/mock.err" &
mock=$!
mock_port=$(mock_port "$work/mock.out" "$work/mock.err" "$mock")
api_key=$(openssl rand -hex 24); echo "$api_key" >"$work/api-keys"; openssl rand -hex 32 >"$work/user-jwt.secret"
chmod 600 "$work/api-keys" "$work/user-jwt.secret"

total() {  # total PROFILE: its instruction count
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

depth() {  # depth DB: rows in the outbox
  python3 -c "import sqlite3; print(sqlite3.connect('$1', timeout=60).execute('SELECT count(*) FROM outbox').fetchone()[0])"
}

fanout() {  # fanout N: Ir of apns-server fanning one notification out to N devices
  local n=$1 db="$work/apns-$1.db" port base
  port=$(free_port); base=http://127.0.0.1:$port
  server_config "$port" "sqlite:$db" "$mock_port" >"$work/apns-server.yaml"
  printf 'worker:\n  lease_seconds: 600\n' >>"$work/apns-server.yaml"
  # N distinct tokens, one user each, 1000 a request (as bench-server.sh).
  python3 - "$n" "$work" <<'PY'
import json, random, sys
n, d = int(sys.argv[1]), sys.argv[2]
rng = random.Random(42)
tokens = ["%064x" % rng.getrandbits(256) for _ in range(n)]
for i in range(0, n, 1000):
    devices = [{"user_id": f"u{j}", "company_id": "bench", "deviceToken": tokens[j], "platform": "ios", "appType": "staff"}
               for j in range(i, min(i + 1000, n))]
    open(f"{d}/seed-{i // 1000:05d}.json", "w").write(json.dumps({"devices": devices}))
PY
  "$bin/apns-server" --config "$work/apns-server.yaml" >"$work/seed-$n.out" 2>"$work/seed-$n.err" &
  server=$!
  wait_healthy "$base" "$server" "$work/seed-$n.err" || exit 1
  for f in "$work"/seed-*.json; do
    curl -sf -X POST "$base/v1/device-tokens" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" \
      --data-binary @"$f" >/dev/null
  done
  rm -f "$work"/seed-*.json
  kill -TERM "$server"; wait "$server" || true; server=

  LD_PRELOAD="$work/drain.so" valgrind --tool=callgrind --callgrind-out-file="$work/fanout-$n.cg" \
    "$work/apns-server" --config "$work/apns-server.yaml" >"$work/server-$n.out" 2>"$work/server-$n.err" &
  server=$!
  wait_healthy "$base" "$server" "$work/server-$n.err" 600 || exit 1
  local reply id
  reply=$(curl -sf -X POST "$base/v1/notifications" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" \
    -d '{"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid","app_type":"staff","company_id":"bench","alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default"}') || {
    echo "callgrind-fanout: the POST failed: $(tail -5 "$work/server-$n.err")" >&2; exit 1; }
  while [ "$(depth "$db")" != 0 ]; do
    kill -0 "$server" 2>/dev/null || { echo "callgrind-fanout: the server exited: $(tail -5 "$work/server-$n.err")" >&2; exit 1; }
    sleep 1
  done
  id=$(printf '%s' "$reply" | python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])')
  local delivered
  delivered=$(curl -sf "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["delivered"])')
  kill -TERM "$server"; wait "$server" || true; server=
  [ "$delivered" = "$n" ] || { echo "callgrind-fanout: $delivered of $n delivered" >&2; exit 1; }
  total "$work/fanout-$n.cg"
}

a=$(fanout "$n1")
b=$(fanout "$n2")
awk -v a="$a" -v b="$b" -v n1="$n1" -v n2="$n2" \
  'BEGIN {printf "apns-server Ir(%d) %.0f  Ir(%d) %.0f  instructions per fan-out delivery %.0f\n", n1, a, n2, b, (b - a) / (n2 - n1)}'
