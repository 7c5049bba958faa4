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

#include "common/config_resil.h"

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
	/* limits.max_requests_per_server: requests in flight to it, node-wide,
	 * and picks that passed it by full (only in groups with that cap) */
	_Atomic uint32_t active;
	_Atomic uint64_t full_skips;
	/* cold */
	_Alignas(64) _Atomic uint64_t ejected_until;       /* ms; 0 or past: not ejected */
	_Atomic uint64_t returned_at;                      /* ms: the last return (the multiplier decays) */
	_Atomic uint32_t ejections;                        /* ejections in a row: the time multiplier */
	_Atomic uint32_t ejected;                          /* reason + 1 while ejected, until its return is logged */
	_Atomic uint64_t ejected_total[RESIL_EJECT_COUNT]; /* by reason */
	_Atomic uint64_t ejections_refused;                /* not ejected: max_ejection_percent or last usable */
};

/* ---- per group: limits and the breaker ---------------------------------- */

#define RESIL_GROUPS     512     /* group names with limits or a breaker, over the segment's life */
#define RESIL_GROUP_NONE 0xffffu /* route_upstream.resil_group of a group without (or out of room) */
#define RESIL_NAME_MAX   64

enum breaker_state {
	BREAKER_CLOSED = 0,
	BREAKER_OPEN = 1,
	BREAKER_HALF_OPEN = 2,
};
extern const char *const breaker_state_names[3];

/* What refused a request: weir_upstream_rejected_total{by}. */
enum resil_reject { RESIL_REJECT_BREAKER, RESIL_REJECT_LIMIT, RESIL_REJECT_QUEUE_TIMEOUT, RESIL_REJECT_COUNT };

/* What became of a retry: weir_upstream_retry_results_total{result}. */
#define RETRY_RESULT_TABLE(X)                                                                                          \
	X(ATTEMPTED, "attempted")                                                                                      \
	X(SUCCEEDED, "succeeded")                                                                                      \
	X(BUDGET, "budget_exhausted")                                                                                  \
	X(LIMIT, "limit")                                                                                              \
	X(EXHAUSTED, "attempts_exhausted")                                                                             \
	X(UNSAFE, "not_replayable")                                                                                    \
	X(AFTER, "retry_after")                                                                                        \
	X(AFTER_LONG, "retry_after_too_long")

enum retry_result {
#define RETRY_RESULT_ENUM(name, label) RETRY_RESULT_##name,
	RETRY_RESULT_TABLE(RETRY_RESULT_ENUM)
#undef RETRY_RESULT_ENUM
	    RETRY_RESULT_COUNT
};
extern const char *const retry_result_names[RETRY_RESULT_COUNT];

/* A window bucket: answers, errors and slow answers of one second, in one
 * word so one locked add counts an answer (21 bits each: two million
 * answers a second per group). */
#define BREAKER_ERR_SHIFT       21
#define BREAKER_SLOW_SHIFT      42
#define BREAKER_FIELD(w, shift) (((w) >> (shift)) & ((1ull << 21) - 1))

/* The breaker's word: the time its state ends (ms, for open) and the
 * state, so one compare-and-swap moves both. */
#define BREAKER_WORD(until, state) ((uint64_t)(until) << 2 | (uint64_t)(state))
#define BREAKER_STATE(w)           ((uint32_t)((w)&3u))
#define BREAKER_UNTIL(w)           ((w) >> 2)

struct shm_resil_group {
	/* requests in flight (limits, pool share): written per request */
	_Alignas(64) _Atomic uint64_t active;
	_Atomic uint64_t retries; /* retries in flight */
	_Atomic uint64_t pending; /* requests waiting for a place (limits.max_pending) */
	/* read per request, written on transitions */
	_Alignas(64) _Atomic uint64_t state;                /* BREAKER_WORD */
	_Atomic uint32_t opens;                             /* openings in a row: the open time doubles */
	_Atomic uint32_t trials;                            /* half-open: trials let through */
	_Atomic uint32_t trials_ok;                         /* half-open: trials answered well */
	_Atomic uint32_t reason;                            /* why it last opened: enum breaker_trip */
	_Atomic uint64_t transitions[3];                    /* into each enum breaker_state */
	_Atomic uint64_t retry_results[RETRY_RESULT_COUNT]; /* by enum retry_result */
	_Atomic uint64_t rejected[RESIL_REJECT_COUNT];
	/* adaptive_concurrency: the limit the master publishes (0: none yet,
	 * the configured initial_limit holds), what it was judged on, and the
	 * refusals (at once or after the queue) while it was the binding cap */
	_Atomic uint32_t ac_limit;
	_Atomic uint32_t ac_latency_us;  /* the last short window's mean upstream latency */
	_Atomic uint32_t ac_baseline_us; /* the baseline it was compared with */
	_Atomic uint64_t ac_refused;
	/* the window: written per answer */
	_Alignas(64) _Atomic uint64_t bucket[BREAKER_BUCKETS];
	_Atomic uint32_t bucket_sec[BREAKER_BUCKETS]; /* the second each bucket holds */
};

#define BREAKER_TRIP_TABLE(X)                                                                                          \
	X(ERRORS, "error_percent")                                                                                     \
	X(POOL, "pool_percent")                                                                                        \
	X(LATENCY, "latency_p99")                                                                                      \
	X(TRIAL, "half_open_trial_failed")

enum breaker_trip {
#define BREAKER_TRIP_ENUM(name, label) BREAKER_TRIP_##name,
	BREAKER_TRIP_TABLE(BREAKER_TRIP_ENUM)
#undef BREAKER_TRIP_ENUM
	    BREAKER_TRIP_COUNT
};
extern const char *const breaker_trip_names[BREAKER_TRIP_COUNT];

/* Group state by name: an entry keeps its index for the segment's life, so
 * a breaker stays open across reloads and upgrades. Master-written names,
 * published by the count (release). */
struct shm_resil_groups {
	_Atomic uint32_t n;
	char names[RESIL_GROUPS][RESIL_NAME_MAX];
	struct shm_resil_group g[RESIL_GROUPS];
};

struct route_table;

/* Master: sets route_upstream.resil_group of every group of <t> (its
 * entry by name in <gs>, the segment's resil_groups, added if new;
 * RESIL_GROUP_NONE for groups without limits or breaker, and, logged, once
 * RESIL_GROUPS names are taken). Takes the groups, not the segment, so
 * resil does not include shm.h, which includes it. */
void resil_assign_groups(struct shm_resil_groups *gs, struct route_table *t);

/* Admin reset: closes the breaker of <g> and clears its window. */
void resil_group_reset(struct shm_resil_group *g);

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
