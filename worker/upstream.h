/*
 * upstream.h: upstream servers and connections, per worker.
 *
 * Principle: a worker keeps its own keep-alive pool per upstream server
 * (no sharing, no locks) and picks servers with smooth weighted round robin
 * (the sequence nginx uses: for weights 5,1,1 it gives a a b a c a a, not
 * a a a a a b c). A server whose connect fails or times out is skipped for
 * UPSTREAM_FAIL_SKIP seconds by this worker (passive health).
 *
 * A pooled connection keeps its read watcher armed: if the server closes
 * it or sends anything while it is idle, it leaves the pool at once (over
 * TLS, any readability: a close_notify or a record nobody asked for).
 */
#ifndef WEIR_WORKER_UPSTREAM_H
#define WEIR_WORKER_UPSTREAM_H

#include <ev.h>

#include <openssl/base.h>

#include "worker/worker.h"

#define UPSTREAM_FAIL_SKIP 10.0

struct txn;

struct upconn {
	ev_io io;
	ev_timer timer;
	ev_tstamp deadline;
	struct upconn *next;  /* pool link */
	struct txn *txn;      /* NULL while pooled */
	struct buf *in;       /* response bytes */
	uint32_t server;      /* index into the route table's servers */
	uint64_t table_id;
	/* not ready for the request yet: the events the connect (EV_WRITE) or
	 * the TLS handshake waits for; 0 once ready */
	uint8_t connecting;
	uint8_t handshaking;  /* connected, TLS handshake under way */
	uint8_t tls_wants;    /* EV_WRITE when SSL_read needs a writable socket */
	uint8_t readable;
	uint8_t reused;       /* taken from the pool for this request */
	SSL *ssl;             /* TLS groups only (tls_client.h), else NULL */
};

/*
 * Picks a server of upstream group <up> not in <tried> (bitmap over the
 * group's servers, at most 64 looked at). Returns its index in the table's
 * servers, or -1 if every untried server is marked down.
 */
int upstream_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried);

/* A pooled connection to <server>, or NULL. */
struct upconn *upstream_pool_get(uint32_t server);

/* 0 if pooled connection <u>, just taken, already shows a close or bytes
 * nobody asked for that its watcher has not reported yet, else 1. One
 * system call: for requests that must not be sent on a dying connection. */
int upstream_pool_alive(struct upconn *u);

/* Opens a new non-blocking connection to <server>, with a client SSL
 * attached when its group has TLS (the handshake starts once connected:
 * txn.c). Returns it (connect possibly still in progress) or NULL with *rc
 * set (refused: the server is marked down; no memory; upstream_tls when
 * this worker has no TLS context for the group). */
struct upconn *upstream_connect(const struct route_table *t, uint32_t server, int *rc);

/* Gives <u> back to its server's pool, or closes it if the pool is full. */
void upstream_release(struct upconn *u);

/* Closes <u> and frees it. */
void upstream_close(struct upconn *u);

/* Marks <server> down for UPSTREAM_FAIL_SKIP seconds. */
void upstream_mark_down(uint32_t server);

/* Sets the deadline of <u>, re-arming its timer if it moves earlier. */
void upstream_set_deadline(struct upconn *u, ev_tstamp at);

/* Resets per-server state and closes pooled connections if the routing
 * table generation changed. */
void upstream_sync_table(const struct route_table *t);

/* Once a second: closes the pooled idle connections of servers an admin
 * set to drain or down, so a server taken out is left alone within a
 * second instead of after the keep-alive timeout. */
void upstream_admin_sweep(void);

/* Closes every pooled connection (shutdown). */
void upstream_close_pools(void);

#endif
