/*
 * h2_client.h: HTTP/2 to upstream servers, for the groups with
 * protocol = "h2c" (prior knowledge over TCP) or "h2" (TLS, ALPN "h2"),
 * on libnghttp2's client API (1.52: the older, non-*2 calls).
 *
 * Principle: the mirror image of worker/h2/ towards clients. A request
 * to such a group gets a virtual struct upconn (no socket: u->h2 is its
 * stream) whose codec (h2_client_stream.c, u->codec) is the seam: its
 * request_head op has head.c write the core's message as fields
 * (:method :authority :path and lower-case names, Host as :authority,
 * connection-specific fields dropped), which are submitted as they lie
 * with the session's :scheme, and body spans go out as DATA without
 * framing of their own. The response head's fields are kept for the
 * response's life and read into the core's message by head_next, checked
 * as an HTTP/1 head's are (no content-length: the body ends with the
 * stream), and its DATA is handed up in place through the codec's body
 * ops (no chunked text is made or decoded). Trailers go as
 * the core carries them (worker/h1/h1.h, trailers), a header list: a
 * trailing HEADERS from the server is the trailer list of the body's last
 * span, and the request's list a trailing HEADERS from the data source.
 *
 * Sessions (h2_client.c): per worker per server, a list of sessions in
 * the server's state (up_server.h2). A stream goes to the first session
 * that has room under the server's SETTINGS_MAX_CONCURRENT_STREAMS (100
 * assumed until its SETTINGS came; no stream is submitted before them);
 * when every session is full another opens, up to the group's keepalive
 * (at least one); past that a stream waits on the least loaded session,
 * in nghttp2's queue, for a place (under timeouts.upstream_send). A
 * session that got a GOAWAY takes no new stream; its streams above the
 * last stream id (nghttp2 closes them REFUSED_STREAM), and those a server
 * refuses with REFUSED_STREAM, are sent again once on another session as
 * a connect-stage failure when the request can be replayed, else 502. A
 * session that fails to connect (or whose TLS server does not pick h2)
 * fails every stream waiting on it as a failed connect would: the next
 * server. An idle session closes after timeouts.upstream_keepalive.
 *
 * Flow control: the stream window is one buffer (H2C_WINDOW); DATA is
 * consumed (nghttp2_session_consume) only when the core wrote it on; the
 * socket is read only while nghttp2 wants to read, and at most 8 reads of
 * 16 KiB per event. The request body is read out of the core's queue by
 * the data source only as nghttp2 frames it (the server's window).
 *
 * Cancellation: the core resetting or dropping the upstream side before
 * the stream ended sends RST_STREAM CANCEL; a server's RST_STREAM is an
 * upstream error for the core (502: weir_errors_total{kind=
 * "upstream_reset"}, or the gRPC status mapping of grpc.c).
 */
#ifndef WEIR_WORKER_UP_H2_CLIENT_H
#define WEIR_WORKER_UP_H2_CLIENT_H

#include <stdint.h>
#include <ev.h>
#include <nghttp2/nghttp2.h>

#include "common/config.h"
#include "worker/h1/h1.h"
#include "worker/up/up.h"

/* A stream's receive window, and what its response body buffer holds. */
#define H2C_WINDOW 65535u

struct h2c_stream;

struct h2c_session {
	struct upconn *sock;       /* the connection (upstream_connect's), NULL once closed */
	nghttp2_session *ng;
	struct up_server *srv;
	const struct route_table *table; /* of the stream that opened it, for upstream_fail */
	uint32_t si;
	struct h2c_session *next;  /* the server's list (srv->h2) */
	struct h2c_stream *streams;
	uint32_t nstreams;         /* streams placed on it, waiting ones included */
	ev_prepare flush;          /* the gathered write, once per loop pass */
	struct buf *out;
	const uint8_t *pend;
	size_t pend_len;
	uint8_t ready;             /* connected, handshake done */
	uint8_t settings;          /* the server's SETTINGS came */
	uint8_t goaway;            /* no new streams (GOAWAY either way) */
	uint8_t dead;              /* failed or closed: streams get errors */
	uint8_t listed;            /* in srv->h2 */
	uint8_t in_ng;
	int fail_rc;               /* why it is dead (a connect failure: the next server) */
};

struct h2c_stream {
	struct upconn u;           /* the upstream side the core sees */
	struct h2c_session *s;
	struct h2c_stream *next, *prev;
	struct side *side;         /* the core's upstream side, once attached */
	int32_t id;                /* 0 until submitted */
	uint8_t want;              /* events the core waits for (upstream_io_set) */
	uint8_t rfresh, wfresh;    /* something new for the core to read, to flush */
	uint8_t submitted;
	uint8_t deferred;          /* the data source waits for body */
	uint8_t out_eos;           /* the core queued the end of the request body */
	uint8_t head_done;         /* the final response head came */
	uint8_t head_given;        /* and went into u.in */
	uint8_t eos_in;            /* the server's END_STREAM came */
	uint8_t closed;            /* nghttp2 closed the stream */
	uint8_t refused;           /* unprocessed by the server: may go again */
	uint8_t discarding;
	uint8_t head_eos;          /* the final head came with END_STREAM */
	uint32_t code;             /* the close's error code */
	int status;
	size_t taken;              /* body bytes framed out of the core's queue, not yet reported */
	uint32_t unreported;       /* DATA bytes come since the core's last recv */
	struct buf *rh;            /* the response head's fields (head.c's records),
	                            * the msg's spans while the stream lives */
	struct buf *body;          /* DATA payload not yet handed up */
	struct buf *tr;            /* the response's trailing HEADERS, recorded
	                            * (worker/h1/h1.h, trailers) */
	uint8_t tr_n;              /* fields in <tr> */
	uint8_t tr_ended;          /* the trailing HEADERS has ended */
};

/* Worker start: the stream class and nghttp2's callbacks. */
void h2_client_init(const struct config *cfg);

/* A virtual upconn for a request to server <si> of <t>, on a session
 * with room (or a new one, connecting under <connect_ms>). NULL with *rc
 * as upstream_connect() sets it. */
struct upconn *h2_client_open(const struct route_table *t, uint32_t si, uint32_t connect_ms, int *rc);

/* upstream_io_set() of a virtual upconn: the events the core waits for. */
void h2_client_io_set(struct upconn *u, int events);

/* upstream_release() and upstream_close() of a virtual upconn: the
 * stream ends (RST_STREAM CANCEL unless it had ended). */
void h2_client_stream_end(struct upconn *u);

/* The server's pool closes (it left the table, shutdown): idle sessions
 * close, busy ones take no new stream and close after their last. */
void h2_client_close_server(struct up_server *srv);

/* h2_client.c, for the streams */
void h2c_session_kick(struct h2c_session *s);
void h2c_session_flush(struct h2c_session *s);
void h2c_session_stream_gone(struct h2c_session *s);
void h2c_stream_wake(struct h2c_stream *st, int ev);
void h2c_gauges(int dsessions, int dstreams);
void h2c_count_rst(int sent, uint32_t code);
void *h2c_alloc(void);        /* sessions and streams share a slab class */
void h2c_release(void *p);
/* h2_client_stream.c, for the session */
extern const struct codec_ops h2_client_codec;
void h2c_stream_init(void);
struct h2c_stream *h2c_stream_new(struct h2c_session *s);
int h2c_stream_header(struct h2c_stream *st, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                      const uint8_t *value, size_t vlen);
void h2c_stream_head_end(struct h2c_stream *st, int eos);
void h2c_stream_data(struct h2c_stream *st, const uint8_t *p, size_t len);
void h2c_stream_closed(struct h2c_stream *st, uint32_t code);
ssize_t h2c_stream_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                             nghttp2_data_source *src, void *ud);

#endif
