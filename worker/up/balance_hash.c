#include "worker/up/up.h"

#include "shm/route_hash.h"

/* The key of the request being picked for: set by balance_hash_use()
 * just before upstream_pick() (worker/core/txn.c: txn_pick), read by the
 * pick it leads to. A worker is one thread and a pick never yields, so
 * one slot is enough, and upstream_pick() keeps the signature every
 * other algorithm uses. */
static struct {
	uint64_t h;
	int how; /* BALANCE_KEY_* */
} balance_key;

void balance_hash_use(uint64_t h, int how)
{
	balance_key.h = h;
	balance_key.how = how;
}

/* The first entry of ring <tab> (<n> sorted points) at or after <h>'s
 * point, wrapping to 0. */
static uint32_t balance_ring_find(const uint64_t *tab, uint32_t n, uint64_t h)
{
	uint64_t point = h >> 32 << 32;
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (tab[mid] < point)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == n ? 0 : lo;
}

/*
 * bounded_load (Mirrokni, Thorup and Zadimoghaddam's consistent hashing
 * with bounded loads): with m requests in flight over the usable untried
 * servers, of weights summing to W, server k may take this one while its
 * own in flight is below ceil(c * (m + 1) * w_k / W), c the factor; the
 * walk goes on past one that is not. Multiplied out, in hundredths.
 */
static int balance_over(uint64_t inflight, uint32_t w, uint64_t m, uint64_t wsum, uint32_t factor)
{
	return inflight * wsum * 100u >= (uint64_t)factor * (m + 1) * w;
}

int balance_hash_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried, int panic,
                      uint64_t eject_now, int *marked)
{
	const uint64_t *tab = route_hash_entries(t) + up->hash_first;
	uint32_t n = up->nservers < 64 ? up->nservers : 64, w[64], pos, steps;
	uint64_t h = balance_key.h, seen = 0, all = n == 64 ? UINT64_MAX : (1ull << n) - 1, m = 0, wsum = 0;
	int loaded = -1;

	if (balance_key.how == BALANCE_KEY_NONE) {
		if (up->hash_fallback == CONFIG_HASH_FALLBACK_RR)
			return BALANCE_PICK_RR;
		h = balance_rand(); /* "random": a random point, then the same walk */
	}
	if (up->bounded_load) {
		/* the loads are judged over the usable servers not tried yet:
		 * one pass, each server's usable weight kept for the walk */
		for (uint32_t k = 0; k < n; k++) {
			uint32_t si = up->first_server + k;

			w[k] = (tried >> k) & 1 ? 0 : upstream_server_usable(t, up, si, panic, eject_now, marked);
			if (w[k]) {
				wsum += w[k];
				m += atomic_load_explicit(&wk.seg->balance[route_servers(t)[si].stat].inflight,
				                          memory_order_relaxed);
			}
		}
	}
	pos = up->balance == BALANCE_RING_HASH ? balance_ring_find(tab, up->hash_n, h) : (uint32_t)(h % up->hash_n);
	/* from the key's entry onwards, each server judged once: an unusable
	 * one is passed to the next entry's, so only its own keys move */
	for (steps = 0; steps < up->hash_n && seen != all; steps++, pos = pos + 1 == up->hash_n ? 0 : pos + 1) {
		uint32_t k = (uint32_t)(tab[pos] & 0xffu), si = up->first_server + k, wk_;

		if ((seen >> k) & 1)
			continue;
		seen |= 1ull << k;
		if ((tried >> k) & 1)
			continue;
		wk_ = up->bounded_load ? w[k] : upstream_server_usable(t, up, si, panic, eject_now, marked);
		if (!wk_) {
			SHM_ADD(wk.cnt, hash_skips, 1);
			continue;
		}
		if (up->bounded_load &&
		    balance_over(atomic_load_explicit(&wk.seg->balance[route_servers(t)[si].stat].inflight,
		                                      memory_order_relaxed),
		                 wk_, m, wsum, up->bounded_load)) {
			SHM_ADD(wk.cnt, hash_bounded_walks, 1);
			if (loaded < 0)
				loaded = (int)si;
			continue;
		}
		return (int)si;
	}
	/* every usable server over its bound (counts moving under us): the
	 * key's own usable server */
	return loaded;
}
