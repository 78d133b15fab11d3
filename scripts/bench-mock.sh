#!/usr/bin/env bash
# Benchmark of apns-mock with h2load: one connection, 1000 concurrent streams,
# a ~250-byte payload and a real ES256 provider token, validation on.
#   scripts/bench-mock.sh [RUNS] [REQUESTS]     (defaults: 3 runs of 200000)
# Env: APNS_MOCK (binary; default: release build in .build-bench), MOCK_ARGS (extra flags).
# Prints each run's req/s and the median. Loopback only.
set -euo pipefail
runs=${1:-3}
requests=${2:-200000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/bench-mock.XXXXXX)
trap 'kill "${mock_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

if [ -z "${APNS_MOCK:-}" ]; then
  (cd "$root" && swift build -c release --scratch-path .build-bench --product apns-mock >&2)
  APNS_MOCK="$root/.build-bench/release/apns-mock"
fi
bash "$root/scripts/gen-pki.sh" "$work/pki"
. "$work/pki/ids.env"

. "$root/scripts/lib/jwt.sh"
jwt=$(es256_jwt "$work/pki/AuthKey_$KEY_ID.p8" "$KEY_ID" "$TEAM_ID")

python3 -c 'import json; print(json.dumps({"aps": {"alert": {"title": "Order update", "body": "x" * 150},
  "sound": "default"}, "id": 12345}))' >"$work/payload.json"
token=$(printf 'ab%.0s' $(seq 32))

"$APNS_MOCK" --port 0 --cert "$work/pki/server.crt" --key "$work/pki/server.key" \
  --auth-key "$work/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" \
  --stats "$work/stats.json" ${MOCK_ARGS:-} >"$work/out" &
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out")
echo "apns-mock on port $port, payload $(wc -c <"$work/payload.json") bytes, $requests requests x $runs runs" >&2

rates=()
for run in $(seq "$runs"); do
  out=$(h2load -c1 -m1000 -n"$requests" -d "$work/payload.json" \
    -H "authorization: bearer $jwt" -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
    "https://127.0.0.1:$port/3/device/$token")
  rate=$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
  echo "run $run: $rate req/s; $(echo "$out" | grep -E '^(requests|status codes):' | tr '\n' ' ')"
  rates+=("$rate")
done
printf '%s\n' "${rates[@]}" | sort -n | awk '{a[NR]=$1} END {print "median: " a[int((NR+1)/2)] " req/s"}'
# The mock's own CPU per request: a figure that holds when other work shares the cores.
ticks=$(awk '{print $14 + $15}' "/proc/$mock_pid/stat")
awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v n="$((runs * requests))" \
  'BEGIN {us = t / hz * 1e6 / n; printf "mock CPU: %.2f us/request (one core: %.0f req/s)\n", us, 1e6 / us}'
kill -INT "$mock_pid"; wait "$mock_pid" || true; mock_pid=
echo "mock statistics: $(cat "$work/stats.json")"
