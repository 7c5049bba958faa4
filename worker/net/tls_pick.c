/*
 * tls_pick.c: the certificate for a ClientHello (tls_pick.h). Extensions
 * are read with CBS, every length checked against what is left; a hello
 * BoringSSL would refuse is reported as malformed rather than guessed at.
 */
#include "worker/net/net.h"

#include <string.h>

#include <openssl/bytestring.h>
#include <openssl/evp.h>
#include <openssl/nid.h>

/* the longest SNI host name BoringSSL accepts (TLSEXT_MAXLEN_host_name) */
#define SNI_MAX 255

int tls_pick_key_type(int pkey_id, int curve_nid)
{
	if (pkey_id == EVP_PKEY_RSA)
		return TLS_PICK_KEY_RSA;
	if (pkey_id != EVP_PKEY_EC)
		return TLS_PICK_KEY_OTHER;
	switch (curve_nid) {
	case NID_X9_62_prime256v1: return TLS_PICK_KEY_P256;
	case NID_secp384r1: return TLS_PICK_KEY_P384;
	case NID_secp521r1: return TLS_PICK_KEY_P521;
	default: return TLS_PICK_KEY_OTHER;
	}
}

/* server_name as BoringSSL reads it: one host_name entry, 1..255 bytes,
 * no NUL (RFC 6066 allows more entries; no client sends them). */
static int parse_sni(const uint8_t *p, size_t len, struct tls_pick_hello *out)
{
	CBS ext, list, name;
	uint8_t type;

	CBS_init(&ext, p, len);
	if (!CBS_get_u16_length_prefixed(&ext, &list) || !CBS_get_u8(&list, &type) ||
	    !CBS_get_u16_length_prefixed(&list, &name) || CBS_len(&list) != 0 || CBS_len(&ext) != 0)
		return -1;
	if (type != 0 || CBS_len(&name) == 0 || CBS_len(&name) > SNI_MAX || CBS_contains_zero_byte(&name))
		return -1;
	out->host = (const char *)CBS_data(&name);
	out->host_len = CBS_len(&name);
	return 0;
}

static int parse_sigalgs(const uint8_t *p, size_t len, struct tls_pick_hello *out)
{
	CBS ext, list;
	uint16_t alg;

	CBS_init(&ext, p, len);
	if (!CBS_get_u16_length_prefixed(&ext, &list) || CBS_len(&ext) != 0 || CBS_len(&list) == 0 ||
	    CBS_len(&list) % 2 != 0)
		return -1;
	out->has_sigalgs = 1;
	while (CBS_get_u16(&list, &alg)) {
		switch (alg) {
		case 0x0403: out->sigalgs |= TLS_PICK_SIG_P256; break;
		case 0x0503: out->sigalgs |= TLS_PICK_SIG_P384; break;
		case 0x0603: out->sigalgs |= TLS_PICK_SIG_P521; break;
		case 0x0804:
		case 0x0805:
		case 0x0806: out->sigalgs |= TLS_PICK_SIG_PSS; break;
		case 0x0201:
		case 0x0401:
		case 0x0501:
		case 0x0601: out->sigalgs |= TLS_PICK_SIG_PKCS; break;
		default: break; /* others, GREASE among them */
		}
	}
	return 0;
}

static int parse_versions(const uint8_t *p, size_t len, struct tls_pick_hello *out)
{
	CBS ext, list;
	uint16_t v;

	CBS_init(&ext, p, len);
	if (!CBS_get_u8_length_prefixed(&ext, &list) || CBS_len(&ext) != 0 || CBS_len(&list) == 0 ||
	    CBS_len(&list) % 2 != 0)
		return -1;
	while (CBS_get_u16(&list, &v))
		if (v == 0x0304)
			out->tls13 = 1;
	return 0;
}

/* Only the TLS 1.2 suites worker/net/tls.c configures count: another suite
 * the client offers can never be negotiated. */
static int parse_suites(const uint8_t *p, size_t len, struct tls_pick_hello *out)
{
	CBS list;
	uint16_t s;

	if (len % 2 != 0)
		return -1;
	CBS_init(&list, p, len);
	while (CBS_get_u16(&list, &s)) {
		switch (s) {
		case 0xc02b: /* ECDHE-ECDSA-AES128-GCM-SHA256 */
		case 0xc02c: /* ECDHE-ECDSA-AES256-GCM-SHA384 */
		case 0xcca9: /* ECDHE-ECDSA-CHACHA20-POLY1305 */ out->ecdsa_suite = 1; break;
		case 0xc02f: /* ECDHE-RSA-AES128-GCM-SHA256 */
		case 0xc030: /* ECDHE-RSA-AES256-GCM-SHA384 */
		case 0xcca8: /* ECDHE-RSA-CHACHA20-POLY1305 */ out->rsa_suite = 1; break;
		default: break;
		}
	}
	return 0;
}

int tls_pick_parse_hello(const struct tls_pick_raw *raw, struct tls_pick_hello *out)
{
	*out = (struct tls_pick_hello){0};
	if (parse_suites(raw->suites, raw->suites_len, out) < 0)
		return -1;
	if (raw->sni && parse_sni(raw->sni, raw->sni_len, out) < 0)
		return -1;
	if (raw->sigalgs && parse_sigalgs(raw->sigalgs, raw->sigalgs_len, out) < 0)
		return -1;
	if (raw->versions && parse_versions(raw->versions, raw->versions_len, out) < 0)
		return -1;
	return 0;
}

int tls_pick_key_usable(const struct tls_pick_hello *h, int key)
{
	unsigned sig;
	int suite;

	switch (key) {
	case TLS_PICK_KEY_P256:
		sig = TLS_PICK_SIG_P256;
		suite = h->ecdsa_suite;
		break;
	case TLS_PICK_KEY_P384:
		sig = TLS_PICK_SIG_P384;
		suite = h->ecdsa_suite;
		break;
	case TLS_PICK_KEY_P521:
		sig = TLS_PICK_SIG_P521;
		suite = h->ecdsa_suite;
		break;
	case TLS_PICK_KEY_RSA:
		/* TLS 1.3 dropped PKCS#1 v1.5 signatures in the handshake */
		sig = h->tls13 ? TLS_PICK_SIG_PSS : TLS_PICK_SIG_PSS | TLS_PICK_SIG_PKCS;
		suite = h->rsa_suite;
		break;
	default: return 0;
	}
	if (h->tls13)
		return (h->sigalgs & sig) != 0;
	/* TLS 1.2: the suite names the key type; no signature_algorithms
	 * means SHA-1 with that key type (RFC 5246 7.4.1.4.1) */
	return suite && (!h->has_sigalgs || (h->sigalgs & sig) != 0);
}

static int is_ecdsa(int key)
{
	return key == TLS_PICK_KEY_P256 || key == TLS_PICK_KEY_P384 || key == TLS_PICK_KEY_P521;
}

int tls_pick_choose_cert(const struct tls_name *names, int nnames, const uint8_t *keys, int ncerts, uint64_t siblings,
                         const struct tls_pick_hello *h)
{
	uint64_t cand = 0;
	int best = 0, first = 0;

	if (ncerts > 64)
		ncerts = 64;
	/* the candidates: every certificate with a name of the best match
	 * strength; the first such name's certificate is the fallback */
	for (int i = 0; h->host && i < nnames; i++) {
		int m = tls_name_match(names[i].name, names[i].len, h->host, h->host_len);
		int c = names[i].cert;

		if (m == 0 || m < best || c < 0 || c >= ncerts)
			continue;
		if (m > best) {
			best = m;
			cand = 0;
			first = c;
		}
		cand |= UINT64_C(1) << c;
	}
	if (!cand)
		cand = (siblings | 1) & (ncerts == 64 ? ~UINT64_C(0) : (UINT64_C(1) << ncerts) - 1);
	for (int k = 0; k < ncerts; k++)
		if ((cand >> k & 1) && is_ecdsa(keys[k]) && tls_pick_key_usable(h, keys[k]))
			return k;
	for (int k = 0; k < ncerts; k++)
		if ((cand >> k & 1) && keys[k] == TLS_PICK_KEY_RSA && tls_pick_key_usable(h, keys[k]))
			return k;
	return first;
}

/* Whether every name of certificate <a> is also one of <b>'s. */
static int names_within(const struct tls_name *names, int nnames, int a, int b)
{
	for (int i = 0; i < nnames; i++) {
		int found = 0;

		if (names[i].cert != a)
			continue;
		for (int j = 0; j < nnames && !found; j++)
			found = names[j].cert == b && names[j].len == names[i].len &&
			        memcmp(names[j].name, names[i].name, names[i].len) == 0; /* both lower case */
		if (!found)
			return 0;
	}
	return 1;
}

uint64_t tls_pick_find_siblings(const struct tls_name *names, int nnames, int ncerts)
{
	uint64_t m = 1;

	for (int k = 1; k < ncerts && k < 64; k++)
		if (names_within(names, nnames, k, 0) && names_within(names, nnames, 0, k))
			m |= UINT64_C(1) << k;
	return m;
}
