/*
 * route.h: routing tables in the shared segment.
 *
 * Principle: the master compiles the config's routes, upstream groups,
 * servers and the settings a request reads into one pointer-free
 * generation (route_types.h: a header and a block of variable size in the
 * segment's arena, found by offsets, so it means the same in every
 * process), and builds its lookup index there too; a worker never builds
 * anything per request. Lookup picks the most specific host that matches,
 * then the longest prefix within that host (as nginx picks a server block,
 * then a location); it does not fall back to a less specific host when the
 * chosen host has no matching prefix:
 *
 *  - exact hosts by a hash table, wildcard hosts by suffix: the Host is
 *    hashed once from its end, and the hash of every suffix that starts at
 *    a dot is looked up in the wildcard table, the longest match winning;
 *    then the "*" host;
 *  - paths: a host's routes are sorted by path; a binary search finds the
 *    greatest path at most the request's, and the answer is it or one of
 *    the routes whose path is a prefix of it, walked through <parent>
 *    (every route path that is a prefix of the request's path lies on that
 *    walk). O(log n) plus the nesting depth of the host's prefixes.
 *
 * Generations and their slots: route_prepare() writes a generation into a
 * slot (a header in gens[]) that is neither current nor reported in use by
 * a live worker, then route_commit() makes it current with one release
 * store. route_acquire() is the worker's side: it takes the current table
 * and reports its id in the worker's slot, re-checking that it is still
 * current, so the master can never reuse a table under a reader.
 *
 * Sizing: the master computes the block's exact size from the config
 * (route_size()), rounded up to pages, and takes the first gap of the
 * arena that large between the blocks of the generations still busy; so a
 * generation is as big as its config needs, up to the arena's size less
 * what the busy ones hold. When a slot is reused, its old block's pages
 * are given back (punched out of the memfd) unless the new block covers
 * them. No room (every slot busy, or no gap large enough) fails the reload
 * and changes nothing.
 */
#ifndef WEIR_SHM_ROUTE_H
#define WEIR_SHM_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "shm/route_types.h"

struct shm_segment;

/* Bytes the block of a generation compiled from <cfg> takes. */
size_t route_size(const struct config *cfg);

/* shm/route_hdrrules.c: where the header rules' arrays go in a block,
 * from offset <at> (returns the end), and writing them. */
struct route_hdr_layout {
	size_t off_rules, off_pieces, off_text;
};
size_t route_hdrrules_layout(const struct config *cfg, size_t at, struct route_hdr_layout *l);
void route_hdrrules_write(struct route_table *t, char *block, const struct route_hdr_layout *l,
                          const struct config *cfg);

/* Fills header <t> and the block at <block> (<cap> bytes, at least
 * route_size(cfg), 8-byte aligned) from <cfg>, with its lookup index. Stat
 * indices are left 0: route_prepare() assigns them. Returns 0, or -1 when
 * <cap> is too small. */
int route_compile(struct route_table *t, void *block, size_t cap, const struct config *cfg);

/*
 * The route for <host> (as sent: the port, if any, is ignored; compared
 * case-insensitively; may be empty) and <path> (the path of the target,
 * without the query). NULL when nothing matches.
 */
const struct route_entry *route_lookup(const struct route_table *t, const char *host, size_t host_len,
                                       const char *path, size_t path_len);

/* route_lookup() for a table with conditions (shm/route_match.h): <fn>
 * is asked, with <ctx>, about each route with conditions on the walk. */
typedef int (*route_cond_fn)(void *ctx, const struct route_table *t, const struct route_entry *e);
const struct route_entry *route_lookup_cond(const struct route_table *t, const char *host, size_t host_len,
                                            const char *path, size_t path_len, route_cond_fn fn, void *ctx);

/* Whether <e> lets an upgrade to protocol <tok> (<len> bytes, compared
 * without case) through. */
int route_upgrade_allowed(const struct route_entry *e, const char *tok, size_t len);

/* Master: compiles <cfg> into a free generation slot and makes it current.
 * Returns the new generation id, or 0 if no slot is free (a reader is still
 * on every old one; try again later). */
uint64_t route_publish(struct shm_segment *seg, const struct config *cfg);

/* The two halves of route_publish(), for a reload that must be able to
 * back out: prepare writes a free slot (-1 if none, -2 if the arena has no
 * gap large enough beside the busy generations) without making it visible,
 * with the stat index of every route and server (new keys are appended to
 * the segment's key table even if the reload backs out: they only use up
 * room); commit makes it current and returns its generation id.
 * Commit also drops the admin override (state, weight) of every server key
 * the new table no longer holds, so a server removed and added back later
 * starts without one; servers that stay keep theirs. */
int route_prepare(struct shm_segment *seg, const struct config *cfg);
uint64_t route_commit(struct shm_segment *seg, int slot);

/* Worker in slot <slot>: the current table, reported as in use. A table
 * kept past the next acquire (by a request in flight) must also be held
 * with the worker's gen_min (see worker_table_hold). */
const struct route_table *route_acquire(struct shm_segment *seg, int slot);

#endif
