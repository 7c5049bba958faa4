/*
 * txn_client.c: the client side of a transaction that is not moving
 * bytes: request body buffering, the client's clocks (gap timers, minimum
 * rates, the request cap), and dropping a body the upstream no longer
 * takes. See docs/design.md, "The request path".
 */
#include "worker/core/core.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "worker/core/grpc.h"
#include "worker/h1/h1.h"

/* Gives back the buffered body. */
void txn_body_put(struct txn *t)
{
	buf_drop(&t->body);
}

/* Whether the body of <t> is to be read whole before connecting: every
 * Content-Length body up to limits.body_buffer, and chunked ones until
 * they pass it. */
int txn_buffer_wanted(const struct txn *t)
{
	uint32_t limit = TXN_SET(t)->limits.body_buffer;

	/* gRPC streams: a message may wait for the answer to the one
	 * before, so nothing of the body waits for its end */
	if (!limit || t->req_body_done || grpc_request(t))
		return 0;
	if (t->req.body == HTTP_BODY_LENGTH)
		return t->req.content_length <= limit;
	return t->req.body == HTTP_BODY_CHUNKED;
}

/* Makes room in t->body for <need> more bytes, moving to the large class
 * when a plain buffer is outgrown. Returns 0, or -1 past body_buffer or
 * without memory (the body then streams). */
static int txn_body_room(struct txn *t, uint64_t need)
{
	uint32_t have = t->body ? t->body->end : 0;
	uint64_t total = have + need;
	int big = total > wk.buf_size;
	struct buf *b;

	if (total > TXN_SET(t)->limits.body_buffer)
		return -1;
	if (t->body && total <= t->body->cap)
		return 0;
	/* a limit above any this worker's configuration set (a newer route
	 * generation's, met while it drains) is bounded by its class */
	if (big && total > wk.body_size)
		return -1;
	b = big ? buf_get_class(wk.cls_body, wk.body_size) : buf_get();
	if (!b)
		return -1;
	b->start = 0;
	b->end = have;
	if (have)
		memcpy(b->data, t->body->data, have);
	txn_body_put(t);
	t->body = b;
	return 0;
}

/* The trailer fields of span <sp>, the end of a body buffered whole: their
 * bytes copied behind the body's (room kept by the caller, their size as
 * a section; not part of the body) and the fields pointed there, for the
 * upstream side's end (worker/h1/h1.h, trailers): the input they were in goes
 * now. HTTP/1 lines are copied whole, then the final CRLF, so they still
 * lie as a section (trailers_in_place). */
static __attribute__((noinline)) void txn_trailers_keep(struct txn *t, struct body_span *sp)
{
	char *o = t->body->data + t->body->end;

	for (uint32_t i = 0; i < sp->ntrailers; i++) {
		struct hdr *h = &sp->trailers[i];

		if (h->flags & TRAILER_LINE) { /* the line whole, as it came */
			size_t len = trailers_line_len(h), at = (size_t)(h->value - h->name);

			memcpy(o, h->name, len);
			h->value = o + at;
			h->name = o;
			o += len;
			continue;
		}
		memcpy(o, h->name, h->name_len);
		h->name = o;
		o += h->name_len;
		memcpy(o, h->value, h->value_len);
		h->value = o;
		o += h->value_len;
	}
	memcpy(o, "\r\n", 2);
	t->up.trailers = sp->trailers;
	t->up.ntrailers = sp->ntrailers;
}

/* Moves what the client's codec has of the body into the buffer (or
 * leaves it in place, when all of it lies in the input buffer). Returns 1
 * when the body is complete, or when it must stream after all (past
 * body_buffer, or no memory), 0 when more bytes are needed, or an error
 * (400, 413). */
int txn_buffer_step(struct txn *t)
{
	uint64_t limit = TXN_SET(t)->limits.body_size;
	struct body_span sp;
	size_t tlen;
	int rc;

	if (!t->body) {
		/* in place: it fits behind the head, where the streaming path
		 * and a replay find it (the codec holds it as one span) */
		rc = t->down.ops->body_next(&t->down, &sp, 1);
		if (rc == 1) {
			t->body_buffered = 1;
			return 1;
		}
		if (rc != CODEC_SPLIT)
			return rc;
		if (t->req.body == HTTP_BODY_LENGTH && txn_body_room(t, t->req.content_length) < 0)
			return 1;
	}
	for (;;) {
		rc = t->down.ops->body_next(&t->down, &sp, 0);
		if (rc <= 0)
			return rc;
		if (limit && t->down.in.total > limit)
			return WEIR_ERR(BODY_TOO_LARGE);
		tlen = sp.ntrailers ? trailers_size(sp.trailers, sp.ntrailers) : 0;
		if ((sp.len || tlen) && txn_body_room(t, sp.len + tlen) < 0) {
			/* past body_buffer: what is held goes first, the rest
			 * streams from this span on (the codec holds it) */
			t->replayable = 0;
			return 1;
		}
		if (sp.len) {
			memcpy(t->body->data + t->body->end, sp.data, sp.len);
			t->body->end += (uint32_t)sp.len;
		}
		if (sp.ntrailers)
			txn_trailers_keep(t, &sp);
		t->down.ops->consumed(&t->down, sp.len);
		if (sp.eos) {
			t->req_body_done = t->body_buffered = 1;
			return 1;
		}
	}
}

/* Sends 100 Continue when the client waits for it before its body.
 * Returns 0, or -1 when the connection is gone. */
int txn_send_continue(struct txn *t)
{
	struct conn *c = t->c;

	if (!t->req.expect_continue || t->req_body_done || t->continued || conn_unread(c))
		return 0;
	t->continued = 1;
	if (c->codec->interim(c, 100) < 0) {
		t->down.ops->reset(&t->down, WEIR_ERR(CLIENT_CLOSED));
		return -1;
	}
	return 0;
}

/* ---- the client's clocks --------------------------------------------- */

/* Accounts the wait that ends now on <r> and starts the next one when
 * <waiting>; <bytes> counts what the client moved so far. Returns 1 when a
 * whole window of waiting has passed below <rate> bytes/s. */
static int txn_rate_update(struct txn_rate *r, int waiting, uint64_t bytes, uint32_t rate, ev_tstamp now,
                           uint32_t window_ms)
{
	ev_tstamp window = window_ms / 1000.0;

	/* a window starts with a wait: what moved before it (a response's
	 * first burst into the socket buffers, a body's first packet) says
	 * nothing of the client's pace */
	if (waiting && r->since == 0 && r->waited == 0)
		r->mark = bytes;
	if (r->since > 0)
		r->waited += now - r->since;
	r->since = waiting ? now : 0;
	if (!rate || window <= 0 || r->waited < window)
		return 0;
	if ((double)(bytes - r->mark) < (double)rate * r->waited)
		return 1;
	r->waited = 0;
	r->mark = bytes;
	return 0;
}

/* The request's cap in ms: timeouts.request, or a gRPC call's
 * grpc-timeout when it is sooner; 0 none. */
static uint32_t txn_request_cap(const struct txn *t)
{
	uint32_t cap = TXN_SET(t)->timeouts.request;

	return t->grpc_deadline && (!cap || t->grpc_deadline < cap) ? t->grpc_deadline : cap;
}

/* The request cap and the rate windows, as they stand now (the wait in
 * t->cl_wait going on). Returns 0 or the error to end the request with. */
int txn_client_check(struct txn *t, uint8_t wait)
{
	const struct config_limits *l = &TXN_SET(t)->limits;
	ev_tstamp now = ev_now(wk.loop);
	uint32_t cap = txn_request_cap(t), window = TXN_SET(t)->timeouts.rate_window;

	if (cap && now >= t->start + cap / 1000.0) {
		if (cap == t->grpc_deadline) /* the client's own deadline: DEADLINE_EXCEEDED, or the stream cut */
			return WEIR_ERR(GRPC_DEADLINE);
		return !t->req_body_done || t->resp_started ? WEIR_ERR(REQUEST_TIMEOUT)
		                                            : WEIR_ERR(REQUEST_TIMEOUT_UPSTREAM);
	}
	if (txn_rate_update(&t->rate_in, wait == WAIT_READ, t->body_in, l->client_body_rate, now, window))
		return WEIR_ERR(BODY_TOO_SLOW);
	if (txn_rate_update(&t->rate_out, wait == WAIT_SEND, t->bytes_out, l->client_send_rate, now, window))
		return WEIR_ERR(SEND_TOO_SLOW);
	return 0;
}

/* Sets the client's deadline for <wait> (after <io> with the client, the
 * gap timer starts again): the earliest of the gap timer (client_body or
 * client_send), the end of the rate window under way and the request cap,
 * so the rates are judged at most once a window and never per byte.
 * Returns 0, or an error from txn_client_check(). */
int txn_client_clock(struct txn *t, uint8_t wait, int io)
{
	const struct config_timeouts *to = &TXN_SET(t)->timeouts;
	const struct config_limits *l = &TXN_SET(t)->limits;
	ev_tstamp at, window = to->rate_window / 1000.0;
	const struct txn_rate *r = NULL;
	uint32_t cap = txn_request_cap(t);
	int rc;

	/* the common pass: still waiting on nothing from the client, no
	 * window open and no cap; the checks below would find what the last
	 * pass found (a rate is judged only when a wait adds to its window) */
	if (wait == WAIT_NONE && t->cl_wait == WAIT_NONE && !io && t->rate_in.since == 0 && t->rate_out.since == 0 &&
	    !cap)
		return 0;
	rc = txn_client_check(t, wait);
	if (rc < 0)
		return rc;
	if (wait != t->cl_wait || io) {
		t->cl_wait = wait;
		t->cl_gap = txn_wait_until(wait, to->client_send, to->client_body);
	}
	at = t->cl_gap;
	if (wait == WAIT_READ && l->client_body_rate)
		r = &t->rate_in;
	else if (wait == WAIT_SEND && l->client_send_rate)
		r = &t->rate_out;
	if (r && window > 0 && r->since + window - r->waited < at)
		at = r->since + window - r->waited;
	if (cap && t->start + cap / 1000.0 < at)
		at = t->start + cap / 1000.0;
	conn_set_deadline(t->c, at);
	return 0;
}

/* Ends <t> for a client too slow or a request over its cap: 408 (and
 * close) while the request is still being read, a cut connection once
 * the response has started. */
void txn_client_fail(struct txn *t, int rc)
{
	struct conn *c = t->c;

	if (rc == WEIR_ERR(SEND_TOO_SLOW)) {
		log_info("%s: %s; cutting the connection", c->peer, weir_err_text(rc));
		txn_log_phase(t, 0, t->status);
		t->down.ops->reset(&t->down, rc);
		return;
	}
	txn_fail(t, rc);
}

/* Drops what the client still sends of a body the upstream no longer
 * takes, up to CONN_LINGER_BYTES (then the client is left to the flow
 * control), so its input never stays readable unread. Returns whether to
 * keep reading. */
int txn_discard_client(struct txn *t)
{
	struct conn *c = t->c;
	char sink[4096];

	while (c->readable && t->discarded <= CONN_LINGER_BYTES) {
		ssize_t n = conn_recv(c, sink, sizeof(sink));

		if (n > 0) {
			t->discarded += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		c->readable = 0;
		if (n < 0 && errno == EAGAIN)
			break;
		c->eof = 1;
	}
	return !c->eof && t->discarded <= CONN_LINGER_BYTES;
}

void txn_on_client_timeout(struct txn *t)
{
	struct conn *c = t->c;
	int rc;

	if (t->tun.on) {
		tunnel_on_timeout(t);
		return;
	}
	rc = txn_client_check(t, t->cl_wait);
	if (rc < 0) {
		txn_client_fail(t, rc);
		return;
	}
	if (ev_now(wk.loop) + 0.001 < t->cl_gap) {
		/* a rate window ended in time: the next one starts */
		txn_client_clock(t, t->cl_wait, 0);
		return;
	}
	if (t->cl_wait == WAIT_SEND) {
		log_info("%s: client stopped reading the response", c->peer);
		t->down.ops->reset(&t->down, WEIR_ERR(CLIENT_TIMEOUT));
	} else if (t->cl_wait == WAIT_READ) {
		txn_fail(t, WEIR_ERR(BODY_TIMEOUT));
	} else {
		txn_client_clock(t, t->cl_wait, 1);
	}
}
