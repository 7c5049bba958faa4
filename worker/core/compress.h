/*
 * compress: gzip and brotli compression of responses (compress = { ... },
 * common/compress_conf.h), the worker's side.
 *
 * Principle: a response filter decides, a body filter encodes. In the
 * request phase the client's Accept-Encoding is read into q-values (the
 * request's header list is gone once the response head is parsed). The
 * response filter then compresses a response only if its route's block
 * is on, it has a body, the upstream sent no Content-Encoding, it is no
 * range (206, Content-Range), no Cache-Control: no-transform, its type is
 * listed, its length is unknown or at least min_length, and the client
 * accepts br or gzip (the higher q-value; br on a tie). Such a response
 * loses Content-Length and Accept-Ranges, gains Content-Encoding and
 * Vary: Accept-Encoding (Vary also when only the client's acceptance was
 * missing, so caches keep both forms apart), and a strong ETag becomes a
 * weak one, as nginx does; it goes chunked to an HTTP/1.1 client and
 * until the close to an HTTP/1.0 one. Every response on a route with
 * compression on is counted, compressed by encoding or skipped by reason.
 *
 * Memory is bounded per stream and per worker. Each body span is encoded
 * into one output buffer of the worker's slab, queued to the client; the
 * upstream is not read again until that buffer is written and the span
 * wholly encoded (the source is consumed as the encoder takes it), so a
 * slow client holds one input and one output buffer whatever the size of
 * the response. The encoders' own state comes from a per-worker region of
 * compress.memory bytes (compress_pool.h) through zlib's zalloc and
 * brotli's alloc_func: a stream is admitted only when its encoder's
 * reservation (zlib's exact size, smaller for a short body of known
 * length; brotli's measured peak and a margin) still fits beside those
 * under way, and at most compress.max_streams at once; past either the
 * response goes uncompressed and is counted (busy, no_memory). Brotli
 * runs with a 256 KiB window (lgwin 18) to keep its state small.
 *
 * A stream of bytes (chunked or close-delimited from the upstream) is
 * flushed whenever the upstream has nothing more to read at once, so
 * server-sent events and long polls still arrive as they are sent; a
 * counted body is flushed only at its end.
 */
#ifndef WEIR_WORKER_CORE_COMPRESS_H
#define WEIR_WORKER_CORE_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "common/compress_conf.h"
#include "worker/core/phase.h"

struct body_span;
struct buf;
struct config;
struct txn;
struct cz_stream;

/* What a request carries of compression (in struct txn, zeroed with it). */
struct compress_txn {
	const struct config_compress *pol; /* its route's block, when on */
	uint16_t q[COMPRESS_ENC_COUNT];    /* the client's q-values, 0..1000 */
	struct cz_stream *s;               /* the response is being encoded */
};

/* Worker start: maps the pool when any block of <cfg> is on. Returns 0,
 * or -1 (logged) when it cannot. */
int compress_init(const struct config *cfg);

/* The request phase's handler: the route's block and Accept-Encoding. */
enum ph_rc compress_ph_request(struct txn *t, const void *conf);

/* The response filter's: decides, rewrites the head, starts the encoder. */
enum ph_rc compress_ph_response(struct txn *t, const void *conf);

/* Whether the response of <t> is being encoded (its head then says no
 * length: head_resp.recoded). */
static inline int compress_on(const struct cz_stream *s)
{
	return s != NULL;
}

/*
 * The body filter: encodes span <sp> of the response body, as the
 * upstream's codec handed it up (body_next), and queues what it made to
 * the client (at most one output buffer: the rest is pending). The span
 * is consumed on the upstream side as the encoder takes it; t->resp_done
 * is set once the encoded body's end is queued. Returns 1, or
 * WEIR_ECOMPRESS_FAILED.
 */
int compress_body(struct txn *t, const struct body_span *sp);

/* Input or output still pending from the last span: compress_resume()
 * (the same, for what is left) before the upstream's codec is asked for
 * more or the upstream read. */
int compress_pending(const struct txn *t);
int compress_resume(struct txn *t);

/* <t> is freed: its encoder and buffer go back. */
void compress_end(struct txn *t);

/*
 * Reads one Accept-Encoding value <v>[0, len) into <q> (entries the
 * value does not name, directly or through "*", are left alone; a value
 * may be one of several headers): q-values in thousandths, "x-gzip" as
 * gzip. Pure, for the unit test.
 */
void compress_accept_parse(const char *v, size_t len, int16_t q[COMPRESS_ENC_COUNT], int16_t *star);

#endif
