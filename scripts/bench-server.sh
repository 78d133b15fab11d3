#!/usr/bin/env bash
# Benchmark apns-server against apns-send on the same apns-mock: one notification
# fanned out to N stored devices (company fan-out, every delivery logged in SQLite)
# vs apns-send with the same tokens and payload. Median of RUNS; peak RSS of each.
#   Usage: scripts/bench-server.sh [BIN_DIR] [N=100000] [RUNS=3]
# BIN_DIR defaults to the release build (swift build -c release).
set -euo pipefail
bin=${1:-$(swift build -c release --show-bin-path)}
n=${2:-100000}; runs=${3:-3}
dir=$(mktemp -d /tmp/apns-bench-server.XXXXXX)
trap 'kill $server $mock 2>/dev/null; wait $server $mock 2>/dev/null || true; rm -rf "$dir"' EXIT
server=; mock=
scripts/gen-pki.sh "$dir/pki"
. "$dir/pki/ids.env"
. "$(dirname "$0")/lib/mock.sh"
. "$(dirname "$0")/lib/server-config.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
peak_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

"$bin/apns-mock" --port 0 --cert "$dir/pki/server.crt" --key "$dir/pki/server.key" \
  --auth-key "$dir/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$dir/mock.out" 2>"$dir/mock.err" &
mock=$!
mock_port=$(mock_port "$dir/mock.out" "$dir/mock.err" $mock) || exit 1

api_key=$(openssl rand -hex 24); echo "$api_key" >"$dir/api-keys"; openssl rand -hex 32 >"$dir/user-jwt.secret"
chmod 600 "$dir/api-keys" "$dir/user-jwt.secret"
port=$(free_port); base=http://127.0.0.1:$port
server_config "$port" "sqlite:$dir/apns.db" "$mock_port" >"$dir/apns-server.yaml"
"$bin/apns-server" --config "$dir/apns-server.yaml" 2>"$dir/server.err" &
server=$!
for _ in $(seq 100); do curl -sf "$base/health" >/dev/null 2>&1 && break; sleep 0.1; done

# N distinct tokens, one user each (the costliest fan-out: one preference and
# device look-up per user), seeded 1000 a request through the bulk path.
python3 - "$n" "$dir" <<'PY'
import json, random, sys
n, d = int(sys.argv[1]), sys.argv[2]
rng = random.Random(42)
tokens = ["%064x" % rng.getrandbits(256) for _ in range(n)]
open(f"{d}/tokens.txt", "w").write("\n".join(tokens) + "\n")
for i in range(0, n, 1000):
    devices = [{"user_id": f"u{j}", "company_id": "bench", "deviceToken": tokens[j], "platform": "ios", "appType": "staff"}
               for j in range(i, min(i + 1000, n))]
    open(f"{d}/seed-{i // 1000:05d}.json", "w").write(json.dumps({"devices": devices}))
PY
start=$(date +%s.%N)
for f in "$dir"/seed-*.json; do
  curl -sf -X POST "$base/v1/device-tokens" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" \
    --data-binary @"$f" >/dev/null
done
echo "seeded $n devices in $(python3 -c "import time; print(round(time.time() - $start, 1))") s"

payload='{"aps":{"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default"},"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid"}'
echo "$payload" >"$dir/payload.json"
# From the database: the /metrics gauge is counted on its own clock and can be
# older than the POST that just returned.
depth() { python3 -c "import sqlite3; print(sqlite3.connect('$dir/apns.db', timeout=30).execute('SELECT count(*) FROM outbox').fetchone()[0])"; }

service_rates=()
for r in $(seq "$runs"); do
  t0=$(date +%s.%N)
  reply=$(curl -s -X POST "$base/v1/notifications" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" \
    -d '{"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid","app_type":"staff","company_id":"bench","alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default"}')
  t1=$(date +%s.%N)
  while [ "$(depth)" != "0" ]; do sleep 0.05; done
  t2=$(date +%s.%N)
  id=$(printf '%s' "$reply" | python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])')
  delivered=$(curl -s "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["delivered"])')
  rate=$(python3 -c "print(round($n / ($t2 - $t0)))")
  echo "apns-server run $r: $delivered/$n delivered and logged; enqueue $(python3 -c "print(round($t1 - $t0, 2))") s, total $(python3 -c "print(round($t2 - $t0, 2))") s: $rate/s"
  service_rates+=("$rate")
done
server_rss=$(peak_kb $server)
kill -TERM $server; wait $server; server=

send_rates=(); send_rss=()
for r in $(seq "$runs"); do
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$dir/time.out" "$bin/apns-send" --topic "$TOPIC" --key "$dir/pki/AuthKey_$KEY_ID.p8" \
    --key-id "$KEY_ID" --team-id "$TEAM_ID" --endpoint "https://127.0.0.1:$mock_port" --cacert "$dir/pki/ca.pem" \
    --output "$dir/records.jsonl" "$dir/payload.json" "$dir/tokens.txt" 2>/dev/null || true
  t2=$(date +%s.%N)
  rate=$(python3 -c "print(round($n / ($t2 - $t0)))")
  echo "apns-send run $r: $(wc -l <"$dir/records.jsonl") records in $(python3 -c "print(round($t2 - $t0, 2))") s: $rate/s"
  send_rates+=("$rate"); send_rss+=("$(tail -1 "$dir/time.out")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
s=$(median "${service_rates[@]}"); c=$(median "${send_rates[@]}")
echo
echo "| $n devices, one notification | deliveries/s (median of $runs) | peak RSS |"
echo "|---|---|---|"
echo "| apns-server (fan-out, outbox, SQLite log) | $s | $((server_rss / 1024)) MiB |"
echo "| apns-send (same tokens, same mock) | $c | $(( $(median "${send_rss[@]}") / 1024 )) MiB |"
echo "ratio apns-server / apns-send: $(python3 -c "print(round($s / $c, 2))") (goal >= 0.5)"
