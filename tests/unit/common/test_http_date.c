/*
 * test_http_date.c: Retry-After values (common/http_date.h): seconds, the
 * three HTTP-date forms, and what is neither.
 */
#include <string.h>

#include "common/http_date.h"
#include "tests/unit/unit.h"

#define DATE(s) http_date_parse(s, strlen(s))
#define AFTER(s, now) http_retry_after(s, strlen(s), now)

static void test_the_three_date_forms_agree(void)
{
	/* RFC 9110's example instant: 784111777 */
	CU_ASSERT_EQUAL(DATE("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
	CU_ASSERT_EQUAL(DATE("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
	CU_ASSERT_EQUAL(DATE("Sun Nov  6 08:49:37 1994"), 784111777);
	CU_ASSERT_EQUAL(DATE("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
	CU_ASSERT_EQUAL(DATE("Tue, 29 Feb 2028 23:59:59 GMT"), 1835481599);
	CU_ASSERT_EQUAL(DATE("Tue, 01 Dec 2026 14:00:00 GMT"), 1796133600);
	/* a two-digit year below 70 is this century's */
	CU_ASSERT_EQUAL(DATE("Tuesday, 01-Dec-26 14:00:00 GMT"), 1796133600);
}

static void test_what_is_not_a_date(void)
{
	CU_ASSERT_EQUAL(DATE("Sun, 06 Nov 1994 08:49:37 UTC"), -1);
	CU_ASSERT_EQUAL(DATE("Sun, 06 Foo 1994 08:49:37 GMT"), -1);
	CU_ASSERT_EQUAL(DATE("Sun, 32 Nov 1994 08:49:37 GMT"), -1);
	CU_ASSERT_EQUAL(DATE("Sun, 06 Nov 1994 24:49:37 GMT"), -1);
	CU_ASSERT_EQUAL(DATE("Sun, 06 Nov 1994 08:49 GMT"), -1);
	CU_ASSERT_EQUAL(DATE("Sun, 6 Nov 1994 08:49:37 GMT"), -1);
	CU_ASSERT_EQUAL(DATE("06 Nov 1994"), -1);
	CU_ASSERT_EQUAL(DATE(""), -1);
}

static void test_retry_after_seconds_and_dates(void)
{
	int64_t now = 1796133600; /* Tue, 01 Dec 2026 14:00:00 GMT */

	CU_ASSERT_EQUAL(AFTER("0", now), 0);
	CU_ASSERT_EQUAL(AFTER("1", now), 1);
	CU_ASSERT_EQUAL(AFTER(" 120 ", now), 120);
	CU_ASSERT_EQUAL(AFTER("99999999999999999999", now), INT32_MAX);
	CU_ASSERT_EQUAL(AFTER("Tue, 01 Dec 2026 14:00:02 GMT", now), 2);
	CU_ASSERT_EQUAL(AFTER("Tue, 01 Dec 2026 13:00:00 GMT", now), 0); /* past: at once */
	CU_ASSERT_EQUAL(AFTER("-1", now), -1);
	CU_ASSERT_EQUAL(AFTER("1.5", now), -1);
	CU_ASSERT_EQUAL(AFTER("soon", now), -1);
	CU_ASSERT_EQUAL(AFTER("   ", now), -1);
}

static const struct unit_test tests[] = {
    {"the three HTTP-date forms give the same instant", test_the_three_date_forms_agree},
    {"what is not an HTTP-date is refused", test_what_is_not_a_date},
    {"Retry-After as seconds or as a date, from now", test_retry_after_seconds_and_dates},
};

UNIT_MAIN("common/http_date", tests)
