/*
 * h2_client_stream.c: one HTTP/2 stream to an upstream as the stream core
 * sees it (h2_client.h): a virtual struct upconn whose codec makes the
 * request's HEADERS from the core's message (head.c's fields) and takes
 * body spans, and gives back the response head as a struct msg read from
 * the HEADERS fields and its DATA in place.
 */
#include "worker/up/h2_client.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "worker/h1/h1.h"

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
	return buf_get_class(cls_in, H2C_IN_CAP);
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
	const struct h2c_stream *st = u->h2;
	struct upconn *sock = st->s->sock;
	int ready;
	(void)revents;

	if (worker_deadline_early(w, u->deadline))
		return;
	/* the stream's I/O is its session's */
	if ((ready = worker_deadline_grace(w, &sock->io, &u->graced))) {
		ev_invoke(loop, &sock->io, ready);
		return;
	}
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

/* A field of the trailing HEADERS, recorded for the list the core
 * passes on (worker/h1/h1.h, trailers): the refused fields (and those past
 * the cap) dropped, the record bounded as an HTTP/1 section; 0 or -1 (the
 * stream is reset). */
static int h2c_stream_trailer(struct h2c_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value,
                              size_t vlen)
{
	if (trailers_forbidden((const char *)name, nlen) || st->tr_n == TRAILERS_FIELDS) {
		worker_count_error(WEIR_ERR(TRAILER_DROPPED));
		return 0;
	}
	if (!st->tr && !(st->tr = buf_get()))
		return -1;
	if (st->tr->end + nlen + vlen + 4 + 2 > TRAILERS_MAX || st->tr->end + nlen + vlen + 6 > wk.buf_size) {
		st->status = -1; /* too large: a 502, or the response cut */
		return -1;
	}
	st->tr->end += (uint32_t)trailers_rec_add(st->tr->data + st->tr->end, (const char *)name, nlen,
	                                          (const char *)value, vlen, 0);
	st->tr_n++;
	return 0;
}

/* The trailing HEADERS recorded, as the list of the body's last span. */
static __attribute__((noinline)) void h2c_stream_trailers_span(struct h2c_stream *st, struct side_in *bi)
{
	struct hdr *v = side_trailers(bi);

	if (!v) {
		worker_count_error(WEIR_ERR(NOMEM)); /* the body ends without them */
		return;
	}
	bi->span.ntrailers = trailers_rec_list(st->tr->data, st->tr->end, v);
	bi->span.trailers = v;
}

/* A response field, kept as it came in <rh> for the life of the response
 * (head_next() reads the message from it, checked as an HTTP/1 head's
 * fields are); after the head, a trailer. */
int h2c_stream_header(struct h2c_stream *st, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                      const uint8_t *value, size_t vlen)
{
	(void)f;

	if (st->status < 0)
		return 0;
	if (st->head_done)
		return h2c_stream_trailer(st, name, nlen, value, vlen);
	if (!st->rh && !(st->rh = buf_get()))
		return -1;
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		st->status = 0;
		for (size_t i = 0; i < vlen && i < 3; i++)
			st->status = st->status * 10 + (value[i] - '0');
		st->rh->end = 0; /* an interim answer's fields are dropped */
		return 0;
	}
	if (st->status < 200 || name[0] == ':')
		return 0;
	if (head_fields_add(st->rh, wk.buf_size, (const char *)name, nlen, (const char *)value, vlen) < 0) {
		st->status = -1; /* too large a head: a 502 */
		return -1;
	}
	return 0;
}

void h2c_stream_head_end(struct h2c_stream *st, int eos)
{
	if (st->head_done || st->status < 0) {
		if (eos && st->tr)
			st->tr_ended = 1;
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
	st->head_done = 1;
	st->head_eos = (uint8_t)eos;
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

/* The request's trailer fields (the core's, with the body's end) as a
 * trailing HEADERS: 0 when submitted. */
static int h2c_stream_submit_trailers(struct h2c_stream *st, struct side *sd)
{
	static nghttp2_nv nv[TRAILERS_FIELDS];
	/* names lowered into a copy: the fields may lie in the client's
	 * input, which a replay sends again as it came */
	static char lowered[TRAILERS_MAX];
	size_t used = 0;
	uint32_t n;

	for (n = 0; n < sd->ntrailers && n < TRAILERS_FIELDS; n++) {
		const struct hdr *h = &sd->trailers[n];
		char *lower = lowered + used;

		if (used + h->name_len > sizeof(lowered))
			break; /* cannot be: the section is at most this */
		for (size_t k = 0; k < h->name_len; k++)
			lower[k] = (char)(h->name[k] >= 'A' && h->name[k] <= 'Z' ? h->name[k] | 0x20 : h->name[k]);
		used += h->name_len;
		nv[n] = (nghttp2_nv){(uint8_t *)lower, (uint8_t *)(uintptr_t)h->value, h->name_len, h->value_len,
		                     NGHTTP2_NV_FLAG_NONE};
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
		if (st->side->ntrailers && h2c_stream_submit_trailers(st, st->side) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM; /* the HEADERS end it */
	} else if (!got) {
		st->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (got || st->out_eos)
		h2c_stream_wake(st, EV_WRITE); /* the core's flush reports it */
	return (ssize_t)got;
}

/* The head the core queued (head.c's fields, names lower case, :scheme
 * ours to add) submitted as HEADERS, its records pointed at where they
 * lie: nothing parsed again. Returns its length, or -1. */
static ssize_t h2c_stream_submit(struct h2c_stream *st, struct side *sd)
{
	/* the client's fields (limits.headers) and weir's own, auth's among them */
	static nghttp2_nv nv[HTTP_MAX_HEADERS + 512];
	struct outq *q = &sd->q;
	const struct buf *h = sd->head;
	const int tls = st->s->sock && st->s->sock->ssl;
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = h2c_stream_data_read};
	const char *name, *value;
	size_t n = 0, pos = 0, nlen, vlen;
	int32_t id;
	int body;

	if (q->count < 1 || !h || h->end < 1)
		return -1;
	body = h->data[0] & HEAD_FIELDS_BODY;
	while (head_fields_rec(h, &pos, &name, &nlen, &value, &vlen)) {
		if (n + 2 > sizeof(nv) / sizeof(nv[0]))
			return -1;
		nv[n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
		if (n == 1) /* :method, then the scheme of the session */
			nv[n++] = (nghttp2_nv){(uint8_t *)":scheme", (uint8_t *)(tls ? "https" : "http"), 7, tls ? 5u : 4u,
			                       NGHTTP2_NV_FLAG_NONE};
	}
	if (pos != h->end)
		return -1; /* not a head of fields: another codec's */
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
	return (ssize_t)h->end;
}

/* ---- the codec ----------------------------------------------------------- */

static int h2c_request_head(struct side *sd, const struct msg *m, struct head_req *hr)
{
	return head_write_fields(m, hr, &sd->head);
}

/* The fields as an HTTP/1 head would carry them: :authority as "host". */
static int h2c_head_field(const struct side *sd, size_t *pos, const char **name, size_t *nlen, const char **value,
                          size_t *vlen)
{
	while (head_fields_rec(sd->head, pos, name, nlen, value, vlen)) {
		if (*nlen == 10 && memcmp(*name, ":authority", 10) == 0) {
			*name = "host";
			*nlen = 4;
			return 1;
		}
		if (*nlen && (*name)[0] != ':')
			return 1;
	}
	return 0;
}

/* The final head's fields, kept in <rh>, into <m> through the checks of
 * an HTTP/1 head's (http_response_field()): nghttp2 has refused what
 * HTTP/2 forbids (upper case names, connection-specific fields, a
 * content-length the DATA does not match), weir refuses what HTTP/1
 * would not carry. A body of no length ends with the stream. */
static int h2c_head_next(struct side *sd, struct msg *m, const struct head_in *hi)
{
	struct h2c_stream *st = sd->u->h2;
	struct http_response *rp = hi->parser;
	const char *name, *value;
	size_t pos = 0, nlen, vlen;
	int rc;

	if (st->status < 0)
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	if (!st->head_done || st->head_given)
		return WEIR_EAGAIN;
	http_response_init(rp, m, hi->arena, hi->max_headers, hi->max_head, (enum http_method)hi->method);
	while (head_fields_rec(st->rh, &pos, &name, &nlen, &value, &vlen) &&
	       http_response_field(rp, name, nlen, value, vlen) == 0)
		;
	rc = http_response_fields_end(rp, st->status);
	rp->st.start = NULL; /* as HTTP/1 leaves it: no head begun */
	if (rc < 0)
		return rc;
	if (m->body == HTTP_BODY_CLOSE && st->head_eos) {
		/* END_STREAM on the HEADERS: an empty body, of known length */
		m->body = HTTP_BODY_LENGTH;
		m->content_length = 0;
		m->keep_alive = 1;
	}
	st->head_given = 1;
	st->unreported = 0; /* the body is handed up by body_next, from <body> */
	return 0;
}

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
	if (st->head_done && !st->head_given)
		return 1; /* the head is there for head_next() */
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
	bi->span.ntrailers = 0;
	if (bi->span.eos && st->tr && st->tr_ended) /* the trailing HEADERS go with the end */
		h2c_stream_trailers_span(st, bi);
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
    .request_head = h2c_request_head,
    .head_field = h2c_head_field,
    .head_next = h2c_head_next,
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
