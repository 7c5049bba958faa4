/*
 * Unit tests for worker/h1/http_request.c (and the shared head checks in
 * worker/h1/http_common.c).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "tests/unit/unit.h"

static struct hdr hdrs[HTTP_MAX_HEADERS];
static struct arena arena;
static struct msg req;
static struct http_request req_p;

/* A new head: the list goes at the bottom of an arena of HTTP_MAX_HEADERS
 * entries (the limits decide how many it takes). */
static void req_init(const struct config_limits *lim)
{
	arena_init(&arena, hdrs, sizeof(hdrs));
	http_request_init(&req_p, &req, &arena, lim);
}
static char buf[70000];

static struct config_limits limits(void)
{
	struct config_limits l;

	memset(&l, 0, sizeof(l));
	l.header_size = 16384;
	l.headers = 100;
	l.uri_size = 8192;
	l.body_size = 1048576;
	return l;
}

/* Parses <n> bytes of <s> in one call with <lim>. */
static int parse_lim(const char *s, size_t n, const struct config_limits *lim)
{
	memcpy(buf, s, n);
	req_init(lim);
	return http_request_parse(&req_p, buf, n);
}

static int parse_n(const char *s, size_t n)
{
	struct config_limits l = limits();

	return parse_lim(s, n, &l);
}

static int parse(const char *s)
{
	return parse_n(s, strlen(s));
}

/* The header named <name> (exact case), or NULL. */
static const struct hdr *hdr(const char *name)
{
	uint32_t i;

	for (i = 0; i < req.hl.n; i++)
		if (req.hl.v[i].name_len == strlen(name) &&
		    memcmp(req.hl.v[i].name, name, strlen(name)) == 0)
			return &req.hl.v[i];
	return NULL;
}

static int span_is(const char *p, size_t len, const char *s)
{
	return p && len == strlen(s) && memcmp(p, s, len) == 0;
}

#define BAD WEIR_ERR(BAD_REQUEST)
#define SMUG WEIR_ERR(SMUGGLING)

/* ---- a comparable picture of a parse, offsets relative to buf ---------- */

struct snap {
	int rc;
	int method_id, minor, body, ka, ec;
	long target, target_len, path_end, host, host_len;
	uint64_t cl;
	size_t head_len;
	uint32_t n;
	long hn[8], hnl[8], hv[8], hvl[8];
	uint32_t hf[8];
};

static long off(const char *p)
{
	return p ? (long)(p - buf) : -1;
}

static void take(struct snap *s, int rc)
{
	uint32_t i;

	memset(s, 0, sizeof(*s));
	s->rc = rc;
	if (rc)
		return;
	s->method_id = req.method_id;
	s->minor = req.version_minor;
	s->body = req.body;
	s->ka = req.keep_alive;
	s->ec = req.expect_continue;
	/* a static "/" for an empty absolute-form path is not in buf */
	s->target = (req.target >= buf && req.target < buf + sizeof(buf)) ? off(req.target) : -2;
	s->target_len = req.target_len;
	s->path_end = s->target == -2 ? -2 : off(req.path_end);
	s->host = off(req.host);
	s->host_len = req.host_len;
	s->cl = req.content_length;
	s->head_len = req.head_len;
	s->n = req.hl.n;
	for (i = 0; i < req.hl.n && i < 8; i++) {
		s->hn[i] = off(req.hl.v[i].name);
		s->hnl[i] = req.hl.v[i].name_len;
		s->hv[i] = req.hl.v[i].value_len ? off(req.hl.v[i].value) : 0;
		s->hvl[i] = req.hl.v[i].value_len;
		s->hf[i] = req.hl.v[i].flags;
	}
}

/* ---- basics -------------------------------------------------------------- */

static void test_simple_get_is_parsed_into_spans(void)
{
	const char *s = "GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n"
	                "User-Agent:  curl/8 \t\r\nAccept: */*\r\n\r\n";

	CU_ASSERT_EQUAL(parse(s), 0);
	CU_ASSERT_EQUAL(req.method_id, HTTP_GET);
	CU_ASSERT(span_is(req.method, req.method_len, "GET"));
	CU_ASSERT(span_is(req.target, req.target_len, "/a/b?c=d"));
	CU_ASSERT_PTR_EQUAL(req.path_end, req.target + 4);
	CU_ASSERT(span_is(req.host, req.host_len, "example.com:8080"));
	CU_ASSERT_EQUAL(req.version_minor, 1);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(req.keep_alive, 1);
	CU_ASSERT_EQUAL(req.expect_continue, 0);
	CU_ASSERT_EQUAL(req.head_len, strlen(s));
	CU_ASSERT_EQUAL(req.hl.n, 3);
	CU_ASSERT(span_is(req.hl.v[1].name, req.hl.v[1].name_len, "User-Agent"));
	CU_ASSERT(span_is(req.hl.v[1].value, req.hl.v[1].value_len, "curl/8"));
	CU_ASSERT_EQUAL(req.hl.v[0].flags, HDR_HOST);
	CU_ASSERT_EQUAL(req.hl.v[1].flags, 0);
	CU_ASSERT_PTR_EQUAL(req.target, buf + 4); /* spans point into the buffer */
}

static void test_path_end_is_the_target_end_without_a_query(void)
{
	CU_ASSERT_EQUAL(parse("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	CU_ASSERT_PTR_EQUAL(req.path_end, req.target + req.target_len);
	CU_ASSERT_EQUAL(parse("POST /x?a?b HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"), 0);
	CU_ASSERT_PTR_EQUAL(req.path_end, req.target + 2);
	CU_ASSERT_EQUAL(req.method_id, HTTP_POST);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(req.content_length, 0);
}

static const char *const split_cases[] = {
	"GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nX-Empty:\r\nY:   \r\nZ: v \r\n\r\n",
	"POST http://h.example:81/up HTTP/1.1\r\nHost: other\r\nTransfer-Encoding: chunked\r\n"
	"Connection: x-a, close\r\nX-A: 1\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 12\r\n\r\nhello world!",
	"OPTIONS * HTTP/1.1\r\nHost: [::1]:8080\r\nVia: 1.1 a\r\nX-Forwarded-For: 1.2.3.4\r\n"
	"X-Forwarded-Proto: https\r\nProxy-Authorization: x\r\nKeep-Alive: 5\r\n\r\n",
	/* errors must be the same too, wherever the split falls */
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX : a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\nX: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\rX",
	"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\nHost: a\r\n\r\n",
	/* around the 16-byte steps of the whole-head path (scan_whole): long
	 * names with a '_' or other tchar past 16 bytes, values with HTAB and
	 * obs-text, and a bad byte on each side of a step */
	"GET / HTTP/1.1\r\nHost: a\r\nX-Long-Name-Of-Letters_and_more: 0123456789abcdef\tghij\x80\xff tail \r\n"
	"Abcdefghijklmnopq.r~s:v\r\nX:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abcd\x7f\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abcde\x7fg\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abcdefghijklmnopqrstu\x01v\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abcdefghijklmnopqrs\nv\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abcdefghijklmnopqrs\rv\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nAbcdefghijklmnopqrstuvwxyz0123456789 : v\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nAbcdefghijklmnopqrstuvwxyz0123456789\x01: v\r\n\r\n",
	"GET /0123456789abcdef0123456789\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
};

static void test_a_head_split_at_every_byte_boundary_parses_the_same(void)
{
	struct config_limits l = limits();
	size_t c;

	for (c = 0; c < sizeof(split_cases) / sizeof(split_cases[0]); c++) {
		const char *s = split_cases[c];
		size_t n = strlen(s), k;
		struct snap whole, part;
		int rc;

		take(&whole, parse_n(s, n));
		for (k = 0; k <= n; k++) {
			memcpy(buf, s, n);
			req_init(&l);
			rc = http_request_parse(&req_p, buf, k);
			if (rc == WEIR_EAGAIN)
				rc = http_request_parse(&req_p, buf, n);
			take(&part, rc);
			if (memcmp(&whole, &part, sizeof(whole)) != 0) {
				printf("\ncase %zu split at %zu differs (rc %d vs %d)\n", c, k, whole.rc,
				       part.rc);
				CU_FAIL("split result differs");
			}
		}
	}
}

static void test_a_head_fed_one_byte_at_a_time_parses_the_same(void)
{
	struct config_limits l = limits();
	size_t c;

	for (c = 0; c < sizeof(split_cases) / sizeof(split_cases[0]); c++) {
		const char *s = split_cases[c];
		size_t n = strlen(s), k;
		struct snap whole, part;
		int rc = WEIR_EAGAIN;

		take(&whole, parse_n(s, n));
		memcpy(buf, s, n);
		req_init(&l);
		for (k = 1; k <= n && rc == WEIR_EAGAIN; k++)
			rc = http_request_parse(&req_p, buf, k);
		if (rc == WEIR_EAGAIN)
			CU_FAIL("head never completed");
		take(&part, rc);
		CU_ASSERT(memcmp(&whole, &part, sizeof(whole)) == 0);
	}
}

static void test_a_pipelined_second_request_is_not_consumed(void)
{
	const char *a = "GET /one HTTP/1.1\r\nHost: a\r\n\r\n";
	char two[256];

	snprintf(two, sizeof(two), "%sGET /two HTTP/1.1\r\nHost: a\r\n\r\n", a);
	CU_ASSERT_EQUAL(parse(two), 0);
	CU_ASSERT_EQUAL(req.head_len, strlen(a));
	CU_ASSERT(span_is(req.target, req.target_len, "/one"));
	/* calling again is harmless and changes nothing */
	CU_ASSERT_EQUAL(http_request_parse(&req_p, buf, strlen(two)), 0);
	CU_ASSERT_EQUAL(req.head_len, strlen(a));
	/* the body of a request with Content-Length is not consumed either */
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET"), 0);
	CU_ASSERT_EQUAL(req.head_len, strlen("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"));
	CU_ASSERT_EQUAL(req.content_length, 3);
}

static void test_a_leading_crlf_is_ignored_but_a_bare_lf_is_not(void)
{
	CU_ASSERT_EQUAL(parse("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.head_len, 29);
	CU_ASSERT(span_is(req.target, req.target_len, "/"));
	CU_ASSERT_EQUAL(parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(parse("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("\rGET / HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse(" GET / HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
}

/* ---- the request line ---------------------------------------------------- */

static void test_only_http_1_0_and_1_1_are_accepted(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.version_minor, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET /\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/01.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / http/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("SOURCE / ICE/1.0\r\n\r\n"), BAD);
}

static void test_extra_spaces_in_the_request_line_are_refused(void)
{
	CU_ASSERT_EQUAL(parse("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("get / HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("FOO / HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
}

static void test_the_target_has_no_controls_spaces_or_high_bytes(void)
{
	static const char tab[] = "GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char ff[] = "GET /a\fb HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char high[] = "GET /a\x80 HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char del[] = "GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char nul[] = "GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n";

	CU_ASSERT_EQUAL(parse_n(tab, sizeof(tab) - 1), BAD);
	CU_ASSERT_EQUAL(parse_n(ff, sizeof(ff) - 1), BAD);
	CU_ASSERT_EQUAL(parse_n(high, sizeof(high) - 1), BAD);
	CU_ASSERT_EQUAL(parse_n(del, sizeof(del) - 1), BAD);
	CU_ASSERT_EQUAL(parse_n(nul, sizeof(nul) - 1), BAD);
	CU_ASSERT_EQUAL(parse("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET /%7e~!$&'()*+,;=:@ HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
}

static void test_absolute_form_takes_the_host_from_the_authority(void)
{
	CU_ASSERT_EQUAL(parse("GET http://api.example:8080/v1/x?y=1 HTTP/1.1\r\nHost: other\r\n\r\n"), 0);
	CU_ASSERT(span_is(req.host, req.host_len, "api.example:8080"));
	CU_ASSERT(span_is(req.target, req.target_len, "/v1/x?y=1"));
	CU_ASSERT(span_is(req.target, (size_t)(req.path_end - req.target), "/v1/x"));
	CU_ASSERT(span_is(hdr("Host")->value, hdr("Host")->value_len, "other"));

	CU_ASSERT_EQUAL(parse("GET HTTP://h HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
	CU_ASSERT(span_is(req.host, req.host_len, "h"));
	CU_ASSERT(span_is(req.target, req.target_len, "/"));
	CU_ASSERT_PTR_EQUAL(req.path_end, req.target + 1);

	CU_ASSERT_EQUAL(parse("GET https://[::1]:443/ HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
	CU_ASSERT(span_is(req.host, req.host_len, "[::1]:443"));

	CU_ASSERT_EQUAL(parse("GET http://u:p@h/ HTTP/1.1\r\nHost: h\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET http://h?q HTTP/1.1\r\nHost: h\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET http://[1::2::3]/ HTTP/1.1\r\nHost: h\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET http://h:99999/ HTTP/1.1\r\nHost: h\r\n\r\n"), BAD);
	/* the Host header is still required and still checked */
	CU_ASSERT_EQUAL(parse("GET http://h/ HTTP/1.1\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET http://h/ HTTP/1.1\r\nHost: a b\r\n\r\n"), BAD);
}

static void test_asterisk_form_is_only_for_options(void)
{
	CU_ASSERT_EQUAL(parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	CU_ASSERT(span_is(req.target, req.target_len, "*"));
	CU_ASSERT_EQUAL(req.method_id, HTTP_OPTIONS);
	CU_ASSERT_EQUAL(parse("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
}

static void test_connect_and_authority_form_are_refused(void)
{
	CU_ASSERT_EQUAL(parse("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET a.example HTTP/1.1\r\nHost: a\r\n\r\n"), BAD);
}

/* ---- smuggling ----------------------------------------------------------- */

static void test_every_smuggling_shape_is_refused(void)
{
	static const char *const shapes[] = {
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
		"Content-Length: 5\r\nContent-Length: 5\r\n",
		"Content-Length: 5\r\nContent-Length: 6\r\n",
		"Content-Length: 1,1\r\n",
		"Content-Length: 1, 1\r\n",
		"Content-Length: +5\r\n",
		"Content-Length: -1\r\n",
		"Content-Length: 0x10\r\n",
		"Content-Length: 1 2\r\n",
		"Content-Length:\r\n",
		"Content-Length: 18446744073709551616\r\n",
		"Content-Length: 99999999999999999999999\r\n",
		"Transfer-Encoding: gzip\r\n",
		"Transfer-Encoding: chunked, gzip\r\n",
		"Transfer-Encoding: gzip, chunked\r\n",
		"Transfer-Encoding: xchunked\r\n",
		"Transfer-Encoding: chunkedx\r\n",
		"Transfer-Encoding: chunked,\r\n",
		"Transfer-Encoding: chunked;q=1\r\n",
		"Transfer-Encoding: \r\n",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
	};
	size_t i;
	char s[512];

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		snprintf(s, sizeof(s), "POST / HTTP/1.1\r\nHost: a\r\n%s\r\n", shapes[i]);
		if (parse(s) != SMUG) {
			printf("\nnot refused as smuggling: %s", shapes[i]);
			CU_FAIL("smuggling shape accepted");
		}
	}
}

static void test_transfer_encoding_in_http_1_0_is_smuggling(void)
{
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), SMUG);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
}

static void test_chunked_in_any_case_with_ows_is_accepted(void)
{
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \t ChUnKeD \r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_CHUNKED);
	/* framing is a field of the message, not a header of its list */
	CU_ASSERT_PTR_NULL(hdr("Transfer-Encoding"));
}

/* http-parser 2.9.4 takes any name that starts with "Transfer-Encoding" for
 * one (it flags the name once its 17 bytes have matched) and then refuses
 * it beside a Content-Length; weir frames from its own header list. */
static void test_a_name_that_only_starts_with_transfer_encoding_is_no_framing(void)
{
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
	                      "Transfer-Encoding-Hint: gzip\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(req.content_length, 3);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encodingx: chunked\r\n"
	                      "Content-Length: 3\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding-X: y\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_NONE);
	/* the real one beside a Content-Length is still smuggling */
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	                      "Content-Length: 3\r\n\r\n"), SMUG);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n"
	                      "Content-Length: 3\r\n\r\n"), SMUG);
}

static void test_content_length_is_checked_against_the_body_limit(void)
{
	struct config_limits l = limits();
	const char *s = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n";

	l.body_size = 1000;
	CU_ASSERT_EQUAL(parse_lim(s, strlen(s), &l), WEIR_ERR(BODY_TOO_LARGE));
	l.body_size = 1001;
	CU_ASSERT_EQUAL(parse_lim(s, strlen(s), &l), 0);
	l.body_size = 0; /* unlimited */
	s = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n";
	CU_ASSERT_EQUAL(parse_lim(s, strlen(s), &l), 0);
	CU_ASSERT_EQUAL(req.content_length, UINT64_C(9223372036854775808));
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.content_length, 7);
}

/* ---- bytes in names and values ------------------------------------------- */

static void test_cr_lf_and_nul_in_names_and_values_are_refused(void)
{
#define L(x) {x, sizeof(x) - 1}
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {
		L("X\0Y: a\r\n"), L("X: a\0b\r\n"), L("X: a\rb\r\n"), L("X\rY: a\r\n"),
		L("X: a\nb\r\n"), L("X\nY: a\r\n"), L("X: a\x01\r\n"), L("X: a\x7f\r\n"),
		L("X: \x1b[0m\r\n"), L("X\x80: a\r\n"), L("X\"Y: a\r\n"), L("X/Y: a\r\n"),
		L("(X): a\r\n"), L(": a\r\n"), L("X a: b\r\n"), L("X\r\n"), L("X: a\0\r\n"),
	};
#undef L
	char s[256];
	size_t i, n;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = (size_t)snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: a\r\n");
		memcpy(s + n, bad[i].s, bad[i].len);
		n += bad[i].len;
		memcpy(s + n, "\r\n", 2);
		n += 2;
		if (parse_n(s, n) != BAD) {
			printf("\naccepted header line %zu\n", i);
			CU_FAIL("bad header accepted");
		}
	}
}

static void test_obs_text_and_tabs_in_values_are_accepted(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\ta\xff\r\n\r\n"), 0);
	CU_ASSERT(span_is(hdr("X")->value, hdr("X")->value_len, "caf\xc3\xa9\ta\xff"));
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n!#$%&'*+-.^_`|~09az: x\r\n\r\n"), 0);
	/* OWS around a Content-Length is no part of it (RFC 9110 5.5), an
	 * HTAB as well as a space; inside the digits it is no number */
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t5\t \r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(req.content_length, 5);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\t5\r\n\r\n"), WEIR_ERR(SMUGGLING));
}

static void test_obs_fold_is_refused(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n \r\n\r\n"), BAD);
}

static void test_whitespace_before_the_colon_is_refused(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n"), BAD);
}

static void test_bare_lf_and_bare_cr_are_refused(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\nHost: a\n\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\rHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n\rX"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\r"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n"), BAD);
}

/* A field value may hold VCHAR, obs-text, SP and HTAB, and no other byte
 * (RFC 9110 5.5): <v>[0..len) in "X: <v>", whether the head is taken. */
static int value_taken(const unsigned char *v, size_t len)
{
	char head[128];
	size_t n = (size_t)snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: a\r\nX: ");

	memcpy(head + n, v, len);
	memcpy(head + n + len, "\r\n\r\n", 4);
	return parse_n(head, n + len + 4) == 0;
}

static int value_byte_allowed(unsigned b)
{
	return b == '\t' || (b >= 0x20 && b != 0x7f);
}

/* The value check takes eight bytes at a time: every byte, at every place
 * in a word and past the words, alone and after an allowed byte that
 * sends the check to its byte loop (HTAB) or sits near a word test's
 * edges (SP, '~', obs-text). */
static void test_every_value_byte_is_judged_alone_and_in_company(void)
{
	static const unsigned char company[] = {'\t', ' ', '~', 0x80, 0xff};
	unsigned char v[32];
	int wrong = 0;

	for (size_t len = 1; len <= 24; len++)
		for (size_t k = 0; k < len; k++)
			for (unsigned b = 0; b < 256; b++) {
				memset(v, 'a', len);
				v[k] = (unsigned char)b;
				wrong += value_taken(v, len) != value_byte_allowed(b);
			}
	for (size_t k1 = 0; k1 < 16; k1++)
		for (size_t k2 = 0; k2 < 16; k2++)
			for (size_t c = 0; c < sizeof(company) && k1 != k2; c++)
				for (unsigned b = 0; b < 256; b++) {
					memset(v, 'a', 16);
					v[k1] = company[c];
					v[k2] = (unsigned char)b;
					wrong += value_taken(v, 16) != value_byte_allowed(b);
				}
	CU_ASSERT_EQUAL(wrong, 0);
}

/* ---- Host ---------------------------------------------------------------- */

static void test_http_1_1_needs_exactly_one_host(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nhost: a\r\nHOST: b\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), BAD);
}

static void test_http_1_0_may_omit_host(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\n\r\n"), 0);
	CU_ASSERT_PTR_NULL(req.host);
	CU_ASSERT_EQUAL(req.host_len, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nHost: b.example\r\n\r\n"), 0);
	CU_ASSERT(span_is(req.host, req.host_len, "b.example"));
}

static void test_a_host_must_be_a_valid_host_and_port(void)
{
	static const char *const good[] = {
		"a", "example.com", "EXAMPLE.com:80", "1.2.3.4", "1.2.3.4:65535", "[::1]",
		"[2001:db8::1]:8443", "[::ffff:1.2.3.4]", "a-b_c~d.e", "xn--bcher-kva.example",
		"%41bc", "a!$&'()*+,;=b",
	};
	static const char *const bad[] = {
		"", "a b", "a:", "a:b", "a:123456", "a:65536", ":80", "[::1", "[]", "[::1]x",
		"[g::1]", "a/b", "a@b", "a?b", "a#b", "%4", "%zz", "a:80:80", "[::1]:", "a\"b",
		/* brackets around what is not an IPv6 address (found by fuzzing) */
		"[20021:db8::1]:8080", "[1:2]", "[:::]", "[1::2::3]", "[::1.2]", "[::ffff:1.2.3.4.5]",
		"[.:]", "[0000000000000000000000000000000000000000000000::1]",
	};
	size_t i;
	char s[256];

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
		if (parse(s) != 0 || !span_is(req.host, req.host_len, good[i])) {
			printf("\nrefused host \"%s\"", good[i]);
			CU_FAIL("good host refused");
		}
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
		if (parse(s) != BAD) {
			printf("\naccepted host \"%s\"", bad[i]);
			CU_FAIL("bad host accepted");
		}
	}
}

/* ---- limits -------------------------------------------------------------- */

static void test_a_long_target_is_414_complete_or_not(void)
{
	struct config_limits l = limits();
	char s[2048];
	size_t n;

	l.uri_size = 64;
	n = (size_t)snprintf(s, sizeof(s), "GET /%064d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
	CU_ASSERT_EQUAL(parse_lim(s, n, &l), WEIR_ERR(URI_TOO_LONG));
	/* incomplete: the request line has not even ended */
	CU_ASSERT_EQUAL(parse_lim(s, 4 + 65, &l), WEIR_ERR(URI_TOO_LONG));
	CU_ASSERT_EQUAL(parse_lim(s, 4 + 64, &l), WEIR_EAGAIN);
	/* exactly at the limit is fine */
	n = (size_t)snprintf(s, sizeof(s), "GET /%063d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
	CU_ASSERT_EQUAL(parse_lim(s, n, &l), 0);
	CU_ASSERT_EQUAL(req.target_len, 64);
}

static void test_a_long_head_is_431_complete_or_not(void)
{
	struct config_limits l = limits();
	char s[4096];
	size_t n;

	l.header_size = 1024;
	n = (size_t)snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: a\r\nX: %01000d\r\n\r\n", 0);
	CU_ASSERT(n > 1024);
	CU_ASSERT_EQUAL(parse_lim(s, n, &l), WEIR_ERR(HEADERS_TOO_LARGE));
	CU_ASSERT_EQUAL(parse_lim(s, 1025, &l), WEIR_ERR(HEADERS_TOO_LARGE));
	CU_ASSERT_EQUAL(parse_lim(s, 1024, &l), WEIR_EAGAIN);
	/* a head of exactly header_size bytes is accepted, even with more after it */
	n = (size_t)snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: a\r\nX: %0*d\r\n\r\nBODY",
	                     1024 - 32, 0);
	CU_ASSERT_EQUAL(parse_lim(s, n, &l), 0);
	CU_ASSERT_EQUAL(req.head_len, 1024);
	/* also when it arrives in pieces */
	memcpy(buf, s, n);
	req_init(&l);
	CU_ASSERT_EQUAL(http_request_parse(&req_p, buf, 500), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(http_request_parse(&req_p, buf, n), 0);
	/* a stream of bytes with no line end at all */
	memset(s, 'a', 2000);
	memcpy(s, "GET /", 5);
	l.uri_size = 1000;
	CU_ASSERT_EQUAL(parse_lim(s, 2000, &l), WEIR_ERR(URI_TOO_LONG));
	memcpy(s, "GET / HTTP/1.1\r\nX: ", 19);
	CU_ASSERT_EQUAL(parse_lim(s, 2000, &l), WEIR_ERR(HEADERS_TOO_LARGE));
}

static void test_too_many_headers_is_431_complete_or_not(void)
{
	struct config_limits l = limits();
	char s[4096];
	size_t n;
	int i;

	l.headers = 5;
	n = (size_t)snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: a\r\n");
	for (i = 0; i < 4; i++)
		n += (size_t)snprintf(s + n, sizeof(s) - n, "X-%d: v\r\n", i);
	n += (size_t)snprintf(s + n, sizeof(s) - n, "\r\n");
	CU_ASSERT_EQUAL(parse_lim(s, n, &l), 0);
	CU_ASSERT_EQUAL(req.hl.n, 5);
	n -= 2;
	n += (size_t)snprintf(s + n, sizeof(s) - n, "X-5: v\r\n\r\n");
	CU_ASSERT_EQUAL(parse_lim(s, n, &l), WEIR_ERR(HEADERS_TOO_LARGE));
	CU_ASSERT_EQUAL(parse_lim(s, n - 6, &l), WEIR_ERR(HEADERS_TOO_LARGE));
}

/* ---- flags, keep-alive, expect ------------------------------------------- */

static void test_headers_get_their_flags(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n"
	                      "Keep-Alive: 5\r\nTE: trailers\r\nTrailer: x\r\nUpgrade: h2c\r\n"
	                      "Proxy-Authorization: b\r\nPROXY-CONNECTION: c\r\nContent-Length: 0\r\n"
	                      "X-Forwarded-For: 1.2.3.4\r\nx-forwarded-proto: http\r\n"
	                      "Expect: 100-continue\r\nVia: 1.1 p\r\nX-Other: y\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(hdr("Host")->flags, HDR_HOST);
	CU_ASSERT_EQUAL(hdr("Connection")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("Keep-Alive")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("TE")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("Trailer")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("Upgrade")->flags, HDR_HOP | HDR_UPGRADE);
	CU_ASSERT_PTR_EQUAL(req.upgrade, hdr("Upgrade"));
	CU_ASSERT_EQUAL(req.conn_upgrade, 0); /* Connection does not list it */
	CU_ASSERT_EQUAL(hdr("Proxy-Authorization")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("PROXY-CONNECTION")->flags, HDR_HOP);
	CU_ASSERT_PTR_NULL(hdr("Content-Length")); /* framing: out of the list */
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(hdr("X-Forwarded-For")->flags, HDR_XFF);
	CU_ASSERT_EQUAL(hdr("x-forwarded-proto")->flags, HDR_XFP);
	CU_ASSERT_EQUAL(hdr("Expect")->flags, HDR_EXPECT);
	CU_ASSERT_EQUAL(hdr("Via")->flags, HDR_VIA);
	CU_ASSERT_EQUAL(hdr("X-Other")->flags, 0);
	CU_ASSERT_EQUAL(req.expect_continue, 1);
}

static void test_an_upgrade_request_is_noted(void)
{
	CU_ASSERT_EQUAL(parse("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n"
	                      "Upgrade: websocket\r\nHTTP2-Settings: AAMA\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(req.conn_upgrade, 1);
	CU_ASSERT(req.upgrade && req.upgrade->value_len == 9);
	/* HTTP2-Settings belongs to h2c, never forwarded: hop-by-hop always */
	CU_ASSERT_EQUAL(hdr("HTTP2-Settings")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(parse("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n"
	                      "Upgrade: websocket\r\nUpgrade: foo\r\n\r\n"),
	                0);
	CU_ASSERT(req.upgrade == NULL); /* two Upgrade headers: no upgrade */
}

static void test_underscore_lookalikes_of_framing_and_hop_by_hop_names_are_flagged(void)
{
	/* the parser's own framing reads only the exact names */
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n"
	                      "content_LENGTH: 5\r\nKeep_Alive: 1\r\nProxy_Connection: c\r\n"
	                      "PROXY_X: 1\r\nProxy-A_b: 1\r\nX_Api_Key: k\r\nConnection_: x\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(hdr("Transfer_Encoding")->flags, HDR_LOOKALIKE | HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(hdr("content_LENGTH")->flags, HDR_LOOKALIKE | HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(hdr("Keep_Alive")->flags, HDR_LOOKALIKE | HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(hdr("Proxy_Connection")->flags, HDR_LOOKALIKE | HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(hdr("PROXY_X")->flags, HDR_LOOKALIKE | HDR_UNDERSCORE);
	/* a real Proxy-* name is hop-by-hop, a '_' further on or not */
	CU_ASSERT_EQUAL(hdr("Proxy-A_b")->flags, HDR_HOP | HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(hdr("X_Api_Key")->flags, HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(hdr("Connection_")->flags, HDR_UNDERSCORE);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_NONE);
}

static void test_a_header_named_in_connection_is_hop_by_hop(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nX-Before: 1\r\nHost: a\r\n"
	                      "Connection: , x-before ,X-AFTER,, \r\nConnection: x-third\r\n"
	                      "X-After: 2\r\nX-Third: 3\r\nX-Kept: 4\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(hdr("X-Before")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("X-After")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("X-Third")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("X-Kept")->flags, 0);
	CU_ASSERT_EQUAL(req.keep_alive, 1);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n"), BAD);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: a;b\r\n\r\n"), BAD);
}

static void test_connection_tokens_are_bounded(void)
{
	/* 16 over two headers, empty elements not counted: fine */
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n"
	                      "Connection: t1, t2, t3, t4, t5, t6, t7, t8,,,\r\n"
	                      "Connection: t9, t10, t11, t12, t13, t14, t15, close\r\nT15: x\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(hdr("T15")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(req.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n"
	                      "Connection: t1, t2, t3, t4, t5, t6, t7, t8\r\n"
	                      "Connection: t9, t10, t11, t12, t13, t14, t15, t16, t17\r\n\r\n"),
	                WEIR_ERR(CONNECTION_TOKENS));
}

static void test_keep_alive_follows_the_version_and_connection(void)
{
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 1);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 1);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nConnection: keep-alive-ish\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 0);
}

static void test_expect_continue_needs_the_exact_value_and_http_1_1(void)
{
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n"
	                      "Content-Length: 3\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(req.expect_continue, 1);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue-x\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.expect_continue, 0);
	CU_ASSERT(hdr("Expect")->flags & HDR_EXPECT);
	CU_ASSERT_EQUAL(parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(req.expect_continue, 0);
}

static void test_an_error_stays_an_error(void)
{
	const char *s = "GET / HTTP/1.1\r\nHost : a\r\n\r\n";

	CU_ASSERT_EQUAL(parse(s), BAD);
	CU_ASSERT_EQUAL(http_request_parse(&req_p, buf, strlen(s)), BAD);
	s = "GET / HTTP/1.1\r\n\r\n";
	CU_ASSERT_EQUAL(parse(s), BAD);
	CU_ASSERT_EQUAL(http_request_parse(&req_p, buf, strlen(s)), BAD);
}

/* ---- a head given as fields (HTTP/2) ------------------------------------- */

/*
 * Gives the head of <n> bytes of <s>, copied into buf, to the field entry
 * instead of the reader: the method and target of its request line, then
 * each field line as a name and the value after ": " (its other
 * whitespace kept), spans at the same places in buf as the reader's, so
 * the two messages compare offset for offset. <open_body> as in
 * http_request_end_fields().
 */
static int fields_lim(const char *s, size_t n, int open_body, const struct config_limits *lim)
{
	const char *p = buf, *e, *sp, *sp2, *colon;
	int rc;

	memcpy(buf, s, n);
	req_init(lim);
	e = memmem(p, n, "\r\n", 2);
	sp = memchr(p, ' ', (size_t)(e - p));
	sp2 = memchr(sp + 1, ' ', (size_t)(e - sp - 1));
	rc = http_request_begin_fields(&req_p, p, (size_t)(sp - p), sp + 1, (size_t)(sp2 - sp - 1));
	for (p = e + 2; !rc && (e = memmem(p, n - (size_t)(p - buf), "\r\n", 2)) && e > p; p = e + 2) {
		const char *v;

		colon = memchr(p, ':', (size_t)(e - p));
		v = colon + (colon[1] == ' ' ? 2 : 1);
		rc = http_request_add_field(&req_p, p, (size_t)(colon - p), v, (size_t)(e - v));
	}
	return rc ? rc : http_request_end_fields(&req_p, open_body);
}

static int fields(const char *s, int open_body)
{
	struct config_limits l = limits();

	return fields_lim(s, strlen(s), open_body, &l);
}

static void test_a_head_given_as_fields_makes_the_message_its_text_does(void)
{
	static const char *const heads[] = {
		"GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent:  curl/8 \t\r\nAccept: */*\r\n\r\n",
		"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nConnection: x-b\r\nX-B: 1\r\n"
		"TE: trailers\r\nExpect: 100-continue\r\nX-Forwarded-For: 1.2.3.4\r\nVia: 1.1 p\r\n\r\n",
		"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: [::1]:8443\r\nX_Forwarded_For: 1\r\nProxy-X: 2\r\n\r\n",
		/* refused alike */
		"FOO / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
		"CONNECT a:1 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\x7f" "b\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\x01" "b\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n",
	};
	struct snap text, flds;

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		take(&text, parse(heads[i]));
		take(&flds, fields(heads[i], 0));
		CU_ASSERT_EQUAL(flds.rc, text.rc);
		CU_ASSERT(memcmp(&flds, &text, sizeof(text)) == 0);
		if (memcmp(&flds, &text, sizeof(text)) != 0)
			fprintf(stderr, "\n  head %zu differs (rc %d, %d)\n", i, text.rc, flds.rc);
	}
	/* the spans stay in the caller's bytes, the framing out of the list */
	CU_ASSERT_EQUAL(fields(heads[1], 0), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(req.content_length, 12);
	CU_ASSERT_PTR_NULL(hdr("Content-Length"));
	CU_ASSERT_EQUAL(hdr("X-B")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(req.expect_continue, 1);
	CU_ASSERT_EQUAL(req.head_len, strlen(heads[1]));
	CU_ASSERT_EQUAL(fields(heads[2], 0), 0);
	CU_ASSERT(req.conn_upgrade && req.upgrade == hdr("Upgrade"));
}

static void test_fields_refuse_what_a_field_line_cannot_say(void)
{
	struct config_limits l = limits();
	char name[] = "x-a", value[] = "a\rb";

	req_init(&l);
	CU_ASSERT_EQUAL(http_request_begin_fields(&req_p, "GET", 3, "/", 1), 0);
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, name, 3, value, 3), BAD); /* CR */
	value[1] = '\n';
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, name, 3, value, 3), BAD);
	value[1] = '\0';
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, name, 3, value, 3), BAD);
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, "x a", 3, "v", 1), BAD);
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, "x:a", 3, "v", 1), BAD);
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, "", 0, "v", 1), BAD);
	CU_ASSERT_EQUAL(http_request_add_field(&req_p, name, 3, "\t\x80\xff v", 5), 0); /* obs-text, tabs */
	/* targets: origin-form or "*" only, every byte VCHAR */
	req_init(&l);
	CU_ASSERT_EQUAL(http_request_begin_fields(&req_p, "GET", 3, "http://a/b", 10), BAD);
	req_init(&l);
	CU_ASSERT_EQUAL(http_request_begin_fields(&req_p, "GET", 3, "a/b", 3), BAD);
	req_init(&l);
	CU_ASSERT_EQUAL(http_request_begin_fields(&req_p, "GET", 3, "", 0), BAD);
	req_init(&l);
	CU_ASSERT_EQUAL(http_request_begin_fields(&req_p, "GET", 3, "/a b", 4), BAD);
	req_init(&l);
	CU_ASSERT_EQUAL(http_request_begin_fields(&req_p, "get", 3, "/", 1), BAD);
}

static void test_fields_have_no_transfer_coding_and_an_open_body_is_chunked(void)
{
	const char *chunked = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
	const char *plain = "POST / HTTP/1.1\r\nHost: a\r\n\r\n";

	CU_ASSERT_EQUAL(parse(chunked), 0);
	CU_ASSERT_EQUAL(fields(chunked, 0), SMUG); /* RFC 9113 8.2.2 */
	CU_ASSERT_EQUAL(fields(chunked, 1), SMUG);
	CU_ASSERT_EQUAL(fields(plain, 0), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(fields(plain, 1), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_CHUNKED);
	CU_ASSERT_EQUAL(fields("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", 1), 0);
	CU_ASSERT_EQUAL(req.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(req.content_length, 5);
	/* a stream ends, its connection stays: whatever a field says */
	CU_ASSERT_EQUAL(fields("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 0), 0);
	CU_ASSERT_EQUAL(req.keep_alive, 1);
	CU_ASSERT_EQUAL(req.version_minor, 1);
}

static void test_fields_are_held_to_the_same_limits(void)
{
	/* each head just at and just past a limit: the reader's answer */
	static const struct {
		uint32_t uri, head, headers;
		uint64_t body;
		int pad; /* bytes of X's value */
		int want;
	} cases[] = {
		{64, 0, 0, 0, -64, 0},
		{64, 0, 0, 0, -65, WEIR_ERR(URI_TOO_LONG)},
		{0, 1024, 0, 0, 1024 - 32, 0},
		{0, 1024, 0, 0, 1024 - 31, WEIR_ERR(HEADERS_TOO_LARGE)},
		{0, 0, 2, 0, 1, 0},
		{0, 0, 1, 0, 1, WEIR_ERR(HEADERS_TOO_LARGE)},
		{0, 0, 0, 1000, 1000, 0},
		{0, 0, 0, 999, 1000, WEIR_ERR(BODY_TOO_LARGE)},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config_limits l = limits();
		char s[4096];
		size_t n;

		l.uri_size = cases[i].uri ? cases[i].uri : l.uri_size;
		l.header_size = cases[i].head ? cases[i].head : l.header_size;
		l.headers = cases[i].headers ? cases[i].headers : l.headers;
		l.body_size = cases[i].body ? cases[i].body : l.body_size;
		if (cases[i].pad < 0) /* a target of that many bytes */
			n = (size_t)snprintf(s, sizeof(s), "GET /%0*d HTTP/1.1\r\nHost: a\r\n\r\n", -cases[i].pad - 1, 0);
		else if (cases[i].body)
			n = (size_t)snprintf(s, sizeof(s), "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n",
			                     cases[i].pad);
		else
			n = (size_t)snprintf(s, sizeof(s), "GET / HTTP/1.1\r\nHost: a\r\nX: %0*d\r\n\r\n", cases[i].pad, 0);
		CU_ASSERT_EQUAL(parse_lim(s, n, &l), cases[i].want);
		CU_ASSERT_EQUAL(fields_lim(s, n, 0, &l), cases[i].want);
		if (!cases[i].want)
			CU_ASSERT_EQUAL(req.head_len, n);
	}
}

static const struct unit_test tests[] = {
		{"a simple GET is parsed into spans of the buffer",
		 test_simple_get_is_parsed_into_spans},
		{"path_end is at the '?' or at the end of the target",
		 test_path_end_is_the_target_end_without_a_query},
		{"a head split at every byte boundary parses the same",
		 test_a_head_split_at_every_byte_boundary_parses_the_same},
		{"a head fed one byte at a time parses the same",
		 test_a_head_fed_one_byte_at_a_time_parses_the_same},
		{"a pipelined second request is not consumed",
		 test_a_pipelined_second_request_is_not_consumed},
		{"a leading CRLF is ignored but a bare LF is not",
		 test_a_leading_crlf_is_ignored_but_a_bare_lf_is_not},
		{"only HTTP/1.0 and HTTP/1.1 are accepted",
		 test_only_http_1_0_and_1_1_are_accepted},
		{"extra spaces in the request line are refused",
		 test_extra_spaces_in_the_request_line_are_refused},
		{"the target has no controls, spaces, DEL or high bytes",
		 test_the_target_has_no_controls_spaces_or_high_bytes},
		{"absolute-form takes the host from the authority",
		 test_absolute_form_takes_the_host_from_the_authority},
		{"asterisk-form is only for OPTIONS",
		 test_asterisk_form_is_only_for_options},
		{"CONNECT and authority-form are refused",
		 test_connect_and_authority_form_are_refused},
		{"every smuggling shape is refused as smuggling",
		 test_every_smuggling_shape_is_refused},
		{"Transfer-Encoding in HTTP/1.0 is smuggling",
		 test_transfer_encoding_in_http_1_0_is_smuggling},
		{"chunked in any case with OWS around it is accepted",
		 test_chunked_in_any_case_with_ows_is_accepted},
		{"Content-Length is checked against the body limit",
		 test_content_length_is_checked_against_the_body_limit},
		{"CR, LF, NUL and other controls in names and values are refused",
		 test_cr_lf_and_nul_in_names_and_values_are_refused},
		{"obs-text and tabs in values are accepted",
		 test_obs_text_and_tabs_in_values_are_accepted},
		{"obs-fold is refused",
		 test_obs_fold_is_refused},
		{"whitespace before the colon is refused",
		 test_whitespace_before_the_colon_is_refused},
		{"bare LF and bare CR are refused",
		 test_bare_lf_and_bare_cr_are_refused},
		{"every value byte is judged alone and in company",
		 test_every_value_byte_is_judged_alone_and_in_company},
		{"HTTP/1.1 needs exactly one Host",
		 test_http_1_1_needs_exactly_one_host},
		{"HTTP/1.0 may omit Host",
		 test_http_1_0_may_omit_host},
		{"a Host must be a valid host and port",
		 test_a_host_must_be_a_valid_host_and_port},
		{"a name that only starts with Transfer-Encoding is no framing",
		 test_a_name_that_only_starts_with_transfer_encoding_is_no_framing},
		{"a long target is 414, complete or not",
		 test_a_long_target_is_414_complete_or_not},
		{"a long head is 431, complete or not",
		 test_a_long_head_is_431_complete_or_not},
		{"too many headers is 431, complete or not",
		 test_too_many_headers_is_431_complete_or_not},
		{"headers get their flags",
		 test_headers_get_their_flags},
		{"an upgrade request is noted", test_an_upgrade_request_is_noted},
		{"a header named in Connection is hop-by-hop",
		 test_a_header_named_in_connection_is_hop_by_hop},
		{"underscore lookalikes of framing and hop-by-hop names are flagged",
		 test_underscore_lookalikes_of_framing_and_hop_by_hop_names_are_flagged},
		{"more than 16 Connection tokens are refused", test_connection_tokens_are_bounded},
		{"keep_alive follows the version and Connection",
		 test_keep_alive_follows_the_version_and_connection},
		{"expect_continue needs the exact value and HTTP/1.1",
		 test_expect_continue_needs_the_exact_value_and_http_1_1},
		{"an error stays an error",
		 test_an_error_stays_an_error},
		{"a head given as fields makes the message its text does",
		 test_a_head_given_as_fields_makes_the_message_its_text_does},
		{"fields refuse what a field line cannot say",
		 test_fields_refuse_what_a_field_line_cannot_say},
		{"fields have no transfer coding, and an open body is chunked",
		 test_fields_have_no_transfer_coding_and_an_open_body_is_chunked},
		{"fields are held to the same limits",
		 test_fields_are_held_to_the_same_limits},
	};

UNIT_MAIN("worker/http_request", tests)
