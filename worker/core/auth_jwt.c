/*
 * auth_jwt.c: JSON Web Tokens (RFC 7519) for routes.auth type "jwt".
 *
 * The order of the checks is the order of trust: the token's shape and
 * base64url, then its header (alg, kid), then the key, then the
 * signature, and only then the claims; an unverified payload is never
 * parsed. The algorithm is the key's, fixed when the key was loaded: the
 * token's "alg" must name it, so "none", or HS256 signed with an RSA
 * public key as the secret, can never pass. A key is chosen by "kid"; a
 * token without one is tried against the keys of its algorithm.
 *
 * A verified token is kept in a per-worker cache keyed by its SHA-256,
 * with what it let through (consumer, header lines) and its expiry: a
 * repeated token costs one hash and a lookup until its "exp" (less the
 * leeway) passes. The cache is a fixed set-associative table: bounded,
 * allocated once.
 *
 * Jansson allocates as it parses; here it allocates from an arena of the
 * worker's, reset for every token, so parsing never reaches malloc and
 * a payload too big for the arena is refused as malformed.
 */
#include "worker/core/core.h"
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ec_key.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/mem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/auth_b64.h"
#include "common/auth_result.h"

#define JWT_TOKEN_MAX   8192
#define JWT_HEADER_MAX  1024
#define JWT_PAYLOAD_MAX 6144
#define JWT_SIG_MAX     1024
#define JWT_HDRS_MAX    512 /* claim header lines of one token */

#define CACHE_SETS 256
#define CACHE_WAYS 4

struct jwt_entry {
	uint8_t digest[32];
	const struct config_auth *p; /* NULL: free */
	int64_t exp;                 /* INT64_MAX: no exp */
	uint32_t stamp;
	uint8_t consumer_len;
	char consumer[AUTH_NAME_MAX];
	uint16_t hdrs_len;
	char hdrs[JWT_HDRS_MAX]; /* consumer header, then claim headers */
};

static struct {
	struct jwt_entry *cache; /* CACHE_SETS * CACHE_WAYS */
	uint32_t stamp;
	size_t arena_used;
	_Alignas(16) char arena[131072];
	uint8_t header[JWT_HEADER_MAX], payload[JWT_PAYLOAD_MAX], sig[JWT_SIG_MAX];
} jw;

static void *arena_alloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (n > sizeof jw.arena - jw.arena_used)
		return NULL;
	p = jw.arena + jw.arena_used;
	jw.arena_used += n;
	return p;
}

static void arena_free(void *p)
{
	(void)p; /* the whole arena goes at once */
}

/* Parses <len> bytes of JSON with the arena (the master's own loads of
 * JWKS files keep malloc: the hooks are set only around this call). */
static json_t *jwt_json(const uint8_t *buf, size_t len)
{
	json_t *j;

	json_set_alloc_funcs(arena_alloc, arena_free);
	j = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, NULL);
	json_set_alloc_funcs(malloc, free);
	return json_is_object(j) ? j : NULL;
}

int auth_jwt_init(void)
{
	uint32_t seed;

	/* Jansson seeds its hash from /dev/urandom on first use: not in the loop */
	RAND_bytes((uint8_t *)&seed, sizeof seed);
	json_object_seed(seed | 1);
	if (!jw.cache && (jw.cache = OPENSSL_malloc(CACHE_SETS * CACHE_WAYS * sizeof *jw.cache)))
		memset(jw.cache, 0, CACHE_SETS * CACHE_WAYS * sizeof *jw.cache);
	return jw.cache ? 0 : -1;
}

/* ---- signatures -------------------------------------------------------- */

static const EVP_MD *alg_md(enum auth_jwt_alg a)
{
	switch (a) {
	case JWT_HS384:
	case JWT_RS384:
	case JWT_ES384: return EVP_sha384();
	case JWT_HS512:
	case JWT_RS512: return EVP_sha512();
	case JWT_EDDSA: return NULL;
	default: return EVP_sha256();
	}
}

static int verify_hmac(const struct auth_jwk *k, const uint8_t *msg, size_t mlen, const uint8_t *sig, size_t slen)
{
	uint8_t mac[EVP_MAX_MD_SIZE];
	unsigned n = 0;

	if (!HMAC(alg_md(k->alg), k->secret, k->secret_len, msg, mlen, mac, &n))
		return 0;
	return slen == n && CRYPTO_memcmp(mac, sig, n) == 0;
}

/* ES256/384: the signature is r || s, each as long as the curve's order */
static int verify_ecdsa(const struct auth_jwk *k, const uint8_t *msg, size_t mlen, const uint8_t *sig, size_t slen)
{
	size_t half = k->alg == JWT_ES256 ? 32 : 48;
	uint8_t dg[EVP_MAX_MD_SIZE];
	unsigned dlen = 0;
	ECDSA_SIG *es;
	int ok = 0;

	if (slen != 2 * half || !EVP_Digest(msg, mlen, dg, &dlen, alg_md(k->alg), NULL))
		return 0;
	es = ECDSA_SIG_new();
	if (es && BN_bin2bn(sig, half, es->r) && BN_bin2bn(sig + half, half, es->s))
		ok = ECDSA_do_verify(dg, dlen, es, EVP_PKEY_get0_EC_KEY(k->pkey)) == 1;
	ECDSA_SIG_free(es);
	return ok;
}

static int verify_evp(const struct auth_jwk *k, const uint8_t *msg, size_t mlen, const uint8_t *sig, size_t slen)
{
	EVP_MD_CTX ctx;
	EVP_PKEY_CTX *pctx = NULL;
	int ok;

	EVP_MD_CTX_init(&ctx);
	ok = EVP_DigestVerifyInit(&ctx, &pctx, alg_md(k->alg), NULL, k->pkey) == 1;
	if (ok && k->alg == JWT_PS256)
		ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
		     EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, -1 /* the digest's length, RFC 7518 3.5 */) == 1;
	ok = ok && EVP_DigestVerify(&ctx, sig, slen, msg, mlen) == 1;
	EVP_MD_CTX_cleanup(&ctx);
	return ok;
}

static int jwt_verify(const struct auth_jwk *k, const uint8_t *msg, size_t mlen, const uint8_t *sig, size_t slen)
{
	int ok;

	switch (k->alg) {
	case JWT_HS256:
	case JWT_HS384:
	case JWT_HS512: ok = verify_hmac(k, msg, mlen, sig, slen); break;
	case JWT_ES256:
	case JWT_ES384: ok = verify_ecdsa(k, msg, mlen, sig, slen); break;
	default: ok = verify_evp(k, msg, mlen, sig, slen); break;
	}
	ERR_clear_error();
	return ok;
}

/* ---- the token --------------------------------------------------------- */

/* The token of the request: "Authorization: Bearer <t>", else the cookie
 * named in the policy. Returns its length, 0 if none, -1 if malformed. */
static long jwt_find(const struct txn *t, const struct config_auth *p, const char **tok)
{
	int dup;
	const struct hdr *h = auth_header(t, "authorization", &dup);

	if (h) {
		const char *v = h->value;
		size_t n = h->value_len;

		if (dup || n < 8 || strncasecmp(v, "bearer ", 7) != 0)
			return -1;
		v += 7;
		n -= 7;
		while (n && *v == ' ')
			v++, n--;
		*tok = v;
		return n ? (long)n : -1;
	}
	if (!p->cookie[0])
		return 0;
	for (uint32_t i = 0; i < t->req.hl.n; i++) {
		const struct hdr *c = &t->req.hl.v[i];
		const char *v = c->value, *end = c->value + c->value_len;
		size_t nl = strlen(p->cookie);

		if (c->name_len != 6 || strncasecmp(c->name, "cookie", 6) != 0)
			continue;
		while (v < end) {
			const char *semi = memchr(v, ';', (size_t)(end - v)), *e = semi ? semi : end;

			while (v < e && *v == ' ')
				v++;
			if ((size_t)(e - v) > nl && v[nl] == '=' && memcmp(v, p->cookie, nl) == 0) {
				*tok = v + nl + 1;
				return e - *tok > 0 ? (long)(e - *tok) : -1;
			}
			v = e + 1;
		}
	}
	return 0;
}

/* A claim as header text: strings without control characters, integers,
 * booleans. Returns its length or -1 (not passed). */
static int claim_text(json_t *v, char *buf, size_t cap)
{
	int n;

	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t l = json_string_length(v);

		for (size_t i = 0; i < l; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				return -1;
		if (l >= cap)
			return -1;
		memcpy(buf, s, l);
		return (int)l;
	}
	if (json_is_integer(v))
		n = snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v) && isfinite(json_real_value(v)))
		n = snprintf(buf, cap, "%.17g", json_real_value(v));
	else if (json_is_boolean(v))
		n = snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
	else
		return -1;
	return n > 0 && (size_t)n < cap ? n : -1;
}

/* A NumericDate claim: 1 with *out set, 0 absent, -1 not a number. */
static int claim_time(json_t *payload, const char *name, int64_t *out)
{
	json_t *v = json_object_get(payload, name);

	if (!v)
		return 0;
	double d;

	if (!json_is_number(v) || !isfinite(d = json_number_value(v)))
		return -1;
	/* clamped far beyond any date, so that converting it and adding a
	 * leeway stay defined */
	d = d > 0x1p61 ? 0x1p61 : d < -0x1p61 ? -0x1p61 : d;
	*out = (int64_t)floor(d);
	return 1;
}

static int aud_has(json_t *aud, const char *want)
{
	size_t i;
	json_t *v;

	if (json_is_string(aud))
		return strcmp(json_string_value(aud), want) == 0;
	json_array_foreach(aud, i, v) if (json_is_string(v) && strcmp(json_string_value(v), want) == 0) return 1;
	return 0;
}

static void put(struct jwt_entry *e, const char *s, size_t n)
{
	memcpy(e->hdrs + e->hdrs_len, s, n);
	e->hdrs_len = (uint16_t)(e->hdrs_len + n);
}

/* The claims of a verified payload into <e>; an enum auth_result. */
static int jwt_claims(const struct config_auth *p, json_t *pl, struct jwt_entry *e, int64_t now)
{
	int64_t leeway = p->leeway / 1000, exp = 0, nbf = 0;
	int has_exp = claim_time(pl, "exp", &exp), has_nbf = claim_time(pl, "nbf", &nbf);
	char val[384];
	json_t *c;
	int n;

	if (has_exp < 0 || has_nbf < 0)
		return AUTH_R_MALFORMED;
	if (has_exp && now >= exp + leeway)
		return AUTH_R_EXPIRED;
	if (has_nbf && now + leeway < nbf)
		return AUTH_R_NOT_YET_VALID;
	if (p->issuer[0]) {
		c = json_object_get(pl, "iss");
		if (!json_is_string(c) || strcmp(json_string_value(c), p->issuer) != 0)
			return AUTH_R_ISSUER;
	}
	if (p->audience[0] && !aud_has(json_object_get(pl, "aud"), p->audience))
		return AUTH_R_AUDIENCE;
	e->exp = has_exp ? exp + leeway : INT64_MAX;
	e->hdrs_len = 0;
	e->consumer_len = 0;
	c = json_object_get(pl, p->consumer_claim);
	if (c && (n = claim_text(c, val, sizeof e->consumer)) > 0) {
		memcpy(e->consumer, val, (size_t)n);
		e->consumer[n] = '\0';
		e->consumer_len = (uint8_t)n;
		if (p->consumer_header[0] && strlen(p->consumer_header) + (size_t)n + 4 <= sizeof e->hdrs) {
			put(e, p->consumer_header, strlen(p->consumer_header));
			put(e, ": ", 2);
			put(e, val, (size_t)n);
			put(e, "\r\n", 2);
		}
	}
	for (int i = 0; i < p->nclaims; i++) {
		const char *hn = p->claims[i].header;
		size_t hl = strlen(hn);

		c = json_object_get(pl, p->claims[i].claim);
		if (!c)
			continue;
		n = claim_text(c, val, sizeof val);
		if (n < 0 || e->hdrs_len + hl + (size_t)n + 4 > sizeof e->hdrs) {
			worker_count_error(WEIR_ERR(AUTH_CLAIM_DROPPED));
			continue;
		}
		put(e, hn, hl);
		put(e, ": ", 2);
		put(e, val, (size_t)n);
		put(e, "\r\n", 2);
	}
	return AUTH_R_OK;
}

/* Verifies token <tok> for <p> into <e> (not yet in the cache). */
static int jwt_verify_token(const struct config_auth *p, const char *tok, size_t len, struct jwt_entry *e, int64_t now)
{
	const char *d1 = memchr(tok, '.', len), *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok)) : NULL;
	long hl, pl, sl;
	json_t *hdr, *pay;
	const char *alg_s, *kid = NULL;
	enum auth_jwt_alg alg = JWT_ALG_NONE;
	int verified = 0, kid_found = 0, alg_found = 0, res;

	if (!d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)))
		return AUTH_R_MALFORMED;
	hl = auth_b64_decode(tok, (size_t)(d1 - tok), jw.header, sizeof jw.header, 1);
	pl = auth_b64_decode(d1 + 1, (size_t)(d2 - d1 - 1), jw.payload, sizeof jw.payload, 1);
	sl = auth_b64_decode(d2 + 1, len - (size_t)(d2 + 1 - tok), jw.sig, sizeof jw.sig, 1);
	if (hl <= 0 || pl <= 0 || sl <= 0)
		return AUTH_R_MALFORMED;
	jw.arena_used = 0;
	hdr = jwt_json(jw.header, (size_t)hl);
	if (!hdr || !(alg_s = json_string_value(json_object_get(hdr, "alg"))) || json_object_get(hdr, "crit"))
		return AUTH_R_MALFORMED;
	if (json_object_get(hdr, "kid") && !(kid = json_string_value(json_object_get(hdr, "kid"))))
		return AUTH_R_MALFORMED;
	for (int i = 1; i < JWT_ALG_COUNT; i++)
		if (strcmp(alg_s, auth_jwt_alg_name((enum auth_jwt_alg)i)) == 0)
			alg = (enum auth_jwt_alg)i;
	for (int i = 0; i < p->njwks && !verified; i++) {
		const struct auth_jwk *k = &p->jwks[i];

		if (kid && strcmp(k->kid, kid) != 0)
			continue;
		kid_found = 1;
		if (alg == JWT_ALG_NONE || k->alg != alg)
			continue;
		alg_found = 1;
		verified = jwt_verify(k, (const uint8_t *)tok, (size_t)(d2 - tok), jw.sig, (size_t)sl);
	}
	if (!verified)
		return !kid_found ? AUTH_R_KID : !alg_found ? AUTH_R_ALG : AUTH_R_BAD_SIGNATURE;
	pay = jwt_json(jw.payload, (size_t)pl);
	if (!pay)
		return AUTH_R_MALFORMED;
	res = jwt_claims(p, pay, e, now);
	jw.arena_used = 0;
	return res;
}

int auth_jwt_check(struct txn *t, const struct config_auth *p, struct auth_state *st, int *cached)
{
	const char *tok = NULL;
	long len = jwt_find(t, p, &tok);
	int64_t now = (int64_t)ev_now(wk.loop);
	uint8_t d[32];
	struct jwt_entry *set, *e, *victim, fresh;
	int res;

	if (len == 0)
		return AUTH_R_MISSING;
	if (len < 0 || len > JWT_TOKEN_MAX)
		return AUTH_R_MALFORMED;
	SHA256((const uint8_t *)tok, (size_t)len, d);
	set = &jw.cache[(d[0] | (uint32_t)d[1] << 8) % CACHE_SETS * CACHE_WAYS];
	victim = set;
	for (e = set; e < set + CACHE_WAYS; e++) {
		if (e->p == p && memcmp(e->digest, d, 32) == 0) {
			if (now >= e->exp) {
				e->p = NULL; /* expired since it was cached */
				return AUTH_R_EXPIRED;
			}
			*cached = 1;
			goto found;
		}
		if (!e->p || (victim->p && e->stamp < victim->stamp))
			victim = e;
	}
	res = jwt_verify_token(p, tok, (size_t)len, &fresh, now);
	if (res != AUTH_R_OK)
		return res;
	memcpy(fresh.digest, d, 32);
	fresh.p = p;
	fresh.stamp = ++jw.stamp;
	/* only the used part: most of the header area is empty */
	memcpy(victim, &fresh, offsetof(struct jwt_entry, hdrs) + fresh.hdrs_len);
	e = victim;
found:
	st->jwt = p; /* verified: $jwt_claim_NAME may read its payload */
	memcpy(st->consumer, e->consumer, e->consumer_len);
	st->consumer[e->consumer_len] = '\0';
	st->consumer_len = e->consumer_len;
	st->extra = e->hdrs;
	st->extra_len = e->hdrs_len;
	return AUTH_R_OK;
}

/*
 * $jwt_claim_NAME (worker/core/vars.c): claim <name> of the request's
 * token, verified by the route's policy (t->auth.jwt), as header text
 * into <tmp>. The payload is decoded and parsed again (the cache keeps
 * only the consumer and the claims_to_headers lines): a few microseconds,
 * paid only by templates that name a claim. Reads the request's parsed
 * head, so only before head_up replaced it (request header rules); 0 when
 * absent, not a scalar, or not passable as a header value.
 */
int auth_jwt_claim(const struct txn *t, const char *name, size_t nlen, char *tmp, size_t cap, const char **v,
                   size_t *len)
{
	const char *tok = NULL, *d1, *d2;
	char key[128];
	long n, pl;
	json_t *pay;
	int k;

	if (!t->auth.jwt || t->up.head || nlen >= sizeof key)
		return 0;
	n = jwt_find(t, t->auth.jwt, &tok);
	if (n <= 0 || !(d1 = memchr(tok, '.', (size_t)n)) ||
	    !(d2 = memchr(d1 + 1, '.', (size_t)(n - (d1 + 1 - tok)))))
		return 0;
	pl = auth_b64_decode(d1 + 1, (size_t)(d2 - d1 - 1), jw.payload, sizeof jw.payload, 1);
	if (pl <= 0)
		return 0;
	memcpy(key, name, nlen);
	key[nlen] = '\0';
	jw.arena_used = 0;
	pay = jwt_json(jw.payload, (size_t)pl);
	k = pay ? claim_text(json_object_get(pay, key), tmp, cap) : -1;
	jw.arena_used = 0;
	if (k <= 0)
		return 0;
	*v = tmp;
	*len = (size_t)k;
	return 1;
}
