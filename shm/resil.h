/*
 * resil.h: node-wide state of the traffic controls (outlier ejection), in
 * the shared segment, one entry per server stat index.
 *
 * Principle: every worker of a node sees one count per server, so five
 * 5xx in a row are five whichever workers served them, and an ejection
 * holds in every worker at once. The entry is indexed by the server's stat
 * index (stat.h), which stays with (group, address) across reloads and is
 * handed over with the segment on a binary upgrade: ejections and counts
 * survive HUP and USR2, and a server that moves in the table keeps them.
 *
 * Costs, all only in a group that has `outlier` configured: per answer,
 * one locked add on the server's hot line for the failure-percentage
 * window (only when that detector is on), one locked add per 5xx or
 * gateway failure, and a plain store of 0 to a run counter only when it
 * is not already 0 (so a healthy server's line stays shared, not
 * bounced); per pick, one relaxed load of ejected_until per server looked
 * at, on the cold line that is written only at ejection and return. An
 * ejection itself (compare-and-swap, a scan of the group) is rare.
 *
 * Times are CLOCK_MONOTONIC milliseconds, one clock for every process.
 */
#ifndef WEIR_SHM_RESIL_H
#define WEIR_SHM_RESIL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* Why a server was ejected: weir_upstream_server_ejections_total{reason}. */
#define RESIL_EJECT_TABLE(X)                                                                                           \
	X(CONSECUTIVE_5XX, "consecutive_5xx")                                                                          \
	X(CONSECUTIVE_GATEWAY, "consecutive_gateway_failures")                                                         \
	X(FAILURE_PERCENTAGE, "failure_percentage")

enum resil_eject {
#define RESIL_EJECT_ENUM(name, label) RESIL_EJECT_##name,
	RESIL_EJECT_TABLE(RESIL_EJECT_ENUM)
#undef RESIL_EJECT_ENUM
	    RESIL_EJECT_COUNT
};

extern const char *const resil_eject_names[RESIL_EJECT_COUNT];

/* One server's state: a hot line written per answer, a cold line written
 * at ejection and return and read per pick. */
struct shm_resil_server {
	/* hot */
	_Alignas(64) _Atomic uint32_t run_5xx; /* 5xx answers in a row */
	_Atomic uint32_t run_gateway;          /* connect failures and timeouts in a row */
	_Atomic uint64_t window;               /* failures << 32 | answers, this interval */
	_Atomic uint64_t window_start;         /* ms: when this interval began */
	/* cold */
	_Alignas(64) _Atomic uint64_t ejected_until;       /* ms; 0 or past: not ejected */
	_Atomic uint64_t returned_at;                      /* ms: the last return (the multiplier decays) */
	_Atomic uint32_t ejections;                        /* ejections in a row: the time multiplier */
	_Atomic uint32_t ejected;                          /* reason + 1 while ejected, until its return is logged */
	_Atomic uint64_t ejected_total[RESIL_EJECT_COUNT]; /* by reason */
	_Atomic uint64_t ejections_refused;                /* not ejected: max_ejection_percent or last usable */
};

/* CLOCK_MONOTONIC_COARSE in ms: a vDSO read, no system call. */
static inline uint64_t resil_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Is the server of <r> ejected at <now> (ms)? One relaxed load. */
static inline int resil_ejected(const struct shm_resil_server *r, uint64_t now)
{
	return atomic_load_explicit((_Atomic uint64_t *)&r->ejected_until, memory_order_relaxed) > now;
}

/* Ends an ejection now (admin uneject). Returns the reason + 1 it had, or
 * 0 if it was not ejected. With <all>, also forgets the multiplier and the
 * runs (admin reset). */
uint32_t resil_uneject(struct shm_resil_server *r, int all);

#endif
