#include "shm/route.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/auth_conf.h"
#include "shm/route_split.h"
#include "shm/route_hash.h"
#include "shm/route_match.h"
#include "shm/shm.h"

#define ROUTE_ALIGN(n) (((n) + 7) & ~(size_t)7)

/* ---- the hash of host names ------------------------------------------- */

static inline unsigned char route_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* FNV-1a over the lower-cased bytes, from the last to the first: the hash
 * of every suffix of a Host comes out on the way, so one pass over it
 * gives the keys of all its wildcard candidates and of the exact host. */
#define ROUTE_HASH_INIT 2166136261u
static inline uint32_t route_hash_step(uint32_t h, unsigned char c)
{
	return (h ^ route_lower(c)) * 16777619u;
}

static uint32_t route_hash(const char *s, size_t n)
{
	uint32_t h = ROUTE_HASH_INIT;

	while (n)
		h = route_hash_step(h, (unsigned char)s[--n]);
	return h;
}

static uint32_t route_pow2(uint32_t n)
{
	uint32_t c = 1;

	while (c < n)
		c <<= 1;
	return c;
}

/* ---- compile ----------------------------------------------------------- */

/* What the block of <cfg> holds, counted once for route_size() and
 * route_compile() alike. Hosts are at most one per route; the strings at
 * most every route's host and path. */
struct route_counts {
	uint32_t nsettings, nexact, nwild, strings;
	size_t off_settings, off_upstreams, off_servers, off_routes, off_hosts, off_exact, off_wild, off_strings, size;
	size_t off_returns, off_limits, off_splits, off_hash;
	size_t off_match; /* shm/route_match.c's block */
	struct route_hdr_layout hdr;
};

static int route_overrides(const struct config_overrides *o)
{
	return o->timeouts_set || o->limits_set;
}

static void route_count(const struct config *cfg, struct route_counts *c)
{
	size_t n = 0;

	memset(c, 0, sizeof(*c));
	c->nsettings = 1;
	for (int i = 0; i < cfg->nupstreams; i++)
		c->nsettings += route_overrides(&cfg->upstreams[i].over) ? 1u : 0u;
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_route *r = &cfg->routes[i];

		c->nsettings += route_overrides(&r->over) ? 1u : 0u;
		c->nexact += r->host_kind == CONFIG_HOST_EXACT;
		c->nwild += r->host_kind == CONFIG_HOST_WILDCARD;
		c->strings += (uint32_t)(strlen(r->host) + strlen(r->path) + 2);
	}
	c->off_settings = n;
	n += ROUTE_ALIGN(c->nsettings * sizeof(struct route_settings));
	c->off_upstreams = n;
	n += ROUTE_ALIGN((size_t)cfg->nupstreams * sizeof(struct route_upstream));
	c->off_servers = n;
	n += ROUTE_ALIGN((size_t)cfg->nservers * sizeof(struct route_server));
	c->off_routes = n;
	n += ROUTE_ALIGN((size_t)cfg->nroutes * sizeof(struct route_entry));
	c->off_hosts = n;
	n += ROUTE_ALIGN((size_t)cfg->nroutes * sizeof(struct route_host));
	c->off_exact = n;
	n += ROUTE_ALIGN(route_pow2(2 * c->nexact) * sizeof(uint32_t));
	c->off_wild = n;
	n += ROUTE_ALIGN(route_pow2(2 * c->nwild) * sizeof(uint32_t));
	c->off_returns = n;
	n += ROUTE_ALIGN((size_t)cfg->nreturns * sizeof(struct policy_return));
	c->off_limits = n;
	n += ROUTE_ALIGN((size_t)cfg->nrate_limits * sizeof(struct config_rate_limit));
	c->off_strings = n;
	n += ROUTE_ALIGN(c->strings);
	c->off_match = n;
	n += route_match_size(cfg);
	n = route_hdrrules_layout(cfg, n, &c->hdr);
	c->off_splits = ROUTE_ALIGN(n);
	n = c->off_splits + ROUTE_ALIGN((size_t)cfg->nsplits * sizeof(struct route_split));
	c->off_hash = n;
	n += ROUTE_ALIGN(route_hash_size(cfg));
	c->size = n;
}

size_t route_size(const struct config *cfg)
{
	struct route_counts c;

	route_count(cfg, &c);
	return c.size;
}

/* Sort order of the routes: exact hosts, wildcard hosts (longest suffix
 * first), any host, as /routes lists them; then by host, so one host's
 * routes are adjacent; then by path, as bytes (the order lookup's binary
 * search uses); then, for one path, in the reverse of the order its routes
 * are tried in (route_match.h). */
static int route_cmp(const void *a, const void *b)
{
	const struct config_route *x = *(const struct config_route *const *)a, *y = *(const struct config_route *const *)b;
	static const int rank[] = {[CONFIG_HOST_ANY] = 2, [CONFIG_HOST_EXACT] = 0, [CONFIG_HOST_WILDCARD] = 1};
	size_t xl = strlen(x->host), yl = strlen(y->host);
	int c;

	if (rank[x->host_kind] != rank[y->host_kind])
		return rank[x->host_kind] - rank[y->host_kind];
	if (xl != yl)
		return xl > yl ? -1 : 1;
	c = strcmp(x->host, y->host);
	if (c || (c = strcmp(x->path, y->path)))
		return c;
	/* one path: the route tried first last, where lookup's walk starts */
	return route_match_order(y, x);
}

static void route_settings_fill(struct route_settings *s, const struct config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->timeouts = cfg->timeouts;
	s->limits = cfg->limits;
	s->merge_slashes = (uint8_t)cfg->merge_slashes;
	s->underscores_in_headers = (uint8_t)cfg->underscores_in_headers;
}

static void route_put_table(uint32_t *tab, uint32_t mask, uint32_t hash, uint32_t host)
{
	uint32_t i = hash & mask;

	while (tab[i])
		i = (i + 1) & mask;
	tab[i] = host + 1;
}

/* The routes of <cfg>, sorted, into <t>'s routes, hosts, hash tables and
 * strings. Returns 0, or -1 without memory. */
static int route_compile_routes(struct route_table *t, char *block, const struct route_counts *c,
                                const struct config *cfg, const uint32_t *group_settings, uint32_t *nsettings)
{
	const struct config_route **sorted = malloc(sizeof(*sorted) * (size_t)(cfg->nroutes ? cfg->nroutes : 1));
	uint32_t *stack = malloc(sizeof(*stack) * (size_t)(cfg->nroutes ? cfg->nroutes : 1));
	struct route_settings *set = (struct route_settings *)(block + c->off_settings);
	struct route_entry *routes = (struct route_entry *)(block + c->off_routes);
	struct route_host *hosts = (struct route_host *)(block + c->off_hosts);
	uint32_t *exact = (uint32_t *)(block + c->off_exact), *wild = (uint32_t *)(block + c->off_wild);
	char *strings = block + c->off_strings;
	uint32_t str = 0, depth = 0;
	struct route_host *h = NULL;

	if (!sorted || !stack) {
		free(sorted);
		free(stack);
		return -1;
	}
	for (int i = 0; i < cfg->nroutes; i++)
		sorted[i] = &cfg->routes[i];
	qsort(sorted, (size_t)cfg->nroutes, sizeof(*sorted), route_cmp);
	t->nroutes = (uint32_t)cfg->nroutes;
	t->exact_mask = route_pow2(2 * c->nexact) - 1;
	t->wild_mask = route_pow2(2 * c->nwild) - 1;
	t->any_host = ROUTE_NONE;
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct config_route *cr = sorted[i];
		struct route_entry *e = &routes[i];
		size_t hl = strlen(cr->host), pl = strlen(cr->path);

		if (!h || h->kind != cr->host_kind || strcmp(strings + h->name_off, cr->host) != 0) {
			h = &hosts[t->nhosts++];
			h->kind = (uint8_t)cr->host_kind;
			h->len = (uint16_t)hl;
			h->name_off = str;
			h->hash = route_hash(cr->host, hl);
			h->first = i;
			memcpy(strings + str, cr->host, hl + 1);
			str += (uint32_t)hl + 1;
			depth = 0;
		}
		h->n++;
		memset(e, 0, sizeof(*e));
		e->host_kind = (uint8_t)cr->host_kind;
		e->host_len = (uint16_t)hl;
		e->path_len = (uint16_t)pl;
		e->upstream = cr->upstream >= 0 ? (uint32_t)cr->upstream : 0;
		e->ret = (int16_t)cr->ret;
		e->log = (uint8_t)cr->log;
		e->log_sample = (uint16_t)cr->log_sample;
		e->abort = (uint8_t)cr->abort_on_client_close;
		e->host_off = h->name_off;
		e->path_off = str;
		memcpy(strings + str, cr->path, pl + 1);
		str += (uint32_t)pl + 1;
		e->auth = cr->auth ? (uint8_t)cr->auth->type : 0;
		memcpy(e->upgrade, cr->upgrade, sizeof(e->upgrade));
		e->match = cr->match ? (uint32_t)(cr - cfg->routes) : ROUTE_NONE; /* route_match_compile() */
		e->hdr = cr->hdr;
		e->nlimits = cr->nrate_limits;
		memcpy(e->limits, cr->rate_limits, sizeof(e->limits));
		route_split_entry(e, cr);
		/* a route answered by weir (return) has no group: the global ones */
		e->settings = cr->upstream >= 0 ? group_settings[cr->upstream] : 0;
		if (route_overrides(&cr->over)) {
			set[*nsettings] = set[e->settings];
			config_overrides_apply(&cr->over, &set[*nsettings].timeouts, &set[*nsettings].limits);
			e->settings = (*nsettings)++;
		}
		/* sorted by path, the routes whose paths are prefixes of this
		 * one's are on the stack of the ones before it */
		while (depth && !(routes[stack[depth - 1]].path_len <= pl &&
		                  memcmp(strings + routes[stack[depth - 1]].path_off, cr->path,
		                         routes[stack[depth - 1]].path_len) == 0))
			depth--;
		e->parent = depth ? stack[depth - 1] : ROUTE_NONE;
		stack[depth++] = i;
	}
	for (uint32_t k = 0; k < t->nhosts; k++) {
		if (hosts[k].kind == CONFIG_HOST_EXACT)
			route_put_table(exact, t->exact_mask, hosts[k].hash, k);
		else if (hosts[k].kind == CONFIG_HOST_WILDCARD) {
			route_put_table(wild, t->wild_mask, hosts[k].hash, k);
			t->nwild++;
		} else
			t->any_host = k;
	}
	free(sorted);
	free(stack);
	return 0;
}

int route_compile(struct route_table *t, void *mem, size_t cap, const struct config *cfg)
{
	char *block = mem;
	struct route_counts c;
	struct route_settings *set;
	struct route_upstream *ups;
	struct route_server *srv;
	uint32_t group_settings[CONFIG_MAX_UPSTREAMS], nsettings = 1;
	uint64_t id = t->id;

	route_count(cfg, &c);
	if (cap < c.size)
		return -1;
	memset(t, 0, sizeof(*t));
	t->id = id;
	memset(block, 0, c.size);
	t->rel = (int64_t)((uintptr_t)block - (uintptr_t)t);
	t->size = c.size;
	t->off_settings = (uint32_t)c.off_settings;
	t->off_upstreams = (uint32_t)c.off_upstreams;
	t->off_servers = (uint32_t)c.off_servers;
	t->off_routes = (uint32_t)c.off_routes;
	t->off_hosts = (uint32_t)c.off_hosts;
	t->off_exact = (uint32_t)c.off_exact;
	t->off_wild = (uint32_t)c.off_wild;
	t->off_strings = (uint32_t)c.off_strings;
	t->off_returns = (uint32_t)c.off_returns;
	t->off_limits = (uint32_t)c.off_limits;
	t->off_hash = (uint32_t)c.off_hash;
	t->nreturns = (uint32_t)cfg->nreturns;
	if (cfg->nreturns) /* cfg->returns is NULL without any */
		memcpy(block + c.off_returns, cfg->returns, (size_t)cfg->nreturns * sizeof(struct policy_return));
	t->nlimits = (uint32_t)cfg->nrate_limits;
	if (cfg->nrate_limits)
		memcpy(block + c.off_limits, cfg->rate_limits, (size_t)cfg->nrate_limits * sizeof(struct config_rate_limit));
	route_hdrrules_write(t, block, &c.hdr, cfg);
	set = (struct route_settings *)(block + c.off_settings);
	ups = (struct route_upstream *)(block + c.off_upstreams);
	srv = (struct route_server *)(block + c.off_servers);

	/* settings: the global ones, then a group's over them, then (in
	 * route_compile_routes) a route's over its group's */
	route_settings_fill(&set[0], cfg);
	for (int i = 0; i < cfg->nupstreams; i++) {
		group_settings[i] = 0;
		if (route_overrides(&cfg->upstreams[i].over)) {
			set[nsettings] = set[0];
			config_overrides_apply(&cfg->upstreams[i].over, &set[nsettings].timeouts, &set[nsettings].limits);
			group_settings[i] = nsettings++;
		}
	}

	t->nservers = (uint32_t)cfg->nservers;
	for (int i = 0; i < cfg->nservers; i++) {
		const struct config_server *cs = &cfg->servers[i];
		struct route_server *s = &srv[i];

		s->sa = cs->addr.sa;
		s->len = cs->addr.len;
		s->weight = (uint32_t)cs->weight;
		memcpy(s->text, cs->addr.text, sizeof(s->text));
	}
	t->nupstreams = (uint32_t)cfg->nupstreams;
	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *cu = &cfg->upstreams[i];
		struct route_upstream *u = &ups[i];

		memcpy(u->name, cu->name, sizeof(u->name));
		u->first_server = (uint32_t)cu->first_server;
		u->nservers = (uint32_t)cu->nservers;
		/* a connection that told one client's address is no other's */
		u->keepalive = cu->proxy_protocol ? 0 : (uint32_t)cu->keepalive;
		u->proxy_protocol = (uint8_t)cu->proxy_protocol;
		u->protocol = (uint8_t)cu->protocol;
		u->max_fails = (uint32_t)cu->max_fails;
		u->fail_timeout = cu->fail_timeout;
		u->balance = (uint8_t)cu->balance;
		u->choices = (uint8_t)cu->choices;
		u->slow_start = cu->slow_start;
		u->settings = group_settings[i];
		u->tls = (uint8_t)cu->tls;
		u->tls_verify = (uint8_t)cu->tls_verify;
		memcpy(u->tls_sni, cu->tls_sni, sizeof(u->tls_sni));
		memcpy(u->tls_ca, cu->tls_ca, sizeof(u->tls_ca));
		u->tls_ca_sum = cu->tls_ca_sum;
		u->resil = cu->resil;
		for (int k = 0; k < cu->nservers; k++) {
			srv[cu->first_server + k].keepalive = u->keepalive;
			srv[cu->first_server + k].upstream = (uint32_t)i;
		}
	}
	t->off_splits = (uint32_t)c.off_splits;
	t->nsplits = route_split_compile((struct route_split *)(block + c.off_splits), cfg);
	route_hash_build(ups, (uint64_t *)(block + c.off_hash), cfg);
	if (route_compile_routes(t, block, &c, cfg, group_settings, &nsettings) < 0)
		return -1;
	route_match_compile(t, (struct route_entry *)(block + c.off_routes), block + c.off_match, (uint32_t)c.off_match,
	                    cfg);
	t->nsettings = nsettings;
	return 0;
}

/* ---- lookup ------------------------------------------------------------ */

/* The host of hash table <tab> named <name> (<n> bytes, any case). */
static const struct route_host *route_probe(const struct route_table *t, const uint32_t *tab, uint32_t mask,
                                            uint32_t hash, const char *name, size_t n)
{
	const struct route_host *hosts = route_hosts(t);
	const char *strings = route_at(t, t->off_strings);

	for (uint32_t i = hash & mask;; i = (i + 1) & mask) {
		uint32_t v = tab[i];
		const struct route_host *h;

		if (!v)
			return NULL;
		h = &hosts[v - 1];
		if (h->hash == hash && h->len == n && strncasecmp(strings + h->name_off, name, n) == 0)
			return h;
	}
}

/* The most specific host pattern that matches <host> (no port, no
 * trailing dot): exact, else the longest wildcard suffix, else "*". */
static const struct route_host *route_find_host(const struct route_table *t, const char *host, size_t len)
{
	const uint32_t *wild = route_at(t, t->off_wild);
	const struct route_host *best = NULL;
	uint32_t h = ROUTE_HASH_INIT;

	for (size_t i = len; i-- > 0;) {
		h = route_hash_step(h, (unsigned char)host[i]);
		/* ".example.com" matches a host ending in it, not itself: a
		 * byte must come before the dot; scanning backwards, a later
		 * match is a longer suffix */
		if (host[i] == '.' && i > 0 && t->nwild) {
			const struct route_host *w = route_probe(t, wild, t->wild_mask, h, host + i, len - i);

			if (w)
				best = w;
		}
	}
	{
		const struct route_host *e = route_probe(t, route_at(t, t->off_exact), t->exact_mask, h, host, len);

		if (e)
			return e;
	}
	if (best)
		return best;
	return t->any_host == ROUTE_NONE ? NULL : &route_hosts(t)[t->any_host];
}

/* Strips ":port" from a Host value; keeps "[v6]" whole. */
static size_t route_host_len(const char *host, size_t len)
{
	if (len && host[0] == '[') {
		const char *end = memchr(host, ']', len);
		return end ? (size_t)(end - host) + 1 : len;
	}
	const char *colon = memchr(host, ':', len);
	return colon ? (size_t)(colon - host) : len;
}

/* <a> (<an> bytes) against <b> (<bn>), as bytes, a prefix first. */
static int route_path_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : an < bn ? -1 : an > bn;
}

const struct route_entry *route_lookup(const struct route_table *t, const char *host, size_t host_len,
                                       const char *path, size_t path_len)
{
	return route_lookup_cond(t, host, host_len, path, path_len, NULL, NULL);
}

const struct route_entry *route_lookup_cond(const struct route_table *t, const char *host, size_t host_len,
                                            const char *path, size_t path_len, route_cond_fn fn, void *ctx)
{
	const struct route_entry *routes = route_entries(t);
	const char *strings = route_at(t, t->off_strings);
	const struct route_host *h;
	uint32_t lo, hi, at;

	if (!t->nwild && t->nhosts == (t->any_host != ROUTE_NONE)) {
		/* no host patterns but "*" (the common table): every host is
		 * that one, so the Host value is neither cut nor hashed */
		h = t->any_host == ROUTE_NONE ? NULL : &route_hosts(t)[t->any_host];
	} else {
		host_len = route_host_len(host, host_len);
		if (host_len && host[host_len - 1] == '.') /* "example.com." is "example.com" */
			host_len--;
		h = route_find_host(t, host, host_len);
	}
	if (!h)
		return NULL;
	/* the greatest path at most <path>: every route path that is a prefix
	 * of <path> sorts between itself and <path>, so is a prefix of this
	 * one too, on its parent walk (longest first) */
	lo = h->first;
	hi = h->first + h->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct route_entry *e = &routes[mid];

		if (route_path_cmp(strings + e->path_off, e->path_len, path, path_len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == h->first)
		return NULL; /* the chosen host has nothing at or below it: no fallback */
	for (at = lo - 1; at != ROUTE_NONE; at = routes[at].parent) {
		const struct route_entry *e = &routes[at];

		/* a table without conditions never reads e->cond */
		if (e->path_len <= path_len && memcmp(strings + e->path_off, path, e->path_len) == 0 &&
		    (!t->ncond_routes || route_cond_ok(t, e, path_len, fn, ctx)))
			return e;
	}
	return NULL;
}

/* May a reader still be on generation slot <g>: it is current, or a live
 * worker reports it seen or holds a generation at most as new? */
static int route_gen_busy(struct shm_segment *seg, int g, uint32_t cur)
{
	uint64_t id = seg->gens[g].id;

	if (id == 0)
		return 0;
	if ((uint32_t)g == cur)
		return 1;
	for (int w = 0; w < SHM_SLOTS; w++) {
		const struct shm_slot *ws = &seg->slots[w];
		uint64_t min = atomic_load(&ws->gen_min);

		if (atomic_load(&ws->pid) != 0 && (atomic_load(&ws->gen_seen) == id || (min != 0 && min <= id)))
			return 1;
	}
	return 0;
}

/*
 * Gives every route and server of <t> (written into slot <slot>) its stable
 * stat index. A key that needs a new index when the key table is full may
 * take one no busy generation holds: no worker can count into it any more
 * (a table leaves use only through the same checks that free its slot), so
 * once its counters are zeroed the index is the new key's from zero.
 */
static void route_assign_stats(struct shm_segment *seg, struct route_table *t, int slot, uint32_t cur)
{
	uint8_t live_r[STAT_ROUTES] = {0}, live_s[STAT_SERVERS] = {0};
	/* the master's own block, not yet visible: writable */
	struct route_entry *routes = (struct route_entry *)route_entries(t);
	struct route_server *servers = (struct route_server *)route_servers(t);
	int reclaimed;

	for (int g = 0; g < SHM_GENS; g++) {
		const struct route_table *o = &seg->gens[g];

		if (g == slot || !route_gen_busy(seg, g, cur))
			continue;
		for (uint32_t i = 0; i < o->nroutes; i++)
			live_r[route_entries(o)[i].stat] = 1;
		for (uint32_t i = 0; i < o->nservers; i++)
			live_s[route_servers(o)[i].stat] = 1;
	}
	for (uint32_t i = 0; i < t->nroutes; i++) {
		struct route_entry *e = &routes[i];
		e->stat = stat_route_index(&seg->keys, e->host_kind, route_host(t, e), route_label(t, e), live_r,
		                           &reclaimed);
		if (reclaimed)
			shm_key_zero_route(seg, e->stat);
	}
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];
		for (uint32_t k = 0; k < up->nservers; k++) {
			struct route_server *s = &servers[up->first_server + k];
			s->stat = stat_server_index(&seg->keys, up->name, s->text, live_s, &reclaimed);
			if (reclaimed)
				shm_key_zero_server(seg, s->stat);
		}
	}
}

/* Where in the arena a block of <need> bytes (whole pages) fits beside
 * the blocks of the busy generations: the first gap. Returns its offset,
 * or UINT64_MAX when none is large enough. */
static uint64_t route_arena_fit(struct shm_segment *seg, const uint8_t *busy, uint64_t need)
{
	uint64_t at = 0;

	for (;;) {
		int moved = 0;

		for (int g = 0; g < SHM_GENS; g++) {
			const struct route_table *o = &seg->gens[g];

			if (busy[g] && o->size && o->arena_off < at + need && at < o->arena_off + o->size) {
				at = (o->arena_off + o->size + 4095) & ~(uint64_t)4095;
				moved = 1;
			}
		}
		if (!moved)
			return at + need <= SHM_ARENA ? at : UINT64_MAX;
	}
}

int route_prepare(struct shm_segment *seg, const struct config *cfg)
{
	uint32_t cur = atomic_load(&seg->gen_current);
	uint8_t busy[SHM_GENS];
	uint64_t need = ((uint64_t)route_size(cfg) + 4095) & ~(uint64_t)4095, off;
	struct route_table *t;
	int slot = -1;

	for (int g = 0; g < SHM_GENS; g++) {
		busy[g] = (uint8_t)route_gen_busy(seg, g, cur);
		if (!busy[g] && slot < 0)
			slot = g;
	}
	if (slot < 0)
		return -1;
	off = route_arena_fit(seg, busy, need);
	if (off == UINT64_MAX)
		return -2;
	/* no reader is on a free generation, nor can come to it: its pages
	 * go back (the new block's are written anew) and its header is
	 * emptied, so no stale block is ever released over a live one */
	for (int g = 0; g < SHM_GENS; g++) {
		struct route_table *o = &seg->gens[g];

		if (!busy[g] && o->size) {
			shm_arena_release(seg, o->arena_off, o->size);
			memset(o, 0, sizeof(*o));
		}
	}
	t = &seg->gens[slot];
	if (route_compile(t, shm_arena(seg) + off, need, cfg) < 0)
		return -2;
	t->arena_off = off;
	t->size = need;
	route_assign_stats(seg, t, slot, cur);
	resil_assign_groups(&seg->resil_groups, t);
	t->id = seg->gen_next_id++;
	return slot;
}

uint64_t route_commit(struct shm_segment *seg, int slot)
{
	const struct route_table *t = &seg->gens[slot];
	const struct route_table *old = &seg->gens[atomic_load(&seg->gen_current)];
	uint8_t kept[STAT_SERVERS] = {0}, had[STAT_SERVERS] = {0};

	/* slow_start: a server the previous generation did not have joins
	 * now (none does at the first start, nor across an upgrade, whose
	 * first table is the old master's servers) */
	for (uint32_t i = 0; old != t && old->id && i < old->nservers; i++)
		had[route_servers(old)[i].stat] = 1;
	for (uint32_t i = 0; old != t && old->id && i < t->nservers; i++)
		if (!had[route_servers(t)[i].stat] && route_upstreams(t)[route_servers(t)[i].upstream].slow_start)
			balance_ramp_start(&seg->balance[route_servers(t)[i].stat], resil_now_ms());
	atomic_store_explicit(&seg->gen_current, (uint32_t)slot, memory_order_seq_cst);
	for (uint32_t i = 0; i < t->nservers; i++)
		kept[route_servers(t)[i].stat] = 1;
	for (int k = 0; k < STAT_SERVERS; k++)
		if (!kept[k] && atomic_load_explicit(&seg->admin[k], memory_order_relaxed))
			atomic_store_explicit(&seg->admin[k], 0, memory_order_relaxed);
	return t->id;
}

uint64_t route_publish(struct shm_segment *seg, const struct config *cfg)
{
	int slot = route_prepare(seg, cfg);
	return slot < 0 ? 0 : route_commit(seg, slot);
}

const struct route_table *route_acquire(struct shm_segment *seg, int slot)
{
	struct shm_slot *s = &seg->slots[slot];

	for (;;) {
		uint32_t g = atomic_load_explicit(&seg->gen_current, memory_order_acquire);
		const struct route_table *t = &seg->gens[g];

		if (atomic_load_explicit(&s->gen_seen, memory_order_relaxed) == t->id)
			return t; /* already reported: the master will not touch it */
		/* report first, then check it is still current (hazard pointer):
		 * if the master moved on meanwhile, it may not have seen our report */
		atomic_store_explicit(&s->gen_seen, t->id, memory_order_seq_cst);
		if (atomic_load_explicit(&seg->gen_current, memory_order_seq_cst) == g)
			return t;
	}
}

int route_upgrade_allowed(const struct route_entry *e, const char *tok, size_t len)
{
	const char *p = e->upgrade;

	while (*p) {
		const char *end = strchr(p, ' ');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == len && strncasecmp(p, tok, len) == 0)
			return 1;
		p += n + (end != NULL);
	}
	return 0;
}
