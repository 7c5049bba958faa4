/*
 * h2.h: HTTP/2 towards clients (the door of worker/h2/), on libnghttp2.
 *
 * Principle: a connection that speaks HTTP/2 (ALPN "h2" on a TLS
 * listener, or the 24-byte preface on a plain one with h2c on) becomes a
 * session (h2_session.c): nghttp2 frames, flow control and HPACK, weir's
 * defences on top. Each stream gets a struct conn of its own, with no
 * socket, and a stream-core transaction on it exactly as an HTTP/1
 * request has (routing, limits, auth, logs, counters): the stream's conn
 * is the codec's end (h2_stream.c). The request reaches the core as its
 * message, filled from the HEADERS through the HTTP/1 reader's field
 * entry, so both codecs are held to one set of rules (Host from
 * :authority, cookie crumbs joined, chunked framing when no
 * content-length). The response goes through the codec ops as a
 * message: the proxied one's struct msg (response_head), weir's own
 * struct answer (answer, interim), each made into HEADERS (names lower
 * case, no connection-specific field) and DATA frames; only a WebSocket
 * tunnel's bytes are written to the stream's conn. So the core keeps one
 * request path, and no HTTP/1 text crosses between it and the codec.
 *
 * Flow control and back-pressure: a stream's window is one buffer; the
 * request body is handed up in place through the codec ops (body_next),
 * and consumed (nghttp2_session_consume, the WINDOW_UPDATE) only once the
 * core wrote it upstream (consumed); what is thrown away is consumed too. Towards the client a stream holds at most one buffer of
 * response body: when the client's window keeps it full, the core's
 * write is refused and the upstream is not read. Frames leave in one
 * gathered write per loop pass per connection (an ev_prepare).
 *
 * Defences (http2 = { ... } in the configuration): max_concurrent_streams
 * (a stream counts until its transaction is torn down), streams start
 * only after the whole read batch is processed (a HEADERS reset in the
 * same read never reaches an upstream), max_resets a second then GOAWAY
 * ENHANCE_YOUR_CALM, max_continuations, the header list bounded by
 * limits.header_size and limits.headers (431), HPACK table
 * header_table_size, control_frames a second, the SETTINGS ACK, header
 * and idle timeouts, a graceful GOAWAY on drain.
 */
#ifndef WEIR_WORKER_H2_H
#define WEIR_WORKER_H2_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <ev.h>

#include "common/config.h"

struct conn;
struct buf;
struct msg;

/* Worker start: the slab classes of sessions and streams. */
void h2_init(const struct config *cfg);

/* What libnghttp2's heap (h2_session.c) holds: bytes handed out, and
 * bytes in blocks, in use or kept for reuse. */
void h2_memory(size_t *in_use, size_t *held);

/* Whether <p>[0..len) opens with the client preface: 1 it does (whole),
 * 0 it may (a prefix of it), -1 it does not (HTTP/1). */
int h2_preface_check(const char *p, size_t len);

/* Turns <c> into an HTTP/2 session; what c->in holds is its first bytes
 * (the preface, when prior knowledge). Closes <c> when out of memory. */
void h2_session_start(struct conn *c);

/* The session's watcher and timer (conn.c's callbacks, CONN_H2). */
void h2_session_io(struct conn *c, int revents);
void h2_session_timeout(struct conn *c);

/* Drain: a graceful GOAWAY; the connection closes once its streams end. */
void h2_session_drain(struct conn *c);

/* conn_close() of a session's connection: every stream goes with it. */
void h2_session_free(struct conn *c);

/* The transport of a stream's conn (c->h2s), in place of the socket:
 * conn_recv(), conn_sendv(), conn_io_set(), and the end of the conn
 * (conn_close(), conn_linger(), conn_txn_done() all end the stream). */
ssize_t h2_stream_recv(struct conn *c, void *p, size_t n);
/* CONN_STREAM's event (conn.c): the stream's head is complete and its
 * read batch processed; its transaction starts, its request the core's
 * message built from the header fields (no HTTP/1 text between), or is
 * answered as an HTTP/1 head the reader refuses would be. */
void h2_stream_begin(struct conn *c);
ssize_t h2_stream_sendv(struct conn *c, const struct iovec *iov, int cnt);
void h2_stream_io_set(struct conn *c, int events);
void h2_stream_close(struct conn *c);

/* RFC 8441 (h2_ws.c), for worker/core/tunnel.c: the upstream's 101 to
 * the WebSocket upgrade of stream conn <c>, 0 when its
 * Sec-WebSocket-Accept answers the key weir made, else
 * WEIR_EH2_WS_BAD_ACCEPT (counted, logged); 0 for any other stream. */
int h2_ws_accept_check(const struct conn *c, const struct msg *resp);
/* An upstream's final answer <status> to the stream of <c>: WEIR_EH2_WS_NO_SWITCH
 * (502) for a 2xx to an HTTP/2 WebSocket, which its client would read as
 * the tunnel open (RFC 8441), else 0. */
int h2_ws_no_switch(const struct conn *c, int status);

/* The tunnel's upstream ended: END_STREAM once what is buffered is sent
 * (the write side's shutdown, for a stream's conn). */
void h2_stream_shutdown(struct conn *c);

/* A draining worker's bounds for session <c> (worker.c): past
 * timeouts.drain (<tunnels> 0) its streams but WebSocket tunnels are cut,
 * and 1 is returned while tunnels are left (0: none, close it as any);
 * past timeouts.tunnel_drain (<tunnels> 1) its tunnels are cut too and
 * the connection closed (returns 0). */
int h2_session_drain_cut(struct conn *c, int tunnels);

/* Gathers what nghttp2 session <ng> has to send into <out>, up to <cap>
 * bytes of it; *<pend> is what mem_send gave and did not
 * fit yet; *<in_ng> is set while inside nghttp2. Both directions'
 * sessions write so (h2_session.c, worker/up/h2_client.c). */
struct nghttp2_session;
/* nghttp2's memory for every session of the worker, both directions:
 * the nghttp2_mem of the worker's own heap (h2_memory() counts it). */
void *h2_nghttp2_mem(void);
/* Arms a session's gathered write <flush> (an ev_prepare) for this loop
 * pass, and one idle watcher for all sessions, so a kick from inside a
 * callback after the pass's prepare watchers ran is written in the next
 * pass, not after the next event. Both directions' sessions kick so. */
void h2_kick(ev_prepare *flush);
void h2_gather(struct nghttp2_session *ng, struct buf *out, uint32_t cap, const uint8_t **pend, size_t *pend_len,
               uint8_t *in_ng);

/* conn.c: a stream's conn made ready, its callbacks the connection's,
 * its peer and transport facts copied from <parent>. */
void conn_init_stream(struct conn *sc, const struct conn *parent);

#endif
