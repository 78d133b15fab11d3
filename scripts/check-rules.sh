#!/usr/bin/env bash
# The alert rules (examples/prometheus): promtool's syntax check, then its unit tests
# (apns-server-rules.test.yml: cases that fire and cases that do not, for each rule).
#   scripts/check-rules.sh
set -euo pipefail
cd "$(dirname "$0")/../examples/prometheus"
promtool check rules apns-server-rules.yml
promtool test rules apns-server-rules.test.yml
