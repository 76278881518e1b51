#!/bin/sh
# tls_certs.sh DIR -- makes the certificates the TLS tests need, at test time, with the
# openssl CLI (nothing secret is ever committed). Works with OpenSSL 3.0 (Debian 12):
# the expired certificate is issued with `openssl ca -startdate/-enddate` (x509's
# -not_before/-not_after need 3.4). EC P-256 keys: quick to make on a busy machine.
#
#   ca.crt, ca.key            the test CA
#   server.crt, server.key    CN=localhost, subjectAltName IP:127.0.0.1, DNS:localhost
#   expired.crt               the same subject and key, valid only on 2020-01-01
#   client.crt, client.key    a client certificate (clientAuth) from the same CA
#   other-ca.crt              an unrelated CA (its key is deleted)
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -out ca.crt -days 2 -subj "/CN=credisson test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
key other-ca.key
openssl req -x509 -new -key other-ca.key -out other-ca.crt -days 2 -subj "/CN=some other CA"
rm -f other-ca.key

key server.key
openssl req -new -key server.key -out server.csr -subj "/CN=localhost"
cat > ca.cnf <<'EOF'
[ca]
default_ca = test_ca
[test_ca]
database = db/index.txt
new_certs_dir = db
serial = db/serial
default_md = sha256
policy = any_name
copy_extensions = none
unique_subject = no
[any_name]
commonName = supplied
[server]
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[client]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
EOF
mkdir -p db
: > db/index.txt
echo 1000 > db/serial
sign() { # csr out extensions [startdate enddate | days]
    if [ $# -eq 5 ]; then
        openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in "$1" -out "$2" \
            -extensions "$3" -startdate "$4" -enddate "$5" -notext 2>/dev/null
    else
        openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in "$1" -out "$2" \
            -extensions "$3" -days 2 -notext 2>/dev/null
    fi
}
sign server.csr server.crt server
sign server.csr expired.crt server 20200101000000Z 20200102000000Z

key client.key
openssl req -new -key client.key -out client.csr -subj "/CN=credisson test client"
sign client.csr client.crt client
rm -rf db ca.cnf ./*.csr
