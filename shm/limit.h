/*
 * limit.h: rate-limit state shared by every worker, exact across them and
 * kept across reloads and binary upgrades.
 *
 * Principle: one value per key, in a hash table in a segment of its own
 * (a memfd the master makes before the first fork and hands to a new
 * master on upgrade, like the main segment). For a rate the value is
 * GCRA's theoretical arrival time (TAT, CLOCK_MONOTONIC nanoseconds, a
 * clock every process of the machine shares); for a concurrency limit it
 * is the count of requests in flight. Every change is one compare-and-
 * swap on that 64-bit word, so no two workers can both take the last
 * token: over any interval t at most burst + rate x t requests of a key
 * are admitted, whatever the number of workers. A request under several
 * limits reads them all, decides, then swaps them in order; if a swap
 * fails (another worker got there first) the ones already swapped are
 * given back and the whole decision is made again, so nothing is consumed
 * when any limit refuses.
 *
 * The table: buckets of LIMIT_WAYS entries, 256 bytes each (four cache
 * lines), picked by a keyed hash (SipHash-1-3 with a secret made with the
 * segment: keys chosen by clients cannot be aimed at one bucket). Lookup
 * reads at most one bucket and writes nothing but the value and a last-use
 * stamp. Inserting a key is serialised per bucket by an insert word (a
 * try-lock held for a few dozen instructions; its holder's claim time is
 * in it, so a holder that died or stalled past a second is overtaken), so
 * that a key is never in two entries; it takes, in order: an empty entry;
 * an expired one (a TAT already past, a count of zero: the same as no
 * state, nothing is lost); the least recently used one that has no
 * request in flight (its key starts again from rest if it returns,
 * counted as an eviction). When every entry of the bucket holds requests
 * in flight, the key is limited under its limit's one overflow entry,
 * shared by all such keys and counted (weir_rate_limit_table_full_total):
 * the table never grows, never crashes and never lets a request through
 * unlimited.
 *
 * Keys are 64-bit hashes of (limit seed, key bytes); two keys of one limit
 * share a state only if their hashes collide (about 2^-40 for a million
 * keys). An evictor first swaps the value to LIMIT_BUSY, then stores the
 * new key and value; readers load the value before they re-check the key,
 * so a swap never lands on an entry that changed hands. The new value is
 * LIMIT_FRESH, read as rest by a decision: an entry at rest is otherwise
 * the first an insert takes, so between its insert and its first take
 * (another worker may insert in between) a new key would lose its entry
 * to the next new key of the bucket, and both fail their take, over and
 * over. One never taken (its request refused by another limit, its
 * worker gone) is free again after a second.
 *
 * scope = "cluster" limits also count each admission in the entry's
 * unsynced word and, when it leaves zero, push the entry's index into a
 * ring the master drains each redis interval (master/redis_sync.c).
 */
#ifndef WEIR_SHM_LIMIT_H
#define WEIR_SHM_LIMIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "shm/shm.h"

#define LIMIT_MAGIC   0x4c524957u /* "WIRL" */
#define LIMIT_VERSION 4u /* 4: LIMIT_FRESH */
#define LIMIT_RING    65536 /* entries with cluster counts not yet sent to redis */
#define LIMIT_WAYS    10
#define LIMIT_IDS     128 /* limit names the segment counts, over reloads */
#define LIMIT_BUSY    UINT64_MAX
#define LIMIT_FRESH   (UINT64_MAX - 1) /* inserted, not yet taken: at rest, not free */

/* Results of one limit's decision, weir_rate_limit_decisions_total{result} */
#define LIMIT_RESULT_TABLE(X)                                                                                          \
	X(ALLOWED, "allowed")                                                                                          \
	X(DELAYED, "delayed")                                                                                          \
	X(REJECTED, "rejected")                                                                                        \
	X(DRY_RUN, "dry_run")                                                                                          \
	X(TABLE_FULL, "table_full")

enum limit_result {
#define LIMIT_RESULT_ENUM(name, label) LIMIT_##name,
	LIMIT_RESULT_TABLE(LIMIT_RESULT_ENUM)
#undef LIMIT_RESULT_ENUM
	    LIMIT_RESULTS
};
extern const char *const limit_result_names[LIMIT_RESULTS];

struct limit_entry {
	_Atomic uint64_t key;      /* 0: empty; low bit: 1 for a concurrency count */
	_Atomic uint64_t val;      /* TAT in ns, or requests in flight; LIMIT_BUSY, LIMIT_FRESH */
	_Atomic uint32_t last;     /* last use, ms (wraps every 49 days), for LRU */
	_Atomic uint32_t unsynced; /* scope = "cluster": admitted here, not yet told to redis */
};

struct limit_bucket {
	_Atomic uint64_t insert; /* 0, or (claim time in ms) | 1 while a key is inserted */
	struct limit_entry way[LIMIT_WAYS];
	uint64_t pad;
};

/* A limit name the segment has seen: its counters keep its index. */
struct limit_id {
	char name[CONFIG_NAME_MAX];
	uint64_t seed; /* the identity the name now has (config_rate_limit.seed) */
};

/* One adaptive limit's state: the factor its rate is scaled by, per
 * mille (0, a segment never written, reads as 1000), and what made it. */
struct limit_adaptive {
	_Atomic uint32_t factor;
	_Atomic uint32_t p99_us;  /* the upstream's p99 over the window; 0: no answers in it */
	_Atomic uint32_t err_pm;  /* its 5xx answers over the window, per mille */
	_Atomic uint32_t breaker; /* 1 while the group's breaker is open */
	_Atomic uint64_t answers; /* answers in the window */
};

/* The emission interval of a limit of interval <base> whose adaptive factor
 * is <pm> per mille, held to <floor> (ns; 0: none): one relaxed load and a
 * divide per decision on the worker's side. */
static inline uint64_t limit_adaptive_interval(uint64_t base, uint32_t pm, uint64_t floor)
{
	uint64_t v;

	if (!pm || pm >= 1000)
		return base;
	v = base * 1000u / pm;
	return floor && v > floor ? floor : v;
}

struct limit_segment {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	uint64_t nbuckets;
	uint64_t secret[2];                /* SipHash key, made with the segment */
	_Atomic uint32_t nids;             /* ids[] in use; master only writes */
	_Alignas(64) _Atomic int64_t used; /* entries holding a key */
	_Atomic uint64_t evicted_expired;
	_Atomic uint64_t evicted_lru;
	/* scope = "cluster" (master/redis_sync.c): entries with counts to
	 * send, pushed by workers (an entry once per interval: when its
	 * unsynced count leaves zero), taken by the master; lossy when full */
	_Alignas(64) _Atomic uint64_t ring_head;
	_Atomic uint64_t ring_tail; /* written by the master only */
	_Atomic uint64_t ring_dropped;
	_Atomic uint32_t redis_down;                                        /* 1 while the master cannot reach redis */
	_Atomic uint64_t redis_syncs_ok, redis_syncs_failed, redis_sync_us; /* replies, and their latency summed */
	_Atomic uint64_t ring[LIMIT_RING]; /* limit id << 32 | (entry index + 1); 0: not yet written */
	/* rate_limits.adaptive (master/adaptive.h), per limit id: written by
	 * the master each tick, the factor read by workers once per decision */
	_Alignas(64) struct limit_adaptive adapt[LIMIT_IDS];
	_Alignas(64) struct limit_id ids[LIMIT_IDS];
	struct limit_entry overflow[LIMIT_IDS]; /* one per limit id: keys with no room */
	/* per worker slot, per id, per result; single writer (the slot's
	 * worker), relaxed; a slot reused by a new worker counts on from the
	 * old values, so sums never go back and nothing needs folding */
	_Alignas(64) uint64_t counts[SHM_SLOTS][LIMIT_IDS][LIMIT_RESULTS];
	_Alignas(64) struct limit_bucket buckets[];
};

/* The segment this process uses (set by the master before it forks),
 * and its memfd (the master's, for a binary upgrade; -1 if none). */
extern struct limit_segment *limit_seg;
extern int limit_seg_fd;

/* Master at start: takes over the segment in <inherited_fd> (>= 0 on a
 * binary upgrade: the state goes on) or makes one for
 * cfg->rate_limit_table keys, then gives <cfg>'s limits their ids.
 * Returns 0, or -1 (logged). */
int limit_start(struct config *cfg, int inherited_fd);

/* Master on reload: gives <cfg>'s limits their ids; the table keeps its
 * size (said once when rate_limit_table asks for another). */
void limit_reload(struct config *cfg);

/* Bytes of a segment that holds <keys> keys. */
size_t limit_segment_size(uint32_t keys);

/* Creates a zeroed segment for <keys> keys in a memfd (*fd), or in plain
 * memory when <fd> is NULL (tests). NULL with errno on failure. */
struct limit_segment *limit_create(uint32_t keys, int *fd);

/* Maps the segment in <fd> (binary upgrade); NULL with *why if it is not
 * one this build reads. */
struct limit_segment *limit_attach(int fd, const char **why);

/* Master: gives each of <cfg>'s limits its id (by name, kept while the
 * name stays) and logs a limit whose key changed (its state starts
 * afresh: the seed differs). */
void limit_assign(struct limit_segment *s, struct config *cfg);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t limit_now(void);

/* The key hash (SipHash-1-3, keyed by the segment's secret) of <seed>
 * then <len> bytes <k>, for a limit of that seed; <concurrent> marks it
 * as a count (the low bit). Never 0 or 1. */
uint64_t limit_hash(const struct limit_segment *s, uint64_t seed, int concurrent, const void *k, size_t len);

/* The entry of key <h>, inserted if new (evicting as the header says);
 * when there is no room, the overflow entry of limit <id>, keyed by the
 * hash of its <seed> alone. *held is the key the entry holds: <h>, or the
 * overflow's (the table was full for it). */
struct limit_entry *limit_find(struct limit_segment *s, uint64_t h, uint64_t seed, uint32_t id, uint64_t now,
                               uint64_t *held);

/* What a request asks of one limit. */
struct limit_ask {
	struct limit_entry *e;
	uint64_t key;       /* the key hash the entry must still hold */
	uint64_t interval;  /* rate: ns per request; 0: a concurrency limit */
	uint64_t tolerance; /* rate: burst x interval; concurrency: the maximum in flight */
	int delay;          /* rate: queue (GCRA with a start time) rather than refuse */
	int advisory;       /* dry run: decided and counted, never refuses */
	/* out */
	uint64_t old, new; /* the value read and the value to swap in */
	int refused;
	uint64_t wait;      /* refused rate: ns until it would be admitted; delay: ns to wait */
	uint64_t remaining; /* requests admitted at once after this one */
	uint64_t reset;     /* ns until the key is at rest again */
};

/* Decides one limit for a value <v> at <now> into <a> (pure: the unit
 * tests drive it). */
void limit_decide(struct limit_ask *a, uint64_t v, uint64_t now);

/* Decides and commits all <n> asks, all or nothing: 1 if every one that
 * is not advisory admits (and all were swapped in), 0 if one refused
 * (nothing consumed). -2 when an entry changed hands (find them again
 * and call again), -1 if the values kept changing under it a thousand
 * times (treat as refused; nothing consumed). */
int limit_take(struct limit_ask *a, int n, uint64_t now);

/* Gives back what an admitted ask took: a request in flight ended (a
 * concurrency limit). */
void limit_release(struct limit_entry *e);

/* Counts <n> of <result> for limit <id> in worker slot <slot>. */
static inline void limit_count(struct limit_segment *s, int slot, uint32_t id, int result)
{
	uint64_t *p = &s->counts[slot][id][result];

	atomic_store_explicit((_Atomic uint64_t *)p, *p + 1, memory_order_relaxed);
}

/* Worker: notes an admission of cluster limit <id> on <e> (not an
 * overflow entry) for the next reconcile. */
void limit_mark(struct limit_segment *s, struct limit_entry *e, uint32_t id);

/* The entry of index <i> (bucket x LIMIT_WAYS + way), or NULL. */
struct limit_entry *limit_entry_at(struct limit_segment *s, uint32_t i);

/* The key hash a cluster limit uses: the same on every node (a fixed
 * SipHash key: redis names the key by it), so not flooding-proof. */
uint64_t limit_hash_cluster(uint64_t seed, const void *k, size_t len);

/* The sum over the slots of <result> for limit <id>. */
uint64_t limit_sum(const struct limit_segment *s, uint32_t id, int result);

#endif
