#!/bin/sh
# Writes DIR/GeneratedBuildCommit.swift: the git commit `--version` prints. SwiftPM runs it
# before every build (Plugins/BuildCommitPlugin) and compiles the file into the
# BuildCommit target. Rewritten only when the commit changed, so an unchanged tree
# recompiles nothing. Outside a git checkout it says "unknown" (the build works the same).
#   scripts/build-info.sh DIR
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/build-info.sh DIR}
mkdir -p "$out"
commit=unknown
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  if [ "$commit" != unknown ] && ! git -C "$root" diff --quiet HEAD -- 2>/dev/null; then commit=$commit-dirty; fi
fi
line="let generatedBuildCommit = \"$commit\""
if [ "$(cat "$out/GeneratedBuildCommit.swift" 2>/dev/null)" != "$line" ]; then
  echo "$line" >"$out/GeneratedBuildCommit.swift"
fi
