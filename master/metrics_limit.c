/*
 * metrics_limit.c: the rate limits' families of /metrics (shm/limit.h).
 *
 * Labels come from the limit names the segment has seen (bounded by
 * LIMIT_IDS) and the fixed set of results; a name no longer configured
 * keeps its series, as counters must not go back.
 */
#include <stdatomic.h>

#include "master/metrics.h"
#include "master/textbuf.h"
#include "shm/limit.h"

/* One gauge family of the adaptive limits, the ids with a factor written. */
static void adaptive_family(struct textbuf *o, const struct limit_segment *s, uint32_t n, const char *name,
                            const char *help, int which)
{
	textbuf_printf(o, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (uint32_t id = 0; id < n; id++) {
		const struct limit_adaptive *a = &s->adapt[id];
		uint32_t f = atomic_load_explicit(&a->factor, memory_order_relaxed);

		if (!f)
			continue; /* never adaptive */
		textbuf_printf(o, "%s{limit=\"", name);
		textbuf_label(o, s->ids[id].name);
		switch (which) {
		case 0: textbuf_printf(o, "\"} %.3f\n", f / 1000.0); break;
		case 1:
			textbuf_printf(o, "\"} %.6f\n", atomic_load_explicit(&a->p99_us, memory_order_relaxed) / 1e6);
			break;
		case 2:
			textbuf_printf(o, "\"} %.3f\n",
			               atomic_load_explicit(&a->err_pm, memory_order_relaxed) / 1000.0);
			break;
		case 3:
			textbuf_printf(o, "\"} %u\n",
			               (unsigned)atomic_load_explicit(&a->breaker, memory_order_relaxed));
			break;
		default:
			textbuf_printf(o, "\"} %llu\n",
			               (unsigned long long)atomic_load_explicit(&a->answers, memory_order_relaxed));
		}
	}
}

/* weir_rate_limit_adaptive_*: the factor and what the master made it of
 * (master/adaptive.h). */
static void metrics_render_adaptive(struct textbuf *o, const struct limit_segment *s, uint32_t n)
{
	adaptive_family(o, s, n, "weir_rate_limit_adaptive_factor",
	                "What an adaptive limit's rate is scaled by now (1, 0.6, 0.3; the floor holds it up).", 0);
	adaptive_family(o, s, n, "weir_rate_limit_adaptive_p99_seconds",
	                "The p99 of its upstream's latency over the window (0: no answers).", 1);
	adaptive_family(o, s, n, "weir_rate_limit_adaptive_error_ratio",
	                "The share of its upstream's answers over the window that were 5xx.", 2);
	adaptive_family(o, s, n, "weir_rate_limit_adaptive_breaker_open",
	                "1 while its upstream group's breaker is open.", 3);
	adaptive_family(o, s, n, "weir_rate_limit_adaptive_answers",
	                "Its upstream's answers in the window the factor was judged on.", 4);
}

void metrics_render_limits(struct textbuf *o)
{
	const struct limit_segment *s = limit_seg;
	uint32_t n;

	if (!s)
		return;
	n = atomic_load_explicit(&s->nids, memory_order_acquire);
	textbuf_printf(o, "# HELP weir_rate_limit_decisions_total Rate limit decisions, by limit and result "
	                  "(table_full: the key had no room and was limited under the limit's shared entry).\n"
	                  "# TYPE weir_rate_limit_decisions_total counter\n");
	for (uint32_t id = 0; id < n; id++)
		for (int r = 0; r < LIMIT_RESULTS; r++) {
			textbuf_printf(o, "weir_rate_limit_decisions_total{limit=\"");
			textbuf_label(o, s->ids[id].name);
			textbuf_printf(o, "\",result=\"%s\"} %llu\n", limit_result_names[r],
			               (unsigned long long)limit_sum(s, id, r));
		}
	metrics_render_adaptive(o, s, n);
	textbuf_printf(o,
	               "# HELP weir_rate_limit_table_keys Keys held in the shared rate-limit table.\n"
	               "# TYPE weir_rate_limit_table_keys gauge\nweir_rate_limit_table_keys %lld\n"
	               "# HELP weir_rate_limit_table_capacity Keys the shared rate-limit table can hold.\n"
	               "# TYPE weir_rate_limit_table_capacity gauge\nweir_rate_limit_table_capacity %llu\n",
	               (long long)atomic_load_explicit(&s->used, memory_order_relaxed),
	               (unsigned long long)(s->nbuckets * LIMIT_WAYS));
	textbuf_printf(o,
	               "# HELP weir_rate_limit_evictions_total Keys evicted from the rate-limit table for a new "
	               "one: expired (state at rest, nothing lost) or lru (least recently used, its state dropped).\n"
	               "# TYPE weir_rate_limit_evictions_total counter\n"
	               "weir_rate_limit_evictions_total{kind=\"expired\"} %llu\n"
	               "weir_rate_limit_evictions_total{kind=\"lru\"} %llu\n",
	               (unsigned long long)atomic_load_explicit(&s->evicted_expired, memory_order_relaxed),
	               (unsigned long long)atomic_load_explicit(&s->evicted_lru, memory_order_relaxed));
	textbuf_printf(
	    o,
	    "# HELP weir_rate_limit_redis_syncs_total Cluster rate-limit reconciles with redis, by result.\n"
	    "# TYPE weir_rate_limit_redis_syncs_total counter\n"
	    "weir_rate_limit_redis_syncs_total{result=\"ok\"} %llu\n"
	    "weir_rate_limit_redis_syncs_total{result=\"failed\"} %llu\n"
	    "# HELP weir_rate_limit_redis_sync_seconds_total Time from sending a reconcile to its answer, "
	    "summed over the ok ones.\n"
	    "# TYPE weir_rate_limit_redis_sync_seconds_total counter\n"
	    "weir_rate_limit_redis_sync_seconds_total %.6f\n"
	    "# HELP weir_rate_limit_redis_up 1 unless the master failed to reach redis since its last success.\n"
	    "# TYPE weir_rate_limit_redis_up gauge\nweir_rate_limit_redis_up %d\n"
	    "# HELP weir_rate_limit_redis_dropped_total Cluster counts not sent: the ring to the master was full.\n"
	    "# TYPE weir_rate_limit_redis_dropped_total counter\nweir_rate_limit_redis_dropped_total %llu\n",
	    (unsigned long long)atomic_load(&s->redis_syncs_ok),
	    (unsigned long long)atomic_load(&s->redis_syncs_failed), (double)atomic_load(&s->redis_sync_us) / 1e6,
	    !atomic_load(&s->redis_down), (unsigned long long)atomic_load(&s->ring_dropped));
}
