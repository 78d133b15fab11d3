#!/usr/bin/env bash
# libFuzzer over the parsers that read untrusted bytes (fuzz/*.c, fuzz/swift/):
#   mock_json    the mock's JSON syntax check and flat-object readers (json.c)
#   mock_jwt     the mock's provider token check and cache (provider_token.c)
#   mock_judge   the mock's request handling behind an nghttp2 server session (judge.c)
#   mock_conn    the mock's connection layer (conn.c: TLS, reads, batched writes, close)
#                over real loopback TCP, with every fault option and two provider tokens
#   h2_client    the sender's nghttp2 client session (h2_session.c) fed a hostile
#                server's bytes; every request must complete exactly once
#   error_body   the sender's APNs error-body reader (sender.c)
#   proxy_answer the sender's CONNECT tunnel reading a proxy's answer (proxy_tunnel.c)
#   key_pem      the sender's .p8 loader (jwt.c)
#   swift_payload  JSONReader and DeviceToken (Sources/APNs), built with swiftc
#   swift_tokens   apns-send's token-file reader and --resume record reader (Sources/apns-send)
# Each runs FUZZ_SECONDS (default 60; one harness a core) with AddressSanitizer + UBSan, starting
# from fuzz/corpus/<name>/ (new finds go to .build-fuzz/corpus/<name>/, the
# checked-in seeds stay small). A crash stops the script with the reproducer's
# path (the harnesses running beside it finish first): rerun it with `.build-fuzz/<name> <file>`.
#   scripts/fuzz.sh [--short] [--build-only|--no-build] [NAME...]
#     --short: 5 s each (make test, CI); --build-only: compile the harnesses, run none;
#     --no-build: run the harnesses a --build-only run left (make test compiles them
#     while the suite runs).
# Env: FUZZ_SECONDS; CC and SWIFTC (default: the Swift toolchain's clang and swiftc,
# which carry libFuzzer and the sanitizer runtimes; lld comes with them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${FUZZ_SECONDS:-60}
build=1 fuzz=1 names=()
for arg in "$@"; do
  case $arg in
    --short) seconds=${FUZZ_SECONDS:-5} ;;
    --build-only) fuzz=0 ;;
    --no-build) build=0 ;;
    -*) echo "usage: $0 [--short] [--build-only|--no-build] [NAME...]" >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done
[ ${#names[@]} -gt 0 ] || names=(mock_json mock_jwt mock_judge mock_conn h2_client error_body proxy_answer key_pem swift_payload swift_tokens)

toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
CC=${CC:-$toolchain/clang}
SWIFTC=${SWIFTC:-$toolchain/swiftc}
out="$root/.build-fuzz"
mkdir -p "$out"

cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -D_GNU_SOURCE -Wall -Wno-unused-parameter
        -I"$root/Sources/CAPNs/include" -I"$root/Sources/CAPNs"
        -I"$root/Sources/CAPNsMock/include" -I"$root/Sources/CAPNsMock")
libs=(-lnghttp2 -lssl -lcrypto -lpthread)
jobs=$(nproc 2>/dev/null || echo 2)

# Each C source is compiled once (both cores at a time) and each harness links the
# objects it needs: the mock's and the shim's files serve several harnesses.
obj="$out/obj"
mkdir -p "$obj"
o() { local src; for src in "$@"; do src=${src#"$root"/}; echo "$obj/${src//\//_}.o"; done; }
each() {  # FUNCTION ARG...: FUNCTION ARG for every ARG, $jobs at a time; fails when any failed
  local fn=$1 arg pid pids=() failed=0
  shift
  for arg in "$@"; do
    "$fn" "$arg" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return $failed
}
compile() { "$CC" "${cflags[@]}" -c "$1" -o "$(o "$1")"; }
mock_all=($(cd "$root" && o Sources/CAPNsMock/*.c))
shim_all=($(cd "$root" && o Sources/CAPNs/*.c))
fixture=$(o fuzz/mock_fixture.c)
jwt=$(o Sources/CAPNs/jwt.c)

link() {  # NAME OBJECT...: the harness NAME from its main (fuzz/fuzz_NAME.c) and OBJECTs
  local name=$1; shift
  # lld: gold warns about every ASan symbol it cannot export.
  "$CC" "${cflags[@]}" -fuse-ld=lld "$(o "fuzz/fuzz_$name.c")" "$@" -o "$out/$name" "${libs[@]}"
}

build() {
  local name=$1
  case $name in
    mock_json)  link "$name" "$(o Sources/CAPNsMock/json.c)" ;;
    mock_jwt|mock_judge|mock_conn) link "$name" "$fixture" "${mock_all[@]}" "$jwt" ;;
    h2_client|error_body|proxy_answer) link "$name" "${shim_all[@]}" ;;
    key_pem)    link "$name" "$jwt" ;;
    swift_payload)
      "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -module-name APNs -package-name apns_engine -use-ld=lld \
        fuzz/swift/PayloadFuzz.swift Sources/APNs/{JSONReader,JSONString,DeviceToken}.swift \
        -o "$out/$name" ;;
    swift_tokens)
      # The record reader reads JSON through the library's reader: that reader as a
      # module of its own (APNs, in this package) that the harness imports.
      mkdir -p "$out/swift_tokens_modules"
      "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -module-name APNs -package-name apns_engine \
        -emit-module -emit-module-path "$out/swift_tokens_modules/APNs.swiftmodule" \
        -emit-library -static -o "$out/swift_tokens_modules/libAPNs.a" Sources/APNs/{JSONReader,JSONString}.swift
      "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -module-name apns_send -package-name apns_engine -use-ld=lld \
        -I "$out/swift_tokens_modules" fuzz/swift/TokenFuzz.swift \
        Sources/apns-send/{LineReader,TokenLines,TokenMemory,BloomFilter,TokenFingerprint,ResumedResults,RecordLine,OutputFormat,UsageError}.swift \
        "$out/swift_tokens_modules/libAPNs.a" -o "$out/$name" ;;
    *) echo "fuzz.sh: unknown harness $name" >&2; exit 2 ;;
  esac
}

cd "$root"
# The mock harnesses need a certificate and provider keys: throw-away ones.
export FUZZ_PKI="$out/pki"
bash scripts/gen-pki.sh "$FUZZ_PKI"

# Key seeds are made here, not checked in: no private key lives in the repository.
keys="$out/corpus/key_pem"
if [ ! -f "$keys/pkcs8_p256" ]; then
  mkdir -p "$keys"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$keys/pkcs8_p256" 2>/dev/null
  openssl ec -in "$keys/pkcs8_p256" -out "$keys/sec1_p256" 2>/dev/null
  openssl ec -in "$keys/pkcs8_p256" -pubout -out "$keys/public_p256" 2>/dev/null
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out "$keys/pkcs8_p384" 2>/dev/null
  openssl genpkey -algorithm ED25519 -out "$keys/pkcs8_ed25519" 2>/dev/null
  cp "$FUZZ_PKI/server.crt" "$keys/certificate"
  head -c 120 "$keys/pkcs8_p256" >"$keys/truncated"
fi

for name in "${names[@]}"; do
  case $name in
    mock_json|mock_jwt|mock_judge|mock_conn|h2_client|error_body|proxy_answer|key_pem|swift_payload|swift_tokens) ;;
    *) echo "fuzz.sh: unknown harness $name" >&2; exit 2 ;;
  esac
done

sources=(Sources/CAPNs/*.c Sources/CAPNsMock/*.c fuzz/mock_fixture.c)
for name in "${names[@]}"; do
  case $name in swift_*) ;; *) sources+=("fuzz/fuzz_$name.c") ;; esac
done
if [ "$build" = 1 ]; then
  echo "== compile: ${#sources[@]} C files, then ${#names[@]} harnesses"
  each compile "${sources[@]}" || { echo "fuzz.sh: compiling failed" >&2; exit 1; }
  each build "${names[@]}" || { echo "fuzz.sh: building a harness failed" >&2; exit 1; }
fi
[ "$fuzz" = 1 ] || exit 0

run() {
  local name=$1
  mkdir -p "$out/corpus/$name" "$out/crashes/$name" "fuzz/corpus/$name"
  # -rss_limit_mb: the deep-nesting and huge-frame inputs must not pass by eating memory;
  # -timeout: one input that takes this long is a hang to report (libFuzzer's default is 20 min).
  if ! "$out/$name" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$out/crashes/$name/" "$out/corpus/$name" "fuzz/corpus/$name" \
       >"$out/$name.log" 2>&1; then
    tail -n 40 "$out/$name.log" >&2
    echo "fuzz.sh: $name FAILED; reproducer in $out/crashes/$name/" >&2
    return 1
  fi
  echo "== $name: ${seconds}s: $(grep -aE '^#[0-9]+[[:space:]]+DONE' "$out/$name.log" | tail -n 1)"
}
# One harness a core: each is single-threaded, and its seconds are its own.
each run "${names[@]}" || exit 1
echo "fuzz.sh: all harnesses ran clean (${seconds}s each)"
