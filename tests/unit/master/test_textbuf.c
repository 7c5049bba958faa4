/*
 * test_textbuf.c: master/textbuf: a Prometheus label value is written with
 * the exposition format's three escapes. No configured name can carry a
 * backslash any more (a route path with one is refused: it never
 * matches), so the escapes are proved here rather than through /metrics.
 */
#include <string.h>

#include "master/textbuf.h"
#include "tests/unit/unit.h"

static void check_label(const char *in, const char *want)
{
	struct textbuf t = {0};

	textbuf_label(&t, in);
	CU_ASSERT_FALSE(t.failed);
	CU_ASSERT_EQUAL(t.len, strlen(want));
	CU_ASSERT(t.len == 0 || (t.buf && memcmp(t.buf, want, t.len) == 0));
	textbuf_free(&t);
}

static void test_label_escapes(void)
{
	check_label("/plain", "/plain");
	check_label("", "");
	check_label("/q\"x\\y", "/q\\\"x\\\\y");
	check_label("a\nb", "a\\nb");
	check_label("\\\"\n", "\\\\\\\"\\n");
	check_label("end\\", "end\\\\");
}

static void test_printf_and_label_append(void)
{
	struct textbuf t = {0};

	textbuf_printf(&t, "m{path=\"");
	textbuf_label(&t, "C:\\dir");
	textbuf_printf(&t, "\"} %d\n", 7);
	CU_ASSERT_FALSE(t.failed);
	CU_ASSERT_EQUAL(t.len, strlen("m{path=\"C:\\\\dir\"} 7\n"));
	CU_ASSERT(t.buf && memcmp(t.buf, "m{path=\"C:\\\\dir\"} 7\n", t.len) == 0);
	textbuf_free(&t);
}

static const struct unit_test tests[] = {
	{"a label value has its backslashes, quotes and newlines escaped", test_label_escapes},
	{"a label written between printf calls lands in place", test_printf_and_label_append},
};

UNIT_MAIN("master/textbuf", tests)
