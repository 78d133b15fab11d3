#!/usr/bin/env bash
# make test: what CI runs, phase by phase, each timed (scripts/timed.sh), then the total.
#   resolve      the package's dependencies, fetched once for both builds below
#   rules        the alert rules: promtool check rules and test rules (check-rules.sh)
#   demo-config  the example config as make demo-server rewrites it sends every app to
#                loopback, never to Apple (check-demo-config.sh)
#   build        swift build --build-tests (debug)
#   tests        the suite, less the engine's races and its fault matrix (ALONE)
#   guide        the commands of docs/getting-started-service.md and README.md as pasted,
#                with the debug build (check-service-guide.sh): seconds, after the suite
#   checks-build the fuzz harnesses and the sanitized build (fuzz.sh and sanitize.sh
#                --build-only), then the DocC catalogs (phase docs below), compiled beside
#                the build and the suite at the lowest CPU priority
#   docs         both libraries' DocC catalogs from the symbol graphs the sanitized build
#                wrote, every warning an error, every public symbol documented (docs.sh;
#                within checks-build)
#   api          schemathesis on apns-server and apns-mock against GET /openapi.json
#                (api-test.sh), while the checks' build finishes
#   tests-alone  ALONE, on their own once that build is done
#   fuzz         every libFuzzer harness for a few seconds (fuzz.sh --short), beside
#   sanitize     ASan/UBSan tests of the shim and the mock, a 10k-request leak check
#                per transport (sanitize.sh --short)
# Neither the build (its links and its waits on one module's interface) nor the suite
# (sockets, child processes, PostgreSQL) keeps both cores busy all the time: at nice 19
# the checks' compilers take only the CPU they leave idle, and a compiler or a test
# that wants a core gets it at once.
# The engine's races and its 10,000-token fault matrix run after the rest, on their own:
# beside the server suites (hundreds of hostile sockets, three servers on one PostgreSQL)
# two cores leave them starved for seconds at a time, which their deadlines read as
# faults. Alone they prove the same things without racing the machine. So do the kill -9
# tests that wait on the real clock (a batching window, quiet hours, a schedule, a copied
# database's holds): each must kill the server before an instant a few seconds ahead.
#   scripts/test.sh        Env: SWIFT (default swift).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
swift=${SWIFT:-swift}
alone='FaultMatrixTests|ShutdownRaceTests|killMidWindowThenExactlyOneSend|aScheduledNotificationSurvivesKillAndGoesOnce|aCopiedDatabaseServesTwoInstances'
start=$(date +%s)

failed() {
  echo "== make test: FAILED in phase $1 after $(( $(date +%s) - start )) s" >&2
  exit 1
}

# Resolved first, so that the sanitized build (its own scratch path) takes the same
# versions and the two builds never write Package.resolved at once.
scripts/timed.sh resolve "$swift" package resolve || failed resolve
scripts/timed.sh rules scripts/check-rules.sh || failed rules
scripts/timed.sh demo-config scripts/check-demo-config.sh || failed demo-config

# Its own process group, so that a failed run stops the whole build, compilers included.
# A new session is a new scheduling group too (Linux's autogroup), and groups share the
# CPU equally whatever their processes' nice: the group itself is set to nice 19.
mkdir -p .build
log=.build/checks-build.log
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null
  exec nice -n 19 scripts/timed.sh checks-build \
    bash -c "scripts/fuzz.sh --build-only && scripts/sanitize.sh --short --build-only \
      && scripts/timed.sh docs scripts/docs.sh --symbol-graphs .build-asan/symbol-graphs"' >"$log" 2>&1 &
checks=$!
trap 'kill -- -$checks 2>/dev/null' EXIT
trap 'exit 130' INT TERM

# With the index store, which costs compile time: on Linux the test bundle's list of
# tests is read from it (--disable-index-store leaves the discovery step without units).
scripts/timed.sh build "$swift" build --build-tests || failed build

# A checks' build that has already failed (a harness that no longer compiles) fails
# the run now, not after the suite.
checks_status=
if ! kill -0 $checks 2>/dev/null; then
  wait $checks
  checks_status=$?
  [ $checks_status = 0 ] || { tail -n 40 "$log" >&2; failed checks-build; }
fi

# The test bundle runs directly: `swift test --skip-build` would load and plan the
# package again for every run (tens of CPU-seconds on two cores) and start the bundle
# twice, once for XCTest, which has no tests here.
tests=(.build/debug/apns-enginePackageTests.xctest --testing-library swift-testing)

# A hung test must fail the run, not stall it; a run that crashed leaves no server behind:
# this checkout's apns-server and apns-mock children are killed after it, whatever its outcome.
scripts/timed.sh tests timeout 1200 "${tests[@]}" --skip "$alone"
status=$?
pkill -9 -f "^$root/\\.build/[^ ]*/apns-(server|mock) " || true
[ $status = 0 ] || failed tests

# The guides' commands, in one shell on a copy of the clone, the built binaries as $bin:
# a few seconds (PostgreSQL's initdb the most of them), and no server of the suite's left.
scripts/timed.sh guide scripts/check-service-guide.sh .build/debug || failed guide

# schemathesis runs while the checks' build finishes: it needs none of it, its budget is
# its time, and those compilers at nice 19 give way to it.
api_log=.build/api-phase.log
setsid scripts/timed.sh api scripts/api-test.sh --seconds 40 >"$api_log" 2>&1 &
api=$!
trap 'kill -- -$checks 2>/dev/null; kill -- -$api 2>/dev/null' EXIT

waited=$(date +%s)
wait $api
api_status=$?
# What is left of the checks' build is now all that runs: its group gets its fair share
# back, or any other work on the machine (at the usual nice 0) would leave it almost
# nothing. Raising a group's share needs root, as CI has; otherwise it stays at 19.
echo 0 >/proc/$checks/autogroup 2>/dev/null
if [ -z "$checks_status" ]; then wait $checks; status=$?; else status=$checks_status; fi
# Its own line and the docs phase's, which ran inside it.
grep '^== phase ' "$log"
echo "   (waited $(( $(date +%s) - waited )) s for it after the suite, schemathesis first running beside it)"
if [ $status != 0 ]; then
  tail -n 40 "$log" >&2
  failed checks-build
fi
trap - EXIT
cat "$api_log"
[ $api_status = 0 ] || failed api

scripts/timed.sh tests-alone timeout 600 "${tests[@]}" --filter "$alone" || failed tests-alone
# The fuzzers (one core, each for its few seconds) beside the sanitizer runs, which
# leave most of a core idle: neither waits on the other.
fuzz_log=.build/fuzz-phase.log
setsid scripts/timed.sh fuzz scripts/fuzz.sh --short --no-build >"$fuzz_log" 2>&1 &
fuzz=$!
trap 'kill -- -$fuzz 2>/dev/null' EXIT
scripts/timed.sh sanitize scripts/sanitize.sh --short --no-build
status=$?
wait $fuzz
fuzz_status=$?
trap - EXIT
cat "$fuzz_log"
[ $fuzz_status = 0 ] || failed fuzz
[ $status = 0 ] || failed sanitize
echo "== make test: passed in $(( $(date +%s) - start )) s"
