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
	size_t size = SHM_SIZE;
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
	/* the ticket keys' page stays out of core dumps, ours and (inherited
	 * with the mapping) the workers'; the master makes the keys */
	ticket_keys_protect(&seg->ticket);
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

	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != SHM_SIZE) {
		*why = "shared segment size differs from this build's layout";
		return NULL;
	}
	seg = mmap(NULL, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg == MAP_FAILED) {
		*why = "cannot map the shared segment";
		return NULL;
	}
	if (seg->magic != SHM_MAGIC || seg->version != SHM_LAYOUT_VERSION || seg->size != SHM_SIZE) {
		munmap(seg, SHM_SIZE);
		*why = "shared segment magic or layout version differs from this build";
		return NULL;
	}
	ticket_keys_protect(&seg->ticket);
	return seg;
}

void shm_arena_release(struct shm_segment *seg, uint64_t off, uint64_t len)
{
	uint64_t from = (off + 4095) & ~(uint64_t)4095, to = (off + len) & ~(uint64_t)4095;

	/* MADV_REMOVE frees the memfd's pages for every mapping (a hole reads
	 * as zeroes); only an optimisation, so a failure is no error */
	if (to > from)
		(void)madvise(shm_arena(seg) + from, to - from, MADV_REMOVE);
}

static uint64_t shm_load(const uint64_t *p)
{
	return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed);
}

/* Adds the first <upto> bytes of <src> to <dst> field by field; the
 * counter structs are all uint64_t. */
static void shm_counters_add(void *dst, const void *src, size_t upto)
{
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;

	for (size_t i = 0; i < upto / sizeof(uint64_t); i++)
		d[i] += shm_load(&s[i]);
}

/* The retired block may be written by two masters during a binary
 * upgrade: fold with atomic adds. */
static void shm_counters_fold(void *dst, const void *src, size_t upto)
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

/* Loops <i> over each route (server) stat index handed out, then the
 * "other" one: only those can hold counts, and touching no other page
 * keeps the sparse segment sparse. */
#define SHM_FOR_ROUTE_KEYS(seg, i) \
	for (uint32_t i##_n = atomic_load_explicit(&(seg)->keys.nroutes, memory_order_acquire), \
	              i = i##_n ? 0 : STAT_ROUTE_OTHER; \
	     i < STAT_ROUTES; i = (i + 1 == i##_n ? STAT_ROUTE_OTHER : i + 1))
#define SHM_FOR_SERVER_KEYS(seg, i) \
	for (uint32_t i##_n = atomic_load_explicit(&(seg)->keys.nservers, memory_order_acquire), \
	              i = i##_n ? 0 : STAT_SERVER_OTHER; \
	     i < STAT_SERVERS; i = (i + 1 == i##_n ? STAT_SERVER_OTHER : i + 1))

const char *const shm_admin_state_names[3] = {"up", "drain", "down"};

const char *const stream_buf_kind_names[STREAM_BUF_KINDS] = {
#define STREAM_BUF_KIND_NAME(name, label) label,
    STREAM_BUF_KIND_TABLE(STREAM_BUF_KIND_NAME)
#undef STREAM_BUF_KIND_NAME
};

void shm_slab_sizes(struct shm_segment *seg, uint32_t sizes[SLAB_MAX_CLASSES])
{
	for (int k = 0; k < SLAB_MAX_CLASSES; k++)
		sizes[k] = 0;
	for (int i = 0; i < SHM_SLOTS; i++) {
		if (atomic_load(&seg->slots[i].state) == SHM_SLOT_FREE)
			continue;
		for (int k = 0; k < SLAB_MAX_CLASSES; k++) {
			uint32_t v = atomic_load_explicit(&seg->slots[i].slab_size[k], memory_order_relaxed);

			if (v > sizes[k])
				sizes[k] = v;
		}
	}
}

int shm_workers_alive(struct shm_segment *seg)
{
	int alive = 0;

	for (int i = 0; i < SHM_SLOTS; i++)
		alive += atomic_load(&seg->slots[i].pid) != 0;
	return alive;
}

void shm_sum_keys(struct shm_segment *seg, struct shm_route_counters *routes, struct shm_server_counters *servers)
{
	if (routes)
		memset(routes, 0, sizeof(*routes) * STAT_ROUTES);
	memset(servers, 0, sizeof(*servers) * STAT_SERVERS);
	for (int w = -1; w < SHM_SLOTS; w++) {
		struct shm_route_counters *r = w < 0 ? seg->retired_routes : seg->slots[w].routes;
		struct shm_server_counters *sv = w < 0 ? seg->retired_servers : seg->slots[w].servers;

		/* a free slot's counters are zero: shm_slot_retire cleared them */
		if (w >= 0 && atomic_load(&seg->slots[w].state) == SHM_SLOT_FREE)
			continue;
		if (routes)
			SHM_FOR_ROUTE_KEYS(seg, i)
				shm_counters_add(&routes[i], &r[i], sizeof(r[i]));
		SHM_FOR_SERVER_KEYS(seg, i)
			shm_counters_add(&servers[i], &sv[i], sizeof(sv[i]));
	}
}

void shm_key_zero_route(struct shm_segment *seg, uint16_t i)
{
	for (int w = 0; w < SHM_SLOTS; w++)
		if (atomic_load(&seg->slots[w].state) != SHM_SLOT_FREE) /* a free one is zero: keep it unbacked */
			memset(&seg->slots[w].routes[i], 0, sizeof(seg->slots[w].routes[i]));
	memset(&seg->retired_routes[i], 0, sizeof(seg->retired_routes[i]));
}

void shm_key_zero_server(struct shm_segment *seg, uint16_t i)
{
	for (int w = 0; w < SHM_SLOTS; w++)
		if (atomic_load(&seg->slots[w].state) != SHM_SLOT_FREE) /* a free one is zero: keep it unbacked */
			memset(&seg->slots[w].servers[i], 0, sizeof(seg->slots[w].servers[i]));
	memset(&seg->retired_servers[i], 0, sizeof(seg->retired_servers[i]));
	atomic_store_explicit(&seg->admin[i], 0, memory_order_relaxed);
	memset(&seg->resil[i], 0, sizeof(seg->resil[i]));
	health_key_zero(&seg->health, i);
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
	/* per-key counters are all monotonic */
	SHM_FOR_ROUTE_KEYS(seg, k) {
		shm_counters_fold(&seg->retired_routes[k], &s->routes[k],
		                  sizeof(s->routes[k]));
		memset(&s->routes[k], 0, sizeof(s->routes[k]));
	}
	SHM_FOR_SERVER_KEYS(seg, k) {
		shm_counters_fold(&seg->retired_servers[k], &s->servers[k],
		                  sizeof(s->servers[k]));
		memset(&s->servers[k], 0, sizeof(s->servers[k]));
	}
	atomic_store(&s->gen_seen, 0);
	atomic_store(&s->gen_min, 0);
	atomic_store(&s->pid, 0);
	atomic_store(&s->state, SHM_SLOT_FREE);
}
