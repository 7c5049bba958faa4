
#include "worker/core/core.h"
#include <unistd.h>

#include <strings.h>
#include <time.h>

#include "common/http_date.h"
#include "common/log.h"
#include "shm/shm.h"

/* The group state of <t>, or NULL when it has none. */
static struct shm_resil_group *retry_group(const struct txn *t)
{
	return t->bk.group_plus1 ? &wk.seg->resil_groups.g[t->bk.group_plus1 - 1u] : NULL;
}

static void retry_count(struct shm_resil_group *g, enum retry_result r)
{
	if (g)
		atomic_fetch_add_explicit(&g->retry_results[r], 1, memory_order_relaxed);
}

/* xorshift64*: a worker-local generator for the jitter (no lock, no
 * system call); seeded from the clock and the pid at first use. */
static uint64_t retry_random(void)
{
	static uint64_t x;

	if (!x)
		x = (resil_now_ms() << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return x * 0x2545f4914f6cdd1dull;
}

/* Is a retry within the budget and max_retries? Takes its place if so. */
static int retry_take_place(struct txn *t, struct shm_resil_group *g, const struct route_upstream *up)
{
	const struct config_retry *rc = &up->resil.retry;
	uint64_t active, r, allowed;

	if (!g || t->rt.counted)
		return 1; /* no group state (out of room); or already one of the retries in flight */
	r = atomic_fetch_add_explicit(&g->retries, 1, memory_order_relaxed) + 1;
	if (up->resil.limits.on && r > up->resil.limits.max_retries) {
		atomic_fetch_sub_explicit(&g->retries, 1, memory_order_relaxed);
		retry_count(g, RETRY_RESULT_LIMIT);
		t->bk.acted = "retry_limit";
		return 0;
	}
	active = atomic_load_explicit(&g->active, memory_order_relaxed);
	allowed = active * rc->budget_percent / 100;
	if (allowed < rc->budget_min)
		allowed = rc->budget_min;
	if (r > allowed) {
		atomic_fetch_sub_explicit(&g->retries, 1, memory_order_relaxed);
		retry_count(g, RETRY_RESULT_BUDGET);
		t->bk.acted = "retry_budget";
		return 0;
	}
	t->rt.counted = 1;
	return 1;
}

int retry_wanted(struct txn *t, unsigned why, int status, int sent)
{
	const struct route_upstream *up = breaker_upstream(t);
	const struct config_retry *rc = &up->resil.retry;
	struct shm_resil_group *g = retry_group(t);

	if (!rc->on || (why ? !(rc->when & why) : !config_retry_status(rc, status)))
		return 0;
	if (t->rt.retries + 1u >= rc->attempts) {
		retry_count(g, RETRY_RESULT_EXHAUSTED);
		return 0;
	}
	if (!t->replayable || (sent && !t->body_buffered && !txn_method_idempotent(t))) {
		retry_count(g, RETRY_RESULT_UNSAFE);
		return 0;
	}
	if (!retry_take_place(t, g, up))
		return 0;
	t->rt.retries++;
	retry_count(g, RETRY_RESULT_ATTEMPTED);
	SHM_ADD(wk.cnt, upstream_retries, 1);
	uint64_t all = up->nservers < 64 ? (1ull << up->nservers) - 1 : ~0ull;

	if ((t->tried & all) == all)
		t->tried = 0; /* every server was tried: any may take the next try */
	return 1;
}

/* The wait <t>'s response asks for in Retry-After, in seconds; -1 for
 * none or one that is neither seconds nor an HTTP-date (the backoff then
 * stands, as if it had none). Only retried answers are read. */
static int64_t retry_after_of(const struct txn *t)
{
	for (uint32_t i = 0; i < t->resp.hl.n; i++) {
		const struct hdr *h = &t->resp.hl.v[i];

		if (h->name_len == 11 && !strncasecmp(h->name, "retry-after", 11))
			return http_retry_after(h->value, h->value_len, (int64_t)time(NULL));
	}
	return -1;
}

int retry_answer_wanted(struct txn *t)
{
	const struct config_retry *rc = &breaker_upstream(t)->resil.retry;
	int64_t s = -1;

	/* every answer comes here: one not retried leaves at once, as it
	 * left retry_wanted() (the cost of a group without retry is kept) */
	if (!rc->on || !config_retry_status(rc, t->resp.status))
		return 0;
	if (rc->retry_after_max)
		s = retry_after_of(t);
	if (s >= 0 && (uint64_t)s * 1000u > rc->retry_after_max) {
		/* the server asks for longer than we would hold the client:
		 * its answer is the best we have, and it says when to retry */
		retry_count(retry_group(t), RETRY_RESULT_AFTER_LONG);
		return 0;
	}
	if (!retry_wanted(t, 0, t->resp.status, 1))
		return 0;
	if (s >= 0) {
		t->rt.after = (uint32_t)s * 1000u + 1u;
		retry_count(retry_group(t), RETRY_RESULT_AFTER);
	}
	return 1;
}

static void retry_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct txn *t = w->data;
	(void)loop;
	(void)revents;

	t->rt.armed = 0;
	t->rt.connect = t->tried != 0; /* granted already: txn_connect() asks only when tried is set */
	txn_retry_send(t, t->rt.last_rc);
}

void retry_schedule(struct txn *t, int rc)
{
	const struct config_retry *c = &breaker_upstream(t)->resil.retry;
	uint64_t cap = (uint64_t)c->backoff << (t->rt.retries - 1u < 16 ? t->rt.retries - 1u : 16);
	double wait;

	if (cap > c->max_backoff)
		cap = c->max_backoff;
	wait = (double)(retry_random() % (cap + 1)) / 1000.0;
	if (t->rt.after) { /* the upstream said when: no jitter of ours */
		wait = (double)(t->rt.after - 1u) / 1000.0;
		t->rt.after = 0;
	}
	t->rt.last_rc = rc;
	ev_timer_init(&t->rt.timer, retry_timer_cb, wait, 0.);
	t->rt.timer.data = t;
	ev_timer_start(wk.loop, &t->rt.timer);
	t->rt.armed = 1;
	txn_wait_arm(t); /* its client's close cancels the retry */
}

int retry_connect_allowed(struct txn *t)
{
	if (!breaker_upstream(t)->resil.retry.on)
		return 1;
	if (t->rt.connect) {
		t->rt.connect = 0;
		return 1;
	}
	return retry_wanted(t, RETRY_ON_CONNECT, 0, 0);
}

void retry_end(struct txn *t, int status)
{
	if (t->rt.retries && status && status < 500)
		retry_count(retry_group(t), RETRY_RESULT_SUCCEEDED);
}

void retry_release(struct txn *t)
{
	struct shm_resil_group *g = retry_group(t);

	if (t->rt.armed) {
		ev_timer_stop(wk.loop, &t->rt.timer);
		t->rt.armed = 0;
	}
	if (t->rt.counted && g)
		atomic_fetch_sub_explicit(&g->retries, 1, memory_order_relaxed);
	t->rt.counted = 0;
}

double retry_try_deadline(const struct txn *t, double at)
{
	const struct config_retry *rc = &breaker_upstream(t)->resil.retry;
	double end;

	if (!rc->on || !rc->per_try_timeout || t->resp_started || t->up_start <= 0)
		return at;
	end = t->up_start + rc->per_try_timeout / 1000.0;
	return end < at ? end : at;
}
