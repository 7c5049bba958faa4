/*
 * split.c: the side a request of a split route goes to (worker/core/split.h).
 *
 * The key is read by the rate limiter's extraction (ratelimit.c), hashed
 * into a bucket with no seed (common/split.h), and the bucket's range in
 * the generation's route_split names the side: a few compares, nothing
 * allocated. The chosen group then stands for the route's everywhere a
 * group is read (split_group(): the breaker and limits, retries, the
 * balancer, the upstream Host).
 */
#include "worker/core/core.h"

#include <string.h>

#include "shm/shm.h"

/* The side named by the override, or -1. */
static int split_forced(const struct txn *t, const struct route_split *s)
{
	const struct route_upstream *ups = route_upstreams(t->table);
	size_t vl;
	const char *v = ratelimit_part_value(t, s->ovr_kind == SPLIT_OVERRIDE_HEADER ? CONFIG_RL_HEADER : CONFIG_RL_COOKIE,
	                                     s->ovr_name, s->ovr_len, &vl);

	for (int k = 0; v && k < s->nsides; k++) {
		const char *name = ups[s->upstream[k]].name;

		if (strlen(name) == vl && !memcmp(name, v, vl))
			return k;
	}
	return -1; /* none, or a name that is no side's: the split decides */
}

/* The bucket of <t>'s key; -1 when the request has none (or it is empty). */
static int32_t split_key_bucket(const struct txn *t, const struct route_split *s)
{
	const void *v = NULL;
	size_t vl = 0;
	uint8_t a[16];

	if (!s->has_key)
		return -1;
	if (s->key_kind == CONFIG_RL_CLIENT_IP) {
		/* the address as bytes (IPv4 as its 4): the same bucket
		 * whichever way the text of the address was written */
		int fam = ratelimit_client_addr(t, a);

		if (fam)
			v = fam == 4 ? a + 12 : a, vl = fam == 4 ? 4 : 16;
	} else {
		v = ratelimit_part_value(t, s->key_kind, s->key_name, s->key_len, &vl);
	}
	return v && vl ? (int32_t)split_bucket(v, vl) : -1;
}

void split_choose(struct txn *t)
{
	const struct route_entry *e = t->route;
	const struct route_split *s = &route_splits(t->table)[e->split - 1];
	const struct route_upstream *ups = route_upstreams(t->table);
	struct shm_route_counters *rc = &wk.rcnt[e->stat];
	int side = s->ovr_kind ? split_forced(t, s) : -1;

	if (side >= 0) {
		SHM_ADD(rc, split_override, 1);
	} else {
		int32_t b = split_key_bucket(t, s);

		if (b < 0) {
			/* no key: drawn by weight, as the buckets share out */
			b = (int32_t)(realip_random() % SPLIT_BUCKETS);
			SHM_ADD(rc, split_random, 1);
		}
		side = split_side(s->bound, s->nsides, (uint32_t)b);
	}
	t->sp.side = (uint8_t)side;
	t->sp.upstream_plus1 = (uint16_t)(s->upstream[side] + 1);
	SHM_ADD(rc, split[side], 1);
	/* the route's settings are its first side's group's unless it has
	 * its own (route.c): then the chosen group's are read instead */
	if (e->settings == ups[e->upstream].settings)
		t->set = &route_settings_all(t->table)[ups[s->upstream[side]].settings];
}
