/*
 * config_match.h: a route's matching conditions beyond host and path
 * prefix, and its path rewrite (docs/config.md, "Matching and rewrites"):
 * path_exact, path_regex, methods, match_headers, match_query,
 * strip_prefix and rewrite, as loaded by common/config_match.c.
 *
 * A route without any of these keys has no struct config_match (NULL), so
 * its routing costs what a plain prefix route costs. Regular expressions
 * are kept as text here: the master compiles each once per load to check
 * it (weir -t, a reload), and each worker compiles the texts a route
 * generation holds (worker/core/match.c), since compiled PCRE2 code holds
 * pointers and JIT machine code that cannot sit in the shared segment.
 */
#ifndef WEIR_COMMON_CONFIG_MATCH_H
#define WEIR_COMMON_CONFIG_MATCH_H

#include <stdint.h>
#include <stdio.h>

#include "common/config.h"

#define MATCH_COND_MAX 8   /* match_headers entries, and match_query entries, each */
#define MATCH_TEXT_MAX 256 /* a value, a pattern or a replacement, with its NUL */
#define MATCH_TARGET_MAX 4096 /* a rewritten request target, at most (bytes) */

enum match_where { MATCH_HEADER, MATCH_QUERY };
enum match_op { MATCH_EXACT, MATCH_PREFIX, MATCH_REGEX, MATCH_PRESENT, MATCH_ABSENT };

struct config_match_cond {
	uint8_t where;                /* enum match_where */
	uint8_t op;                   /* enum match_op */
	char name[CONFIG_NAME_MAX];   /* a header's in lower case; a query argument's as written */
	char value[MATCH_TEXT_MAX];   /* exact or prefix text, or the pattern; "" for present/absent */
};

/* A match_headers or match_query entry as the descriptors read it
 * (common/config_keys.c); the rest is read by hand. */
struct config_match_entry {
	char name[CONFIG_NAME_MAX];
	int present;
};

struct config_match {
	uint8_t exact;                     /* path_exact: the route's path is the whole path */
	uint64_t methods;                  /* 1 << enum http_method of each listed; 0: any */
	char path_regex[MATCH_TEXT_MAX];   /* "" for none */
	struct config_match_cond cond[2 * MATCH_COND_MAX];
	int ncond;
	/* strip_prefix: 0 off, 1 the route's path (true), 2 strip[] */
	uint8_t strip;
	char strip_text[CONFIG_PATH_MAX];
	char rw_regex[MATCH_TEXT_MAX];     /* rewrite.regex, "" for none */
	char rw_replace[MATCH_TEXT_MAX];   /* rewrite.replace, $1 ${name} as PCRE2 substitutes */
	/* the route's name in counters, /routes and duplicate checks: its
	 * path and a short form of its conditions ("=/x", "/api ~^/v[0-9]/
	 * GET,HEAD x-v=2 ?v=2"); the path alone for a route without conditions */
	char label[CONFIG_PATH_MAX];
};

/* The number of conditions of <m> (0 for NULL): the regex, the method
 * set, each header and query condition; the ordering's second key. */
int config_match_nconds(const struct config_match *m);

/* Whether route <r> has conditions a request must meet beyond its path
 * prefix (exact path included). */
static inline int config_match_conditional(const struct config_route *r)
{
	return r->match && (r->match->exact || config_match_nconds(r->match) > 0);
}

/* The label of <r> (its path when it has no conditions). */
static inline const char *config_route_label(const struct config_route *r)
{
	return r->match && r->match->label[0] ? r->match->label : r->path;
}

/* weir -T: the hand-read keys of <m> ("methods = [...]; ..."), on the
 * current line. */
void config_match_dump(FILE *out, const struct config_match *m);

#endif
