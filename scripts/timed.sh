#!/usr/bin/env bash
# Runs a command and says how long it took, so that make test's log (and CI's)
# shows where the time goes: scripts/timed.sh LABEL COMMAND [ARG...]
label=$1
shift
start=$(date +%s)
"$@"
status=$?
echo "== phase $label: $(( $(date +%s) - start )) s (exit $status)"
exit $status
