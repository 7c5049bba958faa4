/*
 * slab.h: a worker's private memory for connections, requests and buffers.
 *
 * Principle: every object a connection needs comes from a free list of its
 * size class, so the request path never calls malloc or free. A class grows
 * by mapping a chunk of objects at once when its free list is empty, up to
 * the slab's byte limit; memory taken from the system is kept for reuse,
 * never returned, so the steady state makes no system calls at all.
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

#define SLAB_MAX_CLASSES 12

struct slab_class {
	size_t size;       /* object size, rounded up to 16 bytes */
	size_t per_chunk;  /* objects mapped at once when the class grows */
	void *free;        /* singly linked free objects */
	size_t in_use;     /* objects handed out */
	size_t total;      /* objects mapped */
};

struct slab {
	int nclasses;
	struct slab_class classes[SLAB_MAX_CLASSES];
	size_t limit;        /* bytes the slab may map, over all classes */
	size_t mapped;       /* bytes mapped so far */
	size_t in_use_bytes; /* bytes of objects handed out */
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

/* Bytes mapped but not handed out. */
static inline size_t slab_free_bytes(const struct slab *s)
{
	return s->mapped - s->in_use_bytes;
}

#endif
