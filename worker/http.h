/*
 * http.h: strict HTTP/1.1 message heads and bodies, on top of http-parser.
 *
 * Principle: weir never forwards bytes it has not understood. Debian's
 * libhttp_parser is built non-strict (a space before the colon, obs-fold,
 * bare LF, loose chunk framing, two-digit status codes all pass), so this
 * module uses it for the request and status lines and the header split,
 * checks every byte of the head on top of it, and frames bodies itself:
 * Content-Length is counted by the caller, chunked bodies go through the
 * strict decoder below. What comes out is a struct msg (worker/msg.h):
 * validated spans into the caller's buffer, the headers in a list in the
 * stream's arena, the framing taken out of the list into its fields.
 *
 * Parsing is incremental: call the parse function again with the same
 * buffer grown by the new bytes; it only looks at what it has not seen.
 * The buffer must not move between calls for one head.
 */
#ifndef WEIR_WORKER_HTTP_H
#define WEIR_WORKER_HTTP_H

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "worker/msg.h"

/* Maximum headers any head may have; config limits.headers is at most this. */
#define HTTP_MAX_HEADERS 1000

/* Parsing state shared by requests and responses; private to http*.c. */
struct http_head_state {
	http_parser parser;
	size_t fed;          /* bytes of the buffer already given to the parser */
	const char *start;   /* the buffer the head is in */
	int in_value;        /* last callback was a header value */
	int done;            /* headers complete */
	int error;           /* first error found by a callback, a WEIR_E* code */
	uint32_t max_headers;
	size_t max_head;     /* head size limit */
	size_t max_uri;      /* request target limit (requests only) */

	/* Private to worker/http*.c: the line scanner and the callbacks. */
	struct msg *m;            /* the message parsed into */
	struct arena *arena;      /* where its header list goes */
	struct hdr *hdrs;         /* the list being parsed, max_headers long */
	uint32_t nhdrs;           /* headers started so far */
	uint64_t max_body;        /* requests: Content-Length limit, 0 = none */
	size_t line_start;        /* offset of the line being scanned */
	size_t line0, line0_end;  /* the start line, CRLF excluded */
	size_t head_end;          /* offset past the final CRLF, 0 until seen */
	const char *tok;          /* request target (on_url) or reason (on_status) */
	size_t tok_len;
	uint32_t nlines;          /* non-empty lines completed */
	uint8_t cr;               /* the last scanned byte was a CR */
	uint8_t leading_crlf;     /* empty lines before the start line allowed */
	uint8_t head_method;      /* responses: the request was HEAD */
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
 * except 101, which it turns into a tunnel or refuses (worker/tunnel.h).
 */
int http_response_parse(struct http_response *r, const char *buf, size_t len);

/* Strict chunked body decoder (RFC 9112 7.1). */
struct http_chunked {
	int state;
	uint64_t remaining;  /* data bytes left in the current chunk */
	uint32_t digits;     /* hex digits seen in the current size line */
	uint32_t line_bytes; /* bytes of the current extension or trailer line */
	uint32_t trailer_bytes; /* total trailer section bytes */
	int done;            /* the last chunk and trailers were read */
};

void http_chunked_init(struct http_chunked *c);

/*
 * Consumes framing from <p>[0..len) until it reaches chunk data, the end of
 * the body, or the end of the input. Sets *used to the bytes consumed and
 * (*data, *data_len) to the data span found (data_len 0 if none; the data is
 * part of the consumed bytes). Returns 0 (call again with the rest while
 * used < len and !c->done), or WEIR_ESMUGGLING on any framing error: a size
 * that is not 1*HEXDIG or overflows, bytes other than CRLF after data, bare
 * LF, invalid extensions, bad trailer fields, trailers over 16 KiB.
 * Trailers are checked and dropped (not forwarded).
 */
int http_chunked_feed(struct http_chunked *c, const char *p, size_t len, size_t *used,
                      const char **data, size_t *data_len);

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

/* Case-insensitive comparison of a span with a lower-case literal. */
int http_span_ieq(const char *p, size_t len, const char *lower);

/*
 * 1 if header names <a> and <b>, both <len> bytes, are the same name to a
 * CGI, WSGI or PHP backend, which reads both X-Client-Subject and
 * x_client_subject as HTTP_X_CLIENT_SUBJECT: letters compared without case,
 * '-' and '_' equal.
 */
int http_name_same_var(const char *a, const char *b, size_t len);

#endif
