#!/usr/bin/env bash
# make demo-server: apns-mock and apns-server on loopback with throw-away keys
# (scripts/gen-pki.sh), two devices registered with the seed's own calls, one
# event sent, its delivery log printed.   Usage: scripts/demo-server.sh BIN_DIR DEMO_DIR
set -euo pipefail
bin=${1:?bin dir}; dir=${2:?demo dir}
scripts/gen-pki.sh "$dir/pki"
. "$dir/pki/ids.env"
. "$(dirname "$0")/lib/mock.sh"
. "$(dirname "$0")/lib/server.sh"
. "$(dirname "$0")/lib/demo-config.sh"
work=$dir/server
rm -rf "$work"; mkdir -p "$work"

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
# An app user's HS256 JWT, signed as the apps' auth backend would (sub = user id).
jwt() {
  local header payload input
  header=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
  payload=$(printf '{"sub":"%s","company_id":"shop-1","exp":%d}' "$1" $(( $(date +%s) + 3600 )) | b64url)
  input="$header.$payload"
  printf '%s.%s' "$input" "$(printf '%s' "$input" | openssl dgst -sha256 -hmac "$(cat "$work/user-jwt.secret")" -binary | b64url)"
}

"$bin/apns-mock" --port 0 --cert "$dir/pki/server.crt" --key "$dir/pki/server.key" \
  --auth-key "$dir/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$work/mock.out" 2>"$work/mock.err" &
mock=$!
server=
trap 'kill $server $mock 2>/dev/null; wait $server $mock 2>/dev/null || true' EXIT
mock_port=$(mock_port "$work/mock.out" "$work/mock.err" $mock) || exit 1

# The example config, every app pointed at the mock (scripts/check-demo-config.sh
# proves it), with the throw-away key.
api_key=$(openssl rand -hex 24)
echo "$api_key" >"$work/api-keys"
openssl rand -hex 32 >"$work/user-jwt.secret"
chmod 600 "$work/api-keys" "$work/user-jwt.secret"
cp "$dir/pki/AuthKey_$KEY_ID.p8" "$work/"
demo_config examples/server/apns-server.yaml "$mock_port" "$(cd "$dir/pki" && pwd)/ca.pem" "$KEY_ID" "$TEAM_ID" "$TOPIC" \
  >"$work/apns-server.yaml"
port=$(free_port)
base=http://127.0.0.1:$port
APNS_SERVER_LISTEN=127.0.0.1:$port "$bin/apns-server" --config "$work/apns-server.yaml" 2>"$work/server.err" &
server=$!
wait_healthy "$base" $server "$work/server.err" || exit 1
echo "== apns-mock on 127.0.0.1:$mock_port (a mock of APNs; nothing leaves this machine), apns-server on $base"

staff1=$(jwt staff-1); staff2=$(jwt staff-2)
echo; echo "== the staff app registers two devices (the seed's call)"
curl -s -X POST "$base/api/user/device-token" -H "Authorization: Bearer $staff1" -H "Content-Type: application/json" \
  -d '{"deviceToken":"a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90","platform":"ios","appType":"staff","deviceName":"iPhone 15 Pro","osVersion":"17.4","appVersion":"1.0.0"}'; echo
curl -s -X POST "$base/api/user/device-token" -H "Authorization: Bearer $staff2" -H "Content-Type: application/json" \
  -d '{"deviceToken":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0","platform":"ios","appType":"staff","deviceName":"iPhone 13","osVersion":"17.2","appVersion":"1.0.0"}'; echo
curl -s "$base/api/user/push-preferences" -H "Authorization: Bearer $staff1"; echo

echo; echo "== the backend sends an event (per-user badges: 3 and 2 unread)"
reply=$(curl -s -X POST "$base/v1/notifications" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" \
  -d '{"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid","app_type":"staff","user_ids":["staff-1","staff-2"],"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":{"staff-1":3,"staff-2":2},"sound":"default"}')
echo "$reply"
id=$(printf '%s' "$reply" | python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])')
for _ in $(seq 50); do
  curl -s "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key" | grep -q '"pending":0' && break
  sleep 0.1
done
echo; echo "== the delivery log: GET /v1/notifications/$id"
curl -s "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key" | python3 -m json.tool

# Quiet hours and batching, on the real clock (the example's 60 s window is 3 s here).
post() { curl -s -X POST "$base/v1/notifications" -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" -d "$1"; }
apns_id_of() {  # the first delivery of a notification (from POST's reply on stdin)
  local id; id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])')
  curl -s "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key" | python3 -c 'import json,sys; print(json.load(sys.stdin)["deliveries"][0]["apns_id"])'
}
show() { curl -s "$base/v1/deliveries?apns_id=$1" -H "Authorization: Bearer $api_key"; echo; }
traveller=$(jwt traveller); tech=$(jwt tech)
curl -s -X POST "$base/api/user/device-token" -H "Authorization: Bearer $traveller" -H "Content-Type: application/json" \
  -d '{"deviceToken":"c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00","platform":"ios","appType":"travel"}' >/dev/null
curl -s -X POST "$base/api/user/device-token" -H "Authorization: Bearer $tech" -H "Content-Type: application/json" \
  -d '{"deviceToken":"7ec47ec47ec47ec47ec47ec47ec47ec47ec47ec47ec47ec47ec47ec47ec47ec4","platform":"ios","appType":"ops"}' >/dev/null
from=$(date -u -d '-1 hour' +%H:%M); to=$(date -u -d '+1 hour' +%H:%M)
echo; echo "== the traveller's quiet hours, $from to $to UTC (now is inside them): PUT /api/user/push-preferences?appType=travel"
curl -s -X PUT "$base/api/user/push-preferences?appType=travel" -H "Authorization: Bearer $traveller" -H "Content-Type: application/json" \
  -d "{\"quietHoursEnabled\":true,\"quietHoursStart\":\"$from\",\"quietHoursEnd\":\"$to\",\"timeZone\":\"UTC\"}"; echo
curl -s "$base/api/user/push-preferences?appType=travel" -H "Authorization: Bearer $traveller"; echo
echo; echo "== a message in quiet hours is held until they end (travel: quiet_hours: defer); a broadcast (critical) goes now"
held=$(post '{"type":"message","app_type":"travel","user_ids":["traveller"],"alert":{"title":"Lisbon","body":"Dinner moved to 20:30"},"sound":"default"}' | apns_id_of)
now=$(post '{"type":"broadcast","app_type":"travel","user_ids":["traveller"],"alert":{"title":"Lisbon","body":"The bus leaves in 10 minutes"},"sound":"default"}' | apns_id_of)
for _ in $(seq 50); do show "$now" | grep -q '"state":"delivered"' && break; sleep 0.1; done
show "$held"; show "$now"

echo; echo "== three updates on one job within the window (ops: coalesce) become one notification when it closes"
for n in 1 2 3; do
  last=$(post "{\"type\":\"scheduleChange\",\"entity_type\":\"task\",\"entity_id\":\"job-123\",\"entity_title\":\"123 Main St\",\"app_type\":\"ops\",\"user_ids\":[\"tech\"],\"alert\":{\"title\":\"Job 123\",\"body\":\"Change $n\"}}" | apns_id_of)
done
carrier=$(show "$last" | python3 -c 'import json,sys; print(json.load(sys.stdin)["carried_by"])')
for _ in $(seq 100); do show "$carrier" | grep -q '"state":"delivered"' && break; sleep 0.1; done
echo "a member:   $(show "$last")"
echo "the send:   $(show "$carrier")"

kill -TERM $server; wait $server; server=
echo; echo "== apns-server drained and exited 0 on SIGTERM"
