#!/usr/bin/env bash
# The demo never sends to Apple: the example config as `make demo-server` rewrites it
# (scripts/lib/demo-config.sh) must give every app a loopback sandbox, production and
# broadcast-management endpoint (127.0.0.1 or localhost) and a cacert, and no endpoint
# anywhere else. An app added to the example without the commented mock lines fails here.
#   scripts/check-demo-config.sh [EXAMPLE]     (default examples/server/apns-server.yaml)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib/demo-config.sh"
example=${1:-$root/examples/server/apns-server.yaml}
[ -r "$example" ] || { echo "check-demo-config: cannot read $example" >&2; exit 2; }
demo_config "$example" 2197 /nonexistent/pki/ca.pem DEMOKEY001 DEMOTEAM01 com.example.demo |
awk -v file="$example" '
  function value(line) {
    sub(/^[^:]*:[[:space:]]*/, "", line); sub(/[[:space:]]+#.*$/, "", line)
    gsub(/["'\'']/, "", line); return line
  }
  /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
  /^[^[:space:]-][^:]*:/ { top = $0; sub(/:.*/, "", top) }
  top == "apps" && /^[[:space:]]*-[[:space:]]*app_type:/ { n++; app[n] = value($0) }
  /^[[:space:]]*(-[[:space:]]*)?[a-z_]*endpoint:/ {
    key = $0; sub(/^[[:space:]]*(-[[:space:]]*)?/, "", key); sub(/:.*/, "", key)
    v = value($0)
    if (v !~ /^https:\/\/(127\.0\.0\.1|localhost)(:[0-9]+)?\/?$/) {
      printf "check-demo-config: %s: %s%s: %s is not loopback\n", file, (n ? "app " app[n] ": " : ""), key, v
      bad = 1
    }
    if (top == "apps" && n) seen[n, key] = 1
  }
  top == "apps" && n && /^[[:space:]]*cacert:/ { seen[n, "cacert"] = 1 }
  END {
    if (!n) { printf "check-demo-config: %s: no apps found\n", file; exit 1 }
    split("sandbox_endpoint production_endpoint broadcast_management_endpoint broadcast_sandbox_management_endpoint cacert", need, " ")
    for (i = 1; i <= n; i++)
      for (k = 1; k <= 5; k++)
        if (!((i, need[k]) in seen)) {
          printf "check-demo-config: %s: app %s has no %s after the demo rewrite (add a commented \"# %s: …\" line as the other apps have)\n", file, app[i], need[k], need[k]
          bad = 1
        }
    if (bad) exit 1
    printf "check-demo-config: %d apps, every endpoint loopback\n", n
  }'
