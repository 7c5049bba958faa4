/*
 * Unit tests for worker/h1/http_chunked.c, and for the character classes in
 * worker/h1/http_common.c that it and the head parser share.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "worker/h1/http_internal.h"
#include "tests/unit/unit.h"

#define SMUG WEIR_ERR(SMUGGLING)

struct result {
	int rc;        /* 0 or the error */
	int done;
	size_t used;   /* bytes consumed over all calls */
	size_t ndata;
	char data[65536];
};

/*
 * Decodes <in>[0..n) arriving in pieces: cuts[] are the piece ends, in
 * order, the last one n. Stops at the first error or when done.
 */
static void decode(const char *in, size_t n, const size_t *cuts, size_t ncuts, struct result *r)
{
	struct http_chunked c;
	size_t avail = 0, off = 0, k;

	memset(r, 0, sizeof(*r));
	http_chunked_init(&c);
	for (k = 0; k < ncuts && !r->rc && !c.done; k++) {
		avail = cuts[k];
		while (off < avail && !c.done) {
			const char *d;
			size_t used, dl;

			r->rc = http_chunked_feed(&c, in + off, avail - off, &used, &d, &dl);
			if (r->rc)
				break;
			if (dl) {
				CU_ASSERT(d >= in + off && d + dl <= in + off + used);
				memcpy(r->data + r->ndata, d, dl);
				r->ndata += dl;
			}
			if (used == 0) {
				CU_FAIL("no progress");
				break;
			}
			off += used;
		}
	}
	r->done = c.done;
	r->used = off;
	(void)n;
}

static void decode_whole(const char *in, size_t n, struct result *r)
{
	decode(in, n, &n, 1, r);
}

static int same(const struct result *a, const struct result *b)
{
	return a->rc == b->rc && a->done == b->done && (a->rc || a->used == b->used) &&
	       a->ndata == b->ndata && memcmp(a->data, b->data, a->ndata) == 0;
}

/* Decodes <in> whole, byte by byte and in random pieces; all must agree. */
static void decode_every_way(const char *in, size_t n, struct result *whole)
{
	static struct result part;
	static size_t cuts[70000];
	size_t k, round;

	decode_whole(in, n, whole);
	for (k = 0; k < n; k++)
		cuts[k] = k + 1;
	decode(in, n, cuts, n, &part);
	if (!same(whole, &part))
		CU_FAIL("byte by byte differs");
	srand(12345);
	for (round = 0; round < 100; round++) {
		size_t nc = 0, at = 0;

		while (at < n) {
			at += 1 + (size_t)rand() % 9;
			if (at > n)
				at = n;
			cuts[nc++] = at;
		}
		decode(in, n, cuts, nc, &part);
		if (!same(whole, &part))
			CU_FAIL("random split differs");
	}
}

struct vec {
	const char *in;
	size_t len;
	const char *data; /* decoded body, for valid vectors */
	size_t body_len;  /* bytes of in that are the chunked body */
};

#define V(in, data, body) {in, sizeof(in) - 1, data, body}

static const struct vec valid[] = {
	V("5\r\nhello\r\n0\r\n\r\n", "hello", 15),
	V("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "hello world", 26),
	V("a\r\n0123456789\r\nA\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij", 35),
	V("0\r\n\r\n", "", 5),
	V("000\r\n\r\nXYZ", "", 7),
	V("0000000000000003\r\nabc\r\n0\r\n\r\n", "abc", 28),
	V("3;a\r\nabc\r\n0\r\n\r\n", "abc", 15),
	V("3;a=b;c;d=e\r\nabc\r\n0\r\n\r\n", "abc", 23),
	V("3 ; a = b ;\tc\t=\t\"q\\\"uo\\\\ted\" ; d\r\nabc\r\n0;last=1\r\n\r\n", "abc", 51),
	V("3;a=\"\"\r\nabc\r\n0\r\n\r\n", "abc", 18),
	V("3;a=\"caf\xc3\xa9 \t!#[]\"\r\nabc\r\n0\r\n\r\n", "abc", 29),
	V("3;!#$%&'*+-.^_`|~=!#$%&'*+-.^_`|~\r\nabc\r\n0\r\n\r\n", "abc", 45),
	V("3\r\nabc\r\n0\r\nExpires: never\r\nX-Sum:\t a b \xff\r\nY:\r\n\r\nnext", "abc", 48),
	V("2\r\n\r\n\r\n0\r\n\r\n", "\r\n", 12),
};

static void test_valid_bodies_decode_the_same_however_they_are_split(void)
{
	static struct result r;
	size_t i;

	for (i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		decode_every_way(valid[i].in, valid[i].len, &r);
		if (r.rc != 0 || !r.done || r.used != valid[i].body_len ||
		    r.ndata != strlen(valid[i].data) || memcmp(r.data, valid[i].data, r.ndata) != 0) {
			printf("\nvalid vector %zu: rc %d done %d used %zu\n", i, r.rc, r.done, r.used);
			CU_FAIL("valid body misdecoded");
		}
	}
}

static const struct vec invalid[] = {
	V("\r\n", NULL, 0),
	V("x\r\n", NULL, 0),
	V("-1\r\n", NULL, 0),
	V("+1\r\n", NULL, 0),
	V("0x5\r\nhello\r\n0\r\n\r\n", NULL, 0),
	V(" 5\r\nhello\r\n0\r\n\r\n", NULL, 0),
	V("5 \r\nhello\r\n0\r\n\r\n", NULL, 0),
	V("5\t\r\nhello\r\n0\r\n\r\n", NULL, 0),
	V("5\nhello\r\n0\r\n\r\n", NULL, 0),
	V("5\rhello\r\n0\r\n\r\n", NULL, 0),
	V("5\r\r\nhello\r\n0\r\n\r\n", NULL, 0),
	V("5\r\nhelloX\r\n0\r\n\r\n", NULL, 0),
	V("5\r\nhello\n0\r\n\r\n", NULL, 0),
	V("5\r\nhello\r0\r\n\r\n", NULL, 0),
	V("5\r\nhello\r\r\n0\r\n\r\n", NULL, 0),
	V("5\r\nhello0\r\n\r\n", NULL, 0),
	V("5\r\nhello\r\n\r\n0\r\n\r\n", NULL, 0),
	V("5\r\nhello\r\n0\r\n\n", NULL, 0),
	V("5\r\nhello\r\n0\n\r\n", NULL, 0),
	V("0\r\n\rX", NULL, 0),
	V("0\r\n\r\r", NULL, 0),
	V("00000000000000001\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("4000000000000000\r\n", NULL, 0),
	V("FFFFFFFFFFFFFFFF\r\n", NULL, 0),
	V("10000000000000000\r\n", NULL, 0),
	V("1;\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;=v\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a =\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a \r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=b \r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a b\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=b c\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=b=c\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=\"x\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=\"x\"y\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=\"\x01\"\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=\"\\\x01\"\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=\"\x7f\"\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a\x80\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a/b\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1;a=b\nx\r\n0\r\n\r\n", NULL, 0),
	V("1,2\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("1\x00\r\nx\r\n0\r\n\r\n", NULL, 0),
	V("0\r\nX : v\r\n\r\n", NULL, 0),
	V("0\r\n X: v\r\n\r\n", NULL, 0),
	V("0\r\nX: a\r\n b\r\n\r\n", NULL, 0),
	V("0\r\nX: a\x01\r\n\r\n", NULL, 0),
	V("0\r\nX: a\x7f\r\n\r\n", NULL, 0),
	V("0\r\nX: a\x00\r\n\r\n", NULL, 0),
	V("0\r\nX\r\n\r\n", NULL, 0),
	V("0\r\n: v\r\n\r\n", NULL, 0),
	V("0\r\nX: v\n\r\n", NULL, 0),
	V("0\r\nX: v\rY: w\r\n\r\n", NULL, 0),
	V("0\r\nX\x80: v\r\n\r\n", NULL, 0),
};

static void test_every_invalid_shape_is_smuggling_however_it_is_split(void)
{
	static struct result r;
	size_t i;

	for (i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		decode_every_way(invalid[i].in, invalid[i].len, &r);
		if (r.rc != SMUG) {
			printf("\ninvalid vector %zu accepted: rc %d done %d\n", i, r.rc, r.done);
			CU_FAIL("invalid body accepted");
		}
	}
}

static void test_the_largest_size_is_just_below_2_to_the_62(void)
{
	static struct result r;
	static const char in[] = "3fffffffffffffff\r\nab";

	decode_every_way(in, sizeof(in) - 1, &r);
	CU_ASSERT_EQUAL(r.rc, 0);
	CU_ASSERT_EQUAL(r.done, 0);
	CU_ASSERT_EQUAL(r.ndata, 2);
	CU_ASSERT_EQUAL(r.used, sizeof(in) - 1);
}

static void test_an_extension_line_may_be_4096_bytes_and_no_more(void)
{
	static char in[8192];
	static struct result r;
	size_t n;

	/* "1;" then a name: the line, CRLF excluded, is exactly 4096 bytes */
	memcpy(in, "1;", 2);
	memset(in + 2, 'a', 4094);
	memcpy(in + 4096, "\r\nx\r\n0\r\n\r\n", 10);
	n = 4106;
	decode_every_way(in, n, &r);
	CU_ASSERT_EQUAL(r.rc, 0);
	CU_ASSERT_EQUAL(r.done, 1);
	memcpy(in, "1;", 2);
	memset(in + 2, 'a', 4095);
	memcpy(in + 4097, "\r\nx\r\n0\r\n\r\n", 10);
	decode_every_way(in, n + 1, &r);
	CU_ASSERT_EQUAL(r.rc, SMUG);
	/* the limit is per line, not per body */
	n = 0;
	for (int k = 0; k < 3; k++) {
		memcpy(in + n, "1;", 2);
		memset(in + n + 2, 'b', 2000);
		memcpy(in + n + 2002, "\r\nx\r\n", 5);
		n += 2007;
	}
	memcpy(in + n, "0\r\n\r\n", 5);
	decode_every_way(in, n + 5, &r);
	CU_ASSERT_EQUAL(r.rc, 0);
	CU_ASSERT_EQUAL(r.ndata, 3);
}

static void test_trailers_may_be_16_kib_and_no_more(void)
{
	static char in[20000];
	static struct result r;
	size_t n, t;

	/* "0\r\n" then one field "X: vvv...\r\n" and the final CRLF: 16384 bytes */
	memcpy(in, "0\r\nX: ", 6);
	t = 16384 - 7; /* 16384 = "X: " + value + CRLF + CRLF */
	memset(in + 6, 'v', t);
	memcpy(in + 6 + t, "\r\n\r\n", 4);
	n = 6 + t + 4;
	decode_every_way(in, n, &r);
	CU_ASSERT_EQUAL(r.rc, 0);
	CU_ASSERT_EQUAL(r.done, 1);
	memset(in + 6, 'v', t + 1);
	memcpy(in + 6 + t + 1, "\r\n\r\n", 4);
	decode_every_way(in, n + 1, &r);
	CU_ASSERT_EQUAL(r.rc, SMUG);
}

static void test_a_finished_or_failed_decoder_consumes_nothing_more(void)
{
	struct http_chunked c;
	const char *d;
	size_t used, dl;

	http_chunked_init(&c);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, "0\r\n\r\nGET", 8, &used, &d, &dl), 0);
	CU_ASSERT_EQUAL(used, 5);
	CU_ASSERT(c.done);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, "GET", 3, &used, &d, &dl), 0);
	CU_ASSERT_EQUAL(used, 0);
	CU_ASSERT_EQUAL(dl, 0);

	http_chunked_init(&c);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, "z\r\n", 3, &used, &d, &dl), SMUG);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, "0\r\n\r\n", 5, &used, &d, &dl), SMUG);
}

/*
 * Offsets, not a moving pointer with strlen(): gcc 12.2 -O2 miscompiles
 * "p += used; strlen(p)" after two calls that write <used> (it computes
 * the length as if both calls had returned the second value).
 */
static void test_data_comes_back_one_span_per_call(void)
{
	static const char in[] = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
	struct http_chunked c;
	const char *d;
	size_t used, dl, n = sizeof(in) - 1;

	http_chunked_init(&c);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, in, n, &used, &d, &dl), 0);
	CU_ASSERT_EQUAL(used, 6);
	CU_ASSERT_PTR_EQUAL(d, in + 3);
	CU_ASSERT_EQUAL(dl, 3);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, in + 6, n - 6, &used, &d, &dl), 0);
	CU_ASSERT_EQUAL(used, 7);
	CU_ASSERT_PTR_EQUAL(d, in + 11);
	CU_ASSERT_EQUAL(dl, 2);
	CU_ASSERT_EQUAL(http_chunked_feed(&c, in + 13, n - 13, &used, &d, &dl), 0);
	CU_ASSERT_EQUAL(used, 7);
	CU_ASSERT_EQUAL(dl, 0);
	CU_ASSERT(c.done);
}

/* The class table must say what the RFC grammars say. */
static void test_the_character_classes_follow_the_rfc_grammars(void)
{
	int c;

	for (c = 0; c < 256; c++) {
		int alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		int tchar = alnum || (c && strchr("!#$%&'*+-.^_`|~", c));
		int vchar = (c >= 0x21 && c <= 0x7e) || c >= 0x80;
		int ws = c == ' ' || c == '\t';
		int hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
		int qd = ws || c == 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) ||
		         c >= 0x80;
		int reg = alnum || (c && strchr("-._~!$&'()*+,;=", c));

		CU_ASSERT_EQUAL(http_is((unsigned char)c, HTTP_C_TCHAR), tchar);
		CU_ASSERT_EQUAL(http_is((unsigned char)c, HTTP_C_VCHAR), vchar);
		CU_ASSERT_EQUAL(http_is((unsigned char)c, HTTP_C_WS), ws);
		CU_ASSERT_EQUAL(http_is((unsigned char)c, HTTP_C_HEX), hex);
		CU_ASSERT_EQUAL(http_is((unsigned char)c, HTTP_C_QDTEXT), qd);
		CU_ASSERT_EQUAL(http_is((unsigned char)c, HTTP_C_REGNAME), reg);
	}
}

static void test_span_ieq_compares_without_case(void)
{
	CU_ASSERT(http_span_ieq("Chunked", 7, "chunked"));
	CU_ASSERT(http_span_ieq("", 0, ""));
	CU_ASSERT(!http_span_ieq("chunke", 6, "chunked"));
	CU_ASSERT(!http_span_ieq("chunkeds", 8, "chunked"));
	CU_ASSERT(!http_span_ieq("chunked", 7, "chunkex"));
	CU_ASSERT(!http_span_ieq("\xc3\xa9", 2, "\xe3\xa9"));
}

static void test_name_same_var_folds_case_and_dash_underscore(void)
{
	CU_ASSERT(http_name_same_var("X-Client-Subject", "x_client_subject", 16));
	CU_ASSERT(http_name_same_var("X-CLIENT_subject", "X-Client-Subject", 16));
	CU_ASSERT(http_name_same_var("x-forwarded-proto", "X_FORWARDED_PROTO", 17));
	CU_ASSERT(http_name_same_var("", "", 0));
	CU_ASSERT(!http_name_same_var("X-Client-Subjecu", "X-Client-Subject", 16));
	CU_ASSERT(!http_name_same_var("X.Client", "X-Client", 8));
	/* 0x20 apart but not letters: '_' and DEL, '@' and '`', '-' and '\r' */
	CU_ASSERT(!http_name_same_var("_", "\x7f", 1));
	CU_ASSERT(!http_name_same_var("@", "`", 1));
	CU_ASSERT(!http_name_same_var("-", "\r", 1));
	CU_ASSERT(!http_name_same_var("[", "{", 1));
}

static const struct unit_test tests[] = {
		{"valid bodies decode the same however they are split",
		 test_valid_bodies_decode_the_same_however_they_are_split},
		{"every invalid shape is smuggling however it is split",
		 test_every_invalid_shape_is_smuggling_however_it_is_split},
		{"the largest size is just below 2^62",
		 test_the_largest_size_is_just_below_2_to_the_62},
		{"an extension line may be 4096 bytes and no more",
		 test_an_extension_line_may_be_4096_bytes_and_no_more},
		{"trailers may be 16 KiB and no more",
		 test_trailers_may_be_16_kib_and_no_more},
		{"a finished or failed decoder consumes nothing more",
		 test_a_finished_or_failed_decoder_consumes_nothing_more},
		{"data comes back one span per call",
		 test_data_comes_back_one_span_per_call},
		{"the character classes follow the RFC grammars",
		 test_the_character_classes_follow_the_rfc_grammars},
		{"http_span_ieq compares a span with a lower-case literal without case",
		 test_span_ieq_compares_without_case},
		{"http_name_same_var folds case, and '-' with '_', as CGI gateways do",
		 test_name_same_var_folds_case_and_dash_underscore},
	};

UNIT_MAIN("worker/http_chunked", tests)
