# Sourced by docs.sh and sanitize.sh: the swift build flags that make each module's
# compile also write its symbol graph into a directory (public symbols and extension
# blocks, as swift-docc-plugin's generate-documentation asks for them). docs.sh converts
# APNs's and APNsMock's graphs; make test takes them from the sanitized build.
#   symbol_graph_flags DIR    sets the array symbol_graph_flags_out
symbol_graph_flags() {
  symbol_graph_flags_out=()
  local flag
  for flag in -emit-symbol-graph -emit-symbol-graph-dir "$1" -symbol-graph-minimum-access-level public \
              -emit-extension-block-symbols; do
    symbol_graph_flags_out+=(-Xswiftc "$flag")
  done
}
