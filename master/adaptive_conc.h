/*
 * adaptive_conc.h: adaptive_concurrency, a cap on the requests in flight
 * to an upstream group that follows the group's latency
 * (upstreams.adaptive_concurrency, docs/config.md).
 *
 * Principle: a gradient controller in the manner of Netflix's
 * concurrency-limits (Gradient2), judged by the master alone. Every
 * ADAPTIVE_TICK (adaptive.c's timer, one sum for both controllers) it
 * takes, for each group with adaptive_concurrency, the upstream-latency counts and microseconds of the routes that proxy to it
 * (shm_sum_keys: the sums /metrics shows) and samples the group's requests
 * in flight (shm_resil_group.active). Once per `window` the mean latency of
 * that window (short) is set against a baseline, a moving average of the
 * short latencies over `baseline_window` (long):
 *
 *   gradient = clamp(tolerance x long / short, 0.5, 1)
 *   limit    = limit x (1 - smoothing) + (limit x gradient + sqrt(limit)) x smoothing
 *
 * within min_limit..max_limit. Latency up to `tolerance` times the baseline
 * is no queueing: the limit grows by sqrt(limit) a window; past it the
 * limit shrinks, by half a window at most. While the group never had half
 * its limit in flight it is not using it, and the limit stays (no growth
 * on no evidence). A short latency under half the baseline pulls the
 * baseline down 5% faster, so a recovered group is not judged on its bad
 * past. A window without an answer changes nothing.
 *
 * The limit is published in the group's shm_resil_group.ac_limit; a worker
 * reads it with one relaxed load in breaker_admit() and takes it as one
 * more cap beside limits.max_requests and max_connections, so over it a
 * request waits in the breaker's queue and then gets a 503 with
 * Retry-After. Reloads keep the state by group name (the resil entry); a
 * new master after USR2 starts from the published limit.
 */
#ifndef WEIR_MASTER_ADAPTIVE_CONC_H
#define WEIR_MASTER_ADAPTIVE_CONC_H

#include <stdint.h>

struct config;
struct config_adaptive_conc;
struct shm_segment;
struct route_table;
struct shm_route_counters;
struct textbuf;

/* One tick of adaptive.c's timer (<tick> seconds; it sums the counters
 * once for both controllers): every group of <t> with
 * adaptive_concurrency, from <routes>, the sums of this tick. */
void adaptive_conc_tick(struct shm_segment *seg, const struct route_table *t, const struct shm_route_counters *routes,
                        double tick);

/* Any group of <cfg> with adaptive_concurrency? */
int adaptive_conc_any(const struct config *cfg);

/* One window (pure: the unit tests drive it): <short_us> the window's mean
 * upstream latency (0: no answer), <in_flight> the most in flight seen in
 * it. Moves *limit and *baseline_us as adaptive_conc.h says. */
void adaptive_conc_step(const struct config_adaptive_conc *ac, double *limit, double *baseline_us, double short_us,
                        uint64_t in_flight);

/* Appends the weir_upstream_adaptive_concurrency_* families (metrics.c). */
void adaptive_conc_render(struct textbuf *o, struct shm_segment *seg, const struct route_table *t);

#endif
