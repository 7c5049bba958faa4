/*
 * test_tls_names.c: matching an SNI host name against a certificate's
 * names (worker/net/tls_names.c): exact names, one-label wildcards, case and
 * the trailing dot. The choice among certificates is test_tls_pick.c's.
 */
#include <string.h>

#include "tests/unit/unit.h"
#include "worker/net/net.h"

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

static const struct unit_test tests[] = {
	{"exact names match in any case and with a trailing dot", test_exact_names_match_in_any_case},
	{"a wildcard covers exactly one label", test_a_wildcard_covers_exactly_one_label},
	{"partial wildcards match nothing", test_partial_wildcards_match_nothing},
};

UNIT_MAIN("worker/tls_names", tests)
