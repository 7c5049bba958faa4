/*
 * stat.h: stable indices for per-route and per-server counters, and the
 * buckets of the duration histograms.
 *
 * Principle: a reload compiles a new route table, in which the position of
 * a route or a server may differ; its counters must not move with it. So
 * each distinct route key (host kind, host, path) and server key (upstream
 * name, address) gets a stat index the first time the master compiles a
 * generation that holds it, and keeps that index for the life of the shared
 * segment. route_entry.stat and route_server.stat carry it, so a worker
 * counts with one array index and never looks a key up.
 *
 * The key table is bounded: STAT_ROUTES - 1 route keys and STAT_SERVERS - 1
 * server keys at once (STAT_SERVERS covers CONFIG_MAX_SERVERS twice: a
 * full config and a full replacement of it while the old one drains). A
 * key keeps its index while there is room, so a server removed and added
 * back continues its series. When the table is full, a new key takes the
 * index of a key no live generation holds (route_prepare: not the current
 * table, none a live worker reports in use, none already given in the
 * table being prepared): no worker can still count into it, and its
 * counters are zeroed in every slot and the retired block before reuse,
 * so the new series starts at zero and no history moves to another key.
 * Only keys past that (more distinct keys live at once than the table
 * holds) share the last index (STAT_ROUTE_OTHER, STAT_SERVER_OTHER), which
 * the stats socket shows as "(other)"; admin overrides do not apply to it.
 *
 * Written by the master only (one master at a time compiles routes, even
 * during a binary upgrade), read by the master when it renders: an entry is
 * written before the count that covers it is stored (release).
 */
#ifndef WEIR_SHM_STAT_H
#define WEIR_SHM_STAT_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/config.h"

#define STAT_ROUTES       256
#define STAT_SERVERS      2048
#define STAT_ROUTE_OTHER  (STAT_ROUTES - 1)
#define STAT_SERVER_OTHER (STAT_SERVERS - 1)

/* Histogram buckets, upper bounds in seconds: .005 .01 .025 .05 .1 .25 .5
 * 1 2.5 5 10 +Inf. Counts are kept per bucket (not cumulative) and summed
 * upwards when rendered. */
#define STAT_BUCKETS 12

struct stat_route_key {
	uint8_t host_kind; /* enum config_host_kind */
	char host[CONFIG_HOST_MAX];
	char path[CONFIG_PATH_MAX];
};

struct stat_server_key {
	char upstream[CONFIG_NAME_MAX];
	char addr[CONFIG_ADDR_STR_MAX];
};

struct stat_keys {
	_Atomic uint32_t nroutes;  /* entries of routes[] in use */
	_Atomic uint32_t nservers; /* entries of servers[] in use */
	struct stat_route_key routes[STAT_ROUTE_OTHER];
	struct stat_server_key servers[STAT_SERVER_OTHER];
};

/*
 * Master: the stat index of a route key: its own if it has one, else the
 * next unused index, else (table full) the first index i with !live[i],
 * whose entry is rewritten and *reclaimed set (the caller zeroes its
 * counters), else STAT_ROUTE_OTHER. live[] (STAT_ROUTES entries, or NULL
 * for no reclaim) marks the indices of the keys a live generation holds;
 * the index returned is marked in it. <host> is as compiled (lower case;
 * ".suffix" for a wildcard; "" for any host).
 */
uint16_t stat_route_index(struct stat_keys *k, int host_kind, const char *host, const char *path, uint8_t *live,
                          int *reclaimed);

/* Master: the same for a server key (live[]: STAT_SERVERS entries). */
uint16_t stat_server_index(struct stat_keys *k, const char *upstream, const char *addr, uint8_t *live,
                           int *reclaimed);

/* The "le" label of bucket <b>: "0.005" ... "10", "+Inf". */
const char *stat_bucket_le(unsigned b);

/* Upper bound of bucket <b> in microseconds; UINT64_MAX for +Inf. */
uint64_t stat_bucket_bound_us(unsigned b);

/* A duration in seconds (ev_tstamp difference) as whole microseconds;
 * negative or NaN gives 0. */
static inline uint64_t stat_us(double seconds)
{
	return seconds > 0 ? (uint64_t)(seconds * 1e6) : 0;
}

/*
 * The bucket of a duration of <us> microseconds: the first whose bound is
 * at least <us>. A linear scan from the bottom, in integers: nearly every
 * request of a healthy gateway lands in the first buckets, so it costs one
 * or two compares where a binary search would always cost four.
 */
static inline unsigned stat_bucket(uint64_t us)
{
	static const uint32_t bound[STAT_BUCKETS - 1] = {
	    5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
	};
	unsigned b = 0;

	while (b < STAT_BUCKETS - 1 && us > bound[b])
		b++;
	return b;
}

#endif
