/*
 * retry.h: sending a request again, to another server, when the group's
 * `retry` says so.
 *
 * Principle: a try that fails in a way `on` names (connect-failure,
 * reset: closed before any response byte, timeout: no response head in
 * per_try_timeout or upstream_read, or a status code) is tried again on
 * a server not tried yet (any server once all were), at most `attempts`
 * tries in all. A request is tried again only if every byte it sent can
 * be sent again (t->replayable) and, once bytes reached the server, only
 * if it is idempotent or its body was read whole before the first try
 * (request buffering). Retries after a connect failure go at once (no
 * byte was sent: another server is the whole remedy); the others wait a
 * full-jitter backoff (uniform in 0 .. min(max_backoff, backoff x 2^n))
 * on an ev_timer. A node-wide budget stops a retry storm: retries in
 * flight in the group at most budget_percent of its requests in flight,
 * or budget_min, whichever is more (and at most limits.max_retries when
 * the group has `limits`). When no retry is left, the last try's outcome
 * stands: its response when it answered (a retried status is only
 * retried while a retry is possible), 502 or 504 when it did not.
 *
 * Costs, only in a group with `retry`: the requests-in-flight count the
 * budget needs (one locked add and subtract per request, breaker.h), and
 * per retry one add and subtract of the retries in flight.
 */
#ifndef WEIR_WORKER_RETRY_H
#define WEIR_WORKER_RETRY_H

#include <ev.h>
#include <stdint.h>

struct txn;

/* A request's retry state (in struct txn, zeroed with it). */
struct retry_txn {
	ev_timer timer;  /* the backoff */
	uint8_t retries; /* retries made */
	uint8_t counted; /* counted in the group's retries in flight */
	uint8_t armed;   /* the backoff timer runs */
	uint8_t connect; /* txn_connect() may pick again without asking (a retry just granted) */
	int last_rc;     /* what the last try failed with */
};

/* May <t>, whose try failed for <why> (a RETRY_ON_* bit, or 0 with
 * <status> for a response), be tried again? Counts the verdict and, when
 * yes, the retry (attempted, in flight). <sent>: bytes of it reached the
 * server. */
int retry_wanted(struct txn *t, unsigned why, int status, int sent);

/* Starts the backoff of <t>, whose upstream is detached; the timer sends
 * it again (txn_retry_send) or fails it with <rc>. */
void retry_schedule(struct txn *t, int rc);

/* txn_connect() is about to pick again after a connect failure: 1 if it
 * may (a group without `retry` always may: every server is tried). */
int retry_connect_allowed(struct txn *t);

/* <t> ended with <status>: a retried request that got an answer below
 * 500 counts as succeeded. */
void retry_end(struct txn *t, int status);

/* <t> is freed: stops its backoff, gives back its place in the budget. */
void retry_release(struct txn *t);

/* The deadline for the response head of the current try: <at>, or the
 * try's own per_try_timeout when that comes first. */
double retry_try_deadline(const struct txn *t, double at);

#endif
