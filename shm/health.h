/*
 * health.h: the results of active health checks in the shared segment.
 *
 * Principle: one prober per node (master/health.h) checks the servers of
 * every group with a health block and publishes each server's state as one
 * word per server stat index, beside its admin word: keyed by the server's
 * stable identity (group name and address, shm/stat.h), not by its place
 * in a table, so a reload or a binary upgrade (which inherits the segment)
 * keeps a down server down. A worker reads the word with one relaxed load
 * when it looks at a server (health_down): no lock, and a change seen one
 * request late does no harm.
 *
 * The word holds the state, the result of the last check (and its HTTP
 * status) and the run: checks in a row whose result disagrees with the
 * state, which moves it once it reaches rise (down to up) or fall (up to
 * down). The prober is its only writer; during a binary upgrade the two
 * masters' probers overlap for a moment, which at worst makes one
 * transition a check early. Word 0 means "not checked": up.
 */
#ifndef WEIR_SHM_HEALTH_H
#define WEIR_SHM_HEALTH_H

#include <stdatomic.h>
#include <stdint.h>

#include "shm/stat.h"

enum health_state {
	HEALTH_UNCHECKED = 0, /* its group has no health block: up */
	HEALTH_UP = 1,
	HEALTH_DOWN = 2,
};

/* What one check found: weir_health_checks_total{result=...} and
 * /upstreams' last_check. */
#define HEALTH_RESULT_TABLE(X)                                                                                         \
	X(NONE, "none")                                                                                                \
	X(OK, "ok")                                                                                                    \
	X(STATUS, "bad_status")                                                                                        \
	X(REFUSED, "connect_failed")                                                                                   \
	X(TIMEOUT, "timeout")                                                                                          \
	X(TLS, "tls_failed")                                                                                           \
	X(CLOSED, "closed")                                                                                            \
	X(BAD_RESPONSE, "bad_response")                                                                                \
	X(LOCAL, "local_error")                                                                                        \
	X(SKIPPED, "skipped_busy")

enum health_result {
#define HEALTH_RESULT_ENUM(name, label) HEALTH_RESULT_##name,
	HEALTH_RESULT_TABLE(HEALTH_RESULT_ENUM)
#undef HEALTH_RESULT_ENUM
	    HEALTH_RESULT_COUNT
};

/* "ok", "bad_status" ...: by enum health_result */
extern const char *const health_result_names[HEALTH_RESULT_COUNT];
/* "unchecked", "up", "down": by enum health_state */
extern const char *const health_state_names[3];

/* bits 0-1 state, 2-7 last result, 8-15 run, 16-25 last HTTP status */
#define HEALTH_STATE(w)  ((uint32_t)(w)&3u)
#define HEALTH_RESULT(w) (((uint32_t)(w) >> 2) & 63u)
#define HEALTH_RUN(w)    (((uint32_t)(w) >> 8) & 255u)
#define HEALTH_STATUS(w) (((uint32_t)(w) >> 16) & 1023u)
#define HEALTH_WORD(state, result, run, status)                                                                        \
	(((uint32_t)(state)&3u) | (((uint32_t)(result)&63u) << 2) | (((uint32_t)(run)&255u) << 8) |                    \
	 (((uint32_t)(status)&1023u) << 16))

struct shm_health {
	_Alignas(64) _Atomic uint32_t word[STAT_SERVERS]; /* HEALTH_WORD per server stat index */
	/* checks done, by server stat index and enum health_result */
	_Atomic uint64_t checks[STAT_SERVERS][HEALTH_RESULT_COUNT];
};

/* Is server stat index <stat> down by its health checks? For the pick. */
static inline int health_down(const struct shm_health *h, uint16_t stat)
{
	return HEALTH_STATE(atomic_load_explicit((_Atomic uint32_t *)&h->word[stat], memory_order_relaxed)) ==
	       HEALTH_DOWN;
}

/* Forgets what stat index <i> had (a key handed to a new server). */
void health_key_zero(struct shm_health *h, uint16_t i);

#endif
