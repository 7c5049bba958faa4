/*
 * txn.h: one request in flight, from its parsed head to the last byte of
 * its answer.
 *
 * Principle: a transaction is two one-way pipes, client to upstream and
 * upstream to client, each a small queue of pending output (a head weir
 * wrote, a framing line, a span of body bytes still in the source buffer).
 * txn_pump() moves both as far as they go without blocking and then arms
 * exactly the watchers it is waiting for: a side whose peer cannot take
 * more is not read (back-pressure), so memory stays at a few buffers per
 * request whatever the body size. Bodies are re-framed by weir, never
 * copied through raw: Content-Length is counted, chunked is decoded
 * strictly and encoded anew.
 */
#ifndef WEIR_WORKER_TXN_H
#define WEIR_WORKER_TXN_H

#include <sys/uio.h>

#include "worker/auth.h"
#include "worker/breaker.h"
#include "worker/http.h"
#include "worker/realip.h"
#include "worker/ratelimit.h"
#include "worker/retry.h"
#include "worker/tunnel.h"
#include "worker/txn_settings.h"
#include "worker/worker.h"

struct conn;
struct upconn;

/* Pending output in one direction. */
struct outq {
	struct iovec iov[6];     /* head, size line, data, CRLF, last chunk */
	int first, count;       /* iov[first .. first+count) still to write */
	struct buf *src;        /* buffer the body span points into */
	uint32_t src_consume;   /* bytes of src to consume once all is written */
	uint8_t sent;           /* some of it reached the peer (cleared per connection) */
	char pre[24];           /* chunk size line */
};

/* A minimum data rate on the client side: bytes moved per second of
 * waiting on the client, judged once per timeouts.rate_window of waiting.
 * Only time spent waiting on the client counts, so a slow upstream never
 * makes the client look slow. */
struct txn_rate {
	ev_tstamp since;  /* start of the current wait, 0 while not waiting */
	ev_tstamp waited; /* waiting time in the current window */
	uint64_t mark;    /* byte count when the window began */
};

struct txn {
	struct conn *c;
	struct upconn *u;
	const struct route_table *table;
	const struct route_entry *route;
	/* what it reads of timeouts and limits: from <table>, its route's
	 * once routed (worker/txn_settings.h); NULL before it took one */
	const struct route_settings *set;
	int server;              /* current server index, -1 none */
	uint64_t tried;          /* servers of the group tried (bitmap) */
	uint8_t retried;         /* a stale pooled connection was retried */
	uint8_t replayable;      /* all request bytes sent are still buffered */
	uint8_t req_done;        /* whole request written upstream */
	uint8_t req_body_done;   /* whole request body read from the client */
	uint8_t resp_started;    /* response head written or queued to the client */
	uint8_t resp_done;       /* whole response queued to the client */
	uint8_t client_close;    /* close the client connection afterwards */
	uint8_t up_reusable;     /* upstream connection may go back to the pool */
	uint8_t resp_chunked_out;/* response re-encoded as chunked to the client */
	uint8_t up_wait, cl_wait; /* what each side's timer now measures */
	uint8_t early;           /* the request came in TLS early data (0-RTT) */
	uint8_t buffering;       /* reading the body whole before picking a server */
	uint8_t body_buffered;   /* the whole body was read before a server was
	                          * picked and is kept (in c->in or t->body) until
	                          * the request is sent: a replay resends all of it */
	uint8_t continued;       /* 100 Continue was sent */
	uint8_t body_discard;    /* the upstream stopped taking the body: what the
	                          * client still sends of it is read and dropped */

	struct http_request req;
	struct http_response resp;
	struct http_chunked req_chunks;
	struct http_chunked resp_chunks;
	uint64_t req_body_left;  /* Content-Length bytes still to read */
	uint64_t req_body_total; /* decoded body bytes read so far */
	uint64_t resp_body_left;
	uint32_t req_head_start; /* offset of the request head in c->in */
	struct buf *body;        /* buffered body that did not fit behind the head
	                          * in c->in (decoded if it came chunked) */
	uint32_t body_cap;       /* data bytes t->body holds at most */
	uint64_t body_in;        /* request body bytes read from the client */
	uint64_t discarded;      /* body bytes dropped after body_discard */
	struct txn_rate rate_in; /* the request body (limits.client_body_rate) */
	struct txn_rate rate_out;/* the response (limits.client_send_rate) */
	ev_tstamp cl_gap;        /* when the client's gap timer runs out */

	struct buf *head_up;     /* request head written for the upstream */
	struct buf *head_down;   /* response head written for the client */
	struct outq up;          /* to the upstream */
	struct outq down;        /* to the client */

	ev_tstamp start;         /* first byte of the request */
	ev_tstamp up_start;      /* request sent to the upstream */
	ev_tstamp up_first;      /* first response byte */
	uint64_t bytes_out;      /* bytes written to the client */
	int status;
	struct tunnel tun;       /* an upgrade asked for, then the tunnel (tunnel.h) */
	struct realip ident;     /* the client's address and request id (realip.h) */
	struct auth_state auth;  /* what routes.auth learnt: consumer, headers (auth.h) */
	struct ratelimit_txn rl; /* a delay under way, concurrency held (ratelimit.h) */
	struct breaker_txn bk;   /* limits and breaker (breaker.h) */
	struct retry_txn rt;     /* retries (retry.h) */
	uint16_t bal_held;       /* stat index + 1 counted in flight for least_request (balance.h) */

	struct http_header headers[]; /* limits.headers entries, shared by the
	                               * request and then the response */
};

/* Size of a txn with room for <nheaders> headers (the slab class size). */
size_t txn_size(uint32_t nheaders);

/* A new transaction for connection <c>, its request parser ready; NULL
 * when the slab is exhausted. Sets c->txn. */
struct txn *txn_new(struct conn *c);

/* Releases <t> and what it holds (no upstream may be attached); clears
 * c->txn. */
void txn_free(struct txn *t);

/* Writes the access log line of <t> answered with <status>; the _raw form
 * is for an answer to a connection that has no parsed request. */
void txn_log_access(struct txn *t, int status);
void txn_log_access_raw(struct conn *c, int status);

/* Starts the request whose head in c->in is complete (c->txn set up by
 * conn.c with the parser state). Routes it, connects and pumps. */
void txn_start(struct txn *t);

/* The rest of txn_start() once the route's rate limits let the request
 * go on: the request head, then the body or a server. */
void txn_continue(struct txn *t);

/* Answers <t> with <status> from the complete head (and body) weir wrote
 * into t->head_down, then ends it as any answer ends (the access log, the
 * counters, keep-alive, or a lingering close while a body is unread). */
void txn_answer_local(struct txn *t, int status);

/* Moves data both ways as far as possible and arms the right watchers. */
void txn_pump(struct txn *t);

/* Ends the transaction on failure <rc>: answers it if nothing of the answer
 * was sent yet, else cuts the client connection. */
void txn_fail(struct txn *t, int rc);

/* Counts the end of <t>, answered with <status> (0: cut after the answer
 * had started), for its route and server: the status class, the request
 * duration, and the upstream response time when the answer came from the
 * upstream. A request without a route (404, or an error before routing)
 * counts only in the totals. Called where a request ends: txn_finish(),
 * txn_fail() and conn_answer_error(). */
void txn_count_end(struct txn *t, int status);

/* Frees a transaction whose client connection is going away. */
void txn_abort(struct txn *t, int rc);

/* The output queues and the upstream read, for tunnel.c: outq_body()
 * queues [data, data+len) of <src> and consumes <used> bytes of it once
 * written; outq_write() writes to <c> if given, else to <u>, and returns
 * bytes written or -errno; txn_upstream_read() reads into u->in and
 * returns bytes, 0 at EOF, WEIR_EAGAIN or an error. */
void outq_body(struct outq *q, struct buf *src, uint32_t used, const char *data, size_t len, int chunked);
ssize_t outq_write(struct upconn *u, struct conn *c, struct outq *q, int more);
int txn_upstream_read(struct txn *t);

/* RFC 9110 9.2.2: is the method of <t> idempotent? */
int txn_method_idempotent(const struct txn *t);

/* breaker.c, once a queued request got its place: connects and sends. */
void txn_upstream_go(struct txn *t);

/* retry.c, once the backoff ran out: sends <t> again, to another server
 * if one is left; <rc> is the error to answer with if it cannot. */
void txn_retry_send(struct txn *t, int rc);

/* Event entry points from conn.c and upstream.c. */
void txn_on_upstream_event(struct txn *t, int revents);
void txn_on_upstream_timeout(struct txn *t);
void txn_on_client_timeout(struct txn *t);

/* head.c: learns the header names weir vouches for from every listener of
 * <cfg> (client_header), before the first request. */
void head_init(const struct config *cfg);

/* ---- txn_client.c: body buffering and the client's clocks ---------- */

/* What a side's timer is waiting for; TXN_NO_DEADLINE (a day) while the
 * other side's timer rules. */
enum { WAIT_NONE, WAIT_SEND, WAIT_READ };
#define TXN_NO_DEADLINE 86400000u

/* The deadline of a side waiting for <wait>: <send_ms> or <read_ms> from
 * now, or TXN_NO_DEADLINE while it waits on nothing. */
static inline ev_tstamp txn_wait_until(uint8_t wait, uint32_t send_ms, uint32_t read_ms)
{
	return worker_after(wait == WAIT_SEND ? send_ms : wait == WAIT_READ ? read_ms : TXN_NO_DEADLINE);
}

/* Gives back t->body, if any. */
void txn_body_put(struct txn *t);

/* Whether the body of <t> is to be read whole before connecting: every
 * Content-Length body up to limits.body_buffer, and chunked ones until
 * they pass it. */
int txn_buffer_wanted(const struct txn *t);

/* Moves what c->in holds of the body into the buffer (or leaves it there
 * when it fits behind the head). Returns 1 when the body is complete, or
 * when it must stream after all (past body_buffer, or no memory), 0 when
 * more bytes are needed, or an error (400, 413). */
int txn_buffer_step(struct txn *t);

/* Sends 100 Continue when the client waits for it before its body.
 * Returns 0, or -1 when the connection is gone (t freed, c closed). */
int txn_send_continue(struct txn *t);

/* The request cap and the rate windows as they stand now, <wait> going
 * on. Returns 0 or the error to end the request with. */
int txn_client_check(struct txn *t, uint8_t wait);

/* Sets the client's deadline for <wait> (after <io> with the client, the
 * gap timer starts again). Returns 0, or an error from txn_client_check(). */
int txn_client_clock(struct txn *t, uint8_t wait, int io);

/* Ends <t> for a client too slow or a request over its cap. */
void txn_client_fail(struct txn *t, int rc);

/* Drops what the client still sends of a body the upstream no longer
 * takes. Returns whether to keep reading. */
int txn_discard_client(struct txn *t);

/* head.c: writes the upstream request head of <t> into t->head_up. Returns
 * 0 or WEIR_EHEADERS_TOO_LARGE if it does not fit. */
int head_write_request(struct txn *t);

/* head.c: the reason phrase weir writes for <status> ("" if it knows none). */
const char *head_reason(int status);

/* head.c: writes the client response head of <t> into t->head_down and
 * decides the framing towards the client. Returns 0 or an error. */
int head_write_response(struct txn *t);

/* <t> waits on a control (a place in a group's queue, a retry's backoff)
 * and has no upstream: the client is not read meanwhile. */
static inline int breaker_waiting(const struct txn *t)
{
	return !t->u && (t->bk.queued || t->rt.armed);
}

#endif
