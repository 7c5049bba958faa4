/*
 * Unit tests for worker/h1/http_path.c: the path weir routes on and forwards.
 * The dot-segment cases are RFC 3986 5.4's examples, resolved against its
 * base "http://a/b/c/d;p?q" up to the merge (5.2.3), so that what is left
 * is 5.2.4's work; except that a path above the root is refused where the
 * RFC stops at the root.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "tests/unit/unit.h"

static char buf[512];
static unsigned norm_flags; /* 0: the RFC's cases, slashes as they are */

/* Normalises <in>; returns the result, or "ERR" (checking that the
 * buffer was left as it was). */
static const char *norm(const char *in)
{
	static char out[512];
	size_t n = strlen(in), got = 12345;
	int rc;

	memcpy(buf, in, n);
	buf[n] = '\0';
	rc = http_path_normalize(buf, n, norm_flags, &got);
	if (rc) {
		CU_ASSERT_EQUAL(rc, WEIR_ERR(BAD_PATH));
		CU_ASSERT_NSTRING_EQUAL(buf, in, n);
		return "ERR";
	}
	CU_ASSERT(got <= n);
	memcpy(out, buf, got);
	out[got] = '\0';
	return out;
}

#define NORM(in, want)                                                                                 \
	do {                                                                                           \
		const char *got_ = norm(in);                                                           \
		if (strcmp(got_, want) != 0)                                                           \
			fprintf(stderr, "\n  %s: got %s, want %s\n", in, got_, want);                  \
		CU_ASSERT_STRING_EQUAL(got_, want);                                                    \
	} while (0)

static void test_rfc3986_5_4_1_normal_examples(void)
{
	NORM("/b/c/g", "/b/c/g");           /* "g" */
	NORM("/b/c/./g", "/b/c/g");         /* "./g" */
	NORM("/b/c/g/", "/b/c/g/");         /* "g/" */
	NORM("/g", "/g");                   /* "/g" */
	NORM("/b/c/g;x", "/b/c/g;x");       /* "g;x" */
	NORM("/b/c/.", "/b/c/");            /* "." */
	NORM("/b/c/./", "/b/c/");           /* "./" */
	NORM("/b/c/..", "/b/");             /* ".." */
	NORM("/b/c/../", "/b/");            /* "../" */
	NORM("/b/c/../g", "/b/g");          /* "../g" */
	NORM("/b/c/../..", "/");            /* "../.." */
	NORM("/b/c/../../", "/");           /* "../../" */
	NORM("/b/c/../../g", "/g");         /* "../../g" */
}

static void test_rfc3986_5_4_2_abnormal_examples(void)
{
	/* the RFC stops at the root ("/g"); weir refuses */
	NORM("/b/c/../../../g", "ERR");     /* "../../../g" */
	NORM("/b/c/../../../../g", "ERR");  /* "../../../../g" */
	NORM("/./g", "/g");
	NORM("/../g", "ERR");
	NORM("/b/c/g.", "/b/c/g.");
	NORM("/b/c/.g", "/b/c/.g");
	NORM("/b/c/g..", "/b/c/g..");
	NORM("/b/c/..g", "/b/c/..g");
	NORM("/b/c/./../g", "/b/g");        /* "./../g" */
	NORM("/b/c/./g/.", "/b/c/g/");      /* "./g/." */
	NORM("/b/c/g/./h", "/b/c/g/h");     /* "g/./h" */
	NORM("/b/c/g/../h", "/b/c/h");      /* "g/../h" */
	NORM("/b/c/g;x=1/./y", "/b/c/g;x=1/y");
	NORM("/b/c/g;x=1/../y", "/b/c/y");
	/* 5.2.4's own walk-through */
	NORM("/a/b/c/./../../g", "/a/g");
	NORM("/mid/content=5/../6", "/mid/6");
}

static void test_above_the_root_is_refused(void)
{
	NORM("/..", "ERR");
	NORM("/../", "ERR");
	NORM("/../x", "ERR");
	NORM("/a/../../x", "ERR");
	NORM("/a/../..", "ERR");
	NORM("/%2e%2e/x", "ERR");
	NORM("/a/.%2E/%2e./x", "ERR");
	/* back to the root is fine, and so is an empty segment between */
	NORM("/a/..", "/");
	NORM("/a//../b", "/a/b");
	NORM("//..", "/");
}

static void test_unreserved_encodings_are_decoded_the_rest_kept_in_upper_case(void)
{
	NORM("/%7Euser/%41%62%2d%5f%2E", "/~user/Ab-_.");
	NORM("/public/%2e%2e/internal", "/internal");
	NORM("/public/%2E./internal", "/internal");
	NORM("/a/%2e", "/a/");
	NORM("/public/a%2Fb", "/public/a%2Fb");
	NORM("/public/a%2fb", "/public/a%2Fb");
	NORM("/public/a%2f..%2f..", "/public/a%2F..%2F..");
	NORM("/%c3%a9t%C3%a9", "/%C3%A9t%C3%A9");
	NORM("/a%3f%23%25%20b", "/a%3F%23%25%20b");
	/* one decoding only: %252e is "%2e" as text, not a dot */
	NORM("/a/%252e%252e/b", "/a/%252e%252e/b");
	NORM("/a%2D", "/a-");
}

static void test_bad_encodings_and_nul_are_refused(void)
{
	NORM("/%zz", "ERR");
	NORM("/a%", "ERR");
	NORM("/a%2", "ERR");
	NORM("/a%2/b", "ERR");
	NORM("/a%g0", "ERR");
	NORM("/a%00b", "ERR");
	NORM("/a/../%00", "ERR");
	NORM("/%2e%2e/%zz", "ERR");
	NORM("a", "ERR"); /* not a path: the parser never gives one */
}

static void test_paths_that_need_no_change_are_left_as_they_are(void)
{
	static const char *const same[] = {"/",        "//",      "/a/b/c",      "/.well-known/x", "/a/...",
	                                   "/a/.b/c.", "/a/%2F", "/%C3%A9/%20", "/a/b/",          "/a//b"};

	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		size_t n = strlen(same[i]), got = 0;

		memcpy(buf, same[i], n);
		CU_ASSERT_EQUAL(http_path_normalize(buf, n, 0, &got), 0);
		CU_ASSERT_EQUAL(got, n);
		CU_ASSERT_NSTRING_EQUAL(buf, same[i], n);
	}
}

static void test_the_result_fills_only_its_length(void)
{
	size_t got;

	memcpy(buf, "/a/b/../c?q=1", 13);
	CU_ASSERT_EQUAL(http_path_normalize(buf, 9, 0, &got), 0);
	CU_ASSERT_EQUAL(got, 4);
	CU_ASSERT_NSTRING_EQUAL(buf, "/a/c", 4);
	CU_ASSERT_NSTRING_EQUAL(buf + 9, "?q=1", 4); /* past the path: untouched */
}

static void test_backslashes_are_refused_in_any_spelling(void)
{
	/* IIS, ASP.NET and some Java servers read '\\' as '/' */
	NORM("/public\\..\\internal", "ERR");
	NORM("/a\\b", "ERR");
	NORM("\\", "ERR");
	NORM("/public%5C..%5Cinternal", "ERR");
	NORM("/a%5cb", "ERR");
	NORM("/a/%5C", "ERR");
	/* an encoded "%5C" as text is no backslash */
	NORM("/a%255C", "/a%255C");
}

static void test_dot_segments_with_parameters_are_refused(void)
{
	/* Tomcat and Spring strip ";params" before they resolve dots */
	NORM("/public/..;/internal", "ERR");
	NORM("/public/..;x=1/internal", "ERR");
	NORM("/public/.;/internal", "ERR");
	NORM("/public/.;x", "ERR");
	NORM("/public/%2e%2e;/internal", "ERR");
	NORM("/public/.%2E;x/internal", "ERR");
	NORM("/public/..%3B/internal", "ERR");
	NORM("/..;", "ERR");
	/* parameters on any other segment are the server's business */
	NORM("/public/a;x/b", "/public/a;x/b");
	NORM("/public/...;x/b", "/public/...;x/b");
	NORM("/public/a..;x", "/public/a..;x");
	NORM("/public/;x/b", "/public/;x/b");
}

static void test_runs_of_slashes_are_merged_when_asked(void)
{
	norm_flags = HTTP_PATH_MERGE_SLASHES;
	NORM("//internal", "/internal");
	NORM("/public//x", "/public/x");
	NORM("///a////b///", "/a/b/");
	NORM("//", "/");
	NORM("/", "/");
	NORM("/a//../b", "/b"); /* merged first, as nginx does */
	NORM("//..", "ERR");    /* which is "/..": above the root */
	NORM("/.//x", "/x");
	NORM("/a/%2F/b", "/a/%2F/b"); /* an encoded slash is no separator */
	NORM("/a%2F%2Fb//c", "/a%2F%2Fb/c");
	NORM("//%7Ea//b", "/~a/b");
	norm_flags = 0;
	NORM("//internal", "//internal");
	NORM("/public//x", "/public//x");
}

static const struct unit_test tests[] = {
	{"RFC 3986 5.4.1's normal examples", test_rfc3986_5_4_1_normal_examples},
	{"RFC 3986 5.4.2's abnormal examples, above the root refused", test_rfc3986_5_4_2_abnormal_examples},
	{"a path that climbs above the root is refused", test_above_the_root_is_refused},
	{"unreserved encodings are decoded, the rest kept in upper case",
	 test_unreserved_encodings_are_decoded_the_rest_kept_in_upper_case},
	{"bad encodings and NUL are refused", test_bad_encodings_and_nul_are_refused},
	{"paths that need no change are left as they are", test_paths_that_need_no_change_are_left_as_they_are},
	{"the result fills only its length", test_the_result_fills_only_its_length},
	{"backslashes are refused in any spelling", test_backslashes_are_refused_in_any_spelling},
	{"dot segments with parameters are refused", test_dot_segments_with_parameters_are_refused},
	{"runs of slashes are merged when asked", test_runs_of_slashes_are_merged_when_asked},
};

UNIT_MAIN("worker/http_path", tests)
