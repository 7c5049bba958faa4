/*
 * balance_key.c: the key a ring_hash or maglev group hashes a request by
 * (hash_key, common/config_hash.h), read the way the rate limits read
 * theirs (ratelimit_client_addr, ratelimit_part_value), handed to the pick
 * (worker/up/up.h: balance_hash_use). Nothing is copied or allocated: the
 * value is hashed where it lies.
 */
#include "worker/core/core.h"

#include "shm/route_hash.h"
#include "worker/up/up.h"

/* The client address as the rate limits key it (a v4 client as its 4
 * bytes), hashed; 0 in *<ok> when there is none. */
static uint64_t balance_key_client(const struct txn *t, int *ok)
{
	uint8_t a[16];
	int fam = ratelimit_client_addr(t, a);

	*ok = fam != 0;
	return fam == 4 ? route_hash64(a + 12, 4, 0) : route_hash64(a, 16, 0);
}

void balance_key_prepare(const struct txn *t, const struct route_upstream *up)
{
	const char *v = NULL;
	size_t vl = 0;
	int ok;
	uint64_t h;

	switch (up->hash_kind) {
	case CONFIG_HASH_CLIENT_IP:
		h = balance_key_client(t, &ok);
		if (ok) {
			balance_hash_use(h, BALANCE_KEY_HASHED);
			return;
		}
		break;
	case CONFIG_HASH_PATH:
		v = t->req.target;
		vl = (size_t)(t->req.path_end - t->req.target);
		break;
	default: v = ratelimit_part_value(t, up->hash_kind, up->hash_name, up->hash_name_len, &vl); break;
	}
	if (v) {
		balance_hash_use(route_hash64(v, vl, 0), BALANCE_KEY_HASHED);
		return;
	}
	SHM_ADD(wk.cnt, hash_fallbacks, 1);
	if (up->hash_fallback == CONFIG_HASH_FALLBACK_CLIENT_IP) {
		h = balance_key_client(t, &ok);
		if (ok) {
			balance_hash_use(h, BALANCE_KEY_FALLBACK);
			return;
		}
	}
	balance_hash_use(0, BALANCE_KEY_NONE);
}
