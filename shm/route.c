#include "shm/route.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/auth_conf.h"
#include "shm/shm.h"

/* Sort order: exact hosts, wildcard hosts (longest suffix first), any host;
 * then by host so one host's routes are adjacent; then longest path first. */
static int route_cmp(const void *a, const void *b)
{
	const struct route_entry *x = a, *y = b;
	int rank[] = {[CONFIG_HOST_ANY] = 2, [CONFIG_HOST_EXACT] = 0, [CONFIG_HOST_WILDCARD] = 1};
	int c;

	if (rank[x->host_kind] != rank[y->host_kind])
		return rank[x->host_kind] - rank[y->host_kind];
	if (x->host_len != y->host_len)
		return (int)y->host_len - (int)x->host_len;
	c = strcmp(x->host, y->host);
	if (c)
		return c;
	return (int)y->path_len - (int)x->path_len;
}

void route_compile(struct route_table *t, const struct config *cfg)
{
	t->nroutes = (uint32_t)cfg->nroutes;
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_route *cr = &cfg->routes[i];
		struct route_entry *e = &t->routes[i];

		memset(e, 0, sizeof(*e));
		e->host_kind = (uint8_t)cr->host_kind;
		e->host_len = (uint16_t)strlen(cr->host);
		e->path_len = (uint16_t)strlen(cr->path);
		e->upstream = cr->upstream >= 0 ? (uint32_t)cr->upstream : 0;
		e->ret = (int16_t)cr->ret;
		e->log = (uint8_t)cr->log;
		e->log_sample = (uint16_t)cr->log_sample;
		e->auth = cr->auth ? (uint8_t)cr->auth->type : 0;
		memcpy(e->host, cr->host, e->host_len);
		memcpy(e->path, cr->path, e->path_len);
		memcpy(e->upgrade, cr->upgrade, sizeof(e->upgrade));
		e->nlimits = cr->nrate_limits;
		memcpy(e->limits, cr->rate_limits, sizeof(e->limits));
	}
	t->nlimits = (uint32_t)cfg->nrate_limits;
	if (cfg->nrate_limits)
		memcpy(t->limits, cfg->rate_limits, sizeof(t->limits[0]) * (size_t)cfg->nrate_limits);
	qsort(t->routes, t->nroutes, sizeof(t->routes[0]), route_cmp);
	t->nreturns = (uint32_t)cfg->nreturns;
	if (cfg->nreturns) /* cfg->returns is NULL without any */
		memcpy(t->returns, cfg->returns, (size_t)cfg->nreturns * sizeof(t->returns[0]));

	t->nservers = (uint32_t)cfg->nservers;
	for (int i = 0; i < cfg->nservers; i++) {
		const struct config_server *cs = &cfg->servers[i];
		struct route_server *s = &t->servers[i];

		memset(s, 0, sizeof(*s));
		s->sa = cs->addr.sa;
		s->len = cs->addr.len;
		s->weight = (uint32_t)cs->weight;
		memcpy(s->text, cs->addr.text, sizeof(s->text));
	}
	t->nupstreams = (uint32_t)cfg->nupstreams;
	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *cu = &cfg->upstreams[i];
		struct route_upstream *u = &t->upstreams[i];

		memset(u, 0, sizeof(*u));
		memcpy(u->name, cu->name, sizeof(u->name));
		u->first_server = (uint32_t)cu->first_server;
		u->nservers = (uint32_t)cu->nservers;
		/* a connection that told one client's address is no other's */
		u->keepalive = cu->proxy_protocol ? 0 : (uint32_t)cu->keepalive;
		u->proxy_protocol = (uint8_t)cu->proxy_protocol;
		u->max_fails = (uint32_t)cu->max_fails;
		u->fail_timeout = cu->fail_timeout;
		u->tls = (uint8_t)cu->tls;
		u->tls_verify = (uint8_t)cu->tls_verify;
		memcpy(u->tls_sni, cu->tls_sni, sizeof(u->tls_sni));
		u->resil = cu->resil;
		for (int k = 0; k < cu->nservers; k++) {
			t->servers[cu->first_server + k].keepalive = u->keepalive;
			t->servers[cu->first_server + k].upstream = (uint32_t)i;
		}
	}
}

/* Does <e>'s host pattern match <host> (lower or mixed case, no port)? */
static int route_host_match(const struct route_entry *e, const char *host, size_t len)
{
	switch (e->host_kind) {
	case CONFIG_HOST_EXACT:
		return len == e->host_len && strncasecmp(host, e->host, len) == 0;
	case CONFIG_HOST_WILDCARD: /* e->host is ".example.com"; "example.com" itself does not match */
		return len > e->host_len && strncasecmp(host + len - e->host_len, e->host, e->host_len) == 0;
	default:
		return 1;
	}
}

static int route_same_host(const struct route_entry *a, const struct route_entry *b)
{
	return a->host_kind == b->host_kind && a->host_len == b->host_len && memcmp(a->host, b->host, a->host_len) == 0;
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

const struct route_entry *route_lookup(const struct route_table *t, const char *host, size_t host_len,
                                       const char *path, size_t path_len)
{
	const struct route_entry *chosen = NULL;

	host_len = route_host_len(host, host_len);
	if (host_len && host[host_len - 1] == '.') /* "example.com." is "example.com" */
		host_len--;
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct route_entry *e = &t->routes[i];

		if (chosen) {
			if (!route_same_host(chosen, e))
				return NULL; /* the most specific host had no matching prefix */
		} else if (!route_host_match(e, host, host_len)) {
			continue;
		}
		chosen = e;
		if (path_len >= e->path_len && memcmp(path, e->path, e->path_len) == 0)
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
	int reclaimed;

	for (int g = 0; g < SHM_GENS; g++) {
		const struct route_table *o = &seg->gens[g];

		if (g == slot || !route_gen_busy(seg, g, cur))
			continue;
		for (uint32_t i = 0; i < o->nroutes; i++)
			live_r[o->routes[i].stat] = 1;
		for (uint32_t i = 0; i < o->nservers; i++)
			live_s[o->servers[i].stat] = 1;
	}
	for (uint32_t i = 0; i < t->nroutes; i++) {
		struct route_entry *e = &t->routes[i];
		e->stat = stat_route_index(&seg->keys, e->host_kind, e->host, e->path, live_r, &reclaimed);
		if (reclaimed)
			shm_key_zero_route(seg, e->stat);
	}
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &t->upstreams[u];
		for (uint32_t k = 0; k < up->nservers; k++) {
			struct route_server *s = &t->servers[up->first_server + k];
			s->stat = stat_server_index(&seg->keys, up->name, s->text, live_s, &reclaimed);
			if (reclaimed)
				shm_key_zero_server(seg, s->stat);
		}
	}
}

int route_prepare(struct shm_segment *seg, const struct config *cfg)
{
	uint32_t cur = atomic_load(&seg->gen_current);
	int slot = -1;

	for (int g = 0; g < SHM_GENS && slot < 0; g++)
		if (!route_gen_busy(seg, g, cur))
			slot = g;
	if (slot < 0)
		return -1;
	route_compile(&seg->gens[slot], cfg);
	route_assign_stats(seg, &seg->gens[slot], slot, cur);
	resil_assign_groups(seg, &seg->gens[slot]);
	seg->gens[slot].id = seg->gen_next_id++;
	return slot;
}

uint64_t route_commit(struct shm_segment *seg, int slot)
{
	const struct route_table *t = &seg->gens[slot];
	uint8_t kept[STAT_SERVERS] = {0};

	atomic_store_explicit(&seg->gen_current, (uint32_t)slot, memory_order_seq_cst);
	for (uint32_t i = 0; i < t->nservers; i++)
		kept[t->servers[i].stat] = 1;
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
