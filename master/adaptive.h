/*
 * adaptive.h: rate limits that follow their upstream's health
 * (rate_limits.adaptive, docs/config.md).
 *
 * Principle: the master alone judges. Every ADAPTIVE_TICK it snapshots,
 * for each adaptive limit, the cumulative upstream-latency histogram of
 * the routes that proxy to its upstream and the answers of that group's
 * servers (shm_sum_keys: the same sums /metrics shows), keeps the
 * snapshots of the last window in a ring, and from the difference between
 * the newest and the one a window old takes the p99 (interpolated within
 * its bucket, as histogram_quantile does) and the 5xx ratio. The factor is
 * 0.3 while the ratio exceeds 5% or the group's breaker is open, else 0.6
 * while the p99 exceeds latency_p99, else 1; it climbs back by itself as
 * the bad answers age out of the window, with hysteresis: a factor held
 * down by a threshold returns only once the window is below 0.8 x it
 * (4% errors, 0.8 x latency_p99), so a window sitting at a threshold does
 * not flap. It is published per limit id in
 * the limit segment (struct limit_adaptive); a worker reads it with one
 * relaxed load and scales GCRA's emission interval, held to the floor.
 * A window with no answers at all is no evidence: the factor is 1.
 */
#ifndef WEIR_MASTER_ADAPTIVE_H
#define WEIR_MASTER_ADAPTIVE_H

#include <stdint.h>

#include "shm/stat.h"

struct ev_loop;
struct config;
struct shm_segment;

#define ADAPTIVE_TICK 0.25 /* s between snapshots */
#define ADAPTIVE_RING 256  /* snapshots kept: 64 s, past the longest window */

/* Master: (re)starts the judging of <cfg>'s adaptive limits and
 * adaptive_concurrency groups on <loop>, one timer and one sum of the
 * counters a tick for both; none: the timer stops. */
void adaptive_configure(struct ev_loop *loop, const struct config *cfg, struct shm_segment *seg);

/* In a new worker: drops the master's timer. */
void adaptive_forget(void);

/* What one window gives (pure: the unit tests drive it): <hist> the
 * difference of two cumulative histograms (STAT_BUCKETS), <answers> and
 * <errors> the answers and 5xx of the window, <prev> the factor the last
 * window gave (0: none yet). Returns the factor in per mille and sets
 * *p99_us (0 when there is no answer). */
uint32_t adaptive_judge(const uint64_t hist[STAT_BUCKETS], uint64_t answers, uint64_t errors, int breaker_open,
                        uint32_t latency_p99_ms, uint32_t prev, uint32_t *p99_us);

#endif
