/*
 * fuzz_jwt.c: a bearer token through worker/core/auth_jwt.c's checks, as a
 * route of type "jwt" runs them before the cache.
 *
 * The first byte picks what the rest is. Even: the token as a client sends
 * it (base64url parts, signature and all), which exercises the shape,
 * base64url, the header's JSON and the choice of key; nothing the fuzzer
 * makes verifies. Odd: a JOSE header and a payload, as JSON separated by a
 * NUL, which this target encodes and signs with the policy's HS256 secret,
 * so the payload is parsed and its claims checked as a verified token's
 * are. Either way the verdict must be an outcome of common/auth_result.h,
 * and a token let through must leave header lines that are "Name: value"
 * without CR, LF or NUL inside, and a consumer without control characters.
 *
 * The source is included to reach its static functions (as h2o's unit
 * tests do); the library's copy of auth_jwt.o is then never linked.
 */
#include "worker/core/auth_jwt.c"

#include <openssl/ec_key.h>
#include <openssl/hmac.h>
#include <openssl/nid.h>

#include "tests/fuzz/fuzz.h"

static const uint8_t secret[32] = "fuzz_jwt: an HS256 secret of 32";
static struct config_auth pol;
static struct auth_jwk keys[2];

static void setup(void)
{
	static struct shm_counters counters; /* a dropped claim is counted */
	EC_KEY *ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);

	wk.cnt = &counters;
	if (!ec || !EC_KEY_generate_key(ec) || !(keys[1].pkey = EVP_PKEY_new()) ||
	    !EVP_PKEY_assign_EC_KEY(keys[1].pkey, ec))
		abort();
	strcpy(keys[0].kid, "hs");
	keys[0].alg = JWT_HS256;
	keys[0].secret = (uint8_t *)secret;
	keys[0].secret_len = sizeof secret;
	strcpy(keys[1].kid, "es");
	keys[1].alg = JWT_ES256;
	pol.type = AUTH_JWT;
	pol.jwks = keys;
	pol.njwks = 2;
	strcpy(pol.issuer, "iss");
	strcpy(pol.audience, "aud");
	strcpy(pol.consumer_claim, "sub");
	strcpy(pol.consumer_header, "X-Consumer");
	strcpy(pol.claims[0].claim, "email");
	strcpy(pol.claims[0].header, "X-Email");
	strcpy(pol.claims[1].claim, "n");
	strcpy(pol.claims[1].header, "X-N");
	pol.nclaims = 2;
	pol.leeway = 30000;
}

static size_t b64u(const uint8_t *in, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0, i = 0;

	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = a[v >> 18];
		out[o++] = a[v >> 12 & 63];
		out[o++] = a[v >> 6 & 63];
		out[o++] = a[v & 63];
	}
	if (n - i == 1) {
		out[o++] = a[in[i] >> 2];
		out[o++] = a[(in[i] & 3) << 4];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 8 | in[i + 1];
		out[o++] = a[v >> 10];
		out[o++] = a[v >> 4 & 63];
		out[o++] = a[(v & 15) << 2];
	}
	return o;
}

static void check_entry(const struct jwt_entry *e)
{
	size_t i = 0;

	FUZZ_CHECK(e->hdrs_len <= sizeof e->hdrs);
	FUZZ_CHECK(e->consumer_len < sizeof e->consumer);
	for (size_t k = 0; k < e->consumer_len; k++)
		FUZZ_CHECK((unsigned char)e->consumer[k] >= 0x20 && e->consumer[k] != 0x7f);
	while (i < e->hdrs_len) {
		const char *line = e->hdrs + i, *end = memchr(line, '\n', e->hdrs_len - i);
		const char *colon = memchr(line, ':', e->hdrs_len - i);

		FUZZ_CHECK(end && end > line && end[-1] == '\r');
		FUZZ_CHECK(colon && colon < end && colon[1] == ' ');
		for (const char *p = line; p < end - 1; p++)
			FUZZ_CHECK(*p != '\r' && *p != '\0');
		i = (size_t)(end + 1 - e->hdrs);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char tok[JWT_TOKEN_MAX + 1];
	static struct jwt_entry e;
	size_t len = 0;
	int res;

	if (!pol.njwks)
		setup();
	if (size < 1 || size > 6000)
		return 0;
	if (!(data[0] & 1)) {
		len = size - 1;
		memcpy(tok, data + 1, len);
	} else {
		const uint8_t *h = data + 1, *nul = memchr(h, 0, size - 1);
		uint8_t mac[32];
		unsigned ml = 0;

		if (!nul)
			return 0;
		len = b64u(h, (size_t)(nul - h), tok);
		tok[len++] = '.';
		len += b64u(nul + 1, size - (size_t)(nul + 1 - data), tok + len);
		HMAC(EVP_sha256(), secret, sizeof secret, (const uint8_t *)tok, len, mac, &ml);
		tok[len++] = '.';
		len += b64u(mac, ml, tok + len);
	}
	memset(&e, 0, sizeof e);
	res = jwt_verify_token(&pol, tok, len, &e, 1700000000);
	FUZZ_CHECK(res >= 0 && res < AUTH_R_COUNT);
	FUZZ_CHECK(res != AUTH_R_MISSING && res != AUTH_R_BUSY && res != AUTH_R_STALE);
	if (res == AUTH_R_OK)
		check_entry(&e);
	return 0;
}
