#include "shm/shm.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct shm_segment *shm_create(int *fd)
{
	struct shm_segment *seg;
	size_t size = sizeof(*seg);
	int mfd = memfd_create("weir-shm", MFD_CLOEXEC);

	if (mfd < 0)
		return NULL;
	if (ftruncate(mfd, (off_t)size) < 0)
		goto fail;
	seg = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (seg == MAP_FAILED)
		goto fail;
	/* ftruncate gave zeroes; only the header needs writing */
	seg->magic = SHM_MAGIC;
	seg->version = SHM_LAYOUT_VERSION;
	seg->size = size;
	seg->gen_next_id = 1;
	seg->started_at = (uint64_t)time(NULL);
	*fd = mfd;
	return seg;
fail:
	{
		int saved = errno;
		close(mfd);
		errno = saved;
	}
	return NULL;
}

struct shm_segment *shm_attach(int fd, const char **why)
{
	struct stat st;
	struct shm_segment *seg;

	if (fstat(fd, &st) < 0 || (size_t)st.st_size != sizeof(*seg)) {
		*why = "shared segment size differs from this build's layout";
		return NULL;
	}
	seg = mmap(NULL, sizeof(*seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg == MAP_FAILED) {
		*why = "cannot map the shared segment";
		return NULL;
	}
	if (seg->magic != SHM_MAGIC || seg->version != SHM_LAYOUT_VERSION || seg->size != sizeof(*seg)) {
		munmap(seg, sizeof(*seg));
		*why = "shared segment magic or layout version differs from this build";
		return NULL;
	}
	return seg;
}

static uint64_t shm_load(const uint64_t *p)
{
	return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed);
}

/* Adds <src> to <dst> field by field; the struct is all uint64_t. */
static void shm_counters_add(struct shm_counters *dst, const struct shm_counters *src, size_t upto)
{
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;

	for (size_t i = 0; i < upto / sizeof(uint64_t); i++)
		d[i] += shm_load(&s[i]);
}

/* The retired block may be written by two masters during a binary
 * upgrade: fold with atomic adds. */
static void shm_counters_fold(struct shm_counters *dst, const struct shm_counters *src, size_t upto)
{
	_Atomic uint64_t *d = (_Atomic uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;

	for (size_t i = 0; i < upto / sizeof(uint64_t); i++)
		atomic_fetch_add_explicit(&d[i], shm_load(&s[i]), memory_order_relaxed);
}

void shm_sum(struct shm_segment *seg, struct shm_counters *out)
{
	memset(out, 0, sizeof(*out));
	shm_counters_add(out, &seg->retired, sizeof(*out));
	for (int i = 0; i < SHM_SLOTS; i++)
		shm_counters_add(out, &seg->slots[i].c, sizeof(*out));
}

int shm_slot_claim(struct shm_segment *seg)
{
	for (int i = 0; i < SHM_SLOTS; i++) {
		int32_t expect = SHM_SLOT_FREE;
		if (atomic_compare_exchange_strong(&seg->slots[i].state, &expect, SHM_SLOT_RUNNING))
			return i;
	}
	return -1;
}

void shm_slot_retire(struct shm_segment *seg, int i)
{
	struct shm_slot *s = &seg->slots[i];

	/* only counters are folded: the gauges of a dead worker are gone */
	shm_counters_fold(&seg->retired, &s->c, SHM_COUNTERS_MONOTONIC);
	memset(&s->c, 0, sizeof(s->c));
	atomic_store(&s->gen_seen, 0);
	atomic_store(&s->pid, 0);
	atomic_store(&s->state, SHM_SLOT_FREE);
}
