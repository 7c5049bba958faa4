/*
 * compress_pool.c: first fit with boundary tags over one region
 * (compress_pool.h).
 *
 * A block is a header (its size with the low bit set while in use, and
 * the size of the block before it, 0 for the first) and its payload; a
 * free block keeps the links of the free list in its payload, so the
 * smallest block is 32 bytes. The block after the last is the region's
 * end, found by address, so no sentinel is needed.
 */
#include "worker/core/compress_pool.h"

#include <stdint.h>

#define CZ_HDR 16u
#define CZ_MIN 32u
#define CZ_USED ((size_t)1)

struct czblk {
	size_t size; /* of the block, header included; | CZ_USED */
	size_t prev; /* size of the block before it; 0: the first */
	/* while free: */
	struct czblk *next, *back;
};

static inline size_t blk_size(const struct czblk *b)
{
	return b->size & ~CZ_USED;
}

static inline struct czblk *blk_after(const struct czpool *p, const struct czblk *b)
{
	char *a = (char *)b + blk_size(b);

	return a < p->base + p->size ? (struct czblk *)(void *)a : NULL;
}

static void list_push(struct czpool *p, struct czblk *b)
{
	b->back = NULL;
	b->next = p->free;
	if (p->free)
		p->free->back = b;
	p->free = b;
}

static void list_drop(struct czpool *p, struct czblk *b)
{
	if (b->back)
		b->back->next = b->next;
	else
		p->free = b->next;
	if (b->next)
		b->next->back = b->back;
}

void czpool_init(struct czpool *p, void *mem, size_t size)
{
	struct czblk *b = mem;

	p->base = mem;
	p->size = size & ~(size_t)15;
	p->free = NULL;
	p->in_use = 0;
	b->size = p->size;
	b->prev = 0;
	list_push(p, b);
}

void *czpool_alloc(struct czpool *p, size_t n)
{
	size_t need;

	if (n > p->size)
		return NULL;
	need = (n + CZ_HDR + 15) & ~(size_t)15;
	if (need < CZ_MIN)
		need = CZ_MIN;
	for (struct czblk *b = p->free; b; b = b->next) {
		size_t have = blk_size(b);
		struct czblk *rest, *after;

		if (have < need)
			continue;
		list_drop(p, b);
		if (have - need >= CZ_MIN) {
			/* the tail stays free: split */
			rest = (struct czblk *)(void *)((char *)b + need);
			rest->size = have - need;
			rest->prev = need;
			if ((after = blk_after(p, rest)))
				after->prev = rest->size;
			list_push(p, rest);
			have = need;
		}
		b->size = have | CZ_USED;
		p->in_use += have;
		return (char *)b + CZ_HDR;
	}
	return NULL;
}

void czpool_free(struct czpool *p, void *ptr)
{
	struct czblk *b, *n, *after;

	if (!ptr)
		return;
	b = (struct czblk *)(void *)((char *)ptr - CZ_HDR);
	p->in_use -= blk_size(b);
	b->size &= ~CZ_USED;
	/* merged with free neighbours at once: free blocks never touch */
	n = blk_after(p, b);
	if (n && !(n->size & CZ_USED)) {
		list_drop(p, n);
		b->size += n->size;
	}
	if (b->prev) {
		struct czblk *before = (struct czblk *)(void *)((char *)b - b->prev);

		if (!(before->size & CZ_USED)) {
			list_drop(p, before);
			before->size += b->size;
			b = before;
		}
	}
	if ((after = blk_after(p, b)))
		after->prev = b->size;
	list_push(p, b);
}
