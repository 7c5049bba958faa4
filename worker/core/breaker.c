
#include "worker/core/core.h"
#include <stdio.h>

#include "common/log.h"
#include "shm/shm.h"

/* seconds of Retry-After in the last refusal (breaker_retry_secs) */
static uint32_t breaker_retry_after = 1;

const struct route_upstream *breaker_upstream(const struct txn *t)
{
	return &route_upstreams(t->table)[t->bk.upstream_plus1 ? t->bk.upstream_plus1 - 1u : split_group(t)];
}

static struct shm_resil_group *breaker_group(uint16_t k)
{
	return &wk.seg->resil_groups.g[k];
}

/* The half-open word: trials let through and trials answered well. */
#define HALF_WORD(let, ok) BREAKER_WORD((uint64_t)(ok) << 11 | (let), BREAKER_HALF_OPEN)
#define HALF_LET(w)        ((uint32_t)(BREAKER_UNTIL(w) & 0x7ff))
#define HALF_OK(w)         ((uint32_t)(BREAKER_UNTIL(w) >> 11))

/* Opens the breaker of <up> from state word <from> for <why>: the open
 * time doubles with each opening in a row, up to max_open_time. */
static void breaker_trip(const struct route_upstream *up, struct shm_resil_group *g, uint64_t from,
                         enum breaker_trip why, uint64_t now)
{
	const struct config_breaker *bc = &up->resil.breaker;
	uint32_t opens = atomic_load(&g->opens);
	uint64_t ms = (uint64_t)bc->open_time << (opens < 16 ? opens : 16);

	if (ms > bc->max_open_time)
		ms = bc->max_open_time;
	if (!atomic_compare_exchange_strong(&g->state, &from, BREAKER_WORD(now + ms, BREAKER_OPEN)))
		return; /* another worker moved it first */
	atomic_store(&g->opens, opens + 1);
	atomic_store_explicit(&g->reason, (uint32_t)why, memory_order_relaxed);
	atomic_fetch_add_explicit(&g->transitions[BREAKER_OPEN], 1, memory_order_relaxed);
	log_warn("upstream %s: breaker open for %.3g s (%s; opening %u in a row)", up->name, (double)ms / 1000.0,
	         breaker_trip_names[why], opens + 1);
}

/* Clears the window, so what tripped the breaker cannot trip it again. */
static void breaker_window_clear(struct shm_resil_group *g)
{
	for (int b = 0; b < BREAKER_BUCKETS; b++)
		atomic_store_explicit(&g->bucket[b], 0, memory_order_relaxed);
}

/* Sums the last <n> seconds up to <sec>. */
static void breaker_window_sum(struct shm_resil_group *g, uint32_t sec, uint32_t n, uint64_t *ans, uint64_t *err,
                               uint64_t *slow)
{
	*ans = *err = *slow = 0;
	for (uint32_t i = 0; i < n && i <= sec; i++) {
		uint32_t b = (sec - i) % BREAKER_BUCKETS;
		uint64_t w;

		if (atomic_load_explicit(&g->bucket_sec[b], memory_order_relaxed) != sec - i)
			continue;
		w = atomic_load_explicit(&g->bucket[b], memory_order_relaxed);
		*ans += BREAKER_FIELD(w, 0);
		*err += BREAKER_FIELD(w, BREAKER_ERR_SHIFT);
		*slow += BREAKER_FIELD(w, BREAKER_SLOW_SHIFT);
	}
}

/* Counts one answer into the bucket of second <sec>. The worker that
 * moves a bucket to a new second clears it; answers others count in
 * between may be lost (a few answers at the turn of a second, good or
 * bad: the ratio moves by that much at most). */
static void breaker_window_add(struct shm_resil_group *g, uint32_t sec, int err, int slow)
{
	uint32_t b = sec % BREAKER_BUCKETS, was = atomic_load_explicit(&g->bucket_sec[b], memory_order_relaxed);

	if (was != sec && atomic_compare_exchange_strong(&g->bucket_sec[b], &was, sec))
		atomic_store_explicit(&g->bucket[b], 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&g->bucket[b],
	                          1 | (uint64_t) !!err << BREAKER_ERR_SHIFT | (uint64_t) !!slow << BREAKER_SLOW_SHIFT,
	                          memory_order_relaxed);
}

/* Open and its time over: the first worker to see it moves it to
 * half-open. Returns the state word as it now stands. */
static uint64_t breaker_half_open(const struct route_upstream *up, struct shm_resil_group *g, uint64_t w)
{
	if (atomic_compare_exchange_strong(&g->state, &w, HALF_WORD(0, 0))) {
		atomic_fetch_add_explicit(&g->transitions[BREAKER_HALF_OPEN], 1, memory_order_relaxed);
		log_notice("upstream %s: breaker half-open, letting %u trial requests through", up->name,
		           up->resil.breaker.half_open_trials);
		return HALF_WORD(0, 0);
	}
	return w;
}

/* 0, or the refusal: counted, and named for the access log. */
static int breaker_refuse(struct txn *t, struct shm_resil_group *g, enum resil_reject by, uint32_t retry_after)
{
	atomic_fetch_add_explicit(&g->rejected[by], 1, memory_order_relaxed);
	t->bk.acted = by == RESIL_REJECT_BREAKER ? "breaker_open" : "upstream_limit";
	breaker_retry_after = retry_after ? retry_after : 1;
	return by == RESIL_REJECT_BREAKER ? WEIR_ERR(BREAKER_OPEN) : WEIR_ERR(UPSTREAM_LIMIT);
}

/* The breaker's verdict for a new request: 0 to let it through (*trial
 * set for a half-open trial), 1 while open (*retry_after: seconds). */
static int breaker_closed_to(const struct route_upstream *up, struct shm_resil_group *g, uint64_t now, int *trial,
                             uint32_t *retry_after)
{
	uint64_t w = atomic_load_explicit(&g->state, memory_order_relaxed);

	for (;;) {
		switch (BREAKER_STATE(w)) {
		case BREAKER_CLOSED: return 0;
		case BREAKER_OPEN:
			if (now < BREAKER_UNTIL(w)) {
				*retry_after = (uint32_t)((BREAKER_UNTIL(w) - now + 999) / 1000);
				return 1;
			}
			w = breaker_half_open(up, g, w);
			continue;
		default: /* half-open: exactly half_open_trials, node-wide */
			if (HALF_LET(w) >= up->resil.breaker.half_open_trials) {
				*retry_after = 1;
				return 1;
			}
			if (atomic_compare_exchange_weak(&g->state, &w, HALF_WORD(HALF_LET(w) + 1, HALF_OK(w)))) {
				*trial = 1;
				return 0;
			}
			continue;
		}
	}
}

/* The cap on requests in flight to group <up>: the least of
 * limits.max_requests, max_connections and the adaptive_concurrency limit
 * the master published (one relaxed load); *by_ac is set when the last is
 * the binding one. 0: no cap. */
static uint32_t breaker_cap(const struct route_upstream *up, struct shm_resil_group *g, int *by_ac)
{
	const struct config_uplimits *lc = &up->resil.limits;
	uint32_t cap = lc->max_requests, a;

	if (lc->max_connections && (!cap || lc->max_connections < cap))
		cap = lc->max_connections;
	*by_ac = 0;
	if (up->resil.adaptive.on) {
		a = atomic_load_explicit(&g->ac_limit, memory_order_relaxed);
		if (!a)
			a = up->resil.adaptive.initial_limit; /* before the master's first window */
		if (!cap || a < cap) {
			cap = a;
			*by_ac = 1;
		}
	}
	return cap;
}

/* The group's queue: limits' when it sets max_pending, else
 * adaptive_concurrency's (which always queues briefly). */
static uint32_t breaker_max_pending(const struct route_upstream *up)
{
	if (up->resil.limits.max_pending || !up->resil.adaptive.on)
		return up->resil.limits.max_pending;
	return up->resil.adaptive.max_pending;
}

static uint32_t breaker_queue_timeout(const struct route_upstream *up)
{
	if (up->resil.limits.max_pending || !up->resil.adaptive.on)
		return up->resil.limits.queue_timeout;
	return up->resil.adaptive.queue_timeout;
}

/* Has a server of <up> room under its per-server cap <scap>? A look, not
 * a claim: the pick takes the place (breaker_pick). */
static int breaker_server_room(const struct route_table *t, const struct route_upstream *up, uint32_t scap)
{
	for (uint32_t i = 0; i < up->nservers; i++)
		if (atomic_load_explicit(&wk.seg->resil[route_servers(t)[up->first_server + i].stat].active,
		                         memory_order_relaxed) < scap)
			return 1;
	return 0;
}

static void breaker_server_give_back(struct txn *t)
{
	if (!t->bk.server_plus1)
		return;
	atomic_fetch_sub_explicit(&wk.seg->resil[t->bk.server_plus1 - 1u].active, 1, memory_order_relaxed);
	t->bk.server_plus1 = 0;
}

int breaker_pick(struct txn *t, const struct route_upstream *up)
{
	uint32_t scap = breaker_server_cap(up);
	uint64_t tried = t->tried;

	breaker_server_give_back(t); /* a retry's earlier server */
	t->bk.all_full = 0;
	for (;;) {
		int s = upstream_pick(t->table, up, tried);
		uint16_t st;
		_Atomic uint32_t *a;
		uint32_t v;

		if (s < 0) {
			t->bk.all_full = tried != t->tried;
			return -1;
		}
		st = route_servers(t->table)[s].stat;
		a = &wk.seg->resil[st].active;
		v = atomic_load_explicit(a, memory_order_relaxed);
		while (v < scap)
			if (atomic_compare_exchange_weak_explicit(a, &v, v + 1, memory_order_relaxed, memory_order_relaxed)) {
				t->bk.server_plus1 = (uint16_t)(st + 1u);
				return s;
			}
		/* full: passed by, for this pick only (not a try: t->tried
		 * is the retry's, and a full server failed nothing) */
		atomic_fetch_add_explicit(&wk.seg->resil[st].full_skips, 1, memory_order_relaxed);
		tried |= 1ull << ((uint32_t)s - up->first_server);
	}
}

/* This worker's queue of requests waiting for a place, oldest first, and
 * the timer that polls for places while it is not empty: places free up
 * in any worker, and one look at a shared count every 2 ms costs less
 * than telling every worker of every release. */
static struct txn *bq_head, *bq_tail;
static ev_timer bq_timer;
#define BREAKER_QUEUE_POLL 0.002

static void breaker_unqueue(struct txn *t)
{
	struct txn **p = &bq_head, *prev = NULL;

	for (; *p && *p != t; p = &(*p)->bk.qnext)
		prev = *p;
	if (!*p)
		return;
	*p = t->bk.qnext;
	if (bq_tail == t)
		bq_tail = prev;
	t->bk.qnext = NULL;
	t->bk.queued = 0;
	atomic_fetch_sub_explicit(&breaker_group(t->bk.group_plus1 - 1u)->pending, 1, memory_order_relaxed);
	if (!bq_head)
		ev_timer_stop(wk.loop, &bq_timer);
}

/* A place, if the group has one now: the count goes up only when it was
 * under the cap, so waiting requests never push it over. */
static int breaker_take_place(struct shm_resil_group *g, uint32_t cap)
{
	uint64_t a = atomic_load_explicit(&g->active, memory_order_relaxed);

	while (!cap || a < cap) /* 0: only the servers are capped */
		if (atomic_compare_exchange_weak_explicit(&g->active, &a, a + 1, memory_order_relaxed,
		                                          memory_order_relaxed))
			return 1;
	return 0;
}

static void breaker_queue_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ev_tstamp now = ev_now(loop);
	(void)w;
	(void)revents;

	for (struct txn *t = bq_head, *next; t; t = next) {
		const struct route_upstream *up = breaker_upstream(t);
		struct shm_resil_group *g = breaker_group(t->bk.group_plus1 - 1u);
		int by_ac;
		uint32_t cap = breaker_cap(up, g, &by_ac);

		next = t->bk.qnext;
		if ((!breaker_server_cap(up) || breaker_server_room(t->table, up, breaker_server_cap(up))) &&
		    breaker_take_place(g, cap)) {
			breaker_unqueue(t);
			t->bk.active = 1;
			txn_upstream_go(t);
		} else if (now - t->bk.queued_at >= breaker_queue_timeout(up) / 1000.0) {
			breaker_unqueue(t);
			atomic_fetch_add_explicit(&g->rejected[RESIL_REJECT_QUEUE_TIMEOUT], 1, memory_order_relaxed);
			t->bk.acted = "queue_timeout";
			t->bk.judged = 0; /* our own answer: not the group's error */
			if (by_ac) { /* the adaptive limit's 503 asks the client back (Retry-After) */
				atomic_fetch_add_explicit(&g->ac_refused, 1, memory_order_relaxed);
				t->bk.acted = "adaptive_concurrency";
				breaker_retry_after = 1;
				txn_fail(t, WEIR_ERR(ADAPTIVE_CONCURRENCY));
			} else {
				txn_fail(t, WEIR_ERR(QUEUE_TIMEOUT));
			}
		}
	}
}

/* Queues <t>; <again>: it waited before, and its queue_timeout runs from
 * then, not anew. */
static void breaker_enqueue(struct txn *t, int again)
{
	if (!bq_head) {
		ev_timer_init(&bq_timer, breaker_queue_cb, BREAKER_QUEUE_POLL, BREAKER_QUEUE_POLL);
		ev_timer_start(wk.loop, &bq_timer);
	}
	t->bk.queued = 1;
	if (!again)
		t->bk.queued_at = ev_now(wk.loop);
	t->bk.qnext = NULL;
	if (bq_tail)
		bq_tail->bk.qnext = t;
	else
		bq_head = t;
	bq_tail = t;
	txn_wait_arm(t); /* its client's close gives the place up */
}

int breaker_admit(struct txn *t)
{
	const struct route_upstream *up = breaker_upstream(t);
	const struct config_uplimits *lc = &up->resil.limits;
	struct shm_resil_group *g;
	uint64_t now;
	uint32_t cap, pending, retry_after = 0;
	int trial = 0, by_ac, over;

	if (up->resil_group == RESIL_GROUP_NONE)
		return 0;
	g = breaker_group(up->resil_group);
	now = resil_now_ms();
	if (up->resil.breaker.on && breaker_closed_to(up, g, now, &trial, &retry_after)) {
		int backup = up->resil.breaker.backup_index;

		if (backup >= 0 && !t->bk.upstream_plus1) {
			/* sent to the backup group, under its own controls */
			atomic_fetch_add_explicit(&g->rejected[RESIL_REJECT_BREAKER], 1, memory_order_relaxed);
			t->bk.upstream_plus1 = (uint16_t)(backup + 1);
			t->bk.acted = "breaker_backup";
			return breaker_admit(t);
		}
		return breaker_refuse(t, g, RESIL_REJECT_BREAKER, retry_after);
	}
	t->bk.group_plus1 = (uint16_t)(up->resil_group + 1);
	t->bk.trial = (uint8_t)trial;
	t->bk.judged = up->resil.breaker.on;
	if (!lc->max_requests && !lc->max_connections && !up->resil.breaker.pool_percent && !up->resil.retry.on &&
	    !up->resil.adaptive.on && !breaker_server_cap(up))
		return 0; /* nothing needs the count in flight (the retry budget does) */
	/* a limit is one count per group: this add, and the subtract in
	 * breaker_release(), are the locked instructions a request pays */
	uint64_t a = atomic_fetch_add_explicit(&g->active, 1, memory_order_relaxed) + 1;

	t->bk.active = 1;
	cap = breaker_cap(up, g, &by_ac);
	pending = breaker_max_pending(up);
	/* every server full counts as the group full: the same queue, the
	 * same 503 (a full server is passed by in breaker_pick) */
	over = (cap && a > cap) || (breaker_server_cap(up) && !breaker_server_room(t->table, up, breaker_server_cap(up)));
	if (over && cap && a <= cap)
		by_ac = 0;
	if (over && pending) {
		/* wait for a place, as HAProxy queues: one count node-wide, the
		 * queue itself is this worker's (breaker_queue_cb) */
		atomic_fetch_sub_explicit(&g->active, 1, memory_order_relaxed);
		t->bk.active = 0;
		if (atomic_fetch_add_explicit(&g->pending, 1, memory_order_relaxed) < pending) {
			breaker_enqueue(t, 0);
			return WEIR_EAGAIN;
		}
		atomic_fetch_sub_explicit(&g->pending, 1, memory_order_relaxed);
	}
	if (over) {
		breaker_release(t); /* gives back the place, and a trial */
		t->bk.group_plus1 = 0;
		t->bk.judged = 0;
		if (by_ac) {
			atomic_fetch_add_explicit(&g->ac_refused, 1, memory_order_relaxed);
			breaker_refuse(t, g, RESIL_REJECT_LIMIT, 1);
			t->bk.acted = "adaptive_concurrency";
			return WEIR_ERR(ADAPTIVE_CONCURRENCY);
		}
		return breaker_refuse(t, g, RESIL_REJECT_LIMIT, 1);
	}
	if (up->resil.breaker.pool_percent && a * 100 > (uint64_t)up->resil.breaker.pool_percent * lc->max_connections)
		breaker_trip(up, g, BREAKER_WORD(0, BREAKER_CLOSED), BREAKER_TRIP_POOL, now);
	return 0;
}

int breaker_pick_missed(struct txn *t)
{
	const struct route_upstream *up = breaker_upstream(t);
	struct shm_resil_group *g;
	uint32_t pending = breaker_max_pending(up);

	if (!t->bk.all_full || !t->bk.group_plus1)
		return 0;
	t->bk.all_full = 0;
	g = breaker_group(t->bk.group_plus1 - 1u);
	if (pending) {
		/* as breaker_admit() queues: the group's place is given back
		 * while it waits, taken again by breaker_queue_cb() */
		if (t->bk.active) {
			t->bk.active = 0;
			atomic_fetch_sub_explicit(&g->active, 1, memory_order_relaxed);
		}
		if (atomic_fetch_add_explicit(&g->pending, 1, memory_order_relaxed) < pending) {
			breaker_enqueue(t, t->bk.queued_at != 0);
			return WEIR_EAGAIN;
		}
		atomic_fetch_sub_explicit(&g->pending, 1, memory_order_relaxed);
	}
	breaker_release(t);
	t->bk.group_plus1 = 0;
	t->bk.judged = 0;
	return breaker_refuse(t, g, RESIL_REJECT_LIMIT, 1);
}

/* A trial answered: well (close once all did) or not (open again). */
static void breaker_trial_done(const struct route_upstream *up, struct shm_resil_group *g, int good, uint64_t now)
{
	uint64_t w = atomic_load(&g->state);

	while (BREAKER_STATE(w) == BREAKER_HALF_OPEN) {
		if (!good) {
			breaker_trip(up, g, w, BREAKER_TRIP_TRIAL, now);
			return;
		}
		if (HALF_OK(w) + 1 < up->resil.breaker.half_open_trials) {
			if (atomic_compare_exchange_weak(&g->state, &w, HALF_WORD(HALF_LET(w), HALF_OK(w) + 1)))
				return;
			continue;
		}
		breaker_window_clear(g);
		if (atomic_compare_exchange_weak(&g->state, &w, BREAKER_WORD(0, BREAKER_CLOSED))) {
			atomic_store(&g->opens, 0);
			atomic_fetch_add_explicit(&g->transitions[BREAKER_CLOSED], 1, memory_order_relaxed);
			log_notice("upstream %s: breaker closed: %u trial requests answered well", up->name,
			           up->resil.breaker.half_open_trials);
			return;
		}
	}
}

void breaker_answer(struct txn *t, int status)
{
	const struct route_upstream *up;
	const struct config_breaker *bc;
	struct shm_resil_group *g;
	uint64_t now, ans, err, slow;
	uint32_t sec;
	int bad, late;

	if (!t->bk.judged || t->bk.done)
		return;
	t->bk.done = 1;
	up = breaker_upstream(t);
	bc = &up->resil.breaker;
	g = breaker_group(t->bk.group_plus1 - 1u);
	now = resil_now_ms();
	bad = status == 0 || status >= 500;
	late = bc->latency_p99 && t->up_start > 0 && (ev_now(wk.loop) - t->up_start) * 1000.0 > bc->latency_p99;
	if (t->bk.trial) {
		t->bk.trial = 0;
		breaker_trial_done(up, g, !bad && !late, now);
		return;
	}
	sec = (uint32_t)(now / 1000);
	breaker_window_add(g, sec, bad, late);
	if (!(bad && bc->error_percent) && !late)
		return;
	uint64_t w = atomic_load_explicit(&g->state, memory_order_relaxed);

	if (BREAKER_STATE(w) != BREAKER_CLOSED)
		return;
	breaker_window_sum(g, sec, bc->window / 1000, &ans, &err, &slow);
	if (ans < bc->min_requests)
		return;
	if (bc->error_percent && err * 100 > (uint64_t)bc->error_percent * ans)
		breaker_trip(up, g, w, BREAKER_TRIP_ERRORS, now);
	else if (bc->latency_p99 && slow * 100 > ans)
		breaker_trip(up, g, w, BREAKER_TRIP_LATENCY, now);
}

void breaker_release(struct txn *t)
{
	struct shm_resil_group *g;

	breaker_server_give_back(t);
	if (!t->bk.group_plus1)
		return;
	g = breaker_group(t->bk.group_plus1 - 1u);
	if (t->bk.queued)
		breaker_unqueue(t); /* the client left, or the worker stops */
	if (t->bk.active) {
		t->bk.active = 0;
		atomic_fetch_sub_explicit(&g->active, 1, memory_order_relaxed);
	}
	if (t->bk.trial) {
		/* let through and never answered (the client left): its place
		 * goes to another trial */
		uint64_t w = atomic_load(&g->state);

		t->bk.trial = 0;
		while (BREAKER_STATE(w) == BREAKER_HALF_OPEN && HALF_LET(w) > 0 &&
		       !atomic_compare_exchange_weak(&g->state, &w, HALF_WORD(HALF_LET(w) - 1, HALF_OK(w))))
			;
	}
}

const char *breaker_acted(const struct txn *t)
{
	return t->bk.acted ? t->bk.acted : t->rt.retries ? "retried" : NULL;
}

uint32_t breaker_retry_secs(void)
{
	return breaker_retry_after > 60 ? 60 : breaker_retry_after;
}
