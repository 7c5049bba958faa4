/*
 * ref_http1.c: the reference request-head checker (ref_http1.h).
 *
 * Grammar, from the RFCs (ABNF core: ALPHA, DIGIT, HEXDIG, SP, HTAB, VCHAR):
 *   HTTP-message = start-line CRLF *( field-line CRLF ) CRLF     [9112 2.1]
 *   request-line = method SP request-target SP HTTP-version       [9112 3]
 *   method       = token; HTTP-version = "HTTP/" DIGIT "." DIGIT   [9112 2.3]
 *   field-line   = field-name ":" OWS field-value OWS             [9112 5]
 *   field-name   = token; token = 1*tchar                          [9110 5.1, 5.6.2]
 *   field-value  = *( field-vchar / SP / HTAB ), trimmed           [9110 5.5]
 *   field-vchar  = VCHAR / obs-text (%x80-FF)
 * No bare CR, no bare LF [9112 2.2 allows LF alone; weir refuses it, POLICY],
 * no obs-fold [9112 5.2: reject or replace; weir rejects, POLICY].
 */
#include "tests/fuzz/ref_http1.h"

#include <arpa/inet.h>
#include <string.h>

#define MAX_LINES 4096

struct span {
	const uint8_t *p;
	size_t n;
};

/* ---- character classes, written out from the ABNF ---------------------- */

static int is_alpha(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_hexdig(int c) { return is_digit(c) || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); }
static int is_ws(int c) { return c == ' ' || c == '\t'; }

/* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
 *         "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA        [9110 5.6.2] */
static int is_tchar(int c) { return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~", c)); }

static int is_field_vchar(int c) { return (c >= 0x21 && c <= 0x7e) || c >= 0x80; }

/* RFC 3986 2.3, 2.2 */
static int is_unreserved(int c) { return is_alpha(c) || is_digit(c) || (c && strchr("-._~", c)); }
static int is_sub_delim(int c) { return c && strchr("!$&'()*+,;=", c); }

static int span_is(struct span s, const char *lit)
{
	return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static int span_ieq(struct span s, const char *lower)
{
	if (s.n != strlen(lower))
		return 0;
	for (size_t i = 0; i < s.n; i++) {
		int c = s.p[i];

		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (c != lower[i])
			return 0;
	}
	return 1;
}

static int is_token(struct span s)
{
	if (s.n == 0)
		return 0;
	for (size_t i = 0; i < s.n; i++)
		if (!is_tchar(s.p[i]))
			return 0;
	return 1;
}

static struct span trim_ows(struct span s)
{
	while (s.n && is_ws(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n && is_ws(s.p[s.n - 1]))
		s.n--;
	return s;
}

/* ---- RFC 3986 pieces ----------------------------------------------------- */

/*
 * pchar = unreserved / pct-encoded / sub-delims / ":" / "@"; <extra> adds
 * "/" (path) or "/" and "?" (query). Sets *tolerated if a byte of <s> is
 * not such.
 *
 * TOLERATED: weir forwards a target's other VCHARs ("<>[\]^`{|}) and a
 * "%" that does not start a pct-encoded triplet as they came, like nginx,
 * since browsers send several of them unencoded (the WHATWG URL standard
 * leaves "|", "^", "[", "]" as they are in paths, "{}|^`" in queries,
 * and PHP-style "a[]=1" queries are everywhere). 9112 3 says such a target
 * SHOULD get 400; refusing them is as right as taking them, so such a byte
 * sets *tolerated instead of failing. "#" and bytes outside VCHAR are
 * checked before this and always refused. (weir's 400 for a '\' in the
 * path comes after the parse, in worker/h1/http_path.c, which this diff does
 * not call: the parser takes it, as "either" allows.)
 */
static void note_non_pchar(struct span s, const char *extra, int *tolerated)
{
	for (size_t i = 0; i < s.n; i++) {
		int c = s.p[i];

		if (c == '%' && i + 2 < s.n && is_hexdig(s.p[i + 1]) && is_hexdig(s.p[i + 2]))
			i += 2;
		else if (!(is_unreserved(c) || is_sub_delim(c) || c == ':' || c == '@' || (c && strchr(extra, c))))
			*tolerated = 1;
	}
}

/* path [ "?" query ] where path must be empty (path-abempty may be) or
 * start with "/" */
static int path_query_ok(struct span s, int need_slash, int *tolerated)
{
	size_t q = 0;

	while (q < s.n && s.p[q] != '?')
		q++;
	if (need_slash && (q == 0 || s.p[0] != '/'))
		return 0;
	if (q > 0 && s.p[0] != '/')
		return 0;
	note_non_pchar((struct span){s.p, q}, "/", tolerated);
	if (q < s.n)
		note_non_pchar((struct span){s.p + q + 1, s.n - q - 1}, "/?", tolerated);
	return 1;
}

/*
 * host [ ":" port ] as in Host and an http(s) authority [9110 4.2.1, 7.2;
 * 3986 3.2.2]. host = IP-literal / IPv4address / reg-name, non-empty for
 * http [9110 4.2.1: "MUST reject ... empty host"]. POLICY: the port is 1 to 5
 * digits and at most 65535 (3986 allows *DIGIT); IPvFuture is refused.
 */
static int host_port_ok(struct span s)
{
	size_t i = 0;

	if (s.n == 0)
		return 0;
	if (s.p[0] == '[') {
		char buf[64];
		unsigned char addr[16];

		while (i < s.n && s.p[i] != ']')
			i++;
		if (i == s.n || i - 1 >= sizeof buf)
			return 0;
		memcpy(buf, s.p + 1, i - 1);
		buf[i - 1] = '\0';
		if (inet_pton(AF_INET6, buf, addr) != 1) /* IPv6address, 3986 3.2.2 */
			return 0;
		i++;
	} else {
		/* reg-name = *( unreserved / pct-encoded / sub-delims ),
		 * which covers IPv4address */
		while (i < s.n && s.p[i] != ':') {
			if (s.p[i] == '%') {
				if (i + 2 >= s.n || !is_hexdig(s.p[i + 1]) || !is_hexdig(s.p[i + 2]))
					return 0;
				i += 3;
			} else if (is_unreserved(s.p[i]) || is_sub_delim(s.p[i])) {
				i++;
			} else {
				return 0;
			}
		}
		if (i == 0)
			return 0;
	}
	if (i == s.n)
		return 1;
	if (s.p[i] != ':')
		return 0;
	i++;
	if (s.n - i < 1 || s.n - i > 5) /* POLICY: 1 to 5 digits */
		return 0;
	unsigned port = 0;
	for (; i < s.n; i++) {
		if (!is_digit(s.p[i]))
			return 0;
		port = port * 10 + (unsigned)(s.p[i] - '0');
	}
	return port <= 65535;
}

/* ---- the request line ---------------------------------------------------- */

/* POLICY: the methods weir knows (http-parser's list), CONNECT refused (weir
 * is no tunnel); RFC 9110 9.1 lets a server refuse methods it does not know
 * (501). Methods are case-sensitive [9110 9.1]. */
static const char *const methods[] = {
	"DELETE", "GET", "HEAD", "POST", "PUT", "OPTIONS", "TRACE", "COPY", "LOCK", "MKCOL", "MOVE",
	"PROPFIND", "PROPPATCH", "SEARCH", "UNLOCK", "BIND", "REBIND", "UNBIND", "ACL", "REPORT",
	"MKACTIVITY", "CHECKOUT", "MERGE", "M-SEARCH", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "PATCH",
	"PURGE", "MKCALENDAR", "LINK", "UNLINK", "SOURCE", NULL,
};

/*
 * request-target [9112 3.2]:
 *   origin-form   = absolute-path [ "?" query ]
 *   absolute-form = absolute-URI; POLICY: "http" or "https" (any case) with
 *                   an authority, path-abempty, no "?" right after the
 *                   authority ("http://h?q"), no userinfo [9110 4.2.4 says
 *                   to treat it as an error]
 *   asterisk-form = "*", OPTIONS only [9112 3.2.4]
 *   authority-form: CONNECT only, refused above
 * No fragment: "#" is not in the grammar.
 */
static const char *target_check(struct span t, struct span method, int *tolerated)
{
	struct span auth;
	size_t skip, i;

	if (span_is(t, "*"))
		return span_is(method, "OPTIONS") ? NULL : "asterisk-form without OPTIONS";
	if (t.n > 0 && t.p[0] == '/')
		return path_query_ok(t, 1, tolerated) ? NULL : "origin-form grammar";
	if (t.n >= 7 && span_ieq((struct span){t.p, 7}, "http://"))
		skip = 7;
	else if (t.n >= 8 && span_ieq((struct span){t.p, 8}, "https://"))
		skip = 8;
	else
		return "target form or scheme";
	auth.p = t.p + skip;
	for (i = skip; i < t.n && t.p[i] != '/' && t.p[i] != '?' && t.p[i] != '#'; i++)
		;
	auth.n = i - skip;
	if (memchr(auth.p, '@', auth.n))
		return "userinfo";
	if (!host_port_ok(auth))
		return "authority";
	if (i < t.n && t.p[i] == '?')
		return "query right after the authority";
	return path_query_ok((struct span){t.p + i, t.n - i}, 0, tolerated) ? NULL : "absolute-form path";
}

/* ---- the whole head -------------------------------------------------------- */

static void reject(struct ref_result *out, const char *why)
{
	out->verdict = REF_REJECT;
	out->why = why;
}

/*
 * Transfer-Encoding [9112 6.1, 7]. The final coding must be chunked, else
 * 400; chunked at most once. POLICY: nothing but the one value "chunked"
 * (weir forwards no transfer codings: 501 is what 9112 6.1 says for ones a
 * server does not implement; a list with empty elements is refused too).
 */
static int te_is_just_chunked(struct span v)
{
	return span_ieq(v, "chunked");
}

/* Connection = #connection-option, connection-option = token [9110 7.6.1];
 * a list may have empty elements [9110 5.6.1]. Adds the options to
 * *<count> (POLICY: weir takes at most 16 in a head, see
 * REF_CONN_TOKENS_MAX). */
#define REF_CONN_TOKENS_MAX 16
static int connection_ok(struct span v, size_t *count)
{
	size_t i = 0;

	while (i <= v.n) {
		size_t a = i, b;

		while (i < v.n && v.p[i] != ',')
			i++;
		b = i;
		struct span e = trim_ows((struct span){v.p + a, b - a});
		if (e.n && !is_token(e))
			return 0;
		if (e.n)
			++*count;
		i++;
	}
	return 1;
}

void ref_http1_request(const uint8_t *p, size_t len, const struct ref_limits *lim, struct ref_result *out)
{
	static struct span lines[MAX_LINES];
	size_t nlines = 0, pos = 0, end = 0;
	int complete = 0;

	memset(out, 0, sizeof(*out));

	/* 9112 2.2: ignore empty lines before the request-line (POLICY: any
	 * number of them, each a CRLF) */
	while (pos + 1 < len && p[pos] == '\r' && p[pos + 1] == '\n')
		pos += 2;

	/* cut into lines at CRLF; a CR not before LF or an LF not after CR
	 * is refused wherever it is */
	for (size_t start = pos, i = pos; i < len; i++) {
		if (p[i] == '\n')
			return reject(out, "bare LF");
		if (p[i] != '\r')
			continue;
		if (i + 1 == len)
			break; /* CR as the last byte: wait */
		if (p[i + 1] != '\n')
			return reject(out, "bare CR");
		if (i == start) { /* the empty line: end of the head */
			end = i + 2;
			complete = nlines > 0;
			break;
		}
		if (nlines == MAX_LINES)
			return reject(out, "lines");
		lines[nlines++] = (struct span){p + start, i - start};
		i++;
		start = i + 1;
	}
	/* POLICY: the head, from the first byte, fits in lim->head */
	if (complete && end > lim->head)
		return reject(out, "head too large");
	if (!complete) {
		if (len > lim->head)
			return reject(out, "head too large");
		out->verdict = REF_INCOMPLETE;
		return;
	}
	out->head_len = end;

	/* the request line: exactly three parts around two single spaces */
	struct span rl = lines[0], method, target, version;
	const uint8_t *sp1 = memchr(rl.p, ' ', rl.n), *sp2;

	if (!sp1)
		return reject(out, "request-line");
	method = (struct span){rl.p, (size_t)(sp1 - rl.p)};
	sp2 = memchr(sp1 + 1, ' ', rl.n - method.n - 1);
	if (!sp2)
		return reject(out, "request-line");
	target = (struct span){sp1 + 1, (size_t)(sp2 - sp1 - 1)};
	version = (struct span){sp2 + 1, rl.n - (size_t)(sp2 + 1 - rl.p)};
	if (!is_token(method))
		return reject(out, "method");
	int known = 0;
	for (int k = 0; methods[k]; k++)
		known |= span_is(method, methods[k]);
	if (!known)
		return reject(out, "method not known to weir");
	/* 9112 2.3; POLICY: HTTP/1.0 and HTTP/1.1 only (9110 2.5 would take
	 * 1.2 as 1.1; there is no 1.2) */
	if (span_is(version, "HTTP/1.1"))
		out->minor = 1;
	else if (span_is(version, "HTTP/1.0"))
		out->minor = 0;
	else
		return reject(out, "version");
	/* POLICY: limits.uri_size (414) */
	if (target.n > lim->target)
		return reject(out, "target too long");
	if (target.n == 0)
		return reject(out, "empty target");
	for (size_t i = 0; i < target.n; i++)
		if (!(target.p[i] > 0x20 && target.p[i] < 0x7f))
			return reject(out, "target byte");
	if (memchr(target.p, '#', target.n)) /* a fragment is never sent */
		return reject(out, "fragment");
	int tolerated = 0;
	const char *why = target_check(target, method, &tolerated);
	if (why)
		return reject(out, why);

	/* the field lines */
	unsigned nhost = 0, ncl = 0, nte = 0;
	size_t nconn = 0;
	struct span host = {0}, cl = {0}, te = {0};

	if (nlines - 1 > lim->headers) /* POLICY: limits.headers (431) */
		return reject(out, "too many header fields");
	for (size_t k = 1; k < nlines; k++) {
		struct span l = lines[k], name, value;
		const uint8_t *colon;

		if (is_ws(l.p[0])) /* 9112 5.2 obs-fold, 2.2 whitespace after the start-line */
			return reject(out, "obs-fold");
		colon = memchr(l.p, ':', l.n);
		if (!colon)
			return reject(out, "field line without a colon");
		name = (struct span){l.p, (size_t)(colon - l.p)};
		value = trim_ows((struct span){colon + 1, l.n - name.n - 1});
		if (!is_token(name)) /* also 9112 5.1: no whitespace before the colon */
			return reject(out, "field-name");
		for (size_t i = 0; i < value.n; i++)
			if (!is_field_vchar(value.p[i]) && !is_ws(value.p[i]))
				return reject(out, "field-value");
		if (span_ieq(name, "host")) {
			nhost++;
			host = value;
		} else if (span_ieq(name, "content-length")) {
			ncl++;
			cl = value;
		} else if (span_ieq(name, "transfer-encoding")) {
			nte++;
			te = value;
		} else if (span_ieq(name, "connection")) {
			if (!connection_ok(value, &nconn))
				return reject(out, "Connection is not a token list");
			if (nconn > REF_CONN_TOKENS_MAX)
				return reject(out, "more than 16 Connection options (POLICY)");
		}
	}

	/* Host [9112 3.2]: one in HTTP/1.1, never two, and a valid value.
	 * POLICY: an empty Host (valid when the target has no authority) is
	 * refused: weir routes by host. */
	if (nhost > 1)
		return reject(out, "two Host fields");
	if (nhost == 0 && out->minor == 1)
		return reject(out, "no Host in HTTP/1.1");
	if (nhost == 1 && !host_port_ok(host))
		return reject(out, "Host value");

	/* framing [9112 6.1-6.3] */
	if (nte > 0) {
		if (out->minor == 0) /* 6.1: faulty framing in HTTP/1.0 */
			return reject(out, "Transfer-Encoding in HTTP/1.0");
		if (ncl > 0) /* 6.1: MAY reject; POLICY */
			return reject(out, "Transfer-Encoding with Content-Length");
		if (nte > 1 || !te_is_just_chunked(te))
			return reject(out, "Transfer-Encoding other than one chunked");
		out->body = REF_BODY_CHUNKED;
	} else if (ncl > 0) {
		/* 6.3: several lines or a list: POLICY refused even when equal */
		if (ncl > 1)
			return reject(out, "two Content-Length fields");
		/* Content-Length = 1*DIGIT [9110 8.6]; POLICY: below 2^64 */
		uint64_t v = 0;

		if (cl.n == 0)
			return reject(out, "empty Content-Length");
		for (size_t i = 0; i < cl.n; i++) {
			if (!is_digit(cl.p[i]))
				return reject(out, "Content-Length not digits");
			if (v > (UINT64_MAX - 9) / 10)
				return reject(out, "Content-Length overflow");
			v = v * 10 + (uint64_t)(cl.p[i] - '0');
		}
		if (lim->body && v > lim->body) /* POLICY: limits.body_size (413) */
			return reject(out, "body too large");
		out->body = REF_BODY_LENGTH;
		out->content_length = v;
	}
	out->verdict = tolerated ? REF_EITHER : REF_ACCEPT;
	if (tolerated)
		out->why = "TOLERATED target bytes";
}
