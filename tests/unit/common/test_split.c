/*
 * test_split.c: common/split.h: the seedless bucket hash, the cumulative
 * ranges, and what a weight change moves.
 */
#include <stdio.h>
#include <string.h>

#include "common/split.h"
#include "tests/unit/unit.h"

/* Fixed values: the hash is a contract between versions and nodes (a key
 * must land in the same bucket everywhere); tests/integration/test_split.py
 * computes the same in Python. */
static void test_bucket_is_fixed(void)
{
	CU_ASSERT_EQUAL(split_bucket("", 0), 6203u);
	CU_ASSERT_EQUAL(split_bucket("user-1", 6), 7624u);
	CU_ASSERT_EQUAL(split_bucket("\x7f\x00\x00\x01", 4), 230u);
}

static void test_bounds_are_cumulative_in_order(void)
{
	uint32_t w[3] = {95, 5, 0}, w2[3] = {1, 1, 1};
	uint16_t b[3];

	split_bounds(w, 2, b);
	CU_ASSERT_EQUAL(b[0], 9500);
	CU_ASSERT_EQUAL(b[1], SPLIT_BUCKETS);
	CU_ASSERT_EQUAL(split_side(b, 2, 0), 0);
	CU_ASSERT_EQUAL(split_side(b, 2, 9499), 0);
	CU_ASSERT_EQUAL(split_side(b, 2, 9500), 1);
	CU_ASSERT_EQUAL(split_side(b, 2, 9999), 1);
	/* a side of weight 0 holds no bucket */
	split_bounds(w, 3, b);
	CU_ASSERT_EQUAL(split_side(b, 3, 9999), 1);
	w[0] = 0;
	split_bounds(w, 3, b);
	CU_ASSERT_EQUAL(split_side(b, 3, 0), 1);
	split_bounds(w2, 3, b);
	CU_ASSERT_EQUAL(b[0], 3333);
	CU_ASSERT_EQUAL(b[1], 6666);
	CU_ASSERT_EQUAL(b[2], SPLIT_BUCKETS);
}

/* Two sides: every weight of the second from 0 to 200 against 100, each
 * step moves buckets only from the first side to the second. */
static void test_raising_a_weight_moves_buckets_only_to_it(void)
{
	uint16_t prev[2], cur[2];

	for (uint32_t v2 = 0; v2 <= 200; v2++) {
		uint32_t w[2] = {100, v2};

		split_bounds(w, 2, cur);
		for (uint32_t k = 0; v2 && k < SPLIT_BUCKETS; k++) {
			int a = split_side(prev, 2, k), b = split_side(cur, 2, k);

			if (a != b && !(a == 0 && b == 1)) {
				CU_FAIL("a bucket moved away from the side that grew");
				return;
			}
		}
		memcpy(prev, cur, sizeof(prev));
	}
}

/* The buckets of many keys share out as the ranges say. */
static void test_buckets_spread_evenly(void)
{
	uint32_t n[10] = {0};
	char k[32];

	for (int i = 0; i < 100000; i++) {
		int len = snprintf(k, sizeof k, "user-%d", i);

		n[split_bucket(k, (size_t)len) / 1000]++;
	}
	for (int i = 0; i < 10; i++)
		CU_ASSERT(n[i] > 9500 && n[i] < 10500);
}

static const struct unit_test tests[] = {
    {"the bucket of a key is a fixed function of its bytes", test_bucket_is_fixed},
    {"the sides' ranges are cumulative in config order, a weight of 0 holding none",
     test_bounds_are_cumulative_in_order},
    {"with two sides, raising a weight moves buckets only to that side", test_raising_a_weight_moves_buckets_only_to_it},
    {"keys spread evenly over the buckets", test_buckets_spread_evenly},
};

UNIT_MAIN("common/split", tests)
