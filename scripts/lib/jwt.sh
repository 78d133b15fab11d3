# Sourced by the bench scripts: an ES256 provider token for h2load, which cannot sign one.
#   es256_jwt KEY.p8 KEY_ID TEAM_ID     prints header.claims.signature (iat: now)
# openssl signs header.claims; its DER signature becomes JOSE's raw r||s (32 bytes each).

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

es256_jwt() {
  local key=$1 key_id=$2 team_id=$3 header claims sig
  header=$(printf '{"alg":"ES256","kid":"%s"}' "$key_id" | b64url)
  claims=$(printf '{"iss":"%s","iat":%s}' "$team_id" "$(date +%s)" | b64url)
  sig=$(printf '%s.%s' "$header" "$claims" | openssl dgst -sha256 -sign "$key" | python3 -c '
import sys
der = sys.stdin.buffer.read()
def integer(i):
    assert der[i] == 2
    n = der[i + 1]
    return der[i + 2:i + 2 + n].lstrip(b"\0").rjust(32, b"\0"), i + 2 + n
r, i = integer(2)
s, _ = integer(i)
sys.stdout.buffer.write(r + s)' | b64url)
  [ -n "$sig" ] || { echo "es256_jwt: signing with $key failed" >&2; return 1; }
  printf '%s.%s.%s\n' "$header" "$claims" "$sig"
}
