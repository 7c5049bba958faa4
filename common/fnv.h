/*
 * fnv.h: 64-bit FNV-1a, the one byte hash the configuration, the route
 * tables and the workers share (rate-limit identities, CA file digests,
 * split buckets, ring and maglev tables). Fixed constants, no seed of its
 * own: the same bytes hash alike in every process, across reloads and
 * across nodes, which splits and hash balancing rely on. Callers that
 * reduce the hash to few bits mix it first (FNV's low bits are weak on
 * short keys).
 */
#ifndef WEIR_COMMON_FNV_H
#define WEIR_COMMON_FNV_H

#include <stddef.h>
#include <stdint.h>

#define FNV64_BASIS 14695981039346656037ull

/* <h> (FNV64_BASIS to start) continued over <n> bytes at <p>. */
static inline uint64_t fnv1a64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

#endif
