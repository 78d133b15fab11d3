#!/usr/bin/env bash
# The C shim (CAPNs) and the mock (CAPNsMock) under AddressSanitizer + UBSan:
#   1. their Swift tests (CAPNsTests, APNsMockTests, and APNsTests' ShutdownRaceTests,
#      the Swift layer's shutdown race) built with --sanitize=address (only those
#      targets and what they run: APNS_CORE_ONLY in Package.swift)
#      and the C compiled with -fsanitize=undefined too (swiftc has no UBSan on
#      Linux; ASan's runtime carries UBSan's handlers), scratch path .build-asan;
#      APNsMockTests' LimitRaceTests drive the mock's runtime-limit path (apply_limits)
#      against connections reset under it, where a use after free once hid; then the
#      engine's cancellation, burst and shutdown tests again with LeakSanitizer on;
#   2. a leak check: fuzz/leak_drive.c sends LEAK_REQUESTS (default 100000; 10000
#      with --short, as make test and CI run it) through the C sender to the C mock
#      in one process, once per transport, and LeakSanitizer reports at exit
#      whatever was not freed.
#   scripts/sanitize.sh [--short] [--no-swift] [--no-leak] [--build-only|--no-build]
#     --build-only: build the sanitized tests and leak_drive, run nothing; --no-build:
#     run what a --build-only run left (make test builds it while the suite runs).
# Any ASan/UBSan/LSan report fails the script. Env: CC (default: the Swift
# toolchain's clang, which carries the sanitizer runtimes; lld comes with it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
swift_tests=1 leak=1 requests=100000 build=1 run=1
for arg in "$@"; do
  case $arg in
    --short) requests=10000 ;;
    --no-swift) swift_tests=0 ;;
    --no-leak) leak=0 ;;
    --build-only) run=0 ;;
    --no-build) build=0 ;;
    *) echo "usage: $0 [--short] [--no-swift] [--no-leak] [--build-only|--no-build]" >&2; exit 2 ;;
  esac
done
requests=${LEAK_REQUESTS:-$requests}
CC=${CC:-$(dirname "$(readlink -f "$(command -v swift)")")/clang}
# halt_on_error: the first report fails the run; detect_leaks: LSan at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
out="$root/.build-asan"
mkdir -p "$out"

# Only what the sanitized tests run is built: the shim, the mock, the engine, apns-send
# and apns-mock, and the three test targets (APNS_CORE_ONLY: see the end of Package.swift),
# not the service's dependencies (Hummingbird, NIO, BoringSSL, GRDB, PostgresNIO).
# That smaller manifest takes the versions the full one resolved and leaves
# Package.resolved as it is.
# The build writes each module's symbol graph too, for make test's DocC phase (docs.sh
# --symbol-graphs), which then compiles nothing of its own.
# shellcheck source=lib/symbol-graphs.sh
source scripts/lib/symbol-graphs.sh
symbol_graph_flags "$out/symbol-graphs"
asan=(--sanitize=address -Xcc -fsanitize=undefined -Xcc -fno-sanitize-recover=undefined
      --scratch-path "$out" --only-use-versions-from-resolved-file "${symbol_graph_flags_out[@]}")
if [ "$build" = 1 ] && [ "$swift_tests" = 1 ]; then
  [ -f Package.resolved ] || swift package resolve
  echo "== swift build --build-tests ${asan[*]} (APNS_CORE_ONLY)"
  APNS_CORE_ONLY=1 swift build --build-tests "${asan[@]}"
fi
if [ "$build" = 1 ] && [ "$leak" = 1 ]; then
  echo "== leak_drive: build (ASan + UBSan + LSan)"
  "$CC" -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fuse-ld=lld \
    -D_GNU_SOURCE -ISources/CAPNs/include -ISources/CAPNs -ISources/CAPNsMock/include -ISources/CAPNsMock \
    fuzz/leak_drive.c Sources/CAPNs/*.c Sources/CAPNsMock/*.c \
    -lnghttp2 -lssl -lcrypto -lpthread -o "$out/leak_drive"
fi
[ "$run" = 1 ] || exit 0
# The test bundle runs directly, as scripts/test.sh runs the suite's.
tests=("$out/debug/apns-enginePackageTests.xctest" --testing-library swift-testing)

if [ "$swift_tests" = 1 ]; then
  echo "== sanitized tests: CAPNsTests, APNsMockTests, ShutdownRaceTests"
  # Swift's own runtime keeps some allocations to exit; leaks are judged by step 2.
  # timeout: a hang fails the run (the sanitized tests take ~25 s here).
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
    timeout 1200 "${tests[@]}" --filter "CAPNsTests|APNsMockTests|ShutdownRaceTests" \
    >"$out/sanitize-tests.log" 2>&1 && rc=0 || rc=$?
  # Judged by the log; its "Test run" line is not echoed, so that the last one in make
  # test's output stays the whole suite's.
  summary=$(grep -oE "Test run with [0-9]+ tests? .*passed.*" "$out/sanitize-tests.log" | tail -n 1)
  if grep -qE "ERROR: AddressSanitizer|runtime error:|SUMMARY: .*Sanitizer" "$out/sanitize-tests.log" ||
     [ -z "$summary" ] || [ "$rc" != 0 ]; then
    echo "sanitize.sh: the sanitized test bundle exited with status $rc" >&2
    # A bundle that died without a test report (a signal, a crash outside a test)
    # matches none of these: its last lines say why.
    { grep -E "✘|error:|ERROR: AddressSanitizer|runtime error:|SUMMARY" "$out/sanitize-tests.log" | head -n 40
      echo "-- the log's last lines:"; tail -n 25 "$out/sanitize-tests.log"; } >&2 || true
    echo "sanitize.sh: the sanitized tests failed; see $out/sanitize-tests.log" >&2
    exit 1
  fi
  echo "sanitized tests: ${summary#Test run with }"

  # The engine's cancellation, burst and shutdown paths with LeakSanitizer on: every
  # C message a cancelled or shut-down send took must be released (a skipped release
  # shows as thousands of leaked capns_message_create blocks). scripts/lsan.supp names
  # the two test-tooling allocations kept to exit (XCTest's, Foundation's Process).
  echo "== tests with LeakSanitizer: the engine's cancellation, burst and shutdown tests"
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1" LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp" \
    timeout 600 "${tests[@]}" \
    --filter "cancellingHalfTheCallers|aBurstOfTwentyThousand|ShutdownRaceTests" >"$out/leak-tests.log" 2>&1 || {
    { grep -E "✘|error:|ERROR: |SUMMARY|Direct leak" "$out/leak-tests.log" | head -n 40
      echo "-- the log's last lines:"; tail -n 25 "$out/leak-tests.log"; } >&2 || true
    echo "sanitize.sh: the leak-checked engine tests failed; see $out/leak-tests.log" >&2
    exit 1
  }
  echo "leak-checked engine tests: $(grep -oE "[0-9]+ tests? in [0-9]+ suites? passed" "$out/leak-tests.log" | tail -n 1)"
fi

if [ "$leak" = 1 ]; then
  bash scripts/gen-pki.sh "$out/pki"
  echo "== leak_drive (ASan + UBSan + LSan)"
  for transport in h2 curl; do
    echo "== $requests requests, $transport"
    timeout 1200 "$out/leak_drive" "$out/pki" "$requests" "$transport"
  done
fi
echo "sanitize.sh: clean"
