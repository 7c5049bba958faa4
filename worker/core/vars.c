/*
 * vars.c: expanding templates for a request (worker/vars.h).
 */

#include "worker/core/core.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/ssl.h>

#include "common/log.h"

/* ---- where the request's parts are ------------------------------------ */

/* The target as forwarded (strip_prefix, rewrite: match.h): read back
 * from the upstream head, whatever its codec, once it is written (the
 * body may have moved the input buffer). */
static const char *vars_target(const struct txn *t, size_t *len)
{
	if (t->up.head) {
		*len = t->fwd_target_len;
		return t->up.head->data + t->fwd_target_at;
	}
	*len = t->req.target_len;
	return t->req.target;
}

static int vars_name_eq(const char *a, const char *b, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		int x = (unsigned char)a[i], y = (unsigned char)b[i];

		x = x == '_' ? '-' : (x >= 'A' && x <= 'Z') ? x + 32 : x;
		y = y == '_' ? '-' : (y >= 'A' && y <= 'Z') ? y + 32 : y;
		if (x != y)
			return 0;
	}
	return 1;
}

/* The next header named <name> (<nlen>, '_' as '-') after position *<pos>
 * (0 to start); 1 with its value, 0 when there is no more. */
static int vars_header_next(const struct txn *t, const char *name, size_t nlen, size_t *pos, const char **v,
                            size_t *vlen)
{
	if (t->up.head) {
		/* the head as forwarded, read back through its codec */
		const char *n;
		size_t nl;

		while (t->up.ops->head_field(&t->up, pos, &n, &nl, v, vlen))
			if (nl == nlen && vars_name_eq(n, name, nlen))
				return 1;
		return 0;
	}
	for (size_t i = *pos; i < t->req.hl.n; i++) {
		const struct hdr *hd = &t->req.hl.v[i];

		if (hd->name_len == nlen && vars_name_eq(hd->name, name, nlen)) {
			*v = hd->value;
			*vlen = hd->value_len;
			*pos = i + 1;
			return 1;
		}
	}
	*pos = t->req.hl.n;
	return 0;
}

/* In "<a>=<b><sep>..." pairs of <s>, the value of <name>. */
static int vars_pair(const char *s, size_t len, char sep, const char *name, size_t nlen, const char **v,
                     size_t *vlen)
{
	const char *p = s, *end = s + len;

	while (p < end) {
		const char *e = memchr(p, sep, (size_t)(end - p));
		const char *eq;

		if (!e)
			e = end;
		while (p < e && *p == ' ')
			p++;
		eq = memchr(p, '=', (size_t)(e - p));
		if (eq && (size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0) {
			*v = eq + 1;
			*vlen = (size_t)(e - eq - 1);
			return 1;
		}
		p = e + 1;
	}
	return 0;
}

static const char *vars_time_local(void)
{
	static time_t cached;
	static char text[64];
	time_t now = time(NULL);

	if (now != cached) {
		struct tm tm;
		static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
		                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
		int off;

		cached = now;
		localtime_r(&now, &tm);
		off = (int)(tm.tm_gmtoff / 60) % 1440;
		/* the month by hand: %b follows the locale, nginx's does not */
		snprintf(text, sizeof(text), "%02d/%s/%04d:%02d:%02d:%02d %c%02d%02d", tm.tm_mday, mon[tm.tm_mon],
		         tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec, off < 0 ? '-' : '+',
		         (off < 0 ? -off : off) / 60, (off < 0 ? -off : off) % 60);
	}
	return text;
}

/*
 * The value of piece <p> of a template whose text is at <text>: *<v> points at it (in the request, or in
 * <tmp> for numbers and composed values). Returns 0 when it is absent.
 */
static int vars_value(const char *text, const struct vars_piece *p, const struct vars_ctx *x,
                      char *tmp, size_t tcap, const char **v, size_t *len)
{
	struct conn *c = x->c;
	const struct txn *t = x->t;
	int has_req = t && t->req.method;
	ev_tstamp now = ev_now(wk.loop);
	const char *s;
	size_t n;
	int k;

	*v = tmp;
	*len = 0;
	switch (p->id) {
	case VARS_CLIENT_IP:
	case VARS_REMOTE_ADDR:
		*v = realip_client(c, t, len);
		return 1;
	case VARS_PEER_ADDR:
		*v = c->peer;
		*len = c->peer_len;
		return 1;
	case VARS_HOST: {
		size_t pos = 0;

		if (!has_req)
			return 0;
		if (t->up.head) {
			if (!vars_header_next(t, "host", 4, &pos, &s, &n))
				return 0;
		} else {
			s = t->req.host;
			n = t->req.host_len;
		}
		if (n && s[0] == '[') {
			const char *e = memchr(s, ']', n);
			n = e ? (size_t)(e - s) + 1 : n;
		} else {
			const char *colon = memchr(s, ':', n);
			n = colon ? (size_t)(colon - s) : n;
		}
		*v = s;
		*len = n;
		return n > 0;
	}
	case VARS_PATH:
	case VARS_REQUEST_URI:
	case VARS_QUERY_STRING:
	case VARS_ARGS: {
		const char *q;

		if (!has_req)
			return 0;
		s = vars_target(t, &n);
		q = memchr(s, '?', n);
		if (p->id == VARS_REQUEST_URI) {
			*v = s;
			*len = n;
		} else if (p->id == VARS_PATH) {
			*v = s;
			*len = q ? (size_t)(q - s) : n;
		} else {
			if (!q)
				return 0;
			*v = q + 1;
			*len = (size_t)(s + n - q - 1);
		}
		return *len > 0;
	}
	case VARS_METHOD:
	case VARS_REQUEST_METHOD:
		if (!has_req)
			return 0;
		*v = t->req.method;
		*len = t->req.method_len;
		return 1;
	case VARS_PROTOCOL:
		if (!has_req)
			return 0;
		*v = txn_protocol(t);
		*len = 8;
		return 1;
	case VARS_REQUEST:
		if (!has_req)
			return 0;
		s = vars_target(t, &n);
		if (x->value_max && n > x->value_max)
			n = x->value_max;
		k = snprintf(tmp, tcap, "%.*s %.*s %s", (int)t->req.method_len, t->req.method, (int)n, s,
		             txn_protocol(t));
		*len = k < 0 ? 0 : (size_t)k < tcap ? (size_t)k : tcap - 1;
		return 1;
	case VARS_SCHEME:
		*v = c->tls ? "https" : "http";
		*len = c->tls ? 5 : 4;
		return 1;
	case VARS_STATUS:
		k = snprintf(tmp, tcap, "%d", x->status);
		break;
	case VARS_REQUEST_ID:
		if (!t || !t->ident.id_len)
			return 0;
		*v = t->ident.id;
		*len = t->ident.id_len;
		return 1;
	case VARS_UPSTREAM_ADDR:
		if (!t)
			return 0;
		if (t->tun.on)
			*v = t->tun.server;
		else if (t->server >= 0)
			*v = route_servers(t->table)[t->server].text;
		else
			return 0;
		*len = strlen(*v);
		return 1;
	case VARS_TLS_SNI:
		if (!c->ssl || !(s = SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name)))
			return 0;
		*v = s;
		*len = strlen(s);
		return 1;
	case VARS_ROUTE: {
		char hb[CONFIG_HOST_MAX + 2];

		if (!t || !t->route)
			return 0;
		k = snprintf(tmp, tcap, "%s%s", config_host_text(t->route->host_kind, route_host(t->table, t->route), hb, sizeof(hb)),
		             route_path(t->table, t->route));
		break;
	}
	case VARS_REQUEST_TIME:
		k = snprintf(tmp, tcap, "%.3f", t ? now - t->start : 0.0);
		break;
	case VARS_UPSTREAM_RESPONSE_TIME:
		if (!t || t->up_start <= 0)
			return 0;
		k = snprintf(tmp, tcap, "%.3f", now - t->up_start);
		break;
	case VARS_BYTES_SENT:
		k = snprintf(tmp, tcap, "%llu", t ? (unsigned long long)t->bytes_out : 0ull);
		break;
	case VARS_BODY_BYTES_SENT: {
		uint64_t b = t ? t->bytes_out : 0, h = t && t->down.head ? t->down.head->end : 0;

		k = snprintf(tmp, tcap, "%llu", (unsigned long long)(b > h ? b - h : 0));
		break;
	}
	case VARS_TIME_ISO:
		*v = log_time_iso();
		*len = strlen(*v);
		return 1;
	case VARS_TIME_LOCAL:
		*v = vars_time_local();
		*len = strlen(*v);
		return 1;
	case VARS_MSEC:
		k = snprintf(tmp, tcap, "%.3f", now);
		break;
	case VARS_HTTP: {
		size_t pos = 0;

		return has_req && vars_header_next(t, text + p->off, p->len, &pos, v, len);
	}
	case VARS_COOKIE: {
		size_t pos = 0;

		if (!has_req)
			return 0;
		while (vars_header_next(t, "cookie", 6, &pos, &s, &n))
			if (vars_pair(s, n, ';', text + p->off, p->len, v, len))
				return 1;
		return 0;
	}
	case VARS_ARG: {
		const char *q;

		if (!has_req)
			return 0;
		s = vars_target(t, &n);
		q = memchr(s, '?', n);
		return q && vars_pair(q + 1, (size_t)(s + n - q - 1), '&', text + p->off, p->len, v, len);
	}
	case VARS_REMOTE_USER:
	case VARS_CONSUMER:
		if (!t || !t->auth.consumer_len)
			return 0;
		*v = t->auth.consumer;
		*len = t->auth.consumer_len;
		return 1;
	case VARS_JWT_CLAIM:
		return t && auth_jwt_claim(t, text + p->off, p->len, tmp, tcap, v, len);
	case VARS_CTL:
		if (!t || !(*v = breaker_acted(t)))
			return 0;
		*len = strlen(*v);
		return 1;
	default:
		return 0;
	}
	*len = k < 0 ? 0 : (size_t)k < tcap ? (size_t)k : tcap - 1;
	return 1;
}

/* ---- escaping ----------------------------------------------------------- */

/* Length of the UTF-8 sequence at <s> (at most <n> bytes), 0 if it is not
 * a well-formed one (overlong forms, surrogates and past U+10FFFF too). */
static size_t vars_utf8(const unsigned char *s, size_t n)
{
	size_t need;
	uint32_t cp;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		need = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		need = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		need = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return need;
}

/* Appends <s> escaped for <esc> at dst+*o; 0 when it did not all fit. */
static int vars_put(char *dst, size_t cap, size_t *o, const char *s, size_t n, enum vars_esc esc, int *bad)
{
	static const char hex[] = "0123456789abcdef", HEX[] = "0123456789ABCDEF";

	if (esc == VARS_ESC_NONE) {
		for (size_t i = 0; i < n && bad; i++) {
			unsigned char ch = (unsigned char)s[i];
			if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
				*bad = 1;
		}
		if (*o + n > cap) {
			n = cap - *o;
			memcpy(dst + *o, s, n);
			*o += n;
			return 0;
		}
		memcpy(dst + *o, s, n);
		*o += n;
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		char e[6];
		size_t el = 0, u;

		if (esc == VARS_ESC_LOG) {
			if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
				e[el++] = (char)ch;
			} else {
				e[0] = '\\', e[1] = 'x', e[2] = HEX[ch >> 4], e[3] = HEX[ch & 15];
				el = 4;
			}
		} else if (ch == '"' || ch == '\\') {
			e[0] = '\\', e[1] = (char)ch;
			el = 2;
		} else if (ch >= 0x20 && ch < 0x7f) {
			e[el++] = (char)ch;
		} else if (ch >= 0x80 && (u = vars_utf8((const unsigned char *)s + i, n - i)) > 0) {
			if (*o + u > cap)
				return 0;
			memcpy(dst + *o, s + i, u);
			*o += u;
			i += u - 1;
			continue;
		} else {
			/* a control byte, DEL, or a byte of no UTF-8 sequence (as
			 * the Latin-1 character of that code: lossless, valid) */
			e[0] = '\\', e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[ch >> 4], e[5] = hex[ch & 15];
			el = 6;
		}
		if (*o + el > cap)
			return 0;
		memcpy(dst + *o, e, el);
		*o += el;
	}
	return 1;
}

size_t vars_expand(const struct vars_tpl *tpl, const struct vars_ctx *x, enum vars_esc esc, char *dst, size_t cap,
                   int *full, int *bad)
{
	return vars_expand_pieces(tpl->p, tpl->n, tpl->text, x, esc, dst, cap, full, bad);
}

size_t vars_expand_pieces(const struct vars_piece *pc, unsigned n, const char *text, const struct vars_ctx *x,
                          enum vars_esc esc, char *dst, size_t cap, int *full, int *bad)
{
	size_t o = 0;

	*full = 0;
	for (unsigned i = 0; i < n && !*full; i++) {
		const struct vars_piece *p = &pc[i];
		char tmp[1024 + 64];
		const char *v;
		size_t len;

		if (p->id == VARS_LITERAL) {
			if (o + p->len > cap) {
				*full = 1;
				break;
			}
			memcpy(dst + o, text + p->off, p->len);
			o += p->len;
			continue;
		}
		if (!vars_value(text, p, x, tmp, sizeof(tmp), &v, &len) || len == 0) {
			if (esc == VARS_ESC_LOG) {
				v = "-";
				len = 1;
			} else {
				continue;
			}
		}
		if (x->value_max && len > x->value_max)
			len = x->value_max;
		if (!vars_put(dst, cap, &o, v, len, esc, esc == VARS_ESC_NONE ? bad : NULL))
			*full = 1;
	}
	return o;
}
