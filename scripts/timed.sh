#!/usr/bin/env bash
# Runs a command and says how long it took, in wall time and in the CPU time of the
# command and every child it waited for, so that make test's log (and CI's) shows where
# the time goes and what it cost: scripts/timed.sh LABEL COMMAND [ARG...]
label=$1
shift
start=$(date +%s)
cpu=$(mktemp)
/usr/bin/time -q -f '%U %S' -o "$cpu" "$@"
status=$?
read -r user sys _ <"$cpu" 2>/dev/null
rm -f "$cpu"
echo "== phase $label: $(( $(date +%s) - start )) s (exit $status), CPU ${user:-?}+${sys:-?} s"
exit $status
