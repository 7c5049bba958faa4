/*
 * route.h: routing tables in the shared segment.
 *
 * Principle: the master compiles the config's routes, upstream groups and
 * servers into a flat, pointer-free struct route_table (so it means the same
 * in every process), sorted so that lookup is one forward scan: routes with
 * an exact host first, then wildcard hosts longest suffix first, then routes
 * for any host; within one host, longest path prefix first. Lookup picks the
 * most specific host that matches, then the longest prefix within that host
 * (as nginx picks a server block, then a location); it does not fall back to
 * a less specific host when the chosen host has no matching prefix.
 *
 * Generations: route_publish() writes a table into a slot that is neither
 * current nor reported in use by a live worker, then makes it current with
 * one release store. route_acquire() is the worker's side: it takes the
 * current table and reports its id in the worker's slot, re-checking that it
 * is still current, so the master can never reuse a table under a reader.
 *
 * Known limit: the scan is linear in the number of routes. That is cheap for
 * the tens of routes real configs have; a trie would be the next step.
 */
#ifndef WEIR_SHM_ROUTE_H
#define WEIR_SHM_ROUTE_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/config.h"

struct shm_segment;

struct route_entry {
	uint8_t host_kind; /* enum config_host_kind */
	uint16_t host_len;
	uint16_t path_len;
	uint16_t stat;     /* stable stat index of (host kind, host, path): stat.h */
	uint32_t upstream; /* index into route_table.upstreams (0 with a return) */
	int16_t ret;       /* index into route_table.returns, -1: proxied */
	uint8_t log;       /* access log lines for its requests (routes.log) */
	uint16_t log_sample; /* the share logged, in 1/10000 (routes.log_sample) */
	uint8_t auth;      /* enum auth_type of its policy, 0 none: a worker finds
	                    * the policy in its own config (worker/auth.c) */
	char upgrade[CONFIG_UPGRADE_MAX]; /* Upgrade tokens allowed, config_route.upgrade */
	uint8_t nlimits;                  /* rate limits checked: indices into route_table.limits */
	uint8_t limits[CONFIG_ROUTE_LIMITS];
	char host[CONFIG_HOST_MAX];
	char path[CONFIG_PATH_MAX];
};

struct route_server {
	struct sockaddr_storage sa;
	socklen_t len;
	uint32_t weight;
	uint32_t keepalive; /* pool size of the server's upstream group */
	uint16_t stat;      /* stable stat index of (upstream name, address): stat.h */
	uint32_t upstream;  /* its group: index into route_table.upstreams */
	char text[CONFIG_ADDR_STR_MAX];
};

struct route_upstream {
	char name[CONFIG_NAME_MAX];
	uint32_t first_server;
	uint32_t nservers;
	uint32_t keepalive;
	uint32_t max_fails;    /* failures in a row that mark a server down; 0: never */
	uint32_t fail_timeout; /* ms: the window of a run, and how long a mark lasts */
	/* TLS to the servers (config.h): a worker matches these against the
	 * contexts it built from its own config (worker/tls_client.c) */
	uint8_t tls;
	uint8_t tls_verify;
	uint8_t proxy_protocol; /* 0 off, 1 v1, 2 v2 (worker/upproxy.h) */
	char tls_sni[CONFIG_HOST_MAX];
	struct config_resil resil; /* its traffic controls, as configured */
	uint16_t resil_group;      /* its limits and breaker state (shm/resil.h), or RESIL_GROUP_NONE */
};

struct route_table {
	uint64_t id; /* generation id, from 1; 0 = never written */
	uint32_t nroutes;
	uint32_t nupstreams;
	uint32_t nservers;
	struct route_entry routes[CONFIG_MAX_ROUTES];
	struct route_upstream upstreams[CONFIG_MAX_UPSTREAMS];
	struct route_server servers[CONFIG_MAX_SERVERS];
	uint32_t nreturns;
	struct policy_return returns[POLICY_RETURNS_MAX]; /* routes.return (common/policy.h) */
	/* the rate limits, as configured (pointer-free), their ids given
	 * (limit_assign): a worker of any config reads a table's own */
	uint32_t nlimits;
	struct config_rate_limit limits[CONFIG_MAX_RATE_LIMITS];
};

/* Fills <t> from <cfg>, sorted for lookup. Stat indices are left 0:
 * route_prepare() assigns them. */
void route_compile(struct route_table *t, const struct config *cfg);

/*
 * The route for <host> (as sent: the port, if any, is ignored; compared
 * case-insensitively; may be empty) and <path> (the path of the target,
 * without the query). NULL when nothing matches.
 */
const struct route_entry *route_lookup(const struct route_table *t, const char *host, size_t host_len,
                                       const char *path, size_t path_len);

/* Whether <e> lets an upgrade to protocol <tok> (<len> bytes, compared
 * without case) through. */
int route_upgrade_allowed(const struct route_entry *e, const char *tok, size_t len);

/* Master: compiles <cfg> into a free generation slot and makes it current.
 * Returns the new generation id, or 0 if no slot is free (a reader is still
 * on every old one; try again later). */
uint64_t route_publish(struct shm_segment *seg, const struct config *cfg);

/* The two halves of route_publish(), for a reload that must be able to
 * back out: prepare writes a free slot (-1 if none) without making it
 * visible, with the stat index of every route and server (new keys are
 * appended to the segment's key table even if the reload backs out: they
 * only use up room); commit makes it current and returns its generation id.
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
