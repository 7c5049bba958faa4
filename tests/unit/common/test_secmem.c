/*
 * test_secmem.c: common/secmem: BoringSSL really allocates here, blocks
 * are usable, aligned, reused and wiped, big blocks get mappings of their
 * own, and every byte handed out is in memory marked MADV_DONTDUMP.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/mem.h>
#include <openssl/rsa.h>

#include "common/secmem.h"
#include "tests/unit/unit.h"

/* Whether the mapping holding <p> carries VmFlags "dd" in /proc/self/smaps. */
static int dontdump(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, dd = -1;
	uintptr_t a = (uintptr_t)p;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			dd = strstr(line, " dd") != NULL;
			break;
		}
	}
	fclose(f);
	return dd;
}

static void test_boringssl_uses_it(void)
{
	struct secmem_stats before, after;
	void *p;
	RSA *rsa;

	secmem_get_stats(&before);
	p = OPENSSL_malloc(100);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(secmem_size(p), 100);
	secmem_get_stats(&after);
	CU_ASSERT_EQUAL(after.in_use, before.in_use + 100);
	CU_ASSERT_EQUAL(after.blocks, before.blocks + 1);
	p = OPENSSL_realloc(p, 5000);
	CU_ASSERT_EQUAL(secmem_size(p), 5000);
	OPENSSL_free(p);
	secmem_get_stats(&after);
	CU_ASSERT_EQUAL(after.in_use, before.in_use);

	/* a whole key object, BIGNUMs and all */
	rsa = RSA_new();
	CU_ASSERT_PTR_NOT_NULL_FATAL(rsa);
	secmem_get_stats(&after);
	CU_ASSERT(after.blocks > before.blocks);
	CU_ASSERT_EQUAL(dontdump(rsa), 1);
	RSA_free(rsa);
	secmem_get_stats(&after);
	CU_ASSERT_EQUAL(after.blocks, before.blocks);
}

static void test_sizes_alignment(void)
{
	static const size_t sizes[] = {0, 1, 15, 16, 17, 100, 4080, 4096, 16384, 17000, 65520, 65521, 300000};
	void *p[sizeof(sizes) / sizeof(sizes[0])];
	size_t n = sizeof(sizes) / sizeof(sizes[0]);

	for (size_t i = 0; i < n; i++) {
		p[i] = secmem_alloc(sizes[i]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
		CU_ASSERT_EQUAL((uintptr_t)p[i] % 16, 0);
		CU_ASSERT_EQUAL(secmem_size(p[i]), sizes[i]);
		memset(p[i], (int)i + 1, sizes[i]);
		CU_ASSERT_EQUAL(dontdump(p[i]), 1);
	}
	for (size_t i = 0; i < n; i++) {
		if (sizes[i]) {
			CU_ASSERT_EQUAL(((unsigned char *)p[i])[0], i + 1);
			CU_ASSERT_EQUAL(((unsigned char *)p[i])[sizes[i] - 1], i + 1);
		}
		for (size_t j = 0; j < i; j++)
			CU_ASSERT_PTR_NOT_EQUAL(p[i], p[j]);
	}
	for (size_t i = 0; i < n; i++)
		secmem_free(p[i]);
}

static void test_reuse_and_wipe(void)
{
	unsigned char *p = secmem_alloc(200), *q;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	memset(p, 0xa5, 200);
	secmem_free(p);
	/* the same class hands the block straight back; past the free-list
	 * link it holds zeros, not the secret */
	q = secmem_alloc(190);
	CU_ASSERT_PTR_EQUAL(q, p);
	for (size_t i = sizeof(void *); i < 190; i++)
		if (q[i] != 0) {
			CU_FAIL("freed block not wiped");
			break;
		}
	secmem_free(q);
}

static void test_big_blocks_unmapped(void)
{
	struct secmem_stats a, b, c;
	void *p;

	secmem_get_stats(&a);
	p = secmem_alloc(1 << 20);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	secmem_get_stats(&b);
	CU_ASSERT(b.held >= a.held + (1 << 20));
	memset(p, 7, 1 << 20);
	secmem_free(p);
	secmem_get_stats(&c);
	CU_ASSERT_EQUAL(c.held, a.held);
	CU_ASSERT_EQUAL(c.in_use, a.in_use);
}

static void test_many_blocks(void)
{
	static void *p[20000];
	struct secmem_stats a, b;

	secmem_get_stats(&a);
	/* well past one chunk per class, and past one region in total */
	for (size_t i = 0; i < 20000; i++) {
		p[i] = secmem_alloc(i % 7 == 0 ? 20000 : 48 + i % 500);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
		*(size_t *)p[i] = i;
	}
	for (size_t i = 0; i < 20000; i++)
		CU_ASSERT_EQUAL(*(size_t *)p[i], i);
	for (size_t i = 0; i < 20000; i++)
		secmem_free(p[i]);
	secmem_get_stats(&b);
	CU_ASSERT_EQUAL(b.in_use, a.in_use);
	CU_ASSERT_EQUAL(b.blocks, a.blocks);
	CU_ASSERT(b.held > (size_t)64 << 20);
}

static const struct unit_test tests[] = {
	{"OPENSSL_malloc, realloc and free, and BoringSSL's own objects, come from secmem",
	 test_boringssl_uses_it},
	{"blocks of every size are 16-byte aligned, distinct, usable and in MADV_DONTDUMP memory",
	 test_sizes_alignment},
	{"a freed block is wiped and handed out again by its class", test_reuse_and_wipe},
	{"a block past the largest class is mapped alone and unmapped on free", test_big_blocks_unmapped},
	{"20000 blocks over several regions keep their contents and are all given back", test_many_blocks},
};

UNIT_MAIN("common/secmem", tests)
