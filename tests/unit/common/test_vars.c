/*
 * Unit tests for common/vars.c (templates compiled into pieces, written
 * back) and common/policy.c (address blocks).
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <string.h>

#include "common/policy.h"
#include "common/vars.h"
#include "tests/unit/unit.h"

static struct vars_tpl t;

static void test_pieces(void)
{
	CU_ASSERT_PTR_NULL(vars_compile(&t, "https://$host$request_uri"));
	CU_ASSERT_EQUAL(t.n, 3);
	CU_ASSERT_EQUAL(t.p[0].id, VARS_LITERAL);
	CU_ASSERT_EQUAL(t.p[0].len, 8);
	CU_ASSERT_NSTRING_EQUAL(t.text + t.p[0].off, "https://", 8);
	CU_ASSERT_EQUAL(t.p[1].id, VARS_HOST);
	CU_ASSERT_EQUAL(t.p[2].id, VARS_REQUEST_URI);

	/* "${name}" before letters, "$$" merged into the literal around it */
	CU_ASSERT_PTR_NULL(vars_compile(&t, "a$$b${status}ms"));
	CU_ASSERT_EQUAL(t.n, 3);
	CU_ASSERT_EQUAL(t.p[0].len, 3);
	CU_ASSERT_NSTRING_EQUAL(t.text + t.p[0].off, "a$b", 3);
	CU_ASSERT_EQUAL(t.p[1].id, VARS_STATUS);
	CU_ASSERT_NSTRING_EQUAL(t.text + t.p[2].off, "ms", 2);

	/* families keep their NAME; a name ends at the first other byte */
	CU_ASSERT_PTR_NULL(vars_compile(&t, "$http_x_api_key-$cookie_sid;$arg_page"));
	CU_ASSERT_EQUAL(t.n, 5);
	CU_ASSERT_EQUAL(t.p[0].id, VARS_HTTP);
	CU_ASSERT_NSTRING_EQUAL(t.text + t.p[0].off, "x_api_key", 9);
	CU_ASSERT_EQUAL(t.p[0].len, 9);
	CU_ASSERT_EQUAL(t.p[2].id, VARS_COOKIE);
	CU_ASSERT_EQUAL(t.p[4].id, VARS_ARG);
	CU_ASSERT_TRUE(vars_uses(&t, VARS_COOKIE));
	CU_ASSERT_FALSE(vars_uses(&t, VARS_STATUS));

	CU_ASSERT_PTR_NULL(vars_compile(&t, ""));
	CU_ASSERT_EQUAL(t.n, 0);
}

static void test_refusals(void)
{
	const char *why;

	why = vars_compile(&t, "$hots");
	CU_ASSERT_PTR_NOT_NULL_FATAL(why);
	CU_ASSERT_STRING_EQUAL(why, "uses the unknown variable $hots");
	CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, "100$"));
	CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, "$ x"));
	CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, "${status"));
	CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, "${}"));
	/* a family needs a NAME */
	CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, "$http_"));
	/* bounds: 64 pieces, 4096 bytes of text */
	{
		char big[5 * 65 + 1] = "";
		for (int i = 0; i < 65; i++)
			strcat(big, "$msec");
		CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, big));
	}
	{
		static char big[VARS_TEXT + 2];
		memset(big, 'a', sizeof(big) - 1);
		CU_ASSERT_PTR_NOT_NULL(vars_compile(&t, big));
		big[VARS_TEXT] = '\0';
		CU_ASSERT_PTR_NULL(vars_compile(&t, big));
	}
}

static void test_source_round_trip(void)
{
	static struct vars_tpl u;
	char src[2 * VARS_TEXT];
	const char *in = "$$5 for $http_user_agent at ${host}x $request_uri";

	CU_ASSERT_PTR_NULL(vars_compile(&t, in));
	vars_source(&t, src, sizeof(src));
	CU_ASSERT_STRING_EQUAL(src, "$$5 for ${http_user_agent} at ${host}x ${request_uri}");
	CU_ASSERT_PTR_NULL(vars_compile(&u, src));
	CU_ASSERT_EQUAL(memcmp(&t, &u, sizeof(t)), 0);
}

static int v4(const char *a, uint8_t *out)
{
	return inet_pton(AF_INET, a, out) == 1;
}

static void test_cidr(void)
{
	struct policy_cidr c[3];
	uint8_t a[16];

	CU_ASSERT_PTR_NULL(policy_cidr_parse("10.0.0.0/8", &c[0]));
	CU_ASSERT_PTR_NULL(policy_cidr_parse("192.168.1.7", &c[1]));
	CU_ASSERT_PTR_NULL(policy_cidr_parse("2001:db8::/33", &c[2]));
	CU_ASSERT_EQUAL(c[1].bits, 32);
	CU_ASSERT_TRUE(v4("10.255.1.2", a) && policy_cidr_match(c, 3, 0, a));
	CU_ASSERT_TRUE(v4("11.0.0.0", a) && !policy_cidr_match(c, 3, 0, a));
	CU_ASSERT_TRUE(v4("192.168.1.7", a) && policy_cidr_match(c, 3, 0, a));
	CU_ASSERT_TRUE(v4("192.168.1.8", a) && !policy_cidr_match(c, 3, 0, a));
	/* a prefix that is not a whole number of bytes */
	inet_pton(AF_INET6, "2001:db8:7fff::1", a);
	CU_ASSERT_TRUE(policy_cidr_match(c, 3, 1, a));
	inet_pton(AF_INET6, "2001:db8:8000::1", a);
	CU_ASSERT_FALSE(policy_cidr_match(c, 3, 1, a));
	/* families never mix */
	CU_ASSERT_TRUE(v4("32.1.13.184", a) && !policy_cidr_match(&c[2], 1, 0, a));
	CU_ASSERT_PTR_NULL(policy_cidr_parse("0.0.0.0/0", &c[0]));
	CU_ASSERT_TRUE(v4("1.2.3.4", a) && policy_cidr_match(c, 1, 0, a));

	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("10.0.0.1/8", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("10.0.0.0/33", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("::/129", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("10.0.0.0/", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("10.0.0.0/8x", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("10.0.0.0/-1", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("host.example", &c[0]));
	CU_ASSERT_PTR_NOT_NULL(policy_cidr_parse("", &c[0]));
}

static const struct unit_test tests[] = {
    {"templates compile into literal and variable pieces", test_pieces},
    {"unknown variables, stray '$' and oversize templates are refused", test_refusals},
    {"a template written back compiles to the same pieces", test_source_round_trip},
    {"address blocks match by prefix, refuse host bits and bad lengths", test_cidr},
};

UNIT_MAIN("common/vars", tests)
