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
#   swift_payload  JSONCompactor and DeviceToken (Sources/APNs), built with swiftc
#   swift_tokens   apns-send's token-file reader and --resume record reader (Sources/apns-send)
# Each runs FUZZ_SECONDS (default 60) with AddressSanitizer + UBSan, starting
# from fuzz/corpus/<name>/ (new finds go to .build-fuzz/corpus/<name>/, the
# checked-in seeds stay small). A crash stops the script with the reproducer's
# path: rerun it with `.build-fuzz/<name> <file>`.
#   scripts/fuzz.sh [--short] [NAME...]     --short: 5 s each (make test, CI)
# Env: FUZZ_SECONDS; CC and SWIFTC (default: the Swift toolchain's clang and swiftc,
# which carry libFuzzer and the sanitizer runtimes; lld comes with them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${FUZZ_SECONDS:-60}
if [ "${1:-}" = --short ]; then seconds=${FUZZ_SECONDS:-5}; shift; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(mock_json mock_jwt mock_judge mock_conn h2_client error_body proxy_answer key_pem swift_payload swift_tokens)

toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
CC=${CC:-$toolchain/clang}
SWIFTC=${SWIFTC:-$toolchain/swiftc}
out="$root/.build-fuzz"
mkdir -p "$out"

# lld: gold warns about every ASan symbol it cannot export.
cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fuse-ld=lld
        -D_GNU_SOURCE -Wall -Wno-unused-parameter
        -I"$root/Sources/CAPNs/include" -I"$root/Sources/CAPNs"
        -I"$root/Sources/CAPNsMock/include" -I"$root/Sources/CAPNsMock")
mock_all=("$root"/Sources/CAPNsMock/*.c)
shim_all=("$root"/Sources/CAPNs/*.c)
libs=(-lnghttp2 -lssl -lcrypto -lpthread)

build() {
  local name=$1
  case $name in
    mock_json)  "$CC" "${cflags[@]}" fuzz/fuzz_mock_json.c Sources/CAPNsMock/json.c -o "$out/$name" "${libs[@]}" ;;
    mock_jwt)   "$CC" "${cflags[@]}" fuzz/fuzz_mock_jwt.c fuzz/mock_fixture.c "${mock_all[@]}" \
                  Sources/CAPNs/jwt.c -o "$out/$name" "${libs[@]}" ;;
    mock_judge) "$CC" "${cflags[@]}" fuzz/fuzz_mock_judge.c fuzz/mock_fixture.c "${mock_all[@]}" \
                  Sources/CAPNs/jwt.c -o "$out/$name" "${libs[@]}" ;;
    mock_conn)  "$CC" "${cflags[@]}" fuzz/fuzz_mock_conn.c fuzz/mock_fixture.c "${mock_all[@]}" \
                  Sources/CAPNs/jwt.c -o "$out/$name" "${libs[@]}" ;;
    h2_client)  "$CC" "${cflags[@]}" fuzz/fuzz_h2_client.c "${shim_all[@]}" -o "$out/$name" -lcurl "${libs[@]}" ;;
    error_body) "$CC" "${cflags[@]}" fuzz/fuzz_error_body.c "${shim_all[@]}" -o "$out/$name" -lcurl "${libs[@]}" ;;
    proxy_answer) "$CC" "${cflags[@]}" fuzz/fuzz_proxy_answer.c "${shim_all[@]}" -o "$out/$name" -lcurl "${libs[@]}" ;;
    key_pem)    "$CC" "${cflags[@]}" fuzz/fuzz_key_pem.c Sources/CAPNs/jwt.c -o "$out/$name" "${libs[@]}" ;;
    swift_payload)
      "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -module-name APNs -use-ld=lld \
        fuzz/swift/PayloadFuzz.swift Sources/APNs/JSONCompactor.swift Sources/APNs/DeviceToken.swift \
        -o "$out/$name" ;;
    swift_tokens)
      "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -module-name apns_send -use-ld=lld \
        fuzz/swift/TokenFuzz.swift \
        Sources/apns-send/{LineReader,TokenLines,TokenMemory,BloomFilter,TokenFingerprint,ResumedResults,RecordLine,JSONScanner,OutputFormat,UsageError}.swift \
        -o "$out/$name" ;;
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
  echo "== $name: build"
  build "$name"
  mkdir -p "$out/corpus/$name" "$out/crashes/$name" "fuzz/corpus/$name"
  echo "== $name: ${seconds}s"
  # -rss_limit_mb: the deep-nesting and huge-frame inputs must not pass by eating memory;
  # -timeout: one input that takes this long is a hang to report (libFuzzer's default is 20 min).
  if ! "$out/$name" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$out/crashes/$name/" "$out/corpus/$name" "fuzz/corpus/$name" \
       >"$out/$name.log" 2>&1; then
    tail -n 40 "$out/$name.log" >&2
    echo "fuzz.sh: $name FAILED; reproducer in $out/crashes/$name/" >&2
    exit 1
  fi
  grep -E '^stat::number_of_executed_runs|^#[0-9]+.*DONE' "$out/$name.log" | tail -n 2
done
echo "fuzz.sh: all harnesses ran clean (${seconds}s each)"
