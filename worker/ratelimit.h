/*
 * ratelimit.h: a route's rate limits, applied to one request.
 *
 * Principle: one call once the route is known, before a server is
 * picked: it makes each limit's key from the request, takes from every
 * limit at once or from none (shm/limit.h), and either lets the request
 * go on, holds it on a timer (mode = "delay": never blocking, the worker
 * serves others meanwhile) or answers it itself (429, Retry-After and the
 * RateLimit headers). Concurrency a request holds is given back in
 * txn_free(), the one place every request ends, however it ends.
 */
#ifndef WEIR_WORKER_RATELIMIT_H
#define WEIR_WORKER_RATELIMIT_H

#include <ev.h>
#include <stdint.h>

#include "common/config.h"

struct txn;
struct conn;
struct limit_entry;

struct ratelimit_txn {
	ev_timer delay;  /* mode = "delay": the request goes on when it fires */
	uint8_t waiting; /* the timer is running */
	uint8_t nheld;
	struct limit_entry *held[CONFIG_ROUTE_LIMITS]; /* concurrency taken */
};

enum { RATELIMIT_CONTINUE, RATELIMIT_WAIT, RATELIMIT_ANSWERED };

/* Applies t->route's limits to <t>. RATELIMIT_CONTINUE: go on now;
 * RATELIMIT_WAIT: txn_continue() is called when the delay ends;
 * RATELIMIT_ANSWERED: refused and answered (t is gone or answering). */
int ratelimit_check(struct txn *t);

/* The end of a request: stops a delay, gives back concurrency. */
void ratelimit_release(struct txn *t);
#define ratelimit_end(t)                                                                                               \
	do {                                                                                                           \
		if ((t)->rl.nheld || (t)->rl.waiting)                                                                  \
			ratelimit_release(t);                                                                          \
	} while (0)

/*
 * The client address a client_ip key is made from, in 16 bytes (IPv4 as
 * ::ffff:a.b.c.d); returns 4 or 6, 0 if there is none: the request's
 * client as worker/realip.h resolves it (the connection's peer, or the
 * client X-Forwarded-For names through trusted_proxies).
 */
int ratelimit_client_addr(const struct txn *t, uint8_t out[16]);

#endif
