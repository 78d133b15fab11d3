# Sourced by the demo and bench scripts: waits for an apns-mock started in the
# background to say where it listens.
#   mock_port OUT ERR PID    prints the port once OUT has "listening on HOST:PORT";
#                            fails with ERR's text if the mock exits first or takes 10 s
mock_port() {
  local out=$1 err=$2 pid=$3
  for _ in $(seq 100); do
    grep -q '^listening on' "$out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$err" >&2; return 1; }
    sleep 0.1
  done
  local port
  port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out")
  [ -n "$port" ] || { echo "apns-mock did not start: $(cat "$err")" >&2; return 1; }
  echo "$port"
}

#   start_test_mock MOCK_BIN DIR  throw-away key material in DIR/pki (its ids sourced here),
#                                 then MOCK_BIN on 127.0.0.1 trusting its key; sets $mock
#                                 (the pid, for the caller's cleanup) and $port
start_test_mock() {
  local bin=$1 dir=$2
  bash "$(dirname "${BASH_SOURCE[0]}")/../gen-pki.sh" "$dir/pki" >/dev/null
  . "$dir/pki/ids.env"
  "$bin" --port 0 --cert "$dir/pki/server.crt" --key "$dir/pki/server.key" \
    --auth-key "$dir/pki/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" \
    >"$dir/mock.out" 2>"$dir/mock.err" &
  mock=$!
  port=$(mock_port "$dir/mock.out" "$dir/mock.err" "$mock")
}

#   test_mock_cleanup DIR         for an EXIT trap: stops $mock, if one was started, and
#                                 removes DIR
test_mock_cleanup() {
  if [ -n "${mock:-}" ]; then kill -INT "$mock" 2>/dev/null && wait "$mock" 2>/dev/null; fi
  rm -rf "$1"
}
