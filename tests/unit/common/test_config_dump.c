/*
 * test_config_dump.c: common/config_dump's units. A duration or size is
 * written in the largest unit that divides it, and what is written parses
 * back (config_parse_duration, config_parse_size) to the same value.
 * tests/integration/test_config_dump.py runs the whole of weir -T.
 */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/config_dump.h"
#include "tests/unit/unit.h"

static void test_durations_take_the_largest_exact_unit(void)
{
	static const struct {
		uint32_t ms;
		const char *text;
	} cases[] = {
	    {1, "1ms"},          {999, "999ms"},   {1000, "1s"},    {1500, "1500ms"},   {60000, "1m"},
	    {90000, "90s"},      {3600000, "1h"},  {5400000, "90m"}, {43200000, "12h"}, {4294967295u, "4294967295ms"},
	};
	char buf[32];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint32_t back = 0;

		CU_ASSERT_STRING_EQUAL(config_dump_duration(cases[i].ms, buf, sizeof buf), cases[i].text);
		CU_ASSERT_EQUAL(config_parse_duration(buf, &back), 0);
		CU_ASSERT_EQUAL(back, cases[i].ms);
	}
}

static void test_sizes_take_the_largest_exact_power_of_1024(void)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
	    {0, "0"},        {1000, "1000"},           {1024, "1k"},      {16384, "16k"},
	    {1536, "1536"},  {104857600, "100m"},      {1ull << 30, "1g"}, {5ull << 30, "5g"},
	    {(1ull << 30) + 1024, "1048577k"},         {UINT64_MAX, "18446744073709551615"},
	};
	char buf[32];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t back = 1;

		CU_ASSERT_STRING_EQUAL(config_dump_size(cases[i].bytes, buf, sizeof buf), cases[i].text);
		CU_ASSERT_EQUAL(config_parse_size(buf, &back), 0);
		CU_ASSERT_EQUAL(back, cases[i].bytes);
	}
}

static const struct unit_test tests[] = {
    {"durations take the largest exact unit and parse back", test_durations_take_the_largest_exact_unit},
    {"sizes take the largest exact power of 1024 and parse back", test_sizes_take_the_largest_exact_power_of_1024},
};

UNIT_MAIN("common/config_dump", tests)
