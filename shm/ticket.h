/*
 * ticket.h: TLS session ticket keys in the shared segment.
 *
 * Principle: tickets are only worth issuing if any worker can open them, so
 * the keys live in the segment: the master makes them with RAND_bytes when
 * it creates the segment and rotates them on a schedule (tls_ticket_rotate);
 * workers copy them out when the sequence number changes. The current key
 * seals new tickets; the previous one still opens tickets issued before the
 * last rotation (which are then renewed). The keys are never written to
 * disk, their page is kept out of core dumps (MADV_DONTDUMP), and copies
 * are wiped with OPENSSL_cleanse when dropped.
 *
 * The block is a seqlock: the writer makes <seq> odd, writes, makes it even
 * again; a reader copies and retries if <seq> moved. The writer takes the
 * odd value with a compare-and-swap, since two masters share the segment
 * during a binary upgrade and both may decide to rotate.
 */
#ifndef WEIR_SHM_TICKET_H
#define WEIR_SHM_TICKET_H

#include <stdatomic.h>
#include <stdint.h>

#define TICKET_PAGE 4096

/* One key, in the layout nginx and the ticket callback use:
 * a public name, an AES-128-CBC key and an HMAC-SHA256 key. */
struct ticket_key {
	uint8_t name[16];
	uint8_t aes[16];
	uint8_t hmac[32];
};

struct shm_ticket_keys {
	/* even: stable; odd: being written; 0: no key made yet */
	_Alignas(TICKET_PAGE) _Atomic uint64_t seq;
	_Atomic uint64_t rotated_at; /* unix seconds of the last rotation */
	uint32_t nkeys;              /* 1, or 2 once there is a previous key */
	struct ticket_key key[2];    /* [0] current (seals), [1] previous */
};

_Static_assert(sizeof(struct shm_ticket_keys) == TICKET_PAGE, "ticket keys fill exactly one page");

/* Excludes the page at <k> from core dumps in this process (and in the
 * children it forks later). Returns 0 or -1 with errno. */
int ticket_keys_protect(struct shm_ticket_keys *k);

/* Master: makes a new current key when there is none yet or when the last
 * rotation is <every_ms> or more ago (<now>: unix seconds). Returns 1 when
 * it rotated, 0 when not due, -1 when RAND_bytes failed. */
int ticket_keys_maybe_rotate(struct shm_ticket_keys *k, uint32_t every_ms, uint64_t now);

/* The sequence number: a reader copies the keys again when it moved. */
static inline uint64_t ticket_keys_seq(const struct shm_ticket_keys *k)
{
	return atomic_load_explicit((_Atomic uint64_t *)&k->seq, memory_order_acquire);
}

/* Worker: copies the keys into <out> (2 entries). Returns the number of
 * keys valid in <out> (0 when the master has made none yet) and sets *seq
 * to the sequence they belong to, or -1 when the copy did not settle (a
 * writer kept moving; <out> and *seq are left as they were). */
int ticket_keys_copy(const struct shm_ticket_keys *k, struct ticket_key out[2], uint64_t *seq);

/* Wipes the keys (the last master to exit). */
void ticket_keys_wipe(struct shm_ticket_keys *k);

#endif
