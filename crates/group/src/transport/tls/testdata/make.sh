#!/usr/bin/env bash
# Makes the certificates the TLS unit tests use (run once, output committed; valid 100 years):
# two unrelated CAs, two node certificates of CA "a", one of CA "b". The same recipe as
# `lockstep cluster up` (crates/cluster/src/certs.rs): EC P-256 keys in PKCS#8, v3 extensions.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
node_ext=$(mktemp)
trap 'rm -f "$node_ext" ./*.csr ./*.srl' EXIT
ca() {
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
        -keyout "$1-ca-key.pem" -out "$1-ca.pem" -subj "/CN=Lockstep test CA $1" -config /dev/null \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -addext "subjectKeyIdentifier=hash"
}
node() {
    local ca=$1 name=$2
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
        "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=IP:127.0.0.1,DNS:$name" \
        "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" >"$node_ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name-key.pem" \
        -out "$name.csr" -subj "/CN=$name" -config /dev/null
    openssl x509 -req -in "$name.csr" -CA "$ca-ca.pem" -CAkey "$ca-ca-key.pem" -CAcreateserial \
        -days "$days" -extfile "$node_ext" -out "$name-cert.pem"
}
ca a
ca b
node a a-node1
node a a-node2
node b b-node1
rm -f ./*-ca-key.pem
