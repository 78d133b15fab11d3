#!/usr/bin/env bash
# What the rates of scripts/bench-send-ab.sh include. Each round, on one apns-mock:
# h2load -n1 and apns-send with one token (each one's fixed cost, by wall time), then
# h2load and apns-send on N tokens. The summary gives apns-send ÷ h2load three ways:
# as bench-send-ab counts it (h2load's own "finished in", apns-send's wall time), both
# by wall time, and apns-send's wall time less its one-token run.
#
#   scripts/bench-send-startup.sh DIR [ROUNDS] [N]     (defaults 12 and 200000)
#
# DIR: a folder holding release apns-send and apns-mock.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] && [ -x "$1/apns-send" ] && [ -x "$1/apns-mock" ] ||
  { echo "usage: scripts/bench-send-startup.sh DIR [ROUNDS] [N] (DIR: release apns-send and apns-mock)" >&2; exit 2; }
bin=$(cd "$1" && pwd) rounds=${2:-12} n=${3:-200000}
. "$root/scripts/lib/mock.sh"
. "$root/scripts/lib/jwt.sh"
work=$(mktemp -d /tmp/apns-bench-startup.XXXXXX)
mock=
trap 'test_mock_cleanup "$work"' EXIT
start_test_mock "$bin/apns-mock" "$work" || exit 1
key="$work/pki/AuthKey_$KEY_ID.p8"
jwt=$(es256_jwt "$key" "$KEY_ID" "$TEAM_ID")
. "$root/scripts/lib/send-inputs.sh"
send_inputs "$work" "$n"
head -n 1 "$work/tokens.txt" >"$work/one.txt"

h2() {
  h2load -c1 -m1000 -n"$1" -d "$work/payload.json" -H "authorization: bearer $jwt" \
    -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' "https://127.0.0.1:$port/3/device/$(printf 'ab%.0s' $(seq 32))"
}
send() {
  "$bin/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --endpoint "https://127.0.0.1:$port" --cacert "$work/pki/ca.pem" --connections 1 --concurrency 1000 \
    --output "$work/records.jsonl" "$work/payload.json" "$1" 2>"$work/send.err" ||
    { echo "bench-send-startup: apns-send failed: $(tail -1 "$work/send.err")" >&2; exit 1; }
}
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

echo "round h2load_1_wall_ms send_1_wall_ms h2load_N_own_ms h2load_N_wall_ms send_N_wall_ms" >"$work/rounds"
for round in $(seq "$rounds"); do
  t=$(date +%s%N); h2 1 >/dev/null; h1=$(ms "$t")
  t=$(date +%s%N); send "$work/one.txt"; s1=$(ms "$t")
  t=$(date +%s%N); out=$(h2 "$n"); hw=$(ms "$t")
  hs=$(echo "$out" | sed -n 's/^finished in \([0-9.]*\)\(m\{0,1\}s\),.*/\1 \2/p' | awk '{print ($2 == "s") ? $1 * 1000 : $1}')
  t=$(date +%s%N); send "$work/tokens.txt"; sw=$(ms "$t")
  echo "$round $h1 $s1 $hs $hw $sw" | tee -a "$work/rounds" >&2
done

python3 - "$work/rounds" <<'PY'
import statistics as st, sys
rows = [[float(x) for x in l.split()[1:]] for l in open(sys.argv[1]).read().split("\n")[1:] if l.strip()]
h1, s1, hs, hw, sw = zip(*rows)
q = lambda v: st.quantiles(v) if len(v) > 1 else [v[0]] * 3
def line(name, v):
    qs = q(v)
    print(f"  {name}: {st.median(v):.3f} (quartiles {qs[0]:.3f}-{qs[2]:.3f})")
print(f"{len(rows)} rounds; one notification by wall time: h2load {st.median(h1):.0f} ms, apns-send {st.median(s1):.0f} ms")
print(f"h2load's wall time less its own figure: {st.median([w - o for o, w in zip(hs, hw)]):.1f} ms")
print("apns-send / h2load, medians of the per-round ratios:")
line("as bench-send-ab counts it (h2load's own time, apns-send's wall time)", [o / s for o, s in zip(hs, sw)])
line("both by wall time", [w / s for w, s in zip(hw, sw)])
less = [o / (s - one) for o, s, one in zip(hs, sw, s1) if s > one]   # N too small: the start is all there is
if less:
    line("apns-send's wall time less its one-token run, h2load's own time", less)
PY
