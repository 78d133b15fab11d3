#!/usr/bin/env bash
# Counts apns-send's CPU instructions per notification with callgrind, a figure that
# does not depend on the machine's load: apns-send (1 connection x 1000 streams) sends
# N1 and then N2 distinct tokens to an apns-mock that runs outside valgrind, and
#   instructions per notification = (Ir(N2) - Ir(N1)) / (N2 - N1)
# which leaves out what a run costs whatever its size (start-up, TLS, the JWT).
#
#   scripts/callgrind-send.sh [BIN_DIR]   release binaries (default .build/release);
#                                         builds nothing: `swift build -c release
#                                         --product apns-send` and `--product apns-mock`
#   N1=20000 N2=50000                     the two runs' sizes
#   H2LOAD=1                              counts h2load the same way, for reference
#   KEEP=DIR                              keeps the profiles there, for callgrind_annotate
#
# Two things valgrind 3.19 needs here: it cannot read the DWARF Swift 6 writes, so
# apns-send runs as a copy without debug sections (objcopy --strip-debug; symbols stay);
# and it stops once libdispatch's dispatch_main() parks the main thread in
# pthread_exit, so a small preloaded library replaces dispatch_main() with a loop that
# drains the main queue on the main thread, as CoreFoundation's run loop does. Both
# are for this measurement only; the binaries are used as they are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/.build/release}" && pwd)
n1=${N1:-20000} n2=${N2:-50000}
. "$(dirname "$0")/lib/require.sh"
need_tools callgrind-send valgrind callgrind_annotate objcopy cc python3
need_binaries callgrind-send "$bin" apns-send apns-mock

work=$(mktemp -d /tmp/callgrind-send.XXXXXX)
mock=
cleanup() {
  [ -n "$mock" ] && kill -INT "$mock" 2>/dev/null && wait "$mock" 2>/dev/null
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.cg "$KEEP"/ 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

bash "$root/scripts/gen-pki.sh" "$work/pki"
. "$work/pki/ids.env"
key="$work/pki/AuthKey_$KEY_ID.p8"
# The bench's payload and tokens.
. "$root/scripts/lib/send-inputs.sh"
bench_payload "$work/payload.json"
for n in "$n1" "$n2"; do bench_tokens "$work/tokens-$n.txt" "$n"; done

cc -O2 -shared -fPIC -o "$work/drain.so" "$root/scripts/lib/dispatch-main-drain.c"
objcopy --strip-debug "$bin/apns-send" "$work/apns-send"

. "$root/scripts/lib/mock.sh"
"$bin/apns-mock" --port 0 --cert "$work/pki/server.crt" --key "$work/pki/server.key" \
  --auth-key "$key" --team-id "$TEAM_ID" --topic "$TOPIC" >"$work/mock.out" 2>"$work/mock.err" &
mock=$!
port=$(mock_port "$work/mock.out" "$work/mock.err" "$mock")

total() {  # total PROFILE: its instruction count
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

send() {  # send N: Ir of apns-send sending N tokens; every record must say 200
  LD_PRELOAD="$work/drain.so" valgrind --tool=callgrind --callgrind-out-file="$work/send-$1.cg" \
    "$work/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --endpoint "https://127.0.0.1:$port" --cacert "$work/pki/ca.pem" --transport nghttp2 \
    --connections 1 --concurrency 1000 --output "$work/results.jsonl" \
    "$work/payload.json" "$work/tokens-$1.txt" >/dev/null 2>"$work/send-$1.err" || {
    echo "callgrind-send: apns-send failed:" >&2
    tail -5 "$work/send-$1.err" >&2
    exit 1
  }
  local ok
  ok=$(grep -c '"status":200' "$work/results.jsonl" || true)
  [ "$ok" = "$1" ] || { echo "callgrind-send: $ok of $1 records say 200" >&2; exit 1; }
  total "$work/send-$1.cg"
}

h2load_ir() {  # h2load_ir N: Ir of h2load sending N requests with the same headers and payload
  . "$root/scripts/lib/jwt.sh"
  local jwt
  jwt=$(es256_jwt "$key" "$KEY_ID" "$TEAM_ID")
  valgrind --tool=callgrind --callgrind-out-file="$work/h2load-$1.cg" \
    h2load -c1 -m1000 -n"$1" -d "$work/payload.json" -H "authorization: bearer $jwt" \
    -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
    "https://127.0.0.1:$port/3/device/$(printf 'ab%.0s' $(seq 32))" >"$work/h2load-$1.out" 2>"$work/h2load-$1.err"
  grep -q "status codes: $1 2xx" "$work/h2load-$1.out" || { echo "callgrind-send: h2load failed" >&2; exit 1; }
  total "$work/h2load-$1.cg"
}

per() {  # per NAME IR1 IR2
  awk -v name="$1" -v a="$2" -v b="$3" -v n1="$n1" -v n2="$n2" \
    'BEGIN {printf "%-9s Ir(%d) %.0f  Ir(%d) %.0f  instructions per notification %.0f\n", name, n1, a, n2, b, (b - a) / (n2 - n1)}'
}

a=$(send "$n1")
b=$(send "$n2")
per apns-send "$a" "$b"
if [ -n "${H2LOAD:-}" ]; then
  a=$(h2load_ir "$n1")
  b=$(h2load_ir "$n2")
  per h2load "$a" "$b"
fi
