#!/usr/bin/env bash
# hscost.sh: the public-key work of one full TLS 1.3 handshake (an X25519
# key share and an ECDSA P-256 CertificateVerify) in the BoringSSL weir
# links and in the OpenSSL nginx and HAProxy link, side by side.
#
#   tests/bench/hscost.sh [-n N]
#
# Builds tests/bench/hscost.c twice (build/bench/hscost-boringssl and
# build/bench/hscost-openssl; libssl-dev is installed if missing) and runs
# each, one line per library: CPU microseconds per operation. This is what
# bounds `cpusplit.sh --tls --close` (a full handshake per request): the
# difference in sum_us is per handshake, before any of weir's own work.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -e /usr/include/openssl/opensslv.h ] ||
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libssl-dev) >/dev/null
mkdir -p build/bench
B=/usr/lib/x86_64-linux-gnu/android
cc -O2 -Wall -Wextra -Werror -I/usr/include/android -o build/bench/hscost-boringssl tests/bench/hscost.c \
	-L$B -Wl,-rpath,$B -lcrypto
# OpenSSL 3 deprecates the EC_KEY-era names the shared EVP calls pull in
cc -O2 -Wall -Wextra -Werror -Wno-deprecated-declarations -o build/bench/hscost-openssl tests/bench/hscost.c -lcrypto
build/bench/hscost-boringssl "$@"
build/bench/hscost-openssl "$@"
