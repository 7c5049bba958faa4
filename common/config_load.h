/*
 * config_load.h: what common/config_file.c (the hand-written sections),
 * common/config_engine.c (the descriptor engine) and common/config_keys.c
 * (the descriptors) share while one file is loaded. Not for other modules:
 * they see struct config (common/config.h) and the descriptors
 * (common/config_keys.h) only.
 */
#ifndef WEIR_COMMON_CONFIG_LOAD_H
#define WEIR_COMMON_CONFIG_LOAD_H

#include <libconfig.h>

#include "common/config.h"
#include "common/config_keys.h"

#define CONFIG_KEYS_MAX 32 /* keys of one group, at most */

/* The state of one load: where errors go, kept sorted by line. */
struct loader {
	const char *file;
	struct config *cfg;
	struct config_errors *errs;
	int lines[CONFIG_MAX_ERRORS]; /* line of each kept message */
};

/* A value read from the file: absent, present and valid, or present and
 * wrong (already reported). */
enum got {
	GOT_NONE,
	GOT_OK,
	GOT_BAD,
};

/*
 * Records "FILE:LINE: message" (or "FILE: message" when <line> is 0), kept
 * sorted by line; errs->count counts every message, CONFIG_MAX_ERRORS are
 * kept.
 */
void config_fail(struct loader *ld, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline int config_line_of(const config_setting_t *s)
{
	return s ? (int)config_setting_source_line(s) : 0;
}

/*
 * Reads group <g> (NULL when absent: only the defaults are applied) as
 * <ks> describes it into the struct at <base>: every member whose name is
 * not a key of <ks> is refused, every default is applied, every scalar
 * present is checked and stored. GROUP and LIST members are only allowed
 * here; the caller reads them. <got> (NULL, or ks->nkeys entries) tells
 * per key what was found.
 */
void config_engine_read(struct loader *ld, const config_setting_t *g, const struct config_keyset *ks, void *base,
                        enum got *got);

/* What config_engine_read() found for key <name> of <ks>. */
enum got config_engine_got(const struct config_keyset *ks, const enum got *got, const char *name);

/* <key> of <group> as a group, reported under <what> if it is not one. */
config_setting_t *config_get_group(struct loader *ld, const config_setting_t *group, const char *key,
                                   const char *what);

/* <key> of <group> as a list of 1 to <max> groups; reports an absent (when
 * <required>), mistyped or empty list. */
config_setting_t *config_get_list(struct loader *ld, const config_setting_t *group, const char *key,
                                  const char *what, int required, int max);

/* Entry <i> of <list>, reported under <what> if it is not a group. */
config_setting_t *config_get_entry(struct loader *ld, const config_setting_t *list, int i, const char *what);

/* NULL, or why <text> is not an address, worded to follow it. */
const char *config_addr_parse(const char *text, struct config_addr *a);

/* The checks for string keys the descriptors name are in
 * common/config_keys.h, which config_keys.c includes instead of this. */

/* common/config_ratelimit.c: the rate_limits list, and a route's
 * rate_limits names (after the list is read). Return -1 only when out of
 * memory. */
int config_load_rate_limits(struct loader *ld, const config_setting_t *root);
int config_route_rate_limits(struct loader *ld, const config_setting_t *e, struct config_route *r);

/* common/config_policy.c: reads trusted_proxies (the other top-level
 * keys are descriptors'; the checks, stores and shows they name are in
 * common/config_keys.h). */
void config_policy_load_top(struct loader *ld, const config_setting_t *root);

/* Reads routes.return of entry <e> into a new config.returns entry and
 * sets r->ret; checks that the route has an upstream or a return, not
 * both (<has_upstream>). Returns 1 if good, 0 (reported) if not, -1 when
 * out of memory. */
int config_policy_load_route(struct loader *ld, const config_setting_t *e, struct config_route *r, int has_upstream);

/* common/config_policy.c: compiles <text> into <t> as a header value's
 * template: NULL, or why not (an unknown variable, CR, LF or a control
 * byte in a literal). */
const char *config_header_tpl(struct vars_tpl *t, const char *text);

/* common/config_hdrrules.c: headers = { ... } of entry <e> (<what>:
 * "routes.headers" or "upstreams.headers") into the configuration's pools
 * and *<out>, after the rules of <inherit> (a route's group; NULL for
 * none). Returns -1 only when out of memory. config_hdrrules_check(), once
 * every route is read, refuses a rule on a name weir vouches for (a
 * listener's client_header, an auth policy's consumer or claim header). */
struct hdrrules_ref;
int config_hdrrules_read(struct loader *ld, const config_setting_t *e, const char *what,
                         const struct hdrrules_ref *inherit, struct hdrrules_ref *out);
void config_hdrrules_check(struct loader *ld);

/* common/config_auth.c: the auth group of route entry <e>, if any, into
 * *<out> (NULL when absent). Returns -1 only when out of memory. */
struct config_auth;
int config_auth_read(struct loader *ld, const config_setting_t *e, struct config_auth **out);

/* common/config_compress.c: compress = { ... } at the top level (its
 * defaults applied when absent: routes' blocks start from them), and of
 * route entry <e> into r->compress (NULL when absent). The route's
 * returns 1 if good, 0 (reported) if not, -1 when out of memory. */
void config_compress_load_top(struct loader *ld, const config_setting_t *root);
int config_compress_read_route(struct loader *ld, const config_setting_t *e, struct config_route *r);
/* common/config_match.c: the matching and rewrite keys of route entry
 * <e> into r->match (NULL when it has none), after its path was read.
 * Returns 1 if good, 0 (reported) if not, -1 when out of memory. */
int config_match_read(struct loader *ld, const config_setting_t *e, struct config_route *r);
/* common/config_split.c: routes.split, split_key and split_override of
 * entry <e> into r->split (left NULL without a split). Returns 1 if good,
 * 0 (reported) if not, -1 when out of memory. The dump writes them back. */
int config_split_load(struct loader *ld, const config_setting_t *e, struct config_route *r);
/* A rate limit key <text> into <l>'s parts (config_ratelimit.c): NULL or
 * what is wrong. */
const char *config_rl_key_parse(const char *text, struct config_rate_limit *l);

/* health = { ... } of upstream entry <e> into u->health (common/config_file_health.c). */
void config_load_health(struct loader *ld, const config_setting_t *e, struct config_upstream *u);

#endif
