/*
 * http_response.c: response heads from upstreams (RFC 9112 4, 6).
 *
 * The same byte and field checks as requests (http_common.c), plus the
 * status line and response framing. An upstream is trusted no more than a
 * client: every failure is WEIR_EUPSTREAM_BAD_RESPONSE, and the connection
 * is not reused.
 */
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "worker/h1/http_internal.h"

void http_response_init(struct http_response *r, struct msg *m, struct arena *a,
                        uint32_t max_headers, size_t max_head, enum http_method method_id)
{
	/* A 304 or a HEAD response may carry both TE and CL; the rules below
	 * decide, not http-parser (http_head_init). */
	http_head_init(&r->st, HTTP_RESPONSE, m, a, max_headers, max_head);
	r->m = m;
	r->st.head_method = method_id == HTTP_HEAD;
}

/*
 * "HTTP/1.x" SP 3DIGIT [ SP reason ]: the library takes two-digit codes,
 * leading zeros ("0200"), several spaces and any major version. A missing
 * reason with its space is accepted (RFC 9112 4 says recipients SHOULD).
 */
static int check_status_line(struct http_response *r, const char *buf)
{
	const char *line = buf + r->st.line0;
	size_t len = r->st.line0_end - r->st.line0, i;
	int code = 0;

	if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
	    line[8] != ' ' || (len > 12 && line[12] != ' '))
		return -1;
	for (i = 9; i < 12; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -1;
		code = code * 10 + (line[i] - '0');
	}
	if (code < 100 || code > 599)
		return -1;
	r->m->status = code;
	r->m->version_minor = line[7] - '0';
	r->m->reason = line + (len > 12 ? 13 : 12);
	r->m->reason_len = (uint32_t)(len > 12 ? len - 13 : 0);
	for (i = 0; i < r->m->reason_len; i++)
		if (!http_is((unsigned char)r->m->reason[i], HTTP_C_VCHAR | HTTP_C_WS))
			return -1;
	return 0;
}

/* RFC 9112 6.3, in its order; returns -1 on framing weir will not relay. */
static int response_framing(struct http_response *r, const struct http_head_info *info)
{
	if (info->ncl > 1 || (info->ncl == 1 && !info->cl_ok))
		return -1;
	if (r->m->status < 200 || r->m->status == 204 || r->m->status == 304 || r->st.head_method) {
		/* No body, whatever the headers say; Transfer-Encoding is
		 * ignored and Content-Length only had to be a number: a HEAD
		 * response's or a 304's describes the body it does not carry,
		 * information the writer passes on (never a 1xx's or 204's) */
		r->m->body = HTTP_BODY_NONE;
		if (info->ncl == 1 && r->m->status >= 200 && r->m->status != 204) {
			r->m->length_info = 1;
			r->m->content_length = info->content_length;
		}
		return 0;
	}
	/* RFC 9112 6.1: TE in an HTTP/1.0 message means faulty framing. */
	if (info->nte > 0 && (r->m->version_minor == 0 || info->ncl > 0 || !info->te_chunked))
		return -1;
	if (info->nte > 0) {
		r->m->body = HTTP_BODY_CHUNKED;
	} else if (info->ncl == 1) {
		r->m->body = HTTP_BODY_LENGTH;
		r->m->content_length = info->content_length;
	} else {
		r->m->body = HTTP_BODY_CLOSE;
	}
	return 0;
}

/* The list read: flags, framing and what the connection may do next. */
static int response_fields_finish(struct http_response *r)
{
	struct http_head_info info;

	if (http_head_finish(&r->st, &info) || response_framing(r, &info))
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	r->m->keep_alive = http_keep_alive(r->m->version_minor, &info);
	r->m->conn_upgrade = info.conn_upgrade != 0;
	r->m->upgrade = info.nupgrade == 1 ? info.upgrade : NULL;
	if (r->m->body == HTTP_BODY_CLOSE)
		r->m->keep_alive = 0;
	return 0;
}

static int response_finish(struct http_response *r, const char *buf)
{
	r->m->head_len = r->st.head_end;
	if (check_status_line(r, buf))
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	return response_fields_finish(r);
}

int http_response_field(struct http_response *r, const char *name, size_t nlen, const char *value, size_t vlen)
{
	int rc;

	if (!r->st.fields) {
		/* held to the size limit as the text head would be, its status
		 * line without a reason ("HTTP/1.1 200 \r\n") counted in */
		r->st.fields = 1;
		r->st.head_end = 15;
	}
	rc = r->st.error ? r->st.error : http_head_field(&r->st, name, nlen, value, vlen);

	r->m->hl.n = r->st.nhdrs;
	if (rc)
		r->st.error = WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	return r->st.error;
}

int http_response_fields_end(struct http_response *r, int status)
{
	int rc = r->st.error;

	r->m->status = status;
	r->m->version_minor = 1; /* as weir writes its own Via: "1.1 weir" */
	r->m->reason = "";
	r->m->reason_len = 0;
	r->m->head_len = 0; /* nothing of it lies in an input buffer */
	if (!rc && (status < 100 || status > 599))
		rc = WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	if (!rc)
		rc = response_fields_finish(r);
	/* HTTP/2 has no transfer coding (RFC 9113 8.2.2), and a body with no
	 * length ends with its stream: framed "until the close" of it */
	if (!rc && r->m->body == HTTP_BODY_CHUNKED)
		rc = WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	r->st.done = 1;
	if (rc)
		r->st.error = rc;
	return rc;
}

int http_response_parse(struct http_response *r, const char *buf, size_t len)
{
	int was_done = r->st.done, rc;

	rc = http_head_feed(&r->st, buf, len);
	r->m->hl.n = r->st.nhdrs;
	if (rc == WEIR_EAGAIN)
		return rc;
	if (rc < 0) {
		r->st.error = WEIR_ERR(UPSTREAM_BAD_RESPONSE);
		return r->st.error;
	}
	if (was_done)
		return 0;
	rc = response_finish(r, buf);
	if (rc)
		r->st.error = rc;
	return rc;
}
