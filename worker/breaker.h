/*
 * breaker.h: an upstream group's limits (requests and connections in
 * flight, node-wide) and its circuit breaker (closed, open, half-open,
 * node-wide), checked once per request before a server is picked.
 *
 * Principle: the counts live in the shared segment per group name
 * (shm/resil.h), so a limit is one limit for the node and a breaker opens
 * for every worker at once, and both survive reloads and upgrades. The
 * breaker judges a sliding window of 1 s buckets, one word per bucket
 * (answers, errors, slow answers) so an answer costs one locked add; it
 * trips on the error share, on the pool share in use, or on p99 latency
 * (p99 past L means more than 1 % of answers slower than L, so it needs
 * no histogram, only a count of slow answers). Open, it answers 503 with
 * Retry-After (or sends to its `backup` group) until its open time ends;
 * then it lets exactly half_open_trials requests through, counted in the
 * state word itself so the number is exact node-wide; all of them
 * answered well close it, one failure reopens it for twice as long, up to
 * max_open_time.
 *
 * Costs, only in a group that has them: `limits` (or pool_percent) one
 * locked add and one subtract per request on the group's own line;
 * `breaker` one relaxed load of its state word per request and one locked
 * add per answer; the window is summed only on an error or a slow answer.
 */
#ifndef WEIR_WORKER_BREAKER_H
#define WEIR_WORKER_BREAKER_H

#include <stdint.h>

#include "shm/route.h"

struct txn;

/* A request's part in the controls (in struct txn, zeroed with it). */
struct breaker_txn {
	uint16_t group_plus1;    /* shm group entry counted into, + 1; 0: none */
	uint16_t upstream_plus1; /* the group sent to instead of the route's (backup), + 1; 0: the route's */
	uint8_t active;          /* counted in the group's requests in flight */
	uint8_t judged;          /* its answer goes into the breaker's window */
	uint8_t trial;           /* a half-open trial */
	uint8_t done;            /* its outcome was recorded */
	uint8_t queued;          /* waiting for a place (limits.max_pending) */
	struct txn *qnext;       /* the worker's queue */
	double queued_at;
	const char *acted; /* the control that acted on it, for the access log; NULL: none */
};

/* The group <t> is sent to: its route's, or the backup its breaker chose. */
const struct route_upstream *breaker_upstream(const struct txn *t);

/* Before the first pick: admits <t> (0), queues it (WEIR_EAGAIN: it
 * waits for a place, then txn_upstream_go() or txn_fail() follows), or
 * returns the error to answer with (WEIR_EBREAKER_OPEN: 503 with
 * Retry-After; WEIR_EUPSTREAM_LIMIT: 503). May switch the request to the
 * breaker's backup group. */
int breaker_admit(struct txn *t);

/* The request ended with <status> (0: cut after the answer started):
 * counts it into the window, judges a trial. */
void breaker_answer(struct txn *t, int status);

/* The request is freed: gives back its place in flight (and a trial
 * that never got an answer). */
void breaker_release(struct txn *t);

/* The control that acted on <t>, for the access log ("breaker_open",
 * "breaker_backup", "upstream_limit", "queue_timeout", "retry_budget", "retry_limit",
 * "retried"), or NULL when none did. */
const char *breaker_acted(const struct txn *t);

/* The canned 503 for an open breaker, with the Retry-After of the last
 * refusal made by this worker (conn.c writes it at once). */
const char *breaker_canned(int close, uint32_t *len);

#endif
