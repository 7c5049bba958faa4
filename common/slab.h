/*
 * slab.h: a worker's private memory for connections, requests and buffers.
 *
 * Principle: every object a connection needs comes from a free list of its
 * size class, so the request path never calls malloc or free. A class grows
 * by mapping a chunk of objects at once when it has no free object, up to
 * the slab's byte limit. Chunks are 256 KiB, aligned to their size, and
 * start with a small header (their own free list and count), so an
 * object's chunk is found by masking its address. Allocation prefers
 * chunks in use over wholly free ones, which stay free and age; a chunk
 * wholly free for the idle time is unmapped by slab_release_idle(), so the
 * memory of a surge goes back to the kernel once it is over, while the
 * steady state makes no system calls at all.
 *
 * A class keeps up to SLAB_CACHED freed objects at hand, in an array of
 * its own, and hands them out first. An alloc and a free then touch only
 * the class and the object: a chunk's header is read only when the array
 * is empty or full. Between two requests a busy worker's other work (and
 * the kernel's) has evicted the headers from the caches, and reading them
 * was most of the slab's cost. The objects held there count as free in
 * every figure below; their chunks see them come back when
 * slab_release_idle() empties the arrays (each tick).
 *
 * Each class reports what it holds (slab_class_held() and the fields
 * below): bytes in use, bytes held (mapped), the high-water mark of held,
 * and the bytes held that no object can use (chunk headers and the tail of
 * a chunk too small for one more object).
 *
 * In the AddressSanitizer build every chunk has an inaccessible guard page
 * on each side, so an overrun off either end of a chunk faults at once.
 *
 * Out-of-memory policy: at start-up a failure is fatal with a message; at
 * request time slab_alloc() returns NULL, the caller answers 503 (or closes)
 * and counts WEIR_ENOMEM, and the worker carries on.
 *
 * A slab belongs to one worker and is used by one thread: no locks.
 */
#ifndef WEIR_COMMON_SLAB_H
#define WEIR_COMMON_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define SLAB_MAX_CLASSES 16 /* 12 until HTTP/2 to upstreams added its two */
/* Objects a class keeps freed at hand (above): as many as a worker's
 * requests take of one class between the frees of a loop pass (8 left the
 * array empty at most allocations under 64 connections) */
#define SLAB_CACHED 64

struct slab_chunk;

struct slab_class {
	size_t size;       /* object size, rounded up to 16 bytes */
	size_t per_chunk;  /* objects mapped at once when the class grows */
	struct slab_chunk *avail; /* chunks with a free object: those in use
	                           * first, wholly free ones at the end */
	struct slab_chunk *avail_tail;
	size_t in_use;     /* objects handed out */
	size_t total;      /* objects mapped */
	size_t held;       /* bytes mapped for the class, chunk headers included */
	size_t high_water; /* the most <held> has been */
	size_t released;   /* chunks given back to the kernel so far */
	/* the last objects freed, handed out first: neither their chunk's
	 * header nor the object itself is read to free or take one */
	void *cached[SLAB_CACHED];
	uint32_t ncached;
};

struct slab {
	int nclasses;
	struct slab_class classes[SLAB_MAX_CLASSES];
	size_t limit;        /* bytes the slab may map, over all classes */
	size_t mapped;       /* bytes mapped so far */
	size_t in_use_bytes; /* bytes of objects handed out */
	uint64_t now_ms;     /* the clock of the last slab_release_idle() */
};

/* Prepares <s> with a byte limit (0 = no limit). */
void slab_init(struct slab *s, size_t limit);

/* Adds a size class for objects of <size> bytes; returns its index, or -1 if
 * the table is full. Classes are added at start-up. */
int slab_add_class(struct slab *s, size_t size);

/* An object of class <cls>, or NULL when the limit is reached or the system
 * has no memory left. Its contents are undefined. */
void *slab_alloc(struct slab *s, int cls);

/* Gives <p>, taken from class <cls>, back to its free list. */
void slab_free(struct slab *s, int cls, void *p);

/*
 * Unmaps every chunk that has been wholly free for <idle_ms> or more, at
 * time <now_ms> (any monotonic clock in ms; the worker's tick). <idle_ms> 0
 * keeps everything. A chunk's idle time is counted from the call before
 * its last object came back, so it is released <idle_ms> after that, give
 * or take one call interval. Returns the bytes unmapped.
 */
size_t slab_release_idle(struct slab *s, uint64_t now_ms, uint64_t idle_ms);

/* Bytes mapped but not handed out. */
static inline size_t slab_free_bytes(const struct slab *s)
{
	return s->mapped - s->in_use_bytes;
}

/* Bytes of class <cls> held that no object can use (fragmentation is this
 * over c->held). */
static inline size_t slab_class_unusable(const struct slab *s, int cls)
{
	const struct slab_class *c = &s->classes[cls];

	return c->held - c->total * c->size;
}

#endif
