#!/usr/bin/env bash
# Writes Sources/CBuildInfo/build_commit.h (git-ignored): the commit `--version` prints.
# Rewritten only when the commit changed, and then build_info.c is touched, so that an
# incremental build recompiles it even where the header did not exist at its last build.
# Outside a git checkout the header says "unknown" (the build works the same).
#   scripts/build-info.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
header=$root/Sources/CBuildInfo/build_commit.h
commit=unknown
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git -C "$root" rev-parse --short=12 HEAD)
  git -C "$root" diff --quiet HEAD -- 2>/dev/null || commit=$commit-dirty
fi
line="#define APNS_BUILD_COMMIT \"$commit\""
if [ "$(cat "$header" 2>/dev/null)" != "$line" ]; then
  echo "$line" >"$header"
  touch "$root/Sources/CBuildInfo/build_info.c"
fi
