# Sourced by the scripts that run apns-send beside h2load on one mock.
#   send_inputs DIR N   writes DIR/payload.json (the payload of `make bench`) and
#                       DIR/tokens.txt (N distinct tokens, one a line)
send_inputs() {
  local dir=$1 n=$2
  python3 -c 'import json; print(json.dumps({"aps": {"alert": {"title": "Order update", "body": "x" * 150},
  "sound": "default"}, "id": 12345}, separators=(",", ":")))' >"$dir/payload.json"
  python3 -c "
with open('$dir/tokens.txt', 'w') as f:
    f.writelines('cd' * 24 + '%016x\n' % i for i in range(1, $n + 1))"
}
