#!/usr/bin/env bash
# `make bench`: h2load, apns-send (end to end: tokens file in, JSON Lines out) and
# apns-bench (the library alone) against the same apns-mock, in one session, taking
# turns (A B A B ...) for ROUNDS rounds; prints medians and each one's ratio to h2load.
#
#   scripts/bench.sh                 full run, 11-13 min on 2 cores
#   QUICK=1 scripts/bench.sh         one round of 100k (libcurl rows 10k): ~40 s
#   BENCH_N=N ROUNDS=R               the headline row's N (others scale down) and rounds
#   APNS_BIN=DIR                     use these release binaries instead of building
#   NO_PEERS=1                       skip aioapns (it is pip-installed into .build-bench)
#
# Configurations: 1 connection x 100 streams, 1 x 1000, 2 x 1000, and 1 x 1000 with the
# mock answering after 50 ms; nghttp2 transport (the default here) and libcurl. Every
# run's figures land in out/bench/runs.tsv (out/bench-quick/ with QUICK), the summary beside it.
# Everything is on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ -n "${QUICK:-}" ]; then
  n_head=${BENCH_N:-100000} rounds=${ROUNDS:-1} n_peer=5000
else
  n_head=${BENCH_N:-1000000} rounds=${ROUNDS:-3} n_peer=20000
fi
# The other rows: 30% of the headline's N, the libcurl rows 10% (libcurl is ~8x slower),
# the 50 ms row 20% (it runs at ~streams/RTT whatever the client).
n_other=$((n_head * 3 / 10)) n_curl=$((n_head / 10)) n_latency=$((n_head / 5))

out="$root/out/bench${QUICK:+-quick}"
mkdir -p "$out"
work=$(mktemp -d /tmp/apns-bench.XXXXXX)
mocks=()
cleanup() {
  for pid in "${mocks[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${mocks[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- binaries, key material, inputs -------------------------------------------------------
if [ -z "${APNS_BIN:-}" ]; then
  swift build -c release --scratch-path .build-bench --product apns-mock >&2
  swift build -c release --scratch-path .build-bench --product apns-send >&2
  swift build -c release --scratch-path .build-bench --product apns-bench >&2
  APNS_BIN="$root/.build-bench/release"
fi
bash scripts/gen-pki.sh "$work/pki"
. "$work/pki/ids.env"
key="$work/pki/AuthKey_$KEY_ID.p8"

# The payload apns-bench sends by default: 232 bytes compact.
. "$root/scripts/lib/send-inputs.sh"
bench_payload "$work/payload.json"

. scripts/lib/jwt.sh
. "$(dirname "$0")/lib/mock.sh"
jwt=$(es256_jwt "$key" "$KEY_ID" "$TEAM_ID")

# Distinct tokens, one per line, as many as the biggest run; smaller files are its head.
n_tokens=$((n_head > 100000 ? n_head : 100000))
bench_tokens "$work/tokens-$n_tokens.txt" "$n_tokens"
for n in "$n_head" "$n_other" "$n_curl" "$n_latency" 100000; do
  [ -f "$work/tokens-$n.txt" ] || head -n "$n" "$work/tokens-$n_tokens.txt" >"$work/tokens-$n.txt"
done

# Not in a $(...) subshell: the pid must reach `mocks` so that cleanup stops the mock.
start_mock() {  # start_mock NAME [FLAGS...]: sets $port
  local name=$1
  shift
  "$APNS_BIN/apns-mock" --port 0 --cert "$work/pki/server.crt" --key "$work/pki/server.key" \
    --auth-key "$key" --team-id "$TEAM_ID" --topic "$TOPIC" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  mocks+=($!)
  port=$(mock_port "$work/$name.out" "$work/$name.err" "${mocks[-1]}") || exit 1
}
start_mock fast
port_fast=$port
start_mock slow --latency 50ms
port_slow=$port

# --- one measured run ---------------------------------------------------------------------
# Each run appends one line to runs.tsv: config tool transport round n req/s wall user sys
# rss_kb connections jwts p50_ms p99_ms ok. CPU and RSS are the whole process's
# (/usr/bin/time), the same way for every tool.
runs="$out/runs.tsv"
printf 'config\ttool\ttransport\tround\tn\treq_s\twall_s\tuser_s\tsys_s\trss_kb\tconnections\tjwts\tp50_ms\tp99_ms\tok\n' >"$runs"

timed() {  # timed CMD...: runs it; "wall user sys rss_kb" end $work/time, stdout in $work/stdout
  # A failed run is reported and recorded (its "ok" column says so), not fatal to the session.
  /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$@" >"$work/stdout" 2>"$work/stderr" || {
    echo "exit status $? from: $*" >&2
    tail -3 "$work/stderr" >&2
  }
}

record() {  # record CONFIG TOOL TRANSPORT ROUND N REQ_S CONNS JWTS P50 P99 OK
  read -r wall user sys rss < <(tail -1 "$work/time")
  local rate=$6
  [ "$rate" = "-" ] && rate=$(awk -v n="$5" -v w="$wall" 'BEGIN {printf "%.1f", n / w}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$1" "$2" "$3" "$4" "$5" "$rate" "$wall" "$user" "$sys" "$rss" "$7" "$8" "$9" "${10}" "${11}" | tee -a "$runs" >&2
}

run_h2load() {  # CONFIG ROUND PORT C M N
  timed h2load -c"$4" -m"$5" -n"$6" -d "$work/payload.json" -H "authorization: bearer $jwt" \
    -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
    "https://127.0.0.1:$3/3/device/$(printf 'ab%.0s' $(seq 32))"
  local rate ok lat
  rate=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$work/stdout")
  ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$work/stdout")
  # h2load prints mean latency only (min max mean sd): the mean goes in the p50 column, marked.
  lat=$(awk '/^time for request:/ {v = $6; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
    printf "%.2f", v * (u == "us" ? 0.001 : u == "s" ? 1000 : 1)}' "$work/stdout")
  record "$1" h2load - "$2" "$6" "$rate" "$4" 1 "mean:$lat" - "$([ "$ok" = "$6" ] && echo yes || echo "no:$ok")"
}

run_send() {  # CONFIG ROUND PORT C M N TRANSPORT [TOOL]
  # A fresh output file (see bench-send-ab.sh: overwriting the last round's costs the
  # run the old file's truncation and, on ext4, a flush at close).
  rm -f "$work/results.jsonl"
  timed "$APNS_BIN/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
    --endpoint "https://127.0.0.1:$3" --cacert "$work/pki/ca.pem" --transport "$7" \
    --connections "$4" --concurrency "$5" --output "$work/results.jsonl" \
    "$work/payload.json" "$work/tokens-$6.txt"
  local ok conns jwts
  ok=$(grep -c '"status":200' "$work/results.jsonl" || true)
  conns=$(sed -n 's/.*connections opened \([0-9]*\).*/\1/p' "$work/stderr" | tail -1)
  jwts=$(sed -n 's/.*JWTs signed \([0-9]*\).*/\1/p' "$work/stderr" | tail -1)
  record "$1" "${8:-apns-send}" "$7" "$2" "$6" - "${conns:--}" "${jwts:--}" - - \
    "$([ "$ok" = "$6" ] && echo yes || echo "no:$ok")"
}

bench_fields() {  # apns-bench's --json report in $work/stdout -> "rate conns jwts p50 p99 ok" in $work/fields
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency_us"]
print("%.1f %d %d %.2f %.2f %s" % (d["req_per_s"], d["connections_opened"], d["jwt_signatures"],
      l["p50"] / 1000, l["p99"] / 1000, "yes" if d["succeeded"] == d["requests"] else "no:%d" % d["succeeded"]))
' "$work/stdout" >"$work/fields" 2>/dev/null || echo "0 - - - - failed" >"$work/fields"
}

run_bench() {  # CONFIG ROUND PORT C M N TRANSPORT
  timed "$APNS_BIN/apns-bench" -n "$6" --connections "$4" --streams "$5" --transport "$7" \
    --endpoint "https://127.0.0.1:$3" --pki "$work/pki" --json
  bench_fields
  read -r rate conns jwts p50 p99 ok <"$work/fields"
  record "$1" apns-bench "$7" "$2" "$6" "$rate" "$conns" "$jwts" "$p50" "$p99" "$ok"
}

run_engine() {  # CONFIG ROUND PORT N CALLERS: the library on 1 x 1000, one batch read in a detached
  # task (CALLERS -) or on the main actor as a main.swift's top-level loop (CALLERS main), or
  # per-event single sends from CALLERS concurrent callers, each with its own payload (issue 9)
  local extra=() tool=engine-batch
  if [ "$5" = "main" ]; then extra=(--loop main); tool=engine-batch-main
  elif [ "$5" != "-" ]; then extra=(--callers "$5"); tool="singles-$5"; fi
  timed "$APNS_BIN/apns-bench" -n "$4" --connections 1 --streams 1000 --transport nghttp2 \
    --endpoint "https://127.0.0.1:$3" --pki "$work/pki" --json "${extra[@]}"
  bench_fields
  read -r rate conns jwts p50 p99 ok <"$work/fields"
  record "$1" "$tool" nghttp2 "$2" "$4" "$rate" "$conns" "$jwts" "$p50" "$p99" "$ok"
}

# --- aioapns, a peer (pip-installed at benchmark time, never committed) -------------------
peer_python=""
if [ -z "${NO_PEERS:-}" ]; then
  venv="$root/.build-bench/aioapns-venv"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import aioapns' 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q aioapns >&2 || echo "aioapns: pip install failed; no peer row" >&2
  fi
  "$venv/bin/python" -c 'import aioapns' 2>/dev/null && peer_python="$venv/bin/python"
fi

run_peer() {  # CONFIG ROUND PORT C M N
  timed "$peer_python" scripts/bench-aioapns.py --port "$3" --pki "$work/pki" --connections "$4" \
    --concurrency "$5" --requests "$6"
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency_us"]
print("%.1f %.2f %.2f %s" % (d["req_per_s"], l["p50"] / 1000, l["p99"] / 1000,
      "yes" if d["succeeded"] == d["requests"] else "no:%d" % d["succeeded"]))
' "$work/stdout" >"$work/fields" 2>/dev/null || echo "0 - - failed" >"$work/fields"
  read -r rate p50 p99 ok <"$work/fields"
  record "$1" aioapns - "$2" "$6" "$rate" "$4" - "$p50" "$p99" "$ok"
}

# --- the session --------------------------------------------------------------------------
# config port connections streams n(h2load, nghttp2) n(curl)
configs=(
  "c1x1000 $port_fast 1 1000 $n_head $n_curl"
  "c1x100 $port_fast 1 100 $n_other $n_curl"
  "c2x1000 $port_fast 2 1000 $n_other $n_curl"
  "c1x1000-50ms $port_slow 1 1000 $n_latency $n_curl"
)
echo "apns-bench session: $rounds round(s); N = $n_head (c1x1000), $n_other (c1x100, c2x1000)," \
  "$n_latency (50 ms), $n_curl (every libcurl row), aioapns $n_peer" >&2
for round in $(seq "$rounds"); do
  for config in "${configs[@]}"; do
    read -r name port c m n ncurl <<<"$config"
    run_h2load "$name" "$round" "$port" "$c" "$m" "$n"
    run_send "$name" "$round" "$port" "$c" "$m" "$n" nghttp2
    run_bench "$name" "$round" "$port" "$c" "$m" "$n" nghttp2
    run_send "$name" "$round" "$port" "$c" "$m" "$ncurl" curl
    run_bench "$name" "$round" "$port" "$c" "$m" "$ncurl" curl
  done
  # The event-driven engine: 100k per-event single sends (1,000 and 20,000 callers) against
  # the 100k batch, read in a task and on the main actor, taking turns, on the fast mock and
  # at 50 ms (50k there).
  for engine in "engine $port_fast 100000" "engine-50ms $port_slow 50000"; do
    read -r name port n <<<"$engine"
    for callers in - main 1000 20000; do run_engine "$name" "$round" "$port" "$n" "$callers"; done
  done
  # Memory: the same CLI run on 100k tokens, beside the headline's N.
  run_send c1x1000 "$round" "$port_fast" 1 1000 100000 nghttp2 apns-send-100k
  if [ -n "$peer_python" ]; then
    run_peer c1x100 "$round" "$port_fast" 1 100 "$n_peer"
    run_peer c1x1000 "$round" "$port_fast" 1 1000 "$n_peer"
  fi
done

# --- header bytes: each client's HPACK request header blocks once its connection is warm ----
# A fresh mock per client counts them (past each connection's first 100 requests) and writes
# its statistics on SIGUSR1. h2load sends one path (one token) every time, ours a new token
# each, as real sends do; nghttp2 indexes neither :path nor authorization, so both go in
# full with every request. The rest of our difference is the apns-id, a new value each time.
header_bytes() {  # TOOL: one run of TOOL on 1 x 100 to a mock of its own; prints "TOOL bytes/request"
  start_mock "hdr-$1" --stats "$work/hdr-$1.json"
  local p=$port pid=${mocks[-1]} n=20000
  case $1 in
    h2load) h2load -c1 -m100 -n"$n" -d "$work/payload.json" -H "authorization: bearer $jwt" \
      -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' \
      "https://127.0.0.1:$p/3/device/$(printf 'ab%.0s' $(seq 32))" >/dev/null 2>&1 ;;
    apns-send) head -n "$n" "$work/tokens-100000.txt" >"$work/tokens-hdr.txt"
      "$APNS_BIN/apns-send" --topic "$TOPIC" --key "$key" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
      --endpoint "https://127.0.0.1:$p" --cacert "$work/pki/ca.pem" --concurrency 100 --output /dev/null \
      "$work/payload.json" "$work/tokens-hdr.txt" 2>/dev/null ;;
    apns-bench) "$APNS_BIN/apns-bench" -n "$n" --streams 100 --endpoint "https://127.0.0.1:$p" --pki "$work/pki" \
      --json >/dev/null 2>&1 ;;
  esac
  rm -f "$work/hdr-$1.json"
  kill -USR1 "$pid"
  for _ in $(seq 50); do [ -s "$work/hdr-$1.json" ] && break; sleep 0.1; done
  python3 -c '
import json, sys
h = json.load(open(sys.argv[1]))["header_blocks"]
print("%-10s %7.1f bytes/request warm (%d requests), %7.1f over all %d" % (sys.argv[2],
      h["warm_bytes"] / max(1, h["warm_count"]), h["warm_count"], h["bytes"] / max(1, h["count"]), h["count"]))
' "$work/hdr-$1.json" "$1" || echo "$1: no statistics"
}
echo "HPACK request header bytes (mock-counted, after each connection's first 100 requests):" >"$out/header-bytes.txt"
for tool in h2load apns-send apns-bench; do header_bytes "$tool" >>"$out/header-bytes.txt"; done

python3 scripts/bench-summary.py "$runs" | tee "$out/summary.txt"
cat "$out/header-bytes.txt"
