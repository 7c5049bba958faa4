/*
 * upstream_state.c: a worker's per-server state (pool, smooth WRR weight,
 * failure count and down mark, TLS session) keyed by identity: upstream
 * group name and address.
 *
 * Principle: a route table says where a server sits, not who it is; two
 * generations may put different servers at one index, even of different
 * groups. So the state lives in an open-addressing hash (linear probing,
 * tombstones for freed slots) keyed by (group, address), and each table
 * generation the worker meets gets a map from its server indices to state
 * slots, computed once in upstream_sync_table(): requests on any table
 * held reach their server's state with one array load.
 *
 * A state lives while a table that maps it may still be used: it stays
 * while its gen (the newest table id mapping it) is at least the oldest
 * table a request in flight holds, or the current one. Pooled connections
 * exist only for servers of the newest table: a sync closes the pools of
 * servers that left it, and upstream_release() closes, rather than pools,
 * a connection whose server is no longer in the newest table.
 */
#include <string.h>

#include <openssl/ssl.h>

#include "common/log.h"
#include "worker/up/up.h"

/* FNV-1a over "group\0addr": short keys, one probe in the common case. */
static uint32_t upstream_state_hash(const char *group, const char *addr)
{
	uint32_t h = 2166136261u;

	for (const char *p = group; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *p = addr; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h;
}

/* The slot of (group, addr), inserted if new; UPSTREAM_STATE_OVERFLOW when
 * the hash is full (every slot a live state of some held table). */
static uint16_t upstream_state_find(const char *group, const char *addr)
{
	uint32_t i = upstream_state_hash(group, addr) & (UPSTREAM_STATES - 1);
	int free_i = -1;

	for (uint32_t n = 0; n < UPSTREAM_STATES; n++, i = (i + 1) & (UPSTREAM_STATES - 1)) {
		struct up_server *s = &wk.servers[i];

		if (!s->gen) {
			if (!s->tomb) {
				if (free_i < 0)
					free_i = (int)i;
				break; /* the end of the probe: not there */
			}
			if (free_i < 0)
				free_i = (int)i;
			continue;
		}
		if (strcmp(s->group, group) == 0 && strcmp(s->addr, addr) == 0)
			return (uint16_t)i;
	}
	if (free_i < 0) {
		static ev_tstamp last;

		if (ev_now(wk.loop) - last >= 1.0) {
			last = ev_now(wk.loop);
			log_error("upstream %s server %s: no room for its state (%d servers held by requests in "
			          "flight); it shares one without a pool",
			          group, addr, UPSTREAM_STATES);
		}
		return UPSTREAM_STATE_OVERFLOW;
	}
	struct up_server *s = &wk.servers[free_i];

	memset(s, 0, sizeof(*s));
	memcpy(s->group, group, strnlen(group, sizeof(s->group) - 1));
	memcpy(s->addr, addr, strnlen(addr, sizeof(s->addr) - 1));
	return (uint16_t)free_i;
}

static void upstream_state_close_pool(struct up_server *s)
{
	while (s->idle)
		upstream_close(s->idle);
	h2_client_close_server(s);
}

static void upstream_state_free(struct up_server *s)
{
	upstream_state_close_pool(s);
	if (s->session)
		SSL_SESSION_free(s->session);
	memset(s, 0, sizeof(*s));
	s->tomb = 1;
}

/* The oldest table id a request in flight holds, or <cur> if older. */
static uint64_t upstream_oldest_held(uint64_t cur)
{
	uint64_t min = cur;

	for (int i = 0; i < SHM_GENS; i++)
		if (wk.held[i].refs && wk.held[i].id < min)
			min = wk.held[i].id;
	return min;
}

void upstream_sync_table(const struct route_table *t)
{
	uint16_t *map = wk.server_map[t - wk.seg->gens];
	uint64_t oldest;

	if (t->id == wk.table_id)
		return;
	for (uint32_t i = 0; i < t->nservers; i++) {
		const struct route_server *rs = &route_servers(t)[i];
		uint16_t k = upstream_state_find(route_upstreams(t)[rs->upstream].name, rs->text);
		struct up_server *s = &wk.servers[k];

		map[i] = k;
		if (k == UPSTREAM_STATE_OVERFLOW) {
			memset(s, 0, sizeof(*s));
			continue;
		}
		s->gen = t->id;
		s->keepalive = rs->keepalive;
	}
	/* servers that left: no pool (nothing may take from it any more);
	 * their state goes once no request in flight can reach it */
	oldest = upstream_oldest_held(t->id);
	for (uint32_t k = 0; k < UPSTREAM_STATES; k++) {
		struct up_server *s = &wk.servers[k];

		if (!s->gen || s->gen == t->id)
			continue;
		upstream_state_close_pool(s);
		if (s->gen < oldest)
			upstream_state_free(s);
	}
	wk.table_id = t->id;
	tls_client_sync(t);
}

void upstream_close_pools(void)
{
	for (uint32_t k = 0; k < UPSTREAM_STATES; k++)
		upstream_state_close_pool(&wk.servers[k]);
}

void upstream_free_states(void)
{
	for (uint32_t k = 0; k < UPSTREAM_STATES; k++)
		if (wk.servers[k].gen)
			upstream_state_free(&wk.servers[k]);
}
