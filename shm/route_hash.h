/*
 * route_hash.h: the tables of the hashing balancers (`balance =
 * "ring_hash"` and `"maglev"`), built by the master into a route
 * generation (shm/route_hash.c), read by the workers' picks (worker/up/
 * balance_hash.c). A worker never builds a table: it only looks a key up.
 *
 * Principle: a server's place in a table comes from a hash of its address
 * as written (route_server.text), never from its position in the file, so
 * a reload that reorders, adds or removes servers moves only the keys of
 * the servers that changed.
 *
 * A group's table is route_hash_entries(t)[hash_first, + hash_n), each
 * entry a uint64_t:
 *   ring_hash: (point << 32) | server, sorted: a key goes to the first
 *              point at or after its own (wrapping), each server holding
 *              points in proportion to its weight;
 *   maglev:    server, in a table of a prime size, filled by Maglev's
 *              permutations weighted by the servers' weights (as Envoy's
 *              MaglevTable), the servers taking turns in the order of
 *              their addresses' hashes: a key goes to entry key % size.
 * "server" is the offset in the group (first_server + offset).
 */
#ifndef WEIR_SHM_ROUTE_HASH_H
#define WEIR_SHM_ROUTE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/fnv.h"
#include "shm/route_types.h"

/* 64-bit FNV-1a of <n> bytes <p> from <seed>, then murmur3's finalizer
 * (FNV alone clusters short keys that differ in their last bytes). */
static inline uint64_t route_hash64(const void *p, size_t n, uint64_t seed)
{
	uint64_t h = fnv1a64(FNV64_BASIS ^ seed, p, n);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Bytes the tables of <cfg>'s hash-balanced groups take. */
size_t route_hash_size(const struct config *cfg);

/* Writes the tables of <cfg>'s hash-balanced groups at <tab>
 * (route_hash_size(cfg) bytes) and their keys and places into <ups>. */
void route_hash_build(struct route_upstream *ups, uint64_t *tab, const struct config *cfg);

#endif
