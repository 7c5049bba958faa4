/*
 * heap.h: a process's own heaps for libraries that allocate as they please
 * (BoringSSL, libnghttp2), with power-of-two size classes and free lists.
 *
 * Principle: a library that calls malloc() and free() per handshake or per
 * stream puts the C allocator (its locks, its system calls as arenas grow
 * and shrink) on the request path. Given a heap of its own, it takes blocks
 * from free lists carved from large reserved regions (big blocks get a
 * mapping of their own); freed blocks are kept for reuse, as the slab keeps
 * objects, so after warm-up the library makes no system call for memory.
 * Each heap counts what it holds, for /metrics. One thread per heap: no
 * locks (a worker is one thread; so is the master).
 *
 * A heap's flags: HEAP_DONTDUMP marks its mappings MADV_DONTDUMP (secrets
 * stay out of core dumps; common/secmem.h), HEAP_WIPE zeroes a block as it
 * is freed.
 *
 * Under AddressSanitizer every block's header and unused tail are
 * poisoned, and a freed block stays poisoned until reused, so overflows and
 * use after free inside the library are still reported.
 */
#ifndef WEIR_COMMON_HEAP_H
#define WEIR_COMMON_HEAP_H

#include <stddef.h>

#define HEAP_DONTDUMP 1u
#define HEAP_WIPE     2u
#define HEAP_NCLASSES 12 /* 32 bytes .. 64 KiB */

struct heap_stats {
	size_t held;    /* bytes made into blocks, handed out or free for reuse:
	                 * at most this much is resident; the reserved rest of
	                 * a region costs nothing until used */
	size_t in_use;  /* bytes handed out, as asked for */
	size_t blocks;  /* blocks handed out */
};

struct heap {
	unsigned flags;
	void *free[HEAP_NCLASSES]; /* singly linked through the blocks' data */
	char *next;                /* unused part of the current region */
	size_t left;
	struct heap_stats st;
};

/* A heap with <flags>, ready for use (no set-up call: BoringSSL may
 * allocate before main() runs). */
#define HEAP_INIT(f) {.flags = (f)}

void *heap_alloc(struct heap *h, size_t size);
void *heap_calloc(struct heap *h, size_t n, size_t size);
void *heap_realloc(struct heap *h, void *p, size_t size);
void heap_free(struct heap *h, void *p);

/* The size <p> was asked with (0 for NULL). */
size_t heap_size(const void *p);

#endif
