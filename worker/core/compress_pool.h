/*
 * compress_pool: the memory of a worker's response encoders (zlib's and
 * brotli's state), one fixed region per worker (worker/core/compress.h).
 *
 * Principle: the encoders allocate as they please (zlib five blocks at
 * start, brotli hundreds as it goes, freeing as many), so they get a
 * general allocator over a region mapped once at worker start, never
 * malloc: first fit over a free list, with
 * boundary tags so a freed block merges with free neighbours at once.
 * Blocks are 16-byte aligned with a 16-byte header; one thread, no locks.
 * The pool never grows: an allocation it cannot serve returns NULL, which
 * the encoders report as their out-of-memory error.
 */
#ifndef WEIR_WORKER_CORE_COMPRESS_POOL_H
#define WEIR_WORKER_CORE_COMPRESS_POOL_H

#include <stddef.h>

struct czblk;

struct czpool {
	char *base;
	size_t size;         /* bytes of the region (a multiple of 16) */
	struct czblk *free;  /* free blocks, most recently freed first */
	size_t in_use;       /* bytes of blocks handed out, headers included */
};

/* Prepares <p> over <mem>[0, size) (16-byte aligned, at least 64 bytes). */
void czpool_init(struct czpool *p, void *mem, size_t size);

/* <n> bytes, 16-byte aligned, or NULL when no free block holds them. */
void *czpool_alloc(struct czpool *p, size_t n);

/* Gives back <ptr> (from czpool_alloc() of <p>, or NULL). */
void czpool_free(struct czpool *p, void *ptr);

#endif
