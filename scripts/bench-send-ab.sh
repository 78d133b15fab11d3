#!/usr/bin/env bash
# Builds of apns-send against h2load on one apns-mock, taking turns: each round runs h2load
# (1 connection x 1000 streams, the payload of `make bench`) and apns-send from each
# folder on the same N distinct tokens, in an order that rotates from round to round,
# and prints each one's rate and its ratio to that round's h2load. The summary gives the medians, the per-round ratios' median and
# quartiles, and each build's paired ratio to the first one, with how many rounds it won.
# For a change to apns-send smaller than this machine's noise. The per-round median also
# comes with a 95 % bootstrap interval (the rounds resampled 10,000 times, a fixed
# seed): how far the median itself could move with other rounds, which narrows with
# more rounds while the quartiles (one round's spread) do not.
#
#   scripts/bench-send-ab.sh [ROUNDS] [N] DIR...     (defaults 20 and 100000)
#
# DIR: folders holding a release apns-send (the first one's apns-mock serves them all).
# Rates: N over the whole process's wall time for apns-send (start, reading tokens,
# writing JSON Lines), h2load's own figure for h2load, as in `make bench`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=20 n=100000
[[ ${1:-} =~ ^[0-9]+$ ]] && { rounds=$1; shift; }
[[ ${1:-} =~ ^[0-9]+$ ]] && { n=$1; shift; }
if [ $# -lt 1 ]; then
  echo "usage: scripts/bench-send-ab.sh [ROUNDS] [N] DIR... (folders of release binaries)" >&2
  exit 2
fi
dirs=()
for d in "$@"; do
  [ -x "$d/apns-send" ] || { echo "bench-send-ab: no apns-send in $d" >&2; exit 2; }
  dirs+=("$(cd "$d" && pwd)")
done
[ -x "${dirs[0]}/apns-mock" ] || { echo "bench-send-ab: no apns-mock in ${dirs[0]}" >&2; exit 2; }

. "$root/scripts/lib/mock.sh"
work=$(mktemp -d /tmp/apns-bench-send-ab.XXXXXX)
mock=
trap 'test_mock_cleanup "$work"' EXIT

. "$root/scripts/lib/jwt.sh"
start_test_mock "${dirs[0]}/apns-mock" "$work" || exit 1
key="$work/pki/AuthKey_$KEY_ID.p8"
jwt=$(es256_jwt "$key" "$KEY_ID" "$TEAM_ID")
. "$root/scripts/lib/send-inputs.sh"
send_inputs "$work" "$n"

echo "round h2load $(for d in "${dirs[@]}"; do printf '%s ' "$d"; done)" >"$work/rounds"
run_h2load() {
  h2load -c1 -m1000 -n"$n" -d "$work/payload.json" -H "authorization: bearer $jwt" \
    -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
    "https://127.0.0.1:$port/3/device/$(printf 'ab%.0s' $(seq 32))" |
    sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p'
}
run_send() {
  local d=$1 start
  start=$(date +%s%N)
  "$d/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --endpoint "https://127.0.0.1:$port" --cacert "$work/pki/ca.pem" --connections 1 --concurrency 1000 \
    --output "$work/records.jsonl" "$work/payload.json" "$work/tokens.txt" 2>"$work/send.err" ||
    { echo "bench-send-ab: apns-send from $d failed: $(tail -1 "$work/send.err")" >&2; exit 1; }
  python3 -c "print(round($n / (($(date +%s%N) - $start) / 1e9)))"
}
# Each round starts one place further along (h2load, build 1, build 2, ..., then round
# again): a tool that always ran right after the same other one would carry that
# position's bias (the mock's state, the caches) into every ratio.
tools=$((${#dirs[@]} + 1))
for round in $(seq "$rounds"); do
  rates=()
  for k in $(seq 0 $((tools - 1))); do
    t=$(((round - 1 + k) % tools))
    if [ "$t" = 0 ]; then rates[0]=$(run_h2load); else rates[$t]=$(run_send "${dirs[$((t - 1))]}"); fi
    # A run that failed printed why and no rate (its exit ended only the substitution).
    [[ ${rates[$t]} =~ ^[0-9.]+$ ]] || { echo "bench-send-ab: round $round gave no rate" >&2; exit 1; }
  done
  line="$round ${rates[*]}"
  echo "$line" | tee -a "$work/rounds" | awk '{printf "round %s: h2load %.0f/s", $1, $2; for (i = 3; i <= NF; i++) printf "; %s %.0f/s (%.3f x)", i - 2, $i, $i / $2; print ""}' >&2
done

python3 - "$work/rounds" <<'PY'
import random, statistics as st, sys
lines = open(sys.argv[1]).read().split("\n")
dirs = lines[0].split()[2:]
rows = [[float(x) for x in l.split()[1:]] for l in lines[1:] if l.strip()]
h = [r[0] for r in rows]
q = lambda xs: st.quantiles(xs) if len(xs) > 1 else [xs[0]] * 3
def interval(xs, draws=10_000):
    rng = random.Random(1)
    medians = sorted(st.median(rng.choices(xs, k=len(xs))) for _ in range(draws))
    return medians[int(draws * 0.025)], medians[int(draws * 0.975) - 1]
print(f"{len(rows)} rounds of h2load, then each build; medians:")
print(f"  h2load  {st.median(h):9.0f}/s")
for i, d in enumerate(dirs):
    x = [r[i + 1] for r in rows]
    ratios = [a / b for a, b in zip(x, h)]
    qs = q(ratios)
    lo, hi = interval(ratios)
    line = (f"  {i + 1}  {st.median(x):9.0f}/s  {st.median(x) / st.median(h):.3f} x h2load by medians, "
            f"per-round {st.median(ratios):.3f} (quartiles {qs[0]:.3f}-{qs[2]:.3f}; "
            f"the median's 95 % interval {lo:.3f}-{hi:.3f})")
    if i > 0:
        base = [r[1] for r in rows]
        paired = [a / b for a, b in zip(x, base)]
        line += f"; paired {st.median(paired):.3f} x build 1, faster in {sum(p > 1 for p in paired)} of {len(rows)}"
    print(line + f"  [{d}]")
PY
