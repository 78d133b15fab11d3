#!/usr/bin/env bash
# The API against its own OpenAPI document: apns-server (the built binary, on
# 127.0.0.1, the example config's four apps) and apns-mock over TLS, then
#   1. GET /openapi.json, checked by openapi-spec-validator (OpenAPI 3.1);
#   2. schemathesis on every operation, with both credentials (an API key for /v1,
#      an app user's JWT for /api/user): examples, coverage, fuzzing, and stateful
#      runs along the document's links (register, send, read the log). Every check:
#      no 5xx, answers in the documented statuses, shapes and content types, and a
#      request the document forbids refused with a 4xx.
# schemathesis and the validator live in a virtual environment outside the checkout,
# named by their pinned versions (API_VENV; default under ~/.cache/apns-engine), so a
# machine installs them once and every clone uses them; installed on first use (or by
# `scripts/api-test.sh --install`).
#   scripts/api-test.sh [--seconds N] [--postgres] [--bin DIR] [--out DIR]
#     --seconds  schemathesis' time budget (default 40)
#     --postgres the server on a throw-away PostgreSQL cluster (default SQLite)
#     --bin      where apns-server and apns-mock are (default .build/debug)
#     --out      where the run's files go (default .build/api-test); its report
#                (schemathesis' JUnit and the server's stderr) stays there
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
schemathesis=4.32.5 validator=0.9.0
venv=${API_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/apns-engine/venv-schemathesis-$schemathesis-validator-$validator}
seconds=40 postgres= bin=.build/debug out=.build/api-test install_only=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --postgres) postgres=1; shift ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --install) install_only=1; shift ;;
    *) echo "usage: scripts/api-test.sh [--seconds N] [--postgres] [--bin DIR] [--out DIR] | --install" >&2; exit 2 ;;
  esac
done

# Pinned: a new schemathesis may add checks, and a run should change only with the code.
# A marker written after the install: a run killed while it installed leaves an
# environment without it, made again by the next run (a venv cannot be moved into place).
if [ ! -f "$venv/installed" ]; then
  rm -rf "$venv" && mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "schemathesis==$schemathesis" "openapi-spec-validator==$validator"
  touch "$venv/installed"
fi
[ -n "$install_only" ] && exit 0

bin=$(cd "$bin" && pwd)
rm -rf "$out"; mkdir -p "$out"; out=$(cd "$out" && pwd)
scripts/gen-pki.sh "$out/pki"
. "$out/pki/ids.env"
. scripts/lib/mock.sh
. scripts/lib/server.sh

mock= server= pgdata=
cleanup() {
  kill $server $mock 2>/dev/null || true
  wait $server $mock 2>/dev/null || true
  if [ -n "$pgdata" ]; then runuser -u postgres -- "$pgbin/pg_ctl" stop -D "$pgdata" -m fast -w -s >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

"$bin/apns-mock" --port 0 --cert "$out/pki/server.crt" --key "$out/pki/server.key" \
  --auth-key "$out/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$out/mock.out" 2>"$out/mock.err" &
mock=$!
mock_port=$(mock_port "$out/mock.out" "$out/mock.err" $mock)

database=sqlite:$out/apns.db
if [ -n "$postgres" ]; then
  # Its own cluster, as the suite's PostgreSQL tests make one: initdb, trust on loopback.
  pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  pgdata=$out/pg/data pgport=$(free_port)
  mkdir -p "$out/pg"
  [ "$(id -u)" = 0 ] && chown postgres "$out/pg" && chmod 755 "$out"
  as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
  as_pg "$pgbin/initdb" -D "$pgdata" -U apns -A trust -E UTF8 --locale=C --no-sync --no-instructions >/dev/null
  as_pg "$pgbin/pg_ctl" start -D "$pgdata" -l "$out/pg/server.log" -s -w \
    -o "-p $pgport -c listen_addresses=127.0.0.1 -c unix_socket_directories=$out/pg -c fsync=off"
  as_pg "$pgbin/createdb" -h 127.0.0.1 -p "$pgport" -U apns apns
  database="postgres://apns@127.0.0.1:$pgport/apns?sslmode=disable"
fi

# The example config (RepairMinder's staff and customer, Chravel's travel, OPS'
# ops), each pointed at the mock: pushes and broadcast channels alike.
openssl rand -hex 24 >"$out/api-keys"
openssl rand -hex 32 >"$out/user-jwt.secret"
chmod 600 "$out/api-keys" "$out/user-jwt.secret"
cp "$out/pki/AuthKey_$KEY_ID.p8" "$out/"
sed -e "s/AuthKey_ABC123DEFG.p8/AuthKey_$KEY_ID.p8/; s/key_id: ABC123DEFG/key_id: $KEY_ID/; s/team_id: DEF123GHIJ/team_id: $TEAM_ID/" \
    -e "/^    team_id: /a\\
    sandbox_endpoint: https://127.0.0.1:$mock_port\\
    production_endpoint: https://127.0.0.1:$mock_port\\
    broadcast_management_endpoint: https://127.0.0.1:$mock_port\\
    broadcast_sandbox_management_endpoint: https://127.0.0.1:$mock_port\\
    cacert: $out/pki/ca.pem" -e "s/log_level: info/log_level: warning/" \
    -e "s/topic: .*/topic: $TOPIC/" -e "s|^database: .*|database: $database|" \
    examples/server/apns-server.yaml >"$out/apns-server.yaml"
port=$(free_port)
base=http://127.0.0.1:$port
APNS_SERVER_LISTEN=127.0.0.1:$port "$bin/apns-server" --config "$out/apns-server.yaml" 2>"$out/server.err" &
server=$!
wait_healthy "$base" $server "$out/server.err" || exit 1

# An app user's HS256 JWT, as the apps' auth backend signs one (sub: staff-1, the
# seed examples' user), valid for a day.
API_KEY=$(cat "$out/api-keys") USER_JWT=$(python3 - "$out/user-jwt.secret" <<'EOF'
import base64, hashlib, hmac, json, sys, time
secret = open(sys.argv[1]).read().strip().encode()
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
body = b64(b'{"alg":"HS256","typ":"JWT"}') + b"." + b64(json.dumps(
    {"sub": "staff-1", "company_id": "shop-1", "exp": int(time.time()) + 86400}).encode())
print((body + b"." + b64(hmac.new(secret, body, hashlib.sha256).digest())).decode())
EOF
)
export API_KEY USER_JWT

curl -sf "$base/openapi.json" >"$out/openapi.json"
"$venv/bin/python" -c 'import json, sys
from openapi_spec_validator import validate
validate(json.load(open(sys.argv[1])))
print("openapi.json: a valid OpenAPI 3.1 document")' "$out/openapi.json"

# Each credential where the document asks for it (its securitySchemes' names). A
# request the document forbids may also be refused as too large (an over-long list).
cat >"$out/schemathesis.toml" <<'EOF'
[auth.openapi.apiKey]
bearer = "${API_KEY}"
[auth.openapi.userJWT]
bearer = "${USER_JWT}"
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
# A channel is the one created thing that a DELETE removes for good, and a POST that
# repeats an earlier Idempotency-Key and body replays that first 201 (as the document
# says) without making the channel again: after a DELETE between the two, the replayed
# channel is rightly not found. Generated keys repeat ("0"), so that check is left out here.
[[operations]]
include-name = "POST /v1/channels"
checks.ensure_resource_availability.enabled = false
EOF

# positive_data_acceptance is left out: the server refuses more than a schema can say
# (an unknown preference key, user_ids and company_id both, send_at past the horizon),
# each with a documented 400. use_after_free is left out too: DELETE on a notification
# cancels what has not gone yet, and the notification and its log stay readable (its
# deliveries `cancelled`), as the document says; a 404 there would hide what was sent.
# One worker: the machine's other core serves.
status=0
"$venv/bin/st" --config-file "$out/schemathesis.toml" --no-color run "$base/openapi.json" \
  --checks all --exclude-checks positive_data_acceptance,use_after_free --max-time "$seconds" --workers 1 --request-timeout 120 --generation-database none \
  --report junit --report-dir "$out/report" --suppress-health-check too_slow,filter_too_much \
  >"$out/schemathesis.log" 2>&1 || status=$?
if [ $status != 0 ]; then cat "$out/schemathesis.log"; else sed -n '/Examples (in/,$p' "$out/schemathesis.log"; fi
kill -0 $server 2>/dev/null || { echo "apns-server exited during the run:" >&2; tail -n 20 "$out/server.err" >&2; exit 1; }
exit $status
