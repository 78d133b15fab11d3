#!/usr/bin/env bash
# Throw-away key material for the demo and the tests, never for production:
#   ca.pem / ca.key          a local CA that clients trust with --cacert
#   server.crt / server.key  the mock's TLS certificate for 127.0.0.1 and localhost
#   AuthKey_<KEYID>.p8       an APNs-style provider key (PKCS#8 PEM, EC P-256)
#   AuthKey_<OTHERID>.p8     a second provider key, unknown to the mock unless configured
#   ids.env                  KEY_ID, OTHER_KEY_ID, TEAM_ID, TOPIC used with them
# Usage: scripts/gen-pki.sh OUTDIR   (does nothing if OUTDIR/ids.env already exists)
set -euo pipefail
out=${1:?usage: gen-pki.sh OUTDIR}
[ -f "$out/ids.env" ] && exit 0
mkdir -p "$out"
chmod 700 "$out"
tmp=$(mktemp -d "$out/.gen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

KEY_ID=DEMOKEY001
OTHER_KEY_ID=OTHERKEY02
TEAM_ID=DEMOTEAM01
TOPIC=com.mendmyi.repairminder

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
  -subj "/CN=apns-engine demo CA" -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/CN=localhost" -keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tmp/ext.cnf"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
  -days 3650 -extfile "$tmp/ext.cnf" -out "$tmp/server.crt" 2>/dev/null
for id in "$KEY_ID" "$OTHER_KEY_ID"; do
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/AuthKey_$id.p8" 2>/dev/null
done
cat >"$tmp/ids.env" <<IDS
KEY_ID=$KEY_ID
OTHER_KEY_ID=$OTHER_KEY_ID
TEAM_ID=$TEAM_ID
TOPIC=$TOPIC
IDS
chmod 600 "$tmp"/*.key "$tmp"/*.p8
rm -f "$tmp/server.csr" "$tmp/ext.cnf" "$tmp/ca.srl"
mv "$tmp"/* "$out"/
