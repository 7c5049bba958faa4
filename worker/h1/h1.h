/*
 * h1.h: HTTP/1 (the door of worker/h1/): the codec interface every codec
 * implements (codec.h below), the strict parser of heads and chunked
 * bodies (http_*.c), the head writer (head.c), the server codec on client
 * connections (conn.c: idle, heads, answers weir makes itself, lingering
 * close) and both HTTP/1 codecs' ops tables (codec_h1.c). The stream
 * core above sees struct msg and these ops, never HTTP/1 text.
 */
#ifndef WEIR_WORKER_H1_H
#define WEIR_WORKER_H1_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <ev.h>
#include <http_parser.h>
#include <openssl/base.h>

#include "common/config.h"
#include "worker/base/base.h"
#include "worker/msg/msg.h"
#include "worker/net/net.h"
#include "worker/up/up.h"

/* ==== codec ==== */
/*
 * codec: what a codec does for the stream core, one table per protocol
 * and side.
 *
 * Principle: the core moves a stream's bytes through two sides, towards
 * the client (a server codec) and towards the upstream (a client codec),
 * and never frames or unframes them itself, nor sees a head as text: it
 * has a codec make a head from a struct msg (request_head, response_head;
 * HTTP/1 writes text with head.c) and read one into a struct msg
 * (head_next), hands it spans of body with an end-of-stream flag, and
 * asks it to flush what it queued or to read more; on input it takes
 * payload spans from body_next() and says when they were written
 * (consumed()). HTTP/1 keeps its fast path: with one stream on a
 * connection, a body span is handed up as it lies in the input buffer
 * and queued the same way (an iovec into it, no copy) between the framing
 * the codec adds (a chunk-size line, a CRLF), and the source buffer is
 * consumed only once the span is written. HTTP/2's tables (worker/h2/
 * towards clients, worker/up/h2_client_stream.c towards upstreams) sit
 * beside these; a connection owns one codec (c->codec, u->codec) and zero
 * or more streams.
 */

struct buf;
struct conn;
struct upconn;
struct txn;

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
struct head_req;
struct head_resp;
struct http_response;

/* What a client codec reads a response head under (head_next()): the
 * stream's parse state (HTTP/1's reader), the arena its header list goes
 * into (reset by the codec as a head begins), the route's limits, and
 * whether the request was a HEAD (no body, whatever the head says). */
struct head_in {
	struct http_response *parser;
	struct arena *arena;
	uint32_t max_headers;  /* limits.headers */
	uint32_t max_head;     /* limits.response_header_size */
	uint8_t method;        /* enum http_method of the request */
};

/* Strict chunked body decoder state (RFC 9112 7.1): http_chunked_feed()
 * below, driven by the HTTP/1 codecs only. */
struct http_chunked {
	int state;
	uint64_t remaining;  /* data bytes left in the current chunk */
	uint32_t digits;     /* hex digits seen in the current size line */
	uint32_t line_bytes; /* bytes of the current extension or trailer line */
	uint32_t trailer_bytes; /* total trailer section bytes */
	int done;            /* the last chunk and trailers were read */
};

/* A piece of message body a codec hands the core: payload only, whatever
 * the wire framing; <eos>: the body ends with it (len may then be 0). */
struct body_span {
	const char *data;
	size_t len;
	uint8_t eos;
	uint8_t more; /* more was ready than the side's budget let through */
	uint32_t ntrailers;    /* with <eos>: the fields of the trailer section
	                        * at <trailers> (0: none), the refused ones out
	                        * (the trailers section below); the core may point them
	                        * at a copy of their bytes (a body buffered whole) */
	struct hdr *trailers;
};

/* What a side's codec keeps of the body coming from its peer (the
 * request's on the client side, the response's on the upstream side).
 * Private to the codec but for <total> and <moved>, which the core reads. */
struct side_in {
	uint64_t total;          /* payload bytes handed up so far */
	uint64_t left;           /* HTTP/1 length framing: bytes still to come */
	struct http_chunked chunks; /* HTTP/1 chunked framing */
	struct body_span span;   /* the span handed up and not yet consumed */
	struct buf *tr;          /* room for the trailer fields its end hands up
	                          * (side_trailers(): got with the first, freed
	                          * with the stream) */
	uint32_t used;           /* bytes of the input buffer it stands for */
	uint32_t budget;         /* a span is at most this (the stream's pipe
	                          * budget: payload handed up, not yet consumed) */
	uint8_t framing;         /* enum http_body_kind of the message */
	uint8_t holding;         /* <span> is handed up, not yet consumed */
	uint8_t eos;             /* the end was handed up */
	uint8_t eof;             /* the peer closed its side */
	uint8_t moved;           /* bytes of this body moved in the input buffer
	                          * (chunk data gathered, a compaction): a replay
	                          * cannot read them again where they were */
};

/* One side of a stream, as its codec sees it. */
struct side {
	struct outq q;           /* towards this side's peer */
	struct buf *head;        /* the head written for the peer */
	uint8_t chunked;         /* the body goes chunk-encoded to the peer */
	uint32_t ntrailers;      /* the trailer fields the end carries (the other
	                          * side's span's, set by the core with its end;
	                          * 0: none) */
	const struct hdr *trailers;
	struct buf *trl;         /* HTTP/1: those fields as the text after the
	                          * last chunk (freed with the stream) */
	uint8_t owes;            /* q holds a span of the other side's input:
	                          * the core consumes it there once q is written */
	size_t owed;             /* its payload bytes */
	uint8_t dry;             /* the core: consumed() said no input is ready;
	                          * body_next() is not asked until a recv() */
	struct side_in in;       /* the body from this side's peer */
	const struct codec_ops *ops;
	struct conn *c;          /* the client side's connection */
	struct upconn *u;        /* the upstream side's, once attached */
};

/* body_next(): the body cannot come as one span in place (whole asked):
 * take it span by span. */
#define CODEC_SPLIT 2

struct codec_ops {
	const char *name;
	/* Server codecs: the response head <m> for the client, with what
	 * weir adds (<hr>: its request id, the upgrade, a recoded body; out:
	 * whether the connection closes after it, whether the body goes
	 * chunked). HTTP/1 writes it as text into s->head, which queue_head()
	 * then queues; HTTP/2 submits HEADERS from <m> itself, with no text
	 * between. 0, or an error (nothing was sent). */
	int (*response_head)(struct side *s, const struct msg *m, struct head_resp *hr);
	/* Client codecs: the request head for the upstream, from <m> and
	 * what weir adds (<hr>: Host, X-Forwarded-*, Via, its request id,
	 * auth's fields, the target forwarded...), kept in s->head for the
	 * whole stream: a replay queues it again, and head_field() reads it
	 * back once <m>'s spans are gone. HTTP/1 writes it as text (head.c);
	 * HTTP/2 keeps the fields of its HEADERS, names lower case, written
	 * as its stream is submitted. 0, or an error. */
	int (*request_head)(struct side *s, const struct msg *m, struct head_req *hr);
	/* Client codecs: the fields of the head in s->head one by one, from
	 * *<pos> (0: the first): 1 with the next name and value, 0 past the
	 * last. The authority comes as "host", as HTTP/1 writes it. */
	int (*head_field)(const struct side *s, size_t *pos, const char **name, size_t *nlen, const char **value,
	                  size_t *vlen);
	/* Client codecs: the next response head from the peer into <m>, read
	 * under <hi>'s limits (HTTP/1: parsed from the input, incrementally;
	 * HTTP/2: from the HEADERS fields, which the codec keeps for as long
	 * as the response). 0 when complete: it is consumed from the input
	 * (an interim one is skipped by asking again), its spans valid until
	 * the stream ends; WEIR_EAGAIN until it has come (a recv() first);
	 * or WEIR_EUPSTREAM_BAD_RESPONSE. */
	int (*head_next)(struct side *s, struct msg *m, const struct head_in *hi);
	/* Server codecs: an answer weir made itself, <a> (msg.h), for the
	 * client of <c>, which may carry no stream yet. HTTP/1 writes it as
	 * text into *<text>, a buffer taken to fit, which the caller sends as
	 * any head (conn.c writes it; the core queues it in t->down.head);
	 * HTTP/2 submits HEADERS from it and its body as DATA itself (*<text>
	 * NULL), a body-less one (a gRPC trailers-only answer) as one HEADERS
	 * that ends the stream. 0, or an error (nothing was sent). */
	int (*answer)(struct conn *c, const struct answer *a, struct buf **text);
	/* Server codecs, optional: the canned answer to failure <rc> (status
	 * <status>, closing after it with <close>) in a text the codec keeps
	 * formatted, set as c->answer and c->answer_len for conn.c to write
	 * (or c->answer_buf, when the request id made a copy): HTTP/1's fast
	 * path for a flood of errors, and its answer when answer() finds no
	 * memory. NULL: every answer goes through answer(). */
	void (*canned)(struct conn *c, int rc, int status, int close);
	/* Server codecs: the interim answer <status> (a 100 Continue) to the
	 * client of <c>, at once (HTTP/2: a HEADERS of its own). 0, or -1
	 * when the connection is gone. */
	int (*interim)(struct conn *c, int status);
	/* Queues s->head, first in an empty queue. */
	void (*queue_head)(struct side *s);
	/* Queues [data, data+len) of body, framed for the peer; <eos>: the
	 * body ends with it. The bytes must stay where they are until q is
	 * written (q.count 0). */
	void (*send_body)(struct side *s, const char *data, size_t len, int eos);
	/* Input framing. body_start(): the body of message <m> (its framing)
	 * comes from the peer next, or again from its first byte (a replay:
	 * the caller puts the input back first). body_next(): the next span of
	 * it into *<sp>: 1, 0 when more input is needed (recv), or
	 * WEIR_ESMUGGLING for framing the codec refuses. A span stays handed
	 * up (body_next() hands the same one again) until consumed(), and the
	 * payload handed up and not consumed is at most <budget> bytes (the
	 * pipe's: HTTP/2 would keep its stream window so); with <whole> the
	 * rest of the body is handed only as one span in place (0 until all
	 * of it has come), or CODEC_SPLIT when it cannot be: a buffered body
	 * is bounded by limits.body_buffer, not by the budget. */
	void (*body_start)(struct side *s, const struct msg *m, uint32_t budget);
	int (*body_next)(struct side *s, struct body_span *sp, int whole);
	/* The core has written <n> payload bytes of the span handed up to
	 * the other side: the input it stands for may go (HTTP/1: consumed
	 * from the input buffer once the whole span is; HTTP/2: flow-control
	 * credit). Returns 1 when more input is ready for body_next(), 0 when
	 * the next span needs a recv() first (the core then does not ask). */
	int (*consumed)(struct side *s, size_t n);
	/* The rest of the body from the peer is not wanted: what is read of
	 * it is dropped and no more is handed up (HTTP/1: the input buffer's
	 * bytes, the core reads and drops what still comes; HTTP/2 would
	 * reset the stream with NO_ERROR). */
	void (*discard)(struct side *s);
	/* Binds stream <t> to a connection: a server codec's side to client
	 * connection <c> (HTTP/1: as its request is read), a client codec's
	 * to upstream connection <u>, new or from the pool. */
	void (*attach)(struct side *s, struct conn *c, struct upconn *u, struct txn *t);
	/* Aborts the stream on this side, which ends with error <rc> (0: not
	 * an error, cancelled). HTTP/1 has no other way than closing the
	 * connection: on the server side that frees the stream (txn_abort,
	 * counting <rc>), so <s> is gone after; HTTP/2 would send RST_STREAM
	 * and keep the connection. */
	void (*reset)(struct side *s, int rc);
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
/* For a codec that frames the queue itself (HTTP/2): outq_bytes(), the
 * bytes <q> holds; outq_at(), where the bytes past the first <skip>
 * lie (*p) and how many of them lie there together (0 past the end), the
 * queue unchanged; outq_advance(), <n> of them gone as a write would take
 * them (the queue empty: its span's input consumed). */
size_t outq_bytes(const struct outq *q);
size_t outq_at(const struct outq *q, size_t skip, const char **p);
void outq_advance(struct outq *q, size_t n);

/* ==== http ==== */
/*
 * http: strict HTTP/1.1 message heads and bodies.
 *
 * Principle: weir never forwards bytes it has not understood. Heads are
 * read by weir's own strict reader (http_common.c): Debian's http-parser
 * is built non-strict (a space before the colon, obs-fold, bare LF, loose
 * chunk framing, two-digit status codes all pass), so every byte it took
 * had to be checked again, at twice the cost; its method table stays.
 * Bodies are framed here too: Content-Length is counted by the caller,
 * chunked bodies go through the strict decoder below. What comes out is a struct msg (worker/msg/msg.h):
 * validated spans into the caller's buffer, the headers in a list in the
 * stream's arena, the framing taken out of the list into its fields.
 *
 * Parsing is incremental: call the parse function again with the same
 * buffer grown by the new bytes; it only looks at what it has not seen.
 * The buffer must not move between calls for one head.
 */

/* Maximum headers any head may have; config limits.headers is at most this. */
#define HTTP_MAX_HEADERS 1000

/* Parsing state shared by requests and responses; private to http*.c. */
struct http_head_state {
	size_t fed;          /* bytes of the buffer already scanned */
	const char *start;   /* the buffer the head is in */
	int done;            /* headers complete */
	int error;           /* the first error found, a WEIR_E* code (sticky) */
	uint32_t max_headers;
	size_t max_head;     /* head size limit */
	size_t max_uri;      /* request target limit (requests only) */

	/* Private to worker/http*.c: the scanner and the line checks. */
	struct msg *m;            /* the message parsed into */
	struct arena *arena;      /* where its header list goes */
	struct hdr *hdrs;         /* the list being parsed, max_headers long */
	uint32_t nhdrs;           /* field lines completed */
	uint64_t max_body;        /* requests: Content-Length limit, 0 = none */
	size_t line_start;        /* offset of the line being scanned */
	size_t pl_from;           /* the line under way is checked up to here */
	size_t line0, line0_end;  /* the start line, CRLF excluded */
	size_t head_end;          /* offset past the final CRLF, 0 until seen */
	const char *tok;          /* the request target */
	size_t tok_len;
	uint32_t nlines;          /* non-empty lines completed */
	uint32_t pl_len;          /* the line under way: bytes of its part */
	uint8_t pl_stage;         /* ... and which part: method, target,
	                           * version; or name, value */
	uint8_t cr;               /* the last scanned byte was a CR */
	uint8_t leading_crlf;     /* empty lines before the start line allowed */
	uint8_t head_method;      /* responses: the request was HEAD */
	uint8_t is_request;
	uint8_t fields;           /* the head came as fields (HTTP/2):
	                           * http_request_begin_fields, or a response's
	                           * first http_response_field */
	uint8_t method_id;        /* requests: enum http_method */
	uint8_t version_minor;    /* requests: HTTP/1.<this> */
};

/* The HTTP/1 parse state of a head; the message goes into <m>. */
struct http_request {
	struct http_head_state st;
	struct msg *m;
};

struct http_response {
	struct http_head_state st;
	struct msg *m;
};

/*
 * Prepares <r> for a new request head parsed into <m>, its header list at
 * the bottom of <a> (reset first: a head is the first list of its arena).
 * Limits taken: header_size, headers (and the arena's room), uri_size,
 * body_size (a Content-Length past it gives WEIR_EBODY_TOO_LARGE).
 */
void http_request_init(struct http_request *r, struct msg *m, struct arena *a,
                       const struct config_limits *lim);

/*
 * Parses the head at <buf>, of which <len> bytes have arrived so far.
 * Returns 0 when the head is complete (m->head_len tells where the body
 * starts), WEIR_EAGAIN when more bytes are needed, or an error:
 * WEIR_EBAD_REQUEST (malformed), WEIR_ESMUGGLING (framing that two parsers
 * could read differently: CL with TE, duplicate or bad CL, TE other than
 * one final "chunked", TE in HTTP/1.0), WEIR_EURI_TOO_LONG,
 * WEIR_EHEADERS_TOO_LARGE (head longer than header_size or too many
 * headers, also while incomplete), WEIR_EBODY_TOO_LARGE.
 */
int http_request_parse(struct http_request *r, const char *buf, size_t len);

/*
 * A request head that comes as fields, not text (HTTP/2, worker/h2/):
 * the same checks as http_request_parse() and the same struct msg, on a
 * parser http_request_init() prepared, so both codecs share one set of
 * rules. http_request_begin_fields() takes the method (a known one) and
 * the target (origin-form, or "*" with OPTIONS; VCHAR, uri_size);
 * http_request_add_field() each field, in order, the Host among them
 * (HTTP/2's :authority); http_request_end_fields() applies what needs
 * the whole list (http_head_finish(): tokens, flags, Connection; Host;
 * the framing, with no Transfer-Encoding at all, a Content-Length parsed
 * strictly) and sets the message's flags. <open_body>: a body may follow
 * with no length said, ending with the stream; it is framed as chunked
 * for the core (the upstream side writes its framing). The message is
 * HTTP/1.1 to the core and the connection kept. Names and values must
 * stay where they are for the message's life; m->head_len is the head's
 * size as HTTP/1.1 text (as far as it went, after an error). Each returns
 * 0 or http_request_parse()'s error.
 */
int http_request_begin_fields(struct http_request *r, const char *method, size_t mlen, const char *target,
                              size_t tlen);
int http_request_add_field(struct http_request *r, const char *name, size_t nlen, const char *value, size_t vlen);
int http_request_end_fields(struct http_request *r, int open_body);

/*
 * Prepares <r> for a response head to a request whose method was
 * <method_id> (HEAD responses have no body), parsed into <m>, its list
 * in <a> (reset first), at most <max_headers> of them; the head may be at
 * most <max_head> bytes.
 */
void http_response_init(struct http_response *r, struct msg *m, struct arena *a,
                        uint32_t max_headers, size_t max_head, enum http_method method_id);

/*
 * As http_request_parse(), for a response. Errors are all
 * WEIR_EUPSTREAM_BAD_RESPONSE (also for a head past max_head).
 * 1xx interim responses are returned like any other; the caller skips them,
 * except 101, which it turns into a tunnel or refuses (worker/core/core.h).
 */
int http_response_parse(struct http_response *r, const char *buf, size_t len);

/*
 * A response head that came as fields (HTTP/2), checked as a text head
 * is: after http_response_init(), http_response_field() takes each field
 * (pseudo-fields excluded) with the same byte checks and limits, and
 * http_response_fields_end() the status, then sets the flags (hop-by-hop
 * from Connection), the framing (Content-Length strict, one at most; no
 * length: HTTP_BODY_CLOSE, the stream's end ends the body) and returns 0
 * or WEIR_EUPSTREAM_BAD_RESPONSE, sticky from the first bad field.
 * Names and values must stay where they are for the response's life.
 */
int http_response_field(struct http_response *r, const char *name, size_t nlen, const char *value, size_t vlen);
int http_response_fields_end(struct http_response *r, int status);

/* Strict chunked body decoder (RFC 9112 7.1); struct http_chunked is
 * above, in the codec's input state. */
void http_chunked_init(struct http_chunked *c);

/*
 * Consumes framing from <p>[0..len) until it reaches chunk data, the end of
 * the body, or the end of the input. Sets *used to the bytes consumed and
 * (*data, *data_len) to the data span found (data_len 0 if none; the data is
 * part of the consumed bytes). Returns 0 (call again with the rest while
 * used < len and !c->done), or WEIR_ESMUGGLING on any framing error: a size
 * that is not 1*HEXDIG or overflows, bytes other than CRLF after data, bare
 * LF, invalid extensions, bad trailer fields, trailers over 16 KiB.
 * Trailers are checked; c->trailer_bytes counts the section's bytes fed
 * (the final CRLF included once c->done), all at the end of what was
 * consumed since the section began.
 */
int http_chunked_feed(struct http_chunked *c, const char *p, size_t len, size_t *used,
                      const char **data, size_t *data_len);

/* A trailer section begun and not finished: the decoder goes back to its
 * start, and the bytes of it already fed are returned (the caller takes
 * them as not used, to feed them again with the rest, so that the whole
 * section lies in one piece once c->done); 0 in any other state. */
uint32_t http_chunked_trailer_restart(struct http_chunked *c);

/* Gives back the last <n> bytes of the data span the last call returned
 * (the caller takes <n> fewer as used): the next call returns them again. */
void http_chunked_unread(struct http_chunked *c, size_t n);

/*
 * Normalises the request path <p>[0..len) (it starts with '/'; no query) in
 * place, as weir routes and forwards it (RFC 3986 6.2.2): percent-encoded
 * unreserved characters decoded, other percent-encodings kept with upper
 * case hex digits ("%2f" becomes "%2F", never '/'), runs of '/' merged
 * into one when <flags> has HTTP_PATH_MERGE_SLASHES, then dot segments
 * removed (5.2.4). Sets *out_len (<= len) and returns 0, or returns
 * WEIR_EBAD_PATH, <p> untouched, for a path that climbs above the root
 * ("/../x", "/a/%2e%2e/.."), a malformed percent-encoding ("%zz", a '%'
 * near the end), "%00", a backslash ('\\' or "%5C") or a dot segment
 * with parameters ("/..;x/"). A path with no '%', no '\\', no "/." (and,
 * merging, no "//") is not written.
 */
#define HTTP_PATH_MERGE_SLASHES 0x1u
int http_path_normalize(char *p, size_t len, unsigned flags, size_t *out_len);

/* The name of method <id> and its length ("GET", 3). */
const char *http_method_name(enum http_method id, uint32_t *len);

/* Case-insensitive comparison of a span with a lower-case literal. */
int http_span_ieq(const char *p, size_t len, const char *lower);

/*
 * 1 if header names <a> and <b>, both <len> bytes, are the same name to a
 * CGI, WSGI or PHP backend, which reads both X-Client-Subject and
 * x_client_subject as HTTP_X_CLIENT_SUBJECT: letters compared without case,
 * '-' and '_' equal.
 */
int http_name_same_var(const char *a, const char *b, size_t len);

/* ==== conn: the HTTP/1 server codec on a client connection ==== */
/*
 * Requests on one connection are handled one at a time, in order:
 * pipelined requests wait in the input buffer, so answers can only come
 * back in order. The connection itself (struct conn) is net.h's.
 */

/* Takes a new socket accepted on listener <l> (index in cfg->listeners). */
void conn_accept(int fd, const struct sockaddr *sa, int l);

/* Arms <c>'s watcher for <events> (EV_READ, EV_WRITE) plus whatever the
 * TLS layer waits for to finish a read or write it could not: every client
 * watcher change goes through here. */
void conn_io_set(struct conn *c, int events);

/* Sets the deadline of <c>, re-arming its timer if it moves earlier. */
void conn_set_deadline(struct conn *c, ev_tstamp at);

/* Sends the canned answer for error <rc> (its status from err.h) and, when
 * <close> is set or the status requires it, closes after it. Counts it. */
void conn_answer_error(struct conn *c, int rc, int close);

/* As conn_answer_error(), answering with <a> (NULL: the canned answer)
 * and logging nothing when <a> is given: its caller logs. <a> has its
 * status, fields (at most 14) and body; "Connection: close" and the
 * X-Request-Id are added here, and the client's codec sends it (its
 * answer op; HTTP/1 has texts of its own for the canned ones). */
void conn_answer_with(struct conn *c, int rc, int close, const struct answer *a);

/* The HTTP/1 server codec's canned op (codec_ops.canned). */
void conn_answer_canned(struct conn *c, int rc, int status, int close);

/* The request in flight has ended: with <keep> the connection waits for the
 * next request (which may already be buffered), otherwise it closes. */
void conn_txn_done(struct conn *c, int keep);

/* The connection is done with but the client may still be sending (a
 * request body weir did not read to its end): shut the write side after
 * what is queued, discard the input for a bounded time and byte count,
 * then close, so that no reset destroys the answer before it is read. */
void conn_linger(struct conn *c);

/* Bytes the client may send after its request ends unread before weir
 * stops reading it (during the answer and while lingering, each). */
#define CONN_LINGER_BYTES (1024 * 1024)

/* Closes the connection now, releasing everything it holds. */
void conn_close(struct conn *c);

/* The client's byte stream: every read and write on a client connection
 * goes through these two, so the TLS layer has one place to sit: on a TLS
 * connection they are SSL_read and SSL_write. They behave as read(2) and
 * sendmsg(2): -1 with errno (EAGAIN when it would block: then arm with
 * conn_io_set()). <more> says more bytes follow at once (MSG_MORE; plain
 * only). */
ssize_t conn_recv(struct conn *c, void *p, size_t n);
ssize_t conn_sendv(struct conn *c, const struct iovec *iov, int cnt, int more);

/* Reads from the client into c->in (taking a buffer if needed). Returns
 * bytes read (> 0), 0 at end of stream, WEIR_EAGAIN, or WEIR_ECLIENT_CLOSED
 * on a socket error. Counts bytes_in. */
int conn_read(struct conn *c);

/* Bytes of <c>'s input not consumed yet: pipelined requests, a body's
 * next part; 0 when it holds no buffer (one goes back while idle). */
static inline uint32_t conn_unread(const struct conn *c)
{
	return c->in ? buf_len(c->in) : 0;
}

/* Drain: close <c> now if it is idle. */
void conn_drain(struct conn *c);

/* ==== head: HTTP/1 heads written anew ==== */

/* head.c: learns the header names weir vouches for from every listener of
 * <cfg> (client_header), before the first request. */
void head_init(const struct config *cfg);

/* head.c: the HTTP/1 heads, written anew from the messages.
 *
 * head_write_request() writes the upstream head of request <r> into *<out>
 * (a buffer of its size), for the client connection and the options in
 * <hr>. Returns 0 or WEIR_EHEADERS_TOO_LARGE if it does not fit.
 *
 * head_write_response() writes the client head of response <r> to the
 * request hr->req into *<out>, and decides the framing towards the client
 * (hr->chunked) and whether the connection closes after it
 * (hr->client_close). Returns 0 or an error. */
struct head_req {
	const struct conn *c; /* the client: its address, TLS, certificate */
	const char *host;     /* the Host of a request without one (HTTP/1.0):
	                       * the upstream group's name */
	const char *upgrade;  /* the upgrade the route allows, or NULL */
	uint8_t upgrade_len;
	uint8_t early;        /* the request came in TLS early data */
	uint8_t drop_underscores; /* the route's underscores_in_headers is false */
	uint8_t request_id_len; /* X-Request-Id weir resolved (0: none); a
	                         * client's is then replaced */
	const char *request_id;
	const char *extra;    /* whole header lines to add (routes.auth's) */
	uint32_t extra_len;
	const char *xff;      /* the X-Forwarded-For to write, NULL: the
	                       * client's list with our peer appended */
	size_t xff_len;
	const char *target;   /* the target to forward (a route's rewrite), NULL: the request's */
	uint32_t target_len;
	uint8_t again;        /* a second head of one request (another
	                       * protocol's): the fields it drops were counted */
	uint32_t target_at;   /* out: where the target forwarded lies in the
	                       * head written (its length: target_len, or the
	                       * request's) */
};
struct head_resp {
	const struct msg *req;
	const char *request_id; /* X-Request-Id to write (replacing the upstream's), or NULL */
	uint8_t request_id_len;
	const char *upgrade;  /* the upgrade asked for, or NULL */
	uint8_t upgrade_len;
	uint8_t recoded;      /* the body is re-encoded (compressed): no
	                       * Content-Length, chunked or until the close */
	uint8_t client_close; /* out: close the client connection after it */
	uint8_t chunked;      /* out: the body goes chunk-encoded */
};
int head_write_request(const struct msg *r, struct head_req *hr, struct buf **out);

/* The same request head as fields, for a protocol that carries them
 * (HTTP/2's HEADERS): a flags byte (HEAD_FIELDS_BODY: a body follows the
 * head), then records of a name, lower case, and a value, the
 * pseudo-fields :method, :authority and :path first (the codec adds
 * :scheme), no field HTTP/2 forbids (RFC 9113 8.2.2: Connection and the
 * fields it names, an upgrade, TE but for "trailers", which gRPC needs).
 * Returns as head_write_request(). head_fields_add() appends a field to
 * such a head in <b> (empty: begun, no flags), at most <cap> bytes in
 * all: 0, or -1 when it would not fit. head_fields_rec() reads the record at
 * *<pos> (0: the first) and moves *<pos> past it: 1, or 0 at the end;
 * head_text_field() reads a text head's field lines so. */
#define HEAD_FIELDS_BODY 0x1
int head_write_fields(const struct msg *r, struct head_req *hr, struct buf **out);
int head_fields_add(struct buf *b, uint32_t cap, const char *name, size_t nlen, const char *value, size_t vlen);
int head_fields_rec(const struct buf *b, size_t *pos, const char **name, size_t *nlen, const char **value,
                    size_t *vlen);
int head_text_field(const struct buf *b, size_t *pos, const char **name, size_t *nlen, const char **value,
                    size_t *vlen);
int head_write_response(const struct msg *r, struct head_resp *hr, struct buf **out);

/* The reason phrase weir writes for <status> ("" if it knows none). */
const char *head_reason(int status);

/* Adds <name> to the header names weir vouches for (head_init() does
 * every listener's; the core adds routes.auth's: auth_vouch_names). */
void head_vouch(const char *name);

/* ==== trailers ==== */
/*
 * trailers (trailers.c): trailer fields passed through, for gRPC and
 * the like: the chunked trailer section of one side goes to the other.
 *
 * Principle: a trailer section crosses between codecs as a header list
 * (struct hdr, msg.h), never as protocol text. The codec that reads it
 * builds the list once, in room its side gets with the first trailers
 * (side_trailers(), below: a small buffer freed with the stream, at most
 * TRAILERS_FIELDS), dropping and counting (trailer_dropped) what RFC
 * 9110 6.5.1 keeps out of trailers (framing, routing, hop-by-hop,
 * authentication, controls, the content's own description) and the
 * fields past the cap; names and
 * values point where the codec keeps them (HTTP/1: the input buffer the
 * chunked decoder checked them in, field syntax and 16 KiB; HTTP/2: the
 * codec's record of the trailing HEADERS, trailers_rec_add()). The other
 * codec writes the list with its peer's end: HTTP/1 after the last chunk
 * when that peer's body is chunked too (a length-framed, HTTP/1.0 or
 * re-encoded body drops it), HTTP/2 as a trailing HEADERS. A body
 * buffered whole copies the bytes into its buffer (txn_client.c). No
 * allocation on a body without trailers.
 */

/* A trailer section is at most this, its final CRLF in (the chunked
 * decoder's bound, http_chunked.c). */
#define TRAILERS_MAX 16384

/* A trailer list has at most this many fields: those past it are
 * dropped and counted as refused ones are. */
#define TRAILERS_FIELDS 64

/* On a trailer field's hdr.flags (above the name's, msg.h): the field is
 * an HTTP/1 line where it points, its name the line's start and its CRLF
 * past the value (and the OWS around it): HTTP/1 writes the line as it
 * came, HTTP/2 the name and the trimmed value. */
#define TRAILER_LINE 0x8000

struct hdr;

/* Whether field name <p>[0..len) (any case) must not be in trailers. */
int trailers_forbidden(const char *p, size_t len);

/*
 * The list of the checked trailer section <p>[0..len) ("name: value\r\n"
 * lines, then "\r\n") into <v> (room for TRAILERS_FIELDS), pointing into
 * it (TRAILER_LINE): the forbidden fields and those past the cap left
 * out, counted in *dropped. Returns the fields kept.
 */
uint32_t trailers_list(const char *p, size_t len, struct hdr *v, uint32_t *dropped);

/* The bytes of field <h> as an HTTP/1 line, its CRLF in (TRAILER_LINE:
 * the line as it came). */
size_t trailers_line_len(const struct hdr *h);

/* The size of list <v>[0..n) as an HTTP/1 trailer section, its final
 * CRLF in: the bound every codec keeps (TRAILERS_MAX). */
size_t trailers_size(const struct hdr *v, uint32_t n);

/* When list <v>[0..n) is HTTP/1 lines (TRAILER_LINE) that lie one after
 * the other from v[0].name, the final CRLF right after the last: the
 * section's length there; else 0 (it must be written). */
size_t trailers_in_place(const struct hdr *v, uint32_t n);

/* Writes list <v>[0..n) as an HTTP/1 trailer section, its final CRLF in,
 * at <dst> (room for trailers_size()). Returns the bytes written. */
size_t trailers_write(char *dst, const struct hdr *v, uint32_t n);

/*
 * An HTTP/2 codec's record of a trailing HEADERS: each field as its two
 * lengths (16 bits each) then its name and value, so a record takes the
 * bytes the field's HTTP/1 line would and the bound stays that of an
 * HTTP/1 section. trailers_rec_add() appends one field at <dst> (room for
 * nlen + vlen + 4), its name lowered when <lower> (an HTTP/2 writer's);
 * returns the bytes written (the codec keeps at most TRAILERS_FIELDS).
 * trailers_rec_list() is the list of the record <p>[0..len) into <v>
 * (room for TRAILERS_FIELDS), pointing into it.
 */
size_t trailers_rec_add(char *dst, const char *name, size_t nlen, const char *value, size_t vlen, int lower);
uint32_t trailers_rec_list(const char *p, size_t len, struct hdr *v);

/*
 * The next field of a checked trailer section <p>[0..len) from *off:
 * 1 with its name and its value (OWS trimmed) and *off past its line, 0
 * at the final CRLF (or the end).
 */
int trailers_next(const char *p, size_t len, size_t *off, const char **name, size_t *nlen, const char **value,
                  size_t *vlen);

/* Whether the value <p>[0..len) of a TE field lists "trailers" (RFC 9110
 * 10.1.4): the one TE weir forwards, as gRPC needs it. */
int trailers_te_listed(const char *p, size_t len);

/* Room for TRAILERS_FIELDS trailer fields in <bi> (got when first
 * needed: a body without trailers costs nothing), or NULL when the slab
 * is out. */
static inline struct hdr *side_trailers(struct side_in *bi)
{
	if (!bi->tr && !(bi->tr = buf_get_fit(TRAILERS_FIELDS * (uint32_t)sizeof(struct hdr))))
		return NULL;
	return (struct hdr *)(void *)bi->tr->data;
}

/* ==== upcalls: what the stream core above implements for this codec ==== */
/*
 * The server codec (conn.c) hands requests up and events on a connection
 * with a request in flight; declared here so that no file of this layer
 * includes the core's door (worker/core/txn_phases.c, txn.c).
 *
 * txn_new() makes a stream for <c> with its parser ready (NULL when the
 * slab is out; sets c->txn), txn_head_parser() is that parser,
 * txn_start() takes a parsed head through the phases, txn_pump() moves
 * the stream on an event, txn_on_client_timeout() its client timer,
 * txn_abort() frees it as the connection goes (counting <rc>),
 * txn_answered() logs it (or, with no stream, the connection's unparsed
 * request) answered by weir with <status>: it runs the log phase and
 * returns 1 when the client asked to close after it; txn_request_id() is
 * its X-Request-Id (length 0: none), for the answer; txn_free() ends it.
 */
struct txn *txn_new(struct conn *c);
struct http_request *txn_head_parser(struct txn *t);
void txn_start(struct txn *t);
void txn_pump(struct txn *t);
void txn_on_client_timeout(struct txn *t);
void txn_abort(struct txn *t, int rc);
int txn_answered(struct conn *c, int status);
void txn_free(struct txn *t);
const char *txn_request_id(const struct txn *t, uint32_t *len);
/* the core's breaker: the Retry-After of an open breaker's 503, in
 * seconds (at most 60) */
uint32_t breaker_retry_secs(void);

#endif
