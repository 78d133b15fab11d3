# What the rates of scripts/bench-send-ab.sh include, on one apns-mock, in two parts:
#  1. each one's fixed cost: 2×ROUNDS rounds of h2load -n1 and each build's apns-send
#     with one token, by wall time;
#  2. ROUNDS rounds of h2load and each build's apns-send on N tokens.
# Builds take turns in both orders (odd rounds first to last, even rounds last to
# first), so none always runs right after h2load or after another build; the one-token
# runs come first, apart, so that none follows a run of N (the mock still busy with it).
# The summary gives, per build, apns-send ÷ h2load three ways: as bench-send-ab counts
# it (h2load's own "finished in", apns-send's wall time), both by wall time, and
# apns-send's wall time less its median one-token run; with two builds or more, each
# one's runs against the first's, per round.
#
#   scripts/bench-send-startup.sh [ROUNDS] [N] DIR...     (defaults 12 and 200000)
#
# DIR: a folder holding release apns-send (the first DIR's apns-mock serves all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=12 n=200000
[[ ${1:-} =~ ^[0-9]+$ ]] && { rounds=$1; shift; }
[[ ${1:-} =~ ^[0-9]+$ ]] && { n=$1; shift; }
usage="usage: scripts/bench-send-startup.sh [ROUNDS] [N] DIR... (each DIR: release apns-send; the first also apns-mock)"
[ $# -ge 1 ] && [ -x "$1/apns-mock" ] || { echo "$usage" >&2; exit 2; }
bins=()
for dir in "$@"; do
  [ -x "$dir/apns-send" ] || { echo "$usage" >&2; exit 2; }
  bins+=("$(cd "$dir" && pwd)")
done
bin=${bins[0]}
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
send() {  # BIN TOKENS
  "$1/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --endpoint "https://127.0.0.1:$port" --cacert "$work/pki/ca.pem" --connections 1 --concurrency 1000 \
    --output "$work/records.jsonl" "$work/payload.json" "$2" 2>"$work/send.err" ||
    { echo "bench-send-startup: apns-send failed: $(tail -1 "$work/send.err")" >&2; exit 1; }
}
ms() { awk -v from="$1" -v to="$(date +%s%N)" 'BEGIN { printf "%.2f", (to - from) / 1e6 }'; }

# order ROUND: the builds' indexes, first to last in odd rounds, last to first in even ones.
order() { local i; if (( $1 % 2 )); then for i in "${!bins[@]}"; do echo "$i"; done
          else for (( i = ${#bins[@]} - 1; i >= 0; i-- )); do echo "$i"; done; fi; }
# Once each, untimed: the binaries' pages in the cache, the mock's first connection.
h2 1 >/dev/null
for b in "${!bins[@]}"; do send "${bins[$b]}" "$work/one.txt"; done
echo "round build h2load_1_wall_ms send_1_wall_ms" >"$work/ones"
for round in $(seq $(( 2 * rounds ))); do
  t=$(date +%s%N); h2 1 >/dev/null; h1=$(ms "$t")
  for b in $(order "$round"); do
    t=$(date +%s%N); send "${bins[$b]}" "$work/one.txt"; echo "$round $b $h1 $(ms "$t")" >>"$work/ones"
  done
done
echo "round build h2load_N_own_ms h2load_N_wall_ms send_N_wall_ms" >"$work/rounds"
for round in $(seq "$rounds"); do
  t=$(date +%s%N); out=$(h2 "$n"); hw=$(ms "$t")
  hs=$(echo "$out" | sed -n 's/^finished in \([0-9.]*\)\(m\{0,1\}s\),.*/\1 \2/p' | awk '{print ($2 == "s") ? $1 * 1000 : $1}')
  for b in $(order "$round"); do
    t=$(date +%s%N); send "${bins[$b]}" "$work/tokens.txt"; sw=$(ms "$t")
    echo "$round $b $hs $hw $sw" | tee -a "$work/rounds" >&2
  done
done

python3 - "$work/ones" "$work/rounds" "${bins[@]}" <<'PY'
import statistics as st, sys
def table(path):
    rows = [l.split() for l in open(path).read().split("\n")[1:] if l.strip()]
    return lambda b: [[float(x) for x in r[2:]] for r in rows if int(r[1]) == b]
ones, runs, builds = table(sys.argv[1]), table(sys.argv[2]), sys.argv[3:]
q = lambda v: st.quantiles(v) if len(v) > 1 else [v[0]] * 3
def line(name, v, digits=3):
    qs = q(v)
    print(f"  {name}: {st.median(v):.{digits}f} (quartiles {qs[0]:.{digits}f}-{qs[2]:.{digits}f})")
for b, path in enumerate(builds):
    h1, s1 = zip(*ones(b))
    hs, hw, sw = zip(*runs(b))
    one = st.median(s1)
    print(f"{path}: {len(s1)} one-token rounds, {len(sw)} rounds of N")
    line("one notification, wall ms: h2load", h1, 1)
    line("one notification, wall ms: apns-send", s1, 1)
    print(f"  h2load's wall time less its own figure: {st.median([w - o for o, w in zip(hs, hw)]):.1f} ms")
    print("  apns-send / h2load, medians of the per-round ratios:")
    line("as bench-send-ab counts it (h2load's own time, apns-send's wall time)", [o / s for o, s in zip(hs, sw)])
    line("both by wall time", [w / s for w, s in zip(hw, sw)])
    if all(s > one for s in sw):   # N too small: the start is all there is
        line("apns-send's wall time less its median one-token run, h2load's own time", [o / (s - one) for o, s in zip(hs, sw)])
    if b > 0:
        first = builds[0]
        line(f"one-token run against {first}'s, per round", [x[1] / y[1] for x, y in zip(ones(b), ones(0))])
        line(f"N-token run against {first}'s, per round (time)", [x[2] / y[2] for x, y in zip(runs(b), runs(0))])
PY
