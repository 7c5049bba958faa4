/*
 * test_log.c: common/log: what an access log line may contain.
 */
#include <string.h>

#include "common/log.h"
#include "tests/unit/unit.h"

static void test_plain_text_is_copied(void)
{
	char out[64];

	log_escape(out, sizeof(out), "/a/b?c=d&e=%20", 14);
	CU_ASSERT_STRING_EQUAL(out, "/a/b?c=d&e=%20");
}

static void test_quotes_backslashes_and_controls_are_escaped(void)
{
	char out[64];

	log_escape(out, sizeof(out), "/\"x\\\n\x7f\xe9", 7);
	CU_ASSERT_STRING_EQUAL(out, "/\\x22x\\x5C\\x0A\\x7F\\xE9");
}

static void test_output_is_cut_at_an_escape_boundary(void)
{
	char out[8];

	/* "ab" fits, the escape of '"' (4 bytes) would not with the NUL */
	log_escape(out, 6, "ab\"cd", 5);
	CU_ASSERT_STRING_EQUAL(out, "ab");
	log_escape(out, sizeof(out), "abcdefghij", 10);
	CU_ASSERT_STRING_EQUAL(out, "abcdefg");
}

static const struct unit_test tests[] = {
	{"plain printable text is copied as it is", test_plain_text_is_copied},
	{"quotes, backslashes, controls and high bytes become \\xHH", test_quotes_backslashes_and_controls_are_escaped},
	{"the output is cut whole, never in the middle of an escape", test_output_is_cut_at_an_escape_boundary},
};

UNIT_MAIN("common/log", tests)
