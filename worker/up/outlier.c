
#include "worker/up/up.h"
#include "common/log.h"
#include "shm/shm.h"

static struct shm_resil_server *outlier_state(const struct route_table *t, uint32_t si)
{
	return &wk.seg->resil[route_servers(t)[si].stat];
}

/* Servers of <up> an admin left up, and of those how many are ejected. */
static void outlier_count(const struct route_table *t, const struct route_upstream *up, uint64_t now, uint32_t *up_n,
                          uint32_t *ejected)
{
	*up_n = *ejected = 0;
	for (uint32_t k = 0; k < up->nservers; k++) {
		const struct route_server *rs = &route_servers(t)[up->first_server + k];

		if (SHM_ADMIN_STATE(shm_admin(wk.seg, rs->stat)) != SHM_ADMIN_UP)
			continue;
		(*up_n)++;
		*ejected += resil_ejected(&wk.seg->resil[rs->stat], now);
	}
}

/* Server <si>, ejected for reason <was> - 1, is back. */
static void outlier_log_return(const struct route_table *t, uint32_t si, uint32_t was, uint64_t now)
{
	atomic_store_explicit(&outlier_state(t, si)->returned_at, now, memory_order_relaxed);
	log_notice("upstream %s server %s returned after its ejection (%s) ran out",
	           route_upstreams(t)[route_servers(t)[si].upstream].name, route_servers(t)[si].text,
	           resil_eject_names[was - 1 < RESIL_EJECT_COUNT ? was - 1 : 0]);
}

/*
 * Ejects server <si> for <reason>. The compare-and-swap on <ejected> makes
 * one worker the ejector when several see the threshold at once. The
 * limits are checked after the ejection is visible, so two servers
 * ejected at the same moment by two workers each see the other: at worst
 * both back out, never both stay past max_ejection_percent.
 */
static void outlier_eject(const struct route_table *t, uint32_t si, enum resil_eject reason, uint64_t now)
{
	const struct route_upstream *up = &route_upstreams(t)[route_servers(t)[si].upstream];
	const struct config_outlier *oc = &up->resil.outlier;
	struct shm_resil_server *r = outlier_state(t, si);
	uint32_t was = atomic_load(&r->ejected), k, up_n, ejected;
	uint64_t ms;

	if (resil_ejected(r, now) || !atomic_compare_exchange_strong(&r->ejected, &was, (uint32_t)reason + 1))
		return;
	if (was) /* an ejection ran out and no sweep logged it yet */
		outlier_log_return(t, si, was, now);
	/* the multiplier decays: a server that stayed in for the longest
	 * ejection since its return starts again from one */
	if (now - atomic_load_explicit(&r->returned_at, memory_order_relaxed) > oc->max_ejection_time)
		atomic_store_explicit(&r->ejections, 0, memory_order_relaxed);
	k = atomic_fetch_add(&r->ejections, 1) + 1;
	ms = (uint64_t)oc->base_ejection_time * k;
	if (ms > oc->max_ejection_time)
		ms = oc->max_ejection_time;
	atomic_store(&r->ejected_until, now + ms);
	atomic_store_explicit(&r->run_5xx, 0, memory_order_relaxed);
	atomic_store_explicit(&r->run_gateway, 0, memory_order_relaxed);
	atomic_store_explicit(&r->window, 0, memory_order_relaxed);

	outlier_count(t, up, now, &up_n, &ejected);
	if (ejected >= up_n || (uint64_t)ejected * 100 > (uint64_t)oc->max_ejection_percent * up->nservers) {
		atomic_store(&r->ejected_until, 0);
		atomic_fetch_sub(&r->ejections, 1);
		atomic_store(&r->ejected, 0);
		atomic_fetch_add_explicit(&r->ejections_refused, 1, memory_order_relaxed);
		log_warn("upstream %s server %s: not ejected (%s): %s", up->name, route_servers(t)[si].text,
		         resil_eject_names[reason],
		         ejected >= up_n ? "it is the last usable server" : "max_ejection_percent reached");
		return;
	}
	atomic_fetch_add_explicit(&r->ejected_total[reason], 1, memory_order_relaxed);
	log_warn("upstream %s server %s ejected for %.3g s (%s; ejection %u in a row; %u of %u servers ejected)",
	         up->name, route_servers(t)[si].text, (double)ms / 1000.0, resil_eject_names[reason], k, ejected,
	         up->nservers);
}

/* The failure-percentage window of <r>: counts one answer (<fail> or not)
 * and returns the window with it, after starting a new one if the
 * interval ran out (the worker that swaps the start clears it: answers
 * counted meanwhile by others may be lost, which only delays a verdict). */
static uint64_t outlier_window(struct shm_resil_server *r, const struct config_outlier *oc, int fail, uint64_t now)
{
	uint64_t start = atomic_load_explicit(&r->window_start, memory_order_relaxed);

	if (now - start >= oc->interval && atomic_compare_exchange_strong(&r->window_start, &start, now))
		atomic_store_explicit(&r->window, 0, memory_order_relaxed);
	return atomic_fetch_add_explicit(&r->window, fail ? (1ull << 32) + 1 : 1, memory_order_relaxed) +
	       (fail ? (1ull << 32) + 1 : 1);
}

/* A run counter: +1 (locked) on a failure, back to 0 (a plain store, only
 * when not 0 already) otherwise. Returns the run. */
static uint32_t outlier_run(_Atomic uint32_t *run, int fail)
{
	if (fail)
		return atomic_fetch_add_explicit(run, 1, memory_order_relaxed) + 1;
	if (atomic_load_explicit(run, memory_order_relaxed))
		atomic_store_explicit(run, 0, memory_order_relaxed);
	return 0;
}

void outlier_observe(const struct route_table *t, uint32_t si, enum outlier_outcome o)
{
	const struct config_outlier *oc = &route_upstreams(t)[route_servers(t)[si].upstream].resil.outlier;
	struct shm_resil_server *r = outlier_state(t, si);
	uint64_t now;
	uint32_t n;

	if (!oc->on || route_servers(t)[si].stat == STAT_SERVER_OTHER) /* "other" is shared by many: no verdicts */
		return;
	now = resil_now_ms();
	if (oc->consecutive_5xx && o != OUTLIER_GATEWAY) {
		n = outlier_run(&r->run_5xx, o == OUTLIER_5XX);
		if (n == oc->consecutive_5xx) /* exactly: one worker sees it */
			outlier_eject(t, si, RESIL_EJECT_CONSECUTIVE_5XX, now);
	}
	if (oc->consecutive_gateway) {
		n = outlier_run(&r->run_gateway, o == OUTLIER_GATEWAY);
		if (n == oc->consecutive_gateway)
			outlier_eject(t, si, RESIL_EJECT_CONSECUTIVE_GATEWAY, now);
	}
	if (oc->failure_percentage) {
		uint64_t w = outlier_window(r, oc, o != OUTLIER_OK, now);
		uint64_t answers = w & 0xffffffffu, fails = w >> 32;

		if (o != OUTLIER_OK && answers >= oc->failure_min_requests &&
		    fails * 100 >= (uint64_t)oc->failure_percentage * answers)
			outlier_eject(t, si, RESIL_EJECT_FAILURE_PERCENTAGE, now);
	}
}

uint64_t outlier_pick_now(const struct route_table *t, const struct route_upstream *up)
{
	static ev_tstamp last;
	uint64_t now;
	uint32_t up_n, ejected;

	if (!up->resil.outlier.on)
		return 0;
	now = resil_now_ms();
	if (!up->resil.outlier.panic_threshold)
		return now;
	outlier_count(t, up, now, &up_n, &ejected);
	if (!ejected || (uint64_t)(up_n - ejected) * 100 >= (uint64_t)up->resil.outlier.panic_threshold * up->nservers)
		return now;
	SHM_ADD(wk.cnt, outlier_panics, 1);
	if (ev_now(wk.loop) - last >= 1.0) {
		last = ev_now(wk.loop);
		log_warn("upstream %s: %u of %u servers usable, under panic_threshold %u%%: balancing over all of "
		         "them, ejected or not",
		         up->name, up_n - ejected, up->nservers, up->resil.outlier.panic_threshold);
	}
	return 0;
}

void outlier_sweep(const struct route_table *t)
{
	uint64_t now = resil_now_ms();

	for (uint32_t i = 0; i < t->nservers; i++) {
		const struct route_upstream *up = &route_upstreams(t)[route_servers(t)[i].upstream];
		struct shm_resil_server *r = outlier_state(t, i);
		uint32_t was = atomic_load_explicit(&r->ejected, memory_order_relaxed);

		if (!up->resil.outlier.on || !was || resil_ejected(r, now) ||
		    !atomic_compare_exchange_strong(&r->ejected, &was, 0))
			continue;
		outlier_log_return(t, i, was, now);
	}
}
