#!/usr/bin/env bash
# make demo: start apns-mock on loopback with the throw-away demo PKI, send the
# example payload to the example tokens with apns-send, print the records and
# the summary, stop the mock.   Usage: scripts/demo.sh BIN_DIR DEMO_DIR
set -euo pipefail
bin=${1:?bin dir}; dir=${2:?demo dir}
pki=$dir/pki
. "$pki/ids.env"
. "$(dirname "$0")/lib/mock.sh"
payload=examples/payloads/order_status_changed.json
tokens=examples/tokens.txt

"$bin/apns-mock" --port 0 --cert "$pki/server.crt" --key "$pki/server.key" \
  --auth-key "$pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" \
  --unregistered examples/unregistered.txt --sandbox >"$dir/mock.out" 2>"$dir/mock.err" &
mock=$!
trap 'kill $mock 2>/dev/null; wait $mock 2>/dev/null || true' EXIT
port=$(mock_port "$dir/mock.out" "$dir/mock.err" $mock) || exit 1
echo "== apns-mock listening on 127.0.0.1:$port (a mock of APNs; nothing leaves this machine)"
echo "== apns-send --topic $TOPIC $payload $tokens"
echo
set +e
"$bin/apns-send" --topic "$TOPIC" --key "$pki/AuthKey_$KEY_ID.p8" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
  --endpoint "https://127.0.0.1:$port" --cacert "$pki/ca.pem" "$payload" "$tokens" 2>&1
status=$?
set -e
echo
echo "== apns-send exited $status (0: all delivered, 1: some not delivered, 2: bad input)"
[ $status -le 1 ]
