#include "worker/up/up.h"

#include <time.h>
#include <unistd.h>

/* A per-worker xorshift64*: no lock, no system call after the first. */
uint64_t balance_rand(void)
{
	static uint64_t x;

	if (!x) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = ((uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20) | 1;
	}
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return x * 0x2545f4914f6cdd1dull;
}

static uint32_t balance_inflight(const struct route_table *t, uint32_t si)
{
	return atomic_load_explicit(&wk.seg->balance[route_servers(t)[si].stat].inflight, memory_order_relaxed);
}

int balance_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried, int panic,
                 uint64_t eject_now, int *marked)
{
	uint32_t cand[64], weight[64], n = 0, lim = up->nservers < 64 ? up->nservers : 64;
	uint64_t total = 0;

	if (up->balance >= BALANCE_RING_HASH)
		return balance_hash_pick(t, up, tried, panic, eject_now, marked);
	for (uint32_t i = 0; i < lim; i++) {
		uint32_t si = up->first_server + i, w;

		if ((tried >> i) & 1)
			continue;
		w = upstream_server_usable(t, up, si, panic, eject_now, marked);
		if (!w)
			continue;
		cand[n] = si;
		weight[n++] = w;
		total += w;
	}
	if (!n)
		return -1;
	if (up->balance == BALANCE_RANDOM) {
		uint64_t r = balance_rand() % total;
		uint32_t k = 0;

		while (r >= weight[k])
			r -= weight[k++];
		return (int)cand[k];
	}
	/* least_request: the lowest in flight over weight among <choices>
	 * servers drawn without replacement (a partial shuffle of cand[]), so
	 * with two servers both are always compared; (a + 1) / wa < (b + 1) /
	 * wb, multiplied out, so an idle heavy server beats an idle light one */
	uint32_t best = 0, best_w = 1, draws = up->choices < n ? up->choices : n;
	uint64_t best_load = UINT64_MAX;

	for (uint32_t c = 0; c < draws; c++) {
		uint32_t k = c + (uint32_t)(balance_rand() % (n - c)), si = cand[k], w = weight[k];
		uint64_t load = balance_inflight(t, si) + 1u;

		cand[k] = cand[c];
		weight[k] = weight[c];
		if (best_load == UINT64_MAX || load * best_w < best_load * w) {
			best = si;
			best_w = w;
			best_load = load;
		}
	}
	return (int)best;
}

void balance_begin(const struct route_table *t, uint32_t si, uint16_t *held)
{
	const struct route_server *rs = &route_servers(t)[si];
	const struct route_upstream *up = &route_upstreams(t)[rs->upstream];

	balance_end(held);
	/* the counts least_request and bounded_load compare */
	if (up->balance != BALANCE_LEAST_REQUEST && !up->bounded_load)
		return;
	atomic_fetch_add_explicit(&wk.seg->balance[rs->stat].inflight, 1, memory_order_relaxed);
	*held = (uint16_t)(rs->stat + 1u);
}

void balance_end(uint16_t *held)
{
	if (!*held)
		return;
	atomic_fetch_sub_explicit(&wk.seg->balance[*held - 1u].inflight, 1, memory_order_relaxed);
	*held = 0;
}
