/*
 * balance.h: node-wide per-server state of the load-balancing algorithms
 * (worker/up/up.h: balance), in the shared segment, one entry per server stat
 * index.
 *
 * Principle: least_request compares requests in flight to a server across
 * every worker of the node, so the count lives here, not in a worker;
 * keyed by the stat index (stat.h), it stays with (group, address) across
 * reloads and upgrades. Each entry is its own cache line, so the one
 * locked add and subtract per request touch only the chosen server's line,
 * and only in a group balanced by least_request.
 */
#ifndef WEIR_SHM_BALANCE_H
#define WEIR_SHM_BALANCE_H

#include <stdatomic.h>
#include <stdint.h>

/* route_upstream.balance */
enum balance_kind {
	BALANCE_RR = 0, /* config_keys.c names them in this order */
	BALANCE_RANDOM,
	BALANCE_LEAST_REQUEST,
	BALANCE_RING_HASH, /* by a key, on a ring the master builds (shm/route_hash.c) */
	BALANCE_MAGLEV,    /* by a key, in a Maglev table the master builds */
};

struct shm_balance_server {
	_Alignas(64) _Atomic uint32_t inflight; /* requests in flight to it, node-wide */
	/* ms (CLOCK_MONOTONIC): it joined the table or came back healthy, for
	 * slow_start; its own line, written by the master and the prober
	 * only, read per pick in groups with slow_start */
	_Alignas(64) _Atomic uint64_t ramp_from;
};

/* The weight <w> of a server counts with in a group with slow_start over
 * <window> ms (0: off), at <now> ms: w * 100 once ramped (the scale leaves
 * room for a ramp of weight 1), from w * 10 at <from> up to that. */
static inline uint32_t balance_ramp_weight(uint32_t w, uint64_t from, uint64_t now, uint32_t window)
{
	if (!window)
		return w;
	if (!from || now >= from + window)
		return w * 100u;
	if (now <= from)
		return w * 10u;
	return (uint32_t)(w * (10u + 90u * (now - from) / window));
}

/* Master and prober: server <stat> starts a ramp now. */
static inline void balance_ramp_start(struct shm_balance_server *b, uint64_t now)
{
	atomic_store_explicit(&b->ramp_from, now ? now : 1, memory_order_relaxed);
}

#endif
