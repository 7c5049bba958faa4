/*
 * config_auth.c: routes.auth, the keys of a route's authentication policy
 * and the rules across them (common/auth_conf.h says what is loaded).
 *
 * One group serves the three types; each key belongs to one type (or to
 * all), and a key given for another type is refused with its line, so a
 * typo such as `htpasswd` on a jwt policy is never silently ignored. The
 * files are read here, while the configuration loads: `weir -t`, start-up
 * and HUP all refuse a missing or bad one with the line of its key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth_conf.h"
#include "common/config_dump.h"
#include "common/config_load.h"

#define fail config_fail
#define line_of config_line_of

/* A realm goes into a quoted-string of WWW-Authenticate: printable ASCII
 * without '"' and '\\'. */
static const char *realm_check(const char *v)
{
	for (const char *p = v; *p; p++)
		if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\')
			return "must be printable ASCII without '\"' or '\\'";
	return NULL;
}

static const char *query_check(const char *v)
{
	if (!*v || strpbrk(v, "&=#?% +"))
		return "must be a query argument name without & = # ? % + or spaces";
	return NULL;
}

static const char *claim_check(const char *v)
{
	for (const char *p = v; *p; p++)
		if (*p <= 0x20 || *p > 0x7e || *p == '"' || *p == '\\')
			return "must be a claim name of printable ASCII without spaces or quotes";
	return *v ? NULL : "must not be empty";
}

/* forward's path: a request target of visible ASCII starting with '/'. */
static const char *fwd_path_check(const char *v)
{
	if (v[0] != '/')
		return "must start with '/'";
	for (const char *p = v; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return "must be visible ASCII without spaces: it is a request target";
	return NULL;
}

static const char *const type_names[] = {NULL, "api_key", "jwt", "basic", "forward"};

#define A(m) .offset = offsetof(struct config_auth, m), .size = sizeof(((struct config_auth *)0)->m)
#define F(m) .max = sizeof(((struct config_auth *)0)->m) - 1

static const struct config_key auth_keys[] = {
    {.name = "type", .type = CONFIG_KEY_ENUM, .flags = CONFIG_KEY_REQUIRED, A(type), .names = type_names,
     .nnames = 5, .doc = "`\"api_key\"`, `\"jwt\"`, `\"basic\"` or `\"forward\"`"},
    {.name = "realm", .type = CONFIG_KEY_STRING, A(realm), F(realm), .def = "weir", .check = realm_check,
     .doc = "the realm of `WWW-Authenticate` in a 401"},
    {.name = "consumer_header", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(consumer_header),
     F(consumer_header), .check = config_check_header_name,
     .doc = "header that carries the consumer (key's consumer, user, claim) upstream; a client's own is dropped"},
    {.name = "allow", .type = CONFIG_KEY_STRINGS, .def = "absent: every consumer",
     .doc = "consumers let through; any other gets 403"},
    {.name = "header", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(header), F(header),
     .check = config_check_header_name,
     .doc = "api_key: the request header with the key; `\"X-Api-Key\"` unless `query` is given"},
    {.name = "query", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(query), F(query),
     .check = query_check, .doc = "api_key: the query argument with the key"},
    {.name = "keys_file", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(keys_file), F(keys_file),
     .doc = "api_key, required: lines of `consumer sha256hex`"},
    {.name = "jwks_file", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(jwks_file), F(jwks_file),
     .doc = "jwt: a JWKS (RFC 7517) of the verification keys"},
    {.name = "keys", .type = CONFIG_KEY_STRINGS, .def = "absent: none",
     .doc = "jwt: PEM public key files, up to 16; a key's kid is its file name without extension"},
    {.name = "issuer", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(issuer), F(issuer),
     .doc = "jwt: the `iss` a token must have"},
    {.name = "audience", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(audience), F(audience),
     .doc = "jwt: a value `aud` must have (or hold)"},
    {.name = "leeway", .type = CONFIG_KEY_DURATION_OFF, A(leeway), .def = "30s",
     .doc = "jwt: clock skew allowed on `exp` and `nbf`, in whole seconds"},
    {.name = "cookie", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(cookie), F(cookie),
     .check = query_check, .doc = "jwt: a cookie that carries the token when there is no Bearer header"},
    {.name = "consumer_claim", .type = CONFIG_KEY_STRING, A(consumer_claim), F(consumer_claim), .def = "sub",
     .check = claim_check, .doc = "jwt: the claim that names the consumer"},
    {.name = "claims_to_headers", .type = CONFIG_KEY_STRINGS, .def = "absent: none",
     .doc = "jwt: `\"claim:Header-Name\"` entries, up to 8: string, number or boolean claims passed upstream"},
    {.name = "htpasswd", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(htpasswd), F(htpasswd),
     .doc = "basic, required: an htpasswd file of bcrypt or SHA-crypt hashes"},
    {.name = "hash_rate", .type = CONFIG_KEY_INT, A(hash_rate), .min = 1, .max = 100000, .def = "20",
     .doc = "basic: password hashes a worker computes per second at most; past it, unverified credentials get 503"},
    {.name = "upstream", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, A(fwd_upstream), F(fwd_upstream),
     .doc = "forward, required: the upstream group of the auth service (plain HTTP)"},
    {.name = "path", .type = CONFIG_KEY_STRING, A(fwd_path), F(fwd_path), .def = "/", .check = fwd_path_check,
     .doc = "forward: the target asked of the auth service"},
    {.name = "request_headers", .type = CONFIG_KEY_STRINGS, .def = "`[ \"Authorization\", \"Cookie\" ]`",
     .doc = "forward: the client's headers sent to the auth service, up to 16"},
    {.name = "response_headers", .type = CONFIG_KEY_STRINGS, .def = "absent: none",
     .doc = "forward: the auth service's headers copied into the request on a 2xx, up to 16; a client's own is dropped"},
    {.name = "cache", .type = CONFIG_KEY_DURATION_OFF, A(fwd_cache), .min = 1, .max = 86400000, .def = "off",
     .doc = "forward: how long a worker keeps a result (2xx, 401, 403) for the same `cache_key` values"},
    {.name = "cache_key", .type = CONFIG_KEY_STRINGS, .def = "`request_headers`",
     .doc = "forward: the request headers a cached result is keyed by, up to 16"},
    {.name = "timeout", .type = CONFIG_KEY_DURATION, A(fwd_timeout), .min = 1, .max = 600000, .def = "5s",
     .doc = "forward: connect, send and answer within it, else 503"},
};

const struct config_keyset config_keys_route_auth = {
    .path = "routes.auth", .where = "in routes.auth", .keys = auth_keys,
    .nkeys = (int)(sizeof auth_keys / sizeof auth_keys[0])};

/* Which types a key belongs to: the keys above "header" serve all. */
static unsigned key_types(const char *name)
{
	static const struct {
		const char *name;
		unsigned types;
	} only[] = {
	    {"header", 1u << AUTH_API_KEY},   {"query", 1u << AUTH_API_KEY},     {"keys_file", 1u << AUTH_API_KEY},
	    {"jwks_file", 1u << AUTH_JWT},    {"keys", 1u << AUTH_JWT},          {"issuer", 1u << AUTH_JWT},
	    {"audience", 1u << AUTH_JWT},     {"leeway", 1u << AUTH_JWT},        {"cookie", 1u << AUTH_JWT},
	    {"consumer_claim", 1u << AUTH_JWT}, {"claims_to_headers", 1u << AUTH_JWT},
	    {"htpasswd", 1u << AUTH_BASIC},   {"hash_rate", 1u << AUTH_BASIC},
	    {"upstream", 1u << AUTH_FORWARD}, {"path", 1u << AUTH_FORWARD},    {"request_headers", 1u << AUTH_FORWARD},
	    {"response_headers", 1u << AUTH_FORWARD}, {"cache", 1u << AUTH_FORWARD}, {"cache_key", 1u << AUTH_FORWARD},
	    {"timeout", 1u << AUTH_FORWARD},
	};

	for (size_t i = 0; i < sizeof only / sizeof only[0]; i++)
		if (strcmp(only[i].name, name) == 0)
			return only[i].types;
	return ~0u;
}

/* A list of strings <name> of <g>: calls <each> per entry; returns the
 * count, or -1 when reported. */
static int read_strings(struct loader *ld, const config_setting_t *g, const char *name, int max,
                        int (*each)(struct loader *ld, int line, struct config_auth *a, int i, const char *v),
                        struct config_auth *a)
{
	const config_setting_t *s = config_setting_get_member(g, name);
	int n;

	if (!s)
		return 0;
	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		fail(ld, line_of(s), "routes.auth.%s must be a list of strings: %s = [ \"...\" ];", name, name);
		return -1;
	}
	n = config_setting_length(s);
	if (n > max) {
		fail(ld, line_of(s), "routes.auth.%s has %d entries, at most %d are allowed", name, n, max);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));

		if (!v) {
			fail(ld, line_of(s), "routes.auth.%s must be a list of strings", name);
			return -1;
		}
		if (each(ld, line_of(s), a, i, v) < 0)
			return -1;
	}
	return n;
}

static int take_allow(struct loader *ld, int line, struct config_auth *a, int i, const char *v)
{
	if (!*v || strlen(v) >= AUTH_NAME_MAX) {
		fail(ld, line, "routes.auth.allow entries must be consumer names of 1 to %d bytes", AUTH_NAME_MAX - 1);
		return -1;
	}
	strcpy(a->allow[i], v);
	return 0;
}

static int take_pem(struct loader *ld, int line, struct config_auth *a, int i, const char *v)
{
	if (!*v || strlen(v) >= sizeof a->pem[i]) {
		fail(ld, line, "routes.auth.keys entries must be file paths");
		return -1;
	}
	strcpy(a->pem[i], v);
	return 0;
}

static int take_claim(struct loader *ld, int line, struct config_auth *a, int i, const char *v)
{
	const char *colon = strchr(v, ':');
	struct auth_claim_header *c = &a->claims[i];
	size_t cl = colon ? (size_t)(colon - v) : 0;

	if (!colon || cl == 0 || cl >= sizeof c->claim || strlen(colon + 1) >= sizeof c->header) {
		fail(ld, line, "routes.auth.claims_to_headers entries must be \"claim:Header-Name\" (\"%s\")", v);
		return -1;
	}
	memcpy(c->claim, v, cl);
	c->claim[cl] = '\0';
	strcpy(c->header, colon + 1);
	if (claim_check(c->claim) || config_check_header_name(c->header)) {
		fail(ld, line, "routes.auth.claims_to_headers \"%s\": the claim must be printable, the header a name "
		     "weir does not write itself", v);
		return -1;
	}
	return 0;
}

/* forward's header lists: names weir does not write itself. */
static int take_name(struct loader *ld, int line, const char *key, char *dst, const char *v)
{
	if (strlen(v) >= AUTH_NAME_MAX || config_check_header_name(v)) {
		fail(ld, line, "routes.auth.%s \"%.64s\" must be a header name weir does not write itself", key, v);
		return -1;
	}
	strcpy(dst, v);
	return 0;
}

static int take_fwd_req(struct loader *ld, int line, struct config_auth *a, int i, const char *v)
{
	return take_name(ld, line, "request_headers", a->fwd_req[i], v);
}

static int take_fwd_resp(struct loader *ld, int line, struct config_auth *a, int i, const char *v)
{
	return take_name(ld, line, "response_headers", a->fwd_resp[i], v);
}

static int take_fwd_key(struct loader *ld, int line, struct config_auth *a, int i, const char *v)
{
	return take_name(ld, line, "cache_key", a->fwd_key[i], v);
}

/* forward: the lists (defaults: Authorization and Cookie sent, the cache
 * keyed by what is sent) and the group, which must be plain HTTP. */
static void check_forward(struct loader *ld, const config_setting_t *g, struct config_auth *a, const enum got *got)
{
	const struct config *cfg = ld->cfg;
	int n;

	if ((n = read_strings(ld, g, "request_headers", AUTH_FWD_HEADERS_MAX, take_fwd_req, a)) >= 0)
		a->nfwd_req = n;
	if (!config_setting_get_member(g, "request_headers")) {
		strcpy(a->fwd_req[0], "Authorization");
		strcpy(a->fwd_req[1], "Cookie");
		a->nfwd_req = 2;
	}
	if ((n = read_strings(ld, g, "response_headers", AUTH_FWD_HEADERS_MAX, take_fwd_resp, a)) >= 0)
		a->nfwd_resp = n;
	if ((n = read_strings(ld, g, "cache_key", AUTH_FWD_HEADERS_MAX, take_fwd_key, a)) >= 0)
		a->nfwd_key = n;
	if (!config_setting_get_member(g, "cache_key")) {
		memcpy(a->fwd_key, a->fwd_req, sizeof a->fwd_key);
		a->nfwd_key = a->nfwd_req;
	}
	a->fwd_group = -1;
	if (config_engine_got(&config_keys_route_auth, got, "upstream") == GOT_NONE) {
		fail(ld, line_of(g), "routes.auth.upstream is required for type \"forward\"");
		return;
	}
	for (int i = 0; i < cfg->nupstreams; i++)
		if (strcmp(cfg->upstreams[i].name, a->fwd_upstream) == 0)
			a->fwd_group = i;
	if (a->fwd_group < 0)
		fail(ld, line_of(config_setting_get_member(g, "upstream")), "routes.auth.upstream \"%s\" is not defined",
		     a->fwd_upstream);
	else if (cfg->upstreams[a->fwd_group].tls || cfg->upstreams[a->fwd_group].proxy_protocol ||
	         cfg->upstreams[a->fwd_group].protocol)
		fail(ld, line_of(config_setting_get_member(g, "upstream")),
		     "routes.auth.upstream \"%s\" must be a plain HTTP group: forward auth speaks neither TLS, the "
		     "PROXY protocol nor HTTP/2 to it", a->fwd_upstream);
}

/* Loads one file with <load>, reporting <why> on the line of key <key>. */
static void load_file(struct loader *ld, const config_setting_t *g, const char *key, struct config_auth *a,
                      int (*load)(struct config_auth *, char *, size_t))
{
	char why[400];

	if (load(a, why, sizeof why) < 0)
		fail(ld, line_of(config_setting_get_member(g, key)), "routes.auth.%s %s", key, why);
}

static void check_type_rules(struct loader *ld, const config_setting_t *g, struct config_auth *a,
                             const enum got *got)
{
	const struct config_keyset *ks = &config_keys_route_auth;
	char why[400];

	switch (a->type) {
	case AUTH_API_KEY:
		if (config_engine_got(ks, got, "keys_file") == GOT_NONE)
			fail(ld, line_of(g), "routes.auth.keys_file is required for type \"api_key\"");
		else if (config_engine_got(ks, got, "keys_file") == GOT_OK)
			load_file(ld, g, "keys_file", a, auth_load_keys_file);
		if (!a->header[0] && !a->query[0])
			strcpy(a->header, "X-Api-Key");
		break;
	case AUTH_JWT:
		if (config_engine_got(ks, got, "jwks_file") == GOT_NONE && a->npem == 0)
			fail(ld, line_of(g), "routes.auth of type \"jwt\" needs jwks_file or keys");
		if (config_engine_got(ks, got, "jwks_file") == GOT_OK)
			load_file(ld, g, "jwks_file", a, auth_load_jwks);
		for (int i = 0; i < a->npem; i++)
			if (auth_load_pem(a, i, why, sizeof why) < 0)
				fail(ld, line_of(config_setting_get_member(g, "keys")), "routes.auth.keys %s", why);
		break;
	case AUTH_FORWARD:
		check_forward(ld, g, a, got);
		break;
	case AUTH_BASIC:
		if (config_engine_got(ks, got, "htpasswd") == GOT_NONE)
			fail(ld, line_of(g), "routes.auth.htpasswd is required for type \"basic\"");
		else if (config_engine_got(ks, got, "htpasswd") == GOT_OK)
			load_file(ld, g, "htpasswd", a, auth_load_htpasswd);
		break;
	default:
		break;
	}
}

int config_auth_read(struct loader *ld, const config_setting_t *e, struct config_auth **out)
{
	const struct config_keyset *ks = &config_keys_route_auth;
	config_setting_t *g = config_get_group(ld, e, "auth", "routes.auth");
	enum got got[CONFIG_KEYS_MAX];
	struct config_auth *a;
	int n;

	*out = NULL;
	if (!g)
		return 0;
	if (!(a = calloc(1, sizeof *a)))
		return -1;
	*out = a;
	a->line = line_of(g);
	config_engine_read(ld, g, ks, a, got);
	if (config_engine_got(ks, got, "type") != GOT_OK)
		return 0;
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(s);

		if (config_keys_find(ks, name) && !(key_types(name) & 1u << a->type))
			fail(ld, line_of(s), "routes.auth.%s is not a key of type \"%s\"", name, auth_type_name(a->type));
	}
	if ((n = read_strings(ld, g, "allow", AUTH_ALLOW_MAX, take_allow, a)) >= 0)
		a->nallow = n;
	if ((n = read_strings(ld, g, "keys", AUTH_PEM_MAX, take_pem, a)) >= 0)
		a->npem = n;
	if ((n = read_strings(ld, g, "claims_to_headers", AUTH_CLAIMS_MAX, take_claim, a)) >= 0)
		a->nclaims = n;
	check_type_rules(ld, g, a, got);
	return 0;
}

/* weir -T: "<name> = [ ... ]; " of <n> names of AUTH_NAME_MAX bytes. */
static void dump_names(FILE *out, const char *name, const char (*v)[AUTH_NAME_MAX], int n)
{
	fprintf(out, "%s = [", name);
	for (int i = 0; i < n; i++) {
		fputs(i ? ", " : " ", out);
		config_dump_string(out, v[i]);
	}
	fputs(n ? " ]; " : "]; ", out);
}

/* weir -T: the keys of a->type only, then the lists. */
void config_auth_dump(FILE *out, const struct config *cfg, const struct config_auth *a)
{
	struct config_key keys[sizeof auth_keys / sizeof auth_keys[0]];
	struct config_keyset ks = config_keys_route_auth;
	int n = 0;

	for (int i = 0; i < config_keys_route_auth.nkeys; i++)
		if (key_types(auth_keys[i].name) & 1u << a->type)
			keys[n++] = auth_keys[i];
	ks.keys = keys;
	ks.nkeys = n;
	fputs("auth = { ", out);
	config_dump_keys(out, cfg, &ks, a, NULL);
	if (a->nallow) {
		fputs("allow = [", out);
		for (int i = 0; i < a->nallow; i++)
		{
			fputs(i ? ", " : " ", out);
			config_dump_string(out, a->allow[i]);
		}
		fputs(" ]; ", out);
	}
	if (a->npem) {
		fputs("keys = [", out);
		for (int i = 0; i < a->npem; i++) {
			fputs(i ? ", " : " ", out);
			config_dump_string(out, a->pem[i]);
		}
		fputs(" ]; ", out);
	}
	if (a->nclaims) {
		fputs("claims_to_headers = [", out);
		for (int i = 0; i < a->nclaims; i++)
			fprintf(out, "%s\"%s:%s\"", i ? ", " : " ", a->claims[i].claim, a->claims[i].header);
		fputs(" ]; ", out);
	}
	if (a->type == AUTH_FORWARD) {
		dump_names(out, "request_headers", (const char(*)[AUTH_NAME_MAX])a->fwd_req, a->nfwd_req);
		dump_names(out, "response_headers", (const char(*)[AUTH_NAME_MAX])a->fwd_resp, a->nfwd_resp);
		dump_names(out, "cache_key", (const char(*)[AUTH_NAME_MAX])a->fwd_key, a->nfwd_key);
	}
	fputs("}; ", out);
}
