/*
 * limit.c: the shared rate-limit table and GCRA (shm/limit.h says how).
 *
 * What each atomic costs and why it is there:
 *  - the value's compare-and-swap (a locked cmpxchg: some 20 cycles on a
 *    line this core holds, a cache-line transfer when another core wrote
 *    it last) is the one write a decision needs: it is what makes two
 *    workers unable to both take the last token;
 *  - the loads of key and value are plain moves on x86 (acquire costs no
 *    fence there); the value is loaded before the key is checked again, so
 *    a swap never lands on an entry that changed hands in between;
 *  - the last-use stamp is a relaxed store, made only when the millisecond
 *    changed: LRU order needs no more;
 *  - the insert word's swap (locked) is paid only by a key not in the
 *    table; counters are relaxed stores into the worker's own slot.
 */
#include "shm/limit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

_Static_assert(sizeof(struct limit_bucket) == 256, "a bucket is four cache lines");

const char *const limit_result_names[LIMIT_RESULTS] = {
#define LIMIT_RESULT_NAME(name, label) label,
    LIMIT_RESULT_TABLE(LIMIT_RESULT_NAME)
#undef LIMIT_RESULT_NAME
};

struct limit_segment *limit_seg;
int limit_seg_fd = -1;

static uint64_t limit_buckets_for(uint32_t keys)
{
	return ((uint64_t)keys + LIMIT_WAYS - 1) / LIMIT_WAYS;
}

size_t limit_segment_size(uint32_t keys)
{
	return sizeof(struct limit_segment) + limit_buckets_for(keys) * sizeof(struct limit_bucket);
}

struct limit_segment *limit_create(uint32_t keys, int *fd)
{
	size_t size = limit_segment_size(keys);
	struct limit_segment *s;
	int mfd = -1;

	if (fd) {
		mfd = memfd_create("weir-limits", MFD_CLOEXEC);
		if (mfd < 0)
			return NULL;
		if (ftruncate(mfd, (off_t)size) < 0) {
			int saved = errno;
			close(mfd);
			errno = saved;
			return NULL;
		}
	}
	/* sparse either way: a bucket no key reached costs no memory */
	s = mmap(NULL, size, PROT_READ | PROT_WRITE, fd ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, mfd, 0);
	if (s == MAP_FAILED) {
		int saved = errno;
		if (mfd >= 0)
			close(mfd);
		errno = saved;
		return NULL;
	}
	s->magic = LIMIT_MAGIC;
	s->version = LIMIT_VERSION;
	s->size = size;
	s->nbuckets = limit_buckets_for(keys);
	if (getrandom(s->secret, sizeof(s->secret), 0) != sizeof(s->secret)) {
		/* no entropy yet at boot: the time still keeps buckets apart,
		 * if not from a patient attacker */
		s->secret[0] = limit_now() ^ 0x736f6d6570736575ull;
		s->secret[1] = (uint64_t)getpid() ^ 0x646f72616e646f6dull;
	}
	if (fd)
		*fd = mfd;
	return s;
}

struct limit_segment *limit_attach(int fd, const char **why)
{
	struct stat st;
	struct limit_segment *s;

	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(*s)) {
		*why = "rate-limit segment too small";
		return NULL;
	}
	s = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		*why = "cannot map the rate-limit segment";
		return NULL;
	}
	if (s->magic != LIMIT_MAGIC || s->version != LIMIT_VERSION || s->size != (uint64_t)st.st_size ||
	    s->size != sizeof(*s) + s->nbuckets * sizeof(struct limit_bucket)) {
		munmap(s, (size_t)st.st_size);
		*why = "rate-limit segment magic, version or size differs from this build";
		return NULL;
	}
	return s;
}

void limit_assign(struct limit_segment *s, struct config *cfg)
{
	uint8_t live[LIMIT_IDS] = {0};

	for (int i = 0; i < cfg->nrate_limits; i++) {
		struct config_rate_limit *l = &cfg->rate_limits[i];
		uint32_t n = atomic_load_explicit(&s->nids, memory_order_relaxed), k;

		for (k = 0; k < n && strcmp(s->ids[k].name, l->name); k++)
			;
		if (k == n && n == LIMIT_IDS) {
			/* every id named once: take one this config does not use
			 * (a draining worker may still count into it: a few counts
			 * of the old name land on the new one) */
			for (k = 0; k < LIMIT_IDS && live[k]; k++)
				;
			for (uint32_t j = 0; j < LIMIT_IDS && k < LIMIT_IDS; j++) {
				int used = 0;
				for (int c = 0; c < cfg->nrate_limits; c++)
					used |= !strcmp(s->ids[k].name, cfg->rate_limits[c].name);
				if (!used)
					break;
				k++;
			}
			if (k >= LIMIT_IDS)
				k = LIMIT_IDS - 1; /* cannot happen: a config has at most 64 */
			for (int w = 0; w < SHM_SLOTS; w++)
				memset(s->counts[w][k], 0, sizeof(s->counts[w][k]));
			memset(&s->ids[k], 0, sizeof(s->ids[k]));
		}
		if (!s->ids[k].name[0]) {
			memcpy(s->ids[k].name, l->name, sizeof(s->ids[k].name));
			s->ids[k].seed = l->seed;
			if (k == n)
				atomic_store_explicit(&s->nids, n + 1, memory_order_release);
		} else if (s->ids[k].seed != l->seed) {
			log_notice("rate limit \"%s\": its key or kind changed (now \"%s\"%s); its state starts afresh",
			           l->name, l->key, l->concurrent ? ", concurrent" : "");
			s->ids[k].seed = l->seed;
		}
		live[k] = 1;
		l->id = k;
	}
}

uint64_t limit_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                                       \
	do {                                                                                                           \
		v0 += v1;                                                                                              \
		v1 = ROTL(v1, 13);                                                                                     \
		v1 ^= v0;                                                                                              \
		v0 = ROTL(v0, 32);                                                                                     \
		v2 += v3;                                                                                              \
		v3 = ROTL(v3, 16);                                                                                     \
		v3 ^= v2;                                                                                              \
		v0 += v3;                                                                                              \
		v3 = ROTL(v3, 21);                                                                                     \
		v3 ^= v0;                                                                                              \
		v2 += v1;                                                                                              \
		v1 = ROTL(v1, 17);                                                                                     \
		v1 ^= v2;                                                                                              \
		v2 = ROTL(v2, 32);                                                                                     \
	} while (0)

/*
 * SipHash-1-3 (one round per block, three to finish: the variant Rust's
 * and Python's hash tables use against flooding) of the seed, then <len>
 * bytes of <k>. Here rather than BoringSSL's SipHash-2-4: half the rounds
 * and no call, on a path every request of a limited route takes.
 */
static uint64_t limit_siphash(const uint64_t key[2], uint64_t seed, const uint8_t *k, size_t len)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
	uint64_t m, b = (uint64_t)(len + 8) << 56;
	size_t i = 0;

	v3 ^= seed;
	SIPROUND;
	v0 ^= seed;
	for (; i + 8 <= len; i += 8) {
		memcpy(&m, k + i, 8);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	m = 0;
	if (len > i)
		memcpy(&m, k + i, len - i);
	b |= m;
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t limit_hash_cluster(uint64_t seed, const void *k, size_t len)
{
	static const uint64_t fixed[2] = {0x7765697220726c20ull, 0x636c757374657221ull};
	uint64_t h = limit_siphash(fixed, seed, k, len) & ~(uint64_t)1;

	return h < 2 ? h + 2 : h;
}

void limit_mark(struct limit_segment *s, struct limit_entry *e, uint32_t id)
{
	uint64_t i;

	if (atomic_fetch_add_explicit(&e->unsynced, 1, memory_order_relaxed))
		return; /* already in the ring */
	i = atomic_fetch_add_explicit(&s->ring_head, 1, memory_order_relaxed);
	if (i - atomic_load_explicit(&s->ring_tail, memory_order_relaxed) >=
	    LIMIT_RING) { /* the master is behind: counted, not sent */
		atomic_fetch_add_explicit(&s->ring_dropped, 1, memory_order_relaxed);
		atomic_store_explicit(&e->unsynced, 0, memory_order_relaxed);
		return;
	}
	{
		size_t off = (size_t)((const char *)e - (const char *)s->buckets);
		uint32_t idx = (uint32_t)(off / sizeof(struct limit_bucket) * LIMIT_WAYS +
		                          (off % sizeof(struct limit_bucket) - offsetof(struct limit_bucket, way)) /
		                              sizeof(struct limit_entry));

		atomic_store_explicit(&s->ring[i % LIMIT_RING], (uint64_t)id << 32 | (idx + 1), memory_order_release);
	}
}

struct limit_entry *limit_entry_at(struct limit_segment *s, uint32_t i)
{
	if (i / LIMIT_WAYS >= s->nbuckets)
		return NULL;
	return &s->buckets[i / LIMIT_WAYS].way[i % LIMIT_WAYS];
}

uint64_t limit_hash(const struct limit_segment *s, uint64_t seed, int concurrent, const void *k, size_t len)
{
	uint64_t h = limit_siphash(s->secret, seed, k, len);

	h = (h & ~(uint64_t)1) | (uint64_t)(concurrent != 0);
	return h < 2 ? h + 2 : h;
}

/* An entry whose value is the same as no state at all: at rest, or
 * inserted and left untaken for a second (<age>: ms since its last use). */
static int limit_expired(uint64_t key, uint64_t val, uint64_t now, uint32_t age)
{
	if (val == LIMIT_FRESH)
		return age > 1000;
	return val != LIMIT_BUSY && ((key & 1) ? val == 0 : val <= now);
}

/* Can it go, if nothing better is there: no request of it in flight. */
static int limit_evictable(uint64_t key, uint64_t val)
{
	return val < LIMIT_FRESH && (!(key & 1) || val == 0);
}

static struct limit_entry *limit_lookup(struct limit_bucket *b, uint64_t h)
{
	for (int w = 0; w < LIMIT_WAYS; w++)
		if (atomic_load_explicit(&b->way[w].key, memory_order_acquire) == h)
			return &b->way[w];
	return NULL;
}

static void limit_touch(struct limit_entry *e, uint64_t now)
{
	uint32_t ms = (uint32_t)(now / 1000000u);

	if (atomic_load_explicit(&e->last, memory_order_relaxed) != ms)
		atomic_store_explicit(&e->last, ms, memory_order_relaxed);
}

/* Takes the insert word of <b>; 0 if it stayed busy (its holder is
 * inserting: a few dozen instructions, unless it was preempted). */
static int limit_insert_lock(struct limit_bucket *b, uint64_t now)
{
	uint64_t mine = (now / 1000000u) | 1;

	for (int spin = 0; spin < 4096; spin++) {
		uint64_t cur = atomic_load_explicit(&b->insert, memory_order_relaxed);

		/* claim times in 2 ms units, stale after about a second; signed,
		 * as another worker's claim may be a little later than our now */
		if (cur && (int64_t)((mine >> 1) - (cur >> 1)) < 500) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&b->insert, &cur, mine, memory_order_acquire,
		                                          memory_order_relaxed))
			return 1;
	}
	return 0;
}

/* Picks the way a new key takes: empty, else expired, else the least
 * recently used without requests in flight; -1 when none can go. */
static int limit_victim(struct limit_bucket *b, uint64_t now, int *kind)
{
	int lru = -1, expired = -1;
	uint32_t now_ms = (uint32_t)(now / 1000000u), age = 0;

	for (int w = 0; w < LIMIT_WAYS; w++) {
		uint64_t k = atomic_load_explicit(&b->way[w].key, memory_order_acquire);
		uint64_t v = atomic_load_explicit(&b->way[w].val, memory_order_acquire);
		uint32_t a;

		if (!k) {
			*kind = 0;
			return w;
		}
		if (expired >= 0)
			continue; /* only an empty way is better */
		a = now_ms - atomic_load_explicit(&b->way[w].last, memory_order_relaxed);
		if (limit_expired(k, v, now, a))
			expired = w;
		else if (limit_evictable(k, v) && (lru < 0 || a > age)) {
			lru = w;
			age = a;
		}
	}
	*kind = expired >= 0 ? 1 : 2;
	return expired >= 0 ? expired : lru;
}

/* The overflow entry of limit <id>, made over to key <h> if it held
 * another limit's (a key change with a full table: rare, and the first
 * few requests may meet its old value). */
static struct limit_entry *limit_overflow(struct limit_segment *s, uint64_t h, uint32_t id)
{
	struct limit_entry *e = &s->overflow[id % LIMIT_IDS];
	uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);

	if (k != h && atomic_compare_exchange_strong(&e->key, &k, h))
		atomic_store_explicit(&e->val, 0, memory_order_release);
	return e;
}

struct limit_entry *limit_find(struct limit_segment *s, uint64_t h, uint64_t seed, uint32_t id, uint64_t now,
                               uint64_t *held)
{
	struct limit_bucket *b = &s->buckets[(uint64_t)(((unsigned __int128)h * s->nbuckets) >> 64)];
	struct limit_entry *e = limit_lookup(b, h);
	int w, kind;

	*held = h;
	if (e) {
		limit_touch(e, now);
		return e;
	}
	if (!limit_insert_lock(b, now)) {
		/* the overflow's key: the limit's own, made only here */
		*held = limit_hash(s, seed, (int)(h & 1), NULL, 0);
		return limit_overflow(s, *held, id);
	}
	e = limit_lookup(b, h); /* inserted while we waited for the word */
	for (int tries = 0; !e; tries++) {
		uint64_t v, k;

		w = tries < 64 ? limit_victim(b, now, &kind) : -1;
		if (w < 0) {
			*held = limit_hash(s, seed, (int)(h & 1), NULL, 0);
			e = limit_overflow(s, *held, id);
			break;
		}
		e = &b->way[w];
		k = atomic_load_explicit(&e->key, memory_order_acquire);
		v = atomic_load_explicit(&e->val, memory_order_acquire);
		if (v == LIMIT_BUSY || !atomic_compare_exchange_strong(&e->val, &v, LIMIT_BUSY)) {
			e = NULL; /* its key was used meanwhile: choose again */
			continue;
		}
		/* ours alone now: a reader that loads LIMIT_BUSY looks again */
		atomic_store_explicit(&e->key, h, memory_order_relaxed);
		atomic_store_explicit(&e->last, (uint32_t)(now / 1000000u), memory_order_relaxed);
		atomic_store_explicit(&e->unsynced, 0, memory_order_relaxed);
		atomic_store_explicit(&e->val, LIMIT_FRESH, memory_order_release);
		if (!k)
			atomic_fetch_add_explicit(&s->used, 1, memory_order_relaxed);
		else if (kind == 1)
			atomic_fetch_add_explicit(&s->evicted_expired, 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&s->evicted_lru, 1, memory_order_relaxed);
	}
	atomic_store_explicit(&b->insert, 0, memory_order_release);
	return e;
}

void limit_decide(struct limit_ask *a, uint64_t v, uint64_t now)
{
	a->old = v;
	a->refused = 0;
	a->wait = 0;
	if (!a->interval) {
		/* concurrency: tolerance is the maximum in flight */
		a->refused = v >= a->tolerance;
		a->new = a->refused ? v : v + 1;
		a->remaining = a->refused ? 0 : a->tolerance - a->new;
		a->reset = 0;
		return;
	}
	uint64_t tat = v > now ? v : now;

	if (a->delay) {
		/* served at <tat>, queued behind (tat - now) / interval others:
		 * admitted while that queue is at most burst long */
		a->refused = tat - now > a->tolerance;
		a->wait = a->refused ? tat - now - a->tolerance : tat - now;
		a->new = a->refused ? v : tat + a->interval;
	} else {
		/* admitted while the new TAT stays within burst intervals of now */
		uint64_t next = tat + a->interval;

		a->refused = next - now > a->tolerance;
		a->wait = a->refused ? next - now - a->tolerance : 0;
		a->new = a->refused ? v : next;
	}
	{
		uint64_t t = a->refused ? tat : a->new;
		uint64_t room = now + a->tolerance > t ? now + a->tolerance - t : 0;

		a->remaining = a->delay ? 0 : room / a->interval;
		a->reset = t > now ? t - now : 0;
	}
}

/* Gives back what a committed ask took, unless its entry changed hands
 * (then its state went back to rest anyway). */
static void limit_undo(struct limit_ask *a)
{
	uint64_t v = atomic_load_explicit(&a->e->val, memory_order_acquire);

	for (;;) {
		uint64_t back;

		if (v >= LIMIT_FRESH || atomic_load_explicit(&a->e->key, memory_order_acquire) != a->key)
			return;
		if (!a->interval)
			back = v ? v - 1 : 0;
		else
			back = v > a->interval ? v - a->interval : 0;
		if (atomic_compare_exchange_weak(&a->e->val, &v, back))
			return;
	}
}

int limit_take(struct limit_ask *a, int n, uint64_t now)
{
	for (int attempt = 0; attempt < 1000; attempt++) {
		int refused = 0, i, moved = 0;

		for (i = 0; i < n; i++) {
			uint64_t v = atomic_load_explicit(&a[i].e->val, memory_order_acquire);

			if (v == LIMIT_BUSY || atomic_load_explicit(&a[i].e->key, memory_order_acquire) != a[i].key) {
				/* changing hands: the caller finds it again */
				return -2;
			}
			limit_decide(&a[i], v == LIMIT_FRESH ? 0 : v, now);
			a[i].old = v; /* what the swap expects */
			if (a[i].refused && a[i].advisory)
				continue;
			refused |= a[i].refused;
		}
		if (refused)
			return 0;
		for (i = 0; i < n; i++) {
			uint64_t expect = a[i].old;

			if (a[i].refused) /* advisory: nothing to take */
				continue;
			if (!atomic_compare_exchange_strong(&a[i].e->val, &expect, a[i].new)) {
				moved = 1;
				break;
			}
		}
		if (!moved)
			return 1;
		while (i-- > 0)
			if (!a[i].refused)
				limit_undo(&a[i]);
		now = limit_now();
	}
	return -1;
}

void limit_release(struct limit_entry *e)
{
	/* held by us, so above zero and never evicted meanwhile; but an
	 * overflow entry made over to another limit restarts from zero */
	uint64_t v = atomic_load_explicit(&e->val, memory_order_relaxed);

	while (v && v < LIMIT_FRESH && !atomic_compare_exchange_weak(&e->val, &v, v - 1))
		;
}

uint64_t limit_sum(const struct limit_segment *s, uint32_t id, int result)
{
	uint64_t t = 0;

	for (int w = 0; w < SHM_SLOTS; w++)
		t += atomic_load_explicit((_Atomic uint64_t *)&s->counts[w][id][result], memory_order_relaxed);
	return t;
}

/* Keys the table of <s> holds. */
static uint64_t limit_keys(const struct limit_segment *s)
{
	return s->nbuckets * LIMIT_WAYS;
}

static void limit_size_note(const struct config *cfg)
{
	if (limit_buckets_for(cfg->rate_limit_table) != limit_seg->nbuckets)
		log_notice("rate_limit_table = %u: the table in use holds %llu keys and keeps them; a new size applies "
		           "at the next start (not at a reload or binary upgrade, which keep the state)",
		           cfg->rate_limit_table, (unsigned long long)limit_keys(limit_seg));
}

int limit_start(struct config *cfg, int inherited_fd)
{
	if (inherited_fd >= 0) {
		const char *why = NULL;

		limit_seg = limit_attach(inherited_fd, &why);
		if (limit_seg) {
			limit_seg_fd = inherited_fd;
			limit_size_note(cfg);
		} else {
			log_warn("upgrade: %s; rate limits start afresh", why);
			close(inherited_fd);
		}
	}
	if (!limit_seg) {
		limit_seg = limit_create(cfg->rate_limit_table, &limit_seg_fd);
		if (!limit_seg) {
			log_error("cannot create the rate-limit table (%u keys, %zu bytes): %s", cfg->rate_limit_table,
			          limit_segment_size(cfg->rate_limit_table), strerror(errno));
			return -1;
		}
	}
	limit_assign(limit_seg, cfg);
	return 0;
}

void limit_reload(struct config *cfg)
{
	limit_size_note(cfg);
	limit_assign(limit_seg, cfg);
}
