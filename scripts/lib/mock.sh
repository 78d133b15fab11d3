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
