# Sourced by the scripts that run apns-server on loopback (the demo, the API test,
# the benches).
#   free_port                      prints a free TCP port on 127.0.0.1
#   wait_healthy BASE PID ERR [S]  waits until BASE/health answers; fails with ERR's
#                                  text if PID exits first or S seconds (default 30) pass
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_healthy() {
  local base=$1 pid=$2 err=$3 seconds=${4:-30}
  for _ in $(seq $(( seconds * 10 ))); do
    curl -sf "$base/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$err" >&2; return 1; }
    sleep 0.1
  done
  echo "apns-server did not answer $base/health within $seconds s: $(tail -n 5 "$err")" >&2
  return 1
}
