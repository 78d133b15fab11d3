#!/usr/bin/env bash
# Benchmark apns-server against apns-send on the same apns-mock: one notification
# fanned out to N stored devices (company fan-out, every delivery logged in SQLite)
# vs apns-send with the same tokens and payload. Median of RUNS; peak RSS of each; CPU
# per delivery of each (and of the mock); the server's first delivery after the POST
# and after its 202; bytes of database each delivery leaves (log, outbox, payloads).
#   Usage: scripts/bench-server.sh [BIN_DIR] [N=100000] [RUNS=3]
# BIN_DIR defaults to the release build (swift build -c release).
# BENCH_SERVER_FEATURES=1: the same with what a backend turns on: every POST carries an
# Idempotency-Key, and signed webhooks (token.deactivated, delivery.failed,
# notification.completed) go to a local receiver while 1 % of the tokens are
# unregistered (410), for both tools alike. Run it alternately with and without,
# and compare the ratios to apns-send, each taken in its own run.
set -euo pipefail
bin=${1:-$(swift build -c release --show-bin-path)}
n=${2:-100000}; runs=${3:-3}
dir=$(mktemp -d /tmp/apns-bench-server.XXXXXX)
trap 'kill $server $mock $receiver 2>/dev/null; wait $server $mock $receiver 2>/dev/null || true; rm -rf "$dir"' EXIT
server=; mock=; receiver=
features=${BENCH_SERVER_FEATURES:-0}
scripts/gen-pki.sh "$dir/pki"
. "$dir/pki/ids.env"
. "$(dirname "$0")/lib/mock.sh"
. "$(dirname "$0")/lib/server-config.sh"
. "$(dirname "$0")/lib/server.sh"
peak_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }  # utime + stime

# N distinct tokens, one user each (the costliest fan-out: one preference and
# device look-up per user), seeded 1000 a request through the bulk path.
python3 - "$n" "$dir" <<'PY'
import json, random, sys, time
n, d = int(sys.argv[1]), sys.argv[2]
rng = random.Random(42)
tokens = ["%064x" % rng.getrandbits(256) for _ in range(n)]
open(f"{d}/tokens.txt", "w").write("\n".join(tokens) + "\n")
# Unregistered after they are seeded (APNs' timestamp later than the registration), so
# each 410 deactivates its token.
later = int((time.time() + 3600) * 1000)
open(f"{d}/unregistered.txt", "w").write("".join(f"{t},{later}\n" for t in tokens[::100]))
for i in range(0, n, 1000):
    devices = [{"user_id": f"u{j}", "company_id": "bench", "deviceToken": tokens[j], "platform": "ios", "appType": "staff"}
               for j in range(i, min(i + 1000, n))]
    open(f"{d}/seed-{i // 1000:05d}.json", "w").write(json.dumps({"devices": devices}))
PY
mock_args=()
[ "$features" = 1 ] && mock_args=(--unregistered "$dir/unregistered.txt")
"$bin/apns-mock" --port 0 --cert "$dir/pki/server.crt" --key "$dir/pki/server.key" "${mock_args[@]}" --stats "$dir/mock-stats.json" \
  --auth-key "$dir/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$dir/mock.out" 2>"$dir/mock.err" &
mock=$!
mock_port=$(mock_port "$dir/mock.out" "$dir/mock.err" $mock) || exit 1

api_key=$(openssl rand -hex 24); echo "$api_key" >"$dir/api-keys"; openssl rand -hex 32 >"$dir/user-jwt.secret"
chmod 600 "$dir/api-keys" "$dir/user-jwt.secret"
port=$(free_port); base=http://127.0.0.1:$port
server_config "$port" "sqlite:$dir/apns.db" "$mock_port" >"$dir/apns-server.yaml"
idempotency=()
if [ "$features" = 1 ]; then
  # The receiver answers every event at once and counts them (one line each).
  hook_port=$(free_port)
  python3 - "$hook_port" "$dir/events.log" <<'PY' &
import http.server, sys
log = open(sys.argv[2], "a", buffering=1)
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        log.write(self.headers.get("APNs-Server-Event-Type", "event") + "\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
PY
  receiver=$!
  openssl rand -hex 32 >"$dir/webhook.secret"
  cat >>"$dir/apns-server.yaml" <<YAML
webhooks:
  - url: http://127.0.0.1:$hook_port/hooks/apns
    secret_file: webhook.secret
    events: [token.deactivated, delivery.failed, notification.completed]
YAML
fi
"$bin/apns-server" --config "$dir/apns-server.yaml" 2>"$dir/server.err" &
server=$!
wait_healthy "$base" $server "$dir/server.err" || exit 1

start=$(date +%s.%N)
for f in "$dir"/seed-*.json; do
  curl -sf -X POST "$base/v1/device-tokens" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" \
    --data-binary @"$f" >/dev/null
done
echo "seeded $n devices in $(python3 -c "import time; print(round(time.time() - $start, 1))") s"

payload='{"aps":{"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default"},"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid"}'
echo "$payload" >"$dir/payload.json"

# What the log and the outbox leave in the database: its size (pages in use and free,
# the WAL's included, as a reader sees it) before the fan-outs and after them.
db_bytes() {
  python3 -c 'import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(c.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").fetchone()[0])' "$dir/apns.db"
}
db0=$(db_bytes)

service_rates=(); first_after_post=(); first_after_202=()
# CPU of the fan-outs alone (the seeding left out), the server's and the mock's.
server_cpu0=$(cpu_s $server); mock_cpu0=$(cpu_s $mock)
for r in $(seq "$runs"); do
  [ "$features" = 1 ] && idempotency=(-H "Idempotency-Key: bench-$r-$(openssl rand -hex 8)")
  # The end is read from the database (the /metrics gauge is counted on its own
  # clock), by one watcher connected before the clock starts.
  outbox_watch "sqlite:$dir/apns.db"
  # The first delivery APNs (the mock) answers: how soon the sending starts.
  python3 "$(dirname "$0")/lib/first_answer.py" $mock "$dir/mock-stats.json" >"$dir/first.out" &
  first_watch=$!
  until grep -q ready "$dir/first.out" 2>/dev/null; do sleep 0.01; done
  t0=$(date +%s.%N)
  reply=$(curl -s -X POST "$base/v1/notifications" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" "${idempotency[@]}" \
    -d '{"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid","app_type":"staff","company_id":"bench","alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default"}')
  t1=$(date +%s.%N)
  t2=$(outbox_emptied)
  wait $first_watch; first=$(sed -n 2p "$dir/first.out")
  id=$(printf '%s' "$reply" | python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])')
  delivered=$(curl -s "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["delivered"])')
  rate=$(python3 -c "print(round($n / ($t2 - $t0)))")
  after_post=$(python3 -c "print(round($first - $t0, 3))"); after_202=$(python3 -c "print(round($first - $t1, 3))")
  echo "apns-server run $r: $delivered/$n delivered and logged; enqueue $(python3 -c "print(round($t1 - $t0, 2))") s, total $(python3 -c "print(round($t2 - $t0, 2))") s: $rate/s;" \
    "first delivery $after_post s after the POST ($after_202 s after its 202)"
  service_rates+=("$rate"); first_after_post+=("$after_post"); first_after_202+=("$after_202")
done
db1=$(db_bytes)
server_rss=$(peak_kb $server)
# The server's own CPU time over the seeding and every run.
server_cpu=$(cpu_s $server)
fanout_cpu=$(python3 -c "print($server_cpu - $server_cpu0)"); fanout_mock_cpu=$(python3 -c "print($(cpu_s $mock) - $mock_cpu0)")
kill -TERM $server; wait $server; server=

send_rates=(); send_rss=(); send_cpu=0
mock_cpu0=$(cpu_s $mock)
for r in $(seq "$runs"); do
  rm -f "$dir/records.jsonl"  # a fresh file, as in bench-send-ab.sh
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M %U %S" -o "$dir/time.out" "$bin/apns-send" --topic "$TOPIC" --key "$dir/pki/AuthKey_$KEY_ID.p8" \
    --key-id "$KEY_ID" --team-id "$TEAM_ID" --endpoint "https://127.0.0.1:$mock_port" --cacert "$dir/pki/ca.pem" \
    --output "$dir/records.jsonl" "$dir/payload.json" "$dir/tokens.txt" 2>/dev/null || true
  t2=$(date +%s.%N)
  rate=$(python3 -c "print(round($n / ($t2 - $t0)))")
  echo "apns-send run $r: $(wc -l <"$dir/records.jsonl") records in $(python3 -c "print(round($t2 - $t0, 2))") s: $rate/s"
  read -r rss user sys < <(tail -1 "$dir/time.out")
  send_rates+=("$rate"); send_rss+=("$rss"); send_cpu=$(python3 -c "print($send_cpu + $user + $sys)")
done
send_mock_cpu=$(python3 -c "print($(cpu_s $mock) - $mock_cpu0)")
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
s=$(median "${service_rates[@]}"); c=$(median "${send_rates[@]}")
echo
echo "| $n devices, one notification | deliveries/s (median of $runs) | peak RSS |"
echo "|---|---|---|"
label="apns-server (fan-out, outbox, SQLite log)"
[ "$features" = 1 ] && label="apns-server (fan-out, outbox, SQLite log; idempotency key, webhooks, 1 % unregistered)"
echo "| $label | $s | $((server_rss / 1024)) MiB |"
echo "| apns-send (same tokens, same mock) | $c | $(( $(median "${send_rss[@]}") / 1024 )) MiB |"
echo "ratio apns-server / apns-send: $(python3 -c "print(round($s / $c, 2))") (goal >= 0.6)"
echo "apns-server CPU: $server_cpu s over the seeding and $runs fan-outs"
# Both are CPU-bound on a small machine: what each delivery costs, and the mock's share.
per() { python3 -c "print(round($1 * 1e6 / ($runs * $n), 1))"; }
echo "CPU per delivery: apns-server $(per "$fanout_cpu") µs (mock $(per "$fanout_mock_cpu") µs);" \
  "apns-send $(per "$send_cpu") µs (mock $(per "$send_mock_cpu") µs)"
echo "first delivery (median of $runs): $(median "${first_after_post[@]}") s after the POST," \
  "$(median "${first_after_202[@]}") s after its 202 (negative: before it)"
echo "database per delivery: $(python3 -c "print(round(($db1 - $db0) / ($runs * $n)))") bytes" \
  "(the file grew from $(( db0 / 1048576 )) to $(( db1 / 1048576 )) MiB over the $runs fan-outs)"
if [ "$features" = 1 ]; then
  sleep 2  # the last notification.completed is sent on the webhook worker's next poll
  echo "webhook events received: $(wc -l <"$dir/events.log") ($(sort "$dir/events.log" | uniq -c | awk '{printf "%s %s; ", $2, $1}'))"
fi
