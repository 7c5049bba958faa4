/*
 * trailers.c: the trailer section's checks and iteration (trailers.h).
 */
#include "worker/h1/trailers.h"

#include <string.h>

#include "worker/h1/h1.h"

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

size_t trailers_filter(char *p, size_t len, uint32_t *dropped)
{
	size_t off = 0, out = 0;

	*dropped = 0;
	while (off < len) {
		size_t start = off, nlen, vlen;
		const char *name, *value;

		if (!trailers_next(p, len, &off, &name, &nlen, &value, &vlen)) {
			/* the final CRLF */
			memmove(p + out, p + start, len - start);
			return out + len - start;
		}
		if (trailers_forbidden(name, nlen)) {
			(*dropped)++;
			continue;
		}
		if (out != start)
			memmove(p + out, p + start, off - start);
		out += off - start;
	}
	return out;
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
