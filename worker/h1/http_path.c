/*
 * http_path.c: the request path weir routes on and forwards (RFC 3986 6.2.2).
 *
 * A prefix route must see the path the upstream will act on:
 * "/public/../internal" and "/public/%2e%2e/internal" are /internal to any
 * server that resolves them, so they are routed and forwarded as
 * "/internal". The path is normalised the way RFC 3986 6.2.2 describes:
 * percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) decoded
 * (6.2.2.2), the hex digits of every other percent-encoding upper-cased
 * (6.2.2.1) and the encoding kept ("%2F" stays an encoded slash, never a
 * separator), then dot segments removed (5.2.4). The query is not touched.
 *
 * Unlike 5.2.4, which stops ".." at the root ("/../x" is "/x"), a path
 * that climbs above the root is refused: no honest client sends one, and
 * a server that resolves it otherwise (a file server joining it to its
 * root) must never be reached by it. So are a malformed percent-encoding
 * and an encoded NUL, which C backends read as the end of the string.
 *
 * Refused too, since some servers read them as something weir did not
 * route (all 400 bad_path, as strict gateways answer):
 * - a backslash, raw or "%5C": IIS, ASP.NET and some Java servers take it
 *   for '/', so "/public\..\internal" is /internal to them. It is no URI
 *   character (RFC 3986 2), so no honest client sends one; decoding it to
 *   '/' instead would guess at one server family's reading for all.
 * - a dot segment with parameters, "/..;x/" or "/.;/" (also "%2e" and
 *   "%3B" spelled): Tomcat and Spring strip ";params" from a segment before
 *   they resolve dots, so "/public/..;/internal" is /internal to them while
 *   to RFC 3986 "..;" is a name.
 *
 * Runs of '/' are merged into one when asked (merge_slashes, on by
 * default, as in nginx): most servers and frameworks treat "//admin" as
 * "/admin", so a "/admin/" route must see it so. They are merged before
 * dots are resolved, as nginx does: "/a//../b" is "/b". An encoded "%2F"
 * is no separator and is never merged.
 *
 * Every step keeps or shortens the path, so it is rewritten in place in
 * the request's own bytes: no copy, no memory. A path with no '%', no
 * '\', no "/." and (merging) no "//" cannot change and is only scanned.
 */
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "worker/h1/http_internal.h"

static int path_hex(unsigned char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static int path_unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '.' || c == '_' || c == '~';
}

/* 1 for a segment that is "." once decoded, 2 for "..", else 0. */
static int path_dots(const char *s, size_t n)
{
	int dots = 0;

	for (size_t i = 0; i < n; dots++) {
		if (dots == 2)
			return 0;
		if (s[i] == '.')
			i++;
		else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' && (s[i + 2] | 0x20) == 'e')
			i += 3;
		else
			return 0;
	}
	return dots;
}

/*
 * The read-only pass: is every percent-encoding valid and not NUL, and does
 * the path stay under the root? Sets *change when the rewrite would change
 * a byte. Returns 0 or WEIR_ERR(BAD_PATH).
 */
static int path_check(const char *p, size_t len, int merge, int *change)
{
	uint32_t depth = 0;
	size_t i = 1;

	for (;;) {
		size_t seg = i, params = 0;
		int dots;

		for (; i < len && p[i] != '/'; i++) {
			unsigned char h, l, v;

			if (p[i] == '\\')
				return WEIR_ERR(BAD_PATH);
			if (p[i] == ';' && !params)
				params = i;
			if (p[i] != '%')
				continue;
			if (len - i < 3 || !http_is((unsigned char)p[i + 1], HTTP_C_HEX) ||
			    !http_is((unsigned char)p[i + 2], HTTP_C_HEX))
				return WEIR_ERR(BAD_PATH);
			h = (unsigned char)p[i + 1];
			l = (unsigned char)p[i + 2];
			v = (unsigned char)(path_hex(h) << 4 | path_hex(l));
			if (v == 0 || v == '\\')
				return WEIR_ERR(BAD_PATH);
			if (v == ';' && !params)
				params = i;
			if (path_unreserved(v) || h >= 'a' || l >= 'a')
				*change = 1;
			i += 2;
		}
		/* "..;x" is ".." to a server that strips parameters first */
		if (params && path_dots(p + seg, params - seg))
			return WEIR_ERR(BAD_PATH);
		if (merge && i == seg && i < len) {
			/* an empty segment between two '/': merged away */
			*change = 1;
			i++;
			continue;
		}
		dots = path_dots(p + seg, i - seg);
		if (dots)
			*change = 1;
		if (dots == 2) {
			if (depth == 0)
				return WEIR_ERR(BAD_PATH);
			depth--;
		} else if (dots == 0) {
			depth++;
		}
		if (i == len)
			return 0;
		i++; /* the '/' */
	}
}

int http_path_normalize(char *p, size_t len, unsigned flags, size_t *out_len)
{
	size_t r = 1, w = 0;
	int change = 0, rc, last_dots = 0, merge = (flags & HTTP_PATH_MERGE_SLASHES) != 0;
	const char *dot;

	*out_len = len;
	if (len == 0 || p[0] != '/')
		return WEIR_ERR(BAD_PATH);
	/* the fast path: without '%' only a segment that starts with '.' can
	 * be a dot segment (with or without parameters) */
	dot = memchr(p, '.', len);
	while (dot && dot[-1] != '/')
		dot = memchr(dot + 1, '.', len - (size_t)(dot + 1 - p));
	if (!dot && !memchr(p, '%', len) && !memchr(p, '\\', len) && !(merge && memmem(p, len, "//", 2)))
		return 0;
	rc = path_check(p, len, merge, &change);
	if (rc || !change)
		return rc;

	/* The rewrite, one segment at a time: w never passes r, since every
	 * input byte gives at most one output byte and is read first. */
	for (;;) {
		size_t seg, n;

		if (merge) /* path_check counted no segment between these */
			while (r < len && p[r] == '/')
				r++;
		p[w++] = '/';
		seg = w;
		for (; r < len && p[r] != '/'; r++) {
			unsigned char c = (unsigned char)p[r];

			if (c == '%') {
				unsigned char h = (unsigned char)p[r + 1], l = (unsigned char)p[r + 2];
				unsigned char v = (unsigned char)(path_hex(h) << 4 | path_hex(l));

				r += 2;
				if (path_unreserved(v)) {
					p[w++] = (char)v;
				} else {
					p[w++] = '%';
					p[w++] = (char)(h >= 'a' ? h - 0x20 : h);
					p[w++] = (char)(l >= 'a' ? l - 0x20 : l);
				}
				continue;
			}
			p[w++] = (char)c;
		}
		/* decoded, a dot segment is exactly "." or ".." */
		n = w - seg;
		last_dots = n == 1 && p[seg] == '.' ? 1 : n == 2 && p[seg] == '.' && p[seg + 1] == '.' ? 2 : 0;
		if (last_dots) {
			w = seg - 1; /* drop "/." or "/.." */
			if (last_dots == 2) /* and the segment before: path_check saw one */
				while (p[--w] != '/')
					;
		}
		if (r == len)
			break;
		r++; /* the '/' */
	}
	/* "/a/." is "/a/" and "/a/.." is "/" (RFC 3986 5.2.4 C and B) */
	if (last_dots || w == 0)
		p[w++] = '/';
	*out_len = w;
	return 0;
}
