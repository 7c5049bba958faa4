/*
 * codec_h1.c: the HTTP/1 codecs, server side (to clients) and client side
 * (to upstreams), as the stream core drives them (codec.h).
 *
 * Output is a queue of iovecs per side: the head weir wrote, then body
 * spans where they lie in the source buffer, framed as the peer reads
 * them (a chunk-size line and a CRLF around each span of a chunked body,
 * the last chunk after the end). The head and the first body bytes leave
 * in one writev. Input is read into the connection's buffer, and the
 * body's framing is decoded there (h1_body_next: Content-Length, chunked
 * through the strict decoder, until close), so that bodies move as spans
 * of the input buffer and are never copied; a span is consumed from the
 * buffer once the core says it was written (h1_consumed).
 */
#include "worker/h1/h1.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/net/net.h"
#include "worker/up/up.h"

static const char crlf[] = "\r\n";
static const char chunk_end[] = "0\r\n\r\n";

/* ---- output queues ------------------------------------------------- */

static inline __attribute__((always_inline)) void outq_append(struct outq *q, const void *p, size_t len)
{
	if (len == 0)
		return;
	q->iov[q->first + q->count].iov_base = (void *)p;
	q->iov[q->first + q->count].iov_len = len;
	q->count++;
}

void outq_add(struct outq *q, const void *p, size_t len)
{
	outq_append(q, p, len);
}

void outq_reset(struct outq *q)
{
	q->first = q->count = 0;
	q->src = NULL;
	q->src_consume = 0;
}

/* <n> bytes of <q> gone to the peer: the iovecs they filled leave the
 * queue, a part-written one is moved on (a zero-length one, an end mark,
 * goes only with bytes past it). */
static inline __attribute__((always_inline)) void outq_skip(struct outq *q, size_t n)
{
	if (n)
		q->sent = 1;
	while (n && q->count) {
		struct iovec *v = &q->iov[q->first];
		size_t k = n < v->iov_len ? n : v->iov_len;

		v->iov_base = (char *)v->iov_base + k;
		v->iov_len -= k;
		n -= k;
		if (v->iov_len == 0) {
			q->first++;
			q->count--;
		}
	}
}

size_t outq_bytes(const struct outq *q)
{
	size_t n = 0;

	for (int i = q->first; i < q->first + q->count; i++)
		n += q->iov[i].iov_len;
	return n;
}

size_t outq_at(const struct outq *q, size_t skip, const char **p)
{
	for (int i = q->first; i < q->first + q->count; i++) {
		const struct iovec *v = &q->iov[i];

		if (skip < v->iov_len) {
			*p = (const char *)v->iov_base + skip;
			return v->iov_len - skip;
		}
		skip -= v->iov_len;
	}
	*p = NULL;
	return 0;
}

void outq_advance(struct outq *q, size_t n)
{
	outq_skip(q, n);
	if (!q->count) {
		if (q->src)
			q->src->start += q->src_consume;
		outq_reset(q);
	}
}

/* Queues a body span of <src> (framing from <used> consumed bytes, of
 * which [data, data+len) is the payload), chunk-encoded if <chunked>;
 * inline in send_body, which every body span goes through. */
static inline __attribute__((always_inline)) void outq_span(struct outq *q, struct buf *src, uint32_t used,
                                                            const char *data, size_t len, int chunked)
{
	/* appended, so that a head and the first body bytes leave in one writev */
	q->src = src;
	q->src_consume = used;
	if (len == 0)
		return;
	if (chunked) {
		static const char hex[] = "0123456789abcdef";
		char *p = q->pre + sizeof(q->pre);
		size_t v = len;

		*--p = '\n';
		*--p = '\r';
		do {
			*--p = hex[v & 15];
			v >>= 4;
		} while (v);
		outq_append(q, p, (size_t)(q->pre + sizeof(q->pre) - p));
	}
	outq_append(q, data, len);
	if (chunked)
		outq_append(q, crlf, 2);
}

void outq_body(struct outq *q, struct buf *src, uint32_t used, const char *data, size_t len, int chunked)
{
	outq_span(q, src, used, data, len, chunked);
}

/* Writes what <q> holds to client <c> when it is given, else to upstream
 * <u> (through its SSL on a TLS group). Returns bytes written (>= 0; the
 * queue is empty when q->count is 0) or -errno. */
ssize_t outq_write(struct upconn *u, struct conn *c, struct outq *q, int more)
{
	ssize_t n, total = 0;

	while (q->count) {
		if (c) {
			n = conn_sendv(c, q->iov + q->first, q->count, more);
		} else if (u->ssl) {
			n = tls_client_sendv(u, q->iov + q->first, q->count);
		} else {
			n = worker_sendv(u->io.fd, q->iov + q->first, q->count, more ? MSG_MORE : 0);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return total;
			return -errno;
		}
		total += n;
		outq_skip(q, (size_t)n);
	}
	if (q->src) {
		q->src->start += q->src_consume;
		q->src = NULL;
	}
	q->first = 0;
	return total;
}

/* ---- both sides ------------------------------------------------------ */

static void h1_queue_head(struct side *s)
{
	outq_reset(&s->q);
	outq_append(&s->q, s->head->data, s->head->end);
}

/* The other side's trailer fields as HTTP/1 text into *<p>, *<n>: where
 * they lie when they are the lines read from HTTP/1, one after the other
 * and their final CRLF (nothing dropped: no copy), else written into
 * s->trl (got to fit, freed with the stream; a replay writes them
 * again). 0, or -1 (out of memory: the body ends without them). */
static __attribute__((noinline)) int h1_trailers_text(struct side *s, const char **p, size_t *n)
{
	if ((*n = trailers_in_place(s->trailers, s->ntrailers))) {
		*p = s->trailers[0].name;
		return 0;
	}
	buf_drop(&s->trl); /* a replay's: the same size */
	if (!(s->trl = buf_get_fit((uint32_t)trailers_size(s->trailers, s->ntrailers)))) {
		worker_count_error(WEIR_ERR(NOMEM)); /* or past a buffer: cannot be */
		return -1;
	}
	s->trl->end = (uint32_t)trailers_write(s->trl->data, s->trailers, s->ntrailers);
	*p = s->trl->data;
	*n = s->trl->end;
	return 0;
}

static void h1_send_body(struct side *s, const char *data, size_t len, int eos)
{
	if (len == 0 && !(eos && s->chunked))
		return;
	outq_span(&s->q, NULL, 0, data, len, s->chunked);
	if (eos && s->chunked) {
		const char *tp;
		size_t tn;

		if (s->ntrailers && h1_trailers_text(s, &tp, &tn) == 0) {
			/* the last chunk carries the other side's trailer fields
			 * (h1.h, trailers); their final CRLF ends the body */
			outq_append(&s->q, chunk_end, 3);
			outq_append(&s->q, tp, tn);
		} else {
			outq_append(&s->q, chunk_end, sizeof(chunk_end) - 1);
		}
	}
}

/* ---- input framing, both sides ----------------------------------------- */

static void h1_body_start(struct side *s, const struct msg *m, uint32_t budget)
{
	struct side_in *bi = &s->in;

	/* a budget of a stream buffer's body or more splits nothing one read
	 * brings: a head read into a stream buffer (h1_client_in) may leave
	 * up to its head room more than that behind it */
	bi->budget = wk.cls_stream >= 0 && budget >= wk.stream_size && budget < wk.stream_cap ? wk.stream_cap : budget;
	bi->framing = (uint8_t)m->body;
	bi->left = m->content_length;
	bi->total = 0;
	bi->holding = bi->eos = bi->eof = bi->moved = 0;
	if (m->body == HTTP_BODY_CHUNKED)
		http_chunked_init(&bi->chunks);
}

/* Hands up <n> bytes at <data>, standing for <used> bytes of the input. */
static inline int h1_hand(struct side_in *bi, struct body_span *sp, const char *data, size_t n, uint32_t used,
                          int eos, int more)
{
	bi->span.data = data;
	bi->span.len = n;
	bi->span.eos = (uint8_t)eos;
	bi->span.more = (uint8_t)more;
	bi->span.ntrailers = 0;
	bi->used = used;
	bi->holding = 1;
	bi->total += n;
	if (eos)
		bi->eos = 1;
	*sp = bi->span;
	return 1;
}

/* The trailer section <p>[0..len) of a chunked body that ended, in the
 * input buffer behind the data: its fields, the refused ones dropped,
 * handed up with the span's end for the other side's codec (HTTP/1
 * sends them only if that side is chunked too). */
static __attribute__((noinline)) void h1_trailers_take(struct side_in *bi, struct body_span *sp, const char *p,
                                                       uint32_t len)
{
	struct hdr *v;
	uint32_t dropped;

	if (len <= 2)
		return; /* the final CRLF alone: no field */
	if (!(v = side_trailers(bi))) {
		worker_count_error(WEIR_ERR(NOMEM)); /* the body ends without them */
		return;
	}
	bi->span.ntrailers = trailers_list(p, len, v, &dropped);
	if (dropped) {
		SHM_ADD(wk.cnt, errors[weir_err_index(WEIR_ERR(TRAILER_DROPPED))], dropped);
		bi->moved = 1; /* counted once: no replay reads them again */
	}
	if (bi->span.ntrailers)
		bi->span.trailers = v;
	*sp = bi->span;
}

/*
 * Chunked: decodes strictly what <in> holds. The data of every chunk the
 * buffer holds is gathered into one span by moving each chunk's data
 * down over the framing before it (only bytes already decoded are
 * overwritten), so a body of tiny chunks costs one write per buffer, not
 * one per chunk (bi->moved says it happened: a replay cannot resend
 * them). Framing with no data is consumed at once.
 */
static __attribute__((noinline)) int h1_body_chunked(struct side_in *bi, struct buf *in, struct body_span *sp)
{
	struct http_chunked *ch = &bi->chunks;
	char *base = in->data + in->start, *span = NULL;
	size_t avail = buf_len(in), off = 0, len = 0;
	int more = 0;

	while (off < avail && !ch->done && !more) {
		size_t used, dlen;
		const char *data;
		int rc = http_chunked_feed(ch, base + off, avail - off, &used, &data, &dlen);

		if (rc < 0)
			return rc;
		if (dlen > bi->budget - len) {
			/* the budget is full: the rest of this chunk waits */
			size_t over = dlen - (bi->budget - len);

			http_chunked_unread(ch, over);
			used -= over;
			dlen -= over;
			more = 1;
		}
		off += used;
		if (dlen == 0)
			continue;
		if (!span) {
			span = (char *)data;
		} else if (data != span + len) {
			memmove(span + len, data, dlen);
			bi->moved = 1;
		}
		len += dlen;
	}
	/* a trailer section not whole yet stays in the buffer, to be fed
	 * again with its rest: once done it lies in one piece there */
	off -= http_chunked_trailer_restart(ch);
	if (len == 0 && !ch->done) {
		in->start += (uint32_t)off; /* framing only: nothing will write it */
		return 0;
	}
	h1_hand(bi, sp, span, len, (uint32_t)off, ch->done, more);
	if (ch->done)
		h1_trailers_take(bi, sp, base + off - ch->trailer_bytes, ch->trailer_bytes);
	return 1;
}

/* body_next() but for the common case below: a whole body asked for,
 * chunked and until-close framing, a span held, the end handed up. */
static __attribute__((noinline)) int h1_body_next_rest(struct side *s, struct buf *in, struct body_span *sp,
                                                       int whole)
{
	struct side_in *bi = &s->in;
	uint32_t avail = in ? buf_len(in) : 0;

	if (bi->holding) {
		*sp = bi->span;
		return 1;
	}
	if (bi->eos)
		return 0;
	switch (bi->framing) {
	case HTTP_BODY_LENGTH: {
		uint32_t n;
		int more = 0;

		if (whole) {
			/* in place: all of it fits behind what precedes it */
			if (!in || in->start + bi->left > in->cap)
				return CODEC_SPLIT;
			if (avail < bi->left)
				return 0;
		}
		if (avail == 0)
			return 0;
		n = avail < bi->left ? avail : (uint32_t)bi->left;
		if (!whole && n > bi->budget) { /* a buffered body: body_buffer bounds it */
			n = bi->budget;
			more = 1;
		}
		bi->left -= n;
		return h1_hand(bi, sp, in->data + in->start, n, n, bi->left == 0, more);
	}
	case HTTP_BODY_CHUNKED:
		if (whole)
			return CODEC_SPLIT;
		return avail ? h1_body_chunked(bi, in, sp) : 0;
	case HTTP_BODY_CLOSE:
		if (whole)
			return CODEC_SPLIT;
		if (avail > bi->budget)
			return h1_hand(bi, sp, in->data + in->start, bi->budget, bi->budget, 0, 1);
		if (avail)
			return h1_hand(bi, sp, in->data + in->start, avail, avail, 0, 0);
		return bi->eof ? h1_hand(bi, sp, NULL, 0, 0, 1, 0) : 0;
	default:
		return 0;
	}
}

/* Every body span goes through here: a Content-Length body streaming is
 * taken inline, anything else in h1_body_next_rest(). */
static inline __attribute__((always_inline)) int h1_body_next(struct side *s, struct buf *in,
                                                              struct body_span *sp, int whole)
{
	struct side_in *bi = &s->in;

	if (bi->framing == HTTP_BODY_LENGTH && !whole && !bi->holding && !bi->eos) {
		uint32_t avail = in ? buf_len(in) : 0, n;
		int more = 0;

		if (avail == 0)
			return 0;
		n = avail < bi->left ? avail : (uint32_t)bi->left;
		if (n > bi->budget) {
			n = bi->budget;
			more = 1;
		}
		bi->left -= n;
		return h1_hand(bi, sp, in->data + in->start, n, n, bi->left == 0, more);
	}
	return h1_body_next_rest(s, in, sp, whole);
}

static inline __attribute__((always_inline)) int h1_consumed(struct side *s, struct buf *in, size_t n)
{
	struct side_in *bi = &s->in;

	if (!bi->holding)
		return in && buf_len(in);
	if (n < bi->span.len) {
		/* part of it: HTTP/1 gives the input back per whole span */
		bi->span.data += n;
		bi->span.len -= n;
		return 1;
	}
	bi->holding = 0;
	if (!in)
		return 0;
	in->start += bi->used;
	return buf_len(in) != 0;
}

/* Drops what the input buffer holds past the span handed up: the body's
 * rest, and whatever followed it (the connection closes after). */
static void h1_discard(struct side_in *bi, struct buf *in)
{
	bi->holding = 0;
	bi->eos = 1;
	if (in)
		in->start = in->end;
}

/* Swaps input buffer *<in>, an I/O buffer holding nothing unread and
 * nothing handed up, for a stream buffer when more than an I/O buffer of
 * a Content-Length body, <left>, is still to come. 1 when it did. */
static int h1_in_stream(struct side_in *bi, struct buf **in, uint64_t left, int kind)
{
	struct buf *b;

	if (left <= wk.buf_size || (*in)->cap != wk.buf_size || buf_len(*in) || bi->holding ||
	    !(b = buf_take_stream(left, kind)))
		return 0;
	buf_put(*in);
	*in = b;
	return 1;
}

/* Room for more body: a full input buffer holding nothing handed up
 * moves its bytes down (what a replay would read is then gone). */
static void h1_body_room(struct side_in *bi, struct buf *in)
{
	if (in && in->end == in->cap && in->start > 0 && !bi->holding) {
		buf_compact(in);
		bi->moved = 1;
	}
}

/* ---- the server side: a client connection ----------------------------- */

static int h1_server_response_head(struct side *s, const struct msg *m, struct head_resp *hr)
{
	return head_write_response(m, hr, &s->head);
}

static ssize_t h1_server_flush(struct side *s, int more)
{
	return outq_write(NULL, s->c, &s->q, more);
}

/* The input buffer for the next read of a request body. A Content-Length
 * body with more to come than an I/O buffer holds reads into a stream
 * buffer, as a response body does (h1_client_in): a 1 MiB upload then
 * moves in reads and writes of 64 KiB, not 16. It is taken when the input
 * buffer holds nothing unread and nothing handed up, and only from a
 * client whose last read took half a buffer or more (conn_read): a client
 * that drips its body keeps its I/O buffer, since a client's buffer is
 * held until its body ends. The bytes before it (the head, the first of
 * the body) are then gone, as a compaction would leave them, so a replay
 * cannot read them again (moved). */
static void h1_server_in(struct side *s, struct conn *c)
{
	if (s->in.framing == HTTP_BODY_LENGTH && c->in && c->read_long && c->readable &&
	    h1_in_stream(&s->in, &c->in, s->in.left, STREAM_BUF_UPLOAD))
		s->in.moved = 1;
}

static int h1_server_recv(struct side *s)
{
	if (s->in.framing != HTTP_BODY_NONE && !s->in.eos) {
		h1_server_in(s, s->c);
		h1_body_room(&s->in, s->c->in); /* a body coming, nothing else read yet */
	}
	return conn_read(s->c);
}

static int h1_server_body_next(struct side *s, struct body_span *sp, int whole)
{
	return h1_body_next(s, s->c->in, sp, whole);
}

static int h1_server_consumed(struct side *s, size_t n)
{
	return h1_consumed(s, s->c->in, n);
}

static void h1_server_discard(struct side *s)
{
	h1_discard(&s->in, s->c->in);
}

/* HTTP/1: a connection carries the stream whose request it is reading. */
static void h1_server_attach(struct side *s, struct conn *c, struct upconn *u, struct txn *t)
{
	(void)u;
	s->c = c;
	c->txn = t;
}

static void h1_server_reset(struct side *s, int rc)
{
	struct conn *c = s->c; /* <s> goes with the stream */

	if (c->txn)
		txn_abort(c->txn, rc);
	conn_close(c);
}

/* weir's own answer as HTTP/1.1 text: the status line, the fields in
 * their order, the blank line, the body. */
static int h1_server_answer(struct conn *c, const struct answer *a, struct buf **text)
{
	const char *reason = a->reason ? a->reason : head_reason(a->status);
	size_t need = 16 + strlen(reason) + 2 + (size_t)a->body_len;
	struct buf *b;
	char *p;
	(void)c;

	for (uint32_t i = 0; i < a->n; i++)
		need += a->f[i].name_len + 2 + a->f[i].value_len + 2;
	*text = NULL;
	if (need > UINT32_MAX || !(b = buf_get_fit((uint32_t)need)))
		return WEIR_ERR(NOMEM);
	p = b->data;
	p += sprintf(p, "HTTP/1.1 %03d %s\r\n", a->status, reason);
	for (uint32_t i = 0; i < a->n; i++) {
		memcpy(p, a->f[i].name, a->f[i].name_len);
		p += a->f[i].name_len;
		*p++ = ':';
		*p++ = ' ';
		memcpy(p, a->f[i].value, a->f[i].value_len);
		p += a->f[i].value_len;
		*p++ = '\r';
		*p++ = '\n';
	}
	*p++ = '\r';
	*p++ = '\n';
	if (a->body_len)
		memcpy(p, a->body, a->body_len);
	p += a->body_len;
	b->start = 0;
	b->end = (uint32_t)(p - b->data);
	*text = b;
	return 0;
}

/* The interim answer, written at once: a fresh socket always takes so
 * few bytes. */
static int h1_server_interim(struct conn *c, int status)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	char line[64];
	struct iovec v = {.iov_base = (void *)cont, .iov_len = sizeof(cont) - 1};

	if (status != 100) {
		v.iov_base = line;
		v.iov_len = (size_t)snprintf(line, sizeof(line), "HTTP/1.1 %03d %s\r\n\r\n", status, head_reason(status));
	}
	if (conn_sendv(c, &v, 1, 0) != (ssize_t)v.iov_len)
		return -1;
	SHM_ADD(wk.cnt, bytes_out, v.iov_len);
	return 0;
}

const struct codec_ops h1_server_codec = {
	.name = "http/1.1 server",
	.response_head = h1_server_response_head,
	.answer = h1_server_answer,
	.canned = conn_answer_canned,
	.interim = h1_server_interim,
	.queue_head = h1_queue_head,
	.send_body = h1_send_body,
	.flush = h1_server_flush,
	.recv = h1_server_recv,
	.body_start = h1_body_start,
	.body_next = h1_server_body_next,
	.consumed = h1_server_consumed,
	.discard = h1_server_discard,
	.attach = h1_server_attach,
	.reset = h1_server_reset,
};

/* ---- the client side: an upstream connection ---------------------------- */

static ssize_t h1_client_flush(struct side *s, int more)
{
	return outq_write(s->u, NULL, &s->q, more);
}

/* h1_client_recv() over TLS, into <room> bytes of u->in: SSL_read gives a
 * record at a time, so the records already read are decrypted one after
 * the other until the room is full (a stream buffer then fills from one
 * recv(2) and goes on in one write, not a record each); a socket drained
 * by BoringSSL may still leave decrypted bytes in it, which no event will
 * announce. */
static int h1_client_recv_tls(struct upconn *u, size_t room)
{
	size_t got = 0;
	ssize_t n;

	tls_bio_read_ahead(u->ssl, room);
	while ((n = tls_client_recv(u, u->in->data + u->in->end, room - got)) > 0) {
		u->in->end += (uint32_t)n;
		got += (size_t)n;
		if (got == room || !tls_bio_pending(u->ssl))
			break;
	}
	if (got) {
		/* an end (close_notify) or error read behind the records stays
		 * for the next call, which no event would make: readable, and
		 * the connection is not pooled should the response be whole */
		if (n > 0 && got < room && !tls_bio_pending(u->ssl))
			u->readable = 0;
		else if (n < 0 && errno == EAGAIN)
			u->readable = u->tls_wants != 0;
		else if (n <= 0)
			u->ended = 1;
		return (int)got;
	}
	if (n < 0 && errno == EAGAIN) {
		u->readable = u->tls_wants != 0; /* retried once the socket is writable */
		return WEIR_EAGAIN;
	}
	u->readable = 0;
	return n == 0 ? 0 : WEIR_ERR(UPSTREAM_CLOSED);
}

/* The input buffer for the next read. A Content-Length body with more to
 * come than an I/O buffer holds reads into a stream buffer: a 64 KiB body
 * then moves in two reads and two writes, not five of each. It is taken
 * when nothing of the body is buffered or handed up, so no byte moves and
 * nothing points into the buffer it replaces (the response head's bytes
 * in it are done with by the first body read, as when a compaction writes
 * over them). */
static int h1_client_in(struct side *s, struct upconn *u)
{
	uint64_t left = s->in.framing == HTTP_BODY_LENGTH && !s->in.eos ? s->in.left : 0;

	if (!u->in) {
		/* no body under way (a head to read): a connection whose last
		 * response did not fit an I/O buffer reads it into a stream
		 * buffer, so that a response of 64 KiB comes in one read and
		 * leaves in one write, as it was sent (its head, then the rest
		 * of its body, would be two of each) */
		if (u->long_body && s->in.framing == HTTP_BODY_NONE)
			left = wk.stream_size;
		return (u->in = buf_get_stream(left, STREAM_BUF_RESPONSE)) ? 0 : WEIR_ERR(NOMEM);
	}
	h1_in_stream(&s->in, &u->in, left, STREAM_BUF_RESPONSE);
	return 0;
}

/* As h1_body_start(), noting on the connection whether this response's
 * head and Content-Length body go past an I/O buffer: the next head is
 * then read into a stream buffer (h1_client_in). A server's responses to
 * one client tend to be alike, and a wrong guess costs a buffer held for
 * one response's life. */
static void h1_client_body_start(struct side *s, const struct msg *m, uint32_t budget)
{
	h1_body_start(s, m, budget);
	if (s->u)
		s->u->long_body = m->body == HTTP_BODY_LENGTH && m->head_len + m->content_length > wk.buf_size;
}

static int h1_client_recv(struct side *s)
{
	struct upconn *u = s->u;
	ssize_t n;
	size_t room;

	if (h1_client_in(s, u) < 0)
		return WEIR_ERR(NOMEM);
	/* what the other side still has queued may point into u->in: moved
	 * down only when nothing handed up is (a response head being parsed
	 * starts at 0, so it never moves) */
	h1_body_room(&s->in, u->in);
	room = u->in->cap - u->in->end;
	if (room == 0)
		return WEIR_EAGAIN;
	if (u->ssl) {
		int rc = h1_client_recv_tls(u, room);

		if (rc == 0 || rc == WEIR_ERR(UPSTREAM_CLOSED))
			s->in.eof = 1;
		return rc;
	}
	for (;;) {
		n = recv(u->io.fd, u->in->data + u->in->end, room, 0);
		if (n > 0) {
			u->in->end += (uint32_t)n;
			if ((size_t)n < room)
				u->readable = 0;
			return (int)n;
		}
		if (n == 0) {
			u->readable = 0;
			s->in.eof = 1; /* the end of a body framed by the close */
			return 0;
		}
		if (errno == EINTR)
			continue;
		u->readable = 0;
		if (errno == EAGAIN)
			return WEIR_EAGAIN;
		s->in.eof = 1; /* read as the close, as ever */
		return WEIR_ERR(UPSTREAM_CLOSED);
	}
}

static int h1_client_body_next(struct side *s, struct body_span *sp, int whole)
{
	return h1_body_next(s, s->u->in, sp, whole);
}

static int h1_client_consumed(struct side *s, size_t n)
{
	return h1_consumed(s, s->u->in, n);
}

static void h1_client_discard(struct side *s)
{
	h1_discard(&s->in, s->u ? s->u->in : NULL);
}

/* A new connection speaks the codec it is attached with; a pooled one
 * keeps its own (the core attaches with u->codec's table). */
static void h1_client_attach(struct side *s, struct conn *c, struct upconn *u, struct txn *t)
{
	(void)c;
	s->u = u;
	u->txn = t;
	if (!u->codec)
		u->codec = s->ops;
	s->q.sent = 0;
}

static void h1_client_reset(struct side *s, int rc)
{
	struct upconn *u = s->u;

	(void)rc;
	s->u = NULL;
	if (u) {
		u->txn = NULL;
		upstream_close(u);
	}
}

static int h1_client_request_head(struct side *s, const struct msg *m, struct head_req *hr)
{
	return head_write_request(m, hr, &s->head);
}

static int h1_client_head_field(const struct side *s, size_t *pos, const char **name, size_t *nlen,
                                const char **value, size_t *vlen)
{
	return head_text_field(s->head, pos, name, nlen, value, vlen);
}

/* The head is parsed where it lies in u->in, from its start (compacted
 * as a head begins, so that it never moves under the parser), and
 * consumed once whole: its bytes stay where they are until the next
 * recv(), by when the core has done with them. */
static int h1_client_head_next(struct side *s, struct msg *m, const struct head_in *hi)
{
	struct upconn *u = s->u;
	struct http_response *rp = hi->parser;
	int rc;

	if (!u->in || buf_len(u->in) == 0)
		return WEIR_EAGAIN;
	if (rp->st.start == NULL) {
		buf_compact(u->in);
		http_response_init(rp, m, hi->arena, hi->max_headers, hi->max_head, (enum http_method)hi->method);
	}
	rc = http_response_parse(rp, u->in->data, u->in->end);
	if (rc == WEIR_EAGAIN && u->in->end == u->in->cap)
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE); /* a head larger than any we take */
	if (rc < 0)
		return rc;
	u->in->start += (uint32_t)m->head_len;
	rp->st.start = NULL; /* the next head (after a 1xx) begins anew */
	return 0;
}

/* HTTP/1 carries one stream at a time: a connection in use takes none. */
static int h1_client_avail_streams(const struct upconn *u)
{
	return u->txn ? 0 : 1;
}

const struct codec_ops h1_client_codec = {
	.name = "http/1.1 client",
	.request_head = h1_client_request_head,
	.head_field = h1_client_head_field,
	.head_next = h1_client_head_next,
	.queue_head = h1_queue_head,
	.send_body = h1_send_body,
	.flush = h1_client_flush,
	.recv = h1_client_recv,
	.body_start = h1_client_body_start,
	.body_next = h1_client_body_next,
	.consumed = h1_client_consumed,
	.discard = h1_client_discard,
	.attach = h1_client_attach,
	.reset = h1_client_reset,
	.avail_streams = h1_client_avail_streams,
};
