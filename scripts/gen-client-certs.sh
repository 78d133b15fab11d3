#!/usr/bin/env bash
# Throw-away client certificates for certificate-auth tests, issued by the CA of
# scripts/gen-pki.sh (PKIDIR/ca.pem, ca.key), shaped like Apple Push Services
# certificates: subject UID = the bundle id, and Apple's environment extensions
# 1.2.840.113635.100.6.3.1 (development/sandbox) and .2 (production).
#   sandbox.p12      sandbox cert + key, password in password.txt
#   sandbox.pem      the same cert and key as one PEM (key unencrypted)
#   encrypted.pem    the same cert with its key encrypted (password.txt)
#   production.pem   production cert + key
#   legacy.p12       production cert, PKCS#12 in the old RC2/3DES format, no password
#   universal.pem    both environments and the topic extension .6.3.6 listing
#                    TOPIC, TOPIC.voip, TOPIC.complication and $EXTRA_TOPIC
#   other.pem        sandbox cert for OTHER_TOPIC (an app the tests' TOPIC is not)
#   expired.p12 / expired.pem     sandbox cert whose notAfter has passed (password.txt)
#   mismatch.pem     sandbox cert with another key
#   unmarked.pem     trusted, but neither Apple environment extension
#   wrongca.pem      sandbox cert from a CA the mock does not trust
#   wrong-password.txt, password.txt
# Usage: scripts/gen-client-certs.sh PKIDIR TOPIC   (writes PKIDIR/client; does nothing
# if PKIDIR/client/done exists)
set -euo pipefail
pki=${1:?usage: gen-client-certs.sh PKIDIR TOPIC}
topic=${2:?usage: gen-client-certs.sh PKIDIR TOPIC}
out="$pki/client"
[ -f "$out/done" ] && exit 0
mkdir -p "$out"
chmod 700 "$out"
tmp=$(mktemp -d "$out/.gen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

EXTRA_TOPIC=com.mendmyi.extra
OTHER_TOPIC=com.mendmyi.other
printf 'correct horse battery staple\n' >password.txt
printf 'wrong horse\n' >wrong-password.txt
PASS="file:password.txt"

cat >ext.cnf <<EOF
[sandbox]
extendedKeyUsage=clientAuth
1.2.840.113635.100.6.3.1=ASN1:NULL
[production]
extendedKeyUsage=clientAuth
1.2.840.113635.100.6.3.2=ASN1:NULL
[unmarked]
extendedKeyUsage=clientAuth
[universal]
extendedKeyUsage=clientAuth
1.2.840.113635.100.6.3.1=ASN1:NULL
1.2.840.113635.100.6.3.2=ASN1:NULL
1.2.840.113635.100.6.3.6=ASN1:SEQUENCE:topics
[topics]
t1=UTF8:$topic
k1=SEQUENCE:app
t2=UTF8:$topic.voip
k2=SEQUENCE:voip
t3=UTF8:$topic.complication
k3=SEQUENCE:complication
t4=UTF8:$EXTRA_TOPIC
k4=SEQUENCE:app
[app]
k=UTF8:app
[voip]
k=UTF8:voip
[complication]
k=UTF8:complication
EOF

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# cert NAME KEY UID SECTION DAYS [CA CAKEY]
cert() {
  local name=$1 k=$2 uid=$3 section=$4 days=$5 ca=${6:-$pki/ca.pem} cakey=${7:-$pki/ca.key}
  openssl req -new -key "$k" -subj "/UID=$uid/CN=Apple Push Services: $uid/OU=DEMOTEAM01" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA "$ca" -CAkey "$cakey" -CAcreateserial -days "$days" \
    -extfile ext.cnf -extensions "$section" -out "$name.crt" 2>/dev/null
}

key app.key
cert sandbox app.key "$topic" sandbox 365
openssl pkcs12 -export -in sandbox.crt -inkey app.key -passout "$PASS" -out sandbox.p12
cat sandbox.crt app.key >sandbox.pem
openssl pkcs8 -topk8 -in app.key -passout "$PASS" -out app-encrypted.key
cat sandbox.crt app-encrypted.key >encrypted.pem

cert production app.key "$topic" production 365
cat production.crt app.key >production.pem
openssl pkcs12 -export -legacy -in production.crt -inkey app.key -passout pass: -out legacy.p12

cert universal app.key "$topic" universal 365
cat universal.crt app.key >universal.pem

cert other app.key "$OTHER_TOPIC" sandbox 365
cat other.crt app.key >other.pem

cert expired app.key "$topic" sandbox -1
openssl pkcs12 -export -in expired.crt -inkey app.key -passout "$PASS" -out expired.p12
cat expired.crt app.key >expired.pem

key stranger.key
cat sandbox.crt stranger.key >mismatch.pem

cert unmarked app.key "$topic" unmarked 365
cat unmarked.crt app.key >unmarked.pem

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
  -subj "/CN=not the mock's CA" -keyout wrongca.key -out wrongca.ca 2>/dev/null
cert wrongca app.key "$topic" sandbox 365 wrongca.ca wrongca.key
cat wrongca.crt app.key >wrongca.pem

printf 'EXTRA_TOPIC=%s\nOTHER_TOPIC=%s\n' "$EXTRA_TOPIC" "$OTHER_TOPIC" >ids.env
rm -f ./*.csr ./*.srl ./*.crt ./*.key ./*.ca ext.cnf
chmod 600 ./*
mv ./* "$out"/
touch "$out/done"
