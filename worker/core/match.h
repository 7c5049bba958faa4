/*
 * match.h: a route's conditions checked for a request, and the rewrite of
 * the path it forwards (worker/core/match.c; the generation's side is
 * shm/route_match.h, the configuration's common/config_match.h).
 *
 * The regular expressions of a generation are compiled by each worker
 * from the texts the generation holds, the first time it meets that
 * generation (so once per reload, never per request), for the last two
 * generations it met: a request routed by the older one that waited (a
 * rate-limit delay) across a reload still finds its codes. One match data
 * per worker, sized for the largest capture count, serves every match.
 */
#ifndef WEIR_WORKER_CORE_MATCH_H
#define WEIR_WORKER_CORE_MATCH_H

#include <stdint.h>

struct txn;
struct route_table;
struct route_entry;

/* route_cond_fn (shm/route.h) for <ctx>, a struct txn: the method set,
 * the path regex, the header and query conditions of <e>. */
int match_cond(void *ctx, const struct route_table *t, const struct route_entry *e);

/* Compiles <t>'s regexes now if this worker has not (worker start, or a
 * new generation), so the first request does not wait for it. */
void match_prepare(const struct route_table *t);

/*
 * The target <t> forwards when its route strips a prefix or rewrites:
 * *<out> (valid until the next call in this worker) and *<len>, with the
 * query kept; left alone (NULL) for a route that does neither. Returns 0,
 * or WEIR_ERR(REWRITE_FAILED) (500: the result is no origin-form path)
 * or WEIR_ERR(REWRITE_TOO_LONG) (414: past MATCH_TARGET_MAX bytes).
 */
int match_rewrite(struct txn *t, const char **out, uint32_t *len);

#endif
