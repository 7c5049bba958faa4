/*
 * ref_http1.h: a second, independent reading of an HTTP/1.1 request head,
 * written from RFC 9112 and RFC 9110 (and RFC 3986 for the target), for the
 * differential fuzz target. It shares no code or tables with worker/http*.c.
 *
 * Principle: slow and obviously correct. The head is cut into lines first,
 * then each rule is one check that cites its section. Where the RFCs let a
 * server refuse what is otherwise valid, weir refuses, and the reference
 * refuses too; each such rule is marked POLICY and listed in
 * tests/fuzz/README.md, so the differential target checks that weir refuses
 * nothing else and accepts nothing the RFCs forbid. The one thing weir takes
 * that RFC 3986 does not allow, on purpose, is marked TOLERATED: there the
 * reference answers REF_EITHER.
 */
#ifndef WEIR_TESTS_FUZZ_REF_HTTP1_H
#define WEIR_TESTS_FUZZ_REF_HTTP1_H

#include <stddef.h>
#include <stdint.h>

enum ref_verdict {
	REF_ACCEPT,     /* a valid head that weir serves */
	REF_REJECT,     /* invalid, or refused by a POLICY rule */
	REF_INCOMPLETE, /* no empty line yet, and not over the size limit */
	REF_EITHER,     /* valid but for what a TOLERATED rule lets weir take:
	                 * accepting and refusing are both right */
};

enum ref_body { REF_BODY_NONE, REF_BODY_LENGTH, REF_BODY_CHUNKED };

struct ref_limits {
	size_t head;      /* bytes of the head, leading empty lines included */
	size_t target;    /* bytes of the request-target */
	unsigned headers; /* header field lines */
	uint64_t body;    /* Content-Length, 0: no limit */
};

struct ref_result {
	enum ref_verdict verdict;
	const char *why;   /* the rule that refused, for the crash message */
	size_t head_len;   /* with REF_ACCEPT: through the final CRLF */
	enum ref_body body;
	uint64_t content_length;
	int minor;         /* HTTP/1.<minor> */
};

void ref_http1_request(const uint8_t *p, size_t len, const struct ref_limits *lim, struct ref_result *out);

#endif
