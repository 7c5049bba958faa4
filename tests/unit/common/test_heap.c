/*
 * test_heap.c: common/heap: a heap without flags (libnghttp2's) hands out
 * zeroed blocks from calloc, keeps a block's bytes through realloc (in
 * place within its class, moved past it), counts what it holds, and does
 * not wipe a freed block (only HEAP_WIPE heaps do: test_secmem.c).
 */
#include <stdint.h>
#include <string.h>

#include "common/heap.h"
#include "tests/unit/unit.h"

static void test_calloc_zeroes_and_refuses_overflow(void)
{
	struct heap h = HEAP_INIT(0);
	unsigned char *p = heap_alloc(&h, 200);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	memset(p, 0xab, 200);
	heap_free(&h, p);
	p = heap_calloc(&h, 10, 20); /* the same class: the block just freed */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (int i = 0; i < 200; i++)
		CU_ASSERT_EQUAL(p[i], 0);
	CU_ASSERT_EQUAL(heap_size(p), 200);
	heap_free(&h, p);
	CU_ASSERT_PTR_NULL(heap_calloc(&h, SIZE_MAX / 8, 16));
	CU_ASSERT_EQUAL(h.st.in_use, 0);
	CU_ASSERT_EQUAL(h.st.blocks, 0);
}

static void test_realloc_keeps_bytes(void)
{
	struct heap h = HEAP_INIT(0);
	char *p = heap_realloc(&h, NULL, 40), *q;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	memcpy(p, "0123456789012345678901234567890123456789", 40);
	q = heap_realloc(&h, p, 48); /* 48 + 16 fits the 64-byte class: in place */
	CU_ASSERT_PTR_EQUAL(q, p);
	CU_ASSERT_EQUAL(heap_size(q), 48);
	CU_ASSERT_EQUAL(h.st.in_use, 48);
	q = heap_realloc(&h, p, 5000); /* moved */
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT(memcmp(q, "0123456789012345678901234567890123456789", 40) == 0);
	CU_ASSERT_EQUAL(h.st.in_use, 5000);
	CU_ASSERT_EQUAL(h.st.blocks, 1);
	p = heap_realloc(&h, q, 100000); /* past the classes: a mapping */
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(memcmp(p, "0123456789012345678901234567890123456789", 40) == 0);
	q = heap_realloc(&h, p, 10); /* a big block shrinks by moving */
	CU_ASSERT(memcmp(q, "0123456789", 10) == 0);
	heap_free(&h, q);
	CU_ASSERT_EQUAL(h.st.in_use, 0);
	CU_ASSERT_EQUAL(h.st.blocks, 0);
}

static void test_no_wipe_without_the_flag(void)
{
	struct heap h = HEAP_INIT(0);
	char *p = heap_alloc(&h, 64), *q;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	memset(p, 'k', 64);
	heap_free(&h, p);
	q = heap_alloc(&h, 64);
	CU_ASSERT_PTR_EQUAL(q, p);
	/* the first 8 bytes carried the free-list link */
#if !defined(__SANITIZE_ADDRESS__)
	CU_ASSERT_EQUAL(q[20], 'k');
#endif
	heap_free(&h, q);
}

static const struct unit_test tests[] = {
	{"calloc gives zeroed blocks and refuses a size that overflows", test_calloc_zeroes_and_refuses_overflow},
	{"realloc keeps the bytes: in place within the class, moved past it, and for big blocks",
	 test_realloc_keeps_bytes},
	{"a heap without HEAP_WIPE does not wipe a freed block", test_no_wipe_without_the_flag},
};

UNIT_MAIN("common/heap", tests)
