/*
 * heap.c: the size-class heaps of common/heap.h.
 *
 * Every block starts with a 16-byte header (kept so blocks stay 16-byte
 * aligned, as malloc's are) saying which class it came from and how many
 * bytes were asked for: a realloc copies that size, and a wiping free
 * wipes exactly that much.
 */
#include "common/heap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* these functions read headers and free-list links inside poisoned memory
 * on purpose; the blocks they hand out are unpoisoned by hand */
#define HEAP_RAW __attribute__((no_sanitize_address))
#define HEAP_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define HEAP_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define HEAP_RAW
#define HEAP_POISON(p, n) ((void)(p), (void)(n))
#define HEAP_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HEAP_MAGIC 0x5ecde3u
#define HEAP_HDR 16
#define HEAP_MIN_SHIFT 5  /* 32-byte blocks: 16 of header, 16 of data */
#define HEAP_MAX_SHIFT 16 /* 64 KiB blocks; larger ones are mapped alone */
_Static_assert(HEAP_NCLASSES == HEAP_MAX_SHIFT - HEAP_MIN_SHIFT + 1, "one free list a class");
#define HEAP_BIG UINT32_MAX
/* regions are reserved, not committed (MAP_NORESERVE): pages cost memory
 * only once a block in them is used */
#define HEAP_REGION (64u << 20)
#define HEAP_CHUNK (64u << 10)

struct heap_hdr {
	uint32_t magic;
	uint32_t cls; /* class index, or HEAP_BIG */
	size_t size;  /* bytes asked for */
};

_Static_assert(sizeof(struct heap_hdr) == HEAP_HDR, "header keeps blocks 16-byte aligned");

static void *heap_map(struct heap *hp, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* for secrets, the whole point: if the kernel refuses, do not hand
	 * out memory that a core dump would carry */
	if ((hp->flags & HEAP_DONTDUMP) && madvise(p, len, MADV_DONTDUMP) != 0) {
		munmap(p, len);
		return NULL;
	}
	return p;
}

/* Carves <len> bytes off the current region, mapping a new one when it is
 * used up. The rest of an old region is left unused: regions are large and
 * this happens rarely. */
static void *heap_carve(struct heap *hp, size_t len)
{
	char *p;

	if (hp->left < len) {
		char *r = heap_map(hp, HEAP_REGION);
		if (!r)
			return NULL;
		hp->next = r;
		hp->left = HEAP_REGION;
	}
	p = hp->next;
	hp->next += len;
	hp->left -= len;
	hp->st.held += len;
	/* poisoned as carved, not as mapped: the shadow of a whole 64 MiB
	 * region is 8 MiB that every worker would touch at its first block */
	HEAP_POISON(p, len);
	return p;
}

static unsigned heap_class_of(size_t size)
{
	size_t need = size + HEAP_HDR;
	unsigned c = 0;

	while (((size_t)1 << (c + HEAP_MIN_SHIFT)) < need)
		c++;
	return c;
}

/* Fills class <c>'s free list from a new chunk. */
HEAP_RAW static int heap_grow(struct heap *hp, unsigned c)
{
	size_t bsize = (size_t)1 << (c + HEAP_MIN_SHIFT);
	size_t len = bsize < HEAP_CHUNK / 4 ? HEAP_CHUNK : 4 * bsize;
	char *chunk = heap_carve(hp, len);

	if (!chunk)
		return -1;
	for (size_t off = len; off >= bsize; off -= bsize) {
		char *b = chunk + off - bsize;
		*(void **)(b + HEAP_HDR) = hp->free[c];
		hp->free[c] = b;
	}
	return 0;
}

HEAP_RAW void *heap_alloc(struct heap *hp, size_t size)
{
	struct heap_hdr *h;
	unsigned c;

	if (size > SIZE_MAX / 2)
		return NULL;
	if (size + HEAP_HDR > ((size_t)1 << HEAP_MAX_SHIFT)) {
		size_t len = (size + HEAP_HDR + 4095) & ~(size_t)4095;
		h = heap_map(hp, len);
		if (!h)
			return NULL;
		hp->st.held += len;
		h->cls = HEAP_BIG;
		HEAP_POISON(h, HEAP_HDR);
	} else {
		c = heap_class_of(size);
		if (!hp->free[c] && heap_grow(hp, c) < 0)
			return NULL;
		h = hp->free[c];
		hp->free[c] = *(void **)((char *)h + HEAP_HDR);
		h->cls = c;
	}
	h->magic = HEAP_MAGIC;
	h->size = size;
	hp->st.in_use += size;
	hp->st.blocks++;
	HEAP_UNPOISON((char *)h + HEAP_HDR, size);
	return (char *)h + HEAP_HDR;
}

HEAP_RAW static struct heap_hdr *heap_hdr_of(const void *p)
{
	struct heap_hdr *h = (struct heap_hdr *)((char *)p - HEAP_HDR);

	/* a pointer the library did not get from here, or a double free:
	 * the heap is corrupt, and carrying on could hand out secrets */
	if (h->magic != HEAP_MAGIC || (h->cls >= HEAP_NCLASSES && h->cls != HEAP_BIG))
		abort();
	return h;
}

HEAP_RAW void heap_free(struct heap *hp, void *p)
{
	struct heap_hdr *h;
	size_t size;

	if (!p)
		return;
	h = heap_hdr_of(p);
	size = h->size;
	/* the wipe BoringSSL's own free does, which its hooks skip; volatile
	 * stores the compiler cannot drop */
	if (hp->flags & HEAP_WIPE)
		explicit_bzero(p, size);
	hp->st.in_use -= size;
	hp->st.blocks--;
	h->magic = 0;
	if (h->cls == HEAP_BIG) {
		size_t len = (size + HEAP_HDR + 4095) & ~(size_t)4095;
		HEAP_UNPOISON(h, len);
		munmap(h, len);
		hp->st.held -= len;
		return;
	}
	HEAP_POISON(p, ((size_t)1 << (h->cls + HEAP_MIN_SHIFT)) - HEAP_HDR);
	*(void **)p = hp->free[h->cls];
	hp->free[h->cls] = h;
}

HEAP_RAW size_t heap_size(const void *p)
{
	return p ? heap_hdr_of(p)->size : 0;
}

HEAP_RAW void *heap_calloc(struct heap *hp, size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / 4 / size)
		return NULL;
	p = heap_alloc(hp, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

HEAP_RAW void *heap_realloc(struct heap *hp, void *p, size_t size)
{
	struct heap_hdr *h;
	void *q;

	if (!p)
		return heap_alloc(hp, size);
	h = heap_hdr_of(p);
	/* the block's class has room: it stays (a shrink keeps it too) */
	if (h->cls != HEAP_BIG && size + HEAP_HDR <= ((size_t)1 << (h->cls + HEAP_MIN_SHIFT))) {
		if (size > h->size)
			HEAP_UNPOISON((char *)p + h->size, size - h->size);
		else
			HEAP_POISON((char *)p + size, h->size - size);
		hp->st.in_use = hp->st.in_use - h->size + size;
		h->size = size;
		return p;
	}
	q = heap_alloc(hp, size);
	if (!q)
		return NULL;
	memcpy(q, p, h->size < size ? h->size : size);
	heap_free(hp, p);
	return q;
}
