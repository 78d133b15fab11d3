# Sourced by the scripts that run apns-server on loopback (the demo, the API test,
# the benches).
#   free_port                      prints a free TCP port on 127.0.0.1
#   wait_healthy BASE PID ERR [S]  waits until BASE/health answers; fails with ERR's
#                                  text if PID exits first or S seconds (default 30) pass
#   outbox_watch STORE             connects a watcher of the outbox (sqlite:PATH, or
#                                  psql:CONNINFO with $PSQL) and leaves it idle: start it before
#                                  the clock does
#   outbox_emptied                 tells it the request was answered; prints the wall
#                                  time (as date +%s.%N) at which it saw the outbox empty
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

outbox_watch() {
  coproc OUTBOX_WATCH { python3 "$(dirname "${BASH_SOURCE[0]}")/outbox_empty.py" "$1"; }
  local ready
  read -r ready <&"${OUTBOX_WATCH[0]}" && [ "$ready" = ready ] || { echo "outbox_watch: no connection to $1" >&2; return 1; }
}

outbox_emptied() {
  local at
  echo go >&"${OUTBOX_WATCH[1]}"
  read -r at <&"${OUTBOX_WATCH[0]}" || { echo "outbox_emptied: the watcher gave up" >&2; return 1; }
  wait "$OUTBOX_WATCH_PID" 2>/dev/null || true
  echo "$at"
}
