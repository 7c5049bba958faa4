#include "shm/resil.h"

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
