#!/usr/bin/env bash
# Benchmark apns-server scale-out (issue #11): 1, 2 and 3 instances sharing one
# PostgreSQL, each with its own HTTP/2 connection to one apns-mock that answers after
# 50 ms and allows 100 streams per connection (so one connection tops out near
# 100 / 0.05 s = 2,000/s, as a real APNs connection is bound by round trips). One
# notification fanned out to N stored devices (company fan-out) per round; the rate is
# N / (request to an empty outbox), and the sending rate N / (202 to an empty outbox):
# the fan-out and its enqueue run on the one instance that took the request, the
# sending on all. Median of RUNS; the SQLite single instance beside it; the claim
# query's server time per delivery from pg_stat_statements; beside each, the instances'
# CPU per delivery, the first delivery after the POST and after its 202, and the bytes
# of database each delivery leaves.
#   Usage: scripts/bench-scaleout.sh [BIN_DIR] [N=30000] [RUNS=3]
# BIN_DIR defaults to the release build (swift build -c release). BATCH sets
# worker.batch_size (default 250: small claims keep the instances' tails even).
set -euo pipefail
bin=${1:-$(swift build -c release --show-bin-path)}
n=${2:-30000}; runs=${3:-3}; batch=${BATCH:-250}
dir=$(mktemp -d /tmp/apns-bench-scaleout.XXXXXX)
chmod 755 "$dir"  # the postgres user reaches its data folder through it
servers=(); mock=; pgbin=
cleanup() {
  for p in "${servers[@]}" $mock; do kill "$p" 2>/dev/null || true; done
  for p in "${servers[@]}" $mock; do wait "$p" 2>/dev/null || true; done
  [ -n "$pgbin" ] && as_pg "$pgbin/pg_ctl" stop -D "$dir/pg/data" -m fast -s >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
scripts/gen-pki.sh "$dir/pki" >/dev/null
. "$dir/pki/ids.env"
. "$(dirname "$0")/lib/mock.sh"
. "$(dirname "$0")/lib/server-config.sh"
. "$(dirname "$0")/lib/server.sh"
now() { date +%s.%N; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }  # utime + stime
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# PostgreSQL: a throw-away cluster on 127.0.0.1 (trust, nothing else can reach it),
# run as the postgres user when we are root (it refuses root). Default durability.
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/initdb" ] || { echo "PostgreSQL is not installed (make deps installs it)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir "$dir/pg"; [ "$(id -u)" = 0 ] && chown postgres: "$dir/pg"
as_pg "$pgbin/initdb" -D "$dir/pg/data" -U apns -A trust -E UTF8 --locale=C --no-instructions >/dev/null
pg_port=$(free_port)
as_pg tee -a "$dir/pg/data/postgresql.conf" >/dev/null <<CONF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$dir/pg'
max_connections = 200
shared_buffers = 256MB
shared_preload_libraries = 'pg_stat_statements'
CONF
as_pg "$pgbin/pg_ctl" start -D "$dir/pg/data" -l "$dir/pg/server.log" -w -s
export PSQL=$pgbin/psql  # for the outbox watcher
psql() { "$pgbin/psql" -h 127.0.0.1 -p "$pg_port" -U apns -X -q -t -A "$@"; }
psql -d postgres -c "CREATE DATABASE bench" && psql -d bench -c "CREATE EXTENSION pg_stat_statements"
db_url="postgres://apns@127.0.0.1:$pg_port/bench?sslmode=disable"

"$bin/apns-mock" --port 0 --cert "$dir/pki/server.crt" --key "$dir/pki/server.key" --latency 50ms --max-streams 100 \
  --stats "$dir/mock-stats.json" \
  --auth-key "$dir/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$dir/mock.out" 2>"$dir/mock.err" &
mock=$!
mock_port=$(mock_port "$dir/mock.out" "$dir/mock.err" $mock) || exit 1
api_key=$(openssl rand -hex 24); echo "$api_key" >"$dir/api-keys"; openssl rand -hex 32 >"$dir/user-jwt.secret"
chmod 600 "$dir/api-keys" "$dir/user-jwt.secret"

# start_server NAME DATABASE: one instance, its port in $port once it answers.
start_server() {
  port=$(free_port)
  server_config "$port" "$2" "$mock_port" "$batch" >"$dir/$1.yaml"
  "$bin/apns-server" --config "$dir/$1.yaml" 2>"$dir/$1.err" &
  servers+=($!)
  wait_healthy "http://127.0.0.1:$port" $! "$dir/$1.err" || exit 1
}
stop_servers() {
  for p in "${servers[@]}"; do kill -TERM "$p"; done
  for p in "${servers[@]}"; do wait "$p" || { echo "an apns-server exited $?" >&2; exit 1; }; done
  servers=()
}

# N devices, one user each, 1000 a request through the bulk path.
python3 - "$n" "$dir" <<'PY'
import json, random, sys
n, d = int(sys.argv[1]), sys.argv[2]
rng = random.Random(42)
for i in range(0, n, 1000):
    devices = [{"user_id": f"u{j}", "company_id": "bench", "deviceToken": "%064x" % rng.getrandbits(256),
                "platform": "ios", "appType": "staff"} for j in range(i, min(i + 1000, n))]
    open(f"{d}/seed-{i // 1000:05d}.json", "w").write(json.dumps({"devices": devices}))
PY
seed() {
  for f in "$dir"/seed-*.json; do
    curl -sf -X POST "http://127.0.0.1:$1/v1/device-tokens" -H "Authorization: Bearer $api_key" \
      -H "Content-Type: application/json" --data-binary @"$f" >/dev/null
  done
}

# The database's size: SQLite's pages (in use and free) or PostgreSQL's database.
store_bytes() {
  case $1 in
    sqlite:*) python3 -c 'import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(c.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").fetchone()[0])' "${1#sqlite:}" ;;
    *) psql -d bench -c "SELECT pg_database_size('bench')" ;;
  esac
}

# rounds PORT STORE: RUNS rounds through the instance on PORT; the rates in
# $rates (from the request) and $sends (from the 202: the outbox committed); the
# first delivery the mock answered, after the POST and after the 202, in $firsts
# and $firsts_202; the instances' CPU and the database's bytes a delivery in $cpu
# and $bytes.
rounds() {
  rates=(); sends=(); firsts=(); firsts_202=()
  local store=$3 bytes0 cpu0=0 cpu1=0 p
  bytes0=$(store_bytes "$store")
  for p in "${servers[@]}"; do cpu0=$(python3 -c "print($cpu0 + $(cpu_s "$p"))"); done
  for r in $(seq "$runs"); do
    outbox_watch "$2"
    python3 "$(dirname "$0")/lib/first_answer.py" $mock "$dir/mock-stats.json" >"$dir/first.out" &
    local first_watch=$!
    until grep -q ready "$dir/first.out" 2>/dev/null; do sleep 0.01; done
    t0=$(now)
    reply=$(curl -sf -X POST "http://127.0.0.1:$1/v1/notifications" -H "Authorization: Bearer $api_key" \
      -H "Content-Type: application/json" \
      -d '{"type":"order_status_changed","entity_type":"order","entity_id":"o1","app_type":"staff","company_id":"bench","alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1}')
    t1=$(now)
    t2=$(outbox_emptied)
    wait $first_watch; first=$(sed -n 2p "$dir/first.out")
    id=$(printf '%s' "$reply" | python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])')
    delivered=$(curl -s "http://127.0.0.1:$1/v1/notifications/$id?limit=1" -H "Authorization: Bearer $api_key" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["delivered"])')
    [ "$delivered" = "$n" ] || { echo "round $r: $delivered of $n delivered" >&2; exit 1; }
    rate=$(python3 -c "print(round($n / ($t2 - $t0)))"); send=$(python3 -c "print(round($n / ($t2 - $t1)))")
    firsts+=("$(python3 -c "print(round($first - $t0, 3))")"); firsts_202+=("$(python3 -c "print(round($first - $t1, 3))")")
    echo "  round $r: $n delivered and logged in $(python3 -c "print(round($t2 - $t0, 2))") s: $rate/s" \
      "(enqueue $(python3 -c "print(round($t1 - $t0, 2))") s; sending $send/s; first delivery ${firsts[-1]} s after the POST)"
    rates+=("$rate"); sends+=("$send")
  done
  for p in "${servers[@]}"; do cpu1=$(python3 -c "print($cpu1 + $(cpu_s "$p"))"); done
  cpu=$(python3 -c "print(round(($cpu1 - $cpu0) * 1e6 / ($runs * $n), 1))")
  bytes=$(python3 -c "print(round(($(store_bytes "$store") - $bytes0) / ($runs * $n)))")
}

declare -A pg_rate pg_send pg_claim pg_cpu pg_first pg_first_202 pg_bytes
for k in 1 2 3; do
  echo "PostgreSQL, $k instance(s):"
  ports=()
  for i in $(seq "$k"); do start_server "pg$k-$i" "$db_url"; ports+=("$port"); done
  [ "$k" = 1 ] && seed "${ports[0]}"
  psql -d bench -c "VACUUM ANALYZE" -c "SELECT pg_stat_statements_reset()" >/dev/null
  rounds "${ports[0]}" "psql:postgresql://apns@127.0.0.1:$pg_port/bench" "$db_url"
  pg_rate[$k]=$(median "${rates[@]}"); pg_send[$k]=$(median "${sends[@]}")
  pg_cpu[$k]=$cpu; pg_bytes[$k]=$bytes; pg_first[$k]=$(median "${firsts[@]}"); pg_first_202[$k]=$(median "${firsts_202[@]}")
  # The claim statement's server time per delivery it returned (all rounds).
  pg_claim[$k]=$(psql -d bench -c "SELECT round((sum(total_exec_time) * 1000 / greatest(sum(rows), 1))::numeric, 1)
    FROM pg_stat_statements WHERE query LIKE '%SKIP LOCKED%'")
  stop_servers
done

echo "SQLite, 1 instance:"
start_server sqlite "sqlite:$dir/apns.db"
seed "$port"
sqlite_port=$port
rounds "$port" "sqlite:$dir/apns.db" "sqlite:$dir/apns.db"
sqlite_rate=$(median "${rates[@]}"); sqlite_send=$(median "${sends[@]}")
sqlite_cpu=$cpu; sqlite_bytes=$bytes; sqlite_first=$(median "${firsts[@]}"); sqlite_first_202=$(median "${firsts_202[@]}")
stop_servers

one=${pg_rate[1]}; one_send=${pg_send[1]}
ratio() { python3 -c "print(round($1 / $2, 2))"; }
echo
echo "| $n deliveries, mock 50 ms / 100 streams a connection (median of $runs) | deliveries/s | vs 1 | sending/s (from the 202) | vs 1 | claim µs/delivery | instances' CPU µs/delivery | first delivery, s after POST (after 202) | database bytes/delivery |"
echo "|---|---|---|---|---|---|---|---|---|"
for k in 1 2 3; do
  echo "| PostgreSQL, $k instance(s) | ${pg_rate[$k]} | $(ratio "${pg_rate[$k]}" "$one")x | ${pg_send[$k]} | $(ratio "${pg_send[$k]}" "$one_send")x | ${pg_claim[$k]} | ${pg_cpu[$k]} | ${pg_first[$k]} (${pg_first_202[$k]}) | ${pg_bytes[$k]} |"
done
echo "| SQLite, 1 instance | $sqlite_rate | $(ratio "$sqlite_rate" "$one")x | $sqlite_send | $(ratio "$sqlite_send" "$one_send")x | | $sqlite_cpu | $sqlite_first ($sqlite_first_202) | $sqlite_bytes |"
echo "scaling (deliveries/s): 2 instances $(ratio "${pg_rate[2]}" "$one")x (goal >= 1.8), 3 instances $(ratio "${pg_rate[3]}" "$one")x (goal >= 2.5)"
echo "scaling (sending/s):    2 instances $(ratio "${pg_send[2]}" "$one_send")x, 3 instances $(ratio "${pg_send[3]}" "$one_send")x"
