#!/usr/bin/env bash
# The guides' commands work as pasted: every ```sh block of each document, in order, in ONE
# bash shell (set -Eeuo pipefail), from a fresh copy of the clone's files (tracked, and
# untracked but not ignored) in a scratch folder, with $bin set to BIN_DIR. A command that
# fails stops that document's run and is named (the block, its line in the document, the
# command, its output); so is an output the guide promises that did not come. Whatever the
# commands started (servers with &, PostgreSQL) is stopped at the end and the scratch folder
# removed: the clone, and a developer's own .demo, are never touched.
#   scripts/check-service-guide.sh BIN_DIR [DOC.md...]
#     default DOCs: docs/getting-started-service.md README.md
#     Env: GUIDE_CHECK_TIMEOUT (seconds for one document, default 300),
#          GUIDE_CHECK_KEEP=1 (keep the scratch folder, and say where it is).
# Markers, HTML comments on the lines right before a block (invisible once rendered):
#   <!-- guide-check: skip (WHY) -->           not run: a build, root's apt, a synopsis
#   <!-- guide-check: skip (WHY) run: CMD -->  CMD runs in its place (what the block leaves)
#   <!-- guide-check: needs postgresql -->     skipped, and said so, where there is no
#                                              PostgreSQL server (/usr/lib/postgresql/*/bin)
#   <!-- guide-check: expect REGEX -->         a line of the block's output (stdout and
#                                              stderr, with what the processes it started
#                                              print within 10 s) matches the extended REGEX
# A line `bin=…` in a block is not run: $bin is BIN_DIR. Any output naming Apple's hosts
# (push.apple.com) fails the check: the guides send to apns-mock only.
# As root, with unshare and ip, it runs in a network namespace of its own: the guides'
# fixed ports (2197, 8080, 8081, 5433) are then free whatever else runs here, and nothing
# can leave the machine. Otherwise (or with GUIDE_CHECK_NETNS=0) those ports must be free.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: scripts/check-service-guide.sh BIN_DIR [DOC.md...]" >&2; exit 2; }
bin=$(cd "$1" 2>/dev/null && pwd) || { echo "check-service-guide: no folder $1" >&2; exit 2; }
shift
docs=("$@")
[ ${#docs[@]} -gt 0 ] || docs=(docs/getting-started-service.md README.md)
for b in apns-server apns-mock apns-send; do
  [ -x "$bin/$b" ] || { echo "check-service-guide: no $bin/$b (swift build, or make demo)" >&2; exit 2; }
done
for doc in "${docs[@]}"; do
  [ -r "$root/$doc" ] || { echo "check-service-guide: cannot read $doc (a path from the clone's root)" >&2; exit 2; }
done

# In a network namespace of its own when it can: the script again, inside it.
if [ -z "${GUIDE_CHECK_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null \
   && unshare --net true 2>/dev/null; then
  GUIDE_CHECK_NETNS=1 exec unshare --net "$0" "$bin" "${docs[@]}"
fi
if [ "${GUIDE_CHECK_NETNS:-}" = 1 ]; then
  ip link set lo up
  network="a network namespace of its own (loopback only)"
else
  network="the machine's network"
  for port in 2197 8080 8081 5433; do
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
      echo "check-service-guide: 127.0.0.1:$port is in use, and the guides' commands use it (as root, with unshare and ip, the check runs in a network namespace of its own)" >&2
      exit 2
    fi
  done
fi

# PostgreSQL's programs, as the guide finds them; as root it runs them as postgres.
postgres=
for dir in /usr/lib/postgresql/*/bin; do
  [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && postgres=$dir
done
if [ -n "$postgres" ] && [ "$(id -u)" = 0 ] && ! { id postgres >/dev/null 2>&1 && command -v runuser >/dev/null; }; then
  postgres=
fi

timeout_s=${GUIDE_CHECK_TIMEOUT:-300}
start=$(date +%s)
# The scratch folder: PostgreSQL, run as postgres, must reach the guide's mktemp folder in it.
scratch=$(mktemp -d /tmp/guide-check.XXXXXX)
chmod 711 "$scratch"
echo "check-service-guide: $bin, in $network, in $scratch"

# Stops every process working in the scratch folder (the guide's servers have the copy as
# their cwd, PostgreSQL its data folder): PostgreSQL first, by its pid file (a fast
# shutdown), then the rest, TERM, and KILL after 5 s.
stop_leftovers() {
  local pidfile pid p pids=() left
  for pidfile in "$scratch"/*/*/data/postmaster.pid "$scratch"/*/*/*/data/postmaster.pid; do
    [ -f "$pidfile" ] || continue
    read -r pid <"$pidfile" || continue
    kill -INT "$pid" 2>/dev/null && echo "   (stopped PostgreSQL $pid, left running by the guide)"
  done
  for p in $(find /proc/[0-9]*/cwd -maxdepth 0 \( -lname "$scratch" -o -lname "$scratch/*" \) 2>/dev/null); do
    p=${p#/proc/}; pids+=("${p%/cwd}")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do
    left=
    for pid in "${pids[@]}"; do running "$pid" && left=1; done
    [ -n "$left" ] || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}
# Alive and not a zombie: a process whose parent, the guide's shell, is gone waits for
# init to reap it, and has stopped all the same.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}
cleanup() {
  stop_leftovers
  if [ "${GUIDE_CHECK_KEEP:-}" = 1 ]; then
    echo "check-service-guide: kept $scratch"
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A fresh clone's files: tracked (as they are now) and untracked but not ignored. Outside
# a git checkout (an unpacked archive), all but the build folders and local secrets.
copy_clone() {
  local git=(git -c safe.directory='*' -C "$root")  # read-only: another user's clone is fine
  mkdir -p "$1"
  if "${git[@]}" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    "${git[@]}" ls-files -z --cached --others --exclude-standard |
      tar -C "$root" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$1" -xf -
  else
    tar -C "$root" --exclude='./.build*' --exclude=./.demo --exclude=./.dist-root --exclude=./dist \
      --exclude=./keys --exclude=./keys.env --exclude='*.p8' --exclude='*.key' -cf - . | tar -C "$1" -xf -
  fi
}

# The ```sh blocks of a document, in order: N.sh (the text), N.meta (the line of its first
# text line, then "LINE<TAB>MARKER" for each marker before it). Prints the count.
extract() {
  awk -v dir="$2" -v doc="$3" '
    function fail(line, msg) { printf "check-service-guide: %s:%d: %s\n", doc, line, msg > "/dev/stderr"; bad = 1 }
    inblock {
      if ($0 ~ /^```[[:space:]]*$/) { inblock = 0; close(text); next }
      print > text; next
    }
    /^```(sh|bash)[[:space:]]*$/ {
      n++; inblock = 1; text = dir "/" n ".sh"
      printf "%d\n%s", NR + 1, pending > (dir "/" n ".meta"); close(dir "/" n ".meta")
      printf "" > text
      pending = ""; next
    }
    /^<!--[[:space:]]*guide-check:.*-->[[:space:]]*$/ {
      m = $0; sub(/^<!--[[:space:]]*guide-check:[[:space:]]*/, "", m); sub(/[[:space:]]*-->[[:space:]]*$/, "", m)
      pending = pending NR "\t" m "\n"; next
    }
    /^<!--.*guide-check/ { fail(NR, "a guide-check marker is one line: <!-- guide-check: ... -->"); next }
    /^[[:space:]]*$/ { next }
    pending != "" { fail(NR, "guide-check markers must come right before a ```sh block"); pending = "" }
    END {
      if (inblock) fail(NR, "a ```sh block is not closed")
      if (pending != "") fail(NR, "guide-check markers at the end, before no block")
      if (bad) exit 1
      print n + 0
    }' "$1"
}

failures=0
check_doc() {
  local doc=$1 name clone check count n meta line marker verb rest
  name=$(basename "$doc" .md)
  clone=$scratch/$name/clone
  check=$scratch/$name/check
  mkdir -p "$check/blocks" "$scratch/$name/tmp"
  chmod 711 "$scratch/$name" "$scratch/$name/tmp"
  copy_clone "$clone"
  count=$(extract "$clone/$doc" "$check/blocks" "$doc") || return 1
  echo "== $doc: $count blocks"

  # The driver: one shell for the whole document. __failed records the first failure
  # (the driver's line, the status, the command) for the report below; a command
  # substitution's failure is recorded inside it, and then again for its assignment.
  local driver=$check/driver.sh map=$check/map
  : >"$map"
  cat >"$driver" <<DRIVER
set -Eeuo pipefail
exec </dev/null
__check=$(printf %q "$check")
DRIVER
  cat >>"$driver" <<'DRIVER'
__failed() {
  [ -e "$__check/failure" ] || printf '%s\t%s\t%s\n' "$2" "$1" "$3" >"$__check/failure"
  exit 1
}
__block() { __t0=${EPOCHREALTIME/./}; __n=$1; }
__ran() { printf '   block %s: ok (%d ms)\n' "$__n" $(( (${EPOCHREALTIME/./} - __t0) / 1000 )); }
__expect() {  # N REGEX: a line of block N's output matches, now or within 10 s
  local i
  for i in $(seq 100); do
    grep -Eq -- "$2" "$__check/$1.out" && return 0
    sleep 0.1
  done
  printf '%s\t%s\n' "$1" "$2" >"$__check/missing"
  exit 1
}
trap '__failed $? $LINENO "$BASH_COMMAND"' ERR
trap 'exit 143' TERM INT
DRIVER
  printf 'bin=%q\nexport TMPDIR=%q\ncd %q\n' "$bin" "$scratch/$name/tmp" "$clone" >>"$driver"

  for n in $(seq "$count"); do
    meta=$check/blocks/$n.meta
    line=$(head -n 1 "$meta")
    local skip= instead= needs= expects=()
    while IFS=$'\t' read -r mline marker; do
      verb=${marker%% *}; rest=${marker#"$verb"}; rest=${rest# }
      case $verb in
        skip)
          [[ $rest =~ ^\((.*)\)(\ +run:\ *(.+))?$ ]] || { echo "check-service-guide: $doc:$mline: skip (WHY) [run: CMD]" >&2; return 1; }
          skip=${BASH_REMATCH[1]}; instead=${BASH_REMATCH[3]} ;;
        needs)
          [ "$rest" = postgresql ] || { echo "check-service-guide: $doc:$mline: needs what? (only: needs postgresql)" >&2; return 1; }
          needs=postgresql ;;
        expect)
          [ -n "$rest" ] || { echo "check-service-guide: $doc:$mline: expect REGEX" >&2; return 1; }
          expects+=("$rest") ;;
        *) echo "check-service-guide: $doc:$mline: unknown marker '$verb' (skip, needs, expect)" >&2; return 1 ;;
      esac
    done < <(tail -n +2 "$meta")
    if [ -n "$needs" ] && [ -z "$postgres" ]; then
      skip="no PostgreSQL server here (/usr/lib/postgresql/*/bin, and as root the postgres user)"; instead=
    fi
    printf '__block %d\n' "$n" >>"$driver"
    if [ -n "$skip" ]; then
      printf 'echo %q\n' "   block $n ($doc:$((line - 1))): skipped: $skip${instead:+; instead: $instead}" >>"$driver"
      [ -n "$instead" ] || continue
      printf '%s\t%s\t%s\t%s\n' "$n" "$(( $(wc -l <"$driver") + 2 ))" "$((line - 1))" 1 >>"$map"
      printf '{\n%s\n} >%q 2>&1\n__ran\n' "$instead" "$check/$n.out" >>"$driver"
      continue
    fi
    printf 'echo %q\n' "   block $n ($doc:$((line - 1)))" >>"$driver"
    printf '%s\t%s\t%s\t%s\n' "$n" "$(( $(wc -l <"$driver") + 2 ))" "$line" "$(wc -l <"$check/blocks/$n.sh")" >>"$map"
    echo '{' >>"$driver"
    # $bin is the check's: a line setting it is kept as a no-op (the lines still match).
    sed -E 's/^([[:space:]]*)bin=.*/\1: # bin: the check'\''s BIN_DIR/' "$check/blocks/$n.sh" >>"$driver"
    printf '} >%q 2>&1\n__ran\n' "$check/$n.out" >>"$driver"
    local re
    for re in "${expects[@]}"; do
      printf '__expect %d %q\n' "$n" "$re" >>"$driver"
    done
  done

  local status=0 t0
  t0=$(date +%s)
  timeout -k 5 "$timeout_s" bash "$driver" || status=$?
  if [ $status = 0 ] && grep -l 'push\.apple\.com' "$check"/*.out >/dev/null 2>&1; then
    local out
    out=$(grep -l 'push\.apple\.com' "$check"/*.out | head -n 1)
    n=$(basename "$out" .out)
    echo "check-service-guide: FAILED: $doc, block $n (line $(awk -F'\t' -v n="$n" '$1 == n { print $3 - 1 }' "$map")): its output names Apple's hosts; the guides send to apns-mock only:" >&2
    grep 'push\.apple\.com' "$out" | head -n 5 | sed 's/^/   | /' >&2
    return 1
  fi
  if [ $status = 0 ]; then
    echo "== $doc: every command worked ($(( $(date +%s) - t0 )) s)"
    return 0
  fi

  # Which block and command.
  if [ -f "$check/missing" ]; then
    IFS=$'\t' read -r n re <"$check/missing"
    line=$(awk -F'\t' -v n="$n" '$1 == n { print $3 - 1 }' "$map")
    echo "check-service-guide: FAILED: $doc, block $n (line $line): no output line matches: $re" >&2
  elif [ -f "$check/failure" ]; then
    local dline code command
    IFS=$'\t' read -r dline code command <"$check/failure"
    n=
    read -r n line < <(awk -F'\t' -v d="$dline" '$2 <= d && d < $2 + $4 { print $1, $3 + d - $2 }' "$map")
    if [ -n "${n:-}" ]; then
      echo "check-service-guide: FAILED: $doc, block $n, line $line: exit $code: $command" >&2
    else
      n=
      echo "check-service-guide: FAILED: $doc: exit $code in the check's own code (driver line $dline): $command" >&2
    fi
  elif [ $status = 124 ] || [ $status = 137 ]; then
    n=$(ls "$check"/*.out 2>/dev/null | sed 's|.*/||; s|\.out$||' | sort -n | tail -n 1)
    echo "check-service-guide: FAILED: $doc: still running after $timeout_s s, in block ${n:-?}" >&2
  else
    n=
    echo "check-service-guide: FAILED: $doc (exit $status)" >&2
  fi
  if [ -n "${n:-}" ] && [ -f "$check/$n.out" ]; then
    echo "   its output:" >&2
    tail -n 40 "$check/$n.out" | sed 's/^/   | /' >&2
  fi
  return 1
}

for doc in "${docs[@]}"; do
  check_doc "$doc" || failures=$((failures + 1))
  stop_leftovers
done
if [ $failures -gt 0 ]; then
  echo "check-service-guide: $failures of ${#docs[@]} documents FAILED ($(( $(date +%s) - start )) s)" >&2
  exit 1
fi
echo "check-service-guide: ${#docs[@]} documents, every command worked ($(( $(date +%s) - start )) s)"
