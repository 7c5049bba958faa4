/*
 * test_shm.c: shm/shm: the segment's header, per-slot counters summed by the
 * master, a dead worker's counters folded so totals never go backwards, and
 * slot claiming.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "shm/shm.h"
#include "tests/unit/unit.h"

static void test_create_and_attach(void)
{
	int fd;
	const char *why = NULL;
	struct shm_segment *a = shm_create(&fd), *b;

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_EQUAL(a->magic, SHM_MAGIC);
	CU_ASSERT_EQUAL(a->version, SHM_LAYOUT_VERSION);
	b = shm_attach(fd, &why);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	/* two mappings of one segment: a write through one shows in the other */
	SHM_ADD(&a->slots[3].c, requests, 7);
	CU_ASSERT_EQUAL(b->slots[3].c.requests, 7);
	munmap(b, sizeof(*b));
	munmap(a, sizeof(*a));
	close(fd);
}

static void test_attach_refuses_a_foreign_layout(void)
{
	int fd;
	const char *why = NULL;
	struct shm_segment *a = shm_create(&fd);

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	a->version = SHM_LAYOUT_VERSION + 1;
	CU_ASSERT_PTR_NULL(shm_attach(fd, &why));
	CU_ASSERT_PTR_NOT_NULL(why);
	a->version = SHM_LAYOUT_VERSION;
	a->magic = 0;
	CU_ASSERT_PTR_NULL(shm_attach(fd, &why));
	munmap(a, sizeof(*a));
	close(fd);
}

static void test_sum_covers_every_slot_and_retired(void)
{
	int fd;
	struct shm_segment *s = shm_create(&fd);
	struct shm_counters sum;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	SHM_ADD(&s->slots[0].c, requests, 5);
	SHM_ADD(&s->slots[SHM_SLOTS - 1].c, requests, 6);
	SHM_ADD(&s->slots[1].c, responses[2], 4);
	SHM_ADD(&s->slots[1].c, errors[weir_err_index(WEIR_ERR(NO_ROUTE))], 2);
	s->retired.requests = 100;
	shm_sum(s, &sum);
	CU_ASSERT_EQUAL(sum.requests, 111);
	CU_ASSERT_EQUAL(sum.responses[2], 4);
	CU_ASSERT_EQUAL(sum.errors[weir_err_index(WEIR_ERR(NO_ROUTE))], 2);
	munmap(s, sizeof(*s));
	close(fd);
}

static void test_retire_keeps_counters_and_drops_gauges(void)
{
	int fd;
	struct shm_segment *s = shm_create(&fd);
	struct shm_counters before, after;
	int slot;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	slot = shm_slot_claim(s);
	CU_ASSERT_EQUAL_FATAL(slot, 0);
	atomic_store(&s->slots[slot].pid, 1234);
	SHM_ADD(&s->slots[slot].c, requests, 10);
	SHM_ADD(&s->slots[slot].c, bytes_out, 999);
	SHM_SET(&s->slots[slot].c, conn_active, 3);
	shm_sum(s, &before);
	shm_slot_retire(s, slot);
	shm_sum(s, &after);
	CU_ASSERT_EQUAL(after.requests, before.requests);
	CU_ASSERT_EQUAL(after.bytes_out, before.bytes_out);
	CU_ASSERT_EQUAL(after.conn_active, 0); /* a dead worker holds no connection */
	CU_ASSERT_EQUAL(s->slots[slot].c.requests, 0);
	CU_ASSERT_EQUAL(atomic_load(&s->slots[slot].pid), 0);
	CU_ASSERT_EQUAL(atomic_load(&s->slots[slot].state), SHM_SLOT_FREE);
	/* the freed slot is the next one claimed, and starts from zero */
	CU_ASSERT_EQUAL(shm_slot_claim(s), slot);
	CU_ASSERT_EQUAL(s->slots[slot].c.requests, 0);
	munmap(s, sizeof(*s));
	close(fd);
}

static void test_claim_until_full(void)
{
	int fd;
	struct shm_segment *s = shm_create(&fd);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	for (int i = 0; i < SHM_SLOTS; i++)
		CU_ASSERT_EQUAL(shm_slot_claim(s), i);
	CU_ASSERT_EQUAL(shm_slot_claim(s), -1);
	munmap(s, sizeof(*s));
	close(fd);
}

static void test_counter_blocks_do_not_share_cache_lines(void)
{
	CU_ASSERT_EQUAL(sizeof(struct shm_slot) % 64, 0);
	CU_ASSERT_EQUAL(offsetof(struct shm_segment, slots) % 64, 0);
	CU_ASSERT_EQUAL(offsetof(struct shm_slot, gen_seen) % 64, 0);
}

static const struct unit_test tests[] = {
	{"a created segment has the magic and version and attaches from its fd", test_create_and_attach},
	{"attach refuses a segment of another layout version or magic", test_attach_refuses_a_foreign_layout},
	{"the sum covers every slot and the retired block", test_sum_covers_every_slot_and_retired},
	{"retiring a slot folds its counters, drops its gauges and frees it", test_retire_keeps_counters_and_drops_gauges},
	{"slots are claimed in order until none is left", test_claim_until_full},
	{"each worker's counter block has cache lines of its own", test_counter_blocks_do_not_share_cache_lines},
};

UNIT_MAIN("shm/shm", tests)
