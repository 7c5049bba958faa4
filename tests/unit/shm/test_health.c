/*
 * test_health.c: shm/health: the health word's fields, the pick's check,
 * and a reclaimed server key starting unchecked with no checks counted.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm/shm.h"
#include "tests/unit/unit.h"

static void test_the_word_keeps_each_field_apart(void)
{
	uint32_t w = HEALTH_WORD(HEALTH_DOWN, HEALTH_RESULT_STATUS, 255, 599);

	CU_ASSERT_EQUAL(HEALTH_STATE(w), HEALTH_DOWN);
	CU_ASSERT_EQUAL(HEALTH_RESULT(w), HEALTH_RESULT_STATUS);
	CU_ASSERT_EQUAL(HEALTH_RUN(w), 255);
	CU_ASSERT_EQUAL(HEALTH_STATUS(w), 599);
	w = HEALTH_WORD(HEALTH_UP, HEALTH_RESULT_SKIPPED, 0, 0);
	CU_ASSERT_EQUAL(HEALTH_STATE(w), HEALTH_UP);
	CU_ASSERT_EQUAL(HEALTH_RESULT(w), HEALTH_RESULT_SKIPPED);
	CU_ASSERT_EQUAL(HEALTH_RUN(w), 0);
	CU_ASSERT_EQUAL(HEALTH_STATUS(w), 0);
	CU_ASSERT(HEALTH_RESULT_COUNT <= 64); /* six bits */
}

static void test_every_result_has_a_name_and_only_down_is_down(void)
{
	struct shm_health *h = calloc(1, sizeof(*h));

	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	for (int r = 0; r < HEALTH_RESULT_COUNT; r++)
		CU_ASSERT_PTR_NOT_NULL(health_result_names[r]);
	CU_ASSERT_STRING_EQUAL(health_result_names[HEALTH_RESULT_OK], "ok");
	CU_ASSERT_FALSE(health_down(h, 5)); /* unchecked: up */
	atomic_store(&h->word[5], HEALTH_WORD(HEALTH_UP, HEALTH_RESULT_OK, 2, 200));
	CU_ASSERT_FALSE(health_down(h, 5));
	atomic_store(&h->word[5], HEALTH_WORD(HEALTH_DOWN, HEALTH_RESULT_TIMEOUT, 0, 0));
	CU_ASSERT_TRUE(health_down(h, 5));
	CU_ASSERT_FALSE(health_down(h, 6));
	free(h);
}

static void test_a_reclaimed_server_key_forgets_its_health(void)
{
	int fd;
	struct shm_segment *s = shm_create(&fd);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	atomic_store(&s->health.word[9], HEALTH_WORD(HEALTH_DOWN, HEALTH_RESULT_REFUSED, 0, 0));
	atomic_store(&s->health.checks[9][HEALTH_RESULT_REFUSED], 4);
	atomic_store(&s->health.word[10], HEALTH_WORD(HEALTH_DOWN, HEALTH_RESULT_REFUSED, 0, 0));
	shm_key_zero_server(s, 9);
	CU_ASSERT_EQUAL(atomic_load(&s->health.word[9]), 0);
	CU_ASSERT_EQUAL(atomic_load(&s->health.checks[9][HEALTH_RESULT_REFUSED]), 0);
	CU_ASSERT_TRUE(health_down(&s->health, 10)); /* the others keep theirs */
	munmap(s, sizeof(*s));
	close(fd);
}

static const struct unit_test tests[] = {
    {"the word keeps each field apart", test_the_word_keeps_each_field_apart},
    {"every result has a name and only down is down", test_every_result_has_a_name_and_only_down_is_down},
    {"a reclaimed server key forgets its health", test_a_reclaimed_server_key_forgets_its_health},
};

UNIT_MAIN("shm/health", tests)
