/*
 * secmem.h: the memory BoringSSL allocates from, kept out of core dumps.
 *
 * Principle: a parsed private key, a session's traffic secrets and the
 * record buffers of a TLS connection all live in BoringSSL's heap. Rather
 * than find each one, weir gives BoringSSL a heap of its own: BoringSSL
 * calls the weak hooks OPENSSL_memory_alloc/free/get_size when a program
 * defines them, and secmem.c defines them over anonymous mappings marked
 * MADV_DONTDUMP. Everything BoringSSL holds is then out of every core dump,
 * in the master and in each worker (fork keeps the mark), and each block
 * is wiped when BoringSSL frees it.
 *
 * The allocator is a common/heap.h heap (power-of-two size classes with
 * free lists, kept for reuse, so after warm-up a handshake makes no system
 * call for memory) with HEAP_DONTDUMP and HEAP_WIPE.
 */
#ifndef WEIR_COMMON_SECMEM_H
#define WEIR_COMMON_SECMEM_H

#include <stddef.h>

struct secmem_stats {
	size_t held;    /* bytes made into blocks, handed out or free for reuse:
	                 * at most this much is resident; the reserved rest of
	                 * a region costs nothing until used */
	size_t in_use;  /* bytes handed out, as asked for */
	size_t blocks;  /* blocks handed out */
};

/* Makes sure this module is linked in, so BoringSSL finds the hooks, and
 * maps the first region. Returns 0, or -1 if that mapping fails (the
 * hooks then still work, mapping on first use). */
int secmem_init(void);

/* What the allocator holds now, for the stats socket and tests. */
void secmem_get_stats(struct secmem_stats *st);

/* The same allocation functions, for weir's own secrets (and tests). */
void *secmem_alloc(size_t size);
void secmem_free(void *p);
size_t secmem_size(const void *p);

#endif
