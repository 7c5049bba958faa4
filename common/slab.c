#include "common/slab.h"

#include <sys/mman.h>

#define SLAB_CHUNK_BYTES (256u * 1024u)

struct free_obj {
	struct free_obj *next;
};

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
	c->per_chunk = SLAB_CHUNK_BYTES / c->size;
	if (c->per_chunk == 0)
		c->per_chunk = 1;
	return s->nclasses++;
}

/* Maps one chunk for <c> and threads its objects onto the free list. This is
 * the only place the slab talks to the kernel, and only while it grows. */
static int slab_grow(struct slab *s, struct slab_class *c)
{
	size_t bytes = c->per_chunk * c->size;
	char *chunk;

	if (s->limit && s->mapped + bytes > s->limit) {
		/* near the limit, grow by what is left in whole objects */
		size_t n = (s->limit - s->mapped) / c->size;
		if (n == 0)
			return -1;
		bytes = n * c->size;
	}
	chunk = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (chunk == MAP_FAILED)
		return -1;
	for (size_t off = bytes; off >= c->size; off -= c->size) {
		struct free_obj *o = (struct free_obj *)(chunk + off - c->size);
		o->next = c->free;
		c->free = o;
	}
	c->total += bytes / c->size;
	s->mapped += bytes;
	return 0;
}

void *slab_alloc(struct slab *s, int cls)
{
	struct slab_class *c = &s->classes[cls];
	struct free_obj *o;

	if (!c->free && slab_grow(s, c) < 0)
		return NULL;
	o = c->free;
	c->free = o->next;
	c->in_use++;
	s->in_use_bytes += c->size;
	return o;
}

void slab_free(struct slab *s, int cls, void *p)
{
	struct slab_class *c = &s->classes[cls];
	struct free_obj *o = p;

	o->next = c->free;
	c->free = o;
	c->in_use--;
	s->in_use_bytes -= c->size;
}
