/*
 * ticket.c: making, rotating and reading the session ticket keys (ticket.h).
 */
#include "shm/ticket.h"

#include <string.h>
#include <sys/mman.h>

#include <openssl/mem.h>
#include <openssl/rand.h>

#define COPY_TRIES 64

int ticket_keys_protect(struct shm_ticket_keys *k)
{
	return madvise(k, sizeof(*k), MADV_DONTDUMP);
}

int ticket_keys_maybe_rotate(struct shm_ticket_keys *k, uint32_t every_ms, uint64_t now)
{
	uint64_t s = atomic_load_explicit(&k->seq, memory_order_acquire);
	uint64_t last = atomic_load_explicit(&k->rotated_at, memory_order_relaxed);
	struct ticket_key fresh;

	if (s & 1)
		return 0; /* the other master is at it */
	if (s != 0 && now < last + every_ms / 1000 + (every_ms % 1000 != 0))
		return 0;
	if (!RAND_bytes((uint8_t *)&fresh, sizeof(fresh)))
		return -1;
	if (!atomic_compare_exchange_strong_explicit(&k->seq, &s, s + 1, memory_order_acq_rel,
	                                             memory_order_relaxed)) {
		OPENSSL_cleanse(&fresh, sizeof(fresh));
		return 0;
	}
	atomic_thread_fence(memory_order_release);
	if (k->nkeys > 0)
		k->key[1] = k->key[0];
	k->key[0] = fresh;
	k->nkeys = k->nkeys > 0 ? 2 : 1;
	atomic_store_explicit(&k->rotated_at, now, memory_order_relaxed);
	atomic_store_explicit(&k->seq, s + 2, memory_order_release);
	OPENSSL_cleanse(&fresh, sizeof(fresh));
	return 1;
}

int ticket_keys_copy(const struct shm_ticket_keys *k, struct ticket_key out[2], uint64_t *seq)
{
	struct ticket_key tmp[2];
	int rc = -1;

	for (int i = 0; i < COPY_TRIES && rc < 0; i++) {
		uint64_t s1 = atomic_load_explicit((_Atomic uint64_t *)&k->seq, memory_order_acquire);
		uint32_t n;

		if (s1 & 1)
			continue;
		if (s1 == 0) {
			*seq = 0;
			return 0;
		}
		n = k->nkeys > 2 ? 2 : k->nkeys;
		memcpy(tmp, k->key, sizeof(tmp));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit((_Atomic uint64_t *)&k->seq, memory_order_relaxed) == s1) {
			memcpy(out, tmp, sizeof(tmp));
			*seq = s1;
			rc = (int)n;
		}
	}
	OPENSSL_cleanse(tmp, sizeof(tmp));
	return rc;
}

void ticket_keys_wipe(struct shm_ticket_keys *k)
{
	OPENSSL_cleanse(k->key, sizeof(k->key));
	k->nkeys = 0;
	atomic_store(&k->seq, 0);
}
