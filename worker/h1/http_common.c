/*
 * http_common.c: head validation shared by requests and responses.
 *
 * http-parser (Debian's build is non-strict) gives the start line and the
 * header split through its callbacks; the line scanner below walks the
 * same bytes first and decides where the head ends. The parser is only
 * ever given bytes the scanner has accepted, up to and including the final
 * LF, so it never sees a body byte; it is also paused in
 * on_headers_complete as a second guard. Both must agree on where the head
 * ends, or the head is refused.
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
	0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x12, 0x02, 0x12, 0x13, 0x33,
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

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c >= 'A' && c <= 'Z')
			c |= 0x20;
		if (lower[i] == '\0' || c != (unsigned char)lower[i])
			return 0;
	}
	return lower[len] == '\0';
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

/* Records the first error a callback found and stops the parser. */
static int cb_fail(struct http_head_state *st, int rc)
{
	if (!st->error)
		st->error = rc;
	return -1;
}

/*
 * The request target, possibly in several pieces (one per feed). Every
 * byte must be VCHAR: http-parser lets HTAB, FF and bytes >= 0x80 through.
 */
/* Grows the start-line token by a piece; pieces must be contiguous in the
 * buffer (anything else means the library skipped bytes). */
static int tok_extend(struct http_head_state *st, const char *at, size_t n)
{
	if (!st->tok)
		st->tok = at;
	if (at != st->tok + st->tok_len)
		return -1;
	st->tok_len += n;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct http_head_state *st = p->data;
	size_t i;

	if (tok_extend(st, at, n) < 0)
		return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	if (st->tok_len > st->max_uri)
		return cb_fail(st, WEIR_ERR(URI_TOO_LONG));
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)at[i];

		if (c <= 0x20 || c >= 0x7f)
			return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	}
	return 0;
}

/* The reason phrase: HTAB, SP, VCHAR, obs-text (the library takes CTLs). */
static int on_status(http_parser *p, const char *at, size_t n)
{
	struct http_head_state *st = p->data;
	size_t i;

	if (tok_extend(st, at, n) < 0)
		return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	for (i = 0; i < n; i++)
		if (!http_is((unsigned char)at[i], HTTP_C_VCHAR | HTTP_C_WS))
			return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	return 0;
}

/*
 * A header name or a piece of one. The non-strict library takes a space
 * inside a name ("Host : x" gives the name "Host "), so every byte is
 * checked against tchar here.
 */
static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct http_head_state *st = p->data;
	struct hdr *h;
	size_t i;

	if (st->in_value || st->nhdrs == 0) {
		if (st->nhdrs >= st->max_headers)
			return cb_fail(st, WEIR_ERR(HEADERS_TOO_LARGE));
		h = &st->hdrs[st->nhdrs++];
		memset(h, 0, sizeof(*h));
		h->name = at;
		st->in_value = 0;
	} else {
		h = &st->hdrs[st->nhdrs - 1];
	}
	if (at != h->name + h->name_len)
		return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	for (i = 0; i < n; i++)
		if (!http_is((unsigned char)at[i], HTTP_C_TCHAR))
			return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	h->name_len += (uint32_t)n;
	return 0;
}

/*
 * A header value or a piece of one, leading whitespace already skipped by
 * the library. Pieces must be contiguous: the library reports an obs-fold
 * as a second piece after a gap (the scanner refuses folds before that).
 */
static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct http_head_state *st = p->data;
	struct hdr *h;
	size_t i;

	if (st->nhdrs == 0)
		return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	h = &st->hdrs[st->nhdrs - 1];
	if (!st->in_value) {
		h->value = at;
		h->value_len = 0;
		st->in_value = 1;
	}
	if (at != h->value + h->value_len)
		return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	for (i = 0; i < n; i++)
		if (!http_is((unsigned char)at[i], HTTP_C_VCHAR | HTTP_C_WS))
			return cb_fail(st, WEIR_ERR(BAD_REQUEST));
	h->value_len += (uint32_t)n;
	return 0;
}

/* Stops the parser at the final LF: the body is the caller's business. */
static int on_headers_complete(http_parser *p)
{
	struct http_head_state *st = p->data;

	st->done = 1;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings head_settings = {
	.on_url = on_url,
	.on_status = on_status,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
};

void http_head_init(struct http_head_state *st, enum http_parser_type type, struct msg *m,
                    struct arena *a, uint32_t max_headers, size_t max_head)
{
	uint32_t room;

	memset(st, 0, sizeof(*st));
	memset(m, 0, sizeof(*m));
	arena_reset(a);
	http_parser_init(&st->parser, type);
	st->parser.data = st;
	/* Framing is weir's (http_head_finish and the request and response
	 * rules), from its own header list. http-parser 2.9.4 takes every name
	 * that starts with "Transfer-Encoding" ("Transfer-Encoding-Hint") for
	 * the real one and refuses it beside a Content-Length: with these two
	 * flags it never judges TE with CL. Lenient only lets controls through
	 * to the value callback, which refuses them itself. */
	st->parser.allow_chunked_length = 1;
	st->parser.lenient_http_headers = 1;
	st->m = m;
	st->arena = a;
	st->hdrs = hlist_open(a, max_headers > HTTP_MAX_HEADERS ? HTTP_MAX_HEADERS : max_headers, &room);
	st->max_headers = room;
	m->hl.v = st->hdrs;
	st->max_head = max_head;
	/* RFC 9112 2.2: a server SHOULD ignore at least one empty line before
	 * the request-line; http-parser does. Before a status line they would
	 * mean the previous response was framed wrongly, so they are refused. */
	st->leading_crlf = type == HTTP_REQUEST;
}

/*
 * The line scanner: looks at <buf>[st->fed..limit) and stops after the
 * final CRLF. Sets *stop to the offset the parser may be fed up to and
 * returns 0, or WEIR_EBAD_REQUEST with *stop at the offending byte for a
 * bare CR, a bare LF, an obs-fold line, or an empty line where none may be.
 */
static int scan_lines(struct http_head_state *st, const char *buf, size_t limit, size_t *stop)
{
	size_t i = st->fed;

	/* memchr finds the line ends: every head byte is looked at by the
	 * parser anyway, this pass only has to place CRs and LFs */
	while (i < limit) {
		const char *cr, *lf;
		size_t j;

		if (st->cr) {
			if (buf[i] != '\n')
				goto bad;
			st->cr = 0;
			if (i - 1 == st->line_start) {
				if (st->nlines > 0) {
					st->head_end = i + 1;
					*stop = i + 1;
					return 0;
				}
				if (!st->leading_crlf)
					goto bad;
			} else if (st->nlines++ == 0) {
				st->line0 = st->line_start;
				st->line0_end = i - 1;
			}
			st->line_start = ++i;
			continue;
		}
		if (i == st->line_start && st->nlines > 0 && (buf[i] == ' ' || buf[i] == '\t'))
			goto bad; /* obs-fold, or whitespace before a field name */
		cr = memchr(buf + i, '\r', limit - i);
		j = cr ? (size_t)(cr - buf) : limit;
		lf = memchr(buf + i, '\n', j - i);
		if (lf) {
			i = (size_t)(lf - buf); /* a bare LF */
			goto bad;
		}
		if (!cr)
			break;
		st->cr = 1;
		i = j + 1;
	}
	*stop = limit;
	return 0;
bad:
	*stop = i;
	return WEIR_ERR(BAD_REQUEST);
}

/* Maps an http-parser error that no callback caused to a weir code. */
static int parser_err(enum http_errno e)
{
	switch (e) {
	case HPE_INVALID_CONTENT_LENGTH:
	case HPE_UNEXPECTED_CONTENT_LENGTH:
	case HPE_INVALID_TRANSFER_ENCODING:
		return WEIR_ERR(SMUGGLING);
	case HPE_HEADER_OVERFLOW:
		return WEIR_ERR(HEADERS_TOO_LARGE);
	default:
		return WEIR_ERR(BAD_REQUEST);
	}
}

int http_head_feed(struct http_head_state *st, const char *buf, size_t len)
{
	size_t limit, stop = 0, n;
	int raw;

	if (st->error)
		return st->error;
	if (st->done)
		return 0;
	if (st->fed > 0 && buf != st->start)
		return st->error = WEIR_ERR(BAD_REQUEST); /* the buffer moved */
	st->start = buf;
	st->parser.data = st;

	limit = len < st->max_head ? len : st->max_head;
	if (st->fed >= limit)
		goto incomplete;
	raw = scan_lines(st, buf, limit, &stop);

	/* The parser gets the bytes before the scanner's error, if any, so
	 * that the first fault in the byte stream is the one reported. */
	if (stop > st->fed) {
		n = http_parser_execute(&st->parser, &head_settings, buf + st->fed, stop - st->fed);
		if (st->done) {
			/* Paused on the final LF, which it did not count. */
			if (st->fed + n + 1 != st->head_end)
				return st->error = WEIR_ERR(BAD_REQUEST);
		} else if (HTTP_PARSER_ERRNO(&st->parser) != HPE_OK) {
			return st->error = st->error ? st->error
			                             : parser_err(HTTP_PARSER_ERRNO(&st->parser));
		} else if (n != stop - st->fed) {
			return st->error = WEIR_ERR(BAD_REQUEST);
		}
		st->fed = stop;
	}
	if (raw)
		return st->error = raw;
	if (st->done)
		return 0;
	if (st->head_end) /* the scanner saw the end, the parser did not */
		return st->error = WEIR_ERR(BAD_REQUEST);
incomplete:
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
 * a '_' (one memchr: most names have none) makes at most a lookalike. */
static void name_token(struct hdr *h)
{
	const char *n = h->name;
	size_t l = h->name_len;
	enum hdr_tok tok;

	if (l >= 6 && span_iprefix(n, l, "proxy-")) {
		/* every Proxy-* name is hop-by-hop, well-known or not */
		if (memchr(n, '_', l)) {
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
	if (memchr(n, '_', l)) {
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
		for (; i < len && p[i] != ':'; i++) {
			unsigned char c = (unsigned char)p[i];

			if (c == '%') {
				if (i + 2 >= len || !http_is((unsigned char)p[i + 1], HTTP_C_HEX) ||
				    !http_is((unsigned char)p[i + 2], HTTP_C_HEX))
					return 0;
				i += 2;
			} else if (!http_is(c, HTTP_C_REGNAME)) {
				return 0;
			}
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
