/*
 * hscost.c: what a TLS server's full handshake costs in public-key work,
 * in the library it is built against.
 *
 *   hscost [-n N]
 *
 * Built twice by tests/bench/hscost.sh: against Debian's BoringSSL (what
 * weir links) and against OpenSSL (what nginx and HAProxy link). Times N
 * (default 2000) of each of the server's operations in a full TLS 1.3
 * handshake with an ECDSA P-256 certificate, in CPU time of this process:
 *
 *   x25519    a key share made and the shared secret derived (ECDHE)
 *   p256_dh   the same with P-256, for clients that offer only that group
 *   ecdsa     one CertificateVerify signature, SHA-256 over 130 bytes
 *
 * and prints "lib=NAME x25519_us=.. p256_dh_us=.. ecdsa_us=.. sum_us=..",
 * sum being x25519 + ecdsa: the public-key work of one handshake as
 * curl, wrk or a browser offer it. Only the EVP interface both libraries
 * share is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/opensslv.h>

#ifdef OPENSSL_IS_BORINGSSL
#define LIB "boringssl"
#else
#define LIB "openssl"
#endif

static double cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
	fprintf(stderr, "hscost: %s failed\n", what);
	exit(1);
}

static EVP_PKEY *keygen(int id, int nid)
{
	EVP_PKEY_CTX *kc = EVP_PKEY_CTX_new_id(id, NULL);
	EVP_PKEY *k = NULL;

	if (!kc || EVP_PKEY_keygen_init(kc) <= 0)
		die("keygen init");
	if (nid && EVP_PKEY_CTX_set_ec_paramgen_curve_nid(kc, nid) <= 0)
		die("curve");
	if (EVP_PKEY_keygen(kc, &k) <= 0)
		die("keygen");
	EVP_PKEY_CTX_free(kc);
	return k;
}

/* One ECDHE as the server does it: its own key share, then the secret
 * with the client's share <peer>. */
static void ecdhe(int id, int nid, EVP_PKEY *peer)
{
	EVP_PKEY *mine = keygen(id, nid);
	EVP_PKEY_CTX *dc = EVP_PKEY_CTX_new(mine, NULL);
	unsigned char secret[64];
	size_t len = sizeof(secret);

	if (!dc || EVP_PKEY_derive_init(dc) <= 0 || EVP_PKEY_derive_set_peer(dc, peer) <= 0 ||
	    EVP_PKEY_derive(dc, secret, &len) <= 0)
		die("derive");
	EVP_PKEY_CTX_free(dc);
	EVP_PKEY_free(mine);
}

static void sign(EVP_PKEY *key)
{
	unsigned char msg[130], sig[128];
	size_t len = sizeof(sig);
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	memset(msg, 0x20, sizeof(msg));
	if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) <= 0 ||
	    EVP_DigestSign(md, sig, &len, msg, sizeof(msg)) <= 0)
		die("sign");
	EVP_MD_CTX_free(md);
}

int main(int argc, char **argv)
{
	int n = 2000, opt;
	EVP_PKEY *x_peer, *p_peer, *cert_key;
	double t0, x, p, s;

	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n' || (n = atoi(optarg)) <= 0) {
			fprintf(stderr, "usage: hscost [-n N]\n");
			return 2;
		}
	}
	x_peer = keygen(EVP_PKEY_X25519, 0);
	p_peer = keygen(EVP_PKEY_EC, NID_X9_62_prime256v1);
	cert_key = keygen(EVP_PKEY_EC, NID_X9_62_prime256v1);
	for (int i = 0; i < n / 10; i++) { /* warm */
		ecdhe(EVP_PKEY_X25519, 0, x_peer);
		sign(cert_key);
	}
	t0 = cpu_us();
	for (int i = 0; i < n; i++)
		ecdhe(EVP_PKEY_X25519, 0, x_peer);
	x = (cpu_us() - t0) / n;
	t0 = cpu_us();
	for (int i = 0; i < n; i++)
		ecdhe(EVP_PKEY_EC, NID_X9_62_prime256v1, p_peer);
	p = (cpu_us() - t0) / n;
	t0 = cpu_us();
	for (int i = 0; i < n; i++)
		sign(cert_key);
	s = (cpu_us() - t0) / n;
	printf("lib=%s x25519_us=%.1f p256_dh_us=%.1f ecdsa_us=%.1f sum_us=%.1f\n", LIB, x, p, s, x + s);
	return 0;
}
