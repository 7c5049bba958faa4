/*
 * fwdauth.c: forward authentication (routes.auth type "forward", core.h:
 * fwdauth), nginx's auth_request and Traefik's ForwardAuth.
 *
 * The access phase asks an auth service before the request goes on: a
 * subrequest with the original method, the policy's path as its target,
 * X-Original-Method, X-Original-URI, X-Forwarded-For/-Proto/-Host and the
 * client's headers the policy names, no body. It runs on the upstream
 * machinery (worker/up/: pick, pool, connect, passive health) on a
 * connection of its own whose events come to the stream through the
 * usual upcalls (txn_on_upstream_event hands them here while t->fa->u is
 * set). A 2xx lets the request on with the service's chosen headers added
 * to the upstream head; a 401 or 403 is answered to the client with the
 * service's WWW-Authenticate, Content-Type and Set-Cookie and its body (up
 * to 4 KiB); any other status or an invalid answer is a 502, no server or
 * no answer within the policy's timeout a 503. The walk waits (PH_WAIT)
 * meanwhile, the client unread; txn_resume() goes on after ph_auth.
 *
 * The answer is read whole into one I/O buffer and parsed from its start
 * each time bytes arrive (a head and a small body), with a parser state
 * and header room of this file: the stream's own arena still holds the
 * request's headers, which the upstream head is written from later.
 *
 * A per-worker cache (auth.cache) keeps results, 2xx, 401 and 403 with
 * what they carry (up to 1 KiB), keyed by SHA-256 of the policy and the
 * values of its cache_key headers, for the policy's time.
 */
#include "worker/core/core.h"

#include <errno.h>
#include <openssl/mem.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/auth_result.h"
#include "common/log.h"
#include "worker/up/up.h"

#define FA_BODY_MAX 4096 /* a 401/403 body passed on, at most */
#define FA_DATA 1024     /* what a cache entry keeps */
#define FA_SETS 128
#define FA_WAYS 4

struct fa_entry {
	uint8_t key[32];
	const struct config_auth *p; /* NULL: free */
	ev_tstamp until;
	uint32_t stamp;
	uint16_t status;
	uint16_t hdrs_len; /* header lines: for the upstream (2xx) or the client */
	uint16_t body_len;
	char data[FA_DATA];
};

static struct {
	struct fa_entry *cache; /* FA_SETS * FA_WAYS, made at start when a policy caches */
	uint32_t stamp;
	struct hdr mem[64]; /* the answer's header list while it is parsed */
	struct msg m;
	struct http_response p;
	char lines[FA_DATA * 2]; /* header lines picked from an answer */
	char body[FA_BODY_MAX];
} fa;

int fwdauth_init(const struct config *cfg)
{
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_auth *p = cfg->routes[i].auth;

		if (p && p->type == AUTH_FORWARD && p->fwd_cache && !fa.cache) {
			/* in BoringSSL's heap: out of core dumps, as the other caches */
			if (!(fa.cache = OPENSSL_malloc(FA_SETS * FA_WAYS * sizeof *fa.cache)))
				return -1;
			memset(fa.cache, 0, FA_SETS * FA_WAYS * sizeof *fa.cache);
		}
	}
	return 0;
}

/* ---- the end of a subrequest ------------------------------------------ */

/* Drops the subrequest's connection: back to its pool when <reuse>. */
static void fa_detach(struct txn *t, int reuse)
{
	struct upconn *u = t->fa->u;

	if (!u)
		return;
	t->fa->u = NULL;
	u->txn = NULL;
	if (reuse)
		upstream_release(u);
	else
		upstream_close(u);
}

void fwdauth_release(struct txn *t)
{
	struct fwdauth_txn *f = t->fa;

	fa_detach(t, 0);
	if (f->out)
		buf_put(f->out);
	if (f->extra)
		buf_put(f->extra);
	t->fa = NULL;
	buf_put(f->self);
}

static void fa_count(struct txn *t, int res, int cached)
{
	SHM_ADD(&wk.rcnt[t->route->stat], auth[res], 1);
	if (cached)
		SHM_ADD(&wk.rcnt[t->route->stat], auth_cached, 1);
}

/* A failure (502 or 503): counted, logged at most once a second. */
static void fa_fail(struct txn *t, int res, int rc, const char *why)
{
	static ev_tstamp next;
	static uint32_t unlogged;

	fa_count(t, res, 0);
	if (log_level_min <= LOG_LEVEL_WARN && worker_log_gate(&next, &unlogged)) {
		log_warn("forward auth to %s for route %s: %s; answering %d (%u more since the last line)",
		         t->fa->p->fwd_upstream, route_path(t->table, t->route), why, weir_err_status(rc), unlogged);
		unlogged = 0;
	}
	fwdauth_release(t);
	txn_fail(t, rc);
}

/* Lets <t> on with header lines <h> for the upstream. Returns 0, or -1
 * when <t> was failed (no buffer). */
static int fa_allow(struct txn *t, const char *h, size_t n)
{
	if (n) {
		if (!t->fa->extra && !(t->fa->extra = buf_get_fit((uint32_t)n))) {
			fa_fail(t, AUTH_R_FWD_UNREACHABLE, WEIR_ERR(NOMEM), "no buffer for its headers");
			return -1;
		}
		memcpy(t->fa->extra->data, h, n);
	}
	t->auth.extra = n ? t->fa->extra->data : NULL;
	t->auth.extra_len = (uint32_t)n;
	return 0;
}

/* Answers <t> with the service's 401 or 403. */
static void fa_deny(struct txn *t, int status, const char *h, size_t hl, const char *body, size_t bl)
{
	int rc = status == 401 ? WEIR_ERR(AUTH_REQUIRED) : WEIR_ERR(AUTH_FORBIDDEN);

	/* the lines as weir picked them: each a field, in their order */
	static struct answer_field f[64];
	struct answer a = {.status = status, .f = f, .cap = 64, .body = body, .body_len = (uint32_t)bl};

	worker_count_error(rc);
	if (answer_lines(&a, h, hl) < 0 || answer_length(&a, bl) < 0 || respond_send(t, &a) < 0)
		txn_fail(t, rc);
}

/* ---- the cache ---------------------------------------------------------- */

/* The key of <t>'s request under policy <p>: the policy, then each
 * cache_key header's name and every value it has, in order. */
static void fa_key(const struct txn *t, const struct config_auth *p, uint8_t out[32])
{
	SHA256_CTX c;

	SHA256_Init(&c);
	SHA256_Update(&c, &p, sizeof p);
	for (int k = 0; k < p->nfwd_key; k++) {
		size_t nl = strlen(p->fwd_key[k]);

		SHA256_Update(&c, p->fwd_key[k], nl + 1);
		for (uint32_t i = 0; i < t->req.hl.n; i++) {
			const struct hdr *h = &t->req.hl.v[i];

			if (h->name_len == nl && strncasecmp(h->name, p->fwd_key[k], nl) == 0) {
				SHA256_Update(&c, h->value, h->value_len);
				SHA256_Update(&c, "\n", 1); /* no value holds a LF */
			}
		}
		SHA256_Update(&c, "", 1);
	}
	SHA256_Final(out, &c);
}

static struct fa_entry *fa_set(const uint8_t key[32])
{
	return &fa.cache[(key[0] | (uint32_t)key[1] << 8) % FA_SETS * FA_WAYS];
}

static void fa_store(const struct txn *t, int status, const char *h, size_t hl, const char *body, size_t bl)
{
	struct fa_entry *set, *e, *victim;

	if (!fa.cache || !t->fa->p->fwd_cache || !t->fa->keyed || hl + bl > FA_DATA)
		return;
	set = fa_set(t->fa->key);
	victim = set;
	for (e = set; e < set + FA_WAYS; e++) {
		if (!e->p || (e->p == t->fa->p && memcmp(e->key, t->fa->key, 32) == 0)) {
			victim = e;
			break;
		}
		if (e->stamp < victim->stamp)
			victim = e;
	}
	memcpy(victim->key, t->fa->key, 32);
	victim->p = t->fa->p;
	victim->until = ev_now(wk.loop) + t->fa->p->fwd_cache / 1000.0;
	victim->stamp = ++fa.stamp;
	victim->status = (uint16_t)status;
	victim->hdrs_len = (uint16_t)hl;
	victim->body_len = (uint16_t)bl;
	memcpy(victim->data, h, hl);
	memcpy(victim->data + hl, body, bl);
}

/* 1 when the cache answered <t> (let on: 0 in *<rc>; or answered: -1). */
static int fa_cached(struct txn *t, int *rc)
{
	struct fa_entry *set = fa_set(t->fa->key);

	for (struct fa_entry *e = set; e < set + FA_WAYS; e++) {
		if (e->p != t->fa->p || memcmp(e->key, t->fa->key, 32) != 0)
			continue;
		if (ev_now(wk.loop) >= e->until) {
			e->p = NULL;
			return 0;
		}
		if (e->status < 300) {
			fa_count(t, AUTH_R_OK, 1);
			*rc = fa_allow(t, e->data, e->hdrs_len);
			return 1;
		}
		fa_count(t, e->status == 401 ? AUTH_R_FWD_DENIED : AUTH_R_FWD_FORBIDDEN, 1);
		fa_deny(t, e->status, e->data, e->hdrs_len, e->data + e->hdrs_len, e->body_len);
		*rc = -1;
		return 1;
	}
	return 0;
}

/* ---- the subrequest ----------------------------------------------------- */

static void fa_put(struct buf *b, const char *s, size_t n)
{
	memcpy(b->data + b->end, s, n);
	b->end += (uint32_t)n;
}

/* The head sent to the auth service, into t->fa->out. Returns 0 or -1 (no
 * buffer, or the chosen headers do not fit one). */
static int fa_write_head(struct txn *t)
{
	const struct config_auth *p = t->fa->p;
	const struct msg *r = &t->req;
	size_t cl, need, hostl = r->host_len ? r->host_len : strlen(p->fwd_upstream);
	const char *client = realip_client(t->c, t, &cl), *host = r->host_len ? r->host : p->fwd_upstream;
	struct buf *b;
	char line[160];
	int n;

	need = r->method_len + strlen(p->fwd_path) + 2 * hostl + r->method_len + r->target_len + cl + 256 +
	       t->ident.id_len;
	for (int k = 0; k < p->nfwd_req; k++)
		for (uint32_t i = 0; i < r->hl.n; i++)
			if (r->hl.v[i].name_len == strlen(p->fwd_req[k]) &&
			    strncasecmp(r->hl.v[i].name, p->fwd_req[k], r->hl.v[i].name_len) == 0)
				need += r->hl.v[i].name_len + r->hl.v[i].value_len + 4;
	if (need > wk.buf_size || !(b = buf_get_fit((uint32_t)need)))
		return -1;
	b->start = b->end = 0;
	fa_put(b, r->method, r->method_len);
	fa_put(b, " ", 1);
	fa_put(b, p->fwd_path, strlen(p->fwd_path));
	fa_put(b, " HTTP/1.1\r\nHost: ", 17);
	fa_put(b, host, hostl);
	fa_put(b, "\r\nX-Original-Method: ", 21);
	fa_put(b, r->method, r->method_len);
	fa_put(b, "\r\nX-Original-URI: ", 18);
	fa_put(b, r->target, r->target_len);
	fa_put(b, "\r\nX-Forwarded-For: ", 19);
	fa_put(b, client, cl);
	n = snprintf(line, sizeof line, "\r\nX-Forwarded-Proto: %s\r\nX-Forwarded-Host: ", t->c->tls ? "https" : "http");
	fa_put(b, line, (size_t)n);
	fa_put(b, host, hostl);
	fa_put(b, "\r\n", 2);
	if (t->ident.id_len) {
		fa_put(b, "X-Request-Id: ", 14);
		fa_put(b, t->ident.id, t->ident.id_len);
		fa_put(b, "\r\n", 2);
	}
	for (int k = 0; k < p->nfwd_req; k++) {
		size_t nl = strlen(p->fwd_req[k]);

		for (uint32_t i = 0; i < r->hl.n; i++) {
			const struct hdr *h = &r->hl.v[i];

			if (h->name_len != nl || strncasecmp(h->name, p->fwd_req[k], nl) != 0)
				continue;
			fa_put(b, h->name, h->name_len);
			fa_put(b, ": ", 2);
			fa_put(b, h->value, h->value_len);
			fa_put(b, "\r\n", 2);
		}
	}
	/* the body stays with the request: the service sees none */
	fa_put(b, "Content-Length: 0\r\n\r\n", 21);
	t->fa->out = b;
	return 0;
}

static const struct route_upstream *fa_group(const struct txn *t)
{
	const struct route_upstream *ups = route_upstreams(t->table);

	/* by name: the table may be another configuration's than the policy */
	for (uint32_t i = 0; i < t->table->nupstreams; i++)
		if (strcmp(ups[i].name, t->fa->p->fwd_upstream) == 0)
			return &ups[i];
	return NULL;
}


/* Picks a server not tried yet and takes a pooled connection to it or
 * opens one. Returns 0, or the error to fail with. */
static int fa_connect(struct txn *t)
{
	const struct route_upstream *up = fa_group(t);

	if (!up)
		return WEIR_ERR(FWD_AUTH_UNREACHABLE);
	for (;;) {
		int si = upstream_pick(t->table, up, t->fa->tried), rc;
		struct upconn *u;

		if (si < 0)
			return WEIR_ERR(FWD_AUTH_UNREACHABLE);
		t->fa->tried |= 1ull << ((uint32_t)si - up->first_server);
		u = upstream_pool_get(t->table, (uint32_t)si);
		while (u && !upstream_pool_alive(u)) {
			upstream_close(u);
			u = upstream_pool_get(t->table, (uint32_t)si);
		}
		if (!u && !(u = upstream_connect(t->table, (uint32_t)si, &rc))) {
			if (rc == WEIR_ERR(NOMEM) || rc == WEIR_ERR(LOCAL_CONNECT_ERROR))
				return rc;
			continue; /* refused: the next server */
		}
		u->txn = t;
		t->fa->u = u;
		t->fa->server = si;
		t->fa->sent = 0;
		upstream_set_deadline(u, t->fa->until);
		worker_io_set(&u->io, u->connecting ? EV_WRITE : EV_WRITE | EV_READ);
		return 0;
	}
}

/* The connection failed before an answer: the next server, or fail. */
static void fa_retry(struct txn *t, int res, const char *why)
{
	const struct route_upstream *up = fa_group(t);
	int rc;

	/* a pooled connection the server closed as it idled (its close not
	 * seen yet) says nothing of the server: a fresh one to it may go */
	if (t->fa->u->reused && up)
		t->fa->tried &= ~(1ull << ((uint32_t)t->fa->server - up->first_server));
	fa_detach(t, 0);
	if (ev_now(wk.loop) < t->fa->until && (rc = fa_connect(t)) == 0)
		return; /* its events carry on */
	fa_fail(t, res, WEIR_ERR(FWD_AUTH_UNREACHABLE), why);
}

/* The answer in u->in is complete or needs more: 1 done (the stream was
 * let on or answered), 0 more bytes wanted. */
static int fa_answer(struct txn *t, int eof)
{
	struct upconn *u = t->fa->u;
	const char *p = u->in->data;
	size_t len = u->in->end, hl = 0, bl = 0, used;
	const struct config_auth *pol = t->fa->p;
	struct arena a;
	int rc, status, reuse;

	arena_init(&a, fa.mem, sizeof fa.mem);
	http_response_init(&fa.p, &fa.m, &a, 64, wk.buf_size / 2, t->req.method_id);
	rc = http_response_parse(&fa.p, p, len);
	if (rc == WEIR_EAGAIN && !eof && len < u->in->cap)
		return 0;
	if (rc < 0) {
		fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "an invalid or cut answer");
		return 1;
	}
	status = fa.m.status;
	if (status < 200) {
		fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "an interim answer");
		return 1;
	}
	/* the body: whole before anything is decided, so the connection can
	 * go back to its pool and a denial carries it */
	p += fa.m.head_len;
	len -= fa.m.head_len;
	if (fa.m.body == HTTP_BODY_LENGTH) {
		if (fa.m.content_length > FA_BODY_MAX) {
			fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "a body over 4 KiB");
			return 1;
		}
		if (len < fa.m.content_length)
			return eof ? (fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "a cut body"), 1) : 0;
		bl = (size_t)fa.m.content_length;
		memcpy(fa.body, p, bl);
		len -= bl; /* bytes past the answer: the connection is not fit to keep */
	} else if (fa.m.body == HTTP_BODY_CHUNKED) {
		struct http_chunked c;
		const char *d;
		size_t dl;

		http_chunked_init(&c);
		while (len && !c.done) {
			if (http_chunked_feed(&c, p, len, &used, &d, &dl) < 0 || bl + dl > FA_BODY_MAX) {
				fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "a bad or long chunked body");
				return 1;
			}
			if (dl)
				memcpy(fa.body + bl, d, dl);
			bl += dl;
			p += used;
			len -= used;
		}
		if (!c.done)
			return eof ? (fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "a cut body"), 1) : 0;
	} else if (fa.m.body == HTTP_BODY_CLOSE) {
		if (!eof)
			return len > FA_BODY_MAX ? (fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "a long body"), 1)
			                         : 0;
		bl = len;
		memcpy(fa.body, p, bl);
	}
	reuse = fa.m.keep_alive && fa.m.body != HTTP_BODY_CLOSE && len == 0 && !eof;
	if (status >= 200 && status < 300) {
		/* the policy's headers, as the policy spells their names */
		for (int k = 0; k < pol->nfwd_resp; k++) {
			size_t nl = strlen(pol->fwd_resp[k]);

			for (uint32_t i = 0; i < fa.m.hl.n; i++) {
				const struct hdr *h = &fa.m.hl.v[i];

				if (h->name_len != nl || strncasecmp(h->name, pol->fwd_resp[k], nl) != 0)
					continue;
				if (hl + nl + h->value_len + 4 > sizeof fa.lines)
					break;
				hl += (size_t)sprintf(fa.lines + hl, "%s: %.*s\r\n", pol->fwd_resp[k], (int)h->value_len,
				                      h->value);
			}
		}
		fa_store(t, status, fa.lines, hl, "", 0);
		fa_detach(t, reuse);
		buf_put(t->fa->out);
		t->fa->out = NULL;
		fa_count(t, AUTH_R_OK, 0);
		if (fa_allow(t, fa.lines, hl) == 0)
			txn_resume(t);
		return 1;
	}
	if (status != 401 && status != 403) {
		char why[48];

		snprintf(why, sizeof why, "it answered %d", status);
		fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), why);
		return 1;
	}
	/* what the client needs of a refusal: the challenge, the body's type,
	 * cookies (a login flow) */
	for (uint32_t i = 0; i < fa.m.hl.n; i++) {
		const struct hdr *h = &fa.m.hl.v[i];

		if (!((h->name_len == 16 && !strncasecmp(h->name, "WWW-Authenticate", 16)) ||
		      (h->name_len == 12 && !strncasecmp(h->name, "Content-Type", 12)) ||
		      (h->name_len == 10 && !strncasecmp(h->name, "Set-Cookie", 10))))
			continue;
		if (hl + h->name_len + h->value_len + 4 > sizeof fa.lines)
			break;
		hl += (size_t)sprintf(fa.lines + hl, "%.*s: %.*s\r\n", (int)h->name_len, h->name, (int)h->value_len,
		                      h->value);
	}
	fa_store(t, status, fa.lines, hl, fa.body, bl);
	fa_detach(t, reuse);
	fwdauth_release(t);
	fa_count(t, status == 401 ? AUTH_R_FWD_DENIED : AUTH_R_FWD_FORBIDDEN, 0);
	fa_deny(t, status, fa.lines, hl, fa.body, bl);
	return 1;
}

/* Moves the subrequest on: connect done, head written, answer read. */
static void fa_step(struct txn *t)
{
	struct upconn *u = t->fa->u;

	if (u->connecting) {
		int err = 0;
		socklen_t sl = sizeof err;

		getsockopt(u->io.fd, SOL_SOCKET, SO_ERROR, &err, &sl);
		if (err) {
			upstream_fail(t->table, (uint32_t)t->fa->server);
			fa_retry(t, AUTH_R_FWD_UNREACHABLE, strerror(err));
			return;
		}
		u->connecting = 0;
		upstream_connected(u);
	}
	while (t->fa->sent < t->fa->out->end) {
		ssize_t n = send(u->io.fd, t->fa->out->data + t->fa->sent, t->fa->out->end - t->fa->sent,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN) {
			worker_io_set(&u->io, EV_WRITE);
			return;
		}
		if (n <= 0) {
			fa_retry(t, AUTH_R_FWD_UNREACHABLE, "the connection failed while sending");
			return;
		}
		t->fa->sent += (uint32_t)n;
	}
	worker_io_set(&u->io, EV_READ);
	if (!u->in && !(u->in = buf_get())) {
		fa_fail(t, AUTH_R_FWD_UNREACHABLE, WEIR_ERR(NOMEM), "no buffer for the answer");
		return;
	}
	for (;;) {
		ssize_t n = recv(u->io.fd, u->in->data + u->in->end, u->in->cap - u->in->end, MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0 || (n == 0 && u->in->end == 0)) {
			/* a pooled connection the server had closed: nothing
			 * was answered, so the subrequest goes again */
			fa_retry(t, AUTH_R_FWD_UNREACHABLE, "the connection closed before an answer");
			return;
		}
		u->in->end += (uint32_t)n;
		if (fa_answer(t, n == 0))
			return;
		if (u->in->end == u->in->cap) {
			fa_fail(t, AUTH_R_FWD_STATUS, WEIR_ERR(FWD_AUTH_FAILED), "an answer over a buffer");
			return;
		}
	}
}

void fwdauth_on_event(struct txn *t, int revents)
{
	(void)revents;
	fa_step(t);
}

void fwdauth_on_timeout(struct txn *t)
{
	fa_detach(t, 0);
	if (t->fa->server >= 0)
		upstream_fail(t->table, (uint32_t)t->fa->server);
	fa_fail(t, AUTH_R_FWD_TIMEOUT, WEIR_ERR(FWD_AUTH_UNREACHABLE), "no answer within its timeout");
}

int fwdauth_begin(struct txn *t, const struct config_auth *p)
{
	struct buf *b;
	int rc;

	/* the state only for requests that need it: a stream without forward
	 * auth carries one pointer (a small slab buffer, given back in
	 * fwdauth_release) */
	if (!(b = buf_get_fit(sizeof *t->fa))) {
		txn_fail(t, WEIR_ERR(NOMEM));
		return -1;
	}
	t->fa = (struct fwdauth_txn *)(void *)b->data;
	memset(t->fa, 0, sizeof *t->fa);
	t->fa->self = b;
	t->fa->p = p;
	t->fa->server = -1;
	t->fa->tried = 0;
	t->fa->until = ev_now(wk.loop) + p->fwd_timeout / 1000.0;
	if (fa.cache && p->fwd_cache) {
		fa_key(t, p, t->fa->key);
		t->fa->keyed = 1;
		if (fa_cached(t, &rc))
			return rc;
	}
	if (fa_write_head(t) < 0) {
		fa_fail(t, AUTH_R_FWD_UNREACHABLE, WEIR_ERR(NOMEM), "its request does not fit a buffer");
		return -1;
	}
	if ((rc = fa_connect(t)) < 0) {
		fa_fail(t, AUTH_R_FWD_UNREACHABLE, rc, "no server could be reached");
		return -1;
	}
	/* as during a rate limit's delay, only the client's close is
	 * watched for meanwhile */
	txn_wait_arm(t);
	if (!t->fa->u->connecting)
		fa_step(t);
	return -1;
}
