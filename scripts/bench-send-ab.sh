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
#   OWN_MOCK=1                                       each DIR's apns-send on DIR's own
#                                                    apns-mock, beside an h2load run on that
#                                                    mock: for a change to the mock too
#
# DIR: folders holding a release apns-send (the first one's apns-mock serves them all,
# unless OWN_MOCK=1).
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
# The mocks: one for all, or one a build (mock_of: a build's index -> its mock's).
own=${OWN_MOCK:-0}
mocks=1
[ "$own" = 1 ] && mocks=${#dirs[@]}
for ((i = 0; i < mocks; i++)); do
  [ -x "${dirs[$i]}/apns-mock" ] || { echo "bench-send-ab: no apns-mock in ${dirs[$i]}" >&2; exit 2; }
done
mock_of() { if [ "$own" = 1 ]; then echo "$1"; else echo 0; fi; }

. "$root/scripts/lib/mock.sh"
work=$(mktemp -d /tmp/apns-bench-send-ab.XXXXXX)
mock=
others=()
trap 'for p in "${others[@]}"; do kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; test_mock_cleanup "$work"' EXIT

. "$root/scripts/lib/jwt.sh"
start_test_mock "${dirs[0]}/apns-mock" "$work" || exit 1
ports=("$port")
for ((i = 1; i < mocks; i++)); do   # the same key material as the first
  "${dirs[$i]}/apns-mock" --port 0 --cert "$work/pki/server.crt" --key "$work/pki/server.key" \
    --auth-key "$work/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" \
    >"$work/mock-$i.out" 2>"$work/mock-$i.err" &
  others+=($!)
  ports+=("$(mock_port "$work/mock-$i.out" "$work/mock-$i.err" "${others[-1]}")") || exit 1
done
key="$work/pki/AuthKey_$KEY_ID.p8"
jwt=$(es256_jwt "$key" "$KEY_ID" "$TEAM_ID")
. "$root/scripts/lib/send-inputs.sh"
send_inputs "$work" "$n"

# A round's line: its number, h2load's rate on each mock, then each build's.
echo "round $mocks $(for d in "${dirs[@]}"; do printf '%s ' "$d"; done)" >"$work/rounds"
run_h2load() {  # MOCK
  h2load -c1 -m1000 -n"$n" -d "$work/payload.json" -H "authorization: bearer $jwt" \
    -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
    "https://127.0.0.1:${ports[$1]}/3/device/$(printf 'ab%.0s' $(seq 32))" |
    sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p'
}
run_send() {  # BUILD
  local d=${dirs[$1]} start
  # A fresh output file, as a run usually writes: truncating the last round's 40 MB
  # (O_TRUNC) frees its page cache inside apns-send's open, and ext4 then flushes the
  # rewritten file at close (auto_da_alloc), about 20 ms of the run for neither tool's work.
  rm -f "$work/records.jsonl"
  start=$(date +%s%N)
  "$d/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --endpoint "https://127.0.0.1:${ports[$(mock_of "$1")]}" --cacert "$work/pki/ca.pem" --connections 1 --concurrency 1000 \
    --output "$work/records.jsonl" "$work/payload.json" "$work/tokens.txt" 2>"$work/send.err" ||
    { echo "bench-send-ab: apns-send from $d failed: $(tail -1 "$work/send.err")" >&2; exit 1; }
  python3 -c "print(round($n / (($(date +%s%N) - $start) / 1e9)))"
}
# Each round starts one place further along (h2load on each mock, build 1, build 2, ...,
# then round again): a tool that always ran right after the same other one would carry
# that position's bias (the mock's state, the caches) into every ratio.
runs=$((mocks + ${#dirs[@]}))
for round in $(seq "$rounds"); do
  rates=()
  for k in $(seq 0 $((runs - 1))); do
    t=$(((round - 1 + k) % runs))
    if [ "$t" -lt "$mocks" ]; then rates[$t]=$(run_h2load "$t"); else rates[$t]=$(run_send $((t - mocks))); fi
    # A run that failed printed why and no rate (its exit ended only the substitution).
    [[ ${rates[$t]} =~ ^[0-9.]+$ ]] || { echo "bench-send-ab: round $round gave no rate" >&2; exit 1; }
  done
  line="$round ${rates[*]}"
  echo "$line" | tee -a "$work/rounds" | awk -v m="$mocks" -v own="$own" '{
    printf "round %s:", $1
    for (i = 1; i <= m; i++) printf " h2load %.0f/s;", $(i + 1)
    for (b = 1; b <= NF - 1 - m; b++) { h = own == 1 ? $(b + 1) : $2; printf " %s %.0f/s (%.3f x)", b, $(b + m + 1), $(b + m + 1) / h }
    print "" }' >&2
done

python3 - "$work/rounds" <<'PY'
import random, statistics as st, sys
lines = open(sys.argv[1]).read().split("\n")
mocks = int(lines[0].split()[1])
dirs = lines[0].split()[2:]
rows = [[float(x) for x in l.split()[1:]] for l in lines[1:] if l.strip()]
h = [r[0] for r in rows]
# Each build's h2load: its own mock's, or the one mock's.
h_of = lambda i: [r[i if mocks > 1 else 0] for r in rows]
q = lambda xs: st.quantiles(xs) if len(xs) > 1 else [xs[0]] * 3
def interval(xs, draws=10_000):
    rng = random.Random(1)
    medians = sorted(st.median(rng.choices(xs, k=len(xs))) for _ in range(draws))
    return medians[int(draws * 0.025)], medians[int(draws * 0.975) - 1]
print(f"{len(rows)} rounds of h2load, then each build" + (", each on its own mock" if mocks > 1 else "") + "; medians:")
for m in range(mocks):
    print(f"  h2load  {st.median(h_of(m)):9.0f}/s" + (f"  on build {m + 1}'s mock" if mocks > 1 else ""))
ratios_of = []
for i, d in enumerate(dirs):
    x = [r[mocks + i] for r in rows]
    hi_ = h_of(i)
    ratios = [a / b for a, b in zip(x, hi_)]
    ratios_of.append(ratios)
    qs = q(ratios)
    lo, hi = interval(ratios)
    line = (f"  {i + 1}  {st.median(x):9.0f}/s  {st.median(x) / st.median(hi_):.3f} x h2load by medians, "
            f"per-round {st.median(ratios):.3f} (quartiles {qs[0]:.3f}-{qs[2]:.3f}; "
            f"the median's 95 % interval {lo:.3f}-{hi:.3f})")
    if i > 0:
        # Of the ratios when each build has its own mock (the mocks differ), else of the rates.
        base = ratios_of[0] if mocks > 1 else [r[mocks] for r in rows]
        mine = ratios if mocks > 1 else x
        paired = [a / b for a, b in zip(mine, base)]
        plo, phi = interval(paired)
        line += (f"; paired {st.median(paired):.3f} x build 1 (95 % interval {plo:.3f}-{phi:.3f}), "
                 f"higher in {sum(p > 1 for p in paired)} of {len(rows)}")
    print(line + f"  [{d}]")
PY
