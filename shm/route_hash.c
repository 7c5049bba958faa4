#include "shm/route_hash.h"

#include <stdlib.h>
#include <string.h>

#include "shm/balance.h"

/* Ring points: 256 for a server of the group's least weight, more in
 * proportion to weight, so that each server's share stays within a few
 * percent. The count per server does not depend on the others (unless
 * the weights are so far apart that the total passes RING_MAX and all
 * are scaled down), so a server that joins or leaves moves its own keys
 * and no other's. */
#define RING_PER_WEIGHT 256u
#define RING_MAX        32768u
/* Maglev's table holds at least this many entries per server (the paper
 * keeps the imbalance near 1 % at 100): the smallest prime past it */
#define MAGLEV_PER_SERVER 128u
#define MAGLEV_MIN        4096u

static int route_hash_prime(uint32_t n)
{
	if (n < 2)
		return 0;
	for (uint32_t d = 2; d * d <= n; d++)
		if (n % d == 0)
			return 0;
	return 1;
}

/* The size of a maglev table for <n> servers. */
static uint32_t route_hash_maglev_size(uint32_t n)
{
	uint32_t m = n * MAGLEV_PER_SERVER < MAGLEV_MIN ? MAGLEV_MIN : n * MAGLEV_PER_SERVER;

	while (!route_hash_prime(m))
		m++;
	return m;
}

/* The points of each of <u>'s first <n> servers into <pts>; returns the
 * total. */
static uint32_t route_hash_ring_points(const struct config *cfg, const struct config_upstream *u, uint32_t n,
                                       uint32_t *pts)
{
	uint64_t wmin = UINT64_MAX, sum = 0, total = 0;

	for (uint32_t k = 0; k < n; k++) {
		uint64_t w = (uint64_t)cfg->servers[u->first_server + (int)k].weight;

		if (w < wmin)
			wmin = w;
	}
	for (uint32_t k = 0; k < n; k++)
		sum += RING_PER_WEIGHT * (uint64_t)cfg->servers[u->first_server + (int)k].weight / wmin;
	for (uint32_t k = 0; k < n; k++) {
		uint64_t p = RING_PER_WEIGHT * (uint64_t)cfg->servers[u->first_server + (int)k].weight / wmin;

		if (sum > RING_MAX)
			p = p * RING_MAX / sum;
		pts[k] = p ? (uint32_t)p : 1u;
		total += pts[k];
	}
	return (uint32_t)total;
}

/* The servers looked at are at most 64 (upstream.c), so are the ones a
 * table holds. */
static uint32_t route_hash_group_n(const struct config *cfg, const struct config_upstream *u)
{
	uint32_t n = (uint32_t)(u->nservers < 64 ? u->nservers : 64), pts[64];

	if (u->balance == BALANCE_RING_HASH)
		return route_hash_ring_points(cfg, u, n, pts);
	return u->balance == BALANCE_MAGLEV ? route_hash_maglev_size(n) : 0;
}

size_t route_hash_size(const struct config *cfg)
{
	size_t n = 0;

	for (int i = 0; i < cfg->nupstreams; i++)
		n += (size_t)route_hash_group_n(cfg, &cfg->upstreams[i]) * sizeof(uint64_t);
	return n;
}

static int route_hash_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Weighted ring: server k holds pts[k] points, each at the hash of its
 * address seeded with the point's number (Envoy hashes "address_i"). */
static uint32_t route_hash_ring(uint64_t *tab, const struct config *cfg, const struct config_upstream *u, uint32_t n)
{
	uint32_t pts[64], at = 0;

	route_hash_ring_points(cfg, u, n, pts);
	for (uint32_t k = 0; k < n; k++) {
		const struct config_server *s = &cfg->servers[u->first_server + (int)k];
		size_t len = strlen(s->addr.text);

		for (uint64_t i = 0; i < pts[k]; i++) {
			uint64_t h = route_hash64(s->addr.text, len, i);

			tab[at++] = (h >> 32) << 32 | k;
		}
	}
	qsort(tab, at, sizeof(*tab), route_hash_cmp);
	return at;
}

/* Maglev (Eisenbud et al., NSDI 2016) with Envoy's weighting: server k
 * has a permutation of the table (offset + j * skip mod m, m prime, both
 * from its address), and in each round every server whose weight's turn
 * it is takes its next free entry; a server of the greatest weight takes
 * one every round, one of a third of it one every third round. */
static uint32_t route_hash_maglev(uint64_t *tab, const struct config *cfg, const struct config_upstream *u, uint32_t n)
{
	uint32_t m = route_hash_maglev_size(n), filled = 0, wmax = 0, order[64];
	uint64_t off[64], skip[64], next[64] = {0}, target[64] = {0}, key[64];

	for (uint32_t j = 0; j < m; j++)
		tab[j] = UINT64_MAX;
	for (uint32_t k = 0; k < n; k++) {
		const struct config_server *s = &cfg->servers[u->first_server + (int)k];
		size_t len = strlen(s->addr.text);

		off[k] = route_hash64(s->addr.text, len, 0x6d61676c) % m;
		skip[k] = route_hash64(s->addr.text, len, 0x736b6970) % (m - 1) + 1;
		key[k] = route_hash64(s->addr.text, len, 0);
		if ((uint32_t)s->weight > wmax)
			wmax = (uint32_t)s->weight;
	}
	/* the servers take turns in the order of their addresses' hashes, not
	 * of the list, so that a reordered list fills the same table (an
	 * insertion sort: at most 64) */
	for (uint32_t k = 0; k < n; k++) {
		uint32_t j = k;

		for (; j && key[order[j - 1]] > key[k]; j--)
			order[j] = order[j - 1];
		order[j] = k;
	}
	for (uint64_t round = 1; filled < m; round++) {
		for (uint32_t i = 0; i < n && filled < m; i++) {
			uint32_t k = order[i];
			uint64_t w = (uint64_t)cfg->servers[u->first_server + (int)k].weight, c;

			if (round * w < target[k])
				continue;
			target[k] += wmax;
			do
				c = (off[k] + next[k]++ * skip[k]) % m;
			while (tab[c] != UINT64_MAX);
			tab[c] = k;
			filled++;
		}
	}
	return m;
}

void route_hash_build(struct route_upstream *ups, uint64_t *tab, const struct config *cfg)
{
	uint32_t at = 0;

	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *cu = &cfg->upstreams[i];
		struct route_upstream *u = &ups[i];
		uint32_t n = (uint32_t)(cu->nservers < 64 ? cu->nservers : 64);

		if (cu->balance != BALANCE_RING_HASH && cu->balance != BALANCE_MAGLEV)
			continue;
		u->hash_kind = (uint8_t)cu->hash.kind;
		u->hash_name_len = cu->hash.name_len;
		memcpy(u->hash_name, cu->hash.name, sizeof(u->hash_name));
		u->hash_fallback = (uint8_t)cu->hash.fallback;
		u->bounded_load = (uint16_t)cu->hash.bounded_load;
		u->hash_first = at;
		u->hash_n = cu->balance == BALANCE_RING_HASH ? route_hash_ring(tab + at, cfg, cu, n)
		                                             : route_hash_maglev(tab + at, cfg, cu, n);
		at += u->hash_n;
	}
}
