/*
 * codec.h: what a codec does for the stream core, one table per protocol
 * and side.
 *
 * Principle: the core moves a stream's bytes through two sides, towards
 * the client (a server codec) and towards the upstream (a client codec),
 * and never frames them itself: it hands a codec a head the codec wrote
 * (head.c for HTTP/1), spans of body with an end-of-stream flag, and asks
 * it to flush what it queued or to read more. HTTP/1 keeps its fast path:
 * with one stream on a connection, a body span is queued as it lies in
 * the input buffer (an iovec into it, no copy) between the framing the
 * codec adds (a chunk-size line, a CRLF), and the source buffer is
 * consumed only once the span is written. An HTTP/2 codec (next issue)
 * adds a table beside these; a connection owns one codec (c->codec,
 * u->codec) and zero or more streams.
 */
#ifndef WEIR_WORKER_CODEC_H
#define WEIR_WORKER_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct buf;
struct conn;
struct upconn;

/* Pending output in one direction. */
struct outq {
	struct iovec iov[6];     /* head, size line, data, CRLF, last chunk */
	int first, count;       /* iov[first .. first+count) still to write */
	struct buf *src;        /* buffer the body span points into */
	uint32_t src_consume;   /* bytes of src to consume once all is written */
	uint8_t sent;           /* some of it reached the peer (cleared per connection) */
	char pre[24];           /* chunk size line */
};

struct codec_ops;

/* One side of a stream, as its codec sees it. */
struct side {
	struct outq q;           /* towards this side's peer */
	struct buf *head;        /* the head written for the peer */
	uint8_t chunked;         /* the body goes chunk-encoded to the peer */
	const struct codec_ops *ops;
	struct conn *c;          /* the client side's connection */
	struct upconn *u;        /* the upstream side's, once attached */
};

struct codec_ops {
	const char *name;
	/* Queues s->head, first in an empty queue. */
	void (*queue_head)(struct side *s);
	/* Queues [data, data+len), the payload of the <used> bytes of <src>
	 * consumed once written (consumed at once when nothing is queued),
	 * framed for the peer; <eos>: the body ends with it. */
	void (*send_body)(struct side *s, struct buf *src, uint32_t used, const char *data, size_t len, int eos);
	/* Writes what is queued; <more>: more of a counted body follows at
	 * once. Returns bytes written (the queue is empty when q.count is 0)
	 * or -errno. */
	ssize_t (*flush)(struct side *s, int more);
	/* Reads from the peer into its connection's input buffer: bytes
	 * (> 0), 0 at end of stream, WEIR_EAGAIN, or an error. */
	int (*recv)(struct side *s);
	/* Client codecs: how many more streams connection <u> takes (a
	 * pool asks before it hands the connection out). */
	int (*avail_streams)(const struct upconn *u);
};

/* HTTP/1: the server codec (towards clients) and the client codec
 * (towards upstreams), worker/codec_h1.c. */
extern const struct codec_ops h1_server_codec;
extern const struct codec_ops h1_client_codec;

/* The queue primitives under them, shared with the tunnel, which moves
 * raw bytes through the same queues: outq_add() appends one iovec,
 * outq_reset() empties the queue, outq_body() queues a body span
 * (chunk-encoded if <chunked>), outq_write() writes to <c> if given,
 * else to <u>. */
void outq_add(struct outq *q, const void *p, size_t len);
void outq_reset(struct outq *q);
void outq_body(struct outq *q, struct buf *src, uint32_t used, const char *data, size_t len, int chunked);
ssize_t outq_write(struct upconn *u, struct conn *c, struct outq *q, int more);

#endif
