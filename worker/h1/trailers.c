/*
 * trailers.c: the trailer section's checks and iteration (h1.h, trailers).
 */

#include <string.h>

#include "worker/h1/h1.h"
#include "worker/msg/msg.h"

/* RFC 9110 6.5.1: fields a recipient must not take from trailers, and
 * the hop-by-hop ones; lower case. Trailers are rare and short: a walk. */
static const char *const trailers_refused[] = {
	"transfer-encoding", "content-length", "host", "connection", "keep-alive", "proxy-connection",
	"te", "trailer", "upgrade", "http2-settings", "expect", "max-forwards", "range", "if-match",
	"if-none-match", "if-modified-since", "if-unmodified-since", "if-range", "cache-control", "pragma",
	"authorization", "proxy-authorization", "www-authenticate", "proxy-authenticate", "cookie",
	"set-cookie", "age", "expires", "date", "location", "retry-after", "vary", "warning",
	"content-type", "content-encoding", "content-range",
};

int trailers_forbidden(const char *p, size_t len)
{
	for (size_t i = 0; i < sizeof(trailers_refused) / sizeof(trailers_refused[0]); i++)
		if (http_span_ieq(p, len, trailers_refused[i]))
			return 1;
	return 0;
}

/* The end of the line at <p>[off..len): past its LF (the decoder saw
 * CRLF end every line). */
static size_t trailers_eol(const char *p, size_t len, size_t off)
{
	const char *lf = memchr(p + off, '\n', len - off);

	return lf ? (size_t)(lf - p) + 1 : len;
}

int trailers_next(const char *p, size_t len, size_t *off, const char **name, size_t *nlen, const char **value,
                  size_t *vlen)
{
	size_t o = *off, end, colon, v, ve;

	if (o >= len || p[o] == '\r')
		return 0;
	end = trailers_eol(p, len, o);
	for (colon = o; colon < end && p[colon] != ':'; colon++)
		;
	ve = end >= 2 ? end - 2 : end; /* before the CRLF */
	for (v = colon + 1; v < ve && (p[v] == ' ' || p[v] == '\t'); v++)
		;
	while (ve > v && (p[ve - 1] == ' ' || p[ve - 1] == '\t'))
		ve--;
	*name = p + o;
	*nlen = colon - o;
	*value = p + v;
	*vlen = ve - v;
	*off = end;
	return 1;
}

/* Entry <h> for field <name>[0..nlen), <value>[0..vlen). */
static void trailers_entry(struct hdr *h, const char *name, size_t nlen, const char *value, size_t vlen)
{
	h->name = name;
	h->name_len = (uint32_t)nlen;
	h->value = value;
	h->value_len = (uint32_t)vlen;
	h->tok = (uint16_t)hdr_token(name, nlen);
	h->flags = hdr_tokens[h->tok].flags;
}

uint32_t trailers_list(const char *p, size_t len, struct hdr *v, uint32_t *dropped)
{
	size_t off = 0, nlen, vlen;
	const char *name, *value;
	uint32_t n = 0;

	*dropped = 0;
	while (trailers_next(p, len, &off, &name, &nlen, &value, &vlen)) {
		if (trailers_forbidden(name, nlen) || n == TRAILERS_FIELDS) {
			(*dropped)++;
			continue;
		}
		trailers_entry(&v[n], name, nlen, value, vlen);
		v[n++].flags |= TRAILER_LINE;
	}
	return n;
}

size_t trailers_line_len(const struct hdr *h)
{
	const char *e = h->value + h->value_len;

	if (!(h->flags & TRAILER_LINE))
		return h->name_len + h->value_len + 4;
	while (*e != '\r') /* OWS: the decoder saw the line end in CRLF */
		e++;
	return (size_t)(e + 2 - h->name);
}

size_t trailers_size(const struct hdr *v, uint32_t n)
{
	size_t len = 2;

	for (uint32_t i = 0; i < n; i++)
		len += trailers_line_len(&v[i]);
	return len;
}

size_t trailers_in_place(const struct hdr *v, uint32_t n)
{
	const char *at = n ? v[0].name : NULL;

	for (uint32_t i = 0; i < n; i++) {
		if (!(v[i].flags & TRAILER_LINE) || v[i].name != at)
			return 0;
		at += trailers_line_len(&v[i]);
	}
	/* a kept line's CRLF is followed by a line or the final CRLF */
	if (!at || at[0] != '\r')
		return 0;
	return (size_t)(at + 2 - v[0].name);
}

size_t trailers_write(char *dst, const struct hdr *v, uint32_t n)
{
	char *o = dst;

	for (uint32_t i = 0; i < n; i++) {
		if (v[i].flags & TRAILER_LINE) { /* as it came */
			size_t len = trailers_line_len(&v[i]);

			memcpy(o, v[i].name, len);
			o += len;
			continue;
		}
		memcpy(o, v[i].name, v[i].name_len);
		o += v[i].name_len;
		memcpy(o, ": ", 2);
		memcpy(o + 2, v[i].value, v[i].value_len);
		o += 2 + v[i].value_len;
		memcpy(o, "\r\n", 2);
		o += 2;
	}
	memcpy(o, "\r\n", 2);
	return (size_t)(o + 2 - dst);
}

size_t trailers_rec_add(char *dst, const char *name, size_t nlen, const char *value, size_t vlen, int lower)
{
	dst[0] = (char)(nlen >> 8);
	dst[1] = (char)nlen;
	dst[2] = (char)(vlen >> 8);
	dst[3] = (char)vlen;
	for (size_t k = 0; k < nlen; k++)
		dst[4 + k] = (char)(lower && name[k] >= 'A' && name[k] <= 'Z' ? name[k] | 0x20 : name[k]);
	memcpy(dst + 4 + nlen, value, vlen);
	return nlen + vlen + 4;
}

uint32_t trailers_rec_list(const char *p, size_t len, struct hdr *v)
{
	size_t off = 0;
	uint32_t n = 0;

	while (off + 4 <= len && n < TRAILERS_FIELDS) {
		const unsigned char *u = (const unsigned char *)p + off;
		size_t nlen = (size_t)u[0] << 8 | u[1], vlen = (size_t)u[2] << 8 | u[3];

		trailers_entry(&v[n++], p + off + 4, nlen, p + off + 4 + nlen, vlen);
		off += nlen + vlen + 4;
	}
	return n;
}

int trailers_te_listed(const char *p, size_t len)
{
	size_t i = 0;

	/* members are tokens with parameters, comma-separated, OWS around */
	while (i < len) {
		size_t s, e;

		while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == ','))
			i++;
		s = i;
		while (i < len && p[i] != ',' && p[i] != ';' && p[i] != ' ' && p[i] != '\t')
			i++;
		e = i;
		if (http_span_ieq(p + s, e - s, "trailers"))
			return 1;
		while (i < len && p[i] != ',')
			i++;
	}
	return 0;
}
