/*
 * Unit tests for worker/msg/msg.c: the token table, the stream arena and its
 * header lists, and the message the HTTP/1 parser fills (framing out of
 * the list, a full arena refused with today's limits).
 */
#include <CUnit/CUnit.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "worker/msg/msg.h"
#include "tests/unit/unit.h"

static void test_every_well_known_name_is_found_in_any_case(void)
{
	for (unsigned t = 1; t < HT_COUNT; t++) {
		char up[64];
		size_t n = hdr_tokens[t].len;

		CU_ASSERT_EQUAL(hdr_token(hdr_tokens[t].name, n), t);
		for (size_t i = 0; i < n; i++)
			up[i] = (char)toupper((unsigned char)hdr_tokens[t].name[i]);
		CU_ASSERT_EQUAL(hdr_token(up, n), t);
		/* a prefix or a longer name is another name */
		CU_ASSERT_EQUAL(hdr_token(hdr_tokens[t].name, n - 1), HT_OTHER);
	}
	CU_ASSERT_EQUAL(hdr_token("Content-Length", 14), HT_CONTENT_LENGTH);
	CU_ASSERT_EQUAL(hdr_token("HOST", 4), HT_HOST);
	CU_ASSERT_EQUAL(hdr_token("Transfer-Encoding-Hint", 22), HT_OTHER);
}

static void test_other_names_and_lookalikes_have_no_token(void)
{
	static const char *other[] = {"X-Other", "Hostx", "Hos", "Content_Length", "Transfer_Encoding", "Conection",
	                              "x-forwarded-fo", "Via2", "T", "Upgrade-Insecure-Requests", ""};

	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		CU_ASSERT_EQUAL(hdr_token(other[i], strlen(other[i])), HT_OTHER);
	/* longer than any well-known name: not even looked at */
	CU_ASSERT_EQUAL(hdr_token("x-a-very-long-header-name-no-table-holds", 40), HT_OTHER);
}

static void test_the_table_carries_the_flags_of_the_names(void)
{
	CU_ASSERT_EQUAL(hdr_tokens[HT_CONNECTION].flags, HDR_HOP);
	CU_ASSERT(hdr_tokens[HT_TRANSFER_ENCODING].flags & HDR_FRAMING);
	CU_ASSERT(hdr_tokens[HT_CONTENT_LENGTH].flags & HDR_FRAMING);
	CU_ASSERT_EQUAL(hdr_tokens[HT_UPGRADE].flags, HDR_HOP | HDR_UPGRADE);
	CU_ASSERT_EQUAL(hdr_tokens[HT_HOST].flags, HDR_HOST);
	CU_ASSERT_EQUAL(hdr_tokens[HT_OTHER].flags, 0);
	CU_ASSERT_EQUAL(sizeof(struct hdr), 32); /* the header array it replaced */
}

static struct hdr mem[8];

static void test_the_arena_gives_bytes_from_the_top_until_full(void)
{
	struct arena a;
	char *p, *q;

	arena_init(&a, mem, sizeof(mem));
	p = arena_bytes(&a, 100);
	CU_ASSERT_PTR_EQUAL(p, (char *)mem + sizeof(mem) - 100);
	q = arena_bytes(&a, sizeof(mem) - 100);
	CU_ASSERT_PTR_EQUAL(q, (char *)mem);
	CU_ASSERT_PTR_NULL(arena_bytes(&a, 1));
	arena_reset(&a);
	CU_ASSERT_PTR_NOT_NULL(arena_bytes(&a, sizeof(mem)));
	CU_ASSERT_PTR_NULL(arena_bytes(&a, 1));
}

static void test_lists_and_copies_share_the_arena_without_overlap(void)
{
	struct arena a;
	struct hlist l;
	uint32_t room;
	struct hdr *v;

	arena_init(&a, mem, sizeof(mem));
	v = hlist_open(&a, 100, &room);
	CU_ASSERT_EQUAL(room, 8);
	hlist_close(&a, &l, v, 0);
	/* two entries' worth of bytes taken from the top leave room for six */
	CU_ASSERT_PTR_NOT_NULL(arena_bytes(&a, 2 * sizeof(struct hdr)));
	for (int i = 0; i < 6; i++)
		CU_ASSERT_PTR_NOT_NULL(hlist_add(&a, &l, "X-A", 3, "v", 1));
	CU_ASSERT_PTR_NULL(hlist_add(&a, &l, "X-A", 3, "v", 1));
	CU_ASSERT_EQUAL(l.n, 6);
	CU_ASSERT_PTR_NULL(arena_bytes(&a, 1));
	/* a rewritten value that finds no room is a 500 */
	CU_ASSERT_EQUAL(hdr_set_value(&a, &l.v[0], "new", 3), WEIR_ERR(HEADER_SPACE));
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(HEADER_SPACE)), 500);
	CU_ASSERT(l.v[0].value_len == 1 && l.v[0].value[0] == 'v');
}

static void test_a_rewritten_value_is_copied_and_a_new_header_gets_its_token(void)
{
	struct arena a;
	struct hlist l;
	uint32_t room;
	struct hdr *h;
	char src[8] = "abc";

	arena_init(&a, mem, sizeof(mem));
	hlist_close(&a, &l, hlist_open(&a, 100, &room), 0);
	h = hlist_add(&a, &l, "Via", 3, "1.1 x", 5);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(h->tok, HT_VIA);
	CU_ASSERT_EQUAL(h->flags, HDR_VIA);
	CU_ASSERT_EQUAL(hdr_set_value(&a, h, src, 3), 0);
	src[0] = 'z'; /* the copy does not follow its source */
	CU_ASSERT(h->value_len == 3 && memcmp(h->value, "abc", 3) == 0);
	CU_ASSERT(h->value >= (const char *)mem && h->value < (const char *)mem + sizeof(mem));
	CU_ASSERT_PTR_EQUAL(hlist_find(&l, HT_VIA, NULL), h);
	CU_ASSERT_PTR_NULL(hlist_find(&l, HT_VIA, h));
	CU_ASSERT_PTR_NULL(hlist_find(&l, HT_HOST, NULL));
}

/* ---- the parser into the model ------------------------------------- */

static struct hdr big[HTTP_MAX_HEADERS];
static char buf[8192];

static int parse_req(const char *s, uint32_t arena_entries, uint32_t max_headers, struct msg *m)
{
	struct config_limits lim = {.header_size = 8192, .headers = max_headers, .uri_size = 4096, .body_size = 1 << 20};
	static struct arena a;
	static struct http_request rp;

	memcpy(buf, s, strlen(s));
	arena_init(&a, big, arena_entries * (uint32_t)sizeof(struct hdr));
	http_request_init(&rp, m, &a, &lim);
	return http_request_parse(&rp, buf, strlen(s));
}

static void test_values_point_into_the_input_and_framing_is_out_of_the_list(void)
{
	struct msg m;
	const char *s = "POST /p?q HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nAuthorization: c=1\r\n"
	                "Connection: keep-alive\r\n\r\nabc";

	CU_ASSERT_EQUAL_FATAL(parse_req(s, 100, 100, &m), 0);
	CU_ASSERT_EQUAL(m.method_id, HTTP_POST);
	CU_ASSERT_EQUAL(m.body, HTTP_BODY_LENGTH);
	CU_ASSERT_EQUAL(m.content_length, 3);
	CU_ASSERT_EQUAL(m.hl.n, 3);
	CU_ASSERT_EQUAL(m.hl.v[0].tok, HT_HOST);
	CU_ASSERT_EQUAL(m.hl.v[1].tok, HT_AUTHORIZATION);
	CU_ASSERT_EQUAL(m.hl.v[2].tok, HT_CONNECTION);
	CU_ASSERT_PTR_EQUAL(m.hl.v[1].value, buf + (strstr(s, "c=1") - s)); /* no copy */
	CU_ASSERT_PTR_NULL(hlist_find(&m.hl, HT_CONTENT_LENGTH, NULL));
	CU_ASSERT_PTR_NULL(m.scheme);
	CU_ASSERT(parse_req("GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n", 100, 100, &m) == 0 &&
	          m.scheme && strcmp(m.scheme, "http") == 0);
}

static void test_a_connection_token_marks_the_header_by_token_or_by_name(void)
{
	struct msg m;

	CU_ASSERT_EQUAL_FATAL(parse_req("GET / HTTP/1.1\r\nHost: h\r\nEarly-Data: 1\r\nX-Mine: y\r\n"
	                                "Connection: EARLY-DATA, x-mine\r\n\r\n",
	                                100, 100, &m),
	                      0);
	CU_ASSERT(hlist_find(&m.hl, HT_EARLY_DATA, NULL)->flags & HDR_HOP);
	CU_ASSERT(m.hl.v[2].flags & HDR_HOP);
	CU_ASSERT_FALSE(m.hl.v[0].flags & HDR_HOP);
}

static void test_a_full_arena_is_a_431_for_a_request_and_a_502_for_a_response(void)
{
	struct msg m;
	struct arena a;
	struct http_response rp;
	const char *req = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
	const char *resp = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nContent-Length: 0\r\n\r\n";

	/* the arena's room bounds the list as limits.headers does */
	CU_ASSERT_EQUAL(parse_req(req, 4, 100, &m), 0);
	CU_ASSERT_EQUAL(parse_req(req, 3, 100, &m), WEIR_ERR(HEADERS_TOO_LARGE));
	CU_ASSERT_EQUAL(parse_req(req, 100, 3, &m), WEIR_ERR(HEADERS_TOO_LARGE));
	memcpy(buf, resp, strlen(resp));
	arena_init(&a, big, 3 * sizeof(struct hdr));
	http_response_init(&rp, &m, &a, 100, 8192, HTTP_GET);
	CU_ASSERT_EQUAL(http_response_parse(&rp, buf, strlen(resp)), WEIR_ERR(UPSTREAM_BAD_RESPONSE));
	arena_init(&a, big, 4 * sizeof(struct hdr));
	http_response_init(&rp, &m, &a, 100, 8192, HTTP_GET);
	CU_ASSERT_EQUAL(http_response_parse(&rp, buf, strlen(resp)), 0);
	CU_ASSERT_EQUAL(m.hl.n, 3);
	/* the list is closed in the arena: what is left is for copies */
	CU_ASSERT_EQUAL(a.lo, 3 * sizeof(struct hdr));
}

static void test_a_bodyless_response_keeps_its_length_as_information(void)
{
	struct msg m;
	struct arena a;
	struct http_response rp;
	const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n";

	memcpy(buf, s, strlen(s));
	arena_init(&a, big, sizeof(big));
	http_response_init(&rp, &m, &a, 100, 8192, HTTP_HEAD);
	CU_ASSERT_EQUAL_FATAL(http_response_parse(&rp, buf, strlen(s)), 0);
	CU_ASSERT_EQUAL(m.body, HTTP_BODY_NONE);
	CU_ASSERT(m.length_info && m.content_length == 42);
	s = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
	memcpy(buf, s, strlen(s));
	http_response_init(&rp, &m, &a, 100, 8192, HTTP_GET);
	CU_ASSERT_EQUAL_FATAL(http_response_parse(&rp, buf, strlen(s)), 0);
	CU_ASSERT_FALSE(m.length_info);
}

static const struct unit_test tests[] = {
	{"every well-known name is found in any case", test_every_well_known_name_is_found_in_any_case},
	{"other names and lookalikes have no token", test_other_names_and_lookalikes_have_no_token},
	{"the table carries the flags of the names", test_the_table_carries_the_flags_of_the_names},
	{"the arena gives bytes from the top until full", test_the_arena_gives_bytes_from_the_top_until_full},
	{"lists and copies share the arena without overlap", test_lists_and_copies_share_the_arena_without_overlap},
	{"a rewritten value is copied and a new header gets its token",
	 test_a_rewritten_value_is_copied_and_a_new_header_gets_its_token},
	{"values point into the input and framing is out of the list",
	 test_values_point_into_the_input_and_framing_is_out_of_the_list},
	{"a Connection token marks the header by token or by name",
	 test_a_connection_token_marks_the_header_by_token_or_by_name},
	{"a full arena is a 431 for a request and a 502 for a response",
	 test_a_full_arena_is_a_431_for_a_request_and_a_502_for_a_response},
	{"a bodyless response keeps its length as information",
	 test_a_bodyless_response_keeps_its_length_as_information},
};

UNIT_MAIN("worker/msg", tests)
