/*
 * shm.h: the segment shared by the master and its workers.
 *
 * Principle: one memfd-backed mapping with a fixed layout, a magic and a
 * layout version, checked at attach. It holds three things:
 *
 *  - route tables, as generations: the master writes the next generation in
 *    a slot no live worker can be reading and publishes it with one atomic
 *    store (release); a worker takes the current one (acquire) per request
 *    (route.h);
 *  - one cache-line-aligned counter block per worker slot, written only by
 *    the worker in that slot (single writer, relaxed stores: no locked
 *    instruction on the hot path), read and summed by the master;
 *  - the "retired" block, into which the master folds the counters of a
 *    worker that exited, so totals never go backwards.
 *
 * The segment is created by the master before it forks, so every worker
 * inherits the mapping at the same address; its fd can be handed to a new
 * master on binary upgrade.
 */
#ifndef WEIR_SHM_SHM_H
#define WEIR_SHM_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "shm/route.h"

#define SHM_MAGIC 0x52494557u /* "WEIR" */
#define SHM_LAYOUT_VERSION 1u
#define SHM_SLOTS 128 /* worker slots: twice the worker maximum, for reloads */
#define SHM_GENS 4    /* route generations */

/* One worker's counters. Counters only grow; gauges go up and down. */
struct shm_counters {
	uint64_t requests;          /* requests whose head was read */
	uint64_t responses[6];      /* by status class: [1]..[5]; [0] unused */
	uint64_t bytes_in;          /* bytes read from clients */
	uint64_t bytes_out;         /* bytes written to clients */
	uint64_t conn_total;        /* client connections accepted */
	uint64_t upstream_connects; /* upstream connections opened */
	uint64_t upstream_reuses;   /* requests sent on a pooled connection */
	uint64_t upstream_retries;  /* requests sent again after a failure */
	uint64_t errors[WEIR_ERR_COUNT];
	/* gauges */
	uint64_t conn_active;       /* client connections open */
	uint64_t upstream_active;   /* upstream connections open */
	uint64_t slab_in_use;       /* slab bytes handed out */
	uint64_t slab_free;         /* slab bytes mapped, not handed out */
};

/* Fields from <requests> to <errors> are counters; the rest are gauges. */
#define SHM_COUNTERS_MONOTONIC offsetof(struct shm_counters, conn_active)

enum shm_slot_state {
	SHM_SLOT_FREE = 0,
	SHM_SLOT_RUNNING,
	SHM_SLOT_DRAINING,
};

struct shm_slot {
	_Alignas(64) struct shm_counters c;
	_Alignas(64) _Atomic uint64_t gen_seen; /* generation id the worker last took */
	_Atomic int32_t pid;
	_Atomic int32_t state;
};

struct shm_segment {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	_Atomic uint32_t gen_current; /* index into gens[] */
	uint64_t gen_next_id;         /* master only */
	uint64_t started_at;          /* unix seconds */
	_Atomic uint64_t worker_restarts;
	_Atomic uint64_t reloads_ok;
	_Atomic uint64_t reloads_failed;
	_Atomic uint64_t config_generation; /* 1 at start, +1 per reload */
	_Alignas(64) struct shm_counters retired; /* master only */
	struct shm_slot slots[SHM_SLOTS];
	struct route_table gens[SHM_GENS];
};

/* Single-writer counter update: a relaxed load and store, no lock prefix. */
#define SHM_ADD(cnt, field, n) \
	atomic_store_explicit((_Atomic uint64_t *)&(cnt)->field, (cnt)->field + (uint64_t)(n), memory_order_relaxed)
#define SHM_SET(cnt, field, v) \
	atomic_store_explicit((_Atomic uint64_t *)&(cnt)->field, (uint64_t)(v), memory_order_relaxed)

/* Creates and maps a zeroed segment. Returns it, or NULL with errno. *fd
 * receives the memfd (kept for hand-over). */
struct shm_segment *shm_create(int *fd);

/* Maps an existing segment from <fd>; NULL if the magic, version or size
 * do not match this binary (a message goes to *why). */
struct shm_segment *shm_attach(int fd, const char **why);

/* Sums every slot and the retired block into <out>. */
void shm_sum(struct shm_segment *seg, struct shm_counters *out);

/* Claims a free worker slot (marks it running); -1 if none. Atomic, as
 * two masters share the segment during a binary upgrade. */
int shm_slot_claim(struct shm_segment *seg);

/* Folds the counters of slot <i> into the retired block and clears the slot,
 * for a worker that has exited. Master only. */
void shm_slot_retire(struct shm_segment *seg, int i);

#endif
