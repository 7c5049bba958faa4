/*
 * secmem.c: BoringSSL's heap, out of core dumps and wiped on free (see
 * secmem.h).
 *
 * Every block starts with a 16-byte header (kept so blocks stay 16-byte
 * aligned, as malloc's are) saying which class it came from and how many
 * bytes were asked for: BoringSSL's realloc asks for that size, and free
 * wipes exactly that much.
 */
#include "common/secmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* these functions read headers and free-list links inside poisoned memory
 * on purpose; the blocks they hand out are unpoisoned by hand */
#define SECMEM_RAW __attribute__((no_sanitize_address))
#define SECMEM_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SECMEM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SECMEM_RAW
#define SECMEM_POISON(p, n) ((void)(p), (void)(n))
#define SECMEM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define SECMEM_MAGIC 0x5ecde3u
#define SECMEM_HDR 16
#define SECMEM_MIN_SHIFT 5  /* 32-byte blocks: 16 of header, 16 of data */
#define SECMEM_MAX_SHIFT 16 /* 64 KiB blocks; larger ones are mapped alone */
#define SECMEM_NCLASSES (SECMEM_MAX_SHIFT - SECMEM_MIN_SHIFT + 1)
#define SECMEM_BIG UINT32_MAX
/* regions are reserved, not committed (MAP_NORESERVE): pages cost memory
 * only once a block in them is used */
#define SECMEM_REGION (64u << 20)
#define SECMEM_CHUNK (64u << 10)

struct secmem_hdr {
	uint32_t magic;
	uint32_t cls; /* class index, or SECMEM_BIG */
	size_t size;  /* bytes asked for */
};

_Static_assert(sizeof(struct secmem_hdr) == SECMEM_HDR, "header keeps blocks 16-byte aligned");

static struct {
	void *free[SECMEM_NCLASSES]; /* singly linked through the blocks' data */
	char *next;                  /* unused part of the current region */
	size_t left;
	struct secmem_stats st;
} sm;

static void *secmem_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* the whole point: if the kernel refuses, do not hand out memory that
	 * a core dump would carry */
	if (madvise(p, len, MADV_DONTDUMP) != 0) {
		munmap(p, len);
		return NULL;
	}
	return p;
}

/* Carves <len> bytes off the current region, mapping a new one when it is
 * used up. The rest of an old region is left unused: regions are large and
 * this happens rarely. */
static void *secmem_carve(size_t len)
{
	char *p;

	if (sm.left < len) {
		char *r = secmem_map(SECMEM_REGION);
		if (!r)
			return NULL;
		SECMEM_POISON(r, SECMEM_REGION);
		sm.next = r;
		sm.left = SECMEM_REGION;
	}
	p = sm.next;
	sm.next += len;
	sm.left -= len;
	sm.st.held += len;
	return p;
}

static unsigned secmem_class_of(size_t size)
{
	size_t need = size + SECMEM_HDR;
	unsigned c = 0;

	while (((size_t)1 << (c + SECMEM_MIN_SHIFT)) < need)
		c++;
	return c;
}

/* Fills class <c>'s free list from a new chunk. */
SECMEM_RAW static int secmem_grow(unsigned c)
{
	size_t bsize = (size_t)1 << (c + SECMEM_MIN_SHIFT);
	size_t len = bsize < SECMEM_CHUNK / 4 ? SECMEM_CHUNK : 4 * bsize;
	char *chunk = secmem_carve(len);

	if (!chunk)
		return -1;
	for (size_t off = len; off >= bsize; off -= bsize) {
		char *b = chunk + off - bsize;
		*(void **)(b + SECMEM_HDR) = sm.free[c];
		sm.free[c] = b;
	}
	return 0;
}

SECMEM_RAW void *secmem_alloc(size_t size)
{
	struct secmem_hdr *h;
	unsigned c;

	if (size > SIZE_MAX / 2)
		return NULL;
	if (size + SECMEM_HDR > ((size_t)1 << SECMEM_MAX_SHIFT)) {
		size_t len = (size + SECMEM_HDR + 4095) & ~(size_t)4095;
		h = secmem_map(len);
		if (!h)
			return NULL;
		sm.st.held += len;
		h->cls = SECMEM_BIG;
		SECMEM_POISON(h, SECMEM_HDR);
	} else {
		c = secmem_class_of(size);
		if (!sm.free[c] && secmem_grow(c) < 0)
			return NULL;
		h = sm.free[c];
		sm.free[c] = *(void **)((char *)h + SECMEM_HDR);
		h->cls = c;
	}
	h->magic = SECMEM_MAGIC;
	h->size = size;
	sm.st.in_use += size;
	sm.st.blocks++;
	SECMEM_UNPOISON((char *)h + SECMEM_HDR, size);
	return (char *)h + SECMEM_HDR;
}

SECMEM_RAW static struct secmem_hdr *secmem_hdr_of(const void *p)
{
	struct secmem_hdr *h = (struct secmem_hdr *)((char *)p - SECMEM_HDR);

	/* a pointer BoringSSL did not get from here, or a double free: the
	 * heap is corrupt, and carrying on would hand out secrets */
	if (h->magic != SECMEM_MAGIC || (h->cls >= SECMEM_NCLASSES && h->cls != SECMEM_BIG))
		abort();
	return h;
}

SECMEM_RAW void secmem_free(void *p)
{
	struct secmem_hdr *h;
	size_t size;

	if (!p)
		return;
	h = secmem_hdr_of(p);
	size = h->size;
	/* the wipe BoringSSL's own free does, which its hooks skip; volatile
	 * stores the compiler cannot drop */
	explicit_bzero(p, size);
	sm.st.in_use -= size;
	sm.st.blocks--;
	h->magic = 0;
	if (h->cls == SECMEM_BIG) {
		size_t len = (size + SECMEM_HDR + 4095) & ~(size_t)4095;
		SECMEM_UNPOISON(h, len);
		munmap(h, len);
		sm.st.held -= len;
		return;
	}
	SECMEM_POISON(p, ((size_t)1 << (h->cls + SECMEM_MIN_SHIFT)) - SECMEM_HDR);
	*(void **)p = sm.free[h->cls];
	sm.free[h->cls] = h;
}

SECMEM_RAW size_t secmem_size(const void *p)
{
	return p ? secmem_hdr_of(p)->size : 0;
}

int secmem_init(void)
{
	void *p = secmem_alloc(1);

	if (!p)
		return -1;
	secmem_free(p);
	return 0;
}

void secmem_get_stats(struct secmem_stats *st)
{
	*st = sm.st;
}

/*
 * BoringSSL's hooks (crypto/mem.c declares them weak): with them defined,
 * OPENSSL_malloc, OPENSSL_realloc and OPENSSL_free come here. BoringSSL
 * may allocate before main() runs, which is why the allocator needs no
 * set-up call.
 */
void *OPENSSL_memory_alloc(size_t size);
void OPENSSL_memory_free(void *ptr);
size_t OPENSSL_memory_get_size(void *ptr);

void *OPENSSL_memory_alloc(size_t size)
{
	return secmem_alloc(size);
}

void OPENSSL_memory_free(void *ptr)
{
	secmem_free(ptr);
}

size_t OPENSSL_memory_get_size(void *ptr)
{
	return secmem_size(ptr);
}
