/*
 * h2_stream.c: one HTTP/2 stream as the stream core sees it (h2.h): a
 * struct conn with no socket and a transaction on it, whose request is
 * the core's message built from the header fields (the HTTP/1 reader's
 * field entry, its rules), and a codec whose ops make the response's
 * HEADERS and DATA from the core's messages (the proxied one's, weir's
 * own answers); the conn's writes carry only a WebSocket tunnel's bytes.
 */
#include "worker/h2/h2_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "worker/base/base.h"
#include "worker/core/core.h"
#include "worker/h2/h2_trailers.h"

/* The client may send a whole default window (65535) before it has
 * seen our SETTINGS: a stream's request body buffer holds that. */
#define H2_IN_CAP (H2_WINDOW + 1)
static int cls_in;

static void h2_codec_init(void);
static int h2_response_head(struct side *s, const struct msg *m, struct head_resp *hr);
static void h2_queue_head(struct side *s);
static void h2_send_body(struct side *s, const char *data, size_t len, int eos);
static ssize_t h2_flush(struct side *s, int more);
static int h2_answer(struct conn *c, const struct answer *a, struct buf **text);
static int h2_interim(struct conn *c, int status);
static struct codec_ops h2_codec;

void h2_stream_init_classes(void)
{
	cls_in = slab_add_class(&wk.slab, sizeof(struct buf) + H2_IN_CAP);
	h2_codec_init();
}

static struct buf *h2_in_get(void)
{
	return buf_get_class(cls_in, H2_IN_CAP);
}

void h2_stream_wake(struct h2_stream *st, int ev)
{
	if (st->started && !st->core_done)
		ev_feed_event(wk.loop, &st->sc.io, ev);
}

struct h2_stream *h2_stream_new(struct h2_session *s, int32_t id)
{
	struct h2_stream *st = h2_alloc();

	if (!st)
		return NULL;
	memset(st, 0, sizeof(*st));
	conn_init_stream(&st->sc, s->c);
	st->sc.h2s = st;
	st->sc.codec = &h2_codec;
	st->s = s;
	st->id = id;
	st->next = s->streams;
	if (s->streams)
		s->streams->prev = st;
	s->streams = st;
	s->nstreams++;
	h2_gauges(1);
	SHM_ADD(wk.cnt, h2_streams_total, 1);
	return st;
}

void h2_stream_free(struct h2_stream *st)
{
	struct h2_session *s = st->s;

	if (st->in_start_list) {
		for (struct h2_stream **pp = &s->start; *pp; pp = &(*pp)->start_next)
			if (*pp == st) {
				*pp = st->start_next;
				break;
			}
	}
	if (st->prev)
		st->prev->next = st->next;
	else
		s->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	s->nstreams--;
	h2_gauges(-1);
	if (st->in_framed)
		for (struct h2_stream **pp = &s->framed; *pp; pp = &(*pp)->framed_next)
			if (*pp == st) {
				*pp = st->framed_next;
				break;
			}
	ev_clear_pending(wk.loop, &st->sc.io);
	ev_timer_stop(wk.loop, &st->sc.timer);
	buf_drop(&st->hb);
	buf_drop(&st->ck);
	buf_drop(&st->body);
	buf_drop(&st->dout);
	buf_drop(&st->qtr);
	buf_drop(&st->rtr);
	if (st->sc.in)
		buf_put(st->sc.in);
	h2_ws_free(st);
	h2_release(st);
}

/* ---- the request: records, then the core's message -------------------- */

/* Header records, as the block arrives: kind, lengths, name, value; kept
 * for the transaction's life, its message pointing into them. */
enum { HK_FIELD, HK_METHOD, HK_PATH, HK_AUTHORITY, HK_SCHEME, HK_HOST, HK_COOKIE, HK_OTHER_PSEUDO };
#define HREC 7

static int h2_kind(const uint8_t *n, size_t len)
{
#define IS(lit) (len == sizeof(lit) - 1 && memcmp(n, lit, len) == 0)
	if (len && n[0] == ':')
		return IS(":method") ? HK_METHOD : IS(":path") ? HK_PATH : IS(":authority") ? HK_AUTHORITY
		       : IS(":scheme") ? HK_SCHEME : HK_OTHER_PSEUDO;
	return IS("host") ? HK_HOST : IS("cookie") ? HK_COOKIE : HK_FIELD;
#undef IS
}

int h2_stream_header(struct h2_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
	const struct config_limits *lim = &wk.cfg->limits;
	size_t need = HREC + nlen + vlen;
	char *p;

	/* RFC 9113 6.5.2's count: each field is its name, value and 32 */
	st->hbytes += (uint32_t)(nlen + vlen + 32);
	st->hcount++;
	if (st->too_large)
		return 0;
	if (st->hbytes > lim->header_size || st->hcount > lim->headers) {
		st->too_large = 1;
		buf_drop(&st->hb);
		return 0;
	}
	if (!st->hb && !(st->hb = buf_get()))
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	if (st->hb->end + need > wk.buf_size) {
		st->too_large = 1;
		buf_drop(&st->hb);
		return 0;
	}
	p = st->hb->data + st->hb->end;
	p[0] = (char)h2_kind(name, nlen);
	p[1] = (char)(nlen >> 8);
	p[2] = (char)nlen;
	p[3] = (char)(vlen >> 24);
	p[4] = (char)(vlen >> 16);
	p[5] = (char)(vlen >> 8);
	p[6] = (char)vlen;
	memcpy(p + HREC, name, nlen);
	memcpy(p + HREC + nlen, value, vlen);
	st->hb->end += (uint32_t)need;
	return 0;
}

/* A record of <hb> at <off>: its kind, name and value. */
size_t h2_rec(const struct buf *hb, size_t off, struct hrec *r)
{
	const unsigned char *p = (const unsigned char *)hb->data + off;

	r->kind = p[0];
	r->nlen = (size_t)p[1] << 8 | p[2];
	r->vlen = (size_t)p[3] << 24 | (size_t)p[4] << 16 | (size_t)p[5] << 8 | p[6];
	r->name = (const char *)p + HREC;
	r->value = r->name + r->nlen;
	return off + HREC + r->nlen + r->vlen;
}

/* Answers the stream here, without the core: a status, no body; logged
 * (rate-limited, as HTTP/1's conn_answer_error()) and in the access log,
 * as an HTTP/1 head refused before it had a transaction. */
static void h2_stream_answer_local(struct h2_stream *st, int rc)
{
	int status = weir_err_status(rc);
	nghttp2_nv nv[2];

	worker_count_error(rc);
	SHM_ADD(wk.cnt, responses[status / 100], 1);
	if (status >= 500)
		log_warn("%s: stream %d: %s -> %d", st->sc.peer, st->id, weir_err_text(rc), status);
	else
		log_info("%s: stream %d: %s -> %d", st->sc.peer, st->id, weir_err_text(rc), status);
	txn_log_access_raw(&st->sc, status);
	worker_status_text(st->status, status);
	nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)st->status, 7, 3, NGHTTP2_NV_FLAG_NONE};
	nv[1] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)"0", 14, 1, NGHTTP2_NV_FLAG_NONE};
	nghttp2_submit_response(st->s->ng, st->id, nv, 2, NULL);
	st->submitted = 1;
	st->resp_state = H2_RESP_DONE;
	st->core_done = 1; /* the core never sees it */
	buf_drop(&st->hb);
	buf_drop(&st->body);
}

static int h2_ieq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return 0;
	for (size_t i = 0; i < alen; i++) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return 0;
	}
	return 1;
}

/* The records stay for the transaction's life, its message pointing into
 * them: a head that fits a small buffer moves into one, with room behind
 * for its cookie crumbs joined (<join> bytes), and the I/O buffer it came
 * in goes back, as HTTP/1 gives back the input of a request that waits. */
static void h2_stream_fit(struct h2_stream *st, size_t join)
{
	const size_t small_max = (WORKER_SMALL_MIN << (WORKER_SMALL_CLASSES - 1)) - sizeof(struct buf);
	struct buf *hb = st->hb, *b;
	size_t need = hb->end + join;

	if (need > small_max || !(b = buf_get_fit((uint32_t)need)))
		return; /* kept where it came: the join then checks for room */
	memcpy(b->data, hb->data, hb->end);
	b->end = hb->end;
	buf_put(hb);
	st->hb = b;
}

int h2_stream_head_end(struct h2_stream *st, int eos)
{
	struct hrec r, method = {0}, path = {0}, auth = {0}, host = {0};
	struct buf *hb = st->hb;
	int length = 0, bad = 0, connect;
	size_t off, join = 0;

	st->head_done = 1;
	st->in_eos = (uint8_t)eos;
	if (st->too_large || !hb) {
		h2_stream_answer_local(st, st->too_large ? WEIR_ERR(HEADERS_TOO_LARGE) : WEIR_ERR(NOMEM));
		return -1;
	}
	for (off = 0; off < hb->end;) {
		size_t at = off;

		off = h2_rec(hb, off, &r);
		switch (r.kind) {
		case HK_METHOD:
			method = r;
			st->method_at = (uint32_t)at;
			break;
		case HK_PATH:
			path = r;
			st->path_at = (uint32_t)at;
			break;
		case HK_AUTHORITY:
			auth = r;
			st->host_at = (uint32_t)at + 1;
			break;
		case HK_HOST:
			bad |= host.name != NULL; /* two Hosts */
			host = r;
			if (!auth.name)
				st->host_at = (uint32_t)at + 1; /* :authority wins */
			break;
		case HK_COOKIE:
			join += (st->cookies++ ? 2 : 0) + r.vlen;
			break;
		case HK_OTHER_PSEUDO: bad |= !h2_ws_is_protocol(&r); break;
		case HK_FIELD:
			length |= r.nlen == 14 && memcmp(r.name, "content-length", 14) == 0;
			break;
		}
	}
	/* RFC 9113 8.3.1: Host and :authority, when both, must agree; a
	 * disagreement is a request smuggled past whoever routed on one */
	if (auth.name && host.name && !h2_ieq(auth.value, auth.vlen, host.value, host.vlen))
		bad = 1;
	connect = method.vlen == 7 && memcmp(method.value, "CONNECT", 7) == 0;
	if (!bad && connect) {
		/* RFC 8441: a WebSocket, a GET with an Upgrade for the core */
		int rc = h2_ws_connect(st);

		if (rc < 0) {
			h2_stream_answer_local(st, rc);
			return -1;
		}
	}
	if (!method.name || !path.name || (connect && !st->ws))
		bad = 1; /* CONNECT (a tunnel) is not served over HTTP/2 */
	if (bad) {
		h2_stream_answer_local(st, WEIR_ERR(BAD_REQUEST));
		return -1;
	}
	st->is_head = method.vlen == 4 && memcmp(method.value, "HEAD", 4) == 0;
	/* a body of unknown length: what END_STREAM (or its absence) said
	 * now, whatever DATA comes before the core reads the head */
	st->in_chunked = !eos && !length && !st->ws;
	h2_stream_fit(st, st->cookies > 1 ? join : 0);
	return 0;
}

/* The cookie crumbs joined with "; " into one field for the core (RFC
 * 9113 8.2.3), after the records (a fitted buffer has the room, an I/O
 * buffer may) or, without room there, in a buffer of their own; one
 * crumb is its record's value. 0, or the error. */
static int h2_stream_cookie(struct h2_stream *st, struct http_request *r)
{
	struct buf *hb = st->hb, *b = hb;
	size_t end = hb->end, len = 0, off, n = 0;
	struct hrec c;
	char *v, *p;

	for (off = 0; off < end;) {
		off = h2_rec(hb, off, &c);
		if (c.kind != HK_COOKIE)
			continue;
		if (st->cookies == 1)
			return http_request_add_field(r, "cookie", 6, c.value, c.vlen);
		len += (n++ ? 2 : 0) + c.vlen;
	}
	if (end + len > wk.buf_size) {
		/* no larger than the records it joins: a buffer holds it */
		if (!(st->ck = buf_get()))
			return WEIR_ERR(NOMEM);
		b = st->ck;
	}
	v = p = b->data + b->end;
	for (off = 0, n = 0; off < end;) {
		off = h2_rec(hb, off, &c);
		if (c.kind != HK_COOKIE)
			continue;
		if (n++) {
			memcpy(p, "; ", 2);
			p += 2;
		}
		memcpy(p, c.value, c.vlen);
		p += c.vlen;
	}
	b->end += (uint32_t)len; /* no walk of the records comes after this */
	return http_request_add_field(r, "cookie", 6, v, len);
}

/* The request of <st> into the core's message through <r>, the fields in
 * the order an HTTP/1.1 head of it would have them: Host (:authority),
 * the client's fields, the cookie, the WebSocket upgrade's. 0, or the
 * error the HTTP/1 reader would answer. */
static int h2_stream_fields(struct h2_stream *st, struct http_request *r)
{
	struct buf *hb = st->hb;
	struct hrec m, p, f;
	int rc;

	h2_rec(hb, st->method_at, &m);
	h2_rec(hb, st->path_at, &p);
	if (st->ws) { /* RFC 8441's CONNECT is an HTTP/1.1 upgrade's GET */
		m.value = "GET";
		m.vlen = 3;
	}
	rc = http_request_begin_fields(r, m.value, m.vlen, p.value, p.vlen);
	if (!rc && st->host_at) {
		h2_rec(hb, st->host_at - 1, &f);
		rc = http_request_add_field(r, "Host", 4, f.value, f.vlen);
	}
	for (size_t off = 0; !rc && off < hb->end;) {
		off = h2_rec(hb, off, &f);
		if (f.kind == HK_FIELD && !h2_ws_skip_field(st, &f))
			rc = http_request_add_field(r, f.name, f.nlen, f.value, f.vlen);
	}
	if (!rc && st->cookies)
		rc = h2_stream_cookie(st, r);
	if (!rc && st->ws)
		rc = h2_ws_head_fields(st, r);
	return rc ? rc : http_request_end_fields(r, st->in_chunked);
}

int h2_stream_data(struct h2_stream *st, const uint8_t *p, size_t len)
{
	struct buf *b = st->body;

	if (!st->head_done || st->in_eos || st->discarding)
		return -1;
	if (!b && !(b = st->body = h2_in_get()))
		return -1;
	if (b->end + len > H2_IN_CAP && b->start && !(st->sc.txn && st->sc.txn->down.in.holding)) {
		memmove(b->data, b->data + b->start, buf_len(b));
		b->end -= b->start;
		b->start = 0;
	}
	if (b->end + len > H2_IN_CAP)
		return -1; /* past the window: nghttp2 would have refused it */
	memcpy(b->data + b->end, p, len);
	b->end += (uint32_t)len;
	st->unreported += (uint32_t)len;
	if (st->want & EV_READ)
		h2_stream_wake(st, EV_READ);
	return 0;
}

void h2_stream_eos(struct h2_stream *st)
{
	st->in_eos = 1;
	if (st->want & EV_READ)
		h2_stream_wake(st, EV_READ);
}

void h2_stream_start(struct h2_stream *st)
{
	st->started = 1;
	ev_feed_event(wk.loop, &st->sc.io, EV_READ);
}

void h2_stream_begin(struct conn *c)
{
	struct h2_stream *st = c->h2s;
	struct txn *t = txn_new(c);
	int rc;

	if (!t) {
		conn_answer_error(c, WEIR_ERR(NOMEM), 1);
		return;
	}
	rc = h2_stream_fields(st, txn_head_parser(t));
	SHM_ADD(wk.cnt, bytes_in, t->req.head_len); /* the head as HTTP/1.1 text */
	if (rc) {
		/* as an HTTP/1 head the reader refuses: its canned answer */
		conn_answer_error(c, rc, 1);
		return;
	}
	c->state = CONN_TXN;
	txn_start(t);
}

/* The stream's transport: only the body's end comes this way (a body the
 * core discards); the head is the core's message (h2_stream_begin) and
 * the body is handed up in place by the codec (below). */
ssize_t h2_stream_recv(struct conn *c, void *p, size_t n)
{
	struct h2_stream *st = c->h2s;
	(void)p;
	(void)n;

	if (st->ng_closed && !st->in_eos) {
		errno = ECONNRESET;
		return -1;
	}
	if (st->in_eos)
		return 0;
	errno = EAGAIN;
	return -1;
}

/* ---- the codec: the request body handed up where DATA left it ---------- */

static void h2_body_start(struct side *s, const struct msg *m, uint32_t budget)
{
	struct side_in *bi = &s->in;

	/* a replay starts again from what is still held: what was consumed
	 * is gone (bi->moved says so once it happened) */
	bi->framing = (uint8_t)m->body;
	bi->left = m->content_length;
	bi->budget = budget;
	bi->total = 0;
	bi->holding = bi->eos = bi->eof = 0;
}

static int h2_body_next(struct side *s, struct body_span *sp, int whole)
{
	struct side_in *bi = &s->in;
	struct h2_stream *st = s->c->h2s;
	size_t avail = st->body ? buf_len(st->body) : 0;

	if (bi->holding) {
		*sp = bi->span;
		return 1;
	}
	if (bi->eos)
		return 0;
	if (whole && !st->in_eos)
		/* in place only while the window leaves the client room to
		 * send the rest: past half of it, the core buffers by copy */
		return (bi->framing == HTTP_BODY_LENGTH && bi->left > H2_WINDOW / 2) || avail >= H2_WINDOW / 2 ? CODEC_SPLIT
		                                                                                      : 0;
	if (!avail && !st->in_eos)
		return 0;
	/* all the DATA buffered, in place: the chunked framing the head
	 * announced is the upstream side's to write */
	bi->span.more = 0;
	if (!whole && bi->budget && avail > bi->budget) {
		avail = bi->budget; /* the stream's pipe budget: the rest waits */
		bi->span.more = 1;
	}
	bi->span.data = avail ? st->body->data + st->body->start : "";
	bi->span.len = avail;
	bi->span.eos = st->in_eos && !bi->span.more;
	bi->span.ntrailers = 0;
	if (bi->span.eos)
		h2_trailers_span(st, bi);
	bi->holding = 1;
	bi->total += avail;
	if (bi->span.eos)
		bi->eos = 1;
	*sp = bi->span;
	return 1;
}

/* The core wrote <n> bytes upstream: only now the client may send more
 * (nghttp2_session_consume, the WINDOW_UPDATE). */
static int h2_consumed(struct side *s, size_t n)
{
	struct side_in *bi = &s->in;
	struct h2_stream *st = s->c->h2s;
	struct buf *b = st->body;

	if (!bi->holding)
		return b && buf_len(b);
	if (n < bi->span.len) {
		bi->span.data += n;
		bi->span.len -= n;
	} else {
		bi->holding = 0;
	}
	bi->moved = 1; /* consumed is gone: a replay cannot send it again */
	if (!b || !n)
		return b && buf_len(b);
	b->start += (uint32_t)n;
	if (b->start == b->end) {
		buf_drop(&st->body); /* a stream between DATA frames holds no buffer */
	} else if (!bi->holding) {
		/* what came meanwhile to the front: a held span never moves,
		 * and the window keeps all of it under the buffer's size */
		memmove(b->data, b->data + b->start, buf_len(b));
		b->end -= b->start;
		b->start = 0;
	}
	if (!st->ng_closed) {
		nghttp2_session_consume(st->s->ng, st->id, n);
		h2_session_kick(st->s);
	}
	return (st->body && buf_len(st->body)) || st->in_eos;
}

/* The upstream no longer takes the body: what is buffered and what still
 * comes is given back to the window unread. */
static void h2_discard(struct side *s)
{
	struct h2_stream *st = s->c->h2s;

	s->in.holding = 0;
	s->in.eos = 1;
	if (st->body) {
		if (!st->ng_closed)
			nghttp2_session_consume(st->s->ng, st->id, buf_len(st->body));
		buf_drop(&st->body);
	}
	st->discarding = 1;
}

/* More body from the client: the bytes not yet handed up, 0 once the
 * request ended (its END_STREAM handed up), WEIR_EAGAIN. */
static int h2_codec_recv(struct side *s)
{
	struct conn *c = s->c;
	struct h2_stream *st = c->h2s;
	size_t fresh = st->unreported;

	if (st->ws == H2_WS_OPEN)
		return h2_ws_recv(s);
	c->readable = 0;
	st->unreported = 0;
	if (st->ng_closed && !st->in_eos)
		return WEIR_ERR(CLIENT_CLOSED);
	if (fresh) {
		SHM_ADD(wk.cnt, bytes_in, fresh);
		return (int)fresh;
	}
	if (st->in_eos && (!c->txn || c->txn->down.in.eos || c->txn->req_body_done)) {
		c->eof = 1;
		return 0;
	}
	return WEIR_EAGAIN;
}

/* HTTP/2's ops over the HTTP/1 server codec's: what is left of its own
 * (attach, reset) and the tunnel's raw bytes, which its send_body and
 * flush write to the stream's transport (h2_stream_sendv). */
static void h2_codec_init(void)
{
	h2_codec = h1_server_codec;
	h2_codec.name = "h2 server";
	h2_codec.answer = h2_answer;
	h2_codec.canned = NULL; /* every answer is HEADERS from answer() */
	h2_codec.interim = h2_interim;
	h2_codec.recv = h2_codec_recv;
	h2_codec.body_start = h2_body_start;
	h2_codec.body_next = h2_body_next;
	h2_codec.consumed = h2_consumed;
	h2_codec.discard = h2_discard;
	h2_codec.response_head = h2_response_head;
	h2_codec.queue_head = h2_queue_head;
	h2_codec.send_body = h2_send_body;
	h2_codec.flush = h2_flush;
}

void h2_stream_io_set(struct conn *c, int events)
{
	struct h2_stream *st = c->h2s;
	int ready = 0;

	st->want = (uint8_t)events;
	if ((events & EV_READ) && (st->unreported || st->in_eos || st->ng_closed))
		ready |= EV_READ;
	if ((events & EV_WRITE) &&
	    (st->direct ? st->taken || st->ng_closed
	                : st->resp_state != H2_RESP_BODY || !st->dout || st->dout->end < wk.buf_size || st->ng_closed))
		ready |= EV_WRITE;
	if (ready)
		h2_stream_wake(st, ready);
}

/* ---- DATA from <dout>: weir's own answer's body, a tunnel's bytes ------- */

static ssize_t h2_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                            nghttp2_data_source *src, void *ud)
{
	struct h2_stream *st = src->ptr;
	size_t n = st->dout ? buf_len(st->dout) : 0;
	(void)ng;
	(void)id;
	(void)ud;

	if (n > length)
		n = length;
	if (n) {
		memcpy(buf, st->dout->data + st->dout->start, n);
		st->dout->start += (uint32_t)n;
		if (st->dout->start == st->dout->end)
			st->dout->start = st->dout->end = 0;
		if (st->want & EV_WRITE)
			h2_stream_wake(st, EV_WRITE); /* room again */
	}
	if (st->resp_eof && (!st->dout || !buf_len(st->dout))) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (h2_trailers_submit(st))
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM; /* the trailing HEADERS ends it */
		buf_drop(&st->dout);
	} else if (!n) {
		st->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

/* More response body (or its end) for nghttp2 to send. */
void h2_stream_more(struct h2_stream *st)
{
	if (st->deferred && !st->ng_closed) {
		st->deferred = 0;
		nghttp2_session_resume_data(st->s->ng, st->id);
	}
	h2_session_kick(st->s);
}

/* The tunnel's bytes after a WebSocket's 200 (h2_ws.c), as the core
 * writes them to any client: into <dout>, as much as fits, framed as DATA
 * from there. Returns bytes taken. */
static ssize_t h2_stream_body_in(struct h2_stream *st, const char *p, size_t len)
{
	struct buf *d;
	size_t k;

	if (!st->dout && !(st->dout = buf_get()))
		return 0;
	d = st->dout;
	if (d->start && d->end + len > wk.buf_size) {
		memmove(d->data, d->data + d->start, buf_len(d));
		d->end -= d->start;
		d->start = 0;
	}
	k = wk.buf_size - d->end;
	if (k > len)
		k = len;
	memcpy(d->data + d->end, p, k);
	d->end += (uint32_t)k;
	if (k < len)
		SHM_ADD(wk.cnt, h2_stalls, 1); /* the client's window holds it */
	h2_stream_more(st);
	return (ssize_t)k;
}

/* 0x20 in each byte of <x> that is an ASCII capital, 0 in the others: on
 * each byte's low seven bits, +0x3f sets its high bit from 'A' up and
 * +0x25 from past 'Z' up, with no carry out of the byte; a byte of 0x80
 * or more (never in a name, which is tchar) is none. */
static inline uint64_t h2_word_capitals(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull;
	uint64_t low = x & (0x7f * ones);

	return ((low + (0x80 - 'A') * ones) & ~(low + (0x7f - 'Z') * ones) & ~x & (0x80 * ones)) >> 2;
}

/* Name <n>[0..len) lowered into <dst> (room for <len>) a word at a time;
 * <n> itself when it has no capital (then <dst> is left unused). Most
 * names from an HTTP/1 upstream have capitals ("Content-Type"), and a
 * byte at a time cost some 16 instructions a byte to test and copy. */
static const char *h2_name_lower(const char *n, uint32_t len, char *dst)
{
	uint64_t w, caps, any = 0;
	uint32_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, n + i, 8);
		caps = h2_word_capitals(w);
		any |= caps;
		w |= caps;
		memcpy(dst + i, &w, 8);
	}
	/* the last few bytes one by one: a copy of a length not known
	 * here is a call to memcpy, dearer than the bytes */
	for (; i < len; i++) {
		unsigned c = (unsigned char)n[i], cap = c - 'A' < 26u;

		any |= cap;
		dst[i] = (char)(c | cap << 5);
	}
	return any ? dst : n;
}

/* The fields of response <m> as nv entries from nv[n] on, at most <nmax>
 * in all with 4 kept for what follows: connection-specific fields never
 * cross (RFC 9113 8.2.2), names lowered in place; <skip_id>: the
 * upstream's X-Request-Id gives way to the one weir resolved. Returns the
 * new count. */
static size_t h2_nv_fields(struct h2_stream *st, const struct msg *m, nghttp2_nv *nv, size_t n, size_t nmax,
                           int skip_id)
{
	/* names with capitals, lowered: a name may be weir's own (a literal
	 * of a filter, never written to) or the upstream's input, kept as
	 * it came for what reads it later (the log's variables); nghttp2
	 * copies them at submit, so one area serves every head */
	static char lowered[65536];
	size_t used = 0;

	for (uint32_t i = 0; i < m->hl.n && n + 4 < nmax; i++) {
		const struct hdr *h = &m->hl.v[i];
		const char *name = h->name;

		if ((h->flags & (HDR_HOP | HDR_FRAMING)) || h->tok == HT_TRANSFER_ENCODING ||
		    (m->status == 101 && h2_ws_skip_resp(st, h)) ||
		    (skip_id && h->name_len == 12 && http_name_same_var(h->name, "X-Request-Id", 12)))
			continue;
		/* past any head the limits allow: sent as it is */
		if (used + h->name_len <= sizeof(lowered) &&
		    (name = h2_name_lower(h->name, h->name_len, lowered + used)) != h->name)
			used += h->name_len;
		nv[n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)h->value, h->name_len, h->value_len,
		                       NGHTTP2_NV_FLAG_NONE};
	}
	return n;
}

/* Submits HEADERS nv[0..n) with the framing of <m> (<recoded>: a body
 * weir re-encodes, of no length known ahead) and, when there is a body,
 * data source <read>. 0, or -1. */
static int h2_submit_nv(struct h2_stream *st, const struct msg *m, nghttp2_nv *nv, size_t n, int recoded,
                        nghttp2_data_source_read_callback read)
{
	static char clen[24];
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read};
	int has_body;

	if (!recoded && (m->body == HTTP_BODY_LENGTH || m->length_info)) {
		size_t l = worker_u64_text(clen, m->content_length);

		nv[n++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)clen, 14, l, NGHTTP2_NV_FLAG_NONE};
	}
	has_body = (m->body != HTTP_BODY_NONE && !(m->body == HTTP_BODY_LENGTH && m->content_length == 0)) ||
	           m->status == 101;
	/* nghttp2 copies the fields: what they point at may go at once */
	if (nghttp2_submit_response(st->s->ng, st->id, nv, n, has_body ? &prd : NULL) != 0)
		return -1;
	st->submitted = 1;
	st->resp_state = has_body ? H2_RESP_BODY : H2_RESP_DONE;
	st->resp_eof = !has_body;
	return 0;
}

/* ---- the response, straight from the core's message -------------------- */
/*
 * The proxied response: HEADERS from the core's struct msg, DATA framed
 * from the queue of the core's side, whose iovecs point into the
 * upstream's input, with no HTTP/1 text written and parsed back between.
 * A DATA frame goes into the session's gathered write with its payload
 * sent from where it lies on a plain connection, copied once otherwise
 * (NGHTTP2_DATA_FLAG_NO_COPY, h2_on_send_data, h2_out_place); the queue
 * empties as nghttp2 frames it, and the stream's flush reports what was
 * framed, so the core consumes the upstream's input as from a socket.
 * weir's own answers (errors, returns, limits) come as a struct answer
 * through the answer op (below), a WebSocket's switch as the upstream's
 * 101 message: no head ever crosses as text.
 */

/* A payload too large for the gathered write with its frame header is
 * cut to a multiple of this (16 KiB buffers: 12 KiB, then the rest). */
#define H2_FRAME_ALIGN 4096u

void h2_stream_take(struct h2_stream *st, char *dst, size_t n)
{
	struct txn *t = st->sc.txn;

	/* placed, not yet gone: the queue is the core's, which learns of it
	 * from its flush (h2_flush) and then consumes the span; until then
	 * the bytes stay where they are, so the write may send them from
	 * there (h2_out_place) */
	if (!n || !t || st->core_done)
		return;
	while (n) {
		const char *p;
		size_t k = outq_at(&t->down.q, st->taken, &p);

		if (k == 0)
			break; /* cannot happen: the data source counted them */
		if (k > n)
			k = n;
		h2_out_place(st->s, dst, p, k);
		dst += k;
		n -= k;
		st->taken += (uint32_t)k;
	}
	if (!st->in_framed) {
		/* not an event fed from inside nghttp2: the core is called
		 * once this pass's frames are gathered (h2_stream_pump_framed),
		 * before a read of the client's next frames, its close among
		 * them, could end the stream the core has not finished */
		st->in_framed = 1;
		st->framed_next = st->s->framed;
		st->s->framed = st;
	}
}

int h2_stream_has_data(const struct h2_stream *st)
{
	const struct txn *t = st->sc.txn;

	if (st->direct)
		return t && !st->core_done && outq_bytes(&t->down.q) > st->taken;
	return st->dout && buf_len(st->dout);
}

void h2_stream_pump_framed(struct h2_session *s)
{
	struct h2_stream *st;

	while ((st = s->framed)) {
		s->framed = st->framed_next;
		st->in_framed = 0;
		if (st->started && !st->core_done && st->sc.txn) {
			s->pumping = st; /* kept, should its conn close in there */
			txn_pump(st->sc.txn);
			s->pumping = NULL;
		}
		if (st->ng_closed) {
			/* its close waited for this (h2_stream_ng_closed) */
			if (!st->core_done)
				h2_stream_close(&st->sc); /* frees it */
			else
				h2_stream_free(st);
		}
	}
}

static ssize_t h2_side_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                            nghttp2_data_source *src, void *ud)
{
	struct h2_stream *st = src->ptr;
	struct txn *t = st->sc.txn;
	size_t have = t && !st->core_done ? outq_bytes(&t->down.q) - st->taken : 0, n = have < length ? have : length;
	(void)ng;
	(void)id;
	(void)buf;
	(void)ud;

	if (have > length && length < 16384)
		SHM_ADD(wk.cnt, h2_stalls, 1); /* the client's window holds it */
	if (n) {
		/* a frame fits the gathered write once it is empty: h2_on_send_data
		 * waits (WOULDBLOCK) until there is room, then copies it there */
		if (n + 9 > h2_out_size)
			n = (h2_out_size - 9) & ~(size_t)(H2_FRAME_ALIGN - 1);
		*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	}
	if (st->resp_eof && n == have) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (h2_trailers_submit(st))
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM; /* the trailing HEADERS ends it */
	} else if (!n) {
		st->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

static int h2_response_head(struct side *s, const struct msg *m, struct head_resp *hr)
{
	static nghttp2_nv nv[HTTP_MAX_HEADERS + 8];
	struct h2_stream *st = s->c->h2s;
	size_t n = 0;

	int ws = st->ws && m->status == 101;

	if (m->status < 200 && !ws)
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE); /* no upgrade is asked for over HTTP/2 */
	hr->client_close = !hr->req->keep_alive || wk.draining;
	hr->chunked = 0; /* DATA frames end where the body does */
	/* a checked switch (h2_ws_accept_check) is RFC 8441's 200 */
	worker_status_text(st->status, ws ? 200 : m->status);
	nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)st->status, 7, 3, NGHTTP2_NV_FLAG_NONE};
	n = h2_nv_fields(st, m, nv, n, sizeof(nv) / sizeof(nv[0]), hr->request_id_len);
	/* as HTTP/1 writes it, a field of its own after the upstream's Vias
	 * (RFC 9110 5.3: the same list) */
	nv[n++] = (nghttp2_nv){(uint8_t *)"via", (uint8_t *)(m->version_minor ? "1.1 weir" : "1.0 weir"), 3, 8,
	                       NGHTTP2_NV_FLAG_NONE};
	if (hr->request_id_len)
		nv[n++] = (nghttp2_nv){(uint8_t *)"x-request-id", (uint8_t *)hr->request_id, 12, hr->request_id_len,
		                       NGHTTP2_NV_FLAG_NONE};
	if (ws) {
		/* the tunnel's bytes come through the stream's transport and
		 * <dout> (h2_stream_sendv), as the tunnel writes any client */
		if (h2_submit_nv(st, m, nv, n, 0, h2_data_read) < 0)
			return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
		h2_ws_open(st);
	} else {
		if (h2_submit_nv(st, m, nv, n, hr->recoded, h2_side_read) < 0)
			return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
		st->direct = 1;
	}
	h2_session_kick(st->s);
	return 0;
}

static void h2_queue_head(struct side *s)
{
	outq_reset(&s->q); /* the HEADERS are submitted: no head is text here */
}

/* weir's own answer, straight from <a>: HEADERS with :status and its
 * fields (names lowered, connection-specific ones dropped), its body
 * copied into <dout> and framed from there (the caller's bytes may go
 * once this returns), or, without a body, one HEADERS that ends the
 * stream (a gRPC trailers-only answer). A HEAD gets no body, its
 * Content-Length kept. */
static int h2_answer(struct conn *c, const struct answer *a, struct buf **text)
{
	static nghttp2_nv nv[72];
	static char lowered[4096];
	struct h2_stream *st = c->h2s;
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = h2_data_read};
	int body = a->body_len && !st->is_head;
	size_t n = 0, used = 0;

	*text = NULL;
	if (st->ng_closed)
		return WEIR_ERR(CLIENT_CLOSED);
	if (st->submitted || a->body_len > wk.buf_size)
		return WEIR_ERR(NOMEM); /* cannot happen: an answer comes first, and fits */
	worker_status_text(st->status, a->status);
	nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)st->status, 7, 3, NGHTTP2_NV_FLAG_NONE};
	for (uint32_t i = 0; i < a->n && n < sizeof(nv) / sizeof(nv[0]); i++) {
		const struct answer_field *f = &a->f[i];
		char *name = lowered + used;

		if (used + f->name_len > sizeof(lowered))
			return WEIR_ERR(NOMEM);
		for (uint32_t k = 0; k < f->name_len; k++)
			name[k] = (char)(f->name[k] >= 'A' && f->name[k] <= 'Z' ? f->name[k] | 0x20 : f->name[k]);
		/* RFC 9113 8.2.2: no connection-specific field */
		if ((f->name_len == 10 && memcmp(name, "connection", 10) == 0) ||
		    (f->name_len == 10 && memcmp(name, "keep-alive", 10) == 0))
			continue;
		used += f->name_len;
		nv[n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)f->value, f->name_len, f->value_len, NGHTTP2_NV_FLAG_NONE};
	}
	if (body) {
		if (!st->dout && !(st->dout = buf_get()))
			return WEIR_ERR(NOMEM);
		memcpy(st->dout->data, a->body, a->body_len);
		st->dout->start = 0;
		st->dout->end = a->body_len;
	}
	/* nghttp2 copies the fields: what they point at may go at once */
	if (nghttp2_submit_response(st->s->ng, st->id, nv, n, body ? &prd : NULL) != 0) {
		buf_drop(&st->dout);
		return WEIR_ERR(NOMEM);
	}
	st->submitted = 1;
	st->resp_eof = 1; /* all of it is in <dout> */
	st->resp_state = H2_RESP_DONE;
	if (body)
		SHM_ADD(wk.cnt, bytes_out, a->body_len);
	h2_session_kick(st->s);
	return 0;
}

/* An interim answer: a HEADERS of its own, the final one to follow. */
static int h2_interim(struct conn *c, int status)
{
	struct h2_stream *st = c->h2s;
	char code[4];
	nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE};

	if (st->ng_closed || st->submitted)
		return -1;
	worker_status_text(code, status);
	if (nghttp2_submit_headers(st->s->ng, NGHTTP2_FLAG_NONE, st->id, NULL, &nv, 1, NULL) != 0)
		return -1;
	h2_session_kick(st->s);
	return 0;
}

static void h2_send_body(struct side *s, const char *data, size_t len, int eos)
{
	struct h2_stream *st = s->c->h2s;

	if (!st->direct) {
		h1_server_codec.send_body(s, data, len, eos);
		return;
	}
	if (st->resp_state != H2_RESP_BODY)
		return; /* no body to carry (HEAD, 204, 304) */
	if (len)
		outq_add(&s->q, data, len);
	if (eos) {
		/* the upstream's trailer fields, which may lie in its input:
		 * recorded for the trailing HEADERS */
		if (s->ntrailers)
			h2_trailers_collect(st, s->trailers, s->ntrailers);
		st->resp_eof = 1;
		st->resp_state = H2_RESP_DONE;
	}
	h2_stream_more(st);
}

static ssize_t h2_flush(struct side *s, int more)
{
	struct h2_stream *st = s->c->h2s;
	ssize_t n;

	if (!st->direct)
		return h1_server_codec.flush(s, more);
	n = st->taken;
	st->taken = 0;
	outq_advance(&s->q, (size_t)n);
	if (!n && st->ng_closed)
		return -EPIPE;
	return n;
}

/* The stream's transport carries only a WebSocket tunnel's bytes, past
 * its 200: every head, weir's own answers among them, crosses the codec
 * ops as a message, never as text. */
ssize_t h2_stream_sendv(struct conn *c, const struct iovec *iov, int cnt)
{
	struct h2_stream *st = c->h2s;
	ssize_t total = 0;

	if (st->ng_closed) {
		errno = EPIPE;
		return -1;
	}
	if (st->ws != H2_WS_OPEN) {
		errno = EPROTO; /* not a tunnel: nothing may come this way */
		return -1;
	}
	for (int i = 0; i < cnt; i++) {
		size_t len = iov[i].iov_len;
		ssize_t k = st->resp_state == H2_RESP_BODY ? h2_stream_body_in(st, iov[i].iov_base, len) : (ssize_t)len;

		total += k;
		if ((size_t)k < len)
			break; /* <dout> is full */
	}
	if (total == 0) {
		errno = EAGAIN;
		return -1;
	}
	return total;
}

void h2_stream_close(struct conn *c)
{
	struct h2_stream *st = c->h2s;
	struct h2_session *s = st->s;

	if (st->core_done)
		return;
	st->core_done = 1;
	if (c->txn && !h2_ws_close(st)) {
		if (st->rst_recv) /* the client's cancel: logged as HTTP/1's abort is */
			txn_log_gone(c->txn);
		txn_abort(c->txn, st->rst_recv ? WEIR_ERR(CLIENT_CLOSED) : 0);
	}
	ev_clear_pending(wk.loop, &c->io);
	ev_timer_stop(wk.loop, &c->timer);
	if (c->in) {
		buf_put(c->in);
		c->in = NULL;
	}
	/* the transaction is gone: the request's names and values with it */
	buf_drop(&st->hb);
	buf_drop(&st->ck);
	if (st->body) {
		/* unread body: given back to the window, as it is thrown away */
		if (!st->ng_closed && !s->dead)
			nghttp2_session_consume(s->ng, st->id, buf_len(st->body));
		buf_drop(&st->body);
	}
	if (!st->ng_closed && !s->dead) {
		if (st->resp_state != H2_RESP_DONE) {
			/* cut: the client must not take it for a whole answer */
			nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
			h2_session_kick(s);
		}
	}
	if (st->ng_closed && s->pumping != st)
		h2_stream_free(st);
}

void h2_stream_ng_closed(struct h2_stream *st, uint32_t code)
{
	st->ng_closed = 1;
	if (!st->core_done && st->in_framed && code == NGHTTP2_NO_ERROR)
		/* the whole answer is framed, and nghttp2 closed the stream in
		 * the same pass: the core finishes it first, after the pass */
		return;
	if (!st->core_done && h2_ws_closed_clean(st, code))
		return; /* the tunnel first passes on what came before END_STREAM */
	if (!st->core_done)
		h2_stream_close(&st->sc); /* frees it */
	else
		h2_stream_free(st);
}
