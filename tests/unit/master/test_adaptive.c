/*
 * test_adaptive.c: master/adaptive: one window's histogram, answers and
 * errors make the factor (1, 0.6, 0.3) and the p99, and the worker's side
 * scales the emission interval by it within the floor (shm/limit.h).
 */
#include <string.h>

#include "master/adaptive.h"
#include "shm/limit.h"
#include "tests/unit/unit.h"

static void test_p99_from_buckets(void)
{
	uint64_t h[STAT_BUCKETS] = {0};
	uint32_t p99;

	/* nothing: no evidence, 1.0x */
	CU_ASSERT_EQUAL(adaptive_judge(h, 0, 0, 0, 200, 0, &p99), 1000);
	CU_ASSERT_EQUAL(p99, 0);
	/* all within 5 ms: the p99 is in the first bucket */
	h[0] = 1000;
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 200, 0, &p99), 1000);
	CU_ASSERT(p99 <= 5000);
	/* 2% in (250 ms, 500 ms]: the p99 lies there, past a 200 ms bound */
	h[0] = 980;
	h[6] = 20;
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 200, 0, &p99), 600);
	CU_ASSERT(p99 > 250000 && p99 <= 500000);
	/* but within a 600 ms bound */
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 600, 0, &p99), 1000);
	/* 0.5% slow: the p99 stays in the fast bucket */
	h[0] = 995;
	h[6] = 5;
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 200, 0, &p99), 1000);
	/* everything past 10 s: the +Inf bucket answers its lower bound */
	memset(h, 0, sizeof h);
	h[STAT_BUCKETS - 1] = 10;
	CU_ASSERT_EQUAL(adaptive_judge(h, 10, 0, 0, 200, 0, &p99), 600);
	CU_ASSERT_EQUAL(p99, 10000000);
}

static void test_errors_and_breaker(void)
{
	uint64_t h[STAT_BUCKETS] = {0};
	uint32_t p99;

	h[0] = 1000;
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 50, 0, 200, 0, &p99), 1000); /* 5%: not over */
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 51, 0, 200, 0, &p99), 300);
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 1, 200, 0, &p99), 300); /* breaker open */
	CU_ASSERT_EQUAL(adaptive_judge(h, 0, 0, 1, 200, 0, &p99), 300);    /* even with no answers */
	h[6] = 100;                                                     /* slow and failing: 0.3x wins */
	CU_ASSERT_EQUAL(adaptive_judge(h, 1100, 500, 0, 200, 0, &p99), 300);
}

static void test_hysteresis(void)
{
	uint64_t h[STAT_BUCKETS] = {0};
	uint32_t p99;

	h[0] = 1000;
	/* at 0.3x, 4.5% errors keep it there; at 1.0x they do not lower it */
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 45, 0, 200, 300, &p99), 300);
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 45, 0, 200, 1000, &p99), 1000);
	/* back only under 0.8 x 5% */
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 41, 0, 200, 300, &p99), 300);
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 40, 0, 200, 300, &p99), 1000);
	/* the p99 the same way: 2% in (100 ms, 250 ms], so about 175 ms */
	h[0] = 980;
	h[5] = 20;
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 200, 1000, &p99), 1000);
	CU_ASSERT(p99 > 160000 && p99 < 200000);
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 200, 600, &p99), 600);
	/* leaving 0.3x with the p99 in the margin: 0.6x, not 1.0x */
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 200, 300, &p99), 600);
	CU_ASSERT_EQUAL(adaptive_judge(h, 1000, 0, 0, 250, 600, &p99), 1000);
}

static void test_interval_scaled_within_floor(void)
{
	uint64_t base = 10000000; /* 100/s */

	CU_ASSERT_EQUAL(limit_adaptive_interval(base, 0, 0), base); /* never written: 1.0x */
	CU_ASSERT_EQUAL(limit_adaptive_interval(base, 1000, 0), base);
	CU_ASSERT_EQUAL(limit_adaptive_interval(base, 600, 0), base * 1000 / 600);
	CU_ASSERT_EQUAL(limit_adaptive_interval(base, 300, 0), base * 1000 / 300);
	/* a 50/s floor holds 0.3x (33/s) at 50/s, and leaves 0.6x (60/s) be */
	CU_ASSERT_EQUAL(limit_adaptive_interval(base, 300, 20000000), 20000000);
	CU_ASSERT_EQUAL(limit_adaptive_interval(base, 600, 20000000), base * 1000 / 600);
}

static const struct unit_test tests[] = {
    {"the p99 comes from the window's buckets, over the bound 0.6x", test_p99_from_buckets},
    {"more than 5% errors or an open breaker make 0.3x", test_errors_and_breaker},
    {"a lowered factor returns only below 0.8 x its threshold", test_hysteresis},
    {"the emission interval is scaled by the factor, held to the floor", test_interval_scaled_within_floor},
};

UNIT_MAIN("master/adaptive", tests)
