/*
 * h2_client_stream.c: one HTTP/2 stream to an upstream as the stream core
 * sees it (h2_client.h): a virtual struct upconn whose codec takes the
 * HTTP/1.1 request head the core wrote and body spans, and gives back
 * the response head as HTTP/1.1 in u->in and its DATA in place.
 */
#include "worker/up/h2_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "worker/h1/trailers.h"

/* A held span never moves, and what came after it may fill a window:
 * two windows' room. */
#define H2C_IN_CAP (2 * (H2C_WINDOW + 1))
static int cls_in;

void h2c_stream_init(void)
{
	cls_in = slab_add_class(&wk.slab, sizeof(struct buf) + H2C_IN_CAP);
}

static struct buf *h2c_in_get(void)
{
	struct buf *b = slab_alloc(&wk.slab, cls_in);

	if (b) {
		b->start = b->end = 0;
		b->cls = (uint32_t)cls_in;
	}
	return b;
}

void h2c_stream_wake(struct h2c_stream *st, int ev)
{
	if (ev & EV_READ)
		st->rfresh = 1;
	if (ev & EV_WRITE)
		st->wfresh = 1;
	/* fed, not called: never into the core from inside nghttp2 */
	if (st->u.txn && ((st->want & ev) || st->refused || st->s->dead))
		ev_feed_event(wk.loop, &st->u.io, ev);
}

/* The core's upstream events: a stream that never reached the server
 * goes again as a connect-stage failure, anything else is its pump. */
static void h2c_stream_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct upconn *u = w->data;
	struct h2c_stream *st = u->h2;
	struct txn *t = u->txn;
	(void)loop;

	if (!t)
		return;
	if (!st->head_done && !st->unreported) {
		if (st->refused || (st->s->dead && st->s->ready && !st->submitted)) {
			txn_upstream_refused(t, WEIR_ERR(UPSTREAM_REFUSED), 1);
			return;
		}
		if (st->s->dead && !st->s->ready) {
			txn_upstream_refused(t, st->s->fail_rc, 0);
			return;
		}
	}
	txn_on_upstream_event(t, revents);
}

static void h2c_stream_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct upconn *u = w->data;
	(void)loop;
	(void)revents;

	if (worker_deadline_early(w, u->deadline))
		return;
	if (u->txn)
		txn_on_upstream_timeout(u->txn);
}

struct h2c_stream *h2c_stream_new(struct h2c_session *s)
{
	struct h2c_stream *st = h2c_alloc();

	if (!st)
		return NULL;
	memset(st, 0, sizeof(*st));
	st->s = s;
	st->u.h2 = st;
	st->u.srv = s->srv;
	st->u.codec = &h2_client_codec;
	ev_init(&st->u.io, h2c_stream_io_cb);
	st->u.io.fd = -1;
	st->u.io.data = &st->u;
	ev_init(&st->u.timer, h2c_stream_timer_cb);
	st->u.timer.data = &st->u;
	st->next = s->streams;
	if (s->streams)
		s->streams->prev = st;
	s->streams = st;
	s->nstreams++;
	SHM_ADD(wk.cnt, h2up_streams_total, 1);
	h2c_gauges(0, 1);
	return st;
}

void h2_client_io_set(struct upconn *u, int events)
{
	struct h2c_stream *st = u->h2;
	int ev = 0;

	st->want = (uint8_t)events;
	if ((events & EV_READ) && st->rfresh)
		ev |= EV_READ;
	if ((events & EV_WRITE) && st->wfresh)
		ev |= EV_WRITE;
	if (ev)
		ev_feed_event(wk.loop, &u->io, ev);
}

void h2_client_stream_end(struct upconn *u)
{
	struct h2c_stream *st = u->h2;
	struct h2c_session *s = st->s;

	st->side = NULL;
	u->txn = NULL;
	if (!s->dead && st->body && buf_len(st->body)) {
		/* unread DATA: the connection's window back */
		if (st->closed)
			nghttp2_session_consume_connection(s->ng, buf_len(st->body));
		else
			nghttp2_session_consume(s->ng, st->id, buf_len(st->body));
	}
	if (!s->dead && st->submitted && !st->closed) {
		/* the core is done before the stream ended: the server stops */
		nghttp2_session_set_stream_user_data(s->ng, st->id, NULL);
		nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
		h2c_session_kick(s);
	}
	ev_clear_pending(wk.loop, &u->io);
	ev_timer_stop(wk.loop, &u->timer);
	buf_drop(&u->in);
	buf_drop(&st->rh);
	buf_drop(&st->body);
	buf_drop(&st->tr);
	if (st->prev)
		st->prev->next = st->next;
	else
		s->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	h2c_gauges(0, -1);
	h2c_release(st);
	h2c_session_stream_gone(s);
}

/* ---- the response, from nghttp2 ----------------------------------------- */

static int h2c_put_bytes(struct buf *b, const void *p, size_t n)
{
	if (wk.buf_size - b->end < n)
		return -1;
	memcpy(b->data + b->end, p, n);
	b->end += (uint32_t)n;
	return 0;
}

/* A field of the trailing HEADERS, as a line of the HTTP/1 trailer
 * section the core passes on (worker/h1/trailers.h): the refused fields
 * dropped, the section bounded as HTTP/1's; 0 or -1 (the stream is
 * reset). */
static int h2c_stream_trailer(struct h2c_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value,
                              size_t vlen)
{
	if (trailers_forbidden((const char *)name, nlen)) {
		worker_count_error(WEIR_ERR(TRAILER_DROPPED));
		return 0;
	}
	if (!st->tr && !(st->tr = buf_get()))
		return -1;
	if (st->tr->end + nlen + vlen + 4 + 2 > TRAILERS_MAX || st->tr->end + nlen + vlen + 6 > wk.buf_size) {
		st->status = -1; /* too large: a 502, or the response cut */
		return -1;
	}
	h2c_put_bytes(st->tr, name, nlen);
	h2c_put_bytes(st->tr, ": ", 2);
	h2c_put_bytes(st->tr, value, vlen);
	return h2c_put_bytes(st->tr, "\r\n", 2);
}

/* A response field, written as an HTTP/1.1 field line (the core's
 * strict response parser reads it again); after the head, a trailer. */
int h2c_stream_header(struct h2c_stream *st, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                      const uint8_t *value, size_t vlen)
{
	struct buf *b;
	(void)f;

	if (st->status < 0)
		return 0;
	if (st->head_done)
		return h2c_stream_trailer(st, name, nlen, value, vlen);
	if (!st->rh && !(st->rh = buf_get()))
		return -1;
	b = st->rh;
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		char line[64];
		int n;

		st->status = 0;
		for (size_t i = 0; i < vlen && i < 3; i++)
			st->status = st->status * 10 + (value[i] - '0');
		if (st->status < 200)
			return 0; /* an interim answer: dropped at its end */
		n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", st->status, head_reason(st->status));
		b->end = 0;
		return h2c_put_bytes(b, line, (size_t)n);
	}
	if (st->status < 200 || name[0] == ':')
		return 0;
	if (nlen == 14 && memcmp(name, "content-length", 14) == 0)
		st->has_cl = 1;
	/* room kept for the framing line and the end of the head */
	if (b->end + nlen + vlen + 4 + 40 > wk.buf_size) {
		st->status = -1; /* too large a head: a 502 */
		return -1;
	}
	h2c_put_bytes(b, name, nlen);
	h2c_put_bytes(b, ": ", 2);
	h2c_put_bytes(b, value, vlen);
	return h2c_put_bytes(b, "\r\n", 2);
}

void h2c_stream_head_end(struct h2c_stream *st, int eos)
{
	if (st->head_done || st->status < 0) {
		if (eos && st->tr && !st->tr_ended) {
			h2c_put_bytes(st->tr, "\r\n", 2); /* room kept by h2c_stream_trailer */
			st->tr_ended = 1;
		}
		if (eos && !st->eos_in) {
			st->eos_in = 1; /* the last DATA, or trailers */
			h2c_stream_wake(st, EV_READ);
		}
		return;
	}
	if (st->status < 200) { /* 100, 103: the final head follows */
		st->status = 0;
		if (st->rh)
			st->rh->end = 0;
		return;
	}
	if (!st->has_cl && !st->is_head && st->status != 204 && st->status != 304) {
		/* the core's framing of a body without a length; the DATA
		 * itself is handed up in place, never chunk-encoded */
		static const char zero[] = "Content-Length: 0\r\n", chunked[] = "Transfer-Encoding: chunked\r\n";

		if (eos)
			h2c_put_bytes(st->rh, zero, sizeof(zero) - 1);
		else
			h2c_put_bytes(st->rh, chunked, sizeof(chunked) - 1);
	}
	h2c_put_bytes(st->rh, "\r\n", 2);
	st->head_done = 1;
	st->eos_in = (uint8_t)eos;
	h2c_stream_wake(st, EV_READ);
}

void h2c_stream_data(struct h2c_stream *st, const uint8_t *p, size_t len)
{
	struct buf *b = st->body;

	if (!b && !(b = st->body = h2c_in_get())) {
		nghttp2_session_consume(st->s->ng, st->id, len);
		nghttp2_submit_rst_stream(st->s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	if (H2C_IN_CAP - b->end < len) { /* past the window nghttp2 enforces: cannot be */
		nghttp2_session_consume(st->s->ng, st->id, len);
		nghttp2_submit_rst_stream(st->s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_FLOW_CONTROL_ERROR);
		return;
	}
	memcpy(b->data + b->end, p, len);
	b->end += (uint32_t)len;
	st->unreported += (uint32_t)len;
	h2c_stream_wake(st, EV_READ);
}

void h2c_stream_closed(struct h2c_stream *st, uint32_t code)
{
	st->closed = 1;
	st->code = code;
	if (code == NGHTTP2_REFUSED_STREAM && !st->head_done)
		st->refused = 1; /* unprocessed (RFC 9113 8.7): it may go again */
	h2c_stream_wake(st, EV_READ | EV_WRITE);
}

/* ---- the request, to nghttp2 -------------------------------------------- */

/* The end of the request body, as an empty entry of the core's queue:
 * it stays queued (the core waits) until the data source has sent the
 * END_STREAM, and it survives a replay onto another stream. */
static const char h2c_eos_mark[1];

static int h2c_is_eos(const struct iovec *v)
{
	return v->iov_base == (void *)h2c_eos_mark;
}

/* The request's trailer section (the core's, with the body's end) as a
 * trailing HEADERS: 0 when submitted. */
static int h2c_stream_submit_trailers(struct h2c_stream *st, struct side *sd)
{
	static nghttp2_nv nv[TRAILERS_MAX / 4];
	const char *name, *value;
	size_t off = 0, n = 0, nlen, vlen;

	while (n < sizeof(nv) / sizeof(nv[0]) &&
	       trailers_next(sd->trailers, sd->trailers_len, &off, &name, &nlen, &value, &vlen)) {
		char *lower = (char *)name;

		if (trailers_forbidden(name, nlen))
			continue; /* the core dropped and counted them already */
		for (size_t k = 0; k < nlen; k++)
			if (lower[k] >= 'A' && lower[k] <= 'Z')
				lower[k] = (char)(lower[k] - 'A' + 'a');
		nv[n++] = (nghttp2_nv){(uint8_t *)lower, (uint8_t *)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
	}
	/* nghttp2 copies the fields */
	return n ? nghttp2_submit_trailer(st->s->ng, st->id, nv, n) : -1;
}

/* Body bytes of the core's queue past those already framed. */
ssize_t h2c_stream_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                             nghttp2_data_source *src, void *ud)
{
	struct h2c_stream *st = nghttp2_session_get_stream_user_data(ng, id);
	struct outq *q;
	size_t skip, got = 0, left = 0;
	int eos;
	(void)src;
	(void)ud;

	if (!st || !st->side)
		return NGHTTP2_ERR_DEFERRED; /* being reset */
	q = &st->side->q;
	eos = q->count && h2c_is_eos(&q->iov[q->first + q->count - 1]);
	skip = st->taken;
	for (int i = q->first; i < q->first + q->count; i++) {
		const char *p = q->iov[i].iov_base;
		size_t n = q->iov[i].iov_len, k;

		if (skip >= n) {
			skip -= n;
			continue;
		}
		p += skip;
		n -= skip;
		skip = 0;
		k = n < length - got ? n : length - got;
		memcpy(buf + got, p, k);
		got += k;
		left += n - k;
	}
	st->taken += got;
	if (!left && eos) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		st->out_eos = 1;
		if (st->side->trailers_len && h2c_stream_submit_trailers(st, st->side) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM; /* the HEADERS end it */
	} else if (!got) {
		st->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (got || st->out_eos)
		h2c_stream_wake(st, EV_WRITE); /* the core's flush reports it */
	return (ssize_t)got;
}

/* The head the core queued, parsed back and submitted as HEADERS.
 * Returns its length, or -1. */
static ssize_t h2c_stream_submit(struct h2c_stream *st, struct side *sd)
{
	static struct http_request rp;
	static struct msg m;
	static struct arena a;
	static struct hdr mem[HTTP_MAX_HEADERS];
	static nghttp2_nv nv[HTTP_MAX_HEADERS + 8];
	static char clen[24];
	struct outq *q = &sd->q;
	char *head = q->iov[q->first].iov_base;
	size_t len = q->iov[q->first].iov_len, n = 0;
	struct config_limits lim = wk.cfg->limits;
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = h2c_stream_data_read};
	int32_t id;
	int grpc = 0, te = 0, body;

	/* the core wrote it: its own additions may pass a client's limits */
	lim.header_size = lim.uri_size = wk.buf_size;
	lim.headers = HTTP_MAX_HEADERS;
	lim.body_size = 0;
	arena_init(&a, mem, sizeof(mem));
	http_request_init(&rp, &m, &a, &lim);
	if (q->count < 1 || http_request_parse(&rp, head, len) != 0 || m.head_len != len)
		return -1;
	st->is_head = m.method_id == HTTP_HEAD;
	nv[n++] = (nghttp2_nv){(uint8_t *)":method", (uint8_t *)m.method, 7, m.method_len, NGHTTP2_NV_FLAG_NONE};
	nv[n++] = (nghttp2_nv){(uint8_t *)":scheme", (uint8_t *)(st->s->sock && st->s->sock->ssl ? "https" : "http"), 7,
	                       st->s->sock && st->s->sock->ssl ? 5 : 4, NGHTTP2_NV_FLAG_NONE};
	if (m.host_len)
		nv[n++] = (nghttp2_nv){(uint8_t *)":authority", (uint8_t *)m.host, 10, m.host_len, NGHTTP2_NV_FLAG_NONE};
	nv[n++] = (nghttp2_nv){(uint8_t *)":path", (uint8_t *)m.target, 5, m.target_len, NGHTTP2_NV_FLAG_NONE};
	for (uint32_t i = 0; i < m.hl.n; i++) {
		struct hdr *h = &m.hl.v[i];
		char *name = (char *)h->name;

		if (h->tok == HT_TE) { /* the one TE that crosses: "trailers" */
			te |= trailers_te_listed(h->value, h->value_len);
			continue;
		}
		/* connection-specific fields never cross (RFC 9113 8.2.2);
		 * Host is :authority */
		if (h->flags & (HDR_HOP | HDR_FRAMING | HDR_HOST | HDR_LOOKALIKE))
			continue;
		for (uint32_t k = 0; k < h->name_len; k++)
			if (name[k] >= 'A' && name[k] <= 'Z')
				name[k] = (char)(name[k] - 'A' + 'a');
		if (h->name_len == 12 && memcmp(name, "content-type", 12) == 0 && h->value_len >= 16 &&
		    strncasecmp(h->value, "application/grpc", 16) == 0)
			grpc = 1;
		nv[n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)h->value, h->name_len, h->value_len, NGHTTP2_NV_FLAG_NONE};
	}
	if (grpc || te) /* gRPC requires it (its HTTP/2 protocol) */
		nv[n++] = (nghttp2_nv){(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, NGHTTP2_NV_FLAG_NONE};
	if (m.body == HTTP_BODY_LENGTH) {
		int l = snprintf(clen, sizeof(clen), "%llu", (unsigned long long)m.content_length);

		nv[n++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)clen, 14, (size_t)l, NGHTTP2_NV_FLAG_NONE};
	}
	body = m.body != HTTP_BODY_NONE && !(m.body == HTTP_BODY_LENGTH && m.content_length == 0);
	/* nghttp2 copies the fields */
	id = nghttp2_submit_request(st->s->ng, NULL, nv, n, body ? &prd : NULL, st);
	if (id < 0)
		return -1;
	st->out_eos = !body; /* END_STREAM on the HEADERS */
	st->id = id;
	st->submitted = 1;
	q->sent = 1; /* the head is the server's now: a retry judges it sent */
	q->first++;
	q->count--;
	if (!q->count)
		q->first = 0;
	return (ssize_t)len;
}

/* ---- the codec ----------------------------------------------------------- */

static void h2c_queue_head(struct side *sd)
{
	outq_reset(&sd->q);
	outq_add(&sd->q, sd->head->data, sd->head->end);
}

static void h2c_send_body(struct side *sd, const char *data, size_t len, int eos)
{
	struct h2c_stream *st = sd->u ? sd->u->h2 : NULL;

	if (len)
		outq_add(&sd->q, data, len);
	if (eos) {
		sd->q.iov[sd->q.first + sd->q.count] = (struct iovec){(void *)h2c_eos_mark, 0};
		sd->q.count++;
	}
	if (!st) /* queued again for a replay, before its new stream */
		return;
	if (st->submitted && st->deferred && !st->closed && !st->s->dead) {
		st->deferred = 0;
		nghttp2_session_resume_data(st->s->ng, st->id);
		h2c_session_kick(st->s);
	}
}

static ssize_t h2c_flush(struct side *sd, int more)
{
	struct h2c_stream *st = sd->u->h2;
	struct h2c_session *s = st->s;
	struct outq *q = &sd->q;
	ssize_t n = 0;
	size_t k;
	(void)more;

	st->wfresh = 0;
	if (!st->submitted) {
		if (s->dead || s->goaway) {
			st->refused = 1; /* never sent: the io callback sends it again */
			h2c_stream_wake(st, EV_READ);
			return 0;
		}
		if (!s->ready || !s->settings)
			return 0; /* the session's SETTINGS wake it */
		n = h2c_stream_submit(st, sd);
		if (n < 0) {
			log_warn("upstream %s: the request head could not be made HTTP/2", s->srv->addr);
			return -EPROTO;
		}
	}
	if ((st->closed || s->dead) && st->head_done && !st->head_given) {
		/* answered and done: the rest of the body is not wanted; taken
		 * as written until the core has the answer (then the failed
		 * flush makes it drop the rest and close, as over HTTP/1) */
		for (int i = q->first; i < q->first + q->count; i++)
			n += (ssize_t)q->iov[i].iov_len;
		outq_reset(q);
		return n;
	}
	if (st->closed || s->dead)
		return n ? n : -EPIPE;
	if (st->deferred && q->count) {
		st->deferred = 0;
		nghttp2_session_resume_data(s->ng, st->id);
	}
	h2c_session_flush(s); /* frames what the window lets go, out of the queue */
	/* what was framed is written as far as the core is concerned */
	k = st->taken;
	st->taken = 0;
	n += (ssize_t)k;
	outq_advance(q, k);
	if (q->count && h2c_is_eos(&q->iov[q->first]) && st->out_eos) {
		q->first++; /* the END_STREAM went */
		q->count--;
	}
	if (!q->count)
		q->first = 0;
	return n;
}

static int h2c_recv(struct side *sd)
{
	struct upconn *u = sd->u;
	struct h2c_stream *st = u->h2;
	uint32_t fresh;

	u->readable = 0;
	st->rfresh = 0;
	if (st->head_done && !st->head_given) {
		if (u->in && buf_len(u->in))
			return WEIR_EAGAIN;
		buf_drop(&u->in);
		u->in = st->rh;
		st->rh = NULL;
		st->head_given = 1;
		st->unreported = 0; /* the body is handed up by body_next, from <body> */
		return (int)buf_len(u->in);
	}
	if (st->head_given && (fresh = st->unreported)) {
		st->unreported = 0;
		return (int)fresh;
	}
	if (st->head_given && st->eos_in)
		return 0;
	if (st->status < 0)
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	if (st->closed && st->code != NGHTTP2_NO_ERROR && !st->refused)
		return WEIR_ERR(UPSTREAM_RESET);
	if (st->closed || st->s->dead)
		return WEIR_ERR(UPSTREAM_CLOSED);
	return WEIR_EAGAIN;
}

static void h2c_body_start(struct side *sd, const struct msg *m, uint32_t budget)
{
	struct side_in *bi = &sd->in;

	bi->framing = (uint8_t)m->body;
	bi->left = m->content_length;
	bi->budget = budget;
	bi->total = 0;
	bi->holding = bi->eos = bi->eof = bi->moved = 0;
}

static int h2c_body_next(struct side *sd, struct body_span *sp, int whole)
{
	struct side_in *bi = &sd->in;
	struct h2c_stream *st = sd->u->h2;
	size_t avail = st->body ? buf_len(st->body) : 0;

	if (bi->holding) {
		*sp = bi->span;
		return 1;
	}
	if (bi->eos)
		return 0;
	if (whole)
		return CODEC_SPLIT;
	if (!avail && !st->eos_in)
		return 0;
	bi->span.more = 0;
	if (bi->budget && avail > bi->budget) {
		avail = bi->budget; /* the stream's pipe budget: the rest waits */
		bi->span.more = 1;
	}
	bi->span.data = avail ? st->body->data + st->body->start : "";
	bi->span.len = avail;
	bi->span.eos = st->eos_in && !bi->span.more;
	bi->span.trailers_len = 0;
	if (bi->span.eos && st->tr && st->tr_ended) { /* the trailing HEADERS go with the end */
		bi->span.trailers = st->tr->data;
		bi->span.trailers_len = st->tr->end;
	}
	bi->holding = 1;
	bi->total += avail;
	if (bi->span.eos)
		bi->eos = 1;
	*sp = bi->span;
	return 1;
}

/* The core wrote <n> bytes on: only now may the server send more. */
static int h2c_consumed(struct side *sd, size_t n)
{
	struct side_in *bi = &sd->in;
	struct h2c_stream *st = sd->u->h2;
	struct buf *b = st->body;

	if (!bi->holding)
		return (b && buf_len(b)) || (st->eos_in && !bi->eos);
	if (n < bi->span.len) {
		bi->span.data += n;
		bi->span.len -= n;
	} else {
		bi->holding = 0;
	}
	if (b && n) {
		b->start += (uint32_t)n;
		if (b->start == b->end) {
			buf_drop(&st->body); /* a stream between DATA frames holds no buffer */
		} else if (!bi->holding) {
			memmove(b->data, b->data + b->start, buf_len(b));
			b->end -= b->start;
			b->start = 0;
		}
		if (!st->s->dead) {
			if (st->closed)
				nghttp2_session_consume_connection(st->s->ng, n);
			else
				nghttp2_session_consume(st->s->ng, st->id, n);
			h2c_session_kick(st->s);
		}
	}
	return (st->body && buf_len(st->body)) || (st->eos_in && !bi->eos);
}

static void h2c_discard(struct side *sd)
{
	struct h2c_stream *st = sd->u ? sd->u->h2 : NULL;

	sd->in.holding = 0;
	sd->in.eos = 1;
	if (!st)
		return;
	if (st->body && !st->s->dead)
		nghttp2_session_consume(st->s->ng, st->id, buf_len(st->body));
	buf_drop(&st->body);
	st->discarding = 1;
}

static void h2c_attach(struct side *sd, struct conn *c, struct upconn *u, struct txn *t)
{
	struct h2c_stream *st = u->h2;
	(void)c;

	sd->u = u;
	u->txn = t;
	st->side = sd;
	sd->q.sent = 0;
}

static void h2c_reset(struct side *sd, int rc)
{
	struct upconn *u = sd->u;
	(void)rc;

	sd->u = NULL;
	if (u)
		h2_client_stream_end(u);
}

static int h2c_avail_streams(const struct upconn *u)
{
	(void)u;
	return 1;
}

const struct codec_ops h2_client_codec = {
    .name = "h2 client",
    .queue_head = h2c_queue_head,
    .send_body = h2c_send_body,
    .flush = h2c_flush,
    .recv = h2c_recv,
    .body_start = h2c_body_start,
    .body_next = h2c_body_next,
    .consumed = h2c_consumed,
    .discard = h2c_discard,
    .attach = h2c_attach,
    .reset = h2c_reset,
    .avail_streams = h2c_avail_streams,
};
