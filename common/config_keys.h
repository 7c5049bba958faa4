/*
 * config_keys.h: one descriptor per configuration key.
 *
 * Principle: a scalar key is described once, in common/config_keys.c: its
 * name, its type, where its value lands (an offset into struct config or
 * into the struct of a list entry), its default as an operator would write
 * it, its range and a one-line doc. From that one line the loader checks
 * the key and words its errors (common/config_engine.c), applies the
 * default, `weir -T` prints it (common/config_dump.c) and the key tables of
 * docs/config.md are generated and checked (tests/unit/common/
 * test_config_keys.c). Groups and lists of groups (log, listeners, tls,
 * servers ...) appear in the tables as keys too, so that a table says
 * every name a group allows; what they hold, the rules across keys and
 * the files read stay hand-written in common/config_file.c.
 */
#ifndef WEIR_COMMON_CONFIG_KEYS_H
#define WEIR_COMMON_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct config;

enum config_key_type {
	CONFIG_KEY_DURATION,     /* uint32_t ms, 1 ms .. UINT32_MAX ms */
	CONFIG_KEY_DURATION_OFF, /* the same, or 0 (0, "0" or "off"): turned off */
	CONFIG_KEY_SIZE,         /* uint32_t or uint64_t bytes, min..max */
	CONFIG_KEY_INT,          /* int or uint32_t, min..max */
	CONFIG_KEY_BOOL,         /* int, 0 or 1 */
	CONFIG_KEY_STRING,       /* char[size], at most max bytes in the file */
	CONFIG_KEY_ENUM,         /* int-sized enum, one of names[] */
	CONFIG_KEY_ADDR,         /* struct config_addr */
	CONFIG_KEY_GROUP,        /* a group read by hand: sub describes it */
	CONFIG_KEY_LIST,         /* a list of groups read by hand: sub describes an entry */
	CONFIG_KEY_STRINGS,      /* a list of strings read by hand (routes.upgrade) */
};

enum {
	CONFIG_KEY_REQUIRED = 1 << 0, /* absent is an error: "X is required" */
	CONFIG_KEY_NOECHO = 1 << 1,   /* a bad value is not quoted back in the message */
	CONFIG_KEY_SECRET = 1 << 2,   /* weir -T prints a comment, never the value */
	CONFIG_KEY_OPTIONAL = 1 << 3, /* weir -T leaves it out while unset ("", no address) */
	CONFIG_KEY_AUTO = 1 << 4,     /* INT: "auto" is the number of online cores, within the range */
	CONFIG_KEY_NUMBER = 1 << 5,   /* STRING: may be written as a number, read as its text (bounded_load = 1.25) */
	CONFIG_KEY_TRUE_OK = 1 << 6,  /* STRING: true and false are taken too, as "true" and "false" */
	CONFIG_KEY_INHERIT = 1 << 7,  /* absent, another key's value, which <def> names (its loader copies it) */
};

struct config_keyset;

struct config_key {
	const char *name; /* in its group: "client_header" */
	enum config_key_type type;
	unsigned flags;
	size_t offset; /* into the struct the group lands in */
	size_t size;   /* of the field there; 0: the value is read by hand, not stored */
	uint64_t min, max; /* INT and SIZE: range; STRING: max is the longest value */
	/* the default as written in a file ("10s", "16k", "info", "true");
	 * NULL for none (a zeroed field). For GROUP and LIST, what absence
	 * means, for the docs. */
	const char *def;
	const char *const *names; /* ENUM: the names, by value (NULL: not accepted) */
	int nnames;
	/* STRING: NULL or why <text> is not acceptable, worded to follow the
	 * key ("must be a host name") */
	const char *(*check)(const char *text);
	/* STRING: stores <text> into the struct at <base> itself (not a copy
	 * into the field), returns NULL or why it cannot */
	const char *(*store)(const char *text, void *base);
	/* weir -T: the value of a STRING that has store() or size 0, as text */
	const char *(*show)(const struct config *cfg, const void *base, char *buf, size_t cap);
	const char *needs; /* weir -T prints it only while this STRING key of its group is set */
	const struct config_keyset *sub; /* GROUP and LIST */
	const char *doc;
};

struct config_keyset {
	const char *path;  /* "timeouts", "listeners.tls", "" for the top level */
	const char *where; /* ends "unknown key" messages: "in timeouts" */
	const struct config_key *keys;
	int nkeys;
};

extern const struct config_keyset config_keys_top, config_keys_log, config_keys_stats, config_keys_listener,
    config_keys_listener_tls, config_keys_cert, config_keys_upstream, config_keys_upstream_tls,
    config_keys_upstream_health, config_keys_server, config_keys_route, config_keys_route_return,
    config_keys_route_auth, config_keys_timeouts, config_keys_limits, config_keys_rate_limit,
    config_keys_rate_limit_adaptive, config_keys_redis, config_keys_upstream_timeouts,
    config_keys_upstream_request_limits, config_keys_route_timeouts, config_keys_route_limits,
    config_keys_compress, config_keys_route_compress,
    config_keys_route_match_header, config_keys_route_match_query, config_keys_route_rewrite,
    config_keys_headers, config_keys_headers_request, config_keys_headers_response, config_keys_http2;

/*
 * Checks and stores for string keys, named in the descriptors, written
 * with the loader's sections: common/config_file.c (route path and host),
 * common/config_ratelimit.c (rate limit key and rate), config_keys.c (a
 * header name weir writes for a client's sake, client_header and
 * consumer_header: a token that is none of the names weir owns),
 * common/config_policy.c (below). Declared
 * here, not in config_load.h, so that config_keys.c needs no loader
 * internals and config_load.h can include this header without a cycle.
 */
const char *config_check_route_path(const char *text);
const char *config_store_route_host(const char *text, void *route);
const char *config_check_rl_key(const char *text);
const char *config_check_rl_rate(const char *text);
const char *config_check_header_name(const char *text);
/* common/config_split.c: routes.split_key and split_override's names */
extern const struct config_keyset config_keys_route_split, config_keys_route_split_override, config_keys_route_mirror;
const char *config_check_split_key(const char *text);
const char *config_check_split_name(const char *text);
const char *config_show_split_key(const struct config *cfg, const void *route, char *buf, size_t cap);
/* and written back by config_dump (nothing for a route without one) */
struct config_route;
void config_split_dump(FILE *out, const struct config *cfg, const struct config_route *r);
/* common/config_policy.c: access log formats, log_sample and direct
 * responses (routes.return) */
const char *config_check_log_format(const char *text);
const char *config_check_content_type(const char *text);
const char *config_store_log_sample(const char *text, void *route);
const char *config_show_log_sample(const struct config *cfg, const void *route, char *buf, size_t cap);
const char *config_store_return_location(const char *text, void *ret);
const char *config_store_return_body(const char *text, void *ret);
const char *config_show_return_location(const struct config *cfg, const void *ret, char *buf, size_t cap);
const char *config_show_return_body(const struct config *cfg, const void *ret, char *buf, size_t cap);
/* common/config_match.c: routes.path (hidden beside path_exact),
 * path_exact, path_regex and strip_prefix for weir -T */
const char *config_show_route_path(const struct config *cfg, const void *route, char *buf, size_t cap);
const char *config_show_path_exact(const struct config *cfg, const void *route, char *buf, size_t cap);
const char *config_show_path_regex(const struct config *cfg, const void *route, char *buf, size_t cap);
const char *config_show_strip_prefix(const struct config *cfg, const void *route, char *buf, size_t cap);

/* The key named <name> of <ks>, or NULL. */
const struct config_key *config_keys_find(const struct config_keyset *ks, const char *name);

/* <k>'s field in the struct at <base>. */
static inline void *config_key_field(const struct config_key *k, void *base)
{
	return (char *)base + k->offset;
}

/*
 * Writes the Markdown rows of the table for <ks>: "| `key` | type |
 * default | range | doc |", one per key, without the header. With a
 * <prefix> ("" for none) the keys of its groups and lists follow their
 * own row, named "tls.client_ca"; with NULL they do not (the top level,
 * whose groups have tables of their own).
 */
void config_keys_doc_rows(FILE *out, const struct config_keyset *ks, const char *prefix);

/* The header of such a table: two lines. */
void config_keys_doc_header(FILE *out);

#endif
