/*
 * test_tls_names.c: choosing a certificate by SNI host name
 * (worker/tls_names.c): exact names, one-label wildcards, case, the
 * trailing dot, and exact names winning over wildcards.
 */
#include <string.h>

#include "tests/unit/unit.h"
#include "worker/tls_names.h"

static int match(const char *pattern, const char *host)
{
	return tls_name_match(pattern, strlen(pattern), host, strlen(host));
}

static void test_exact_names_match_in_any_case(void)
{
	CU_ASSERT_EQUAL(match("api.example.com", "api.example.com"), 2);
	CU_ASSERT_EQUAL(match("api.example.com", "API.Example.COM"), 2);
	CU_ASSERT_EQUAL(match("api.example.com", "api.example.com."), 2);
	CU_ASSERT_EQUAL(match("api.example.com", "api.example.co"), 0);
	CU_ASSERT_EQUAL(match("api.example.com", "xapi.example.com"), 0);
	CU_ASSERT_EQUAL(match("api.example.com", ""), 0);
}

static void test_a_wildcard_covers_exactly_one_label(void)
{
	CU_ASSERT_EQUAL(match("*.example.com", "a.example.com"), 1);
	CU_ASSERT_EQUAL(match("*.example.com", "A-b.EXAMPLE.com"), 1);
	CU_ASSERT_EQUAL(match("*.example.com", "a.example.com."), 1);
	CU_ASSERT_EQUAL(match("*.example.com", "example.com"), 0);
	CU_ASSERT_EQUAL(match("*.example.com", ".example.com"), 0);
	CU_ASSERT_EQUAL(match("*.example.com", "a.b.example.com"), 0);
	CU_ASSERT_EQUAL(match("*.example.com", "a.example.org"), 0);
	CU_ASSERT_EQUAL(match("*.example.com", "aexample.com"), 0);
}

static void test_partial_wildcards_match_nothing(void)
{
	CU_ASSERT_EQUAL(match("*", "a"), 0);
	CU_ASSERT_EQUAL(match("*.", "a."), 0);
	CU_ASSERT_EQUAL(match("*x.example.com", "ax.example.com"), 0);
}

static void test_an_exact_name_wins_over_an_earlier_wildcard(void)
{
	static const struct tls_name names[] = {
		{"*.example.com", 13, 0},
		{"www.example.com", 15, 1},
		{"*.example.com", 13, 2},
		{"other.test", 10, 3},
	};
	CU_ASSERT_EQUAL(tls_names_pick(names, 4, "www.example.com", 15), 1);
	CU_ASSERT_EQUAL(tls_names_pick(names, 4, "api.example.com", 15), 0); /* first wildcard */
	CU_ASSERT_EQUAL(tls_names_pick(names, 4, "OTHER.test", 10), 3);
	CU_ASSERT_EQUAL(tls_names_pick(names, 4, "nothing.test", 12), -1);
	CU_ASSERT_EQUAL(tls_names_pick(names, 0, "www.example.com", 15), -1);
}

static void test_the_first_certificate_with_a_name_wins(void)
{
	static const struct tls_name names[] = {
		{"a.test", 6, 2},
		{"a.test", 6, 1},
	};
	CU_ASSERT_EQUAL(tls_names_pick(names, 2, "a.test", 6), 2);
}

static const struct unit_test tests[] = {
	{"exact names match in any case and with a trailing dot", test_exact_names_match_in_any_case},
	{"a wildcard covers exactly one label", test_a_wildcard_covers_exactly_one_label},
	{"partial wildcards match nothing", test_partial_wildcards_match_nothing},
	{"an exact name wins over an earlier wildcard", test_an_exact_name_wins_over_an_earlier_wildcard},
	{"the first certificate carrying a name wins", test_the_first_certificate_with_a_name_wins},
};

UNIT_MAIN("worker/tls_names", tests)
