/*
 * auth.c: the check of routes.auth (worker/auth.h): policies matched to
 * routes, the answers, API keys and Basic; JWT is in auth_jwt.c.
 *
 * Basic's cost: a bcrypt or SHA-crypt hash takes milliseconds of the one
 * thread that serves every connection of the worker. So a password is
 * hashed once per worker: the outcome (good or bad) is kept in a cache
 * keyed by HMAC-SHA256(user, password) under a key drawn when the worker
 * starts (the cache never holds a password, and its index cannot be
 * computed from outside), and a repeated credential costs one HMAC. What
 * is not in the cache is hashed only while the policy's budget lasts: a
 * token bucket of hash_rate hashes a second per worker. Past it, such
 * requests are answered 503 with Retry-After without hashing and counted
 * (result "busy"), so a flood of guesses costs a worker at most hash_rate
 * hashes a second while credentials already verified still pass. An
 * unknown user is refused without hashing at all.
 */

#include "worker/core/core.h"
#include <crypt.h>
#include <openssl/hmac.h>
#include <openssl/mem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth_b64.h"
#include "common/auth_result.h"
#include "common/config_match.h"
#include "common/log.h"
#include "shm/route_match.h"

enum { ANS_MISSING, ANS_INVALID, ANS_FORBIDDEN, ANS_BUSY, ANS_STALE, ANS_COUNT };

/* A refusal of a policy, made once: a challenge or a Retry-After, its
 * text body; conn_answer_with() adds Connection and the request id. */
struct auth_answer {
	struct answer a;
	struct answer_field f[3];
	char extra[300]; /* the value of the first field, when it has one */
	char body[64];
};

/* A policy of this worker's configuration, with what it needs at run time. */
struct auth_rt {
	const struct config_auth *p;
	const struct config_route *route;
	struct auth_answer ans[ANS_COUNT];
	double tokens;    /* Basic: hashes left in the bucket */
	ev_tstamp refill; /* when the bucket was last topped up */
};

/* The Basic cache: sets of ways, each entry the HMAC of a credential. */
#define BASIC_SETS 1024
#define BASIC_WAYS 4

struct basic_entry {
	uint8_t mac[32];
	const struct auth_rt *rt; /* NULL: free */
	const struct auth_user *user;
	uint8_t good;
	uint32_t stamp; /* insertion order, for replacement */
};

static struct {
	struct auth_rt *rt; /* one per route of the config with auth */
	int nrt;
	uint64_t table_id; /* the table by_route was matched for */
	struct auth_rt *by_route[CONFIG_MAX_ROUTES];
	uint8_t boot_key[32];
	struct basic_entry *basic; /* BASIC_SETS * BASIC_WAYS, in BoringSSL's heap */
	uint32_t stamp;
	struct crypt_data *cd; /* crypt_rn's work area (about 32 KiB) */
	char scratch[1024];    /* the consumer header line of the last check */
} au;

/* ---- answers --------------------------------------------------------- */

/* <x> is the answer <status> <reason> with field <name>: <value> first
 * (none when <name> is NULL), then its text body's type and length. */
static int answer_make(struct auth_answer *x, int status, const char *reason, const char *name, const char *value)
{
	struct answer *a = &x->a;
	int blen = snprintf(x->body, sizeof x->body, "%d %s\n", status, reason);

	*a = (struct answer){.status = status, .reason = reason, .f = x->f, .cap = 3, .body = x->body};
	a->body_len = (uint32_t)blen;
	if (name) {
		size_t n = strlen(value);

		if (n >= sizeof x->extra)
			return -1;
		memcpy(x->extra, value, n + 1);
		answer_add(a, name, x->extra, n);
	}
	answer_add(a, "Content-Type", "text/plain", 10);
	return answer_length(a, (uint64_t)blen);
}

static int rt_init(struct auth_rt *rt)
{
	const struct config_auth *p = rt->p;
	char missing[300], invalid[300];

	switch (p->type) {
	case AUTH_JWT:
		snprintf(missing, sizeof missing, "Bearer realm=\"%s\"", p->realm);
		snprintf(invalid, sizeof invalid, "Bearer realm=\"%s\", error=\"invalid_token\"", p->realm);
		break;
	case AUTH_BASIC:
		snprintf(missing, sizeof missing, "Basic realm=\"%s\", charset=\"UTF-8\"", p->realm);
		strcpy(invalid, missing);
		break;
	default:
		/* no registered scheme for API keys: named as Kong and others do */
		snprintf(missing, sizeof missing, "ApiKey realm=\"%s\"", p->realm);
		strcpy(invalid, missing);
		break;
	}
	rt->tokens = p->hash_rate;
	return answer_make(&rt->ans[ANS_MISSING], 401, "Unauthorized", "WWW-Authenticate", missing) < 0 ||
	               answer_make(&rt->ans[ANS_INVALID], 401, "Unauthorized", "WWW-Authenticate", invalid) < 0 ||
	               answer_make(&rt->ans[ANS_FORBIDDEN], 403, "Forbidden", NULL, NULL) < 0 ||
	               answer_make(&rt->ans[ANS_BUSY], 503, "Service Unavailable", "Retry-After", "1") < 0 ||
	               answer_make(&rt->ans[ANS_STALE], 503, "Service Unavailable", NULL, NULL)
	           ? -1
	           : 0;
}

int auth_init(const struct config *cfg)
{
	if (fwdauth_init(cfg) < 0)
		return -1;
	int n = 0, basic = 0;

	memset(&au, 0, sizeof au);
	for (int i = 0; i < cfg->nroutes; i++)
		n += cfg->routes[i].auth != NULL;
	if (n == 0)
		return 0;
	au.rt = calloc((size_t)n, sizeof *au.rt);
	if (!au.rt)
		return -1;
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_route *r = &cfg->routes[i];
		struct auth_rt *rt = &au.rt[au.nrt];

		if (!r->auth)
			continue;
		rt->p = r->auth;
		rt->route = r;
		if (rt_init(rt) < 0)
			return -1;
		basic |= r->auth->type == AUTH_BASIC;
		au.nrt++;
	}
	RAND_bytes(au.boot_key, sizeof au.boot_key);
	if (basic) {
		au.basic = OPENSSL_malloc(BASIC_SETS * BASIC_WAYS * sizeof *au.basic);
		au.cd = OPENSSL_malloc(sizeof *au.cd);
		if (!au.basic || !au.cd)
			return -1;
		memset(au.basic, 0, BASIC_SETS * BASIC_WAYS * sizeof *au.basic);
		memset(au.cd, 0, sizeof *au.cd);
	}
	return auth_jwt_init();
}

void auth_vouch_names(const struct config *cfg, void (*vouch)(const char *name))
{
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_auth *a = cfg->routes[i].auth;

		if (!a)
			continue;
		if (a->consumer_header[0])
			vouch(a->consumer_header);
		for (int k = 0; k < a->nclaims; k++)
			vouch(a->claims[k].header);
		for (int k = 0; k < a->nfwd_resp; k++)
			vouch(a->fwd_resp[k]); /* forward: what the auth service vouches for */
	}
}

/* The policies of the routes of <tab>, found by (host, path) in ours. */
static void auth_sync(const struct route_table *tab)
{
	for (uint32_t i = 0; i < tab->nroutes; i++) {
		const struct route_entry *e = &route_entries(tab)[i];

		au.by_route[i] = NULL;
		for (int k = 0; k < au.nrt && e->auth; k++) {
			const struct config_route *r = au.rt[k].route;

			if (r->host_kind == e->host_kind && strcmp(r->host, route_host(tab, e)) == 0 &&
			    strcmp(config_route_label(r), route_label(tab, e)) == 0) {
				au.by_route[i] = &au.rt[k];
				break;
			}
		}
	}
	au.table_id = tab->id;
}

/* ---- helpers ----------------------------------------------------------- */

static int span_ieq(const char *a, size_t alen, const char *b)
{
	size_t n = strlen(b);

	return alen == n && strncasecmp(a, b, n) == 0;
}

const struct hdr *auth_header(const struct txn *t, const char *name, int *dup)
{
	const struct hdr *found = NULL;

	*dup = 0;
	for (uint32_t i = 0; i < t->req.hl.n; i++) {
		const struct hdr *h = &t->req.hl.v[i];

		if (span_ieq(h->name, h->name_len, name)) {
			if (found)
				*dup = 1;
			found = h;
		}
	}
	return found;
}

static int allowed(const struct config_auth *p, const char *who, size_t len)
{
	if (p->nallow == 0)
		return 1;
	for (int i = 0; i < p->nallow; i++)
		if (strlen(p->allow[i]) == len && memcmp(p->allow[i], who, len) == 0)
			return 1;
	return 0;
}

/* The consumer into <st>, and its header line into the scratch area. */
static void set_consumer(struct auth_state *st, const struct config_auth *p, const char *who, size_t len)
{
	int n;

	if (len >= sizeof st->consumer)
		len = sizeof st->consumer - 1;
	memcpy(st->consumer, who, len);
	st->consumer[len] = '\0';
	st->consumer_len = (uint8_t)len;
	if (!p->consumer_header[0])
		return;
	n = snprintf(au.scratch, sizeof au.scratch, "%s: %s\r\n", p->consumer_header, st->consumer);
	st->extra = au.scratch;
	st->extra_len = (uint32_t)n;
}

static int hex_value(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* The value of query argument <name> of the request, percent-decoded into
 * <out>: its length, 0 when absent, -1 when malformed or given twice. */
static long query_arg(const struct txn *t, const char *name, char *out, size_t cap)
{
	const char *q = memchr(t->req.target, '?', t->req.target_len);
	const char *end = t->req.target + t->req.target_len;
	size_t nl = strlen(name);
	long found = 0;

	if (!q)
		return 0;
	for (const char *p = q + 1; p < end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *e = amp ? amp : end;

		if ((size_t)(e - p) > nl && p[nl] == '=' && memcmp(p, name, nl) == 0) {
			size_t n = 0;

			if (found)
				return -1;
			for (const char *v = p + nl + 1; v < e; v++) {
				int c = (unsigned char)*v;

				if (c == '%') {
					if (e - v < 3 || hex_value(v[1]) < 0 || hex_value(v[2]) < 0)
						return -1;
					c = hex_value(v[1]) << 4 | hex_value(v[2]);
					v += 2;
				}
				if (n == cap)
					return -1;
				out[n++] = (char)c;
			}
			found = n ? (long)n : -1;
		}
		p = e + 1;
	}
	return found;
}

/* ---- API keys ---------------------------------------------------------- */

/*
 * The key is hashed and its digest looked up by binary search among the
 * sorted digests, then compared once more in constant time. The search's
 * comparisons are between digests: what their timing could reveal is
 * where an attacker's own digest sorts, nothing of a stored key.
 */
static int check_api_key(struct txn *t, const struct config_auth *p, struct auth_state *st)
{
	char qbuf[512];
	const char *key = NULL;
	size_t klen = 0;
	uint8_t d[32];
	const struct auth_apikey *k;

	if (p->header[0]) {
		int dup;
		const struct hdr *h = auth_header(t, p->header, &dup);

		if (h && (dup || h->value_len == 0))
			return AUTH_R_MALFORMED;
		if (h) {
			key = h->value;
			klen = h->value_len;
		}
	}
	if (!key && p->query[0]) {
		long n = query_arg(t, p->query, qbuf, sizeof qbuf);

		if (n < 0)
			return AUTH_R_MALFORMED;
		key = n ? qbuf : NULL;
		klen = (size_t)n;
	}
	if (!key)
		return AUTH_R_MISSING;
	SHA256((const uint8_t *)key, klen, d);
	OPENSSL_cleanse(qbuf, sizeof qbuf);
	k = auth_find_key(p, d);
	if (!k || CRYPTO_memcmp(k->digest, d, 32) != 0)
		return AUTH_R_UNKNOWN_KEY;
	set_consumer(st, p, k->consumer, strlen(k->consumer));
	return AUTH_R_OK;
}

/* ---- Basic ------------------------------------------------------------- */

static int basic_budget(struct auth_rt *rt)
{
	ev_tstamp now = ev_now(wk.loop);
	double rate = rt->p->hash_rate;

	rt->tokens += (now - rt->refill) * rate;
	if (rt->tokens > rate)
		rt->tokens = rate;
	rt->refill = now;
	if (rt->tokens < 1.0)
		return 0;
	rt->tokens -= 1.0;
	return 1;
}

static int check_basic(struct txn *t, struct auth_rt *rt, struct auth_state *st, int *cached)
{
	const struct config_auth *p = rt->p;
	int dup, good;
	const struct hdr *h = auth_header(t, "authorization", &dup);
	uint8_t cred[384], mac[32];
	unsigned maclen = 0;
	long n;
	const char *colon;
	const struct auth_user *u;
	struct basic_entry *set, *e, *victim;
	const char *out;

	if (!h)
		return AUTH_R_MISSING;
	if (dup || h->value_len < 6 || strncasecmp(h->value, "basic ", 6) != 0)
		return AUTH_R_MALFORMED;
	n = auth_b64_decode(h->value + 6, h->value_len - 6, cred, sizeof cred - 1, 0);
	/* a NUL would end the password early for crypt_rn */
	if (n <= 0 || !(colon = memchr(cred, ':', (size_t)n)) || memchr(cred, '\0', (size_t)n))
		return AUTH_R_MALFORMED;
	cred[n] = '\0';
	if (!(u = auth_find_user(p, (const char *)cred, (size_t)(colon - (const char *)cred)))) {
		OPENSSL_cleanse(cred, sizeof cred);
		return AUTH_R_UNKNOWN_USER;
	}
	/* an entry is also the policy's (e->rt): one password, two htpasswd files */
	HMAC(EVP_sha256(), au.boot_key, sizeof au.boot_key, cred, (size_t)n, mac, &maclen);
	set = &au.basic[(mac[1] | (uint32_t)mac[2] << 8) % BASIC_SETS * BASIC_WAYS];
	victim = set;
	for (e = set; e < set + BASIC_WAYS; e++) {
		if (e->rt == rt && CRYPTO_memcmp(e->mac, mac, 32) == 0) {
			OPENSSL_cleanse(cred, sizeof cred);
			if (!e->good)
				return AUTH_R_BAD_PASSWORD;
			*cached = 1;
			set_consumer(st, p, u->name, strlen(u->name));
			return AUTH_R_OK;
		}
		if (!e->rt || (victim->rt && e->stamp < victim->stamp))
			victim = e;
	}
	if (!basic_budget(rt)) {
		OPENSSL_cleanse(cred, sizeof cred);
		return AUTH_R_BUSY;
	}
	SHM_ADD(&wk.rcnt[t->route->stat], auth_hashes, 1);
	out = crypt_rn(colon + 1, u->hash, au.cd, (int)sizeof *au.cd);
	good = out && strlen(out) == strlen(u->hash) && CRYPTO_memcmp(out, u->hash, strlen(u->hash)) == 0;
	OPENSSL_cleanse(cred, sizeof cred);
	OPENSSL_cleanse(au.cd, sizeof *au.cd);
	memcpy(victim->mac, mac, 32);
	victim->rt = rt;
	victim->user = u;
	victim->good = (uint8_t)good;
	victim->stamp = ++au.stamp;
	if (!good)
		return AUTH_R_BAD_PASSWORD;
	set_consumer(st, p, u->name, strlen(u->name));
	return AUTH_R_OK;
}

/* ---- the check ----------------------------------------------------------- */

/* One line a second at most, with how many refusals went unlogged; the
 * reason and the route, never what the client sent. */
static void auth_log_refusal(const struct txn *t, int res, int status)
{
	static ev_tstamp next;
	static uint32_t unlogged;
	static const char *const reason[] = {
#define AUTH_R_REASON(n, r, why) why,
	    AUTH_RESULTS(AUTH_R_REASON)
#undef AUTH_R_REASON
	};
	char host[CONFIG_HOST_MAX + 2];

	if (log_level_min > LOG_LEVEL_INFO || !worker_log_gate(&next, &unlogged))
		return;
	log_info("%s: auth on host %s path %s: %s -> %d (%u more refusals since the last line)", t->c->peer,
	         config_host_text(t->route->host_kind, route_host(t->table, t->route), host, sizeof host),
	         route_path(t->table, t->route), reason[res],
	         status, unlogged);
	unlogged = 0;
}

int auth_check(struct txn *t)
{
	struct auth_rt *rt;
	struct auth_state *st = &t->auth;
	int res, cached = 0, ans, rc;

	if (t->table->id != au.table_id)
		auth_sync(t->table);
	rt = au.by_route[t->route - route_entries(t->table)];
	if (rt && rt->p->type == AUTH_FORWARD && t->route->auth == AUTH_FORWARD)
		return fwdauth_begin(t, rt->p); /* counts and answers itself */
	if (!rt || rt->p->type != t->route->auth) {
		res = AUTH_R_STALE;
	} else {
		switch (rt->p->type) {
		case AUTH_API_KEY: res = check_api_key(t, rt->p, st); break;
		case AUTH_JWT: res = auth_jwt_check(t, rt->p, st, &cached); break;
		default: res = check_basic(t, rt, st, &cached); break;
		}
		if (res == AUTH_R_OK && !allowed(rt->p, st->consumer, st->consumer_len))
			res = AUTH_R_FORBIDDEN;
	}
	SHM_ADD(&wk.rcnt[t->route->stat], auth[res], 1);
	if (res == AUTH_R_OK) {
		if (cached)
			SHM_ADD(&wk.rcnt[t->route->stat], auth_cached, 1);
		return 0;
	}
	switch (res) {
	case AUTH_R_MISSING: ans = ANS_MISSING, rc = WEIR_ERR(AUTH_REQUIRED); break;
	case AUTH_R_FORBIDDEN: ans = ANS_FORBIDDEN, rc = WEIR_ERR(AUTH_FORBIDDEN); break;
	case AUTH_R_BUSY: ans = ANS_BUSY, rc = WEIR_ERR(AUTH_BUSY); break;
	case AUTH_R_STALE: ans = ANS_STALE, rc = WEIR_ERR(AUTH_STALE); break;
	default: ans = ANS_INVALID, rc = WEIR_ERR(AUTH_REQUIRED); break;
	}
	auth_log_refusal(t, res, weir_err_status(rc));
	if (!rt) {
		/* no answers of our own for a policy we do not know */
		txn_fail(t, rc);
		return -1;
	}
	st->extra_len = 0;
	/* a body not read yet is not read at all: the connection closes */
	conn_answer_with(t->c, rc, !t->req_body_done, &rt->ans[ans].a);
	return -1;
}
