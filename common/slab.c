/*
 * slab.c: size classes of fixed-size objects in 256 KiB chunks (slab.h).
 */
#include "common/slab.h"

#include <sys/mman.h>
#include <unistd.h>

#define SLAB_CHUNK_BYTES (256u * 1024u)

#if defined(__SANITIZE_ADDRESS__)
#define SLAB_GUARDS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_GUARDS 1
#endif
#endif
#ifndef SLAB_GUARDS
#define SLAB_GUARDS 0
#endif

struct free_obj {
	struct free_obj *next;
};

/* At the start of every chunk; objects follow at SLAB_HEADER. */
struct slab_chunk {
	struct slab_chunk *prev, *next; /* in the class's avail list, when in it */
	struct free_obj *free;          /* this chunk's free objects */
	size_t nfree, nobj;
	size_t bytes;                   /* mapped for it, header included */
	uint64_t free_since;            /* s->now_ms when it became wholly free */
	int in_avail;
};

#define SLAB_HEADER ((sizeof(struct slab_chunk) + 15) & ~(size_t)15)

void slab_init(struct slab *s, size_t limit)
{
	*s = (struct slab){.limit = limit};
}

int slab_add_class(struct slab *s, size_t size)
{
	struct slab_class *c;

	if (s->nclasses == SLAB_MAX_CLASSES || size == 0)
		return -1;
	c = &s->classes[s->nclasses];
	*c = (struct slab_class){0};
	c->size = (size + 15) & ~(size_t)15;
	c->per_chunk = (SLAB_CHUNK_BYTES - SLAB_HEADER) / c->size;
	if (c->per_chunk == 0)
		c->per_chunk = 1;
	return s->nclasses++;
}

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) & ~(pg - 1);
}

/* <bytes> of memory aligned to SLAB_CHUNK_BYTES, with a PROT_NONE page on
 * either side in the ASan build; NULL if the system has none. */
static void *chunk_map(size_t bytes)
{
	size_t guard = SLAB_GUARDS ? page_round(1) : 0, len = page_round(bytes);
	size_t span = len + 2 * guard + SLAB_CHUNK_BYTES;
	char *raw, *p, *end;

	raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)raw + guard + SLAB_CHUNK_BYTES - 1) & ~(uintptr_t)(SLAB_CHUNK_BYTES - 1));
	end = p + len + guard;
	if (p - guard > raw)
		munmap(raw, (size_t)(p - guard - raw));
	if (raw + span > end)
		munmap(end, (size_t)(raw + span - end));
	if (guard) {
		mprotect(p - guard, guard, PROT_NONE);
		mprotect(p + len, guard, PROT_NONE);
	}
	return p;
}

static void chunk_unmap(void *p, size_t bytes)
{
	size_t guard = SLAB_GUARDS ? page_round(1) : 0;

	munmap((char *)p - guard, page_round(bytes) + 2 * guard);
}

static void avail_unlink(struct slab_class *c, struct slab_chunk *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		c->avail = k->next;
	if (k->next)
		k->next->prev = k->prev;
	else
		c->avail_tail = k->prev;
	k->prev = k->next = NULL;
	k->in_avail = 0;
}

static void avail_push_head(struct slab_class *c, struct slab_chunk *k)
{
	k->prev = NULL;
	k->next = c->avail;
	if (c->avail)
		c->avail->prev = k;
	else
		c->avail_tail = k;
	c->avail = k;
	k->in_avail = 1;
}

static void avail_push_tail(struct slab_class *c, struct slab_chunk *k)
{
	k->next = NULL;
	k->prev = c->avail_tail;
	if (c->avail_tail)
		c->avail_tail->next = k;
	else
		c->avail = k;
	c->avail_tail = k;
	k->in_avail = 1;
}

/* Maps one chunk for <c> and threads its objects onto its free list. This
 * is the only place the slab asks the kernel for memory, and only while it
 * grows. */
static int slab_grow(struct slab *s, struct slab_class *c)
{
	size_t n = c->per_chunk, bytes = SLAB_HEADER + n * c->size;
	struct slab_chunk *k;
	char *objs;

	if (s->limit && s->mapped + bytes > s->limit) {
		/* near the limit, grow by what is left in whole objects */
		if (s->limit - s->mapped < SLAB_HEADER + c->size)
			return -1;
		n = (s->limit - s->mapped - SLAB_HEADER) / c->size;
		bytes = SLAB_HEADER + n * c->size;
	}
	k = chunk_map(bytes);
	if (!k)
		return -1;
	*k = (struct slab_chunk){.nfree = n, .nobj = n, .bytes = bytes};
	objs = (char *)k + SLAB_HEADER;
	for (size_t i = n; i > 0; i--) {
		struct free_obj *o = (struct free_obj *)(objs + (i - 1) * c->size);
		o->next = k->free;
		k->free = o;
	}
	avail_push_head(c, k);
	c->total += n;
	c->held += bytes;
	if (c->held > c->high_water)
		c->high_water = c->held;
	s->mapped += bytes;
	return 0;
}

void *slab_alloc(struct slab *s, int cls)
{
	struct slab_class *c = &s->classes[cls];
	struct slab_chunk *k;
	struct free_obj *o;

	if (c->ncached) {
		o = c->cached[--c->ncached];
	} else {
		if (!c->avail && slab_grow(s, c) < 0)
			return NULL;
		k = c->avail;
		o = k->free;
		k->free = o->next;
		if (--k->nfree == 0)
			avail_unlink(c, k);
	}
	c->in_use++;
	s->in_use_bytes += c->size;
	return o;
}

/* Gives <p> back to its chunk's free list. */
static void slab_return(struct slab *s, struct slab_class *c, void *p)
{
	struct slab_chunk *k = (struct slab_chunk *)((uintptr_t)p & ~(uintptr_t)(SLAB_CHUNK_BYTES - 1));
	struct free_obj *o = p;

	o->next = k->free;
	k->free = o;
	k->nfree++;
	if (k->nfree == k->nobj) {
		/* wholly free: to the end, where allocation comes last */
		if (k->in_avail)
			avail_unlink(c, k);
		avail_push_tail(c, k);
		k->free_since = s->now_ms;
	} else if (!k->in_avail) {
		avail_push_head(c, k);
	}
}

void slab_free(struct slab *s, int cls, void *p)
{
	struct slab_class *c = &s->classes[cls];

	c->in_use--;
	s->in_use_bytes -= c->size;
	if (c->ncached < SLAB_CACHED) {
		c->cached[c->ncached++] = p;
		return;
	}
	slab_return(s, c, p);
}

size_t slab_release_idle(struct slab *s, uint64_t now_ms, uint64_t idle_ms)
{
	size_t freed = 0;

	s->now_ms = now_ms;
	if (idle_ms == 0)
		return 0;
	for (int i = 0; i < s->nclasses; i++) {
		struct slab_class *c = &s->classes[i];
		struct slab_chunk *k, *prev;

		/* the objects kept at hand go back first, so a chunk they
		 * alone kept from being wholly free can age and go */
		while (c->ncached)
			slab_return(s, c, c->cached[--c->ncached]);
		k = c->avail_tail;
		/* the wholly free chunks are the end of the list */
		for (; k && k->nfree == k->nobj; k = prev) {
			prev = k->prev;
			if (now_ms - k->free_since < idle_ms)
				continue;
			avail_unlink(c, k);
			c->total -= k->nobj;
			c->held -= k->bytes;
			c->released++;
			s->mapped -= k->bytes;
			freed += k->bytes;
			chunk_unmap(k, k->bytes);
		}
	}
	return freed;
}
