/*
 * txn_phases.c: the life of a request, in order (worker/core/phase.h).
 *
 * A request whose head is parsed starts here (txn_start), walks the
 * request phases, and is then moved by txn_pump() (txn.c) until its
 * response head comes, which walks the response filters
 * (txn_response_filters), and its end, which walks the log phase
 * (txn_log_phase). Each phase is an array below: a feature adds its
 * handler with one line, in the phase it belongs to.
 */
#include "worker/core/core.h"

#include <string.h>

#include "common/log.h"
#include "worker/core/grpc.h"
#include "worker/core/match.h"
#include "worker/h1/h1.h"
#include "worker/net/net.h"
#include "worker/up/up.h"

/* ---- route ------------------------------------------------------------ */

/*
 * Normalises the request path (worker/h1/http_path.c) where it lies, in
 * the bytes the codec read the head into, and closes the gap before the
 * query: routing, the upstream head and the access log then all see the
 * one path weir forwards. Needs no memory, since the path only ever
 * shortens; a path that needs no change is only scanned. "*" and the "/"
 * of an absolute-form target without a path (a literal, not in the
 * buffer) are one byte and left alone. Returns 0 or WEIR_EBAD_PATH.
 */
static int txn_normalize_path(struct txn *t)
{
	struct msg *r = &t->req;
	size_t path_len = (size_t)(r->path_end - r->target), n;
	char *p;
	int rc;

	if (r->target_len <= 1)
		return 0;
	/* the head's bytes are ours: HTTP/1's input buffer, HTTP/2's
	 * header records (worker/h2/h2_internal.h) */
	p = (char *)r->target;
	rc = http_path_normalize(p, path_len, TXN_SET(t)->merge_slashes ? HTTP_PATH_MERGE_SLASHES : 0, &n);
	if (rc || n == path_len)
		return rc;
	memmove(p + n, p + path_len, r->target_len - path_len);
	r->target_len -= (uint32_t)(path_len - n);
	r->path_end = r->target + n;
	return 0;
}

static enum ph_rc ph_answer(struct txn *t, int rc)
{
	t->answer = rc;
	return PH_ANSWER;
}

static enum ph_rc ph_route(struct txn *t, const void *conf)
{
	struct conn *c = t->c;
	int rc;

	(void)conf;
	rc = txn_normalize_path(t);
	if (rc < 0)
		return ph_answer(t, rc);
	/* match_cond: the conditions of routes with them (match.c) */
	t->route = route_lookup_cond(t->table, t->req.host ? t->req.host : "", t->req.host_len, t->req.target,
	                             (size_t)(t->req.path_end - t->req.target), match_cond, t);
	if (t->route)
		t->set = route_settings_of(t->table, t->route);
	if (t->req.body == HTTP_BODY_LENGTH && t->set->limits.body_size &&
	    t->req.content_length > t->set->limits.body_size) {
		t->route = NULL; /* refused before it is counted as routed, as the head's check did */
		return ph_answer(t, WEIR_ERR(BODY_TOO_LARGE));
	}
	txn_body_reset(t);
	if (c->tls && tls_in_early_data(c)) {
		/* 0-RTT bytes can be replayed: only a request that is safe to
		 * repeat goes on, marked for the upstream (RFC 8470); the client
		 * sends any other again once the handshake is done */
		int safe = t->req.method_id == HTTP_GET || t->req.method_id == HTTP_HEAD ||
		           t->req.method_id == HTTP_OPTIONS;
		if (!safe || t->req.body != HTTP_BODY_NONE)
			return ph_answer(t, WEIR_ERR(TOO_EARLY));
		t->early = 1;
	}
	if (!t->route)
		return ph_answer(t, WEIR_ERR(NO_ROUTE));
	SHM_ADD(&wk.rcnt[t->route->stat], requests, 1);
	if ((t->grpc = (uint8_t)grpc_request(t))) /* the call's deadline, bounded by timeouts.request */
		t->grpc_deadline = grpc_deadline(t);
	/* routes.split (split.c): the side's group, for everything after;
	 * tested here, not in a handler of its own, so a route without one
	 * pays a compare, not a handler's call */
	if (t->route->split)
		split_choose(t);
	return PH_CONTINUE;
}

/* ---- access ----------------------------------------------------------- */

/* routes.auth (auth.c): on, or answered by auth_check() itself (401, 403
 * or 503 with a head of its own), which ends the stream. */
static enum ph_rc ph_auth(struct txn *t, const void *conf)
{
	(void)conf;
	if (!t->route->auth)
		return PH_CONTINUE;
	return auth_check(t) < 0 ? PH_WAIT : PH_CONTINUE;
}

/* The route's rate limits (ratelimit.c): on, a delay (its timer calls
 * txn_continue(), which resumes after this handler), or answered. */
static enum ph_rc ph_ratelimit(struct txn *t, const void *conf)
{
	(void)conf;
	if (!t->route->nlimits)
		return PH_CONTINUE;
	return ratelimit_check(t) == RATELIMIT_CONTINUE ? PH_CONTINUE : PH_WAIT;
}

/* A route's return (respond.c): weir answers from the route table, and
 * the stream ends with that answer. */
static enum ph_rc ph_respond(struct txn *t, const void *conf)
{
	(void)conf;
	if (t->route->ret < 0)
		return PH_CONTINUE;
	respond_start(t);
	return PH_WAIT;
}

/* ---- request filters -------------------------------------------------- */

/* The client codec of group <g>'s protocol. */
static const struct codec_ops *ph_group_codec(const struct route_upstream *g)
{
	return g->protocol ? &h2_client_codec : &h1_client_codec;
}

/* A second head of <t> from <hr>, by <ops>, into *<out>, while the
 * request's spans are whole: for the breaker's backup group of the other
 * protocol, or the shadow group's copy (always HTTP/1). */
static int ph_head_again(struct txn *t, const struct codec_ops *ops, struct head_req *hr, struct buf **out)
{
	struct side s = {.ops = ops};
	int rc;

	hr->again = 1;
	rc = ops->request_head(&s, &t->req, hr);
	*out = s.head;
	return rc;
}

/* The last request filter: the upstream head, made by the client codec
 * of the group the request goes to from the message as the filters before
 * it left it, with what the access phase learnt (auth's consumer and
 * claims) and the client as realip resolved it. */
static enum ph_rc ph_request_head(struct txn *t, const void *conf)
{
	const struct route_upstream *ups = route_upstreams(t->table), *g = &ups[split_group(t)];
	char xff[2048];
	struct head_req hr = {
		.c = t->c,
		.host = g->name,
		.drop_underscores = !TXN_SET(t)->underscores_in_headers,
		.early = t->early,
		.extra = t->auth.extra,
		.extra_len = t->auth.extra_len,
		.request_id = t->ident.id,
		.request_id_len = t->ident.id_len,
	};
	int rc;

	(void)conf;
	tunnel_offer(t);
	hr.upgrade = t->tun.proto;
	hr.upgrade_len = t->tun.proto_len;
	/* behind trusted_proxies: what was believed, and our peer */
	hr.xff = realip_xff(t, xff, sizeof(xff), &hr.xff_len);
	/* strip_prefix and rewrite (match.c): the target forwarded */
	if (t->route->match != ROUTE_NONE && (rc = match_rewrite(t, &hr.target, &hr.target_len)) < 0)
		return ph_answer(t, rc);
	t->up.ops = ph_group_codec(g);
	rc = t->up.ops->request_head(&t->up, &t->req, &hr);
	t->fwd_target_at = hr.target_at;
	t->fwd_target_len = hr.target ? hr.target_len : t->req.target_len;
	/* the request's spans go with its body: what else needs a head of it
	 * has it made now (a retry keeps to the group the breaker chose) */
	if (rc == 0 && g->resil.breaker.on && g->resil.breaker.backup_index >= 0) {
		const struct codec_ops *b = ph_group_codec(&ups[g->resil.breaker.backup_index]);

		if (b != t->up.ops && (rc = ph_head_again(t, b, &hr, &t->head_alt)) == 0)
			t->alt_target_at = hr.target_at;
	}
	if (rc == 0 && t->route->mirror)
		rc = ph_head_again(t, &h1_client_codec, &hr, &t->mirror_head);
	t->replayable = 1;
	t->up.chunked = t->req.body == HTTP_BODY_CHUNKED; /* the framing the head says */
	return rc < 0 ? ph_answer(t, rc) : PH_CONTINUE;
}

/* ---- pick a server ------------------------------------------------------ */

/* A body that fits limits.body_buffer is read whole before a server is
 * picked: a slow or malformed body then never holds or reaches an
 * upstream. Waits on the client; txn_pump_buffer() resumes the walk. */
static enum ph_rc ph_body(struct txn *t, const void *conf)
{
	(void)conf;
	if (!txn_buffer_wanted(t))
		return PH_CONTINUE;
	t->buffering = 1;
	if (txn_send_continue(t) < 0)
		return PH_WAIT; /* the connection is gone, and <t> with it */
	t->continued = 1;   /* never later, with the body under way */
	txn_pump(t);
	return PH_WAIT;
}

/* The group's limits and breaker (breaker.c): on, a place to wait for
 * (txn_upstream_go() resumes after this handler), or answered with the
 * error (503 breaker_open, or the queue's). */
static enum ph_rc ph_breaker(struct txn *t, const void *conf)
{
	int rc;

	(void)conf;
	rc = breaker_admit(t);
	if (rc == WEIR_EAGAIN)
		return PH_WAIT;
	return rc < 0 ? ph_answer(t, rc) : PH_CONTINUE;
}

static enum ph_rc ph_pick(struct txn *t, const void *conf)
{
	(void)conf;
	if (txn_pick(t) < 0) {
		int rc = breaker_pick_missed(t);

		if (rc == WEIR_EAGAIN) {
			ph_wait_again(&t->ph); /* txn_upstream_go() picks again */
			return PH_WAIT;
		}
		return ph_answer(t, rc ? rc : WEIR_ERR(NO_SERVER));
	}
	/* routes.mirror (mirror.c): a copy of what the group took, its body
	 * read whole by now if it is to be; not waited for */
	if (t->route->mirror)
		mirror_maybe(t);
	return PH_CONTINUE;
}

/* ---- connect ---------------------------------------------------------- */

static enum ph_rc ph_connect(struct txn *t, const void *conf)
{
	int rc;

	(void)conf;
	rc = txn_connect_server(t);
	if (rc < 0 && rc != WEIR_ERR(NOMEM) && rc != WEIR_ERR(LOCAL_CONNECT_ERROR))
		rc = txn_connect(t, rc); /* the next servers of the group */
	return rc < 0 ? ph_answer(t, rc) : PH_CONTINUE;
}

/* ---- the phases ------------------------------------------------------- */

static enum ph_rc ph_count(struct txn *t, const void *conf);
static enum ph_rc ph_access_log(struct txn *t, const void *conf);

static const struct ph_handler route_phase[] = {{ph_route, NULL}, {NULL, NULL}};
static const struct ph_handler access_phase[] = {
	{ph_auth, NULL},
	{ph_ratelimit, NULL},
	{ph_respond, NULL},
	{NULL, NULL},
};
static const struct ph_handler request_filters_phase[] = {
	{compress_ph_request, NULL}, /* Accept-Encoding, before the list is gone */
	{hdrrules_request, NULL},
	{ph_request_head, NULL},
	{NULL, NULL},
};
static const struct ph_handler pick_phase[] = {
	{ph_body, NULL},
	{ph_breaker, NULL},
	{ph_pick, NULL},
	{NULL, NULL},
};
static const struct ph_handler connect_phase[] = {{ph_connect, NULL}, {NULL, NULL}};
static const struct ph_handler response_filters_phase[] = {
	{hdrrules_response, NULL},
	{compress_ph_response, NULL}, /* after the rules: it judges the head they left */
	{NULL, NULL},
};
static const struct ph_handler log_phase[] = {{ph_count, NULL}, {ph_access_log, NULL}, {NULL, NULL}};

static const struct ph_handler *const txn_phases[PH_COUNT] = {
	[PH_ROUTE] = route_phase,
	[PH_ACCESS] = access_phase,
	[PH_REQUEST_FILTERS] = request_filters_phase,
	[PH_PICK] = pick_phase,
	[PH_CONNECT] = connect_phase,
	[PH_RESPONSE_FILTERS] = response_filters_phase,
	[PH_LOG] = log_phase,
};

/* Walks the request phases from where <t> stands; once they are all
 * done, the request goes upstream. */
static void txn_walk_request(struct txn *t)
{
	switch (ph_walk(txn_phases, &t->ph, PH_RESPONSE_FILTERS, t)) {
	case PH_CONTINUE:
		txn_upstream_begin(t);
		return;
	case PH_WAIT:
		return; /* <t> may be gone */
	case PH_ANSWER:
		txn_fail(t, t->answer);
		return;
	case PH_ABORT:
		t->down.ops->reset(&t->down, 0);
		return;
	}
}

void txn_start(struct txn *t)
{
	struct conn *c = t->c;

	SHM_ADD(wk.cnt, requests, 1);
	/* the head is consumed; its spans stay valid until head_write_request()
	 * has copied them, since the buffer does not move meanwhile (an
	 * HTTP/2 stream's conn has none: its head came as fields) */
	if (c->in) {
		c->in->start = (uint32_t)t->req.head_len;
		t->req_head_start = c->in->start;
	}
	realip_begin(t); /* the client behind trusted_proxies, the request id */
	t->table = route_acquire(wk.seg, wk.slot);
	worker_table_hold(t->table);
	t->set = route_settings_global(t->table);
	if (t->table->id != wk.table_id)
		upstream_sync_table(t->table);
	ph_goto(&t->ph, PH_ROUTE);
	txn_walk_request(t);
}

void txn_resume(struct txn *t)
{
	ph_resume_after(&t->ph);
	txn_walk_request(t);
}

void txn_continue(struct txn *t)
{
	txn_resume(t);
}

void txn_upstream_go(struct txn *t)
{
	txn_resume(t);
}

int txn_response_filters(struct txn *t)
{
	ph_goto(&t->ph, PH_RESPONSE_FILTERS);
	switch (ph_walk(txn_phases, &t->ph, PH_LOG, t)) {
	case PH_ANSWER:
		return t->answer;
	case PH_ABORT:
		return WEIR_ERR(RESPONSE_CUT);
	default:
		/* response filters do not wait (yet): nothing resumes them */
		return 0;
	}
}

/* ---- log -------------------------------------------------------------- */

static enum ph_rc ph_count(struct txn *t, const void *conf)
{
	(void)conf;
	txn_count_end(t, t->end_counted);
	return PH_CONTINUE;
}

static enum ph_rc ph_access_log(struct txn *t, const void *conf)
{
	(void)conf;
	txn_log_access(t, t->end_logged);
	return PH_CONTINUE;
}

void txn_log_phase(struct txn *t, int counted, int logged)
{
	if (t->logged)
		return;
	t->logged = 1;
	t->end_counted = counted;
	t->end_logged = logged;
	ph_goto(&t->ph, PH_LOG);
	ph_walk(txn_phases, &t->ph, PH_COUNT, t);
}

struct http_request *txn_head_parser(struct txn *t)
{
	/* in the stream's slab object, beside the message it fills: one
	 * object per request, as the header array was */
	return &t->req_p;
}

int txn_answered(struct conn *c, int status)
{
	struct txn *t = c->txn;

	if (!t) {
		txn_log_access_raw(c, status);
		return 0;
	}
	txn_log_phase(t, status, status);
	return !t->req.keep_alive;
}

const char *txn_request_id(const struct txn *t, uint32_t *len)
{
	*len = t->ident.id_len;
	return t->ident.id;
}
