/*
 * codec_h1.c: the HTTP/1 codecs, server side (to clients) and client side
 * (to upstreams), as the stream core drives them (codec.h).
 *
 * Output is a queue of iovecs per side: the head weir wrote, then body
 * spans where they lie in the source buffer, framed as the peer reads
 * them (a chunk-size line and a CRLF around each span of a chunked body,
 * the last chunk after the end). The head and the first body bytes leave
 * in one writev. Input is read into the connection's buffer; the core
 * decodes the framing it finds there (txn_fill_*), so that bodies move
 * as spans of the input buffer and are never copied.
 */
#include "worker/h1/h1.h"

#include <errno.h>
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
		if (n > 0)
			q->sent = 1;
		while (n > 0 && q->count) {
			struct iovec *v = &q->iov[q->first];
			if ((size_t)n >= v->iov_len) {
				n -= (ssize_t)v->iov_len;
				q->first++;
				q->count--;
			} else {
				v->iov_base = (char *)v->iov_base + n;
				v->iov_len -= (size_t)n;
				n = 0;
			}
		}
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

static void h1_send_body(struct side *s, struct buf *src, uint32_t used, const char *data, size_t len, int eos)
{
	if (len == 0 && !(eos && s->chunked)) {
		/* framing only: consumed now, since no write will */
		if (src)
			src->start += used;
		return;
	}
	outq_span(&s->q, src, used, data, len, s->chunked);
	if (eos && s->chunked)
		outq_append(&s->q, chunk_end, sizeof(chunk_end) - 1);
}

/* ---- the server side: a client connection ----------------------------- */

static ssize_t h1_server_flush(struct side *s, int more)
{
	return outq_write(NULL, s->c, &s->q, more);
}

static int h1_server_recv(struct side *s)
{
	return conn_read(s->c);
}

const struct codec_ops h1_server_codec = {
	.name = "http/1.1 server",
	.queue_head = h1_queue_head,
	.send_body = h1_send_body,
	.flush = h1_server_flush,
	.recv = h1_server_recv,
};

/* ---- the client side: an upstream connection ---------------------------- */

static ssize_t h1_client_flush(struct side *s, int more)
{
	return outq_write(s->u, NULL, &s->q, more);
}

/* h1_client_recv() over TLS, into <room> bytes of u->in: records come one
 * at a time, and a socket drained by BoringSSL may still leave decrypted
 * bytes in it, which no event will announce. */
static int h1_client_recv_tls(struct upconn *u, size_t room)
{
	ssize_t n = tls_client_recv(u, u->in->data + u->in->end, room);

	if (n > 0) {
		u->in->end += (uint32_t)n;
		if ((size_t)n < room && !tls_bio_pending(u->ssl))
			u->readable = 0;
		return (int)n;
	}
	if (n < 0 && errno == EAGAIN) {
		u->readable = u->tls_wants != 0; /* retried once the socket is writable */
		return WEIR_EAGAIN;
	}
	u->readable = 0;
	return n == 0 ? 0 : WEIR_ERR(UPSTREAM_CLOSED);
}

static int h1_client_recv(struct side *s)
{
	struct upconn *u = s->u;
	ssize_t n;
	size_t room;

	if (!u->in && !(u->in = buf_get()))
		return WEIR_ERR(NOMEM);
	/* what the other side still has queued may point into u->in: the
	 * caller compacts only when it may (txn_upstream_read) */
	room = wk.buf_size - u->in->end;
	if (room == 0)
		return WEIR_EAGAIN;
	if (u->ssl)
		return h1_client_recv_tls(u, room);
	for (;;) {
		n = read(u->io.fd, u->in->data + u->in->end, room);
		if (n > 0) {
			u->in->end += (uint32_t)n;
			if ((size_t)n < room)
				u->readable = 0;
			return (int)n;
		}
		if (n == 0) {
			u->readable = 0;
			return 0;
		}
		if (errno == EINTR)
			continue;
		u->readable = 0;
		return errno == EAGAIN ? WEIR_EAGAIN : WEIR_ERR(UPSTREAM_CLOSED);
	}
}

/* HTTP/1 carries one stream at a time: a connection in use takes none. */
static int h1_client_avail_streams(const struct upconn *u)
{
	return u->txn ? 0 : 1;
}

const struct codec_ops h1_client_codec = {
	.name = "http/1.1 client",
	.queue_head = h1_queue_head,
	.send_body = h1_send_body,
	.flush = h1_client_flush,
	.recv = h1_client_recv,
	.avail_streams = h1_client_avail_streams,
};
