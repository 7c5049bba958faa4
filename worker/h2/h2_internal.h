/*
 * h2_internal.h: what h2_session.c and h2_stream.c share (worker/h2/ only).
 */
#ifndef WEIR_WORKER_H2_INTERNAL_H
#define WEIR_WORKER_H2_INTERNAL_H

#include <stdint.h>
#include <ev.h>
#include <nghttp2/nghttp2.h>

#include "worker/h1/h1.h"
#include "worker/h2/h2.h"
#include "worker/net/net.h"

struct h2_stream;

/* A stream's receive window: the default (the client may use it before
 * it has seen our SETTINGS), and what a stream's body buffer holds. */
#define H2_WINDOW 65535u

/* The gathered write to a client: room for four DATA frames of the
 * default maximum size with their headers, and the HEADERS beside them,
 * so that a 64 KiB answer leaves in one or two writes rather than five
 * (one per buffers.size of 16 KiB). Held only while frames wait: an idle
 * session has none (h2_session_flush). h2_out_size is this, or
 * buffers.size if larger. */
#define H2_OUT_MIN (4u * (16384u + 9u) + 4096u)
extern uint32_t h2_out_size;

/* Ranges of stream ids a client skipped that a session remembers: clients
 * number their streams one after another, so a gap is rare and more than
 * a few are a client's own doing (older gaps are forgotten, and a HEADERS
 * in one is then ignored, as libnghttp2 does). */
#define H2_GAPS 4

struct h2_session {
	struct conn *c;
	nghttp2_session *ng;
	ev_prepare flush;          /* the gathered write, once per loop pass */
	struct buf *out;           /* frames not yet written to the socket */
	const uint8_t *pend;       /* what nghttp2_session_mem_send gave, not yet in <out> */
	size_t pend_len;
	struct h2_stream *streams; /* every stream with a conn */
	uint32_t nstreams;
	uint32_t streams_seen;     /* streams this connection opened, for weir_h2_streams_per_connection */
	int32_t max_id;            /* the highest stream the client's HEADERS named */
	uint8_t ngaps;             /* of <gap>, the last H2_GAPS ranges of odd */
	int32_t gap[H2_GAPS][2];   /* ids it skipped: never to be opened (h2_on_begin_frame) */
	uint64_t rx_bytes;         /* bytes the client sent, and of them payload (DATA, header */
	uint64_t rx_payload;       /* field names and values): http2.overhead_ratio */
	struct h2_stream *start;   /* complete heads of this read batch */
	struct h2_stream *framed;  /* direct streams whose queue nghttp2 framed
	                            * from this pass: the core is told after it */
	struct h2_stream *pumping; /* the stream of that list the core is moving on */
	ev_tstamp win_start;       /* the 1 s window of the rates below */
	uint32_t win_resets;       /* client resets of unanswered streams */
	uint32_t win_control;      /* frames that did no work */
	ev_tstamp settings_by;     /* our SETTINGS unacknowledged: the deadline; 0 none */
	uint32_t continuations;    /* CONTINUATION frames of the header block under way */
	uint8_t in_headers;        /* a header block is under way */
	uint8_t goaway;            /* GOAWAY submitted (drain or a defence) */
	uint8_t dead;              /* being freed: callbacks do nothing */
	uint8_t in_ng;             /* inside nghttp2 (mem_recv or mem_send) */
	uint8_t refused;           /* a defence sent its GOAWAY */
	uint8_t fatal;             /* a connection error: write what is queued, then close */
};

/* The response: no HEADERS yet, its body under way, all of it submitted. */
enum { H2_RESP_HEAD, H2_RESP_BODY, H2_RESP_DONE };

struct h2_stream {
	struct conn sc;            /* the conn the core sees */
	struct h2_session *s;
	struct h2_stream *next, *prev, *start_next;
	int32_t id;
	uint8_t want;              /* events the core waits for (conn_io_set) */
	uint8_t head_done;         /* the request head is complete */
	uint8_t in_eos;            /* the client's END_STREAM came */
	uint8_t in_chunked;        /* no content-length, not END_STREAM: the
	                            * request is framed chunked for the core */
	uint8_t too_large;         /* the header list passed the limits */
	uint8_t is_head;           /* a HEAD request: no response body */
	uint8_t started;           /* handed to the core */
	uint8_t core_done;         /* the core ended with the conn */
	uint8_t ng_closed;         /* nghttp2 closed the stream */
	uint8_t submitted;         /* the response HEADERS were submitted */
	uint8_t deferred;          /* the data source waits for more */
	uint8_t resp_state;        /* H2_RESP_* */
	uint8_t resp_eof;          /* the whole response body is in <dout> */
	uint8_t rst_recv;          /* the client reset it */
	uint8_t in_start_list;
	uint8_t discarding;        /* the body is no longer wanted: DATA is dropped */
	uint8_t direct;            /* the response HEADERS came from the core's
	                            * message, its DATA from the queue of the
	                            * core's side (h2_response_head): no HTTP/1
	                            * text between */
	uint32_t taken;            /* bytes of that queue framed since the
	                            * core's last flush */
	struct h2_stream *framed_next;
	uint8_t in_framed;         /* on the session's <framed> list */
	uint32_t hbytes, hcount;   /* the header list so far */
	uint32_t unreported;       /* DATA bytes come since the core last asked (recv) */
	/* The header records: where the request's names and values lie for
	 * the transaction's life, as HTTP/1's lie in its input buffer. */
	struct buf *hb;
	uint32_t method_at, path_at; /* offsets in <hb> of :method, :path */
	uint32_t host_at;          /* of :authority (or host), + 1; 0: none */
	uint16_t cookies;          /* cookie crumbs, joined into one field */
	struct buf *ck;            /* the joined value, when <hb> had no room */
	struct buf *body;          /* DATA payload not yet read by the core */
	struct buf *dout;          /* payload not yet framed: weir's own
	                            * answer's body, a tunnel's bytes */
	struct buf *qtr;           /* the client's trailer fields, recorded (h2_trailers.h) */
	struct buf *rtr;           /* the response's, names lowered */
	uint8_t qtr_n;             /* fields in <qtr> */
	char status[12];
	/* RFC 8441 (h2_ws.c): an extended CONNECT made a WebSocket upgrade */
	uint8_t ws;                /* H2_WS_* */
	uint32_t ws_handed;        /* tunnel bytes given to the core, not yet consumed */
	char ws_accept[32];        /* the Sec-WebSocket-Accept the key weir made wants */
	char ws_key[32];           /* that key, a field of the request */
};

/* A record of the header block (h2_stream.c): its kind, name and value. */
struct hrec {
	int kind;
	const char *name, *value;
	size_t nlen, vlen;
};
size_t h2_rec(const struct buf *hb, size_t off, struct hrec *r);
void h2_stream_more(struct h2_stream *st);
/* The send_data callback's half of a DATA frame of a direct response
 * (h2_stream.c): <n> payload bytes of the core's queue for their room at
 * <dst>, each span through h2_out_place. */
void h2_stream_take(struct h2_stream *st, char *dst, size_t n);
/* <n> payload bytes at <src> for their room at <dst> in <s>'s gathered
 * write: copied there, or, on a plain connection, left where they are
 * and sent from there (h2_session.c). */
void h2_out_place(struct h2_session *s, char *dst, const char *src, size_t n);
/* After a pass of the session's gathered write: each stream on its
 * <framed> list moves on in the core, before the next read can end it. */
void h2_stream_pump_framed(struct h2_session *s);
/* Response payload of <st> waits to be framed (for a window). */
int h2_stream_has_data(const struct h2_stream *st);

/* h2_stream.c, called by the session */
struct h2_stream *h2_stream_new(struct h2_session *s, int32_t id);
int h2_stream_header(struct h2_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen);
/* the header block ended: 0 to start the stream (its fields checked
 * for HTTP/2's rules), or -1 when it was answered or reset here */
int h2_stream_head_end(struct h2_stream *st, int eos);
int h2_stream_data(struct h2_stream *st, const uint8_t *p, size_t len);
void h2_stream_eos(struct h2_stream *st);
void h2_stream_start(struct h2_stream *st);
void h2_stream_ng_closed(struct h2_stream *st, uint32_t code);
void h2_stream_free(struct h2_stream *st);
void h2_stream_wake(struct h2_stream *st, int ev);
/* h2_ws.c: WebSocket over HTTP/2 (RFC 8441 extended CONNECT) as an
 * HTTP/1.1 Upgrade for the core, which checks the switch and relays the
 * tunnel (worker/core/tunnel.c) through the stream's conn as ever. */
enum { H2_WS_NONE, H2_WS_ASKED, H2_WS_OPEN };
/* Whether the pseudo-header <r> is :protocol (nghttp2 lets it through
 * only while our SETTINGS enable it). */
int h2_ws_is_protocol(const struct hrec *r);
/* A CONNECT's head in <st->hb>: 0 for an extended CONNECT for a
 * WebSocket (st->ws set: the request is a GET), else the error to answer
 * with (counted). */
int h2_ws_connect(struct h2_stream *st);
/* Whether the client's field <r> stays out of the upgrade request. */
int h2_ws_skip_field(const struct h2_stream *st, const struct hrec *r);
/* The upgrade's fields, with a key of weir's, added to request <r>:
 * 0, or the field entry's error. */
int h2_ws_head_fields(struct h2_stream *st, struct http_request *r);
/* Whether a field of the (checked) 101 stays out of the 200. */
int h2_ws_skip_resp(const struct h2_stream *st, const struct hdr *h);
/* The 200 is submitted: the response body is the tunnel from here. */
void h2_ws_open(struct h2_stream *st);
/* The codec's recv once the tunnel is open: the client's DATA into the
 * conn's input for the tunnel. */
int h2_ws_recv(struct side *s);
/* nghttp2 closed the stream with <code>: 1 if it is a tunnel both sides
 * ended cleanly, which then ends as the tunnel passes the client's last
 * bytes and its END_STREAM upstream (woken here), not at once. */
int h2_ws_closed_clean(struct h2_stream *st, uint32_t code);
/* The stream goes: 1 if it ended the tunnel of its transaction. */
int h2_ws_close(struct h2_stream *st);
void h2_ws_free(struct h2_stream *st);

/* h2_session.c, for the streams */
void h2_session_kick(struct h2_session *s);
void h2_count_rst(int sent, uint32_t code);
void h2_gauges(int dstreams);
void h2_stream_init_classes(void);
void *h2_alloc(void);
void h2_release(void *p);

#endif
