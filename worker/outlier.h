/*
 * outlier.h: passive outlier ejection from real traffic, node-wide.
 *
 * Principle: the answers a group's servers give (a 5xx, a connect that
 * fails or times out, anything else) are counted in the shared segment
 * (shm/resil.h), so every worker's traffic makes one count and an ejection
 * holds in every worker at once. Three detectors: consecutive_5xx,
 * consecutive_gateway_failures, and a failure percentage over an interval
 * once a server has min_requests in it. An ejection lasts
 * base_ejection_time times the ejections in a row, capped; it is checked
 * after it is made (max_ejection_percent, and never the last usable
 * server: either undoes it). When fewer than panic_threshold percent of a
 * group's servers are usable, picks ignore ejections (panic). One log line
 * per ejection and one per return, each with its reason.
 *
 * A group without `outlier` pays nothing: every entry point returns on a
 * flag of the table it already holds.
 */
#ifndef WEIR_WORKER_OUTLIER_H
#define WEIR_WORKER_OUTLIER_H

#include <stdint.h>

#include "shm/route.h"

enum outlier_outcome {
	OUTLIER_OK,      /* an answer below 500 */
	OUTLIER_5XX,     /* an answer of 500 or more */
	OUTLIER_GATEWAY, /* a connect failure or a timeout */
};

/* Counts outcome <o> of server <si> of <t>, and ejects it when a detector
 * says so. */
void outlier_observe(const struct route_table *t, uint32_t si, enum outlier_outcome o);

/* The upstream answered request to server <si> with <status>. */
static inline void outlier_answer(const struct route_table *t, uint32_t si, int status)
{
	if (t->upstreams[t->servers[si].upstream].resil.outlier.on)
		outlier_observe(t, si, status >= 500 ? OUTLIER_5XX : OUTLIER_OK);
}

/* The time (ms) to judge ejections of group <up> by when picking, or 0
 * when they are to be ignored: outlier off, or panic (too few servers
 * usable; counted and logged). */
uint64_t outlier_pick_now(const struct route_table *t, const struct route_upstream *up);

/* Once a second: logs the return of servers whose ejection ran out (once
 * node-wide: the first worker to see it). */
void outlier_sweep(const struct route_table *t);

#endif
