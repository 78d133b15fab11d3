#!/usr/bin/env bash
# Two builds of apns-bench against one apns-mock, taking turns: for a change whose effect is
# smaller than this machine's noise (a `make bench` row can swing ±20% between sessions).
# Each round runs A and B on every workload, the order flipped every other round; the
# verdict is the median of the per-round ratios B/A, with how many rounds B came out lower.
#
#   scripts/bench-ab.sh DIR_A DIR_B [ROUNDS] [WORKLOADS]
#
# DIR_A, DIR_B: folders holding a release apns-bench (DIR_A's apns-mock serves both).
# ROUNDS: default 16. WORKLOADS: space-separated, "batch" or a caller count (--callers N);
# default "batch 1000 20000". Each run is 100k notifications on 1 connection x 1000 streams;
# CPU is the client's own (apns-bench's report), the mock's is read from /proc.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
  echo "usage: scripts/bench-ab.sh DIR_A DIR_B [ROUNDS] [WORKLOADS] (two folders of release binaries)" >&2
  exit 2
fi
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd)
rounds=${3:-16} workloads=${4:-batch 1000 20000}
for dir in "$a" "$b"; do
  [ -x "$dir/apns-bench" ] || { echo "bench-ab: no apns-bench in $dir" >&2; exit 2; }
done
[ -x "$a/apns-mock" ] || { echo "bench-ab: no apns-mock in $a" >&2; exit 2; }

. "$root/scripts/lib/mock.sh"
work=$(mktemp -d /tmp/apns-bench-ab.XXXXXX)
mock=
trap 'test_mock_cleanup "$work"' EXIT

start_test_mock "$a/apns-mock" "$work"

mock_cpu() { awk '{print $14 + $15}' "/proc/$mock/stat"; }   # clock ticks, user + sys

run() {  # run LABEL DIR ROUND WORKLOAD: appends one line to runs.tsv
  local extra=() before after
  [ "$4" != batch ] && extra=(--callers "$4")
  before=$(mock_cpu)
  "$2/apns-bench" -n 100000 --connections 1 --streams 1000 --endpoint "https://127.0.0.1:$port" \
    --pki "$work/pki" --json "${extra[@]}" >"$work/run.json"
  after=$(mock_cpu)
  python3 - "$work/run.json" "$1" "$3" "$4" "$((after - before))" "$(getconf CLK_TCK)" >>"$work/runs.tsv" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
label, rnd, workload, ticks, hz = sys.argv[2:7]
assert report["succeeded"] == report["requests"], f"{label} {workload}: not every request succeeded"
mock_ms = int(ticks) * 1000 / int(hz) / (report["requests"] / 1000)
print("\t".join(map(str, [label, rnd, workload, report["req_per_s"], report["cpu_ms_per_1k"], mock_ms,
                          report["peak_rss_bytes"] / 1e6])))
PY
}

for r in $(seq "$rounds"); do
  order="A B"
  [ $((r % 2)) = 1 ] && order="B A"
  for w in $workloads; do
    for label in $order; do
      dir=$a
      [ "$label" = B ] && dir=$b
      run "$label" "$dir" "$r" "$w"
    done
  done
  echo "round $r of $rounds" >&2
done

python3 - "$work/runs.tsv" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    label, rnd, workload, rate, cpu, mock, rss = line.rstrip("\n").split("\t")
    runs[(workload, rnd)][label] = (float(rate), float(cpu), float(mock), float(rss))
print("workload   rounds | A: req/s  CPU ms/1k  mock ms/1k  RSS MB | B: the same | B/A paired: CPU  req/s")
for workload in dict.fromkeys(w for w, _ in runs):
    pairs = [v for (w, _), v in runs.items() if w == workload and len(v) == 2]
    med = lambda label, i: statistics.median(p[label][i] for p in pairs)
    cpu = [p["B"][1] / p["A"][1] for p in pairs]
    rate = [p["B"][0] / p["A"][0] for p in pairs]
    print("%-8s %8d | %8.0f %10.2f %11.2f %7.1f | %8.0f %10.2f %11.2f %7.1f | %.3f (lower in %d of %d)  %.3f" % (
        workload, len(pairs), med("A", 0), med("A", 1), med("A", 2), med("A", 3),
        med("B", 0), med("B", 1), med("B", 2), med("B", 3),
        statistics.median(cpu), sum(x < 1 for x in cpu), len(cpu), statistics.median(rate)))
PY
