/*
 * test_slab.c: common/slab: reuse of freed objects, the byte limit, the
 * per-class accounting the stats socket reports (in use, held, high-water,
 * unusable), giving idle chunks back, and the guard pages of the ASan
 * build.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

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
	CU_ASSERT_EQUAL(s.mapped, s.classes[c].held);
	CU_ASSERT_EQUAL(s.mapped, s.classes[c].total * 64 + slab_class_unusable(&s, c));
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


/* 1000 objects of 4000 bytes: 65 to a chunk, so 16 chunks */
#define N_SURGE 1000

static void test_class_accounting(void)
{
	static void *p[N_SURGE];
	struct slab s;
	struct slab_class *c;
	int k;

	slab_init(&s, 0);
	k = slab_add_class(&s, 4000);
	c = &s.classes[k];
	for (int i = 0; i < N_SURGE; i++)
		p[i] = slab_alloc(&s, k);
	CU_ASSERT_EQUAL(c->in_use, N_SURGE);
	CU_ASSERT_EQUAL(c->total, 16 * c->per_chunk);
	CU_ASSERT_EQUAL(c->held, s.mapped);
	CU_ASSERT_EQUAL(c->high_water, c->held);
	/* per chunk: the header and the 256 KiB tail too small for an object */
	CU_ASSERT_EQUAL(slab_class_unusable(&s, k), c->held - c->total * 4000);
	CU_ASSERT(slab_class_unusable(&s, k) < 16 * 4000);
	CU_ASSERT(c->held >= 16 * 65 * 4000 && c->held <= 16 * 256 * 1024);
	for (int i = 0; i < N_SURGE; i++)
		slab_free(&s, k, p[i]);
	CU_ASSERT_EQUAL(c->in_use, 0);
	CU_ASSERT_EQUAL(s.in_use_bytes, 0);
	CU_ASSERT_EQUAL(c->high_water, c->held); /* nothing given back yet */
}

static void test_idle_chunks_are_given_back(void)
{
	static void *p[N_SURGE];
	struct slab s;
	struct slab_class *c;
	size_t held, one_chunk;
	void *keep;
	int k;

	slab_init(&s, 0);
	k = slab_add_class(&s, 4000);
	c = &s.classes[k];
	slab_release_idle(&s, 1000, 30000);
	keep = slab_alloc(&s, k); /* the baseline: one object in use */
	one_chunk = c->held;
	for (int i = 0; i < N_SURGE; i++)
		p[i] = slab_alloc(&s, k);
	held = c->held;
	for (int i = 0; i < N_SURGE; i++)
		slab_free(&s, k, p[i]);
	/* wholly free since t=1000: kept until 30 s have passed */
	CU_ASSERT_EQUAL(slab_release_idle(&s, 2000, 30000), 0);
	CU_ASSERT_EQUAL(slab_release_idle(&s, 30999, 30000), 0);
	CU_ASSERT_EQUAL(c->held, held);
	/* idle 0: never given back */
	CU_ASSERT_EQUAL(slab_release_idle(&s, 31000, 0), 0);
	CU_ASSERT_EQUAL(slab_release_idle(&s, 31000, 30000), held - one_chunk);
	/* the chunk with an object in use stays, and so does the mark */
	CU_ASSERT_EQUAL(c->held, one_chunk);
	CU_ASSERT_EQUAL(s.mapped, one_chunk);
	CU_ASSERT_EQUAL(c->total, c->per_chunk);
	CU_ASSERT_EQUAL(c->high_water, held);
	CU_ASSERT_EQUAL(c->released, 15);
	/* and the class grows again */
	for (int i = 0; i < N_SURGE; i++) {
		p[i] = slab_alloc(&s, k);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
		memset(p[i], 7, 4000);
	}
	CU_ASSERT_EQUAL(c->held, held);
	for (int i = 0; i < N_SURGE; i++)
		slab_free(&s, k, p[i]);
	slab_free(&s, k, keep);
	CU_ASSERT_EQUAL(slab_release_idle(&s, 40000, 30000), 0);
	CU_ASSERT_EQUAL(slab_release_idle(&s, 70000, 30000), held);
	CU_ASSERT_EQUAL(s.mapped, 0);
}

static void test_chunks_in_use_are_filled_before_free_ones(void)
{
	static void *b[1000];
	struct slab s;
	void *a, *x;
	size_t per;
	int k, n;

	slab_init(&s, 0);
	k = slab_add_class(&s, 1000);
	per = s.classes[k].per_chunk; /* 261: more than the class's array holds */
	CU_ASSERT_FATAL(per > SLAB_CACHED + 10 && 2 * per + 10 < 1000);
	n = (int)(2 * per + 10);
	a = slab_alloc(&s, k);
	for (int i = 0; i < n; i++)
		b[i] = slab_alloc(&s, k); /* three chunks, the last one partly */
	for (int i = (int)per - 1; i < n; i++)
		slab_free(&s, k, b[i]);
	/* the objects kept at hand go back to their chunks; the second and
	 * third are then wholly free (stamped at 0: not idle yet) */
	CU_ASSERT_EQUAL(slab_release_idle(&s, 0, 1000), 0);
	/* the class's array full of the first chunk's objects, one more of
	 * them goes back to its chunk */
	for (int i = 0; i < SLAB_CACHED; i++)
		slab_free(&s, k, b[i]);
	slab_free(&s, k, b[SLAB_CACHED + 10]);
	/* the last freed come first, then the first chunk's gap, not a
	 * wholly free chunk */
	for (int i = SLAB_CACHED - 1; i >= 0; i--)
		CU_ASSERT_PTR_EQUAL(slab_alloc(&s, k), b[i]);
	x = slab_alloc(&s, k);
	CU_ASSERT_PTR_EQUAL(x, b[SLAB_CACHED + 10]);
	slab_release_idle(&s, 100000, 1000); /* stamped at 0: both free chunks go */
	CU_ASSERT_EQUAL(s.classes[k].total, per);
	CU_ASSERT_EQUAL(s.classes[k].in_use, per);
	(void)a;
}

/* An alloc and a free that meet the class's array touch no chunk: the
 * objects there count as free, and a chunk that only they kept from being
 * wholly free is given back once the idle time has passed. */
static void test_freed_objects_kept_at_hand(void)
{
	struct slab s;
	void *p[SLAB_CACHED + 1];
	int k;

	slab_init(&s, 0);
	k = slab_add_class(&s, 100000); /* two to a chunk: a chunk per pair */
	for (int i = 0; i <= SLAB_CACHED; i++)
		p[i] = slab_alloc(&s, k);
	CU_ASSERT_EQUAL(s.classes[k].in_use, SLAB_CACHED + 1);
	for (int i = 0; i <= SLAB_CACHED; i++)
		slab_free(&s, k, p[i]);
	CU_ASSERT_EQUAL(s.classes[k].in_use, 0);
	CU_ASSERT_EQUAL(s.in_use_bytes, 0);
	CU_ASSERT_EQUAL(s.classes[k].ncached, SLAB_CACHED);
	/* the last one into the array is the first out */
	CU_ASSERT_PTR_EQUAL(slab_alloc(&s, k), p[SLAB_CACHED - 1]);
	slab_free(&s, k, p[SLAB_CACHED - 1]);
	/* every chunk is wholly free once the array is emptied, and goes */
	CU_ASSERT_EQUAL(slab_release_idle(&s, 0, 1000), 0);
	CU_ASSERT_EQUAL(s.classes[k].ncached, 0);
	CU_ASSERT(slab_release_idle(&s, 5000, 1000) > 0);
	CU_ASSERT_EQUAL(s.mapped, 0);
	CU_ASSERT_EQUAL(s.classes[k].total, 0);
}

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_GUARDS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_GUARDS 1
#endif
#endif

/*
 * In the ASan build the page before a chunk and the page after its last
 * object are mapped (msync finds them) but a write there faults (in a
 * child). Without guards they would be whatever the kernel put there.
 */
static void test_guard_pages_in_the_asan_build(void)
{
#ifdef HAVE_GUARDS
	struct slab s;
	char *p = NULL, *chunk, *guard[2];
	long pg = sysconf(_SC_PAGESIZE);
	int k;

	slab_init(&s, 0);
	k = slab_add_class(&s, 4096); /* 63 fill a chunk to its last page */
	for (size_t i = 0; i < s.classes[k].per_chunk; i++)
		p = slab_alloc(&s, k);
	chunk = (char *)((uintptr_t)p & ~(uintptr_t)(256 * 1024 - 1));
	guard[0] = chunk - pg;
	guard[1] = chunk + 256 * 1024;
	CU_ASSERT(p + 4096 <= guard[1]);
	for (int side = 0; side < 2; side++) {
		pid_t pid;
		int st;

		CU_ASSERT_EQUAL(msync(guard[side], (size_t)pg, MS_ASYNC), 0);
		pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			dup2(open("/dev/null", O_WRONLY), 2); /* the sanitizer's report of the fault */
			*(volatile char *)guard[side] = 1;
			_exit(0);
		}
		CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
		CU_ASSERT(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0));
	}
#endif
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
	{"a class reports in use, held, its high-water mark and unusable bytes", test_class_accounting},
	{"chunks wholly free for the idle time are given back, and the class grows again",
	 test_idle_chunks_are_given_back},
	{"chunks in use are filled before wholly free ones", test_chunks_in_use_are_filled_before_free_ones},
	{"the last objects freed are kept at hand, count as free, and their chunks still go back",
	 test_freed_objects_kept_at_hand},
	{"in the ASan build a write off either end of a chunk faults", test_guard_pages_in_the_asan_build},
};

UNIT_MAIN("common/slab", tests)
