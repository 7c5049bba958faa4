/*
 * fuzz_fields.c: a head given as fields (HTTP/2's way into the message
 * model) against the same head given as HTTP/1 text, for requests
 * (http_request_begin_fields/add_field/end_fields) and responses
 * (http_response_field/fields_end).
 *
 * The input is a list of records: a start (method and target, or a
 * status) and fields, each a length byte and its bytes. The target writes
 * the one head both ways and aborts when the two verdicts differ, or when
 * both accept and the messages differ: method, target, authority, framing,
 * flags, and the header list entry by entry (name, value, token, flags).
 * Only what text can carry faithfully is compared: a name or value that
 * text would split (':' in a name, CR or LF anywhere) is given to the
 * fields path alone, which must refuse it. The fields path's own rules
 * are taken into account: an HTTP/2 request has no absolute-form target
 * and no Transfer-Encoding at all, and a response without a length ends
 * with its stream (HTTP_BODY_CLOSE) where HTTP/1 text would say the same.
 */
#include <string.h>

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "worker/h1/h1.h"

static const struct config_limits limits = {
	.header_size = 2048,
	.headers = 24,
	.uri_size = 512,
	.body_size = 1000000,
};

static struct hdr hdrs_t[HTTP_MAX_HEADERS], hdrs_f[HTTP_MAX_HEADERS];
static struct arena arena_t, arena_f;
static struct msg mt, mf;
static struct http_request rq_t, rq_f;
static struct http_response rs_t, rs_f;
static char text[8192];

struct piece {
	const char *p;
	size_t n;
};

/* The next record of the input: a length byte (at most what is left). */
static int next_piece(const uint8_t **d, size_t *left, struct piece *pc)
{
	size_t n;

	if (*left == 0)
		return 0;
	n = **d;
	(*d)++;
	(*left)--;
	if (n > *left)
		n = *left;
	pc->p = (const char *)*d;
	pc->n = n;
	*d += n;
	*left -= n;
	return 1;
}

static int has_any(const struct piece *pc, const char *set)
{
	for (size_t i = 0; i < pc->n; i++)
		if (strchr(set, pc->p[i]) && pc->p[i])
			return 1;
	return 0;
}

static int has_nul(const struct piece *pc)
{
	return memchr(pc->p, 0, pc->n) != NULL;
}

static int text_put(size_t *at, const char *p, size_t n)
{
	if (*at + n > sizeof(text))
		return -1;
	memcpy(text + *at, p, n);
	*at += n;
	return 0;
}

/* Field <n>: <v> written as its text line at *<at>; notes a
 * Transfer-Encoding in *<te>. Returns whether text carries it as it is
 * (no ':' in the name, no CR, LF or NUL in either); clears *<faithful>
 * when it does not, or the text is full. */
static int text_field(const struct piece *n, const struct piece *v, size_t *at, int *te, int *faithful)
{
	int one = !has_any(n, ":\r\n") && !has_any(v, "\r\n") && !has_nul(n) && !has_nul(v);

	*faithful &= one;
	*te |= n->n == 17 && http_span_ieq(n->p, 17, "transfer-encoding");
	if (text_put(at, n->p, n->n) || text_put(at, ": ", 2) || text_put(at, v->p, v->n) || text_put(at, "\r\n", 2))
		*faithful = 0;
	return one;
}

static void differ(const char *what, int rt, int rf)
{
	fprintf(stderr, "fields: %s: text %d (%s), fields %d (%s)\n", what, rt, rt < 0 ? weir_err_text(rt) : "ok", rf,
	        rf < 0 ? weir_err_text(rf) : "ok");
	abort();
}

static int same_span(const char *a, size_t al, const char *b, size_t bl)
{
	return al == bl && (al == 0 || memcmp(a, b, al) == 0);
}

static void compare_msgs(int rt, int rf)
{
	if (!same_span(mt.target, mt.target_len, mf.target, mf.target_len))
		differ("target", rt, rf);
	if (!same_span(mt.host, mt.host_len, mf.host, mf.host_len))
		differ("authority", rt, rf);
	if (mt.method_id != mf.method_id || mt.status != mf.status)
		differ("method or status", rt, rf);
	if (mt.body != mf.body || (mt.body == HTTP_BODY_LENGTH && mt.content_length != mf.content_length))
		differ("framing", rt, rf);
	if (mt.expect_continue != mf.expect_continue || mt.conn_upgrade != mf.conn_upgrade ||
	    (mt.upgrade == NULL) != (mf.upgrade == NULL))
		differ("flags", rt, rf);
	if (mt.hl.n != mf.hl.n)
		differ("header count", rt, rf);
	for (uint32_t i = 0; i < mt.hl.n; i++) {
		const struct hdr *a = &mt.hl.v[i], *b = &mf.hl.v[i];

		if (!same_span(a->name, a->name_len, b->name, b->name_len) ||
		    !same_span(a->value, a->value_len, b->value, b->value_len) || a->tok != b->tok || a->flags != b->flags)
			differ("a header", rt, rf);
	}
}

/* A request: method, target, then fields. */
static void one_request(const uint8_t *d, size_t left, int open_body)
{
	struct piece m, t, n, v;
	size_t at = 0;
	int rt, rf, faithful = 1, te = 0, absolute;

	if (!next_piece(&d, &left, &m) || !next_piece(&d, &left, &t))
		return;
	arena_init(&arena_t, hdrs_t, sizeof(hdrs_t));
	arena_init(&arena_f, hdrs_f, sizeof(hdrs_f));
	http_request_init(&rq_t, &mt, &arena_t, &limits);
	http_request_init(&rq_f, &mf, &arena_f, &limits);
	/* text cannot carry a space in the method or target, nor a line end */
	faithful &= !has_any(&m, " \r\n") && !has_any(&t, " \r\n") && !has_nul(&m) && !has_nul(&t);
	faithful &= m.n > 0 && t.n > 0;
	absolute = t.n > 0 && t.p[0] != '/' && !(t.n == 1 && t.p[0] == '*');
	faithful &= text_put(&at, m.p, m.n) == 0 && text_put(&at, " ", 1) == 0 && text_put(&at, t.p, t.n) == 0 &&
	            text_put(&at, " HTTP/1.1\r\n", 11) == 0;
	rf = http_request_begin_fields(&rq_f, m.p, m.n, t.p, t.n);
	while (next_piece(&d, &left, &n) && next_piece(&d, &left, &v)) {
		/* a value's leading whitespace would be an obs-fold's in text
		 * only after a line end; inside a line it is trimmed alike */
		int one = text_field(&n, &v, &at, &te, &faithful);

		if (!rf)
			rf = http_request_add_field(&rq_f, n.p, n.n, v.p, v.n);
		if (!one && !rf)
			differ("a field text cannot carry was taken", 0, rf);
	}
	if (!rf)
		rf = http_request_end_fields(&rq_f, open_body);
	if (text_put(&at, "\r\n", 2))
		faithful = 0;
	if (!faithful)
		return;
	rt = http_request_parse(&rq_t, text, at);
	if (rt == WEIR_EAGAIN)
		return; /* a field name that began with whitespace: no head end in text */
	if (rf == 0 && rt != 0)
		differ("fields took what text refuses", rt, rf);
	if (rt == 0 && rf != 0) {
		/* HTTP/2's own refusals: an authority in the target, a coding */
		if (absolute || te)
			return;
		differ("fields refused what text takes", rt, rf);
	}
	if (rt != 0 || rf != 0) {
		/* both refuse: the status they answer may differ only where
		 * the checks come in another order (414 or 431 found first) */
		return;
	}
	if (open_body && mt.body == HTTP_BODY_NONE)
		mt.body = HTTP_BODY_CHUNKED; /* an open stream: as weir frames it */
	compare_msgs(rt, rf);
}

/* A response: a status (two bytes), then fields. */
static void one_response(const uint8_t *d, size_t left)
{
	struct piece n, v;
	size_t at = 0;
	int rt, rf = 0, faithful = 1, status, te = 0, len;

	if (left < 2)
		return;
	status = 100 + (d[0] << 8 | d[1]) % 500;
	d += 2;
	left -= 2;
	arena_init(&arena_t, hdrs_t, sizeof(hdrs_t));
	arena_init(&arena_f, hdrs_f, sizeof(hdrs_f));
	http_response_init(&rs_t, &mt, &arena_t, limits.headers, limits.header_size, HTTP_GET);
	http_response_init(&rs_f, &mf, &arena_f, limits.headers, limits.header_size, HTTP_GET);
	len = snprintf(text, sizeof(text), "HTTP/1.1 %d \r\n", status); /* no reason, as HTTP/2 */
	at = (size_t)len;
	while (next_piece(&d, &left, &n) && next_piece(&d, &left, &v)) {
		int one = text_field(&n, &v, &at, &te, &faithful);

		rf = http_response_field(&rs_f, n.p, n.n, v.p, v.n);
		if (!one && !rf)
			differ("a response field text cannot carry was taken", 0, rf);
	}
	rf = http_response_fields_end(&rs_f, status);
	if (text_put(&at, "\r\n", 2) || !faithful)
		return;
	rt = http_response_parse(&rs_t, text, at);
	if (rt == WEIR_EAGAIN)
		return;
	if (rf == 0 && rt != 0)
		differ("response fields took what text refuses", rt, rf);
	if (rt == 0 && rf != 0) {
		if (te)
			return; /* HTTP/2 has no transfer coding */
		differ("response fields refused what text takes", rt, rf);
	}
	if (rt != 0 || rf != 0)
		return;
	/* the fields path reads no version: as text's HTTP/1.1 */
	compare_msgs(rt, rf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	switch (data[0] % 3) {
	case 0:
		one_request(data + 1, size - 1, 0);
		break;
	case 1:
		one_request(data + 1, size - 1, 1);
		break;
	default:
		one_response(data + 1, size - 1);
		break;
	}
	return 0;
}
