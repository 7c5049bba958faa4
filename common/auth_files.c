/*
 * auth_files.c: the files a routes.auth policy names, read by the master
 * at load (common/auth_conf.h): API key digests, htpasswd, JWKS and PEM
 * public keys.
 *
 * JSON (JWKS) is parsed with Jansson: a small, long-kept C library with a
 * strict parser (RFC 8259, UTF-8 checked, duplicate keys findable), in
 * Debian as libjansson, with an allocator hook that the workers point at
 * a bounded arena of their own (worker/auth_jwt.c).
 */
#include "common/auth_conf.h"

#include <crypt.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ec_key.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/mem.h>
#include <openssl/nid.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth_b64.h"

#define AUTH_FILE_LINES_MAX 100000 /* keys or users in one file */

static const char *const type_names[] = {"none", "api_key", "jwt", "basic", "forward"};
static const char *const alg_names[JWT_ALG_COUNT] = {
    "none", "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA",
};

const char *auth_type_name(enum auth_type t)
{
	return (unsigned)t < sizeof type_names / sizeof type_names[0] ? type_names[t] : "unknown";
}

const char *auth_jwt_alg_name(enum auth_jwt_alg a)
{
	return (unsigned)a < JWT_ALG_COUNT ? alg_names[a] : "unknown";
}

static enum auth_jwt_alg alg_by_name(const char *s)
{
	for (int i = 1; i < JWT_ALG_COUNT; i++)
		if (strcmp(s, alg_names[i]) == 0)
			return (enum auth_jwt_alg)i;
	return JWT_ALG_NONE;
}

void auth_conf_free(struct config_auth *a)
{
	if (!a)
		return;
	if (a->keys) {
		OPENSSL_cleanse(a->keys, (size_t)a->nkeys * sizeof *a->keys);
		OPENSSL_free(a->keys);
	}
	if (a->users) {
		OPENSSL_cleanse(a->users, (size_t)a->nusers * sizeof *a->users);
		OPENSSL_free(a->users);
	}
	for (int i = 0; i < a->njwks; i++) {
		EVP_PKEY_free(a->jwks[i].pkey);
		if (a->jwks[i].secret) {
			OPENSSL_cleanse(a->jwks[i].secret, a->jwks[i].secret_len);
			OPENSSL_free(a->jwks[i].secret);
		}
	}
	OPENSSL_free(a->jwks);
	free(a);
}

/* ---- line files -------------------------------------------------------- */

/* A consumer or user name: 1..63 of letters, digits and ._@- */
static int name_valid(const char *s, size_t n)
{
	if (n == 0 || n >= AUTH_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._@-", s[i]))
			return 0;
	return 1;
}

static int hex_value(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(((const struct auth_apikey *)a)->digest, ((const struct auth_apikey *)b)->digest, 32);
}

static int user_cmp(const void *a, const void *b)
{
	return strcmp(((const struct auth_user *)a)->name, ((const struct auth_user *)b)->name);
}

/* The whole of <path>, NUL-terminated, its length in *<len>; NULL with
 * <why> set when it cannot be read or is over 64 MB. */
static char *file_slurp(const char *path, size_t *len, char *why, size_t cap)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n = 0, got;

	if (!f) {
		snprintf(why, cap, "%s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		char *nb = realloc(buf, n + 65536 + 1);

		if (!nb) {
			snprintf(why, cap, "%s: out of memory", path);
			free(buf);
			fclose(f);
			return NULL;
		}
		buf = nb;
		got = fread(buf + n, 1, 65536, f);
		n += got;
		if (got < 65536)
			break;
		if (n > 64u << 20) {
			snprintf(why, cap, "%s: larger than 64 MB", path);
			free(buf);
			fclose(f);
			return NULL;
		}
	}
	if (ferror(f)) {
		snprintf(why, cap, "%s: %s", path, strerror(errno ? errno : EIO));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Splits <buf> into lines; calls <each> with every line that is neither
 * blank nor a comment, stripped of surrounding blanks. */
static int file_lines(const char *path, char *buf, size_t len, void *arg,
                      int (*each)(void *arg, char *line, int lineno, char *why, size_t cap), char *why, size_t cap)
{
	int lineno = 0;
	char *p = buf, *end = buf + len;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *q;
		char *e = nl ? nl : end;

		lineno++;
		*e = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		q = e;
		while (q > p && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r'))
			*--q = '\0';
		if (*p && *p != '#') {
			char sub[300];

			if (each(arg, p, lineno, sub, sizeof sub) < 0) {
				snprintf(why, cap, "%s line %d: %s", path, lineno, sub);
				return -1;
			}
		}
		p = e + 1;
	}
	return 0;
}

static int keys_line(void *arg, char *line, int lineno, char *why, size_t cap)
{
	struct config_auth *a = arg;
	struct auth_apikey *k;
	char *sp = line + strcspn(line, " \t");
	char *hex = sp + strspn(sp, " \t");

	(void)lineno;
	if (!name_valid(line, (size_t)(sp - line))) {
		snprintf(why, cap, "the consumer must be 1 to 63 letters, digits or ._@- (\"consumer sha256hex\")");
		return -1;
	}
	if (strlen(hex) != 64 || strspn(hex, "0123456789abcdefABCDEF") != 64) {
		snprintf(why, cap, "the key must be given as its SHA-256 in 64 hex digits (sha256sum makes it)");
		return -1;
	}
	k = &a->keys[a->nkeys++];
	memcpy(k->consumer, line, (size_t)(sp - line));
	k->consumer[sp - line] = '\0';
	for (int i = 0; i < 32; i++)
		k->digest[i] = (uint8_t)(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
	return 0;
}

/* Room for one entry per line of <buf>: an upper bound on the entries. */
static size_t count_lines(const char *buf, size_t len)
{
	size_t n = 1;

	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	return n;
}

/* Reads line file <path> into a new table of <room> <size>-byte entries
 * at *<table> (in BoringSSL's heap: secrets), calling <each> per line.
 * The file's bytes are wiped once read. */
static int load_table(const char *path, void **table, size_t size, struct config_auth *a,
                      int (*each)(void *arg, char *line, int lineno, char *why, size_t cap), char *why, size_t cap)
{
	size_t len, room;
	char *buf = file_slurp(path, &len, why, cap);
	int rc;

	if (!buf)
		return -1;
	room = count_lines(buf, len);
	if (room > AUTH_FILE_LINES_MAX) {
		free(buf);
		snprintf(why, cap, "%s: more than %d lines", path, AUTH_FILE_LINES_MAX);
		return -1;
	}
	*table = OPENSSL_malloc(room * size);
	if (!*table) {
		free(buf);
		snprintf(why, cap, "out of memory");
		return -1;
	}
	rc = file_lines(path, buf, len, a, each, why, cap);
	OPENSSL_cleanse(buf, len);
	free(buf);
	return rc;
}

int auth_load_keys_file(struct config_auth *a, char *why, size_t cap)
{
	if (load_table(a->keys_file, (void **)&a->keys, sizeof *a->keys, a, keys_line, why, cap) < 0)
		return -1;
	qsort(a->keys, (size_t)a->nkeys, sizeof *a->keys, key_cmp);
	for (int i = 1; i < a->nkeys; i++) {
		if (memcmp(a->keys[i].digest, a->keys[i - 1].digest, 32) == 0) {
			snprintf(why, cap, "%s: the same key is listed twice (for %s and %s)", a->keys_file,
			         a->keys[i - 1].consumer, a->keys[i].consumer);
			return -1;
		}
	}
	return 0;
}

const struct auth_apikey *auth_find_key(const struct config_auth *a, const uint8_t digest[32])
{
	struct auth_apikey probe;

	memcpy(probe.digest, digest, 32);
	return bsearch(&probe, a->keys, (size_t)a->nkeys, sizeof *a->keys, key_cmp);
}

static int users_line(void *arg, char *line, int lineno, char *why, size_t cap)
{
	struct config_auth *a = arg;
	struct auth_user *u;
	char *colon = strchr(line, ':');
	const char *h;

	(void)lineno;
	if (!colon || !name_valid(line, (size_t)(colon - line))) {
		snprintf(why, cap, "expected \"user:hash\", the user 1 to 63 letters, digits or ._@-");
		return -1;
	}
	h = colon + 1;
	if (strncmp(h, "$2y$", 4) && strncmp(h, "$2b$", 4) && strncmp(h, "$5$", 3) && strncmp(h, "$6$", 3)) {
		snprintf(why, cap,
		         "user %.*s: only bcrypt ($2y$, htpasswd -B) and SHA-crypt ($5$, $6$) hashes are "
		         "accepted",
		         (int)(colon - line), line);
		return -1;
	}
	if (strlen(h) >= sizeof u->hash || crypt_checksalt(h) != CRYPT_SALT_OK) {
		snprintf(why, cap, "user %.*s: the hash is malformed", (int)(colon - line), line);
		return -1;
	}
	u = &a->users[a->nusers++];
	memcpy(u->name, line, (size_t)(colon - line));
	u->name[colon - line] = '\0';
	strcpy(u->hash, h);
	return 0;
}

int auth_load_htpasswd(struct config_auth *a, char *why, size_t cap)
{
	if (load_table(a->htpasswd, (void **)&a->users, sizeof *a->users, a, users_line, why, cap) < 0)
		return -1;
	qsort(a->users, (size_t)a->nusers, sizeof *a->users, user_cmp);
	for (int i = 1; i < a->nusers; i++) {
		if (strcmp(a->users[i].name, a->users[i - 1].name) == 0) {
			snprintf(why, cap, "%s: user %s is listed twice", a->htpasswd, a->users[i].name);
			return -1;
		}
	}
	return 0;
}

const struct auth_user *auth_find_user(const struct config_auth *a, const char *name, size_t len)
{
	struct auth_user probe;

	if (len == 0 || len >= sizeof probe.name)
		return NULL;
	memcpy(probe.name, name, len);
	probe.name[len] = '\0';
	return bsearch(&probe, a->users, (size_t)a->nusers, sizeof *a->users, user_cmp);
}

/* ---- JWT keys ------------------------------------------------------------ */

/* Whether <alg> can be used with <pkey> (NULL: an HMAC secret). RSA keys
 * must have at least 2048 bits (RFC 7518 3.3). */
static const char *alg_fits(enum auth_jwt_alg alg, EVP_PKEY *pkey)
{
	int type = pkey ? EVP_PKEY_id(pkey) : -1;

	switch (alg) {
	case JWT_HS256:
	case JWT_HS384:
	case JWT_HS512: return pkey ? "HS algorithms need a shared secret (kty \"oct\"), never a public key" : NULL;
	case JWT_RS256:
	case JWT_RS384:
	case JWT_RS512:
	case JWT_PS256:
		if (type != EVP_PKEY_RSA)
			return "RS and PS algorithms need an RSA key";
		return EVP_PKEY_bits(pkey) < 2048 ? "RSA keys must have at least 2048 bits" : NULL;
	case JWT_ES256:
	case JWT_ES384: {
		const EC_KEY *ec = type == EVP_PKEY_EC ? EVP_PKEY_get0_EC_KEY(pkey) : NULL;
		int nid = ec ? EC_GROUP_get_curve_name(EC_KEY_get0_group(ec)) : 0;

		if (nid != (alg == JWT_ES256 ? NID_X9_62_prime256v1 : NID_secp384r1))
			return alg == JWT_ES256 ? "ES256 needs a P-256 key" : "ES384 needs a P-384 key";
		return NULL;
	}
	case JWT_EDDSA: return type == EVP_PKEY_ED25519 ? NULL : "EdDSA needs an Ed25519 key";
	default: return "unsupported algorithm";
	}
}

/* The algorithm a key without "alg" is used with. */
static enum auth_jwt_alg alg_default(EVP_PKEY *pkey)
{
	switch (EVP_PKEY_id(pkey)) {
	case EVP_PKEY_RSA: return JWT_RS256;
	case EVP_PKEY_EC:
		return EC_GROUP_get_curve_name(EC_KEY_get0_group(EVP_PKEY_get0_EC_KEY(pkey))) == NID_secp384r1
		           ? JWT_ES384
		           : JWT_ES256;
	case EVP_PKEY_ED25519: return JWT_EDDSA;
	default: return JWT_ALG_NONE;
	}
}

static int jwks_grow(struct config_auth *a)
{
	struct auth_jwk *n = OPENSSL_realloc(a->jwks, (size_t)(a->njwks + 1) * sizeof *n);

	if (!n)
		return -1;
	a->jwks = n;
	memset(&a->jwks[a->njwks], 0, sizeof *n);
	return 0;
}

/* Member <name> of <o>, base64url-decoded into a new BIGNUM. */
static BIGNUM *jwk_bn(json_t *o, const char *name)
{
	const char *s = json_string_value(json_object_get(o, name));
	uint8_t buf[1024];
	long n = s ? auth_b64_decode(s, strlen(s), buf, sizeof buf, 1) : -1;

	return n > 0 ? BN_bin2bn(buf, (size_t)n, NULL) : NULL;
}

/* A new EVP_PKEY that owns <key> (of EVP_PKEY_<type>); NULL, <key> then
 * still the caller's, when out of memory. */
static EVP_PKEY *pkey_take(int type, void *key)
{
	EVP_PKEY *pkey = EVP_PKEY_new();

	if (pkey && EVP_PKEY_assign(pkey, type, key))
		return pkey;
	EVP_PKEY_free(pkey);
	return NULL;
}

static EVP_PKEY *jwk_rsa(json_t *o)
{
	BIGNUM *n = jwk_bn(o, "n"), *e = jwk_bn(o, "e");
	RSA *rsa = n && e ? RSA_new() : NULL;
	EVP_PKEY *pkey;

	if (!rsa || !RSA_set0_key(rsa, n, e, NULL)) {
		RSA_free(rsa);
		BN_free(n);
		BN_free(e);
		return NULL;
	}
	if (!(pkey = pkey_take(EVP_PKEY_RSA, rsa)))
		RSA_free(rsa); /* n and e with it */
	return pkey;
}

static EVP_PKEY *jwk_ec(json_t *o)
{
	const char *crv = json_string_value(json_object_get(o, "crv"));
	int nid = !crv ? 0 : !strcmp(crv, "P-256") ? NID_X9_62_prime256v1 : !strcmp(crv, "P-384") ? NID_secp384r1 : 0;
	BIGNUM *x = jwk_bn(o, "x"), *y = jwk_bn(o, "y");
	EC_KEY *ec = nid && x && y ? EC_KEY_new_by_curve_name(nid) : NULL;
	EVP_PKEY *pkey = NULL;

	/* the point is checked to be on the curve here */
	if (ec && EC_KEY_set_public_key_affine_coordinates(ec, x, y))
		pkey = pkey_take(EVP_PKEY_EC, ec);
	if (!pkey)
		EC_KEY_free(ec);
	BN_free(x);
	BN_free(y);
	return pkey;
}

static EVP_PKEY *jwk_okp(json_t *o)
{
	const char *crv = json_string_value(json_object_get(o, "crv"));
	const char *x = json_string_value(json_object_get(o, "x"));
	uint8_t raw[64];
	long n = x ? auth_b64_decode(x, strlen(x), raw, sizeof raw, 1) : -1;

	if (!crv || strcmp(crv, "Ed25519") || n != 32)
		return NULL;
	return EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, 32);
}

/* One member of "keys": added to a->jwks, skipped (use other than "sig"),
 * or refused with <why>. */
static int jwks_entry(struct config_auth *a, json_t *o, char *why, size_t cap)
{
	const char *kty = json_string_value(json_object_get(o, "kty"));
	const char *alg_s = json_string_value(json_object_get(o, "alg"));
	const char *kid = json_string_value(json_object_get(o, "kid"));
	const char *use = json_string_value(json_object_get(o, "use"));
	enum auth_jwt_alg alg = alg_s ? alg_by_name(alg_s) : JWT_ALG_NONE;
	struct auth_jwk *k;
	const char *bad;

	if (!json_is_object(o) || !kty) {
		snprintf(why, cap, "a key without \"kty\"");
		return -1;
	}
	if (use && strcmp(use, "sig"))
		return 0;
	if (alg_s && alg == JWT_ALG_NONE) {
		snprintf(why, cap, "key %s: algorithm \"%s\" is not supported", kid ? kid : "without kid", alg_s);
		return -1;
	}
	if (kid && strlen(kid) >= sizeof k->kid) {
		snprintf(why, cap, "a kid longer than %zu bytes", sizeof k->kid - 1);
		return -1;
	}
	if (jwks_grow(a) < 0) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	k = &a->jwks[a->njwks];
	if (!strcmp(kty, "oct")) {
		const char *s = json_string_value(json_object_get(o, "k"));
		size_t sl = s ? strlen(s) : 0;
		long n;

		if (!alg_s) {
			snprintf(why, cap, "key %s: an \"oct\" key needs its \"alg\" (HS256, HS384 or HS512)",
			         kid ? kid : "without kid");
			return -1;
		}
		k->secret = OPENSSL_malloc(sl + 1);
		n = k->secret ? auth_b64_decode(s ? s : "", sl, k->secret, sl + 1, 1) : -1;
		if (n < 32) {
			OPENSSL_free(k->secret);
			k->secret = NULL;
			snprintf(why, cap, "key %s: \"k\" must be base64url of at least 32 bytes",
			         kid ? kid : "without kid");
			return -1;
		}
		k->secret_len = (size_t)n;
	} else {
		k->pkey = !strcmp(kty, "RSA")   ? jwk_rsa(o)
		          : !strcmp(kty, "EC")  ? jwk_ec(o)
		          : !strcmp(kty, "OKP") ? jwk_okp(o)
		                                : NULL;
		ERR_clear_error();
		if (!k->pkey) {
			snprintf(why, cap,
			         "key %s: not a valid %s public key (RSA n/e, EC P-256/P-384 x/y, OKP Ed25519 x)",
			         kid ? kid : "without kid", kty);
			return -1;
		}
		if (!alg_s)
			alg = alg_default(k->pkey);
	}
	if ((bad = alg_fits(alg, k->pkey))) {
		EVP_PKEY_free(k->pkey);
		if (k->secret)
			OPENSSL_free(k->secret);
		memset(k, 0, sizeof *k);
		snprintf(why, cap, "key %s: %s", kid ? kid : "without kid", bad);
		return -1;
	}
	k->alg = alg;
	if (kid)
		strcpy(k->kid, kid);
	a->njwks++;
	return 0;
}

int auth_load_jwks(struct config_auth *a, char *why, size_t cap)
{
	json_error_t jerr;
	json_t *root = json_load_file(a->jwks_file, JSON_REJECT_DUPLICATES, &jerr);
	json_t *keys = root ? json_object_get(root, "keys") : NULL;
	char sub[300];
	size_t i;
	json_t *o;

	if (!root) {
		snprintf(why, cap, "%s line %d: %s", a->jwks_file, jerr.line, jerr.text);
		return -1;
	}
	if (!json_is_array(keys) || json_array_size(keys) == 0) {
		json_decref(root);
		snprintf(why, cap, "%s: a JWKS needs a non-empty \"keys\" array", a->jwks_file);
		return -1;
	}
	json_array_foreach(keys, i, o)
	{
		if (jwks_entry(a, o, sub, sizeof sub) < 0) {
			snprintf(why, cap, "%s: keys[%zu]: %s", a->jwks_file, i, sub);
			json_decref(root);
			return -1;
		}
	}
	json_decref(root);
	if (a->njwks == 0) {
		snprintf(why, cap, "%s: no signing key in it", a->jwks_file);
		return -1;
	}
	return 0;
}

int auth_load_pem(struct config_auth *a, int i, char *why, size_t cap)
{
	const char *path = a->pem[i], *base = strrchr(path, '/');
	BIO *bio = BIO_new_file(path, "r");
	EVP_PKEY *pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
	struct auth_jwk *k;
	const char *bad;
	size_t n;

	BIO_free(bio);
	ERR_clear_error();
	if (!pkey) {
		snprintf(why, cap, "%s: %s", path,
		         bio ? "no PEM public key in it (openssl pkey -pubout makes one)"
		             : strerror(errno ? errno : ENOENT));
		return -1;
	}
	if ((bad = alg_fits(alg_default(pkey), pkey)) || jwks_grow(a) < 0) {
		EVP_PKEY_free(pkey);
		snprintf(why, cap, "%s: %s", path, bad ? bad : "out of memory");
		return -1;
	}
	k = &a->jwks[a->njwks++];
	k->pkey = pkey;
	k->alg = alg_default(pkey);
	/* the kid of a PEM key is its file name without the extension */
	base = base ? base + 1 : path;
	n = strcspn(base, ".");
	if (n >= sizeof k->kid)
		n = sizeof k->kid - 1;
	memcpy(k->kid, base, n);
	k->kid[n] = '\0';
	return 0;
}
