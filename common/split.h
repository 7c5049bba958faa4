/*
 * split.h: canary and weighted splits of one route between upstream
 * groups (routes.split, split_key, split_override; docs/config.md,
 * "Splits").
 *
 * Principle: a request's key (a cookie, a header, a query argument or the
 * client's address, taken as the rate limiter takes it) is hashed into one
 * of SPLIT_BUCKETS buckets by a hash with no seed (FNV-1a 64 and a
 * finaliser), so a key lands in the same bucket in every worker, across
 * reloads and binary upgrades, and on every node. The buckets are handed
 * to the sides as ranges laid out cumulatively in config order, each side
 * a share of the 10,000 proportional to its weight: side i holds
 * [floor(10000 * w_0..i-1 / W), floor(10000 * w_0..i / W)). With two sides
 * (a canary), raising one side's weight moves buckets only from the other
 * side to it; with more, a change moves only the buckets across the
 * boundaries that moved (raise a side and lower its neighbour by the same
 * amount, and only buckets between the two move).
 *
 * Everything here is pure (no worker, no segment): the master compiles a
 * route's split into the route generation (shm/route_split.c) and the
 * worker picks its side (worker/core/split.c) with these.
 */
#ifndef WEIR_COMMON_SPLIT_H
#define WEIR_COMMON_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "common/fnv.h"

#define SPLIT_SIDES   8     /* sides of one split, at most */
#define SPLIT_BUCKETS 10000 /* buckets a key is hashed into */
#define SPLIT_NAME_MAX 64   /* a key's or an override's header, cookie or argument name, with the NUL */

/* What a key or an override is read from; the values of the key kinds are
 * the rate limiter's (enum config_rl_part), so the worker's shared
 * extraction (worker/core/ratelimit.c) reads both. */
enum split_override_kind { SPLIT_OVERRIDE_NONE, SPLIT_OVERRIDE_HEADER, SPLIT_OVERRIDE_COOKIE };

/* routes.split and its companions, as loaded (malloc'd, owned by the
 * route: config_free releases it). */
struct config_split {
	int index;  /* its place among the config's splits: the generation's split index */
	int nsides;
	struct config_split_side {
		int upstream;    /* index into config.upstreams */
		uint32_t weight; /* 0..10000 */
	} side[SPLIT_SIDES];
	char key[128];       /* split_key as written: "cookie:uid" */
	uint8_t key_kind;    /* enum config_rl_part (never ROUTE) */
	uint8_t key_len;
	char key_name[SPLIT_NAME_MAX];
	uint8_t ovr_kind;    /* enum split_override_kind */
	uint8_t ovr_len;
	char ovr_name[SPLIT_NAME_MAX];
};

/* routes.mirror = { upstream; percent; max_in_flight; }: a copy of a
 * share of the route's bodiless requests sent to a shadow group, whose
 * answers are thrown away (worker/core/mirror.c). In struct config_route. */
struct config_mirror {
	int group;              /* index into config.upstreams + 1; 0: no mirror (a zeroed route has none) */
	uint32_t percent;       /* 1..100: the share of requests copied, drawn at random */
	uint32_t max_in_flight; /* copies of the route's requests in flight per worker; past it, dropped */
};

/* How a copy ended, exactly one of them per request chosen: its answer
 * read to the shadow's close; a connect, write or read error or the
 * shadow group's timeout; or never sent (a body, max_in_flight, no
 * server up, no memory). */
enum mirror_result { MIRROR_SENT, MIRROR_FAILED, MIRROR_DROPPED };

/* The bucket of key <k> (<n> bytes): stable everywhere, no seed. */
static inline uint32_t split_bucket(const void *k, size_t n)
{
	uint64_t h = fnv1a64(FNV64_BASIS, k, n);

	/* FNV's low bits are weak on short keys: mix before the modulo
	 * (the finaliser of splitmix64) */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return (uint32_t)(h % SPLIT_BUCKETS);
}

/* The upper bounds (exclusive) of the sides' bucket ranges, from their
 * weights in config order (the sum is more than 0): bound[nsides - 1]
 * is SPLIT_BUCKETS. */
static inline void split_bounds(const uint32_t *weight, int nsides, uint16_t *bound)
{
	uint64_t total = 0, cum = 0;

	for (int i = 0; i < nsides; i++)
		total += weight[i];
	for (int i = 0; i < nsides; i++) {
		cum += weight[i];
		bound[i] = (uint16_t)(cum * SPLIT_BUCKETS / total);
	}
}

/* The side whose range holds <bucket>. */
static inline int split_side(const uint16_t *bound, int nsides, uint32_t bucket)
{
	int i = 0;

	while (i < nsides - 1 && bucket >= bound[i])
		i++;
	return i;
}

#endif
