/*
 * Unit tests for worker/h1/http_response.c.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "tests/unit/unit.h"

#define BADRESP WEIR_ERR(UPSTREAM_BAD_RESPONSE)

static struct hdr hdrs[HTTP_MAX_HEADERS];
static struct arena arena;
static struct msg resp;
static struct http_response resp_p;

static void resp_init(uint32_t max_headers, size_t max_head, enum http_method m)
{
	arena_init(&arena, hdrs, sizeof(hdrs));
	http_response_init(&resp_p, &resp, &arena, max_headers, max_head, m);
}
static char buf[70000];

static int parse_full(const char *s, size_t n, uint32_t max_headers, size_t max_head,
                      enum http_method m)
{
	memcpy(buf, s, n);
	resp_init(max_headers, max_head, m);
	return http_response_parse(&resp_p, buf, n);
}

static int parse_m(const char *s, enum http_method m)
{
	return parse_full(s, strlen(s), 100, 16384, m);
}

static int parse(const char *s)
{
	return parse_m(s, HTTP_GET);
}

static const struct hdr *hdr(const char *name)
{
	uint32_t i;

	for (i = 0; i < resp.hl.n; i++)
		if (resp.hl.v[i].name_len == strlen(name) &&
		    memcmp(resp.hl.v[i].name, name, strlen(name)) == 0)
			return &resp.hl.v[i];
	return NULL;
}

static int span_is(const char *p, size_t len, const char *s)
{
	return p && len == strlen(s) && memcmp(p, s, len) == 0;
}

/* ---- basics -------------------------------------------------------------- */

static void test_a_simple_response_is_parsed_into_spans(void)
{
	const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer:  origin \r\n\r\nhello";

	CU_ASSERT_EQUAL(parse(s), 0);
	CU_ASSERT_EQUAL(resp.status, 200);
	CU_ASSERT(span_is(resp.reason, resp.reason_len, "OK"));
	CU_ASSERT_EQUAL(resp.version_minor, 1);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(resp.content_length, 5);
	CU_ASSERT_EQUAL(resp.keep_alive, 1);
	CU_ASSERT_EQUAL(resp.head_len, strlen(s) - 5);
	CU_ASSERT_EQUAL(resp.hl.n, 1); /* Content-Length is the framing, not a header */
	CU_ASSERT(span_is(hdr("Server")->value, hdr("Server")->value_len, "origin"));
	CU_ASSERT_EQUAL(hdr("Server")->tok, HT_OTHER);
	CU_ASSERT_PTR_NULL(hdr("Content-Length"));
}

static void test_a_reason_may_be_empty_or_absent(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.status, 200);
	CU_ASSERT_EQUAL(resp.reason_len, 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.status, 404);
	CU_ASSERT_EQUAL(resp.reason_len, 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 500 Internal  Server\tError \xe2\x80\xa6\r\n\r\n"), 0);
	CU_ASSERT(span_is(resp.reason, resp.reason_len, "Internal  Server\tError \xe2\x80\xa6"));
}

static void test_a_response_split_at_every_byte_boundary_parses_the_same(void)
{
	static const char *const cases[] = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: x-y\r\nX-Y: 1\r\n"
		"X-E:\r\n\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
	};
	size_t c, k;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const char *s = cases[c];
		size_t n = strlen(s);
		int whole = parse(s), rc;
		struct msg w = resp;

		for (k = 0; k <= n; k++) {
			memcpy(buf, s, n);
			resp_init(100, 16384, HTTP_GET);
			rc = http_response_parse(&resp_p, buf, k);
			if (rc == WEIR_EAGAIN)
				rc = http_response_parse(&resp_p, buf, n);
			CU_ASSERT_EQUAL(rc, whole);
			if (rc == 0) {
				CU_ASSERT_EQUAL(resp.head_len, w.head_len);
				CU_ASSERT_EQUAL(resp.body, w.body);
				CU_ASSERT_EQUAL(resp.keep_alive, w.keep_alive);
				CU_ASSERT_EQUAL(resp.hl.n, w.hl.n);
				CU_ASSERT_EQUAL(resp.status, w.status);
				CU_ASSERT_PTR_EQUAL(resp.reason, w.reason);
			}
		}
	}
}

/* ---- the status line ----------------------------------------------------- */

static void test_status_codes_need_exactly_three_digits_in_range(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/1.1 20 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 2000 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 0200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 600 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 099 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 2x0 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1  200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200\tOK\r\n\r\n"), BADRESP);
	/* a 101 parses; txn.c decides whether it switches (worker/core/core.h) */
	CU_ASSERT_EQUAL(parse("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.status, 101);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT(resp.conn_upgrade);
	CU_ASSERT(resp.upgrade && resp.upgrade->value_len == 1 && resp.upgrade->value[0] == 'x');
	CU_ASSERT_EQUAL(parse("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nUpgrade: y\r\n\r\n"), 0);
	CU_ASSERT(resp.upgrade == NULL); /* two: no single protocol to switch to */
	CU_ASSERT_EQUAL(parse("HTTP/1.1 599 Odd\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 100 Continue\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.status, 100);
}

static void test_only_http_1_0_and_1_1_responses_are_accepted(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/2.0 200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.2 200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/0.9 200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/01.1 200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("ICY 200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.0 200 OK\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.version_minor, 0);
}

static void test_controls_in_the_reason_are_refused(void)
{
	static const char nul[] = "HTTP/1.1 200 O\0K\r\n\r\n";

	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 O\x01K\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 O\x7fK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse_full(nul, sizeof(nul) - 1, 100, 16384, HTTP_GET), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 O\rK\r\n\r\n"), BADRESP);
}

static void test_empty_lines_before_the_status_line_are_refused(void)
{
	CU_ASSERT_EQUAL(parse("\r\nHTTP/1.1 200 OK\r\n\r\n"), BADRESP);
	CU_ASSERT_EQUAL(parse("\nHTTP/1.1 200 OK\r\n\r\n"), BADRESP);
}

/* ---- header bytes -------------------------------------------------------- */

static void test_malformed_header_lines_are_refused(void)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n",
		"HTTP/1.1 200 OK\r\nX: a\rY: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n\rY",
		"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n\tb\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX\t: a\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX/Y: a\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: a b\r\n\r\n",
	};
	static const char nul[] = "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n";
	static const char nulname[] = "HTTP/1.1 200 OK\r\nX\0: a\r\n\r\n";
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i]) != BADRESP) {
			printf("\naccepted: %s", bad[i]);
			CU_FAIL("malformed response accepted");
		}
	}
	CU_ASSERT_EQUAL(parse_full(nul, sizeof(nul) - 1, 100, 16384, HTTP_GET), BADRESP);
	CU_ASSERT_EQUAL(parse_full(nulname, sizeof(nulname) - 1, 100, 16384, HTTP_GET), BADRESP);
}

static void test_a_head_past_max_head_is_refused_complete_or_not(void)
{
	char s[2048];
	size_t n;

	n = (size_t)snprintf(s, sizeof(s), "HTTP/1.1 200 OK\r\nX: %01010d\r\n\r\n", 0);
	CU_ASSERT_EQUAL(parse_full(s, n, 100, 1024, HTTP_GET), BADRESP);
	CU_ASSERT_EQUAL(parse_full(s, n, 100, n - 1, HTTP_GET), BADRESP);
	CU_ASSERT_EQUAL(parse_full(s, 1025, 100, 1024, HTTP_GET), BADRESP);
	CU_ASSERT_EQUAL(parse_full(s, 1024, 100, 1024, HTTP_GET), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(parse_full(s, n, 100, n, HTTP_GET), 0);
}

static void test_too_many_headers_are_refused(void)
{
	const char *s = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";

	CU_ASSERT_EQUAL(parse_full(s, strlen(s), 3, 16384, HTTP_GET), 0);
	CU_ASSERT_EQUAL(parse_full(s, strlen(s), 2, 16384, HTTP_GET), BADRESP);
	CU_ASSERT_EQUAL(parse_full(s, strlen(s) - 3, 2, 16384, HTTP_GET), BADRESP);
}

/* ---- framing ------------------------------------------------------------- */

static void test_framing_ambiguities_are_refused(void)
{
	static const char *const shapes[] = {
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
		"Content-Length: 5\r\nContent-Length: 5\r\n",
		"Content-Length: 1,1\r\n",
		"Content-Length: +5\r\n",
		"Content-Length: -1\r\n",
		"Content-Length: 99999999999999999999999\r\n",
		"Transfer-Encoding: gzip\r\n",
		"Transfer-Encoding: chunked, gzip\r\n",
		"Transfer-Encoding: gzip, chunked\r\n",
		"Transfer-Encoding: xchunked\r\n",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
	};
	size_t i;
	char s[512];

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		snprintf(s, sizeof(s), "HTTP/1.1 200 OK\r\n%s\r\n", shapes[i]);
		if (parse(s) != BADRESP) {
			printf("\naccepted: %s", shapes[i]);
			CU_FAIL("ambiguous framing accepted");
		}
	}
	CU_ASSERT_EQUAL(parse("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), BADRESP);
}

static void test_chunked_and_length_and_close_framing(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_CHUNKED);
	CU_ASSERT_EQUAL(resp.keep_alive, 1);
	CU_ASSERT_PTR_NULL(hdr("Transfer-Encoding"));
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(resp.content_length, 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_CLOSE);
	CU_ASSERT_EQUAL(resp.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_CLOSE);
	CU_ASSERT_EQUAL(resp.keep_alive, 0);
}

/* as in requests: http-parser takes "Transfer-Encoding-X" for the real one */
static void test_a_name_that_only_starts_with_transfer_encoding_is_no_framing(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding-X: gzip\r\nContent-Length: 2\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(resp.content_length, 2);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n"),
	                WEIR_ERR(UPSTREAM_BAD_RESPONSE));
}

static void test_head_204_304_and_1xx_responses_have_no_body(void)
{
	CU_ASSERT_EQUAL(parse_m("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", HTTP_HEAD), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(resp.keep_alive, 1);
	CU_ASSERT_EQUAL(parse_m("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP_HEAD), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n"
	                      "Transfer-Encoding: chunked\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT_EQUAL(resp.head_len, 25);
	/* the length must still be a number */
	CU_ASSERT_EQUAL(parse_m("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", HTTP_HEAD), BADRESP);
	CU_ASSERT_EQUAL(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 1\r\n"
	                      "Content-Length: 1\r\n\r\n"),
	                BADRESP);
}

static void test_keep_alive_follows_the_version_and_connection(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.keep_alive, 0);
	CU_ASSERT_EQUAL(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n"), 0);
	CU_ASSERT_EQUAL(resp.keep_alive, 1);
	CU_ASSERT_EQUAL(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n"
	                      "Connection: keep-alive, close\r\n\r\n"),
	                0);
	CU_ASSERT_EQUAL(resp.keep_alive, 0);
}

static void test_response_headers_get_their_flags(void)
{
	CU_ASSERT_EQUAL(parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: X-Secret\r\n"
	                      "X-Secret: s\r\nKeep-Alive: timeout=5\r\nVia: 1.1 o\r\n"
	                      "Proxy-Authenticate: B\r\nUpgrade: x\r\nTrailer: t\r\nX-Ok: 1\r\n\r\n"),
	                0);
	CU_ASSERT_PTR_NULL(hdr("Content-Length"));
	CU_ASSERT_EQUAL(hdr("Connection")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("X-Secret")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("Keep-Alive")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("Via")->flags, HDR_VIA);
	CU_ASSERT_EQUAL(hdr("Proxy-Authenticate")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("Upgrade")->flags, HDR_HOP | HDR_UPGRADE);
	CU_ASSERT_EQUAL(hdr("Trailer")->flags, HDR_HOP);
	CU_ASSERT_EQUAL(hdr("X-Ok")->flags, 0);
}

static void test_a_pipelined_response_is_not_consumed(void)
{
	const char *a = "HTTP/1.1 204 No Content\r\n\r\n";
	char two[128];

	snprintf(two, sizeof(two), "%sHTTP/1.1 204 No Content\r\n\r\n", a);
	CU_ASSERT_EQUAL(parse(two), 0);
	CU_ASSERT_EQUAL(resp.head_len, strlen(a));
	CU_ASSERT_EQUAL(http_response_parse(&resp_p, buf, strlen(two)), 0);
	CU_ASSERT_EQUAL(resp.head_len, strlen(a));
}

/* A head of fields (HTTP/2): name, value pairs, NULL-ended. */
static int fields(int status, enum http_method m, const char *const *f)
{
	int rc = 0;

	resp_init(100, 16384, m);
	for (; *f && rc == 0; f += 2)
		rc = http_response_field(&resp_p, f[0], strlen(f[0]), f[1], strlen(f[1]));
	rc = http_response_fields_end(&resp_p, status);
	return rc;
}

static void test_a_head_of_fields_gets_the_checks_of_a_text_head(void)
{
	static const char *const ok[] = {"content-length", "5", "connection-named", "x", "x-a", " v ", NULL};
	static const char *const nolen[] = {"x-a", "1", NULL};
	static const char *const bad_cl[] = {"content-length", "5x", NULL};
	static const char *const two_cl[] = {"content-length", "5", "content-length", "5", NULL};
	static const char *const te[] = {"transfer-encoding", "chunked", NULL};
	static const char *const bad_name[] = {"x a", "1", NULL};
	static const char *const bad_value[] = {"x-a", "a\001b", NULL};
	static const char *const hop[] = {"connection", "x-gone", "x-gone", "1", "x-kept", "2", NULL};
	static const char *const headlen[] = {"content-length", "10", NULL};

	CU_ASSERT_EQUAL_FATAL(fields(200, HTTP_GET, ok), 0);
	CU_ASSERT_EQUAL(resp.status, 200);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(resp.content_length, 5);
	CU_ASSERT_EQUAL(resp.head_len, 0);
	CU_ASSERT_EQUAL_FATAL(resp.hl.n, 2); /* the framing is out of the list */
	CU_ASSERT_EQUAL(resp.hl.v[1].value_len, 1); /* trimmed */
	CU_ASSERT_EQUAL(fields(200, HTTP_GET, nolen), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_CLOSE); /* until the stream ends */
	CU_ASSERT_EQUAL(fields(200, HTTP_GET, bad_cl), BADRESP);
	CU_ASSERT_EQUAL(fields(200, HTTP_GET, two_cl), BADRESP);
	CU_ASSERT_EQUAL(fields(200, HTTP_GET, te), BADRESP);
	CU_ASSERT_EQUAL(fields(200, HTTP_GET, bad_name), BADRESP);
	CU_ASSERT_EQUAL(fields(200, HTTP_GET, bad_value), BADRESP);
	CU_ASSERT_EQUAL(fields(600, HTTP_GET, nolen), BADRESP);
	CU_ASSERT_EQUAL_FATAL(fields(200, HTTP_GET, hop), 0);
	CU_ASSERT_EQUAL_FATAL(resp.hl.n, 3);
	CU_ASSERT(resp.hl.v[1].flags & HDR_HOP); /* named by Connection */
	CU_ASSERT(!(resp.hl.v[2].flags & HDR_HOP));
	CU_ASSERT_EQUAL(fields(200, HTTP_HEAD, headlen), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
	CU_ASSERT(resp.length_info && resp.content_length == 10);
	CU_ASSERT_EQUAL(fields(204, HTTP_GET, nolen), 0);
	CU_ASSERT_EQUAL(resp.body, HTTP_BODY_NONE);
}

static void test_a_head_of_fields_is_held_to_the_limits(void)
{
	char v[200];
	int rc = 0;

	memset(v, 'a', sizeof(v) - 1);
	v[sizeof(v) - 1] = 0;
	resp_init(3, 16384, HTTP_GET);
	for (int i = 0; i < 4 && rc == 0; i++)
		rc = http_response_field(&resp_p, "x-a", 3, "1", 1);
	CU_ASSERT_EQUAL(rc, BADRESP);
	CU_ASSERT_EQUAL(http_response_fields_end(&resp_p, 200), BADRESP); /* sticky */
	resp_init(100, 300, HTTP_GET);
	CU_ASSERT_EQUAL(http_response_field(&resp_p, "x-a", 3, v, strlen(v)), 0);
	CU_ASSERT_EQUAL(http_response_field(&resp_p, "x-b", 3, v, strlen(v)), BADRESP);
}

static const struct unit_test tests[] = {
		{"a simple response is parsed into spans",
		 test_a_simple_response_is_parsed_into_spans},
		{"a reason may be empty or absent",
		 test_a_reason_may_be_empty_or_absent},
		{"a response split at every byte boundary parses the same",
		 test_a_response_split_at_every_byte_boundary_parses_the_same},
		{"status codes need exactly three digits in range",
		 test_status_codes_need_exactly_three_digits_in_range},
		{"only HTTP/1.0 and HTTP/1.1 responses are accepted",
		 test_only_http_1_0_and_1_1_responses_are_accepted},
		{"controls in the reason are refused",
		 test_controls_in_the_reason_are_refused},
		{"empty lines before the status line are refused",
		 test_empty_lines_before_the_status_line_are_refused},
		{"malformed header lines are refused",
		 test_malformed_header_lines_are_refused},
		{"a head past max_head is refused, complete or not",
		 test_a_head_past_max_head_is_refused_complete_or_not},
		{"too many headers are refused",
		 test_too_many_headers_are_refused},
		{"framing ambiguities are refused",
		 test_framing_ambiguities_are_refused},
		{"chunked, length and close framing are told apart",
		 test_chunked_and_length_and_close_framing},
		{"a name that only starts with Transfer-Encoding is no framing",
		 test_a_name_that_only_starts_with_transfer_encoding_is_no_framing},
		{"HEAD, 204, 304 and 1xx responses have no body",
		 test_head_204_304_and_1xx_responses_have_no_body},
		{"keep_alive follows the version and Connection",
		 test_keep_alive_follows_the_version_and_connection},
		{"response headers get their flags",
		 test_response_headers_get_their_flags},
		{"a pipelined response is not consumed",
		 test_a_pipelined_response_is_not_consumed},
		{"a head of fields gets the checks of a text head",
		 test_a_head_of_fields_gets_the_checks_of_a_text_head},
		{"a head of fields is held to the limits",
		 test_a_head_of_fields_is_held_to_the_limits},
	};

UNIT_MAIN("worker/http_response", tests)
