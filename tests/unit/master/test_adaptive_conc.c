/*
 * test_adaptive_conc.c: master/adaptive_conc: one window's latency against
 * the baseline moves the limit as the gradient says, within its bounds,
 * and not while the group leaves half its limit unused.
 */
#include <math.h>

#include "common/config_resil.h"
#include "master/adaptive_conc.h"
#include "tests/unit/unit.h"

static const struct config_adaptive_conc c = {.on = 1,
                                              .min_limit = 5,
                                              .max_limit = 100,
                                              .initial_limit = 20,
                                              .window = 1000,
                                              .baseline_window = 10000,
                                              .tolerance = 150,
                                              .smoothing = 100};

static void test_gradient(void)
{
	double l = 16, b = 0;

	/* the first window sets the baseline; at it, the limit grows by sqrt */
	adaptive_conc_step(&c, &l, &b, 10000, 16);
	CU_ASSERT_DOUBLE_EQUAL(b, 10000, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(l, 20, 1e-6);
	/* up to 1.5 x the baseline is no queueing: still grows */
	l = 16;
	adaptive_conc_step(&c, &l, &b, 15000, 16);
	CU_ASSERT_DOUBLE_EQUAL(l, 20, 1e-6);
	/* at 3 x the baseline the gradient is 0.5 at most */
	l = 16;
	b = 10000;
	adaptive_conc_step(&c, &l, &b, 300000, 16);
	CU_ASSERT_DOUBLE_EQUAL(l, 16 * 0.5 + 4, 1e-6);
	/* between: 1.5 x 10 ms / 20 ms = 0.75 (the baseline moved 10% of the way) */
	l = 16;
	b = 10000;
	adaptive_conc_step(&c, &l, &b, 20000, 16);
	CU_ASSERT_DOUBLE_EQUAL(b, 11000, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(l, 16 * 1.5 * 11000 / 20000 + 4, 1e-6);
}

static void test_bounds_and_evidence(void)
{
	struct config_adaptive_conc s = c;
	double l = 12, b = 10000;

	s.min_limit = 10;
	adaptive_conc_step(&s, &l, &b, 1000000, 12); /* 12 x 0.5 + sqrt(12) = 9.5 */
	CU_ASSERT_DOUBLE_EQUAL(l, 10, 1e-6);         /* min_limit */
	l = 99;
	b = 10000;
	adaptive_conc_step(&c, &l, &b, 10000, 99);
	CU_ASSERT_DOUBLE_EQUAL(l, 100, 1e-6); /* max_limit */
	/* no answer: nothing moves */
	l = 20;
	adaptive_conc_step(&c, &l, &b, 0, 20);
	CU_ASSERT_DOUBLE_EQUAL(l, 20, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(b, 10000, 1e-6);
	/* fewer than half the limit in flight: not judged, though slow */
	adaptive_conc_step(&c, &l, &b, 1000000, 9);
	CU_ASSERT_DOUBLE_EQUAL(l, 20, 1e-6);
	/* smoothing takes only part of the new limit */
	s = c;
	s.smoothing = 20;
	l = 16;
	b = 10000;
	adaptive_conc_step(&s, &l, &b, 1000000, 16);
	CU_ASSERT_DOUBLE_EQUAL(l, 16 * 0.8 + (8 + 4) * 0.2, 1e-6);
	/* a latency under half the baseline pulls the baseline down faster */
	b = 100000;
	adaptive_conc_step(&c, &l, &b, 10000, 16);
	CU_ASSERT_DOUBLE_EQUAL(b, (100000 * 0.9 + 1000) * 0.95, 1e-6);
}

static const struct unit_test tests[] = {
    {"the limit moves by the gradient of the baseline over the window's latency", test_gradient},
    {"the limit stays within its bounds, and moves only on evidence", test_bounds_and_evidence},
};

UNIT_MAIN("master/adaptive_conc", tests)
