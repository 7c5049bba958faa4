/*
 * route_match.h: the matching conditions and rewrites of a route
 * generation (common/config_match.h, compiled by shm/route_match.c into
 * the block of shm/route_types.h).
 *
 * Order (docs/config.md, "Matching and rewrites"): lookup still picks the
 * host, then walks the routes whose path is a prefix of the request's,
 * longest first (shm/route.h). Routes of one host and one path are tried
 * in the order route_match_order() gives: exact-path routes first, then
 * those with more conditions, then file order; the first whose conditions
 * hold wins, and when none does the walk goes on to the next shorter
 * prefix. So a conditional route falls back to a plainer one, as nginx's
 * locations never do, and a table without conditions walks exactly as
 * before (t->ncond_routes is 0: no entry is even looked at twice).
 *
 * Regular expressions are stored as text (route_regexes): compiled code
 * cannot be shared between processes, so each worker compiles the texts
 * of each generation it meets, once (worker/core/match.c).
 */
#ifndef WEIR_SHM_ROUTE_MATCH_H
#define WEIR_SHM_ROUTE_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "shm/route_types.h"

struct config;
struct config_route;

/* route_entry.cond */
#define ROUTE_COND_EXACT 0x01 /* path_exact: the path must be the route's whole */
#define ROUTE_COND_CALL 0x02  /* conditions the worker checks (route_cond_fn) */

/* A header or query condition (common/config_match.h: enum match_where, match_op). */
struct route_mcond {
	uint8_t where;
	uint8_t op;
	uint16_t name_len;
	uint32_t name_off;  /* in the match strings: lower case for a header */
	uint32_t value_off; /* exact or prefix text */
	uint32_t value_len;
	uint32_t regex;     /* MATCH_REGEX: index into the regexes */
};

/* A regular expression's text, NUL-terminated in the match strings. */
struct route_regex {
	uint32_t off, len;
};

struct route_match {
	uint64_t methods;    /* 1 << enum http_method; 0: any */
	uint32_t path_regex; /* index into the regexes, ROUTE_NONE */
	uint32_t first_cond, ncond;
	uint32_t strip_len;  /* bytes cut from the start of the path forwarded, 0: none */
	uint32_t rw_regex;   /* rewrite: index into the regexes, ROUTE_NONE */
	uint32_t rw_replace_off, rw_replace_len;
	uint32_t label_off;  /* the route's label (config_match.h) */
};

static inline const struct route_match *route_matches(const struct route_table *t)
{
	return (const struct route_match *)route_at(t, t->off_matches);
}
static inline const struct route_mcond *route_mconds(const struct route_table *t)
{
	return (const struct route_mcond *)route_at(t, t->off_mconds);
}
static inline const struct route_regex *route_regexes(const struct route_table *t)
{
	return (const struct route_regex *)route_at(t, t->off_regexes);
}
static inline const char *route_mstring(const struct route_table *t, uint32_t off)
{
	return (const char *)route_at(t, t->off_mstrings + off);
}

/* The match of <e>, or NULL for a plain route. */
static inline const struct route_match *route_match_of(const struct route_table *t, const struct route_entry *e)
{
	return e->match == ROUTE_NONE ? NULL : &route_matches(t)[e->match];
}

/* Route <e>'s name in counters, /routes and logs: its path, and for a
 * route with conditions their short form ("=/x", "/ ~^/v[0-9]+/ GET"). */
static inline const char *route_label(const struct route_table *t, const struct route_entry *e)
{
	const struct route_match *m = route_match_of(t, e);

	return m ? route_mstring(t, m->label_off) : route_path(t, e);
}

/* route.h's route_cond_fn: the worker's check of <e>'s conditions for
 * the request <ctx> describes, 1 when they all hold. */
typedef int (*route_cond_fn)(void *ctx, const struct route_table *t, const struct route_entry *e);

/* Whether <e>, whose path is a prefix of the request's (<path_len>
 * bytes), takes it: its exact path, then <fn> (NULL: a route with
 * conditions never matches). */
static inline int route_cond_ok(const struct route_table *t, const struct route_entry *e, size_t path_len,
                                route_cond_fn fn, void *ctx)
{
	if (!e->cond)
		return 1;
	if ((e->cond & ROUTE_COND_EXACT) && e->path_len != path_len)
		return 0;
	return !(e->cond & ROUTE_COND_CALL) || (fn && fn(ctx, t, e));
}

/* <0 when route <x> is tried before <y> among routes of one host and one
 * path: exact path first, then more conditions, then file order (<x> and
 * <y> are entries of one config's routes array). */
int route_match_order(const struct config_route *x, const struct config_route *y);

/* Bytes route_match_compile() writes for <cfg> (0 without conditions). */
size_t route_match_size(const struct config *cfg);

/*
 * Writes the matches of <t>'s routes into <block> (route_match_size(cfg)
 * bytes, 8-byte aligned, at offset <off> of the generation's block): every
 * entry's <match> holds, on entry, the index of its config route or
 * ROUTE_NONE, and holds on return its index into route_matches, with
 * <cond> set.
 */
void route_match_compile(struct route_table *t, struct route_entry *routes, char *block, uint32_t off,
                         const struct config *cfg);

#endif
