/*
 * adaptive_conc.c: the limit of each group's adaptive_concurrency
 * (master/adaptive_conc.h says how).
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "master/adaptive_conc.h"
#include "master/textbuf.h"
#include "shm/resil.h"
#include "shm/route.h"
#include "shm/shm.h"

/* One group's controller, by resil group index (kept for the segment's
 * life, so a reload finds its state under the same name). */
struct adaptive_conc_state {
	uint8_t live;          /* limit and baseline hold for this entry */
	uint64_t gen;          /* the table generation the snapshot is of */
	uint64_t count, us;    /* upstream answers and microseconds at the window's start */
	uint32_t ticks;        /* ticks into the window */
	uint64_t in_flight;    /* the most in flight sampled in the window */
	double limit, baseline;
};

static struct {
	struct adaptive_conc_state st[RESIL_GROUPS];
	const struct shm_route_counters *routes; /* the tick's sums (adaptive.c's) */
} ac;

void adaptive_conc_step(const struct config_adaptive_conc *c, double *limit, double *baseline_us, double short_us,
                        uint64_t in_flight)
{
	double l = *limit, b = *baseline_us, alpha, gradient, next;

	if (short_us <= 0)
		return; /* no answer: no evidence */
	if (b <= 0) {
		b = short_us;
	} else {
		alpha = (double)c->window / c->baseline_window;
		b = b * (1 - alpha) + short_us * alpha;
		if (b > 2 * short_us)
			b *= 0.95; /* well under the baseline: the past is past */
	}
	*baseline_us = b;
	if ((double)in_flight * 2 < l)
		return; /* the group does not use its limit: nothing to judge it by */
	gradient = c->tolerance / 100.0 * b / short_us;
	gradient = gradient < 0.5 ? 0.5 : gradient > 1 ? 1 : gradient;
	next = l * gradient + sqrt(l);
	next = l * (1 - c->smoothing / 100.0) + next * (c->smoothing / 100.0);
	if (next < c->min_limit)
		next = c->min_limit;
	if (next > c->max_limit)
		next = c->max_limit;
	*limit = next;
}

/* The upstream answers and their microseconds, over the routes of <t>
 * that proxy to group <u>. */
static void adaptive_conc_sum(const struct route_table *t, uint32_t u, uint64_t *count, uint64_t *us)
{
	uint8_t seen[STAT_ROUTES] = {0};

	*count = *us = 0;
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct route_entry *e = &route_entries(t)[i];

		if (e->ret >= 0 || e->upstream != u || seen[e->stat])
			continue;
		seen[e->stat] = 1;
		for (unsigned b = 0; b < STAT_BUCKETS; b++)
			*count += ac.routes[e->stat].upstream[b];
		*us += ac.routes[e->stat].upstream_us;
	}
}

static void adaptive_conc_publish(struct shm_resil_group *g, const struct adaptive_conc_state *s)
{
	atomic_store_explicit(&g->ac_limit, (uint32_t)s->limit, memory_order_relaxed);
	atomic_store_explicit(&g->ac_baseline_us, (uint32_t)s->baseline, memory_order_relaxed);
}

void adaptive_conc_tick(struct shm_segment *seg, const struct route_table *t, const struct shm_route_counters *routes,
                        double tick)
{
	ac.routes = routes;
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];
		const struct config_adaptive_conc *c = &up->resil.adaptive;
		struct adaptive_conc_state *s;
		struct shm_resil_group *g;
		uint64_t count, us, a;
		uint32_t ticks;

		if (!c->on || up->resil_group == RESIL_GROUP_NONE)
			continue;
		s = &ac.st[up->resil_group];
		g = &seg->resil_groups.g[up->resil_group];
		if (!s->live) { /* a new group, or a new master: from what the segment holds */
			uint32_t was = atomic_load_explicit(&g->ac_limit, memory_order_relaxed);

			s->live = 1;
			s->limit = was ? was : c->initial_limit;
			s->baseline = atomic_load_explicit(&g->ac_baseline_us, memory_order_relaxed);
			s->gen = 0;
		}
		/* a reload may have moved the bounds */
		s->limit = s->limit < c->min_limit ? c->min_limit : s->limit > c->max_limit ? c->max_limit : s->limit;
		adaptive_conc_sum(t, u, &count, &us);
		a = atomic_load_explicit(&g->active, memory_order_relaxed);
		if (a > s->in_flight)
			s->in_flight = a;
		if (s->gen != t->id || count < s->count || us < s->us) {
			/* another table sums other routes (or a reclaimed stat index
			 * started again): a new window from here */
			s->gen = t->id;
			s->count = count;
			s->us = us;
			s->ticks = 0;
			s->in_flight = a;
			adaptive_conc_publish(g, s);
			continue;
		}
		ticks = (uint32_t)(c->window / (tick * 1000) + 0.5);
		if (++s->ticks < (ticks ? ticks : 1))
			continue;
		if (count > s->count) {
			double short_us = (double)(us - s->us) / (double)(count - s->count);

			adaptive_conc_step(c, &s->limit, &s->baseline, short_us, s->in_flight);
			atomic_store_explicit(&g->ac_latency_us, short_us > UINT32_MAX ? UINT32_MAX : (uint32_t)short_us,
			                      memory_order_relaxed);
		}
		s->count = count;
		s->us = us;
		s->ticks = 0;
		s->in_flight = a;
		adaptive_conc_publish(g, s);
	}
}

int adaptive_conc_any(const struct config *cfg)
{
	for (int i = 0; i < cfg->nupstreams; i++)
		if (cfg->upstreams[i].resil.adaptive.on)
			return 1;
	return 0;
}

/* One family over the groups of <t> with adaptive_concurrency. */
static void adaptive_conc_family(struct textbuf *o, struct shm_segment *seg, const struct route_table *t,
                                 const char *name, const char *type, const char *help, int which)
{
	textbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];
		const struct shm_resil_group *g;
		uint32_t l;

		if (!up->resil.adaptive.on || up->resil_group == RESIL_GROUP_NONE)
			continue;
		g = &seg->resil_groups.g[up->resil_group];
		textbuf_printf(o, "%s{upstream=\"", name);
		textbuf_label(o, up->name);
		switch (which) {
		case 0:
			l = atomic_load_explicit(&g->ac_limit, memory_order_relaxed);
			textbuf_printf(o, "\"} %u\n", l ? l : up->resil.adaptive.initial_limit);
			break;
		case 1:
			textbuf_printf(o, "\"} %.6f\n", atomic_load_explicit(&g->ac_latency_us, memory_order_relaxed) / 1e6);
			break;
		case 2:
			textbuf_printf(o, "\"} %.6f\n", atomic_load_explicit(&g->ac_baseline_us, memory_order_relaxed) / 1e6);
			break;
		default:
			textbuf_printf(o, "\"} %llu\n",
			               (unsigned long long)atomic_load_explicit(&g->ac_refused, memory_order_relaxed));
		}
	}
}

void adaptive_conc_render(struct textbuf *o, struct shm_segment *seg, const struct route_table *t)
{
	adaptive_conc_family(o, seg, t, "weir_upstream_adaptive_concurrency_limit", "gauge",
	                     "The adaptive cap on requests in flight to an upstream group, node-wide.", 0);
	adaptive_conc_family(o, seg, t, "weir_upstream_adaptive_concurrency_latency_seconds", "gauge",
	                     "The last window's mean upstream latency the adaptive cap was judged on.", 1);
	adaptive_conc_family(o, seg, t, "weir_upstream_adaptive_concurrency_baseline_seconds", "gauge",
	                     "The slowly moving baseline latency the window was compared with.", 2);
	adaptive_conc_family(o, seg, t, "weir_upstream_adaptive_concurrency_refused_total", "counter",
	                     "Requests refused (at once, or after the queue) while the adaptive cap was the binding one.",
	                     3);
}
