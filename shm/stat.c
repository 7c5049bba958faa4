#include "shm/stat.h"

#include <string.h>

static const char *const bucket_le[STAT_BUCKETS] = {
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf",
};

static const uint64_t bucket_us[STAT_BUCKETS] = {
    5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, UINT64_MAX,
};

const char *stat_bucket_le(unsigned b)
{
	return b < STAT_BUCKETS ? bucket_le[b] : "+Inf";
}

uint64_t stat_bucket_bound_us(unsigned b)
{
	return b < STAT_BUCKETS ? bucket_us[b] : UINT64_MAX;
}

/* Copies <s> into <dst> of <cap> bytes, cut to fit and NUL-terminated. */
static void stat_copy(char *dst, size_t cap, const char *s)
{
	size_t n = strnlen(s, cap - 1);

	memcpy(dst, s, n);
	dst[n] = 0;
}

/* The index for a key not in the table: the next unused one, else the first
 * not live (*reclaimed), else <other>. Marks it live. */
static uint32_t stat_new_index(_Atomic uint32_t *count, uint32_t other, uint8_t *live, int *reclaimed)
{
	uint32_t n = atomic_load_explicit(count, memory_order_relaxed);
	uint32_t i = n;

	*reclaimed = 0;
	if (n >= other) {
		for (i = 0; live && i < other && live[i]; i++)
			;
		if (!live || i == other)
			return other;
		*reclaimed = 1;
	}
	if (live)
		live[i] = 1;
	return i;
}

uint16_t stat_route_index(struct stat_keys *k, int host_kind, const char *host, const char *path, uint8_t *live,
                          int *reclaimed)
{
	uint32_t n = atomic_load_explicit(&k->nroutes, memory_order_relaxed);

	/* linear: a reload compiles at most CONFIG_MAX_ROUTES routes against at
	 * most 255 keys (and servers against 2047), in the master, off every
	 * request path */
	*reclaimed = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct stat_route_key *e = &k->routes[i];
		if (e->host_kind == host_kind && strcmp(e->host, host) == 0 && strcmp(e->path, path) == 0) {
			if (live)
				live[i] = 1;
			return (uint16_t)i;
		}
	}
	n = stat_new_index(&k->nroutes, STAT_ROUTE_OTHER, live, reclaimed);
	if (n == STAT_ROUTE_OTHER)
		return STAT_ROUTE_OTHER;
	memset(&k->routes[n], 0, sizeof(k->routes[n]));
	k->routes[n].host_kind = (uint8_t)host_kind;
	stat_copy(k->routes[n].host, sizeof(k->routes[n].host), host);
	stat_copy(k->routes[n].path, sizeof(k->routes[n].path), path);
	if (!*reclaimed)
		atomic_store_explicit(&k->nroutes, n + 1, memory_order_release);
	return (uint16_t)n;
}

uint16_t stat_server_index(struct stat_keys *k, const char *upstream, const char *addr, uint8_t *live,
                           int *reclaimed)
{
	uint32_t n = atomic_load_explicit(&k->nservers, memory_order_relaxed);

	*reclaimed = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct stat_server_key *e = &k->servers[i];
		if (strcmp(e->upstream, upstream) == 0 && strcmp(e->addr, addr) == 0) {
			if (live)
				live[i] = 1;
			return (uint16_t)i;
		}
	}
	n = stat_new_index(&k->nservers, STAT_SERVER_OTHER, live, reclaimed);
	if (n == STAT_SERVER_OTHER)
		return STAT_SERVER_OTHER;
	memset(&k->servers[n], 0, sizeof(k->servers[n]));
	stat_copy(k->servers[n].upstream, sizeof(k->servers[n].upstream), upstream);
	stat_copy(k->servers[n].addr, sizeof(k->servers[n].addr), addr);
	if (!*reclaimed)
		atomic_store_explicit(&k->nservers, n + 1, memory_order_release);
	return (uint16_t)n;
}
