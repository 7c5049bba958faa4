/*
 * secmem.c: BoringSSL's heap, out of core dumps and wiped on free (see
 * secmem.h): a common/heap.h heap with both flags.
 */
#include "common/secmem.h"

#include "common/heap.h"

static struct heap sec = HEAP_INIT(HEAP_DONTDUMP | HEAP_WIPE);

void *secmem_alloc(size_t size)
{
	return heap_alloc(&sec, size);
}

void secmem_free(void *p)
{
	heap_free(&sec, p);
}

size_t secmem_size(const void *p)
{
	return heap_size(p);
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
	st->held = sec.st.held;
	st->in_use = sec.st.in_use;
	st->blocks = sec.st.blocks;
}

/*
 * BoringSSL's hooks (crypto/mem.c declares them weak): with them defined,
 * OPENSSL_malloc, OPENSSL_realloc and OPENSSL_free come here. BoringSSL
 * may allocate before main() runs, which is why the heap needs no set-up
 * call.
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
