/*
 * auth_conf.h: a route's authentication policy (routes.auth), as the
 * loader reads it and the files it names are loaded.
 *
 * Principle: every secret a policy needs is read by the master while it
 * loads the configuration (start-up, `weir -t` and HUP alike), so a
 * missing or bad key file fails the load with its FILE:LINE and a reload
 * with a bad file keeps the old configuration. Workers inherit the loaded
 * policy with the rest of struct config and never touch a file. Secrets
 * (key digests, password hashes, HMAC keys) are held in BoringSSL's heap
 * (OPENSSL_malloc), which common/secmem.c keeps out of core dumps.
 *
 * The tables are sorted at load so that a worker finds a key or a user
 * by binary search; nothing here is written after the load.
 */
#ifndef WEIR_COMMON_AUTH_CONF_H
#define WEIR_COMMON_AUTH_CONF_H

#include <stddef.h>
#include <stdint.h>

enum auth_type {
	AUTH_NONE,
	AUTH_API_KEY,
	AUTH_JWT,
	AUTH_BASIC,
	AUTH_FORWARD, /* a subrequest to an auth service (worker/core/fwdauth.c) */
};

#define AUTH_NAME_MAX   64 /* consumer and user names, with the NUL */
#define AUTH_CLAIMS_MAX 8  /* claims_to_headers entries */
#define AUTH_ALLOW_MAX  64 /* allow entries */
#define AUTH_PEM_MAX    16 /* keys entries (PEM files) */
#define AUTH_FWD_HEADERS_MAX 16 /* forward: request_headers, response_headers, cache_key entries */

/* One line of keys_file: "consumer sha256hex". */
struct auth_apikey {
	uint8_t digest[32];
	char consumer[AUTH_NAME_MAX];
};

/* One line of an htpasswd file: "user:hash". */
struct auth_user {
	char name[AUTH_NAME_MAX];
	char hash[128]; /* $2y$, $2b$, $5$ or $6$ */
};

/* JWT algorithms; a key has exactly one, fixed when it is loaded. */
enum auth_jwt_alg {
	JWT_ALG_NONE, /* never accepted: no key has it */
	JWT_HS256,
	JWT_HS384,
	JWT_HS512,
	JWT_RS256,
	JWT_RS384,
	JWT_RS512,
	JWT_PS256,
	JWT_ES256,
	JWT_ES384,
	JWT_EDDSA,
	JWT_ALG_COUNT,
};

struct evp_pkey_st;

struct auth_jwk {
	char kid[128]; /* "" when the key has none */
	enum auth_jwt_alg alg;
	struct evp_pkey_st *pkey; /* RS, PS, ES, EdDSA */
	uint8_t *secret;          /* HS: the shared secret (OPENSSL_malloc) */
	size_t secret_len;
};

/* claims_to_headers entry "claim:Header-Name" */
struct auth_claim_header {
	char claim[AUTH_NAME_MAX];
	char header[AUTH_NAME_MAX];
};

struct config_auth {
	enum auth_type type;
	int line;
	char realm[128];
	char consumer_header[AUTH_NAME_MAX]; /* "" for none */
	/* allow = [ ... ]: consumers let through, others get 403; none: all */
	char allow[AUTH_ALLOW_MAX][AUTH_NAME_MAX];
	int nallow;

	/* api_key */
	char header[AUTH_NAME_MAX]; /* default "X-Api-Key" when query is not given */
	char query[AUTH_NAME_MAX];
	char keys_file[1024];
	struct auth_apikey *keys; /* sorted by digest */
	int nkeys;

	/* jwt */
	char jwks_file[1024];
	char pem[AUTH_PEM_MAX][1024];
	int npem;
	char issuer[256];
	char audience[256];
	uint32_t leeway; /* ms, applied in whole seconds */
	char cookie[AUTH_NAME_MAX];
	char consumer_claim[AUTH_NAME_MAX]; /* default "sub" */
	struct auth_claim_header claims[AUTH_CLAIMS_MAX];
	int nclaims;
	struct auth_jwk *jwks;
	int njwks;

	/* basic */
	char htpasswd[1024];
	uint32_t hash_rate;      /* password hashes per second per worker */
	struct auth_user *users; /* sorted by name */
	int nusers;

	/* forward: a subrequest to upstream group <fwd_upstream> (index
	 * fwd_group in the config; a worker finds it by name in its table) */
	char fwd_upstream[64];
	int fwd_group;
	char fwd_path[1024];
	char fwd_req[AUTH_FWD_HEADERS_MAX][AUTH_NAME_MAX];  /* request_headers: sent to it */
	int nfwd_req;
	char fwd_resp[AUTH_FWD_HEADERS_MAX][AUTH_NAME_MAX]; /* response_headers: copied upstream on 2xx */
	int nfwd_resp;
	char fwd_key[AUTH_FWD_HEADERS_MAX][AUTH_NAME_MAX];  /* cache_key: what a cached result is keyed by */
	int nfwd_key;
	uint32_t fwd_cache;   /* ms a result is kept per worker; 0: off */
	uint32_t fwd_timeout; /* ms for the whole subrequest */
};

/* The name of <t> as written in a file ("api_key"). */
const char *auth_type_name(enum auth_type t);

/* Names of the JWT algorithms as JOSE writes them ("ES256"). */
const char *auth_jwt_alg_name(enum auth_jwt_alg a);

/* Frees what the loader read into <a> and <a> itself; NULL is fine. */
void auth_conf_free(struct config_auth *a);

/*
 * The file loaders, for common/config_auth.c: each fills its table in <a>
 * and returns 0, or -1 with <why> saying what is wrong, with the file's
 * own line where there is one ("/etc/weir/keys line 3: ...").
 */
int auth_load_keys_file(struct config_auth *a, char *why, size_t cap);
int auth_load_htpasswd(struct config_auth *a, char *why, size_t cap);
int auth_load_jwks(struct config_auth *a, char *why, size_t cap);
int auth_load_pem(struct config_auth *a, int i, char *why, size_t cap);

/* A key's entry in a sorted keys table, for <digest>; NULL if none. */
const struct auth_apikey *auth_find_key(const struct config_auth *a, const uint8_t digest[32]);

/* The user named <name> (<len> bytes); NULL if none. */
const struct auth_user *auth_find_user(const struct config_auth *a, const char *name, size_t len);

#endif
