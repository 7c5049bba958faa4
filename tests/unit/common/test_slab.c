/*
 * test_slab.c: common/slab: reuse of freed objects, the byte limit, and the
 * in-use accounting the stats socket reports.
 */
#include <stdint.h>
#include <string.h>

#include "common/slab.h"
#include "tests/unit/unit.h"

static void test_reuse(void)
{
	struct slab s;
	int c;
	void *p, *q;

	slab_init(&s, 0);
	c = slab_add_class(&s, 64);
	CU_ASSERT_EQUAL_FATAL(c, 0);
	p = slab_alloc(&s, c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	slab_free(&s, c, p);
	q = slab_alloc(&s, c);
	CU_ASSERT_PTR_EQUAL(q, p);
	slab_free(&s, c, q);
}

static void test_distinct_aligned(void)
{
	struct slab s;
	void *p[200];
	int c;

	slab_init(&s, 0);
	c = slab_add_class(&s, 4000); /* 64 to a chunk: 200 takes four chunks */
	for (int i = 0; i < 200; i++) {
		p[i] = slab_alloc(&s, c);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
		CU_ASSERT_EQUAL((uintptr_t)p[i] % 16, 0);
		memset(p[i], i & 0xff, 4000);
	}
	for (int i = 0; i < 200; i++) {
		CU_ASSERT_EQUAL(((unsigned char *)p[i])[0], i & 0xff);
		CU_ASSERT_EQUAL(((unsigned char *)p[i])[3999], i & 0xff);
		for (int j = 0; j < i; j++)
			CU_ASSERT_PTR_NOT_EQUAL(p[i], p[j]);
	}
	CU_ASSERT(s.classes[c].total >= 200);
	for (int i = 0; i < 200; i++)
		slab_free(&s, c, p[i]);
	CU_ASSERT_EQUAL(s.classes[c].in_use, 0);
}

static void test_rounding(void)
{
	struct slab s;

	slab_init(&s, 0);
	CU_ASSERT_EQUAL(s.classes[slab_add_class(&s, 1)].size, 16);
	CU_ASSERT_EQUAL(s.classes[slab_add_class(&s, 16)].size, 16);
	CU_ASSERT_EQUAL(s.classes[slab_add_class(&s, 17)].size, 32);
}

static void test_class_table(void)
{
	struct slab s;

	slab_init(&s, 0);
	CU_ASSERT_EQUAL(slab_add_class(&s, 0), -1);
	for (int i = 0; i < SLAB_MAX_CLASSES; i++)
		CU_ASSERT_EQUAL(slab_add_class(&s, (size_t)(i + 1) * 32), i);
	CU_ASSERT_EQUAL(slab_add_class(&s, 32), -1);
	CU_ASSERT_EQUAL(s.nclasses, SLAB_MAX_CLASSES);
}

static void test_limit(void)
{
	struct slab s;
	void *p[4], *q;
	int c;

	slab_init(&s, 4096);
	c = slab_add_class(&s, 1000); /* 1008 bytes: four fit in 4096 */
	for (int i = 0; i < 4; i++) {
		p[i] = slab_alloc(&s, c);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
	}
	CU_ASSERT_PTR_NULL(slab_alloc(&s, c));
	CU_ASSERT(s.mapped <= 4096);
	CU_ASSERT_EQUAL(s.classes[c].in_use, 4);

	/* giving one back makes room for exactly one */
	slab_free(&s, c, p[2]);
	q = slab_alloc(&s, c);
	CU_ASSERT_PTR_EQUAL(q, p[2]);
	CU_ASSERT_PTR_NULL(slab_alloc(&s, c));
}

static void test_limit_shared_by_classes(void)
{
	struct slab s;
	int a, b;
	void *p;

	slab_init(&s, 2048);
	a = slab_add_class(&s, 1024);
	b = slab_add_class(&s, 2048);
	p = slab_alloc(&s, a);
	CU_ASSERT_PTR_NOT_NULL(p);
	/* class a took the whole limit in one chunk (two objects) */
	CU_ASSERT_PTR_NULL(slab_alloc(&s, b));
	CU_ASSERT(s.mapped <= 2048);
}

static void test_in_use_accounting(void)
{
	struct slab s;
	void *p[3];
	int a, b;

	slab_init(&s, 0);
	a = slab_add_class(&s, 100); /* 112 */
	b = slab_add_class(&s, 1000); /* 1008 */
	CU_ASSERT_EQUAL(s.in_use_bytes, 0);
	p[0] = slab_alloc(&s, a);
	p[1] = slab_alloc(&s, a);
	p[2] = slab_alloc(&s, b);
	CU_ASSERT_EQUAL(s.classes[a].in_use, 2);
	CU_ASSERT_EQUAL(s.classes[b].in_use, 1);
	CU_ASSERT_EQUAL(s.in_use_bytes, 2 * 112 + 1008);
	slab_free(&s, a, p[0]);
	CU_ASSERT_EQUAL(s.classes[a].in_use, 1);
	CU_ASSERT_EQUAL(s.in_use_bytes, 112 + 1008);
	slab_free(&s, a, p[1]);
	slab_free(&s, b, p[2]);
	CU_ASSERT_EQUAL(s.in_use_bytes, 0);
	CU_ASSERT_EQUAL(s.classes[a].in_use, 0);
}

static void test_free_bytes(void)
{
	struct slab s;
	void *p;
	int c;

	slab_init(&s, 0);
	c = slab_add_class(&s, 64);
	CU_ASSERT_EQUAL(slab_free_bytes(&s), 0);
	p = slab_alloc(&s, c);
	CU_ASSERT(s.mapped > 0);
	CU_ASSERT_EQUAL(s.mapped, s.classes[c].total * 64);
	CU_ASSERT_EQUAL(slab_free_bytes(&s), s.mapped - 64);
	slab_free(&s, c, p);
	CU_ASSERT_EQUAL(slab_free_bytes(&s), s.mapped);
}

static void test_big_objects(void)
{
	struct slab s;
	void *p, *q;
	int c;

	slab_init(&s, 0);
	c = slab_add_class(&s, 300000); /* larger than a chunk */
	CU_ASSERT_EQUAL(s.classes[c].per_chunk, 1);
	p = slab_alloc(&s, c);
	q = slab_alloc(&s, c);
	CU_ASSERT_PTR_NOT_NULL(p);
	CU_ASSERT_PTR_NOT_NULL(q);
	CU_ASSERT_PTR_NOT_EQUAL(p, q);
	CU_ASSERT_EQUAL(s.classes[c].total, 2);
	memset(p, 1, 300000);
	memset(q, 2, 300000);
	CU_ASSERT_EQUAL(((unsigned char *)p)[299999], 1);
}

static const struct unit_test tests[] = {
	{"a freed object is handed out again by the next allocation", test_reuse},
	{"objects of one class are distinct, 16-byte aligned and fully usable", test_distinct_aligned},
	{"object sizes are rounded up to 16 bytes", test_rounding},
	{"the class table refuses size 0 and a class past SLAB_MAX_CLASSES", test_class_table},
	{"allocation past the byte limit returns NULL until an object is freed", test_limit},
	{"the byte limit is shared by all classes", test_limit_shared_by_classes},
	{"in_use counts the objects and bytes handed out and not yet freed", test_in_use_accounting},
	{"slab_free_bytes is what is mapped but not handed out", test_free_bytes},
	{"a class larger than a chunk grows one object at a time", test_big_objects},
};

UNIT_MAIN("common/slab", tests)
