/*
 * test_tls_pick.c: choosing between certificates by SNI name and key type
 * (worker/net/tls_pick.c): parsing the ClientHello's server_name,
 * signature_algorithms and supported_versions extensions and cipher list
 * strictly, deciding which key types a client can verify, and choosing
 * among certificates of equal name match.
 */
#include <string.h>

#include <openssl/evp.h>
#include <openssl/nid.h>

#include "tests/unit/unit.h"
#include "worker/net/net.h"

/* ---- ClientHello pieces ------------------------------------------------ */

/* The extension contents in <buf>, built from u16 values behind a u16 (or
 * u8, <short_len>) length. Returns the length. */
static size_t u16_list(uint8_t *buf, int short_len, const uint16_t *v, size_t n)
{
	size_t o = 0;

	if (short_len) {
		buf[o++] = (uint8_t)(2 * n);
	} else {
		buf[o++] = (uint8_t)((2 * n) >> 8);
		buf[o++] = (uint8_t)(2 * n);
	}
	for (size_t i = 0; i < n; i++) {
		buf[o++] = (uint8_t)(v[i] >> 8);
		buf[o++] = (uint8_t)v[i];
	}
	return o;
}

static size_t sni_ext(uint8_t *buf, const char *host)
{
	size_t n = strlen(host);

	buf[0] = (uint8_t)((n + 3) >> 8);
	buf[1] = (uint8_t)(n + 3);
	buf[2] = 0; /* host_name */
	buf[3] = (uint8_t)(n >> 8);
	buf[4] = (uint8_t)n;
	memcpy(buf + 5, host, n);
	return n + 5;
}

/* A hello to parse; each piece is optional. */
struct hello {
	uint8_t suites[64], sni[300], sigalgs[64], versions[32];
	struct tls_pick_raw raw;
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void set_suites(struct hello *c, const uint16_t *v, size_t n)
{
	c->raw.suites_len = u16_list(c->suites, 0, v, n) - 2; /* a bare list */
	memmove(c->suites, c->suites + 2, c->raw.suites_len);
	c->raw.suites = c->suites;
}

static void set_sigalgs(struct hello *c, const uint16_t *v, size_t n)
{
	c->raw.sigalgs_len = u16_list(c->sigalgs, 0, v, n);
	c->raw.sigalgs = c->sigalgs;
}

static void set_versions(struct hello *c, const uint16_t *v, size_t n)
{
	c->raw.versions_len = u16_list(c->versions, 1, v, n);
	c->raw.versions = c->versions;
}

static void set_sni(struct hello *c, const char *host)
{
	c->raw.sni_len = sni_ext(c->sni, host);
	c->raw.sni = c->sni;
}

static const uint16_t SUITES_BOTH[] = {0x1301, 0xc02b, 0xc02f};
static const uint16_t SUITES_RSA[] = {0xc02f};
static const uint16_t SUITES_ECDSA[] = {0xcca9};
static const uint16_t SUITES_OTHER[] = {0x009c, 0xc009, 0xc013}; /* ones weir does not configure */
static const uint16_t V13[] = {0x0a0a, 0x0304, 0x0303};          /* GREASE first, as Chrome */
static const uint16_t V12[] = {0x0303};
static const uint16_t SIG_ALL[] = {0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601};
static const uint16_t SIG_ECDSA256[] = {0x0403};
static const uint16_t SIG_RSA[] = {0x0804, 0x0401};
static const uint16_t SIG_PKCS[] = {0x0401, 0x0201};

static struct tls_pick_hello parse(struct hello *c)
{
	struct tls_pick_hello h;

	CU_ASSERT_EQUAL_FATAL(tls_pick_parse_hello(&c->raw, &h), 0);
	return h;
}

/* ---- parsing ------------------------------------------------------------- */

static void test_a_full_hello_is_read(void)
{
	struct hello c = {0};
	struct tls_pick_hello h;

	set_suites(&c, SUITES_BOTH, N(SUITES_BOTH));
	set_sni(&c, "App.Test");
	set_sigalgs(&c, SIG_ALL, N(SIG_ALL));
	set_versions(&c, V13, N(V13));
	h = parse(&c);
	CU_ASSERT_EQUAL(h.host_len, 8);
	CU_ASSERT(h.host && memcmp(h.host, "App.Test", 8) == 0);
	CU_ASSERT(h.tls13);
	CU_ASSERT(h.has_sigalgs);
	CU_ASSERT_EQUAL(h.sigalgs, TLS_PICK_SIG_P256 | TLS_PICK_SIG_P384 | TLS_PICK_SIG_PSS | TLS_PICK_SIG_PKCS);
	CU_ASSERT(h.ecdsa_suite && h.rsa_suite);
}

static void test_absent_extensions_leave_their_fields_empty(void)
{
	struct hello c = {0};
	struct tls_pick_hello h;

	set_suites(&c, SUITES_RSA, N(SUITES_RSA));
	h = parse(&c);
	CU_ASSERT_PTR_NULL(h.host);
	CU_ASSERT(!h.tls13 && !h.has_sigalgs && !h.sigalgs && !h.ecdsa_suite);
	CU_ASSERT(h.rsa_suite);
	/* an empty cipher list parses (BoringSSL refuses it later) */
	c.raw.suites_len = 0;
	h = parse(&c);
	CU_ASSERT(!h.rsa_suite);
	/* and suites weir does not configure do not count */
	set_suites(&c, SUITES_OTHER, N(SUITES_OTHER));
	h = parse(&c);
	CU_ASSERT(!h.rsa_suite && !h.ecdsa_suite);
}

static void test_supported_versions_without_13_means_tls12(void)
{
	struct hello c = {0};

	set_suites(&c, SUITES_BOTH, N(SUITES_BOTH));
	set_versions(&c, V12, N(V12));
	CU_ASSERT(!parse(&c).tls13);
}

static int parses(struct hello *c)
{
	struct tls_pick_hello h;

	return tls_pick_parse_hello(&c->raw, &h) == 0;
}

static void test_malformed_sni_is_refused(void)
{
	struct hello c = {0};
	char big[300];

	set_sni(&c, "a.test");
	CU_ASSERT(parses(&c));
	/* every length one short or one long, and trailing bytes */
	c.raw.sni_len--;
	CU_ASSERT(!parses(&c));
	c.raw.sni_len += 2;
	CU_ASSERT(!parses(&c));
	set_sni(&c, "a.test");
	c.sni[1]++; /* list length past the end */
	CU_ASSERT(!parses(&c));
	set_sni(&c, "a.test");
	c.sni[4]--; /* name shorter than the list says */
	CU_ASSERT(!parses(&c));
	set_sni(&c, "a.test");
	c.sni[2] = 1; /* not host_name */
	CU_ASSERT(!parses(&c));
	set_sni(&c, "a\x01test");
	c.sni[6] = 0; /* a NUL inside */
	CU_ASSERT(!parses(&c));
	set_sni(&c, "");
	CU_ASSERT(!parses(&c));
	memset(big, 'a', 256);
	big[256] = '\0';
	set_sni(&c, big);
	CU_ASSERT(!parses(&c));
	big[255] = '\0';
	set_sni(&c, big);
	CU_ASSERT(parses(&c));
	/* an empty extension, and one byte of it */
	c.raw.sni_len = 0;
	CU_ASSERT(!parses(&c));
	c.raw.sni_len = 1;
	CU_ASSERT(!parses(&c));
}

static void test_malformed_sigalgs_and_versions_are_refused(void)
{
	struct hello c = {0};

	set_sigalgs(&c, SIG_ALL, N(SIG_ALL));
	CU_ASSERT(parses(&c));
	c.raw.sigalgs_len--; /* odd */
	CU_ASSERT(!parses(&c));
	c.raw.sigalgs_len = 1;
	CU_ASSERT(!parses(&c));
	set_sigalgs(&c, SIG_ALL, 0); /* an empty list */
	CU_ASSERT(!parses(&c));
	set_sigalgs(&c, SIG_ALL, 2);
	c.sigalgs[1] = 3; /* odd list length inside a right-sized extension */
	c.raw.sigalgs_len = 5;
	CU_ASSERT(!parses(&c));
	c.raw.sigalgs = NULL;

	set_versions(&c, V13, N(V13));
	CU_ASSERT(parses(&c));
	c.raw.versions_len++; /* a trailing byte */
	CU_ASSERT(!parses(&c));
	c.raw.versions_len -= 2; /* the list is cut */
	CU_ASSERT(!parses(&c));
	set_versions(&c, V13, 0);
	CU_ASSERT(!parses(&c));
	c.raw.versions_len = 0;
	CU_ASSERT(!parses(&c));
	c.raw.versions = NULL;

	set_suites(&c, SUITES_BOTH, N(SUITES_BOTH));
	c.raw.suites_len--;
	CU_ASSERT(!parses(&c));
}

/* ---- key types and what a client can verify ------------------------------ */

static void test_key_types_follow_the_curve(void)
{
	CU_ASSERT_EQUAL(tls_pick_key_type(EVP_PKEY_RSA, NID_undef), TLS_PICK_KEY_RSA);
	CU_ASSERT_EQUAL(tls_pick_key_type(EVP_PKEY_EC, NID_X9_62_prime256v1), TLS_PICK_KEY_P256);
	CU_ASSERT_EQUAL(tls_pick_key_type(EVP_PKEY_EC, NID_secp384r1), TLS_PICK_KEY_P384);
	CU_ASSERT_EQUAL(tls_pick_key_type(EVP_PKEY_EC, NID_secp521r1), TLS_PICK_KEY_P521);
	CU_ASSERT_EQUAL(tls_pick_key_type(EVP_PKEY_EC, NID_secp224r1), TLS_PICK_KEY_OTHER);
	CU_ASSERT_EQUAL(tls_pick_key_type(EVP_PKEY_ED25519, NID_undef), TLS_PICK_KEY_OTHER);
}

static void test_tls13_needs_the_scheme_of_the_curve_only(void)
{
	struct hello c = {0};
	struct tls_pick_hello h;

	/* no TLS 1.2 ECDSA suite: irrelevant, 1.3 is what it gets */
	set_suites(&c, SUITES_RSA, N(SUITES_RSA));
	set_versions(&c, V13, N(V13));
	set_sigalgs(&c, SIG_ECDSA256, N(SIG_ECDSA256));
	h = parse(&c);
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_P384));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_OTHER));
	/* PKCS#1 alone does not do for RSA in 1.3 */
	set_sigalgs(&c, SIG_PKCS, N(SIG_PKCS));
	h = parse(&c);
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
	set_sigalgs(&c, SIG_RSA, N(SIG_RSA));
	h = parse(&c);
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	/* a 1.3 hello without signature_algorithms can verify nothing */
	c.raw.sigalgs = NULL;
	h = parse(&c);
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
}

static void test_tls12_needs_the_suite_as_well(void)
{
	struct hello c = {0};
	struct tls_pick_hello h;

	set_sigalgs(&c, SIG_ALL, N(SIG_ALL));
	set_suites(&c, SUITES_RSA, N(SUITES_RSA));
	h = parse(&c); /* no supported_versions: TLS 1.2 at most */
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
	set_suites(&c, SUITES_ECDSA, N(SUITES_ECDSA));
	set_versions(&c, V12, N(V12));
	h = parse(&c);
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_P384));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_P521)); /* 0x0603 not listed */
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
	/* the suite, but not the scheme */
	set_suites(&c, SUITES_BOTH, N(SUITES_BOTH));
	set_sigalgs(&c, SIG_PKCS, N(SIG_PKCS));
	h = parse(&c);
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_RSA)); /* PKCS#1 is fine in 1.2 */
}

static void test_tls12_without_sigalgs_allows_the_suites_key_type(void)
{
	struct hello c = {0};
	struct tls_pick_hello h;

	set_suites(&c, SUITES_ECDSA, N(SUITES_ECDSA));
	h = parse(&c);
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_P256));
	CU_ASSERT(tls_pick_key_usable(&h, TLS_PICK_KEY_P521));
	CU_ASSERT(!tls_pick_key_usable(&h, TLS_PICK_KEY_RSA));
}

/* ---- the choice ------------------------------------------------------------ */

/* ECDSA and RSA for the same names, in either order, then one name only
 * the third (RSA) certificate has, and a wildcard both of the pair have. */
static const struct tls_name EC_FIRST[] = {
    {"app.test", 8, 0}, {"*.wild.test", 11, 0}, {"app.test", 8, 1}, {"*.wild.test", 11, 1}, {"rsa.test", 8, 2},
};
static const uint8_t EC_FIRST_KEYS[] = {TLS_PICK_KEY_P256, TLS_PICK_KEY_RSA, TLS_PICK_KEY_RSA};
static const uint8_t RSA_FIRST_KEYS[] = {TLS_PICK_KEY_RSA, TLS_PICK_KEY_P256, TLS_PICK_KEY_RSA};

static struct tls_pick_hello client(const char *host, int tls13, const uint16_t *sig, size_t nsig,
                                    const uint16_t *suites, size_t nsuites)
{
	static struct hello c; /* the host points into it */

	memset(&c, 0, sizeof(c));
	if (host)
		set_sni(&c, host);
	if (tls13)
		set_versions(&c, V13, N(V13));
	if (sig)
		set_sigalgs(&c, sig, nsig);
	set_suites(&c, suites, nsuites);
	return parse(&c);
}

static int choose(const uint8_t *keys, const struct tls_pick_hello *h)
{
	uint64_t sib = tls_pick_find_siblings(EC_FIRST, N(EC_FIRST), 3);

	return tls_pick_choose_cert(EC_FIRST, N(EC_FIRST), keys, 3, sib, h);
}

static void test_ecdsa_is_preferred_when_the_client_can_verify_it(void)
{
	struct tls_pick_hello h;

	for (int tls13 = 0; tls13 < 2; tls13++) {
		h = client("app.test", tls13, SIG_ALL, N(SIG_ALL), SUITES_BOTH, N(SUITES_BOTH));
		CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 0);
		CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 1);
		/* the wildcard both carry, in any case */
		h = client("X.Wild.Test", tls13, SIG_ALL, N(SIG_ALL), SUITES_BOTH, N(SUITES_BOTH));
		CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 0);
		CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 1);
	}
}

static void test_rsa_is_served_to_a_client_that_cannot_verify_ecdsa(void)
{
	struct tls_pick_hello h;

	h = client("app.test", 1, SIG_RSA, N(SIG_RSA), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 1);
	CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 0);
	/* TLS 1.2 with the ECDSA scheme but only an RSA suite */
	h = client("app.test", 0, SIG_ALL, N(SIG_ALL), SUITES_RSA, N(SUITES_RSA));
	CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 1);
	CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 0);
}

static void test_a_client_that_can_verify_neither_gets_the_first(void)
{
	struct tls_pick_hello h;

	h = client("app.test", 1, SIG_PKCS, N(SIG_PKCS), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 0);
	CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 0);
	h = client(NULL, 1, NULL, 0, SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 0);
	CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 0);
}

static void test_a_name_one_certificate_carries_gets_that_one(void)
{
	struct tls_pick_hello h;

	/* rsa.test is only on certificate 2: served even to an ECDSA lover,
	 * and even to a client that cannot verify it */
	h = client("rsa.test", 1, SIG_ALL, N(SIG_ALL), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 2);
	h = client("rsa.test", 1, SIG_ECDSA256, N(SIG_ECDSA256), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 2);
}

static void test_without_sni_or_a_match_the_default_pair_is_chosen_from(void)
{
	struct tls_pick_hello h;

	for (int i = 0; i < 2; i++) {
		const char *host = i ? "unknown.test" : NULL;

		h = client(host, 1, SIG_ALL, N(SIG_ALL), SUITES_BOTH, N(SUITES_BOTH));
		CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 0);
		CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 1);
		h = client(host, 1, SIG_RSA, N(SIG_RSA), SUITES_BOTH, N(SUITES_BOTH));
		CU_ASSERT_EQUAL(choose(EC_FIRST_KEYS, &h), 1); /* never 2: its names differ */
		CU_ASSERT_EQUAL(choose(RSA_FIRST_KEYS, &h), 0);
	}
}

static void test_an_exact_name_beats_a_wildcard_pair(void)
{
	/* RSA has www exactly, the ECDSA one only the wildcard: exact wins
	 * even for a client preferring ECDSA (SNI semantics unchanged) */
	static const struct tls_name names[] = {
	    {"*.example.com", 13, 0},
	    {"www.example.com", 15, 1},
	    {"*.example.com", 13, 2},
	};
	static const uint8_t keys[] = {TLS_PICK_KEY_P256, TLS_PICK_KEY_RSA, TLS_PICK_KEY_RSA};
	struct tls_pick_hello h = client("www.example.com", 1, SIG_ALL, N(SIG_ALL), SUITES_BOTH, N(SUITES_BOTH));
	uint64_t sib = tls_pick_find_siblings(names, 3, 3);

	CU_ASSERT_EQUAL(sib, 1u | 4u);
	CU_ASSERT_EQUAL(tls_pick_choose_cert(names, 3, keys, 3, sib, &h), 1);
	h = client("api.example.com", 1, SIG_ALL, N(SIG_ALL), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(tls_pick_choose_cert(names, 3, keys, 3, sib, &h), 0);
	h = client("api.example.com", 1, SIG_RSA, N(SIG_RSA), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(tls_pick_choose_cert(names, 3, keys, 3, sib, &h), 2);
}

static void test_the_curve_decides_between_two_ecdsa_keys(void)
{
	static const struct tls_name names[] = {{"a.test", 6, 0}, {"a.test", 6, 1}, {"a.test", 6, 2}};
	static const uint8_t keys[] = {TLS_PICK_KEY_P384, TLS_PICK_KEY_RSA, TLS_PICK_KEY_P256};
	static const uint16_t p384[] = {0x0503, 0x0804};
	struct tls_pick_hello h = client("a.test", 1, SIG_ECDSA256, N(SIG_ECDSA256), SUITES_BOTH, N(SUITES_BOTH));

	CU_ASSERT_EQUAL(tls_pick_choose_cert(names, 3, keys, 3, 7, &h), 2);
	h = client("a.test", 1, p384, N(p384), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(tls_pick_choose_cert(names, 3, keys, 3, 7, &h), 0);
	h = client("a.test", 1, SIG_RSA, N(SIG_RSA), SUITES_BOTH, N(SUITES_BOTH));
	CU_ASSERT_EQUAL(tls_pick_choose_cert(names, 3, keys, 3, 7, &h), 1);
}

static void test_siblings_need_the_same_name_set(void)
{
	static const struct tls_name names[] = {
	    {"a.test", 6, 0}, {"b.test", 6, 0},                   /* 0: a, b */
	    {"b.test", 6, 1}, {"a.test", 6, 1},                   /* 1: b, a (same set) */
	    {"a.test", 6, 2},                                     /* 2: a subset */
	    {"a.test", 6, 3}, {"b.test", 6, 3}, {"c.test", 6, 3}, /* 3: a superset */
	    {"a.test", 6, 4}, {"b.test", 6, 4}, {"a.test", 6, 4}, /* 4: a repeat */
	};
	CU_ASSERT_EQUAL(tls_pick_find_siblings(names, N(names), 5), 1u | 2u | 16u);
	CU_ASSERT_EQUAL(tls_pick_find_siblings(names, N(names), 1), 1u);
}

static const struct unit_test tests[] = {
    {"a full hello is read", test_a_full_hello_is_read},
    {"absent extensions leave their fields empty", test_absent_extensions_leave_their_fields_empty},
    {"supported_versions without 1.3 means TLS 1.2", test_supported_versions_without_13_means_tls12},
    {"malformed server_name is refused", test_malformed_sni_is_refused},
    {"malformed signature_algorithms, supported_versions, suites are refused",
     test_malformed_sigalgs_and_versions_are_refused},
    {"key types follow the curve", test_key_types_follow_the_curve},
    {"TLS 1.3 needs the scheme of the key's curve only", test_tls13_needs_the_scheme_of_the_curve_only},
    {"TLS 1.2 needs the suite as well", test_tls12_needs_the_suite_as_well},
    {"TLS 1.2 without signature_algorithms allows the suite's key type",
     test_tls12_without_sigalgs_allows_the_suites_key_type},
    {"ECDSA is preferred when the client can verify it", test_ecdsa_is_preferred_when_the_client_can_verify_it},
    {"RSA is served to a client that cannot verify ECDSA", test_rsa_is_served_to_a_client_that_cannot_verify_ecdsa},
    {"a client that can verify neither gets the first", test_a_client_that_can_verify_neither_gets_the_first},
    {"a name one certificate carries gets that one", test_a_name_one_certificate_carries_gets_that_one},
    {"without SNI or a match the default pair is chosen from",
     test_without_sni_or_a_match_the_default_pair_is_chosen_from},
    {"an exact name beats a wildcard pair", test_an_exact_name_beats_a_wildcard_pair},
    {"the curve decides between two ECDSA keys", test_the_curve_decides_between_two_ecdsa_keys},
    {"siblings need the same name set", test_siblings_need_the_same_name_set},
};

UNIT_MAIN("worker/tls_pick", tests)
