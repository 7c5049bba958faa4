/*
 * adaptive.c: the factor of each adaptive rate limit (master/adaptive.h
 * says how).
 */
#include <ev.h>
#include <stdatomic.h>
#include <string.h>

#include "common/config.h"
#include "master/adaptive.h"
#include "master/adaptive_conc.h"
#include "shm/limit.h"
#include "shm/resil.h"
#include "shm/route.h"
#include "shm/shm.h"

#define ADAPTIVE_ERR_PM 50 /* 5% of answers 5xx: 0.3x */
/* Hysteresis: a factor lowered by a threshold returns only once the window
 * is under 0.8 x that threshold (4% errors, 0.8 x latency_p99). Judged on
 * the threshold alone, a window holding about 5% failures turned the
 * factor from 0.3 to 1.0 and back every few ticks (notes/14.md). */
#define ADAPTIVE_RECOVER_PCT 80

struct adaptive_snap {
	uint64_t hist[STAT_BUCKETS];
	uint64_t answers, errors;
};

struct adaptive_state {
	char upstream[CONFIG_NAME_MAX]; /* the ring is of this group's sums */
	uint32_t n, head;               /* snapshots held, and the next to write */
	struct adaptive_snap ring[ADAPTIVE_RING];
};

static struct {
	struct ev_loop *loop;
	ev_timer timer;
	const struct config *cfg;
	int conc; /* a group has adaptive_concurrency: its tick too */
	struct shm_segment *seg;
	struct adaptive_state st[LIMIT_IDS];
	/* sums of one tick, for the rate limits and adaptive_concurrency
	 * (adaptive_conc.c) alike: static, 192 KiB is too much for the stack */
	struct shm_route_counters routes[STAT_ROUTES];
	struct shm_server_counters servers[STAT_SERVERS];
} ad;

uint32_t adaptive_judge(const uint64_t hist[STAT_BUCKETS], uint64_t answers, uint64_t errors, int breaker_open,
                        uint32_t latency_p99_ms, uint32_t prev, uint32_t *p99_us)
{
	uint64_t err_pm = ADAPTIVE_ERR_PM, p99_bound = (uint64_t)latency_p99_ms * 1000;
	uint64_t count = 0, cum = 0, rank, lo = 0;

	*p99_us = 0;
	for (unsigned b = 0; b < STAT_BUCKETS; b++)
		count += hist[b];
	if (count) {
		rank = (count * 99 + 99) / 100; /* the 99th percentile's rank, rounded up */
		for (unsigned b = 0; b < STAT_BUCKETS; b++) {
			uint64_t hi = stat_bucket_bound_us(b);

			if (cum + hist[b] >= rank) {
				/* the +Inf bucket has no bound: its lower one, as
				 * histogram_quantile answers */
				uint64_t v = hi == UINT64_MAX ? lo : lo + (hi - lo) * (rank - cum) / hist[b];

				*p99_us = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
				break;
			}
			cum += hist[b];
			lo = hi;
		}
	}
	/* in per mille and microseconds x 100, so the margin stays exact */
	err_pm *= prev && prev <= 300 ? ADAPTIVE_RECOVER_PCT : 100;
	p99_bound *= prev && prev <= 600 ? ADAPTIVE_RECOVER_PCT : 100;
	if (breaker_open || (answers && errors * 1000 * 100 > answers * err_pm))
		return 300;
	if (count && (uint64_t)*p99_us * 100 > p99_bound)
		return 600;
	return 1000;
}

/* The sums of <l>'s upstream in the current table, and whether its
 * breaker is open. */
static int adaptive_snap_take(const struct route_table *t, const struct config_rate_limit *l, struct adaptive_snap *sn)
{
	uint8_t seen[STAT_ROUTES] = {0};
	int open = 0;

	memset(sn, 0, sizeof *sn);
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct route_entry *e = &route_entries(t)[i];

		if (e->ret >= 0 || seen[e->stat] || strcmp(route_upstreams(t)[e->upstream].name, l->adaptive.upstream))
			continue;
		seen[e->stat] = 1;
		for (unsigned b = 0; b < STAT_BUCKETS; b++)
			sn->hist[b] += ad.routes[e->stat].upstream[b];
	}
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (strcmp(up->name, l->adaptive.upstream))
			continue;
		for (uint32_t k = 0; k < up->nservers; k++) {
			const struct shm_server_counters *c = &ad.servers[route_servers(t)[up->first_server + k].stat];

			for (int r = 0; r < 5; r++)
				sn->answers += c->responses[r];
			sn->errors += c->responses[4];
		}
		if (up->resil_group != RESIL_GROUP_NONE)
			open = BREAKER_STATE(atomic_load_explicit(&ad.seg->resil_groups.g[up->resil_group].state,
			                                          memory_order_relaxed)) == BREAKER_OPEN;
		break;
	}
	return open;
}

static void adaptive_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	const struct route_table *t = &ad.seg->gens[atomic_load_explicit(&ad.seg->gen_current, memory_order_acquire)];
	struct limit_segment *s = limit_seg;

	(void)loop;
	(void)w;
	(void)revents;
	shm_sum_keys(ad.seg, ad.routes, ad.servers);
	if (ad.conc)
		adaptive_conc_tick(ad.seg, t, ad.routes, ADAPTIVE_TICK);
	for (int i = 0; s && i < ad.cfg->nrate_limits; i++) {
		const struct config_rate_limit *l = &ad.cfg->rate_limits[i];
		struct adaptive_state *st = &ad.st[l->id];
		struct limit_adaptive *out = &s->adapt[l->id];
		struct adaptive_snap now, *old;
		uint32_t back, p99, f;
		uint64_t hist[STAT_BUCKETS];
		int open;

		if (!l->adaptive.on || l->id >= LIMIT_IDS)
			continue;
		if (strcmp(st->upstream, l->adaptive.upstream)) { /* new, or another group since a reload */
			memset(st, 0, sizeof *st);
			strcpy(st->upstream, l->adaptive.upstream);
		}
		open = adaptive_snap_take(t, l, &now);
		/* the snapshot a window old, or the oldest held */
		back = (uint32_t)(l->adaptive.window / (ADAPTIVE_TICK * 1000));
		if (back >= ADAPTIVE_RING)
			back = ADAPTIVE_RING - 1;
		if (back > st->n)
			back = st->n;
		old = back ? &st->ring[(st->head + ADAPTIVE_RING - back) % ADAPTIVE_RING] : &now;
		/* counters never go back, but a reclaimed stat index starts at
		 * zero again: a difference that would be negative counts none */
		for (unsigned b = 0; b < STAT_BUCKETS; b++)
			hist[b] = now.hist[b] > old->hist[b] ? now.hist[b] - old->hist[b] : 0;
		uint64_t answers = now.answers > old->answers ? now.answers - old->answers : 0;
		uint64_t errors = now.errors > old->errors ? now.errors - old->errors : 0;

		f = adaptive_judge(hist, answers, errors, open, l->adaptive.latency_p99,
		                   atomic_load_explicit(&out->factor, memory_order_relaxed), &p99);
		atomic_store_explicit(&out->p99_us, p99, memory_order_relaxed);
		atomic_store_explicit(&out->err_pm, answers ? (uint32_t)(errors * 1000 / answers) : 0,
		                      memory_order_relaxed);
		atomic_store_explicit(&out->breaker, (uint32_t)open, memory_order_relaxed);
		atomic_store_explicit(&out->answers, answers, memory_order_relaxed);
		atomic_store_explicit(&out->factor, f, memory_order_relaxed);
		st->ring[st->head] = now;
		st->head = (st->head + 1) % ADAPTIVE_RING;
		if (st->n < ADAPTIVE_RING)
			st->n++;
	}
}

void adaptive_configure(struct ev_loop *loop, const struct config *cfg, struct shm_segment *seg)
{
	int any = 0;

	for (int i = 0; i < cfg->nrate_limits; i++)
		any |= cfg->rate_limits[i].adaptive.on;
	ad.conc = adaptive_conc_any(cfg);
	any |= ad.conc;
	if (ad.loop)
		ev_timer_stop(ad.loop, &ad.timer);
	ad.loop = loop;
	ad.cfg = cfg;
	ad.seg = seg;
	if (limit_seg)
		for (int i = 0; i < cfg->nrate_limits; i++)
			if (!cfg->rate_limits[i].adaptive.on && cfg->rate_limits[i].id < LIMIT_IDS)
				atomic_store(&limit_seg->adapt[cfg->rate_limits[i].id].factor,
				             1000); /* no longer adaptive */
	if (!any)
		return;
	ev_timer_init(&ad.timer, adaptive_tick_cb, ADAPTIVE_TICK, ADAPTIVE_TICK);
	ev_timer_start(loop, &ad.timer);
}

void adaptive_forget(void)
{
	if (ad.loop)
		ev_timer_stop(ad.loop, &ad.timer);
	ad.loop = NULL;
}
