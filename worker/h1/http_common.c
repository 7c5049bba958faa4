/*
 * http_common.c: the head reader shared by requests and responses.
 *
 * A head that arrived whole is read by scan_whole, a faster path that
 * accepts only what the scanner below accepts and leaves the rest to it.
 *
 * The scanner, one pass over the bytes: memchr places the line ends (a bare CR, a bare
 * LF, an obs-fold and a CR not followed by LF are refused as they are
 * met), and each completed line is split and checked where it lies: the
 * request line (method SP target SP "HTTP/1.x"), or a field line (a tchar
 * name, ':', a value of field-vchar and whitespace). A line that has not
 * ended yet is checked as far as it goes (line_partial), so a bad byte,
 * a target past uri_size or one header too many is refused when it
 * arrives, not when the line ends, and each byte is looked at there once.
 *
 * This replaces http-parser's state machine for heads: Debian builds it
 * non-strict, so every byte it accepted was checked again here, and its
 * execute loop was a third of weir's user-space instructions per proxied
 * request (callgrind, docs/design.md). http-parser still gives weir its
 * method table (HTTP_METHOD_MAP, enum http_method), and the fuzz targets
 * hold the reader to a reference parser (tests/fuzz/ref_http1.c).
 */
#include <arpa/inet.h>
#include <string.h>

#include "common/err.h"
#include "worker/h1/http_internal.h"

/* Generated from the RFC grammars; tests/unit/worker/test_http_chunked.c
 * checks it against them. */
const uint8_t http_ctype[256] = {
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x14, 0x33, 0x02, 0x13, 0x33, 0x13, 0x33, 0x33, 0x32, 0x32, 0x33, 0x33, 0x32, 0x33, 0x33, 0x12,
	0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x12, 0x32, 0x12, 0x32, 0x12, 0x12,
	0x12, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33,
	0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x12, 0x02, 0x12, 0x13, 0x73,
	0x13, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33,
	0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x12, 0x13, 0x12, 0x33, 0x00,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
	0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
};

int http_span_ieq(const char *p, size_t len, const char *lower)
{
	size_t i;

	/* the length first: inlined with a literal, strlen() is a constant,
	 * and a span of another length ("keep-alive" against "close") costs
	 * one compare instead of a walk to the first difference */
	if (len != strlen(lower))
		return 0;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c >= 'A' && c <= 'Z')
			c |= 0x20;
		if (c != (unsigned char)lower[i])
			return 0;
	}
	return 1;
}

int http_name_same_var(const char *a, const char *b, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

		if (x == y)
			continue;
		/* the gateway upper-cases and turns '-' into '_': fold both
		 * sides the same way (to lower case and '-') */
		if (x >= 'A' && x <= 'Z')
			x |= 0x20;
		else if (x == '_')
			x = '-';
		if (y >= 'A' && y <= 'Z')
			y |= 0x20;
		else if (y == '_')
			y = '-';
		if (x != y)
			return 0;
	}
	return 1;
}

/* 1 if the span starts with the lower-case <prefix>, case-insensitively. */
static int span_iprefix(const char *p, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && http_span_ieq(p, n, prefix);
}

/* The methods, by http-parser's numbering (enum http_method). */
static const struct http_method_name {
	const char *name;
	uint8_t len;
} http_methods[] = {
#define HTTP_METHOD_ENTRY(num, name, string) [num] = {#string, sizeof(#string) - 1},
	HTTP_METHOD_MAP(HTTP_METHOD_ENTRY)
#undef HTTP_METHOD_ENTRY
};

const char *http_method_name(enum http_method id, uint32_t *len)
{
	*len = http_methods[id].len;
	return http_methods[id].name;
}

/* http_method_lookup(), inline where the request line is read */
static inline int method_lookup(const char *p, size_t len)
{
	/* the common ones first, without the walk */
	if (len == 3 && memcmp(p, "GET", 3) == 0)
		return HTTP_GET;
	if (len == 4 && memcmp(p, "POST", 4) == 0)
		return HTTP_POST;
	for (size_t i = 0; i < sizeof(http_methods) / sizeof(http_methods[0]); i++)
		if (http_methods[i].len == len && memcmp(http_methods[i].name, p, len) == 0)
			return (int)i;
	return -1;
}

int http_method_lookup(const char *p, size_t len)
{
	return method_lookup(p, len);
}

/*
 * A complete request line [p, e), CRLF excluded: exactly method SP target
 * SP "HTTP/1.0" or "HTTP/1.1". HTTP/0.9 (no version), 2.0 and other
 * protocols ("ICE/1.0") are refused; so is a second space anywhere.
 */
static int request_line(struct http_head_state *st, const char *p, const char *e)
{
	const char *m = p, *t;
	int id;

	while (p < e && http_is((unsigned char)*p, HTTP_C_TCHAR))
		p++;
	if (p == m || p == e || *p != ' ' || (id = method_lookup(m, (size_t)(p - m))) < 0)
		return WEIR_ERR(BAD_REQUEST);
	t = ++p;
	while (p < e && http_target_char((unsigned char)*p))
		p++;
	if ((size_t)(p - t) > st->max_uri)
		return WEIR_ERR(URI_TOO_LONG);
	if (p == t || p == e || *p != ' ')
		return WEIR_ERR(BAD_REQUEST);
	st->tok = t;
	st->tok_len = (size_t)(p - t);
	p++;
	if (e - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
		return WEIR_ERR(BAD_REQUEST);
	st->method_id = (uint8_t)id;
	st->version_minor = (uint8_t)(p[7] - '0');
	return 0;
}

/* The flags a name's classes (http_name_end) give before name_token
 * reads it: only HDR_UNDERSCORE, which spares it a memchr. */
static inline uint16_t name_flags(uint8_t cls)
{
	return cls & HTTP_C_UNDERSCORE ? HDR_UNDERSCORE : 0;
}

/* The list's next entry: a field named <n>[0..nlen) (tchar, its classes
 * <cls>) with the value [v, e) (fit; trimmed by http_head_finish), room
 * for it checked. */
static inline void field_put(struct http_head_state *st, const char *n, size_t nlen, const char *v, const char *e,
                             uint8_t cls)
{
	struct hdr *h = &st->hdrs[st->nhdrs++];

	h->name = n;
	h->name_len = (uint32_t)nlen;
	h->value = v;
	h->value_len = (uint32_t)(e - v);
	h->tok = 0;
	h->flags = name_flags(cls);
}

/* The value [v, e) of a field named <n>[0..nlen) (tchar, checked, and
 * room for it in the list): field-vchar and whitespace only, then the
 * list's next entry. */
static inline int field_take(struct http_head_state *st, const char *n, size_t nlen, const char *v, const char *e,
                             uint8_t cls)
{
	if (http_plain_span(v, e) != (size_t)(e - v))
		return WEIR_ERR(BAD_REQUEST);
	field_put(st, n, nlen, v, e, cls);
	return 0;
}

/*
 * A complete field line [p, e): a name of tchar (no space before the
 * colon), ':', then the value. An obs-fold never gets here (the scanner).
 */
static int field_line(struct http_head_state *st, const char *p, const char *e)
{
	const char *n = p;
	uint8_t cls = 0;

	if (st->nhdrs >= st->max_headers)
		return WEIR_ERR(HEADERS_TOO_LARGE);
	p = http_name_end(p, e, &cls);
	if (p == n || p == e || *p != ':')
		return WEIR_ERR(BAD_REQUEST);
	return field_take(st, n, (size_t)(p - n), p + 1, e, cls);
}

int http_head_field(struct http_head_state *st, const char *n, size_t nlen, const char *v, size_t vlen)
{
	uint8_t cls = 0;

	if (st->nhdrs >= st->max_headers)
		return WEIR_ERR(HEADERS_TOO_LARGE);
	/* the line it would be, ": " and CRLF, and the blank line after:
	 * held to the head's size limit as text is */
	st->head_end += nlen + vlen + 4;
	if (st->head_end + 2 > st->max_head)
		return WEIR_ERR(HEADERS_TOO_LARGE);
	if (nlen == 0 || http_name_end(n, n + nlen, &cls) != n + nlen)
		return WEIR_ERR(BAD_REQUEST);
	return field_take(st, n, nlen, v, v + vlen, cls);
}

/*
 * The bytes [from, e) of a line that has not ended, checked as far as
 * they go, so that a client cannot hold a bad line open until its
 * timeout: st->pl_stage and st->pl_len carry where the line stands
 * between feeds. The status line of a response is checked whole, once
 * it ends (http_response.c).
 */
static int line_partial(struct http_head_state *st, const char *buf, size_t from, size_t e)
{
	for (size_t i = from; i < e; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (st->nlines == 0) {
			if (!st->is_request)
				return 0;
			if (st->pl_stage == 0) { /* the method */
				if (http_is(c, HTTP_C_TCHAR))
					st->pl_len++;
				else if (c == ' ' && st->pl_len > 0)
					st->pl_stage = 1, st->pl_len = 0;
				else
					return WEIR_ERR(BAD_REQUEST);
			} else if (st->pl_stage == 1) { /* the target */
				if (http_target_char(c)) {
					if (++st->pl_len > st->max_uri)
						return WEIR_ERR(URI_TOO_LONG);
				} else if (c == ' ' && st->pl_len > 0) {
					st->pl_stage = 2;
				} else {
					return WEIR_ERR(BAD_REQUEST);
				}
			} /* the version is checked whole */
			continue;
		}
		if (st->pl_stage == 0) { /* the name */
			if (st->pl_len == 0 && st->nhdrs >= st->max_headers)
				return WEIR_ERR(HEADERS_TOO_LARGE);
			if (http_is(c, HTTP_C_TCHAR))
				st->pl_len++;
			else if (c == ':' && st->pl_len > 0)
				st->pl_stage = 1;
			else
				return WEIR_ERR(BAD_REQUEST);
		} else if (!http_is(c, HTTP_C_VCHAR | HTTP_C_WS)) {
			return WEIR_ERR(BAD_REQUEST);
		}
	}
	st->pl_from = e;
	return 0;
}

void http_head_init(struct http_head_state *st, enum http_parser_type type, struct msg *m,
                    struct arena *a, uint32_t max_headers, size_t max_head)
{
	uint32_t room;

	memset(st, 0, sizeof(*st));
	memset(m, 0, sizeof(*m));
	arena_reset(a);
	st->is_request = type == HTTP_REQUEST;
	st->m = m;
	st->arena = a;
	st->hdrs = hlist_open(a, max_headers > HTTP_MAX_HEADERS ? HTTP_MAX_HEADERS : max_headers, &room);
	st->max_headers = room;
	m->hl.v = st->hdrs;
	st->max_head = max_head;
	/* RFC 9112 2.2: a server SHOULD ignore at least one empty line before
	 * the request-line. Before a status line they would mean the previous
	 * response was framed wrongly, so they are refused. */
	st->leading_crlf = st->is_request;
}

/* A line [start, end) has ended (end at its CR): the start line or a
 * field line. */
static int line_done(struct http_head_state *st, const char *buf, size_t start, size_t end)
{
	st->pl_stage = 0;
	st->pl_len = 0;
	if (st->nlines == 0) {
		st->line0 = start;
		st->line0_end = end;
		return st->is_request ? request_line(st, buf + start, buf + end) : 0;
	}
	return field_line(st, buf + start, buf + end);
}

/*
 * The scanner: looks at <buf>[st->fed..limit) and stops after the final
 * CRLF (st->done, st->head_end). Returns 0, or the first fault in the
 * byte stream: a bare CR, a bare LF, an obs-fold line or an empty line
 * where none may be (WEIR_EBAD_REQUEST), or what a line's check found,
 * the bytes of a line before the offending byte checked first.
 */
static int scan_lines(struct http_head_state *st, const char *buf, size_t limit)
{
	size_t i = st->fed, end;
	int rc;

	while (i < limit) {
		const char *cr, *lf;
		size_t j;

		if (st->cr) {
			if (buf[i] != '\n') {
				end = i - 1; /* the line's bytes end before that CR */
				goto bad;
			}
			st->cr = 0;
			if (i - 1 == st->line_start) {
				if (st->nlines > 0) {
					st->head_end = i + 1;
					st->done = 1;
					return 0;
				}
				if (!st->leading_crlf) {
					end = i;
					goto bad;
				}
			} else {
				rc = line_done(st, buf, st->line_start, i - 1);
				if (rc)
					return rc;
				st->nlines++;
			}
			st->line_start = st->pl_from = ++i;
			continue;
		}
		if (i == st->line_start && st->nlines > 0 && (buf[i] == ' ' || buf[i] == '\t')) {
			end = i; /* obs-fold, or whitespace before a field name */
			goto bad;
		}
		cr = memchr(buf + i, '\r', limit - i);
		j = cr ? (size_t)(cr - buf) : limit;
		lf = memchr(buf + i, '\n', j - i);
		if (lf) {
			i = end = (size_t)(lf - buf); /* a bare LF */
			goto bad;
		}
		if (!cr)
			break;
		st->cr = 1;
		i = j + 1;
	}
	/* a line under way: checked up to its CR if that came last */
	end = limit - st->cr;
	return end > st->pl_from ? line_partial(st, buf, st->pl_from, end) : 0;
bad:
	rc = end > st->pl_from ? line_partial(st, buf, st->pl_from, end) : 0;
	return rc ? rc : WEIR_ERR(BAD_REQUEST);
}

/*
 * The fast path: a head whose every line is already in <buf>[0..limit),
 * read in one pass with no state kept between lines. It accepts only what
 * scan_lines accepts, with the same results (the same line checks run on
 * the same spans); anything else (a head not yet complete, a leading empty
 * line, a bad byte anywhere, one header too many) is left to scan_lines,
 * which gives the exact answer. Most heads arrive whole, and this path
 * costs about half the instructions: one scan per value finds its end and
 * checks its bytes at once, where scan_lines runs two memchr() and then
 * the value check over the same bytes. fuzz_request and fuzz_response
 * parse each head whole, split and a byte at a time, and compare.
 */
static int scan_whole(struct http_head_state *st, const char *buf, size_t limit)
{
	const char *p = buf, *e = buf + limit;
	uint32_t nlines = 0;

	for (;;) {
		const char *cr, *n;
		uint8_t cls = 0;

		if (p == e)
			return 0;
		if (*p == '\r') {
			if (nlines == 0 || e - p < 2 || p[1] != '\n')
				return 0;
			st->nlines = nlines;
			st->head_end = (size_t)(p + 2 - buf);
			st->done = 1;
			return 1;
		}
		if (nlines == 0) {
			cr = p + http_plain_span(p, e);
			if (e - cr < 2 || cr[0] != '\r' || cr[1] != '\n')
				return 0;
			st->line0 = 0;
			st->line0_end = (size_t)(cr - buf);
			if (st->is_request && request_line(st, p, cr))
				return 0;
		} else {
			if (st->nhdrs >= st->max_headers)
				return 0;
			n = p;
			p = http_name_end(p, e, &cls);
			if (p == n || p == e || *p != ':')
				return 0;
			cr = p + 1 + http_plain_span(p + 1, e);
			if (e - cr < 2 || cr[0] != '\r' || cr[1] != '\n')
				return 0;
			/* the value [p + 1, cr) is field-vchar and whitespace: the
			 * span stopped at its CR, the first byte that is not */
			field_put(st, n, (size_t)(p - n), p + 1, cr, cls);
		}
		nlines++;
		p = cr + 2;
		/* an obs-fold, or whitespace before a field name */
		if (p < e && (*p == ' ' || *p == '\t'))
			return 0;
	}
}

int http_head_feed(struct http_head_state *st, const char *buf, size_t len)
{
	size_t limit;
	int rc;

	if (st->error)
		return st->error;
	if (st->done)
		return 0;
	if (st->fed > 0 && buf != st->start)
		return st->error = WEIR_ERR(BAD_REQUEST); /* the buffer moved */
	st->start = buf;

	limit = len < st->max_head ? len : st->max_head;
	if (st->fed == 0 && limit > 0) {
		if (scan_whole(st, buf, limit)) {
			st->fed = limit;
			return 0;
		}
		st->nhdrs = 0; /* what it took goes again, through the scanner */
	}
	if (st->fed < limit) {
		rc = scan_lines(st, buf, limit);
		st->fed = limit;
		if (rc)
			return st->error = rc;
		if (st->done)
			return 0;
	}
	if (len > st->max_head)
		return st->error = WEIR_ERR(HEADERS_TOO_LARGE);
	return WEIR_EAGAIN;
}

static void trim_value(struct hdr *h)
{
	while (h->value_len > 0 && http_is((unsigned char)h->value[0], HTTP_C_WS)) {
		h->value++;
		h->value_len--;
	}
	while (h->value_len > 0 && http_is((unsigned char)h->value[h->value_len - 1], HTTP_C_WS))
		h->value_len--;
	if (!h->value)
		h->value = h->name + h->name_len; /* never NULL, even when empty */
}

/*
 * A name with a '_' that CGI, WSGI and PHP read as a framing or hop-by-hop
 * header (Transfer_Encoding is HTTP_TRANSFER_ENCODING to them, as
 * Transfer-Encoding is): only names with a '-' have such spellings, so
 * Host, TE, Trailer, Upgrade and Connection have none.
 */
static uint32_t name_lookalike(const char *n, size_t l)
{
	if (l >= 6 && http_name_same_var(n, "proxy-", 6))
		return HDR_LOOKALIKE;
	switch (l) {
	case 10:
		return http_name_same_var(n, "keep-alive", l) ? HDR_LOOKALIKE : 0;
	case 14:
		return http_name_same_var(n, "content-length", l) ? HDR_LOOKALIKE : 0;
	case 17:
		return http_name_same_var(n, "transfer-encoding", l) ? HDR_LOOKALIKE : 0;
	default:
		return 0;
	}
}

/* Token and flags by name: the token table knows the names that matter;
 * a '_' (found as the name was read: h->flags holds HDR_UNDERSCORE) makes
 * at most a lookalike. */
static void name_token(struct hdr *h)
{
	const char *n = h->name;
	size_t l = h->name_len;
	enum hdr_tok tok;

	if (l >= 6 && span_iprefix(n, l, "proxy-")) {
		/* every Proxy-* name is hop-by-hop, well-known or not */
		if (h->flags & HDR_UNDERSCORE) {
			h->tok = HT_OTHER;
			h->flags = HDR_HOP | HDR_UNDERSCORE;
			return;
		}
		tok = hdr_token(n, l);
		h->tok = (uint16_t)tok;
		h->flags = HDR_HOP | hdr_tokens[tok].flags;
		return;
	}
	/* no well-known name has a '_' */
	if (h->flags & HDR_UNDERSCORE) {
		h->tok = HT_OTHER;
		h->flags = (uint16_t)(HDR_UNDERSCORE | name_lookalike(n, l));
		return;
	}
	tok = hdr_token(n, l);
	h->tok = (uint16_t)tok;
	/* the framing flag is the codec's own business: the core never
	 * sees those headers */
	h->flags = hdr_tokens[tok].flags & (uint16_t)~HDR_FRAMING;
}

static int span_eq_nocase(const char *a, size_t al, const char *b, size_t bl)
{
	size_t i;

	if (al != bl)
		return 0;
	for (i = 0; i < al; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

		if (x >= 'A' && x <= 'Z')
			x |= 0x20;
		if (y >= 'A' && y <= 'Z')
			y |= 0x20;
		if (x != y)
			return 0;
	}
	return 1;
}

/*
 * One Connection value: a comma list of tokens (empty elements allowed,
 * RFC 9110 5.6.1). "close" and "keep-alive" are noted; every header named
 * by a token becomes hop-by-hop.
 */
static int connection_tokens(struct http_head_state *st, const struct hdr *c,
                             struct http_head_info *info, uint32_t *ntokens)
{
	const char *p = c->value, *end = c->value + c->value_len;

	while (p < end) {
		const char *tok, *tend;
		enum hdr_tok ht;
		uint32_t i;

		while (p < end && http_is((unsigned char)*p, HTTP_C_WS))
			p++;
		tok = p;
		while (p < end && http_is((unsigned char)*p, HTTP_C_TCHAR))
			p++;
		tend = p;
		while (p < end && http_is((unsigned char)*p, HTTP_C_WS))
			p++;
		if (p < end) {
			if (*p != ',')
				return WEIR_ERR(BAD_REQUEST);
			p++;
		}
		if (tok == tend)
			continue;
		if (++*ntokens > HTTP_CONN_TOKENS_MAX)
			return WEIR_ERR(CONNECTION_TOKENS);
		if (http_span_ieq(tok, (size_t)(tend - tok), "close"))
			info->conn_close = 1;
		else if (http_span_ieq(tok, (size_t)(tend - tok), "keep-alive"))
			info->conn_keep_alive = 1;
		else if (http_span_ieq(tok, (size_t)(tend - tok), "upgrade"))
			info->conn_upgrade = 1;
		/* a well-known name is found by its token; another is compared
		 * only with the names that have none */
		ht = hdr_token(tok, (size_t)(tend - tok));
		for (i = 0; i < st->nhdrs; i++) {
			struct hdr *h = &st->hdrs[i];

			if (ht != HT_OTHER ? h->tok == ht
			                   : h->tok == HT_OTHER && span_eq_nocase(h->name, h->name_len, tok, (size_t)(tend - tok)))
				h->flags |= HDR_HOP;
		}
	}
	return 0;
}

/* Content-Length = 1*DIGIT: no sign, no list, no whitespace inside. */
static int parse_length(const char *p, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned d = (unsigned char)p[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int http_head_finish(struct http_head_state *st, struct http_head_info *info)
{
	uint32_t i, j, ntokens = 0;
	int rc;

	memset(info, 0, sizeof(*info));
	for (i = 0; i < st->nhdrs; i++) {
		struct hdr *h = &st->hdrs[i];

		trim_value(h);
		name_token(h);
	}
	/* Connection may name headers that come before or after it. */
	for (i = 0; i < st->nhdrs; i++) {
		const struct hdr *h = &st->hdrs[i];

		if (h->tok == HT_CONNECTION) {
			rc = connection_tokens(st, h, info, &ntokens);
			if (rc)
				return rc;
		}
	}
	/* one pass reads what the rules need and takes the framing headers
	 * out of the list (moving the others down over them) */
	for (i = 0, j = 0; i < st->nhdrs; i++) {
		struct hdr *h = &st->hdrs[i];

		if (h->tok == HT_CONTENT_LENGTH) {
			info->ncl++;
			info->cl_ok = parse_length(h->value, h->value_len, &info->content_length) == 0;
			continue;
		}
		if (h->tok == HT_TRANSFER_ENCODING) {
			info->nte++;
			/*
			 * Only a lone "chunked" is accepted. "gzip, chunked" is
			 * valid HTTP but refused on purpose: weir does not
			 * forward transfer codings, and every extra coding is
			 * one more way for two parsers to disagree.
			 */
			info->te_chunked = http_span_ieq(h->value, h->value_len, "chunked");
			continue;
		}
		if (j != i)
			st->hdrs[j] = *h;
		h = &st->hdrs[j++];
		if (h->flags & HDR_HOST) {
			info->nhost++;
			info->host = h;
		} else if (h->flags & HDR_UPGRADE) {
			info->nupgrade++;
			info->upgrade = h;
		} else if (h->flags & HDR_EXPECT) {
			if (http_span_ieq(h->value, h->value_len, "100-continue"))
				info->expect_continue = 1;
		}
	}
	st->nhdrs = j;
	hlist_close(st->arena, &st->m->hl, st->hdrs, j);
	if (info->nte != 1)
		info->te_chunked = 0;
	if (info->ncl != 1)
		info->cl_ok = 0;
	return 0;
}

/* host = IP-literal / IPv4address / reg-name (RFC 3986), port = 1*5DIGIT. */
int http_host_valid(const char *p, size_t len)
{
	size_t i = 0, n;
	unsigned port = 0;

	if (len == 0)
		return 0;
	if (p[0] == '[') {
		/* IP-literal: an IPv6address (IPvFuture is refused), checked by
		 * inet_pton, so that "[1:2]" or "[20021::1]" is not routed on */
		char addr[INET6_ADDRSTRLEN];
		unsigned char bin[16];

		for (i = 1; i < len && p[i] != ']'; i++)
			if (p[i] != ':' && p[i] != '.' && !http_is((unsigned char)p[i], HTTP_C_HEX))
				return 0;
		if (i == len || i - 1 >= sizeof(addr))
			return 0;
		memcpy(addr, p + 1, i - 1);
		addr[i - 1] = '\0';
		if (inet_pton(AF_INET6, addr, bin) != 1)
			return 0;
		i++;
	} else {
		for (;;) {
			/* the run of unreserved and sub-delims (':' is neither),
			 * then what ended it: the port's ':', a pct-encoded byte,
			 * or a byte that may not be there */
			while (i < len && http_is((unsigned char)p[i], HTTP_C_REGNAME))
				i++;
			if (i == len || p[i] == ':')
				break;
			if (p[i] != '%' || i + 2 >= len || !http_is((unsigned char)p[i + 1], HTTP_C_HEX) ||
			    !http_is((unsigned char)p[i + 2], HTTP_C_HEX))
				return 0;
			i += 3;
		}
		if (i == 0)
			return 0;
	}
	if (i == len)
		return 1;
	if (p[i] != ':')
		return 0;
	n = len - i - 1;
	if (n == 0 || n > 5)
		return 0;
	for (i++; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		port = port * 10 + (unsigned)(p[i] - '0');
	}
	return port <= 65535;
}
