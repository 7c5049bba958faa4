#include "shm/resil.h"

#include <string.h>

#include "common/log.h"
#include "shm/route_types.h"

const char *const breaker_state_names[3] = {"closed", "open", "half_open"};

const char *const retry_result_names[RETRY_RESULT_COUNT] = {
#define RETRY_RESULT_NAME(name, label) label,
    RETRY_RESULT_TABLE(RETRY_RESULT_NAME)
#undef RETRY_RESULT_NAME
};

const char *const breaker_trip_names[BREAKER_TRIP_COUNT] = {
#define BREAKER_TRIP_NAME(name, label) label,
    BREAKER_TRIP_TABLE(BREAKER_TRIP_NAME)
#undef BREAKER_TRIP_NAME
};

const char *const resil_eject_names[RESIL_EJECT_COUNT] = {
#define RESIL_EJECT_NAME(name, label) label,
    RESIL_EJECT_TABLE(RESIL_EJECT_NAME)
#undef RESIL_EJECT_NAME
};

uint32_t resil_uneject(struct shm_resil_server *r, int all)
{
	uint32_t was = atomic_exchange(&r->ejected, 0);

	atomic_store(&r->ejected_until, 0);
	if (was)
		atomic_store(&r->returned_at, resil_now_ms());
	if (all) {
		atomic_store(&r->ejections, 0);
		atomic_store(&r->run_5xx, 0);
		atomic_store(&r->run_gateway, 0);
		atomic_store(&r->window, 0);
	}
	return was;
}

void resil_assign_groups(struct shm_resil_groups *gs, struct route_table *t)
{
	for (uint32_t i = 0; i < t->nupstreams; i++) {
		/* the master's own block, not yet visible: writable */
		struct route_upstream *up = (struct route_upstream *)&route_upstreams(t)[i];
		uint32_t n = atomic_load_explicit(&gs->n, memory_order_acquire), k;

		up->resil_group = RESIL_GROUP_NONE;
		if (!up->resil.limits.on && !up->resil.breaker.on && !up->resil.retry.on && !up->resil.adaptive.on)
			continue;
		for (k = 0; k < n && strcmp(gs->names[k], up->name) != 0; k++)
			;
		if (k == n) {
			if (n == RESIL_GROUPS) {
				log_error(
				    "upstream %s: no room for its limits and breaker state (%d group names have had "
				    "one since start); they are off until a restart",
				    up->name, RESIL_GROUPS);
				continue;
			}
			memset(gs->names[n], 0, sizeof(gs->names[n]));
			memcpy(gs->names[n], up->name, strnlen(up->name, RESIL_NAME_MAX - 1));
			atomic_store_explicit(&gs->n, n + 1, memory_order_release);
		}
		up->resil_group = (uint16_t)k;
	}
}

void resil_group_reset(struct shm_resil_group *g)
{
	atomic_store(&g->state, BREAKER_WORD(0, BREAKER_CLOSED));
	atomic_store(&g->opens, 0);
	for (int b = 0; b < BREAKER_BUCKETS; b++) {
		atomic_store(&g->bucket[b], 0);
		atomic_store(&g->bucket_sec[b], 0);
	}
}
