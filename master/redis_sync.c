/*
 * redis_sync.c: scope = "cluster" rate limits, reconciled between nodes
 * through one redis server, by the master, asynchronously.
 *
 * Principle: every node admits from its own table as for a local limit,
 * so a request never waits for redis. Each interval the master takes the
 * entries whose cluster counts changed (the ring of shm/limit.h), tells
 * redis how many each admitted, and redis (one Lua script, on its own
 * clock) moves the key's cluster-wide TAT on by that many intervals and
 * answers how far ahead of now it stands; the master moves the local TAT
 * forward to as far ahead (never back). So each node learns the others'
 * admissions one interval late at most: the cluster admits within one
 * interval's worth of traffic per node of the exact bound. redis's clock
 * is the only one that matters across machines (CLOCK_MONOTONIC is per
 * machine). hiredis's async API on the master's libev loop: the master
 * never blocks, the workers never see redis at all.
 *
 * Redis unreachable: counts of that time are not sent later; each node
 * admits from its local state alone (fail open: up to nodes x the limit),
 * or refuses with the limit's status (fail_closed, shm redis_down); the
 * master reconnects each interval. Counted: syncs ok and failed, and
 * their latency (weir_rate_limit_redis_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#pragma GCC diagnostic pop

#include "common/log.h"
#include "master/master.h"
#include "shm/limit.h"

/* KEYS[1]: the key; ARGV: admitted, interval in us, TTL in ms. Returns the
 * microseconds the key's TAT stands ahead of redis's now. */
static const char script[] = "local t = redis.call('TIME') "
                             "local now = t[1] * 1000000 + t[2] "
                             "local tat = tonumber(redis.call('GET', KEYS[1]) or '0') "
                             "if tat < now then tat = now end "
                             "tat = tat + tonumber(ARGV[1]) * tonumber(ARGV[2]) "
                             "redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', ARGV[3]) "
                             "return tat - now";

#define SYNC_MAX_PER_TICK 20000 /* commands per interval, the rest waits */

static struct {
	struct ev_loop *loop;
	redisAsyncContext *ac;
	int connected;
	ev_timer tick;
	struct config_addr addr;
	uint32_t interval;
	int on;
	ev_tstamp last_warn;
	const struct config *cfg;
} rs;

struct sync_req {
	uint32_t index;
	uint64_t key;
	uint64_t sent_ns;
};

static void redis_down(const char *why)
{
	ev_tstamp now = ev_now(rs.loop);

	atomic_store(&limit_seg->redis_down, 1);
	if (now - rs.last_warn >= 10.0) {
		rs.last_warn = now;
		log_warn("redis %s: %s; cluster rate limits use this node's state alone (fail_closed ones refuse)",
		         rs.addr.text, why);
	}
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	if (ac != rs.ac)
		return;
	if (status != REDIS_OK) {
		redis_down(ac->errstr);
		rs.ac = NULL; /* hiredis frees it */
		rs.connected = 0;
		return;
	}
	rs.connected = 1;
	if (atomic_exchange(&limit_seg->redis_down, 0))
		log_notice("redis %s: reachable again; cluster rate limits reconcile", rs.addr.text);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	if (ac != rs.ac)
		return;
	rs.ac = NULL;
	rs.connected = 0;
	if (status != REDIS_OK)
		redis_down(ac->errstr[0] ? ac->errstr : "connection lost");
}

static void redis_connect(void)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&rs.addr.sa;
	char host[64];

	if (rs.addr.sa.ss_family == AF_INET6) {
		snprintf(host, sizeof host, "%.*s", (int)(strchr(rs.addr.text, ']') - rs.addr.text - 1),
		         rs.addr.text + 1);
	} else {
		snprintf(host, sizeof host, "%.*s", (int)(strrchr(rs.addr.text, ':') - rs.addr.text), rs.addr.text);
	}
	rs.ac = redisAsyncConnect(host, ntohs(sin->sin_port));
	if (!rs.ac || rs.ac->err) {
		redis_down(rs.ac ? rs.ac->errstr : "out of memory");
		if (rs.ac)
			redisAsyncFree(rs.ac);
		rs.ac = NULL;
		return;
	}
	redisLibevAttach(rs.loop, rs.ac);
	redisAsyncSetConnectCallback(rs.ac, on_connect);
	redisAsyncSetDisconnectCallback(rs.ac, on_disconnect);
}

/* Moves entry <r>'s TAT forward to <ahead_us> past now, if it still holds
 * its key and is behind. */
static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sync_req *r = priv;
	redisReply *rep = reply;
	struct limit_entry *e = limit_entry_at(limit_seg, r->index);
	uint64_t now = limit_now();

	(void)ac;
	if (!rep || rep->type != REDIS_REPLY_INTEGER) {
		atomic_fetch_add(&limit_seg->redis_syncs_failed, 1);
		if (rep && rep->type == REDIS_REPLY_ERROR)
			redis_down(rep->str);
		free(r);
		return;
	}
	atomic_fetch_add(&limit_seg->redis_syncs_ok, 1);
	atomic_fetch_add(&limit_seg->redis_sync_us, (now - r->sent_ns) / 1000);
	if (e && rep->integer > 0) {
		uint64_t want = now + (uint64_t)rep->integer * 1000u;
		uint64_t v = atomic_load(&e->val);

		while (v != LIMIT_BUSY && (v == LIMIT_FRESH || v < want) && atomic_load(&e->key) == r->key &&
		       !atomic_compare_exchange_weak(&e->val, &v, want))
			;
	}
	free(r);
}

/* The emission interval of the cluster limit of id <id> in the master's
 * configuration, in microseconds; 0 if it has none. */
static uint64_t cluster_interval_us(uint32_t id)
{
	for (int i = 0; i < rs.cfg->nrate_limits; i++) {
		const struct config_rate_limit *l = &rs.cfg->rate_limits[i];

		if (l->id == id && l->scope == CONFIG_RL_CLUSTER && l->interval_ns)
			return (l->interval_ns + 999) / 1000;
	}
	return 0;
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct limit_segment *s = limit_seg;
	uint64_t head, tail;
	int sent = 0;

	(void)loop;
	(void)w;
	(void)revents;
	if (!rs.ac) {
		redis_connect();
		return;
	}
	if (!rs.connected)
		return;
	head = atomic_load_explicit(&s->ring_head, memory_order_acquire);
	tail = atomic_load_explicit(&s->ring_tail, memory_order_relaxed);
	if (head - tail > LIMIT_RING)
		tail = head - LIMIT_RING; /* those past were counted as dropped */
	while (tail < head && sent < SYNC_MAX_PER_TICK) {
		_Atomic uint64_t *slot = &s->ring[tail % LIMIT_RING];
		uint64_t word = atomic_load_explicit(slot, memory_order_acquire);
		uint32_t idx = (uint32_t)word;
		struct limit_entry *e;
		uint32_t n;
		uint64_t key, interval_us = 0, ttl_ms;
		struct sync_req *r;
		char name[40];

		if (!idx)
			break; /* a worker is still writing it: next tick */
		atomic_store_explicit(slot, 0, memory_order_relaxed);
		tail++;
		e = limit_entry_at(s, idx - 1);
		if (!e)
			continue;
		key = atomic_load(&e->key);
		n = atomic_exchange(&e->unsynced, 0);
		if (!n || (key & 1))
			continue;
		interval_us = cluster_interval_us((uint32_t)(word >> 32));
		if (!interval_us || !(r = malloc(sizeof(*r))))
			continue;
		ttl_ms = interval_us * 4 / 1000 + 60000;
		r->index = idx - 1;
		r->key = key;
		r->sent_ns = limit_now();
		snprintf(name, sizeof name, "weir:rl:%016llx", (unsigned long long)key);
		if (redisAsyncCommand(rs.ac, on_reply, r, "EVAL %s 1 %s %u %llu %llu", script, name, n,
		                      (unsigned long long)interval_us, (unsigned long long)ttl_ms) != REDIS_OK) {
			free(r);
			atomic_fetch_add(&s->redis_syncs_failed, 1);
			break;
		}
		sent++;
	}
	atomic_store_explicit(&s->ring_tail, tail, memory_order_release);
}

void redis_sync_configure(struct ev_loop *loop, const struct config *cfg)
{
	int same = rs.on && cfg->has_redis && !strcmp(rs.addr.text, cfg->redis_addr.text);

	rs.loop = loop;
	rs.cfg = cfg;
	if (rs.on && !same) {
		ev_timer_stop(loop, &rs.tick);
		if (rs.ac)
			redisAsyncFree(rs.ac); /* its callbacks run, with a NULL reply */
		rs.ac = NULL;
		rs.connected = 0;
		rs.on = 0;
		atomic_store(&limit_seg->redis_down, 0);
	}
	if (!cfg->has_redis)
		return;
	rs.addr = cfg->redis_addr;
	if (rs.on && rs.interval == cfg->redis_interval)
		return;
	rs.interval = cfg->redis_interval;
	ev_timer_stop(loop, &rs.tick);
	ev_timer_init(&rs.tick, tick_cb, rs.interval / 1000.0, rs.interval / 1000.0);
	ev_timer_start(loop, &rs.tick);
	if (!rs.on)
		redis_connect();
	rs.on = 1;
}

void redis_sync_stop(void)
{
	if (!rs.on)
		return;
	ev_timer_stop(rs.loop, &rs.tick);
	rs.on = 0;
}

void redis_sync_forget(void)
{
	/* a new worker shares the master's loop and descriptors: it must
	 * neither tick nor read the master's redis socket, nor free the
	 * context (whose callbacks would count into the shared segment) */
	if (!rs.on)
		return;
	ev_timer_stop(rs.loop, &rs.tick);
	if (rs.ac) {
		if (rs.ac->ev.delRead)
			rs.ac->ev.delRead(rs.ac->ev.data);
		if (rs.ac->ev.delWrite)
			rs.ac->ev.delWrite(rs.ac->ev.data);
		close(rs.ac->c.fd);
		rs.ac = NULL;
	}
	rs.on = 0;
}
