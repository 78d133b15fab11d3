#!/usr/bin/env bash
# The DocC catalogs of the two libraries (Sources/APNs/Docs.docc, Sources/APNsMock/Docs.docc),
# converted by the toolchain's docc, every DocC warning an error (a symbol link that does not
# resolve, a Topics entry that names nothing, a malformed directive, ...). DocC itself
# does not warn about a symbol without documentation, so two more checks fail the run:
#   - every public symbol declared in the libraries' sources has a doc comment of its
#     own (one inherited from a protocol requirement, `description`'s, does not count);
#   - every top-level public symbol is curated under the landing page's Topics.
# The symbol graphs come from the compiler (-emit-symbol-graph, public symbols, extension
# blocks: what swift-docc-plugin's generate-documentation asks for). scripts/sanitize.sh's
# build emits them too, so make test converts those and compiles nothing again; on its
# own this script builds the two libraries (APNS_CORE_ONLY: see the end of Package.swift)
# in a scratch path of its own. The archives are left in .build-docs/docs/.
#   scripts/docs.sh [--symbol-graphs DIR]
#     DIR: the symbol graphs a build emitted (the sanitized build's: .build-asan/symbol-graphs)
# Env: SWIFT (default swift), DOCS_SCRATCH (default .build-docs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
swift=${SWIFT:-swift}
scratch=${DOCS_SCRATCH:-.build-docs}
targets=(APNs APNsMock)
out="$scratch/docs"
graphs=
case "${1:-}" in
  --symbol-graphs) graphs=${2:?"usage: $0 [--symbol-graphs DIR]"} ;;
  "") ;;
  *) echo "usage: $0 [--symbol-graphs DIR]" >&2; exit 2 ;;
esac

# shellcheck source=lib/symbol-graphs.sh
source scripts/lib/symbol-graphs.sh

if [ -z "$graphs" ]; then
  graphs="$root/$scratch/symbol-graphs"
  mkdir -p "$graphs"
  # The versions the full manifest resolved, never written here: a build beside this
  # one may be reading Package.resolved.
  [ -f Package.resolved ] || "$swift" package resolve
  symbol_graph_flags "$graphs"
  for target in "${targets[@]}"; do
    APNS_CORE_ONLY=1 "$swift" build --scratch-path "$scratch" --only-use-versions-from-resolved-file \
      --target "$target" "${symbol_graph_flags_out[@]}"
  done
fi

docc=$(dirname "$(readlink -f "$(command -v "$swift")")")/docc
rm -rf "$out"
mkdir -p "$out"
for target in "${targets[@]}"; do
  # Each module's own graphs (TARGET.symbols.json, TARGET@Swift.symbols.json for its
  # extensions of another module's types), apart from every other module's.
  mkdir -p "$out/graphs/$target"
  for graph in "$graphs/$target.symbols.json" "$graphs/$target"@*.symbols.json; do
    if [ -f "$graph" ]; then cp "$graph" "$out/graphs/$target/"; fi
  done
  [ -f "$out/graphs/$target/$target.symbols.json" ] || { echo "docs.sh: no symbol graph of $target in $graphs" >&2; exit 1; }
  "$docc" convert "Sources/$target/Docs.docc" --fallback-display-name "$target" --fallback-bundle-identifier "$target" \
    --additional-symbol-graph-dir "$out/graphs/$target" --output-path "$out/$target.doccarchive" --warnings-as-errors \
    >"$out/$target.log" 2>&1 || { cat "$out/$target.log" >&2; echo "docs.sh: docc convert $target failed" >&2; exit 1; }
done

# The symbol graphs (public symbols only) against the sources and the landing pages
# (Docs.docc/index.md).
python3 - "$out" "${targets[@]}" <<'EOF'
import glob, json, os, re, sys

out, targets = sys.argv[1], sys.argv[2:]
problems = []
for target in targets:
    graphs = glob.glob(os.path.join(out, "graphs", target, "*.symbols.json"))
    if not graphs:
        problems.append(f"{target}: no symbol graph in {out}/graphs")
    sources = os.path.realpath(os.path.join("Sources", target)) + os.sep
    seen = set()
    top_level = set()
    for graph in graphs:
        for symbol in json.load(open(graph))["symbols"]:
            uri = symbol.get("location", {}).get("uri", "")
            path = uri.removeprefix("file://")
            if not os.path.realpath(path).startswith(sources):
                continue          # synthesized, or a default implementation from another module
            if len(symbol["pathComponents"]) == 1:
                top_level.add(symbol["pathComponents"][0].split("(")[0])
            doc = symbol.get("docComment")
            # An inherited comment comes from the requirement's module and file.
            own = doc is not None and doc.get("module", target) == target \
                and any(line["text"].strip() for line in doc["lines"])
            key = symbol["identifier"]["precise"]
            if not own and key not in seen:
                seen.add(key)
                line = symbol["location"]["position"]["line"] + 1
                name = ".".join(symbol["pathComponents"])
                problems.append(f"{os.path.relpath(path)}:{line}: public symbol without a doc comment: {name}")
    # DocC files every top-level symbol the landing page leaves out under a default
    # group, and calls it curated: the page's own symbol links are read instead.
    landing = os.path.join("Sources", target, "Docs.docc", "index.md")
    text = open(landing).read() if os.path.exists(landing) else ""
    topics = text.split("## Topics", 1)[1] if "## Topics" in text else ""
    curated = {link.split("/")[0].split("(")[0].split("-")[0] for link in re.findall(r"``([^`]+)``", topics)}
    for name in sorted(top_level - curated):
        problems.append(f"{landing}: {name} is not under the landing page's Topics")
for problem in sorted(problems):
    print(problem, file=sys.stderr)
if problems:
    print(f"== docs: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)
EOF
echo "== docs: ${targets[*]} built, every public symbol documented and curated ($out)"
