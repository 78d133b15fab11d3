#!/usr/bin/env bash
# The nghttp2 transport against h2load on the same apns-mock: one connection, 1000
# streams, the same ~250-byte payload, topic and (valid ES256) provider token.
#   scripts/bench-h2.sh [RUNS] [REQUESTS]     (defaults: 3 runs of 200000, alternating)
# Env: APNS_MOCK (binary; default: release build in .build-bench), CC (default cc).
# Prints each run's req/s and the ratio of the medians. Loopback only.
set -euo pipefail
runs=${1:-3}
requests=${2:-200000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/bench-h2.XXXXXX)
trap 'kill "${mock_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

if [ -z "${APNS_MOCK:-}" ]; then
  (cd "$root" && swift build -c release --scratch-path .build-bench --product apns-mock >&2)
  APNS_MOCK="$root/.build-bench/release/apns-mock"
fi
c="$root/Sources/CAPNs"
${CC:-cc} -O2 -D_GNU_SOURCE -I"$c/include" -I"$c" "$root/scripts/h2-drive.c" \
  "$c"/*.c \
  -lnghttp2 -lssl -lcrypto -lpthread -o "$work/h2-drive"
bash "$root/scripts/gen-pki.sh" "$work/pki"
. "$work/pki/ids.env"

. "$root/scripts/lib/jwt.sh"
jwt=$(es256_jwt "$work/pki/AuthKey_$KEY_ID.p8" "$KEY_ID" "$TEAM_ID")

. "$root/scripts/lib/send-inputs.sh"
bench_payload "$work/payload.json"
token=$(printf 'ab%.0s' $(seq 32))

"$APNS_MOCK" --port 0 --cert "$work/pki/server.crt" --key "$work/pki/server.key" \
  --auth-key "$work/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$work/out" &
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out")
echo "apns-mock on port $port, payload $(wc -c <"$work/payload.json") bytes, $requests requests x $runs runs" >&2

ours=() theirs=()
for run in $(seq "$runs"); do
  out=$(h2load -c1 -m1000 -n"$requests" -d "$work/payload.json" \
    -H "authorization: bearer $jwt" -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
    "https://127.0.0.1:$port/3/device/$token")
  rate=$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
  echo "run $run h2load:    $rate req/s; $(echo "$out" | grep -E '^status codes:')"
  theirs+=("$rate")
  out=$(KEY="$work/pki/AuthKey_$KEY_ID.p8" KEY_ID=$KEY_ID TEAM_ID=$TEAM_ID TOPIC=$TOPIC \
    PAYLOAD="$work/payload.json" "$work/h2-drive" 127.0.0.1 "$port" "$work/pki/ca.pem" "$requests" 4000 1 h2)
  rate=$(echo "$out" | sed -n 's/.* = \([0-9]*\) req\/s.*/\1/p')
  echo "run $run transport: $rate req/s; $(echo "$out" | grep -E 'status 200|peak_streams' | tr -s ' ' | tr '\n' ' ')"
  ours+=("$rate")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m_ours=$(median "${ours[@]}") m_theirs=$(median "${theirs[@]}")
echo "median: transport $m_ours req/s, h2load $m_theirs req/s, ratio $(awk "BEGIN {printf \"%.2f\", $m_ours / $m_theirs}")"
kill -INT "$mock_pid"; wait "$mock_pid" || true; mock_pid=
