# Sourced by the benches that send the same notification: one payload and one token
# shape, so their figures compare.
#   bench_payload FILE    the payload of `make bench` (232 bytes compact)
#   bench_tokens FILE N   N distinct tokens, one a line
#   send_inputs DIR N     both, as DIR/payload.json and DIR/tokens.txt
bench_payload() {
  python3 -c 'import json; print(json.dumps({"aps": {"alert": {"title": "Order update", "body": "x" * 150},
  "sound": "default"}, "id": 12345}, separators=(",", ":")))' >"$1"
}
bench_tokens() {
  python3 -c "
with open('$1', 'w') as f:
    f.writelines('cd' * 24 + '%016x\n' % i for i in range(1, $2 + 1))"
}
send_inputs() {
  bench_payload "$1/payload.json"
  bench_tokens "$1/tokens.txt" "$2"
}
