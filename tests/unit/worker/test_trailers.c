/*
 * Unit tests for worker/h1/trailers.c (the trailer section's checks and
 * iteration, its header list, its text, the HTTP/2 codecs' record) and
 * the chunked decoder's restart of a section begun
 * (http_chunked_trailer_restart), which the HTTP/1 codec relies on to
 * find a whole section in one piece.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "worker/h1/h1.h"
#include "tests/unit/unit.h"

static void test_refused_names_are_found_in_any_case(void)
{
	static const char *refused[] = {"Content-Length", "transfer-encoding", "HOST", "Connection", "TE",
	                                "Trailer", "Upgrade", "Keep-Alive", "Set-Cookie", "Authorization",
	                                "content-type", "Cache-Control"};
	static const char *kept[] = {"grpc-status", "Grpc-Message", "X-Checksum", "Server-Timing", "T", "Hosts",
	                             "Content-MD5", "TE2"};

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		CU_ASSERT(trailers_forbidden(refused[i], strlen(refused[i])));
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		CU_ASSERT(!trailers_forbidden(kept[i], strlen(kept[i])));
}

static void test_list_leaves_refused_fields_out(void)
{
	const char s[] = "Content-Length: 5\r\nX-A: 1\r\nHost:x\r\nX-B:  two \r\nTE: trailers\r\n\r\n";
	struct hdr v[TRAILERS_FIELDS];
	uint32_t dropped, n = trailers_list(s, strlen(s), v, &dropped);

	CU_ASSERT_EQUAL(dropped, 3);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(v[0].name == s + 19 && v[0].name_len == 3 && v[0].value_len == 1 && v[0].value[0] == '1');
	CU_ASSERT(v[1].name_len == 3 && memcmp(v[1].name, "X-B", 3) == 0 && v[1].value_len == 3 &&
	          memcmp(v[1].value, "two", 3) == 0);
	CU_ASSERT_EQUAL(v[0].tok, HT_OTHER);

	const char all[] = "Host: a\r\nConnection: close\r\n\r\n";
	CU_ASSERT_EQUAL(trailers_list(all, strlen(all), v, &dropped), 0);
	CU_ASSERT_EQUAL(dropped, 2);
}

static void test_list_past_the_cap_is_dropped_and_counted(void)
{
	static char s[(TRAILERS_FIELDS + 3) * 8 + 3]; /* "Xnn: v\r\n" each */
	struct hdr v[TRAILERS_FIELDS];
	uint32_t dropped, n;
	size_t o = 0;

	for (int i = 0; i < TRAILERS_FIELDS + 3; i++)
		o += (size_t)snprintf(s + o, sizeof(s) - o, "X%02d: v\r\n", i % 100);
	memcpy(s + o, "\r\n", 3);
	n = trailers_list(s, o + 2, v, &dropped);
	CU_ASSERT_EQUAL(n, TRAILERS_FIELDS);
	CU_ASSERT_EQUAL(dropped, 3);
}

static void test_write_gives_the_section_and_its_size(void)
{
	/* HTTP/1 lines go back as they came; other fields as "name: value" */
	const char s[] = "grpc-status:0\r\nX-Sp: \t a b \t\r\n\r\n";
	const char want[] = "grpc-status:0\r\nX-Sp: \t a b \t\r\nX-H: 2\r\n\r\n";
	struct hdr v[TRAILERS_FIELDS];
	char out[64], rec[16];
	uint32_t dropped, n = trailers_list(s, strlen(s), v, &dropped);

	CU_ASSERT(v[1].value_len == 3 && memcmp(v[1].value, "a b", 3) == 0);
	CU_ASSERT_EQUAL(trailers_line_len(&v[1]), strlen("X-Sp: \t a b \t\r\n"));
	trailers_rec_add(rec, "X-H", 3, "2", 1, 0);
	n += trailers_rec_list(rec, 8, v + n);
	CU_ASSERT_EQUAL(n, 3);
	CU_ASSERT_EQUAL(trailers_size(v, n), strlen(want));
	CU_ASSERT_EQUAL(trailers_write(out, v, n), strlen(want));
	CU_ASSERT(memcmp(out, want, strlen(want)) == 0);
	CU_ASSERT_EQUAL(trailers_size(v, 0), 2);
}

static void test_lines_read_whole_are_written_where_they_lie(void)
{
	const char s[] = "X-A:1\r\nX-B:  2 \r\n\r\n";
	const char gap[] = "X-A:1\r\nHost: h\r\nX-B: 2\r\n\r\n";
	const char last[] = "X-A:1\r\nHost: h\r\n\r\n";
	struct hdr v[TRAILERS_FIELDS];
	char rec[16];
	uint32_t dropped, n = trailers_list(s, strlen(s), v, &dropped);

	CU_ASSERT_EQUAL(trailers_in_place(v, n), strlen(s));
	CU_ASSERT_EQUAL(trailers_in_place(v, 0), 0);
	n = trailers_list(gap, strlen(gap), v, &dropped); /* a field dropped between */
	CU_ASSERT(n == 2 && trailers_in_place(v, n) == 0);
	n = trailers_list(last, strlen(last), v, &dropped); /* one after the last */
	CU_ASSERT(n == 1 && trailers_in_place(v, n) == 0);
	trailers_rec_add(rec, "x-a", 3, "1", 1, 0); /* not read from HTTP/1 */
	CU_ASSERT_EQUAL(trailers_in_place(v, trailers_rec_list(rec, 8, v)), 0);
}

static void test_a_record_gives_its_fields_back(void)
{
	char rec[64];
	struct hdr v[TRAILERS_FIELDS];
	size_t n = 0;

	n += trailers_rec_add(rec + n, "Grpc-Status", 11, "0", 1, 1);
	CU_ASSERT_EQUAL(n, strlen("grpc-status: 0\r\n"));
	n += trailers_rec_add(rec + n, "X-E", 3, "", 0, 0);
	CU_ASSERT_EQUAL(trailers_rec_list(rec, n, v), 2);
	CU_ASSERT(v[0].name_len == 11 && memcmp(v[0].name, "grpc-status", 11) == 0);
	CU_ASSERT(v[0].value_len == 1 && v[0].value[0] == '0');
	CU_ASSERT(v[1].name_len == 3 && memcmp(v[1].name, "X-E", 3) == 0 && v[1].value_len == 0);
	CU_ASSERT_EQUAL(trailers_rec_list(rec, 0, v), 0);
}

static void test_next_gives_names_and_trimmed_values(void)
{
	const char s[] = "grpc-status:0\r\nX-Sp: \t a b \t\r\nX-Empty:\r\n\r\n";
	size_t off = 0, nlen, vlen;
	const char *name, *value;

	CU_ASSERT(trailers_next(s, strlen(s), &off, &name, &nlen, &value, &vlen));
	CU_ASSERT(nlen == 11 && memcmp(name, "grpc-status", 11) == 0 && vlen == 1 && value[0] == '0');
	CU_ASSERT(trailers_next(s, strlen(s), &off, &name, &nlen, &value, &vlen));
	CU_ASSERT(nlen == 4 && memcmp(name, "X-Sp", 4) == 0 && vlen == 3 && memcmp(value, "a b", 3) == 0);
	CU_ASSERT(trailers_next(s, strlen(s), &off, &name, &nlen, &value, &vlen));
	CU_ASSERT(nlen == 7 && vlen == 0);
	CU_ASSERT(!trailers_next(s, strlen(s), &off, &name, &nlen, &value, &vlen));
	CU_ASSERT_EQUAL(off, strlen(s) - 2);
}

static void test_te_lists_trailers_as_a_member_only(void)
{
	static const char *yes[] = {"trailers", "Trailers", "gzip, trailers", "deflate;q=0.5 , trailers ,x",
	                            "trailers;q=1"};
	static const char *no[] = {"", "gzip", "trailersx", "xtrailers", "gzip;x=trailers", "\"trailers\""};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		CU_ASSERT(trailers_te_listed(yes[i], strlen(yes[i])));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		CU_ASSERT(!trailers_te_listed(no[i], strlen(no[i])));
}

/* Feeds <p>[0..n) whole; returns the bytes used. */
static size_t feed_all(struct http_chunked *c, const char *p, size_t n, int *rc)
{
	size_t off = 0;

	*rc = 0;
	while (off < n && !c->done) {
		const char *d;
		size_t used, dl;

		*rc = http_chunked_feed(c, p + off, n - off, &used, &d, &dl);
		if (*rc || !used)
			break;
		off += used;
	}
	return off;
}

static void test_a_section_begun_restarts_and_is_fed_again_whole(void)
{
	const char in[] = "3\r\nabc\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n";
	size_t cut = strlen("3\r\nabc\r\n0\r\nX-A: 1\r\nX-"), n = strlen(in), used, again;
	struct http_chunked c;
	int rc;

	http_chunked_init(&c);
	used = feed_all(&c, in, cut, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(used, cut);
	CU_ASSERT(!c.done);
	/* the section's bytes so far given back, the decoder at its start */
	again = http_chunked_trailer_restart(&c);
	CU_ASSERT_EQUAL(again, strlen("X-A: 1\r\nX-"));
	used = feed_all(&c, in + cut - again, n - (cut - again), &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT(c.done);
	CU_ASSERT_EQUAL(used, n - (cut - again));
	CU_ASSERT_EQUAL(c.trailer_bytes, strlen("X-A: 1\r\nX-B: 2\r\n\r\n"));
	/* done, or in the data: nothing to give back */
	CU_ASSERT_EQUAL(http_chunked_trailer_restart(&c), 0);
	http_chunked_init(&c);
	feed_all(&c, in, 5, &rc);
	CU_ASSERT_EQUAL(http_chunked_trailer_restart(&c), 0);
}

static void test_a_section_at_the_bound_unfinished_is_refused_at_once(void)
{
	static char in[TRAILERS_MAX + 16];
	struct http_chunked c;
	int rc;

	/* "0\r\n" then 16384 bytes of one field that has not ended: the
	 * next byte could not make a section within the bound, so this is
	 * already an error (a full 16 KiB input buffer would wait forever) */
	memcpy(in, "0\r\nX: ", 6);
	memset(in + 6, 'v', TRAILERS_MAX - 3);
	http_chunked_init(&c);
	feed_all(&c, in, 3 + TRAILERS_MAX, &rc);
	CU_ASSERT_EQUAL(rc, WEIR_ERR(SMUGGLING));
}

static const struct unit_test tests[] = {
	{"refused names are found in any case", test_refused_names_are_found_in_any_case},
	{"the list leaves refused fields out", test_list_leaves_refused_fields_out},
	{"the list past the cap is dropped and counted", test_list_past_the_cap_is_dropped_and_counted},
	{"write gives the section and its size", test_write_gives_the_section_and_its_size},
	{"lines read whole are written where they lie", test_lines_read_whole_are_written_where_they_lie},
	{"a record gives its fields back", test_a_record_gives_its_fields_back},
	{"trailers_next gives names and trimmed values", test_next_gives_names_and_trimmed_values},
	{"TE lists trailers as a member only", test_te_lists_trailers_as_a_member_only},
	{"a section begun restarts and is fed again whole", test_a_section_begun_restarts_and_is_fed_again_whole},
	{"a section at the bound unfinished is refused at once",
	 test_a_section_at_the_bound_unfinished_is_refused_at_once},
};

UNIT_MAIN("worker/trailers", tests)
