#!/usr/bin/env bash
# The DocC catalogs of the two libraries (Sources/APNs/Docs.docc, Sources/APNsMock/Docs.docc),
# built with swift-docc-plugin, every DocC warning an error (a symbol link that does not
# resolve, a Topics entry that names nothing, a malformed directive, ...). DocC itself
# does not warn about a symbol without documentation, so two more checks fail the run:
#   - every public symbol declared in the libraries' sources has a doc comment of its
#     own (one inherited from a protocol requirement, `description`'s, does not count);
#   - every top-level public symbol is curated under the landing page's Topics.
# Only the core targets are built (APNS_CORE_ONLY: see the end of Package.swift), in a
# scratch path of their own; the archives are left in .build-docs/docs/.
#   scripts/docs.sh            Env: SWIFT (default swift), DOCS_SCRATCH (default .build-docs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
swift=${SWIFT:-swift}
scratch=${DOCS_SCRATCH:-.build-docs}
targets=(APNs APNsMock)
out="$scratch/docs"

# The versions the full manifest resolved (make test resolves first), never written here:
# a build beside this one may be reading Package.resolved.
grep -q swift-docc-plugin Package.resolved 2>/dev/null || "$swift" package resolve
rm -rf "$out"
mkdir -p "$out"
# One invocation for both (the package is loaded once); with several targets the plugin
# puts each archive in the output directory as TARGET.doccarchive. --disable-indexing:
# no IDE index, which nothing here reads.
target_args=()
for target in "${targets[@]}"; do target_args+=(--target "$target"); done
APNS_CORE_ONLY=1 "$swift" package --scratch-path "$scratch" --only-use-versions-from-resolved-file \
  --allow-writing-to-directory "$out" \
  generate-documentation "${target_args[@]}" --disable-indexing --warnings-as-errors --output-path "$out"


# The symbol graphs the plugin extracted (public symbols only) against the sources and
# the landing pages (Docs.docc/index.md).
python3 - "$scratch" "$out" "${targets[@]}" <<'EOF'
import glob, json, os, re, sys

scratch, out, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
problems = []
for target in targets:
    graphs = glob.glob(os.path.join(scratch, "*", "extracted-symbols", "*", target, "*.symbols.json"))
    if not graphs:
        problems.append(f"{target}: no symbol graph under {scratch}")
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
