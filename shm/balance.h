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
};

struct shm_balance_server {
	_Alignas(64) _Atomic uint32_t inflight; /* requests in flight to it, node-wide */
};

#endif
