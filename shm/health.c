/*
 * health.c: names and reset of the health words (shm/health.h).
 */
#include "shm/health.h"

const char *const health_result_names[HEALTH_RESULT_COUNT] = {
#define HEALTH_RESULT_NAME(name, label) label,
    HEALTH_RESULT_TABLE(HEALTH_RESULT_NAME)
#undef HEALTH_RESULT_NAME
};

const char *const health_state_names[3] = {"unchecked", "up", "down"};

void health_key_zero(struct shm_health *h, uint16_t i)
{
	atomic_store_explicit(&h->word[i], 0, memory_order_relaxed);
	for (int r = 0; r < HEALTH_RESULT_COUNT; r++)
		atomic_store_explicit(&h->checks[i][r], 0, memory_order_relaxed);
}
