# Sourced by the measurement scripts: what they need, checked up front, one line and
# exit 2 for the first thing missing.
#   need_tools SCRIPT TOOL...         each TOOL on PATH
#   need_binaries SCRIPT DIR BIN...   each DIR/BIN a built executable (a release build)
need_tools() {
  local script=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$script: $tool not found" >&2; exit 2; }
  done
}

need_binaries() {
  local script=$1 dir=$2 b
  shift 2
  for b in "$@"; do
    [ -x "$dir/$b" ] || { echo "$script: no $dir/$b (swift build -c release --product $b)" >&2; exit 2; }
  done
}
