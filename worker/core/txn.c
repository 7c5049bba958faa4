#include "worker/core/core.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/h1/h1.h"
#include "worker/h2/h2.h"
#include "worker/up/up.h"
#include "worker/net/net.h"

static int txn_fill_up(struct txn *t);
static int txn_fill_down(struct txn *t);
static int txn_idempotent(const struct txn *t);

size_t txn_size(uint32_t nheaders)
{
	return sizeof(struct txn) + (size_t)nheaders * sizeof(struct hdr);
}

struct txn *txn_new(struct conn *c)
{
	struct txn *t = slab_alloc(&wk.slab, wk.cls_txn);

	if (!t)
		return NULL;
	/* all zero but the request and its parse state, which
	 * http_request_init() below zeroes itself (320 bytes not written
	 * twice); the response's stay zeroed: txn_response_head() reads
	 * resp_p.st.start to know it has not begun */
	_Static_assert(offsetof(struct txn, req) < offsetof(struct txn, resp) &&
	                   offsetof(struct txn, resp) < offsetof(struct txn, req_p) &&
	                   offsetof(struct txn, req_p) < offsetof(struct txn, resp_p),
	               "txn_new zeroes around req and req_p");
	memset(t, 0, offsetof(struct txn, req));
	memset(&t->resp, 0, offsetof(struct txn, req_p) - offsetof(struct txn, resp));
	memset(&t->resp_p, 0, sizeof(*t) - offsetof(struct txn, resp_p));
	t->c = c;
	t->down.ops = c->codec;
	t->up.ops = &h1_client_codec; /* until the request head: its group's (ph_request_head) */
	t->server = -1;
	t->start = ev_now(wk.loop);
	/* no client deadline of the transaction's own yet: the first pump sets
	 * one whatever it waits for (the head's would otherwise stay) */
	t->cl_wait = 0xff;
	arena_init(&t->arena, t->arena_mem, wk.cfg->limits.headers * (uint32_t)sizeof(struct hdr));
	http_request_init(&t->req_p, &t->req, &t->arena, &wk.cfg->limits);
	/* a Content-Length is held against the body_size of the route the
	 * request takes, once routed (txn_start): not the head's to judge */
	t->req_p.st.max_body = 0;
	t->down.ops->attach(&t->down, c, NULL, t);
	return t;
}

void txn_free(struct txn *t)
{
	fwdauth_end(t);
	ratelimit_end(t);
	retry_release(t);
	breaker_release(t);
	balance_end(&t->bal_held);
	compress_end(t);
	if (t->tun.on)
		tunnel_free(t);
	if (t->table)
		worker_table_release(t->table);
	if (t->up.head)
		buf_put(t->up.head);
	buf_drop(&t->head_alt);
	buf_drop(&t->mirror_head);
	if (t->down.head)
		buf_put(t->down.head);
	buf_drop(&t->up.trl);
	buf_drop(&t->down.trl);
	buf_drop(&t->up.in.tr);
	buf_drop(&t->down.in.tr);
	txn_body_put(t);
	t->c->txn = NULL;
	slab_free(&wk.slab, wk.cls_txn, t);
}

/* ---- access log ------------------------------------------------------ */

void txn_log_access(struct txn *t, int status)
{
	accesslog_write(t->c, t, status);
}

void txn_log_access_raw(struct conn *c, int status)
{
	accesslog_write(c, NULL, status);
}

/* ---- ending ---------------------------------------------------------- */

static void txn_detach_upstream(struct txn *t, int reusable)
{
	struct upconn *u = t->u;

	if (!u)
		return;
	t->u = NULL;
	if (reusable) {
		t->up.u = NULL;
		u->txn = NULL;
		upstream_release(u);
	} else {
		t->up.ops->reset(&t->up, 0); /* HTTP/1: the connection closes */
	}
}

void txn_abort(struct txn *t, int rc)
{
	if (rc)
		worker_count_error(rc);
	txn_detach_upstream(t, 0);
	txn_free(t);
}

void txn_count_end(struct txn *t, int status)
{
	struct shm_route_counters *rc;
	ev_tstamp now;
	uint64_t us;

	if (!t->route)
		return;
	rc = &wk.rcnt[t->route->stat];
	now = ev_now(wk.loop);
	us = stat_us(now - t->start);
	SHM_ADD(rc, duration[stat_bucket(us)], 1);
	SHM_ADD(rc, duration_us, us);
	if (!status)
		return;
	SHM_ADD(rc, responses[status / 100 - 1], 1); /* the parsers keep status in 100..599 */
	if (t->resp_started && t->up_start > 0) { /* not weir's own answer (respond.h) */
		us = stat_us(now - t->up_start);
		SHM_ADD(rc, upstream[stat_bucket(us)], 1);
		SHM_ADD(rc, upstream_us, us);
	}
	if (t->server >= 0)
		SHM_ADD(&wk.scnt[route_servers(t->table)[t->server].stat], responses[status / 100 - 1], 1);
	if (t->server >= 0 && t->resp_started)
		outlier_answer(t->table, (uint32_t)t->server, status);
	breaker_answer(t, status);
	retry_end(t, status);
}

void txn_fail(struct txn *t, int rc)
{
	struct conn *c = t->c;

	txn_detach_upstream(t, 0);
	if (!t->resp_started) {
		/* after an upgrade request the client may already be sending
		 * the new protocol: never read on as the next request */
		conn_answer_error(c, rc, !t->req_body_done || t->tun.proto_len);
		return;
	}
	/* part of the answer is already out: the only honest signal left is
	 * to cut the connection so the client sees it incomplete */
	worker_count_error(WEIR_ERR(RESPONSE_CUT));
	worker_count_error(rc);
	log_warn("%s: %s after the response had started; cutting the connection", c->peer, weir_err_text(rc));
	txn_log_phase(t, 0, t->status);
	t->down.ops->reset(&t->down, 0);
}

/*
 * The client left before its answer ended: a reset, or a close (a FIN)
 * with abort_on_client_close on, as nginx's default. Its upstream request
 * goes with it (its connection closed, so the origin can stop the work
 * nobody waits for), logged (txn_log_gone), counted client_aborted.
 * HTTP/1 cannot tell a close from a half-close after the request; a
 * client that half-closes and still reads wants abort_on_client_close off.
 */
static void txn_client_abort(struct txn *t)
{
	const char *gone = t->rl.waiting   ? "its rate limit delay ended"
	                   : t->bk.queued  ? "its place in the upstream's queue given up"
	                   : t->rt.armed   ? "its retry cancelled"
	                   : t->fa && t->fa->u ? "its forward auth subrequest abandoned"
	                                   : "upstream request abandoned";

	log_info("%s: client closed the connection before its answer; %s", t->c->peer, gone);
	txn_log_gone(t);
	t->down.ops->reset(&t->down, WEIR_ERR(CLIENT_ABORTED));
}

/*
 * The client's read after its whole request gave <rc>: 0 (a close) or
 * WEIR_ECLIENT_CLOSED (a reset). Returns 1 if the request went with it
 * (<t> is gone). A close behind pipelined requests is a client that still
 * waits for their answers (nginx reads it so too); an HTTP/2 stream's end
 * is its request's END_STREAM, its cancel an RST_STREAM (h2_stream_close),
 * so this is HTTP/1's alone.
 */
static int txn_client_left(struct txn *t, int rc)
{
	struct conn *c = t->c;

	if (t->resp_done || c->h2s)
		return 0;
	if (!rc && !((t->route ? t->route->abort : wk.cfg->abort_on_client_close) && !conn_unread(c)))
		return 0;
	txn_client_abort(t);
	return 1;
}

/* Whether client <c> may be read: its close not read yet, and room at the
 * end of its input buffer. */
static int txn_client_room(const struct conn *c)
{
	return !c->eof && (!c->in || c->in->end < c->in->cap);
}

/* Whether <t>'s client is read on after its whole request, for pipelined
 * requests and its close: not before the close was read, nor past a full
 * buffer of what it pipelined. */
static int txn_reads_on(const struct txn *t)
{
	return t->req_body_done && txn_client_room(t->c);
}

/* Whether a waiting <t>'s client is read: as txn_reads_on() says after the
 * whole request; before it, while nothing of the body was handed up yet
 * (a retry's backoff after a try that sent some keeps them as they are).
 * Body bytes read into the room only (conn_read: no compaction, no stream
 * buffer) wait there for the body phase as the first of them did, and the
 * client's close behind them is seen at once, not when the wait ends. A
 * full buffer stops the reads: that client's close is seen when the wait
 * is over, as before. */
static int txn_wait_reads(const struct txn *t)
{
	return !t->c->h2s && (t->req_body_done || !t->down.in.total) && txn_client_room(t->c);
}

void txn_wait_arm(struct txn *t)
{
	conn_io_set(t->c, txn_wait_reads(t) ? EV_READ : 0);
}

/* The client closed (<rc> 0) or reset its connection while <t> waited
 * with its body still to come. Returns 1 if the request went with it. A
 * Content-Length body short of its end can never be whole: that request
 * goes, whatever abort_on_client_close says; one that is all in the
 * buffer, or a chunked one, is a request after which the client closed. */
static int txn_wait_body_left(struct txn *t, int rc)
{
	const struct conn *c = t->c;

	if (rc == 0 && !(t->req.body == HTTP_BODY_LENGTH && (!c->in || buf_len(c->in) < t->down.in.left)))
		return txn_client_left(t, rc);
	txn_client_abort(t);
	return 1;
}

void txn_wait_client(struct txn *t)
{
	struct conn *c = t->c;
	int rc;

	if (c->readable && txn_wait_reads(t)) {
		if (!t->req_body_done) {
			rc = conn_read(c);
			if (rc > 0)
				t->body_in += (uint64_t)rc;
			else if ((rc == 0 || rc == WEIR_ERR(CLIENT_CLOSED)) && txn_wait_body_left(t, rc))
				return;
		} else {
			rc = t->down.ops->recv(&t->down);
			if ((rc == 0 || rc == WEIR_ERR(CLIENT_CLOSED)) && txn_client_left(t, rc))
				return;
		}
	}
	txn_wait_arm(t);
}

void txn_log_gone(struct txn *t)
{
	txn_log_phase(t, 0, t->resp_started ? t->status : 499);
}

static void txn_finish(struct txn *t)
{
	struct conn *c = t->c;
	struct upconn *u = t->u;
	int up_keep = t->up_reusable && t->req_done && !t->up.q.count;
	int keep;

	if (u && u->in && buf_len(u->in)) {
		/* bytes past the end of the response: the upstream and we disagree
		 * on framing; never reuse that connection */
		worker_count_error(WEIR_ERR(UPSTREAM_BAD_RESPONSE));
		log_warn("upstream %s sent %u bytes after the end of a response; closing it",
		         route_servers(t->table)[t->server].text, buf_len(u->in));
		up_keep = 0;
	}
	txn_detach_upstream(t, up_keep);
	/* not !wk.draining: an answer begun before the drain promised
	 * keep-alive, and conn_next_request() gives that connection a grace */
	keep = t->req.keep_alive && t->req_body_done && !t->client_close;
	SHM_ADD(wk.cnt, responses[t->status / 100], 1);
	txn_log_phase(t, t->status, t->status);
	if (!t->req_body_done && !c->eof) {
		/* answered before the body was read to its end: the client may
		 * still be sending it, and a close now would reset the answer */
		txn_free(t);
		conn_linger(c);
		return;
	}
	txn_free(t);
	conn_txn_done(c, keep);
}

void txn_body_reset(struct txn *t)
{
	t->req_body_done = t->req.body == HTTP_BODY_NONE ||
	                   (t->req.body == HTTP_BODY_LENGTH && t->req.content_length == 0);
	t->down.owes = t->down.dry = 0;
	if (!t->req_body_done) /* else the side's zeroed input state stands: none */
		t->down.ops->body_start(&t->down, &t->req, TXN_SET(t)->limits.pipe_budget);
}

/* ---- connecting ------------------------------------------------------ */

/* Queues the request head for the upstream, and the buffered body when
 * there is one (as one chunk, and the last, if it came chunked). */
static void txn_queue_request(struct txn *t)
{
	t->up.ops->queue_head(&t->up);
	if (t->body)
		t->up.ops->send_body(&t->up, t->body->data, t->body->end, t->body_buffered);
	else if (t->body_buffered && t->req_body_done && t->req.body == HTTP_BODY_CHUNKED)
		t->up.ops->send_body(&t->up, NULL, 0, 1); /* an empty chunked body */
}

static int txn_replay_request(struct txn *t)
{
	struct conn *c = t->c;

	if (!t->replayable || (!t->body && t->down.in.moved))
		return -1;
	if (t->body) {
		/* the body is held whole in t->body */
		t->req_done = 0;
		txn_queue_request(t);
		return 0;
	}
	if (c->in) /* else it was given back holding no byte of this request */
		c->in->start = t->req_head_start;
	t->req_done = 0;
	t->up.owes = 0; /* what was queued is dropped with its connection */
	txn_body_reset(t);
	t->up.ops->queue_head(&t->up);
	return 0;
}

static void txn_attach(struct txn *t, struct upconn *u)
{
	/* an HTTP/2 stream comes with its codec, a pooled connection keeps
	 * the one it was opened with, a new one speaks HTTP/1 */
	const struct codec_ops *ops = u->codec ? u->codec : &h1_client_codec;

	t->u = u;
	if (ops != t->up.ops && t->head_alt) {
		/* the breaker's backup group, of the other protocol: its head,
		 * made with the first (ph_request_head), before any was queued */
		struct buf *h = t->up.head;
		uint32_t at = t->fwd_target_at;

		t->up.head = t->head_alt;
		t->head_alt = h;
		t->fwd_target_at = t->alt_target_at;
		t->alt_target_at = at;
	}
	t->up.ops = ops;
	t->up.ops->attach(&t->up, NULL, u, t);
	t->up_wait = 0xff; /* a new connection: its timer is set anew */
	t->up_start = ev_now(wk.loop);
	SHM_ADD(&wk.scnt[route_servers(t->table)[t->server].stat], requests, 1);
	upstream_set_deadline(u, worker_after(u->connecting ? TXN_SET(t)->timeouts.upstream_connect
	                                                    : TXN_SET(t)->timeouts.upstream_send));
}

int txn_pick(struct txn *t)
{
	const struct route_upstream *up = breaker_upstream(t); /* a fallback group when open */
	int s;

	if (up->balance >= BALANCE_RING_HASH)
		balance_key_prepare(t, up);
	s = breaker_server_cap(up) ? breaker_pick(t, up) : upstream_pick(t->table, up, t->tried);

	if (s < 0)
		return -1;
	t->tried |= 1ull << ((uint32_t)s - up->first_server);
	t->server = s;
	balance_begin(t->table, (uint32_t)s, &t->bal_held);
	return s;
}

int txn_connect_server(struct txn *t)
{
	uint32_t s = (uint32_t)t->server;
	struct upconn *u;
	int rc;

	if (route_upstreams(t->table)[route_servers(t->table)[s].upstream].protocol) {
		/* HTTP/2: a stream on one of the server's sessions */
		u = h2_client_open(t->table, s, TXN_SET(t)->timeouts.upstream_connect, &rc);
		if (!u)
			return rc;
		txn_attach(t, u);
		return 0;
	}
	u = upstream_pool_get(t->table, s);
	while (u && !txn_idempotent(t) && !upstream_pool_alive(u)) {
		/* closed as it idled, its event not seen yet: such a request
		 * is not sent again if the connection dies under it */
		upstream_close(u);
		u = upstream_pool_get(t->table, s);
	}
	if (u) {
		SHM_ADD(wk.cnt, upstream_reuses, 1);
		SHM_ADD(&wk.scnt[route_servers(t->table)[s].stat], reuses, 1);
		txn_attach(t, u);
		return 0;
	}
	u = upstream_connect(t->table, s, &rc);
	if (u) {
		txn_attach(t, u);
		return 0;
	}
	if (rc != WEIR_ERR(NOMEM) && rc != WEIR_ERR(LOCAL_CONNECT_ERROR))
		log_warn("upstream %s refused the connection; trying another server", route_servers(t->table)[s].text);
	return rc;
}

int txn_connect(struct txn *t, int last_rc)
{
	for (;;) {
		int rc;

		if (t->tried && !retry_connect_allowed(t))
			return last_rc; /* the group's retry says no more */
		if (txn_pick(t) < 0)
			return t->tried ? last_rc : WEIR_ERR(NO_SERVER);
		rc = txn_connect_server(t);
		if (rc == 0)
			return 0;
		if (rc == WEIR_ERR(NOMEM) || rc == WEIR_ERR(LOCAL_CONNECT_ERROR))
			return rc; /* ours: another server would fare no better */
		last_rc = rc;
	}
}

/* RFC 9110 9.2.2: methods whose effect, repeated, is that of one request
 * (a mask: asked on every request taken from a pool). */
int txn_method_idempotent(const struct txn *t)
{
	return txn_idempotent(t);
}

static int txn_idempotent(const struct txn *t)
{
	const uint64_t idempotent = 1ull << HTTP_GET | 1ull << HTTP_HEAD | 1ull << HTTP_OPTIONS |
	                            1ull << HTTP_TRACE | 1ull << HTTP_PUT | 1ull << HTTP_DELETE;

	return (unsigned)t->req.method_id < 64 && (idempotent >> t->req.method_id & 1);
}

/*
 * The upstream connection failed before any answer came back. Tries a
 * fresh connection (a stale pooled one, once), then the other servers.
 *
 * A pooled connection that closes under a request is either the race every
 * keep-alive pool has (the server closed it idle as we sent) or a server
 * that crashed or timed out running the request: the two look the same. So
 * the request is sent again only if repeating it is harmless (an
 * idempotent method) or none of it reached the server (the write failed
 * before its first byte). A body read whole before a server was picked
 * changes nothing here: it makes a replay possible, not safe.
 */
static void txn_upstream_lost(struct txn *t, int rc)
{
	struct upconn *u = t->u;
	int was_reused = u->reused;
	int server = t->server;
	int sent = t->up.q.sent;

	txn_detach_upstream(t, 0);
	if (t->resp_started || t->up_first > 0) {
		txn_fail(t, rc);
		return;
	}
	if (was_reused && !t->retried && sent && !txn_idempotent(t)) {
		SHM_ADD(wk.cnt, upstream_replays_refused, 1);
		txn_fail(t, rc);
		return;
	}
	if (was_reused && !t->retried && txn_replay_request(t) == 0) {
		/* the server closed a kept-alive connection as we sent on it:
		 * nothing was answered, send it again on a new connection */
		int crc;
		struct upconn *nu = upstream_connect(t->table, (uint32_t)server, &crc);

		t->retried = 1;
		SHM_ADD(wk.cnt, upstream_retries, 1);
		if (nu) {
			txn_attach(t, nu);
			txn_pump(t);
			return;
		}
		rc = crc;
	}
	if (rc != WEIR_ERR(UPSTREAM_REFUSED) && retry_wanted(t, RETRY_ON_RESET, 0, sent)) {
		retry_schedule(t, rc);
		return;
	}
	if (rc == WEIR_ERR(UPSTREAM_REFUSED) && txn_replay_request(t) == 0) {
		rc = txn_connect(t, rc);
		if (rc == 0) {
			txn_pump(t);
			return;
		}
	}
	txn_fail(t, rc);
}

void txn_upstream_refused(struct txn *t, int rc, int unprocessed)
{
	txn_detach_upstream(t, 0);
	if (t->resp_started || txn_replay_request(t) < 0) {
		txn_fail(t, rc);
		return;
	}
	if (unprocessed) {
		/* the server said it did nothing with it: once more, the same
		 * server allowed (a new session) */
		if (t->retried) {
			txn_fail(t, rc);
			return;
		}
		t->retried = 1;
		SHM_ADD(wk.cnt, upstream_retries, 1);
		rc = txn_connect_server(t);
	} else if (rc != WEIR_ERR(NOMEM) && rc != WEIR_ERR(LOCAL_CONNECT_ERROR)) {
		rc = txn_connect(t, rc); /* as after a failed connect: the next server */
	}
	if (rc < 0)
		txn_fail(t, rc);
	else
		txn_pump(t);
}

void txn_answer_local(struct txn *t, int status)
{
	t->down.ops->queue_head(&t->down);
	t->status = status;
	t->resp_started = 1;
	t->resp_done = 1;
	if (!t->req_body_done) {
		/* the body is not wanted: read and dropped while the answer
		 * goes out, then the connection lingers and closes */
		t->client_close = 1;
		t->body_discard = 1;
	}
	txn_pump(t);
}

void txn_retry_send(struct txn *t, int rc)
{
	/* what the dropped try left: a response head half parsed, its clock */
	memset(&t->resp_p.st, 0, sizeof(t->resp_p.st));
	t->up_first = 0;
	if (txn_replay_request(t) < 0) {
		txn_fail(t, rc);
		return;
	}
	rc = txn_connect(t, rc);
	if (rc < 0) {
		txn_fail(t, rc);
		return;
	}
	txn_pump(t);
}

void txn_upstream_begin(struct txn *t)
{
	int rc;

	if (txn_send_continue(t) < 0)
		return;
	txn_queue_request(t);
	if (!t->body) {
		/* the first body bytes leave with the head (a queued buffered
		 * body fills the queue: the rest follows once it is written) */
		rc = txn_fill_up(t);
		if (rc < 0) {
			txn_fail(t, rc);
			return;
		}
	}
	txn_pump(t);
}

/* ---- the two directions ---------------------------------------------- */

/*
 * Moves span <sp> of side <from>'s input to side <to>, whose codec frames
 * it for its peer. The span is consumed on <from> once <to>'s queue is
 * written (txn_written), or now when nothing was queued.
 */
static inline __attribute__((always_inline)) void txn_relay(struct side *from, struct side *to,
                                                           const struct body_span *sp)
{
	to->trailers = sp->trailers; /* the end's trailer fields, if any (h1.h, trailers) */
	to->ntrailers = sp->ntrailers;
	to->ops->send_body(to, sp->data, sp->len, sp->eos);
	if (to->q.count) {
		to->owes = 1;
		to->owed = sp->len;
	} else {
		from->dry = !from->ops->consumed(from, sp->len);
	}
}

/* Side <to>'s queue is written: the span it held is consumed on <from>. */
static inline void txn_written(struct side *from, struct side *to)
{
	if (to->owes && !to->q.count) {
		to->owes = 0;
		/* nothing left to hand up: the next ask would only say so */
		from->dry = !from->ops->consumed(from, to->owed);
	}
}

/* Queues the next piece of request body from the client's codec. Returns
 * 1 if something was queued or state advanced, 0 if client bytes are
 * needed, or an error. */
static int txn_fill_up(struct txn *t)
{
	struct body_span sp;
	uint64_t limit = TXN_SET(t)->limits.body_size;
	int rc;

	if (t->req_body_done) {
		t->req_done = 1;
		return 1;
	}
	if (t->down.dry)
		return 0;
	rc = t->down.ops->body_next(&t->down, &sp, 0);
	if (t->down.in.moved)
		t->replayable = 0; /* the body bytes sent are no longer as received */
	if (rc <= 0)
		return rc;
	if (limit && t->down.in.total > limit)
		return WEIR_ERR(BODY_TOO_LARGE); /* a Content-Length was judged at routing */
	t->req_body_done = sp.eos;
	if (sp.more)
		SHM_ADD(wk.cnt, pipe_stalls[0], 1);
	txn_relay(&t->down, &t->up, &sp);
	return 1;
}

int txn_upstream_read(struct txn *t)
{
	int rc;

	t->up.dry = 0; /* whatever it reads, body_next is asked again */
	rc = t->up.ops->recv(&t->up);

	if (rc > 0 && t->up_first == 0)
		t->up_first = ev_now(wk.loop);
	return rc;
}

/* The client's head of the response, and the framing and close it says. */
static int txn_response_head_write(struct txn *t)
{
	struct head_resp hr = {
		.req = &t->req,
		.request_id = t->ident.id,
		.request_id_len = t->ident.id_len,
		.upgrade = t->tun.proto,
		.upgrade_len = t->tun.proto_len,
		.recoded = compress_on(t->cz.s),
	};
	int rc = t->down.ops->response_head(&t->down, &t->resp, &hr);

	t->client_close = hr.client_close;
	t->down.chunked = hr.chunked;
	return rc;
}

/* The response head goes to the client: the response filters, then the
 * head written for the client and queued, the upstream's consumed. */
static int txn_response_start(struct txn *t)
{
	int rc = txn_response_filters(t);

	if (rc == 0)
		rc = txn_response_head_write(t);
	if (rc < 0)
		return rc;
	t->resp_started = 1;
	t->down.ops->queue_head(&t->down);
	return 0;
}

/* The response head from the upstream's codec. Returns 1 when the head is
 * queued for the client, 0 when more input is needed, TXN_RETRYING when
 * the answer was dropped for a retry (t->u is gone), or an error. */
#define TXN_RETRYING 2
static int txn_response_head(struct txn *t)
{
	const struct head_in hi = {
		.parser = &t->resp_p,
		.arena = &t->arena,
		.max_headers = TXN_SET(t)->limits.headers,
		.max_head = TXN_SET(t)->limits.response_header_size,
		.method = (uint8_t)t->req.method_id,
	};

	/* the request's list is dead: its head was written, and the
	 * response's goes into the same arena */
	t->req.hl.n = 0;
	t->req.upgrade = NULL;
	for (;;) {
		int rc = t->up.ops->head_next(&t->up, &t->resp, &hi);

		if (rc == WEIR_EAGAIN)
			return 0;
		if (rc < 0)
			return rc;
		if (t->resp.status == 101) {
			/* only a switch to the protocol asked for makes a tunnel */
			rc = tunnel_check_switch(t);
			if (rc < 0) {
				log_warn("upstream %s switched protocols %s; answering 502",
				         route_servers(t->table)[t->server].text,
				         t->tun.proto_len ? "to another protocol" : "unasked");
				return rc;
			}
			t->status = 101;
			rc = txn_response_start(t);
			if (rc < 0)
				return rc;
			tunnel_start(t);
			return 1;
		}
		if (t->resp.status >= 100 && t->resp.status < 200) {
			/* interim answers (102, 103) are the upstream's business:
			 * we answered Expect ourselves */
			continue;
		}
		if (t->c->h2s && (rc = h2_ws_no_switch(t->c, t->resp.status)) < 0)
			return rc;
		if (retry_answer_wanted(t)) {
			/* answered, but with a status the group retries on: that
			 * answer is dropped with its connection */
			log_info("upstream %s answered %d; trying again", route_servers(t->table)[t->server].text,
			         t->resp.status);
			outlier_answer(t->table, (uint32_t)t->server, t->resp.status);
			txn_detach_upstream(t, 0);
			retry_schedule(t, WEIR_ERR(UPSTREAM_REFUSED));
			return TXN_RETRYING;
		}
		t->status = t->resp.status;
		rc = txn_response_start(t);
		if (rc < 0)
			return rc;
		t->down.owes = t->up.dry = 0;
		t->up.ops->body_start(&t->up, &t->resp, TXN_SET(t)->limits.pipe_budget);
		/* an upgrade offered and declined: the upstream may have read
		 * what followed the request as its new protocol */
		t->up_reusable = t->resp.keep_alive && t->resp.body != HTTP_BODY_CLOSE && !t->tun.proto_len;
		if (t->resp.body == HTTP_BODY_NONE || (t->resp.body == HTTP_BODY_LENGTH && t->resp.content_length == 0))
			t->resp_done = 1;
		else if ((rc = txn_fill_down(t)) < 0)
			return rc;
		return 1;
	}
}

/* Queues the next piece of response body from the upstream's codec.
 * Returns 1 if queued, 0 if upstream bytes are needed, or an error. */
static int txn_fill_down(struct txn *t)
{
	struct body_span sp;
	int rc;

	if (compress_pending(t))
		return compress_resume(t); /* the encoder's output first: no upstream read */
	if (t->up.dry)
		return 0;
	rc = t->up.ops->body_next(&t->up, &sp, 0);
	if (rc <= 0)
		return rc < 0 ? WEIR_ERR(UPSTREAM_BAD_RESPONSE) : 0;
	t->resp_done = sp.eos;
	if (sp.more)
		SHM_ADD(wk.cnt, pipe_stalls[1], 1);
	if (t->cz.s)
		return compress_body(t, &sp); /* through the encoder (core.h: ==== compress ====) */
	txn_relay(&t->up, &t->down, &sp);
	return 1;
}

/* The upstream closed its side: the end of a body framed by the close
 * (its codec hands the end up), else a response cut short. */
static int txn_upstream_eof(struct txn *t)
{
	if (!t->resp_started)
		return WEIR_ERR(UPSTREAM_CLOSED);
	if (txn_fill_down(t) > 0 && (t->resp_done || compress_pending(t))) { /* the encoder's end may follow */
		t->up_reusable = 0;
		return 1;
	}
	return WEIR_ERR(UPSTREAM_CLOSED);
}

/* The body is being read whole before connecting (t->buffering). */
static void txn_pump_buffer(struct txn *t)
{
	struct conn *c = t->c;
	int io = 0, rc;

	for (;;) {
		rc = txn_buffer_step(t);
		if (rc < 0) {
			txn_fail(t, rc);
			return;
		}
		if (rc > 0) {
			t->buffering = 0;
			t->rate_in.since = 0; /* streaming measures its own waits */
			txn_resume(t); /* the body phase waited: pick a server */
			return;
		}
		if (!c->readable)
			break;
		t->down.dry = 0;
		rc = t->down.ops->recv(&t->down);
		if (rc > 0) {
			io = 1;
			t->body_in += (uint64_t)rc;
			continue;
		}
		if (rc == WEIR_EAGAIN)
			break;
		log_info("%s: client closed the connection during the request body", c->peer);
		t->down.ops->reset(&t->down, WEIR_ERR(CLIENT_CLOSED));
		return;
	}
	conn_io_set(c, EV_READ);
	rc = txn_client_clock(t, WAIT_READ, io);
	if (rc < 0)
		txn_client_fail(t, rc);
}

void txn_pump(struct txn *t)
{
	struct conn *c = t->c;
	int progress = 1, up_io = 0, cl_io = 0;
	int want_client_read = 0;
	ssize_t n;
	int rc;

	if (t->buffering) {
		txn_pump_buffer(t);
		return;
	}
	if (txn_waiting(t)) {
		txn_wait_client(t);
		return;
	}
	if (t->tun.on) {
		tunnel_pump(t);
		return;
	}
	while (progress) {
		struct upconn *u = t->u;

		progress = 0;
		/* client -> upstream */
		if (u && !u->connecting) {
			if (t->up.q.count) {
				n = t->up.ops->flush(&t->up, 0);
				if (n < 0) {
					if (t->resp_started) {
						/* it answered and stopped listening: keep the
						 * answer, drop the rest of the body */
						outq_reset(&t->up.q);
						txn_written(&t->down, &t->up);
						t->req_done = 1;
						t->client_close = 1;
						t->up_reusable = 0;
						if (!t->req_body_done) {
							t->body_discard = 1;
							t->down.ops->discard(&t->down);
						}
					} else {
						txn_upstream_lost(t, WEIR_ERR(UPSTREAM_CLOSED));
						return;
					}
				}
				if (n > 0)
					progress = up_io = 1;
				txn_written(&t->down, &t->up);
			}
			if (!t->up.q.count && !t->req_done) {
				rc = txn_fill_up(t);
				if (rc < 0) {
					txn_fail(t, rc);
					return;
				}
				if (rc > 0) {
					progress = 1;
				} else if (c->readable) {
					t->down.dry = 0;
					rc = t->down.ops->recv(&t->down);
					if (t->down.in.moved)
						t->replayable = 0; /* sent bytes are gone from the buffer */
					if (rc > 0) {
						progress = cl_io = 1;
						t->body_in += (uint64_t)rc;
					} else if (rc != WEIR_EAGAIN) {
						log_info("%s: client closed the connection during the request body", c->peer);
						t->down.ops->reset(&t->down, WEIR_ERR(CLIENT_CLOSED));
						return;
					}
				}
			}
		}
		/* upstream -> client */
		if (t->down.q.count) {
			/* more of a counted body follows for sure: let the kernel
			 * fill its segments (as TCP_CORK, released by the last send
			 * or after 200 ms should the upstream stall); never for
			 * chunked or until-close bodies, which may be streams */
			n = t->down.ops->flush(&t->down, t->resp.body == HTTP_BODY_LENGTH && !t->resp_done);
			if (n < 0) {
				t->down.ops->reset(&t->down, WEIR_ERR(CLIENT_CLOSED));
				return;
			}
			if (n > 0) {
				progress = cl_io = 1;
				t->bytes_out += (uint64_t)n;
				SHM_ADD(wk.cnt, bytes_out, n);
			}
			txn_written(&t->up, &t->down);
		}
		if (!t->down.q.count && !t->resp_done && u && !u->connecting) {
			rc = t->resp_started ? txn_fill_down(t) : txn_response_head(t);
			if (rc < 0) {
				if (!t->resp_started && rc == WEIR_ERR(UPSTREAM_BAD_RESPONSE))
					log_warn("upstream %s sent an invalid response", route_servers(t->table)[t->server].text);
				txn_fail(t, rc);
				return;
			}
			if (rc == TXN_RETRYING)
				return;
			if (t->tun.on) {
				tunnel_pump(t);
				return;
			}
			if (rc > 0) {
				progress = 1;
			} else if (u->readable) {
				rc = txn_upstream_read(t);
				if (rc > 0) {
					progress = up_io = 1;
				} else if (rc == 0 || rc == WEIR_ERR(UPSTREAM_CLOSED)) {
					if (!t->resp_started) {
						txn_upstream_lost(t, WEIR_ERR(UPSTREAM_CLOSED));
						return;
					}
					rc = txn_upstream_eof(t);
					if (rc < 0) {
						txn_fail(t, rc);
						return;
					}
					progress = 1;
				} else if (rc != WEIR_EAGAIN) {
					txn_fail(t, rc);
					return;
				}
			}
		}
		if (t->resp_done && !t->down.q.count) {
			txn_finish(t);
			return;
		}
	}

	/* arm exactly what we wait for */
	struct upconn *u = t->u;
	if (t->body_discard)
		want_client_read = txn_discard_client(t);
	else if (!t->req_body_done && !t->up.q.count)
		want_client_read = 1; /* more request body */
	else if (txn_reads_on(t))
		want_client_read = 1; /* pipelined requests or the client's close */
	if (want_client_read && c->readable && t->req_body_done) {
		/* bytes past this request: keep them for later, note the close */
		rc = t->down.ops->recv(&t->down);
		if (rc == 0 || rc == WEIR_ERR(CLIENT_CLOSED)) {
			if (txn_client_left(t, rc))
				return;
			want_client_read = 0;
		}
	}
	if (c->in && buf_len(c->in) == 0 && t->up.head && t->req_body_done &&
	    (c->in->start == t->req_head_start || !t->replayable)) {
		/* nothing pipelined and nothing a replay would read again: the
		 * input buffer goes back while the answer is awaited (a request
		 * waiting on a slow upstream holds none); the head's spans in it
		 * were all copied into the upstream head */
		buf_put(c->in);
		c->in = NULL;
		t->req_head_start = 0;
	}
	if (u && u->in && buf_len(u->in) == 0 && !t->down.q.count) {
		/* the same on the upstream side: a stream that drips (long
		 * polling, server-sent events) holds no buffer between bytes */
		buf_put(u->in);
		u->in = NULL;
	}
	conn_io_set(c, (want_client_read && !c->eof ? EV_READ : 0) | (t->down.q.count ? EV_WRITE : 0));
	if (u) {
		int ev = u->connecting | u->tls_wants;
		if (t->up.q.count)
			ev |= EV_WRITE;
		if (!u->connecting && !t->down.q.count && !t->resp_done)
			ev |= EV_READ;
		else if (t->resp_done && t->up_reusable && !u->connecting && !u->ssl && !u->h2)
			/* all read, the client still writing: left armed as the
			 * pool arms it. Stopped here and started again there, the
			 * watcher costs an epoll_ctl that fails (EEXIST: libev
			 * never removes a stopped fd) per request whose answer
			 * outlives a loop pass, as HTTP/2's do. A byte or a close
			 * meanwhile unfits the connection (txn_on_upstream_event).
			 * Not for TLS: a late session ticket would. */
			ev |= EV_READ;
		upstream_io_set(u, ev);
		if (!u->connecting) {
			/* the upstream's clock runs only while we wait on it */
			uint8_t wait = t->up.q.count ? WAIT_SEND
			               : (!t->req_done || t->down.q.count || t->resp_done) ? WAIT_NONE
			                                                                  : WAIT_READ;
			if (wait != t->up_wait || up_io) {
				t->up_wait = wait;
				upstream_set_deadline(u, retry_try_deadline(t, txn_wait_until(wait, TXN_SET(t)->timeouts.upstream_send,
				                                                              TXN_SET(t)->timeouts.upstream_read)));
			}
		}
	}
	{
		uint8_t wait = t->down.q.count                                          ? WAIT_SEND
		               : (!t->req_body_done && !t->body_discard && !t->up.q.count) ? WAIT_READ
		                                                                       : WAIT_NONE;
		rc = txn_client_clock(t, wait, cl_io);
		if (rc < 0)
			txn_client_fail(t, rc);
	}
}

void txn_on_upstream_event(struct txn *t, int revents)
{
	struct upconn *u = t->u;
	int same = 1;

	if (t->fa && t->fa->u) { /* a forward auth subrequest: the request has no upstream yet */
		fwdauth_on_event(t, revents);
		return;
	}
	if (u->connecting) {
		/* only what the connect or the handshake waits for is armed */
		int rc = 0;

		if (!u->handshaking) {
			int err = 0;
			socklen_t len = sizeof(err);

			getsockopt(u->io.fd, SOL_SOCKET, SO_ERROR, &err, &len);
			if (err) {
				log_warn("upstream %s: connect failed: %s", route_servers(t->table)[t->server].text,
				         strerror(err));
				rc = upstream_errno_local(err) ? WEIR_ERR(LOCAL_CONNECT_ERROR) : WEIR_ERR(UPSTREAM_REFUSED);
			} else if ((rc = upproxy_send(t)) < 0) {
				/* the PROXY header goes first, before any TLS byte */
			} else if (u->ssl) {
				u->handshaking = 1;
			}
		}
		if (u->handshaking) {
			/* still under the connect deadline, before any request byte */
			const char *why = NULL;
			int ev = 0;

			rc = tls_client_handshake(u, &ev, &why);
			if (rc == WEIR_EAGAIN) {
				u->connecting = (uint8_t)ev;
				worker_io_set(&u->io, ev);
				return;
			}
			if (rc < 0)
				log_warn("upstream %s: TLS handshake failed: %s", route_servers(t->table)[t->server].text, why);
			else
				u->handshaking = 0;
		}
		if (rc < 0) {
			if (rc != WEIR_ERR(LOCAL_CONNECT_ERROR))
				upstream_fail(t->table, (uint32_t)t->server);
			txn_detach_upstream(t, 0);
			same = 0;
			if (rc != WEIR_ERR(LOCAL_CONNECT_ERROR))
				rc = txn_connect(t, rc);
			if (rc < 0) {
				txn_fail(t, rc);
				return;
			}
		} else {
			u->connecting = 0;
			upstream_connected(u);
			upstream_set_deadline(u, worker_after(TXN_SET(t)->timeouts.upstream_send));
		}
	}
	if ((revents & EV_READ) && same && t->resp_done) {
		/* past the whole response: what comes is no next answer's
		 * (an upstream speaks when asked), so the connection is not
		 * kept; left unread, and no longer watched (txn_pump) */
		t->up_reusable = 0;
		revents &= ~EV_READ;
	}
	if ((revents & EV_READ) && same)
		t->u->readable = 1;
	txn_pump(t);
}

void txn_on_upstream_timeout(struct txn *t)
{
	struct upconn *u = t->u;

	if (t->fa && t->fa->u) {
		fwdauth_on_timeout(t);
		return;
	}
	if (t->tun.on) {
		tunnel_on_timeout(t);
		return;
	}
	if (u->connecting) {
		log_warn("upstream %s: %s timed out", route_servers(t->table)[t->server].text,
		         u->handshaking ? "TLS handshake" : "connect");
		upstream_fail(t->table, (uint32_t)t->server);
		txn_detach_upstream(t, 0);
		int rc = txn_connect(t, WEIR_ERR(UPSTREAM_TIMEOUT));
		if (rc < 0)
			txn_fail(t, rc);
		else
			txn_pump(t);
		return;
	}
	log_warn("upstream %s did not answer in time", route_servers(t->table)[t->server].text);
	if (!t->resp_started)
		outlier_observe(t->table, (uint32_t)t->server, OUTLIER_GATEWAY);
	if (!t->resp_started && retry_wanted(t, RETRY_ON_TIMEOUT, 0, 1)) {
		txn_detach_upstream(t, 0);
		retry_schedule(t, WEIR_ERR(UPSTREAM_TIMEOUT));
		return;
	}
	txn_fail(t, WEIR_ERR(UPSTREAM_TIMEOUT));
}
