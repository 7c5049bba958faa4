/*
 * route_types.h: the layout of a route generation and the accessors of its
 * arrays, nothing that needs the segment, so that shm/shm.h (and what it
 * includes, shm/resil.h) can hold and read generations without the
 * functions of shm/route.h, which needs shm/shm.h: no include cycle.
 *
 * A generation is a fixed header (struct route_table, one per slot in the
 * segment's gens[]) and a block of variable size in the segment's arena
 * that holds everything else, found by offsets from the header (never
 * pointers: the segment is mapped at different addresses in an old and a
 * new master during a binary upgrade). Read the arrays through the
 * accessors of shm/route.h.
 *
 * The block, in order, each array aligned to 8 bytes:
 *   settings[nsettings]   what a request reads once routed (timeouts,
 *                         limits, path and header rules); [0] is the
 *                         global one, then one per group and per route
 *                         that overrides something
 *   upstreams[nupstreams] groups, in file order
 *   servers[nservers]     servers, grouped by upstream
 *   routes[nroutes]       grouped by host, each host's routes sorted by path
 *   hosts[nhosts]         one per distinct (host kind, host)
 *   exact[exact_mask + 1] hash table of exact hosts: host index + 1, 0 empty
 *   wild[wild_mask + 1]   hash table of wildcard suffixes, the same way
 *   returns[nreturns]     routes.return answers (common/policy.h)
 *   limits[nlimits]       the rate limits as configured, ids given
 *                         (limit_assign): a worker of any config reads
 *                         a table's own
 *   strings               host names and paths, NUL-terminated
 *   matches, mconds, regexes, mstrings
 *                         routes' conditions and rewrites (shm/route_match.c)
 *   hdr_rules, hdr_pieces, hdr_text
 *                         header rules, the pieces of their values, their
 *                         names and literals (common/hdrrules.h)
 *   splits[nsplits]       routes.split, by config_split.index (route_split.c)
 *   hash[]                the ring_hash and maglev tables of the groups
 *                         balanced so (shm/route_hash.c), each group's
 *                         at its route_upstream.hash_first
 */
#ifndef WEIR_SHM_ROUTE_TYPES_H
#define WEIR_SHM_ROUTE_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/config.h"
#include "common/hdrrules.h"
#include "common/policy.h"
#include "common/split.h"

#define ROUTE_NONE UINT32_MAX

/* Everything a request reads from the settings once it is routed, resolved
 * at compile time: global, then its upstream group's overrides, then its
 * route's (common/config.h: struct config_overrides). Full copies, so a
 * request never looks further than its one generation. */
struct route_settings {
	struct config_timeouts timeouts;
	struct config_limits limits;
	uint8_t merge_slashes;          /* config.merge_slashes */
	uint8_t underscores_in_headers; /* config.underscores_in_headers */
};

struct route_entry {
	uint8_t host_kind; /* enum config_host_kind */
	uint16_t host_len;
	uint16_t path_len;
	uint16_t stat;     /* stable stat index of (host kind, host, path): stat.h */
	uint32_t upstream; /* index into the upstreams */
	int16_t ret;       /* index into the returns, -1: proxied (upstream is then 0) */
	uint8_t log;       /* access log lines for its requests (routes.log) */
	uint16_t log_sample; /* the share logged, in 1/10000 (routes.log_sample) */
	uint8_t abort;       /* routes.abort_on_client_close, or the top level's */
	uint8_t auth;      /* enum auth_type of its policy, 0 none: a worker finds
	                    * the policy in its own config (worker/auth.c) */
	uint8_t nlimits;   /* rate limits checked: indices into the limits */
	uint8_t limits[CONFIG_ROUTE_LIMITS];
	uint32_t settings; /* index into the settings */
	uint32_t host_off; /* its host's name in the strings (shared by its host's routes) */
	uint32_t path_off; /* its path prefix in the strings */
	/* the longest other route of the same host whose path is a prefix of
	 * this one's (index into the routes), ROUTE_NONE if none: lookup's
	 * walk from the nearest path below the request's (route.c) */
	uint32_t parent;
	char upgrade[CONFIG_UPGRADE_MAX]; /* Upgrade tokens allowed, config_route.upgrade */
	/* matching and rewrites (shm/route_match.h): ROUTE_COND_* bits, and
	 * the index of its route_match, ROUTE_NONE for a plain route */
	uint8_t cond;
	uint32_t match;
	struct hdrrules_ref hdr; /* its header rules: its group's, then its own (hdrrules.h) */
	uint16_t split; /* its split's index into the splits + 1; 0: none (upstream is the group) */
	uint16_t mirror;        /* routes.mirror: the shadow group's index + 1; 0: none */
	uint16_t mirror_share;  /* the share copied, in 1/10000 */
	uint16_t mirror_max;    /* copies in flight per worker, at most */
};

/* One distinct host pattern and its routes, routes[first .. first + n). */
struct route_host {
	uint32_t hash; /* route.c's hash of the name (a wildcard's with its dot) */
	uint32_t name_off;
	uint16_t len;
	uint8_t kind; /* enum config_host_kind */
	uint32_t first;
	uint32_t n;
};

struct route_server {
	struct sockaddr_storage sa;
	socklen_t len;
	uint32_t weight;
	uint32_t keepalive; /* pool size of the server's upstream group */
	uint16_t stat;      /* stable stat index of (upstream name, address): stat.h */
	uint32_t upstream;  /* its group: index into the upstreams */
	char text[CONFIG_ADDR_STR_MAX];
};

struct route_upstream {
	char name[CONFIG_NAME_MAX];
	uint32_t first_server;
	uint32_t nservers;
	uint32_t keepalive;
	uint32_t max_fails;    /* failures in a row that mark a server down; 0: never */
	uint32_t fail_timeout; /* ms: the window of a run, and how long a mark lasts */
	uint32_t settings;     /* index into the settings: the group's, for what is per group */
	/* TLS to the servers (config.h): a worker matches these against the
	 * contexts it built from its own config (worker/tls_client.c), so a
	 * worker never uses a context its generation did not describe */
	uint8_t tls;
	uint8_t tls_verify;
	uint8_t proxy_protocol; /* 0 off, 1 v1, 2 v2 (worker/upproxy.h) */
	uint8_t protocol;       /* 0 HTTP/1.1, 1 h2c, 2 h2 (worker/up/h2_client.h) */
	uint8_t balance;        /* enum balance_kind (shm/balance.h) */
	uint8_t choices;        /* least_request: candidates drawn */
	uint32_t slow_start;    /* ms: the weight ramp of a joining or returning server; 0: off */
	char tls_sni[CONFIG_HOST_MAX];
	struct config_resil resil; /* its traffic controls, as configured */
	uint16_t resil_group;      /* its limits and breaker state (shm/resil.h), or RESIL_GROUP_NONE */
	char tls_ca[1024];   /* the CA file the context was made from */
	uint64_t tls_ca_sum; /* and a digest of what it held (config_upstream.tls_ca_sum) */
	/* ring_hash and maglev (shm/route_hash.c): the key (common/
	 * config_hash.h), and the group's table, entries [hash_first,
	 * hash_first + hash_n) of route_hash_entries() */
	uint8_t hash_kind;
	uint8_t hash_name_len;
	uint8_t hash_fallback;
	uint16_t bounded_load; /* hundredths; 0: off */
	char hash_name[64];
	uint32_t hash_first, hash_n;
};

/* A generation's header, in the segment's gens[]. */
struct route_table {
	uint64_t id; /* generation id, from 1; 0 = never written */
	uint32_t nroutes;
	uint32_t nupstreams;
	uint32_t nservers;
	uint32_t nsettings;
	uint32_t nhosts;
	uint32_t exact_mask, wild_mask; /* hash table sizes less one (a power of two) */
	uint32_t any_host;              /* index of the "*" host, ROUTE_NONE if none */
	uint32_t nwild;                 /* wildcard hosts (0: no suffix is looked up) */
	uint32_t nreturns, nlimits;
	/* the block: at (char *)header + rel, <size> bytes, at <arena_off> in
	 * the segment's arena (shm.h); offsets of its arrays from its start */
	int64_t rel;
	uint64_t arena_off;
	uint64_t size;
	uint32_t off_settings, off_upstreams, off_servers, off_routes, off_hosts, off_exact, off_wild, off_strings;
	uint32_t off_returns, off_limits;
	/* matching and rewrites (shm/route_match.h): routes with conditions
	 * (0: lookup never looks at route_entry.cond), and the arrays */
	uint32_t ncond_routes, nmatches, nmconds, nregexes;
	uint32_t off_matches, off_mconds, off_regexes, off_mstrings;
	/* header rules (common/hdrrules.h, shm/route_hdrrules.c): rules,
	 * their pieces and their text pool, copied whole from the config */
	uint32_t nhdr_rules, nhdr_pieces, nhdr_text;
	uint32_t off_hdr_rules, off_hdr_pieces, off_hdr_text;
	uint32_t nsplits, off_splits; /* routes.split (route_split below) */
	uint32_t off_hash; /* the hash balancers' tables (shm/route_hash.c) */
};

/* A route's split (common/split.h), as a worker reads it: the sides'
 * groups and the upper bounds of their bucket ranges. */
struct route_split {
	uint8_t nsides;
	uint8_t has_key;  /* split_key given; else every request is drawn at random */
	uint8_t key_kind; /* enum config_rl_part */
	uint8_t key_len;
	uint8_t ovr_kind; /* enum split_override_kind */
	uint8_t ovr_len;
	uint16_t bound[SPLIT_SIDES];   /* side i holds buckets [bound[i - 1], bound[i]) */
	uint32_t upstream[SPLIT_SIDES]; /* index into the upstreams */
	char key_name[SPLIT_NAME_MAX];
	char ovr_name[SPLIT_NAME_MAX];
};

/* The arrays of generation <t> (route_types.h). */
static inline const void *route_at(const struct route_table *t, uint32_t off)
{
	return (const char *)((uintptr_t)t + (uintptr_t)t->rel) + off;
}
#define ROUTE_ARRAY(name, type, off)                                         \
	static inline const type *name(const struct route_table *t)          \
	{                                                                    \
		return (const type *)route_at(t, t->off);                    \
	}
ROUTE_ARRAY(route_entries, struct route_entry, off_routes)
ROUTE_ARRAY(route_upstreams, struct route_upstream, off_upstreams)
ROUTE_ARRAY(route_servers, struct route_server, off_servers)
ROUTE_ARRAY(route_settings_all, struct route_settings, off_settings)
ROUTE_ARRAY(route_hosts, struct route_host, off_hosts)
ROUTE_ARRAY(route_returns, struct policy_return, off_returns)
ROUTE_ARRAY(route_limits, struct config_rate_limit, off_limits)
ROUTE_ARRAY(route_hdr_rules, struct hdrrule, off_hdr_rules)
ROUTE_ARRAY(route_hdr_pieces, struct vars_piece, off_hdr_pieces)
ROUTE_ARRAY(route_hdr_text, char, off_hdr_text)
ROUTE_ARRAY(route_splits, struct route_split, off_splits)
ROUTE_ARRAY(route_hash_entries, uint64_t, off_hash)
#undef ROUTE_ARRAY

/* Route <e>'s host (lower case; a wildcard's with its leading dot, "" for
 * any) and path prefix, NUL-terminated. */
static inline const char *route_host(const struct route_table *t, const struct route_entry *e)
{
	return (const char *)route_at(t, t->off_strings + e->host_off);
}
static inline const char *route_path(const struct route_table *t, const struct route_entry *e)
{
	return (const char *)route_at(t, t->off_strings + e->path_off);
}

/* The settings a request routed to <e> reads; route_settings_global() for
 * one that matched no route. */
static inline const struct route_settings *route_settings_of(const struct route_table *t,
                                                             const struct route_entry *e)
{
	return &route_settings_all(t)[e->settings];
}
static inline const struct route_settings *route_settings_global(const struct route_table *t)
{
	return &route_settings_all(t)[0];
}

#endif
