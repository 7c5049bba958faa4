/*
 * http_request.c: request heads (RFC 9112 2-3, 6; RFC 9110 7.2).
 *
 * http_common.c validates the bytes and the header fields; this file adds
 * what only a request has: the request line, the target forms weir serves
 * (origin-form, absolute-form, "*" with OPTIONS), Host, and the request
 * framing rules whose violations are smuggling attempts.
 */
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "worker/h1/http_internal.h"

void http_request_init(struct http_request *r, struct msg *m, struct arena *a,
                       const struct config_limits *lim)
{
	http_head_init(&r->st, HTTP_REQUEST, m, a, lim->headers, lim->header_size);
	r->m = m;
	r->st.max_uri = lim->uri_size;
	r->st.max_body = lim->body_size;
}

/*
 * Splits the target into m->target, m->path_end and, for absolute-form,
 * m->scheme and m->host. Every byte is already known to be VCHAR (on_url).
 */
static int parse_target(struct http_request *r)
{
	const char *t = r->st.tok, *end = t + r->st.tok_len, *a, *aend;
	size_t skip;

	if (r->m->method_id == HTTP_CONNECT) /* authority-form: weir is no tunnel */
		return WEIR_ERR(BAD_REQUEST);
	if (memchr(t, '#', r->st.tok_len)) /* a fragment is never sent */
		return WEIR_ERR(BAD_REQUEST);
	if (r->st.tok_len == 1 && t[0] == '*') {
		if (r->m->method_id != HTTP_OPTIONS)
			return WEIR_ERR(BAD_REQUEST);
		r->m->target = t;
		r->m->target_len = 1;
		r->m->path_end = t + 1;
		return 0;
	}
	if (t[0] != '/') {
		/* absolute-form: "http://" authority path-abempty [ "?" query ] */
		if (r->st.tok_len >= 7 && http_span_ieq(t, 7, "http://"))
			skip = 7;
		else if (r->st.tok_len >= 8 && http_span_ieq(t, 8, "https://"))
			skip = 8;
		else
			return WEIR_ERR(BAD_REQUEST);
		r->m->scheme = skip == 7 ? "http" : "https";
		a = t + skip;
		for (aend = a; aend < end && *aend != '/' && *aend != '?'; aend++)
			;
		/* userinfo ("user@host") is refused, RFC 9110 4.2.4 */
		if (memchr(a, '@', (size_t)(aend - a)) || !http_host_valid(a, (size_t)(aend - a)))
			return WEIR_ERR(BAD_REQUEST);
		r->m->host = a;
		r->m->host_len = (uint32_t)(aend - a);
		if (aend == end) {
			t = "/";
			end = t + 1;
		} else if (*aend == '?') {
			/* "http://h?q" would need "/?q", which is not in the
			 * buffer; no client sends it. */
			return WEIR_ERR(BAD_REQUEST);
		} else {
			t = aend;
		}
	}
	r->m->target = t;
	r->m->target_len = (uint32_t)(end - t);
	r->m->path_end = memchr(t, '?', (size_t)(end - t));
	if (!r->m->path_end)
		r->m->path_end = end;
	return 0;
}

/* RFC 9112 6.1-6.3: anything two parsers could frame differently fails. */
static int request_framing(struct http_request *r, const struct http_head_info *info)
{
	/* HTTP/1.0 has no chunked coding, HTTP/2 no transfer coding at all
	 * (RFC 9113 8.2.2): a client that sends one frames for another parser */
	if (info->nte > 0 && (r->m->version_minor == 0 || r->st.fields))
		return WEIR_ERR(SMUGGLING);
	if (info->nte > 0 && info->ncl > 0)
		return WEIR_ERR(SMUGGLING);
	if (info->ncl > 1 || (info->ncl == 1 && !info->cl_ok))
		return WEIR_ERR(SMUGGLING);
	if (info->nte > 0 && !info->te_chunked)
		return WEIR_ERR(SMUGGLING);
	if (info->nte > 0) {
		r->m->body = HTTP_BODY_CHUNKED;
	} else if (info->ncl == 1) {
		r->m->body = HTTP_BODY_LENGTH;
		r->m->content_length = info->content_length;
		if (r->st.max_body && r->m->content_length > r->st.max_body)
			return WEIR_ERR(BODY_TOO_LARGE);
	} else {
		r->m->body = HTTP_BODY_NONE;
	}
	return 0;
}

/* HTTP/1.1 needs exactly one Host (RFC 9112 3.2); HTTP/1.0 at most one. */
static int request_host(struct http_request *r, const struct http_head_info *info)
{
	if (info->nhost > 1 || (r->m->version_minor == 1 && info->nhost == 0))
		return WEIR_ERR(BAD_REQUEST);
	if (info->host && !http_host_valid(info->host->value, info->host->value_len))
		return WEIR_ERR(BAD_REQUEST);
	if (!r->m->host && info->host) { /* absolute-form authority wins */
		r->m->host = info->host->value;
		r->m->host_len = info->host->value_len;
	}
	return 0;
}

static int request_finish(struct http_request *r, const char *buf)
{
	struct http_head_info info;
	int rc;

	(void)buf;
	r->m->method_id = (enum http_method)r->st.method_id;
	r->m->method = http_method_name(r->m->method_id, &r->m->method_len);
	r->m->version_minor = r->st.version_minor;
	r->m->head_len = r->st.head_end;

	/* the request line was checked whole as it ended (http_common.c) */
	rc = parse_target(r);
	if (!rc)
		rc = http_head_finish(&r->st, &info);
	if (!rc)
		rc = request_framing(r, &info);
	if (!rc)
		rc = request_host(r, &info);
	if (rc)
		return rc;
	r->m->keep_alive = http_keep_alive(r->m->version_minor, &info);
	/* RFC 9110 10.1.1: a 100-continue from an HTTP/1.0 client is ignored. */
	r->m->expect_continue = r->m->version_minor == 1 && info.expect_continue;
	r->m->conn_upgrade = info.conn_upgrade != 0;
	r->m->upgrade = info.nupgrade == 1 ? info.upgrade : NULL;
	return 0;
}

int http_request_parse(struct http_request *r, const char *buf, size_t len)
{
	int was_done = r->st.done, rc;

	rc = http_head_feed(&r->st, buf, len);
	r->m->hl.n = r->st.nhdrs;
	if (rc || was_done)
		return rc;
	rc = request_finish(r, buf);
	if (rc)
		r->st.error = rc;
	return rc;
}

/* ---- a head that comes as fields (HTTP/2) ------------------------------ */

int http_request_begin_fields(struct http_request *r, const char *method, size_t mlen, const char *target,
                              size_t tlen)
{
	struct http_head_state *st = &r->st;
	int id = http_method_lookup(method, mlen);
	size_t i;

	st->fields = 1;
	st->version_minor = 1;
	/* the request line it would be: method SP target SP HTTP/1.1 CRLF */
	st->head_end = r->m->head_len = mlen + tlen + 12;
	if (id < 0)
		return WEIR_ERR(BAD_REQUEST);
	for (i = 0; i < tlen && http_target_char((unsigned char)target[i]); i++)
		;
	if (i > st->max_uri)
		return WEIR_ERR(URI_TOO_LONG);
	/* origin-form, or "*" (OPTIONS: parse_target): the authority is a
	 * field of its own, never in the target */
	if (i != tlen || tlen == 0 || (target[0] != '/' && !(tlen == 1 && target[0] == '*')))
		return WEIR_ERR(BAD_REQUEST);
	st->method_id = (uint8_t)id;
	st->tok = target;
	st->tok_len = tlen;
	return 0;
}

int http_request_add_field(struct http_request *r, const char *n, size_t nlen, const char *v, size_t vlen)
{
	int rc = http_head_field(&r->st, n, nlen, v, vlen);

	r->m->head_len = r->st.head_end;
	return rc;
}

int http_request_end_fields(struct http_request *r, int open_body)
{
	int rc;

	/* whole, as a head is once its blank line came: the access log may
	 * read its fields even if a rule below refuses it */
	r->st.done = 1;
	r->m->head_len = r->st.head_end += 2; /* the blank line */
	r->m->hl.n = r->st.nhdrs;
	if (r->st.head_end > r->st.max_head)
		return WEIR_ERR(HEADERS_TOO_LARGE);
	rc = request_finish(r, NULL);
	if (rc)
		return rc;
	/* no length said, the body ends with the stream: chunked, as HTTP/1
	 * frames such a body (the upstream side writes it so; the stream's
	 * codec hands its DATA up as it came, with nothing to decode) */
	if (open_body && r->m->body == HTTP_BODY_NONE)
		r->m->body = HTTP_BODY_CHUNKED;
	r->m->keep_alive = 1; /* a stream ends, its connection stays */
	return 0;
}
