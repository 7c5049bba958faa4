/*
 * http_internal: what http_request.c, http_response.c and http_chunked.c
 * share. Private to worker/http*.c; everyone else includes worker/h1/h1.h.
 *
 * Principle: a head goes through two readers that must agree. http-parser
 * splits the start line and the header fields; a small line scanner here
 * walks the same bytes and enforces what the non-strict library lets
 * through (bare CR, bare LF, obs-fold, a CR not followed by LF ending the
 * head). The callbacks check every byte of names, values and the target.
 * When the head is complete, http_head_finish() applies the rules that need
 * all headers at once; the request and response files add the rules of
 * their own start line and framing.
 */
#ifndef WEIR_WORKER_HTTP_INTERNAL_H
#define WEIR_WORKER_HTTP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "worker/h1/h1.h"

/* Character classes, one bit each, for http_ctype[]. */
#define HTTP_C_TCHAR 0x01   /* tchar (RFC 9110 5.6.2) */
#define HTTP_C_VCHAR 0x02   /* field-vchar: VCHAR or obs-text */
#define HTTP_C_WS 0x04      /* SP or HTAB */
#define HTTP_C_HEX 0x08     /* HEXDIG */
#define HTTP_C_QDTEXT 0x10  /* qdtext (RFC 9110 5.6.4) */
#define HTTP_C_REGNAME 0x20 /* unreserved or sub-delims (RFC 3986) */
#define HTTP_C_UNDERSCORE 0x40 /* '_': a name that CGI would read as another */

extern const uint8_t http_ctype[256];

static inline int http_is(unsigned char c, uint8_t cls)
{
	return (http_ctype[c] & cls) != 0;
}

/* 1 when none of the eight bytes at <p> is below SP or is DEL: the word
 * tests of "Bit Twiddling Hacks" (a byte below n, for n <= 128, and a
 * zero byte), each exact for the word as a whole. */
static inline int http_word_plain(const char *p)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	uint64_t x, d;

	__builtin_memcpy(&x, p, 8);
	d = x ^ (0x7f * ones);
	return ((((x - 0x20 * ones) & ~x) | ((d - ones) & ~d)) & highs) == 0;
}

/*
 * The length of the longest prefix of [p, e) that is field-vchar and
 * whitespace (RFC 9110 5.5: no CTL but HTAB, no DEL): where a field value
 * ends, at its CR, and whether its bytes are fit, in one scan; a value is
 * fit when the span is all of it. Every value of every head passes here,
 * and a byte loop by the table costs some 5 instructions a byte: SSE2 (in
 * every x86-64) looks at 16 bytes at a time while 16 remain, then the
 * word test 8 at a time, and from the first word with a byte below SP
 * (often an HTAB, which is allowed) on, the table a byte at a time.
 */
static inline size_t http_plain_span(const char *p, const char *e)
{
	const char *s = p;
#if defined(__SSE2__)
	const __m128i below = _mm_set1_epi8(0x1f), tab = _mm_set1_epi8('\t'), del = _mm_set1_epi8(0x7f);

	while (e - p >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		/* a byte at most 0x1f is its own unsigned minimum with 0x1f */
		__m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(x, below), x);
		__m128i bad = _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(x, tab), ctl), _mm_cmpeq_epi8(x, del));
		unsigned m = (unsigned)_mm_movemask_epi8(bad);

		if (m)
			return (size_t)(p - s) + (size_t)__builtin_ctz(m);
		p += 16;
	}
#endif
	while (e - p >= 8 && http_word_plain(p))
		p += 8;
	while (p < e && http_is((unsigned char)*p, HTTP_C_VCHAR | HTTP_C_WS))
		p++;
	return (size_t)(p - s);
}

/* The end of the tchar run that starts at <p> (at most <e>): a field
 * name. The classes of its bytes are or-ed into *<cls>, so the caller
 * learns whether it holds a '_' without another pass. */
static inline const char *http_name_end(const char *p, const char *e, uint8_t *cls)
{
	uint8_t acc = 0, c;

#if defined(__SSE2__)
	/* letters, digits and '-' (most names are nothing else) 16 at a time;
	 * the table goes on from the first other byte, most often the ':' */
	const __m128i lower = _mm_set1_epi8(0x20), a = _mm_set1_epi8('a'), z = _mm_set1_epi8('z' - 'a'),
	              zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8(9), dash = _mm_set1_epi8('-');

	while (e - p >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		__m128i l = _mm_sub_epi8(_mm_or_si128(x, lower), a), d = _mm_sub_epi8(x, zero);
		__m128i ok = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(l, z), l),
		                                       _mm_cmpeq_epi8(_mm_min_epu8(d, nine), d)),
		                          _mm_cmpeq_epi8(x, dash));
		unsigned m = ~(unsigned)_mm_movemask_epi8(ok) & 0xffffu;

		if (m) {
			p += __builtin_ctz(m);
			break;
		}
		p += 16;
	}
#endif
	while (p < e && ((c = http_ctype[(unsigned char)*p]) & HTTP_C_TCHAR)) {
		acc |= c;
		p++;
	}
	*cls |= acc;
	return p;
}

/* Bytes of a request target: VCHAR (no SP, no CTL, no obs-text). */
static inline int http_target_char(unsigned char c)
{
	return (unsigned)(c - 0x21) < 0x5e;
}

/* The method named by the token <p>[0..len) (case matters: http-parser's
 * table, enum http_method), or -1. */
int http_method_lookup(const char *p, size_t len);

/* What http_head_finish() found in a complete head's header list. */
struct http_head_info {
	uint32_t ncl;            /* Content-Length headers */
	uint32_t nte;            /* Transfer-Encoding headers */
	uint32_t nhost;          /* Host headers */
	int cl_ok;               /* the one Content-Length is 1*DIGIT, no overflow */
	uint64_t content_length; /* its value when cl_ok */
	int te_chunked;          /* exactly one TE header, exactly "chunked" */
	int conn_close;          /* a Connection "close" token */
	int conn_keep_alive;     /* a Connection "keep-alive" token */
	int expect_continue;     /* an Expect value of "100-continue" */
	int conn_upgrade;        /* a Connection "upgrade" token */
	uint32_t nupgrade;       /* Upgrade headers */
	const struct hdr *upgrade; /* the last Upgrade header, NULL if none */
	const struct hdr *host;    /* the last Host header, NULL if none */
};

/*
 * Prepares <st> for a head of <type> parsed into <m>, its header list at
 * the bottom of <a> (reset here), at most <max_headers> entries and
 * <max_head> bytes long. Requests also set st->max_uri and st->max_body
 * afterwards.
 */
void http_head_init(struct http_head_state *st, enum http_parser_type type, struct msg *m,
                    struct arena *a, uint32_t max_headers, size_t max_head);

/*
 * Feeds the bytes of <buf>[0..len) not seen yet. Returns 0 when the head is
 * complete (st->head_end is its length; nothing past it was consumed),
 * WEIR_EAGAIN, or a request-side code: WEIR_EBAD_REQUEST, WEIR_ESMUGGLING
 * (Content-Length errors found by http-parser), WEIR_EURI_TOO_LONG,
 * WEIR_EHEADERS_TOO_LARGE. Errors are sticky in st->error.
 */
int http_head_feed(struct http_head_state *st, const char *buf, size_t len);

/*
 * A field that came as a name and a value, not a line (HTTP/2): checked
 * as field_line() checks a line's parts (a name of tchar, a value of
 * field-vchar and whitespace) and counted against the head's limits as
 * the line it would be. 0, WEIR_EBAD_REQUEST or WEIR_EHEADERS_TOO_LARGE.
 * http_head_finish() then reads the list as a text head's.
 */
int http_head_field(struct http_head_state *st, const char *n, size_t nlen, const char *v, size_t vlen);

/* Connection tokens a head may carry, over all its Connection headers.
 * Each names a header to drop and is compared with every header name, so
 * without a bound a 64 KiB head of tokens and 1,000 headers costs tens of
 * millions of comparisons; real clients send one to three. */
#define HTTP_CONN_TOKENS_MAX 16

/*
 * Once the head is complete: trims OWS off values, sets every header's
 * token and flags (including HOP for names listed in Connection), fills
 * <info>, then takes the framing headers (Content-Length,
 * Transfer-Encoding) out of the list and closes it in the arena.
 * Returns 0, WEIR_EBAD_REQUEST (a Connection element is not a token) or
 * WEIR_ECONNECTION_TOKENS (more than HTTP_CONN_TOKENS_MAX of them).
 */
int http_head_finish(struct http_head_state *st, struct http_head_info *info);

/* 1 if <p>[0..len) is host [":" port] with a non-empty host. */
int http_host_valid(const char *p, size_t len);

/* Whether the connection stays open after this message (RFC 9112 9.3):
 * HTTP/1.1 unless "close", HTTP/1.0 only with "keep-alive". */
static inline int http_keep_alive(int version_minor, const struct http_head_info *info)
{
	return !info->conn_close && (version_minor == 1 || info->conn_keep_alive);
}

#endif
