/*
 * upstream.h: upstream servers and connections, per worker.
 *
 * Principle: a worker keeps its own keep-alive pool per upstream server
 * (no sharing, no locks) and picks servers with smooth weighted round robin
 * (the sequence nginx uses: for weights 5,1,1 it gives a a b a c a a, not
 * a a a a a b c). Passive health, per worker: a server whose connects fail
 * or time out max_fails times in a row (each within fail_timeout of the
 * one before) is skipped for fail_timeout; a connect that succeeds resets
 * the count; an error of our own (no ephemeral port, no descriptor, no
 * kernel memory) never counts against a server. When every server of a
 * group is marked down, they are tried anyway (panic): a guess that may be
 * stale beats a certain 503. Servers an admin set to drain or down stay out.
 *
 * Per-server state is keyed by identity (group name and address), not by
 * place in a table: upstream_state.c.
 *
 * A pooled connection keeps its read watcher armed: if the server closes
 * it or sends anything while it is idle, it leaves the pool at once (over
 * TLS, any readability: a close_notify or a record nobody asked for).
 */
#ifndef WEIR_WORKER_UPSTREAM_H
#define WEIR_WORKER_UPSTREAM_H

#include <errno.h>

#include <ev.h>

#include <openssl/base.h>

#include "worker/worker.h"

struct txn;

struct upconn {
	ev_io io;
	ev_timer timer;
	ev_tstamp deadline;
	struct upconn *next;  /* pool link */
	struct txn *txn;      /* NULL while pooled */
	struct buf *in;       /* response bytes */
	struct up_server *srv; /* its server, by identity (never a table index) */
	/* not ready for the request yet: the events the connect (EV_WRITE) or
	 * the TLS handshake waits for; 0 once ready */
	uint8_t connecting;
	uint8_t handshaking;  /* connected, TLS handshake under way */
	uint8_t tls_wants;    /* EV_WRITE when SSL_read needs a writable socket */
	uint8_t readable;
	uint8_t reused;       /* taken from the pool for this request */
	SSL *ssl;             /* TLS groups only (tls_client.h), else NULL */
};

/* The state of server <si> of table <t>, which this worker has synced (every
 * table a request holds was: txn_start). */
static inline struct up_server *upstream_state(const struct route_table *t, uint32_t si)
{
	return &wk.servers[wk.server_map[t - wk.seg->gens][si]];
}

/* Is errno <err> of socket() or connect() our own trouble rather than the
 * server's? Out of ephemeral ports or descriptors, out of kernel memory:
 * another server would fare no better, and marking this one down would
 * take a healthy server out. */
static inline int upstream_errno_local(int err)
{
	return err == EADDRNOTAVAIL || err == EAGAIN || err == ENOBUFS || err == ENOMEM || err == EMFILE ||
	       err == ENFILE;
}

/*
 * Picks a server of upstream group <up> not in <tried> (bitmap over the
 * group's servers, at most 64 looked at). Returns its index in the table's
 * servers, or -1 if no untried server is up by admin state. When every such
 * server is marked down, picks among them anyway (panic: counted and logged).
 */
int upstream_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried);

/* The weight server <si> of <t> is picked with (the admin override or the
 * configured one), or 0 when it may not be picked now: not up by admin
 * state, ejected at <eject_now> (ms; 0: ejections not judged), or marked
 * down or down by health checks (then *<marked> is set) unless <panic>. */
uint32_t upstream_server_usable(const struct route_table *t, uint32_t si, int panic, uint64_t eject_now, int *marked);

/* A pooled connection to server <si> of <t>, or NULL. */
struct upconn *upstream_pool_get(const struct route_table *t, uint32_t si);

/* 0 if pooled connection <u>, just taken, already shows a close or bytes
 * nobody asked for that its watcher has not reported yet, else 1. One
 * system call: for requests that must not be sent on a dying connection. */
int upstream_pool_alive(struct upconn *u);

/* Opens a new non-blocking connection to <server>, with a client SSL
 * attached when its group has TLS (the handshake starts once connected:
 * txn.c). Returns it (connect possibly still in progress) or NULL with *rc
 * set (refused: the server is marked down; no memory; upstream_tls when
 * this worker has no TLS context for the group; local_connect_error when the
 * fault is ours, not the server's: upstream_errno_local). */
struct upconn *upstream_connect(const struct route_table *t, uint32_t server, int *rc);

/* Gives <u> back to its server's pool, or closes it if the pool is full. */
void upstream_release(struct upconn *u);

/* Closes <u> and frees it. */
void upstream_close(struct upconn *u);

/* A connect to (or TLS handshake with) server <si> of <t> failed or timed
 * out: counts it, and marks the server down for its group's fail_timeout
 * once max_fails failures came in a row (never with max_fails 0). */
void upstream_fail(const struct route_table *t, uint32_t si);

/* <u> is connected (and its TLS handshake done): its server answers, so
 * its failures are forgotten and a mark (a panic pick reached it) lifted. */
static inline void upstream_connected(struct upconn *u)
{
	u->srv->fails = 0;
	u->srv->down_until = 0;
}

/* Sets the deadline of <u>, re-arming its timer if it moves earlier. */
void upstream_set_deadline(struct upconn *u, ev_tstamp at);

/* A table generation this worker has not met yet: maps its servers to
 * their states (new ones start fresh; those of servers that stay keep
 * pool, WRR weight, failures and TLS session), closes the pools of servers
 * that left it and frees the states no table in use can reach. */
void upstream_sync_table(const struct route_table *t);

/* Once a second: closes the pooled idle connections of servers an admin
 * set to drain or down, so a server taken out is left alone within a
 * second instead of after the keep-alive timeout. */
void upstream_admin_sweep(void);

/* Closes every pooled connection (shutdown). */
void upstream_close_pools(void);

/* Frees every server state and its TLS session (worker exit). */
void upstream_free_states(void);

#endif
