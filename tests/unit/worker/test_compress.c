/*
 * test_compress.c: the encoders' pool (worker/core/compress_pool.c) and
 * Accept-Encoding's q-values (compress_accept_parse).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/unit.h"
#include "worker/core/core.h"
#include "worker/core/compress_pool.h"

#define POOL (1u << 20)

static _Alignas(16) char mem[POOL];

static void test_blocks_are_aligned_apart_and_the_pool_is_whole_after_frees(void)
{
	struct czpool p;
	void *b[64];

	czpool_init(&p, mem, POOL);
	for (int i = 0; i < 64; i++) {
		b[i] = czpool_alloc(&p, (size_t)(i * 97 + 1));
		CU_ASSERT_PTR_NOT_NULL_FATAL(b[i]);
		CU_ASSERT_EQUAL((uintptr_t)b[i] % 16, 0);
		memset(b[i], i, (size_t)(i * 97 + 1));
	}
	for (int i = 0; i < 64; i++) /* nothing overlapped */
		for (int k = 0; k < i * 97 + 1; k++)
			CU_ASSERT_EQUAL_FATAL(((unsigned char *)b[i])[k], i);
	/* freed in an order that merges on both sides */
	for (int i = 1; i < 64; i += 2)
		czpool_free(&p, b[i]);
	for (int i = 0; i < 64; i += 2)
		czpool_free(&p, b[i]);
	CU_ASSERT_EQUAL(p.in_use, 0);
	/* merged back into one block: the whole region can be had again */
	CU_ASSERT_PTR_EQUAL(czpool_alloc(&p, POOL - 16), mem + 16);
	CU_ASSERT_PTR_NULL(czpool_alloc(&p, 1));
}

static void test_an_allocation_past_what_is_free_fails_and_frees_make_room(void)
{
	struct czpool p;
	void *a, *b, *c;

	czpool_init(&p, mem, POOL);
	a = czpool_alloc(&p, POOL / 2);
	b = czpool_alloc(&p, POOL / 4);
	CU_ASSERT_PTR_NOT_NULL(a);
	CU_ASSERT_PTR_NOT_NULL(b);
	CU_ASSERT_PTR_NULL(czpool_alloc(&p, POOL / 2));
	CU_ASSERT_PTR_NULL(czpool_alloc(&p, SIZE_MAX - 8)); /* never wraps */
	czpool_free(&p, a);
	c = czpool_alloc(&p, POOL / 2);
	CU_ASSERT_PTR_EQUAL(c, a); /* first fit: the block given back */
	czpool_free(&p, NULL);
	czpool_free(&p, b);
	czpool_free(&p, c);
	CU_ASSERT_EQUAL(p.in_use, 0);
}

static void test_churn_like_brotlis_never_leaks_the_region(void)
{
	struct czpool p;
	void *live[32] = {0};
	uint32_t x = 1;

	czpool_init(&p, mem, POOL);
	for (int round = 0; round < 20000; round++) {
		int i = (int)((x = x * 1103515245u + 12345u) >> 16) % 32;

		if (live[i]) {
			czpool_free(&p, live[i]);
			live[i] = NULL;
		} else {
			live[i] = czpool_alloc(&p, (x >> 8) % 20000 + 1);
			CU_ASSERT_PTR_NOT_NULL_FATAL(live[i]); /* 32 x 20 KB always fit in 1 MiB */
		}
	}
	for (int i = 0; i < 32; i++)
		czpool_free(&p, live[i]);
	CU_ASSERT_EQUAL(p.in_use, 0);
	CU_ASSERT_PTR_NOT_NULL(czpool_alloc(&p, POOL - 16));
}

/* The q-values a value gives, resolved as the request handler does. */
static void q_of(const char *v, int *br, int *gzip)
{
	int16_t q[COMPRESS_ENC_COUNT] = {-1, -1}, star = -1;

	compress_accept_parse(v, strlen(v), q, &star);
	*br = q[COMPRESS_BR] >= 0 ? q[COMPRESS_BR] : star > 0 ? star : 0;
	*gzip = q[COMPRESS_GZIP] >= 0 ? q[COMPRESS_GZIP] : star > 0 ? star : 0;
}

static void test_accept_encoding_q_values(void)
{
	static const struct {
		const char *v;
		int br, gzip;
	} cases[] = {
	    {"gzip", 0, 1000},
	    {"gzip, deflate, br", 1000, 1000},
	    {"br;q=0.5, gzip;q=0.25", 500, 250},
	    {" BR ; Q = 1.0 ,GZip;q=0.001", 1000, 1},
	    {"*", 1000, 1000},
	    {"*;q=0.2, gzip;q=0", 200, 0},
	    {"x-gzip", 0, 1000},
	    {"gzip;q=1.5", 0, 0},          /* out of range: not taken */
	    {"gzip;q=0.1234", 0, 0},       /* four decimals: not taken */
	    {"gzip;level=9", 0, 0},        /* a parameter we do not read */
	    {"identity, deflate", 0, 0},
	    {"", 0, 0},
	    {",,, ,", 0, 0},
	    {"gzipx, xbr", 0, 0},
	    {"br;q=0", 0, 0},
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int br, gzip;

		q_of(cases[i].v, &br, &gzip);
		if (br != cases[i].br || gzip != cases[i].gzip)
			fprintf(stderr, "\n\"%s\": br %d gzip %d\n", cases[i].v, br, gzip);
		CU_ASSERT_EQUAL(br, cases[i].br);
		CU_ASSERT_EQUAL(gzip, cases[i].gzip);
	}
}

static const struct unit_test tests[] = {
	{"blocks are aligned, apart, and the pool is whole after frees",
	 test_blocks_are_aligned_apart_and_the_pool_is_whole_after_frees},
	{"an allocation past what is free fails and frees make room",
	 test_an_allocation_past_what_is_free_fails_and_frees_make_room},
	{"churn like brotli's never leaks the region", test_churn_like_brotlis_never_leaks_the_region},
	{"Accept-Encoding q-values", test_accept_encoding_q_values},
};

UNIT_MAIN("worker/compress", tests)
