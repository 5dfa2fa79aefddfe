#!/bin/sh
# tests/tls/mkcerts.sh DIR - the TLS tests' certificates, made afresh:
# two CAs (ca, other-ca), a server certificate for localhost and
# 127.0.0.1 signed by ca, a client certificate signed by ca. ECDSA P-256.
set -eu
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
for ca in ca other-ca; do
  key $ca.key
  openssl req -x509 -new -key $ca.key -sha256 -days 2 -subj "/CN=goro test $ca" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    -out $ca.pem 2>/dev/null
done
leaf() {  # name cn san eku
  key $1.key
  openssl req -new -key $1.key -subj "/CN=$2" -out $1.csr 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$3" "$4" > $1.ext
  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -sha256 \
    -extfile $1.ext -out $1.pem 2>/dev/null
}
leaf server localhost DNS:localhost,IP:127.0.0.1 serverAuth
leaf client "goro test client" DNS:client serverAuth,clientAuth
