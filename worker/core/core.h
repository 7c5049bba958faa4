/*
 * core: the stream core (the door of worker/core/): one request in
 * flight as a stream with two sides, its fixed phases (phase.c,
 * txn_phases.c: the life of a request in order), the pump that moves both
 * directions with back-pressure (txn.c), the client's clocks and body
 * buffering (txn_client.c), and Upgrade tunnels (tunnel.c).
 */
#ifndef WEIR_WORKER_CORE_H
#define WEIR_WORKER_CORE_H

#include <stdint.h>
#include <sys/uio.h>

#include "common/config.h"
#include "worker/base/base.h"
#include "worker/core/phase.h"
#include "worker/h1/h1.h"

/* ==== tunnel ==== */
/*
 * tunnel: Upgrade tunnels (WebSocket and any token a route allows).
 *
 * Principle: a tunnel exists only after a real switch. A request that asks
 * for an upgrade the route allows (HTTP/1.1 GET, no body, "Connection:
 * upgrade" and one Upgrade token) goes upstream with its Upgrade and
 * Connection headers; only a 101 whose Upgrade names the same token turns
 * the stream into a tunnel. Any other answer is an ordinary response, after
 * which the client connection closes, since what the client sent past its
 * head may be the new protocol's bytes, never to be read as a request: a
 * tunnel without a real 101 would be a smuggling channel. A 101 to a
 * request that asked for nothing, or to another protocol, is a 502.
 *
 * Once switched, both directions move raw through the transaction's two
 * output queues with the same back-pressure as bodies (a side is read only
 * when the other has taken what was read before), bytes that came with
 * either head first. EOF from one side shuts the write side of the other;
 * the tunnel ends when both directions are closed, on an error, on its own
 * idle timeout (timeouts.tunnel, reset by any byte either way), or when a
 * draining worker passes timeouts.tunnel_drain. An established tunnel
 * holds no route generation: what its log line and counters need is
 * copied when it starts.
 *
 * The entry points are narrow on purpose (txn.c calls five of them), so
 * that the tunnel can sit on a stream core rather than struct txn later.
 */

struct txn;

struct tunnel {
	uint8_t on;           /* the stream is a tunnel */
	uint8_t cl_eof;       /* the client shut its side */
	uint8_t up_eof;       /* the upstream shut its side */
	uint8_t up_shut;      /* we shut our write side to the upstream */
	uint8_t cl_shut;      /* we shut our write side to the client */
	uint8_t first_eof;    /* enum tunnel_end of the side that closed first */
	uint8_t proto_len;    /* the upgrade asked for and allowed; 0: none */
	char proto[CONFIG_UPGRADE_MAX];   /* its token, as the client sent it */
	char server[CONFIG_ADDR_STR_MAX]; /* for the access log line */
	uint64_t bytes_up, bytes_down;
};

/* Whether the request of <t> (routed) asks for an upgrade its route
 * allows; sets t->tun.proto. h2c never qualifies. */
void tunnel_offer(struct txn *t);

/* A 101 arrived for <t>: 0 if it answers the upgrade asked for, else
 * WEIR_EUPSTREAM_BAD_UPGRADE. */
int tunnel_check_switch(const struct txn *t);

/* The 101 head is queued to the client: <t> becomes a tunnel. */
void tunnel_start(struct txn *t);

/* Moves bytes both ways and arms the watchers (txn_pump of a tunnel). */
void tunnel_pump(struct txn *t);

/* The client's or the upstream's timer ran out (the idle timeout). */
void tunnel_on_timeout(struct txn *t);

/* A draining worker: its tunnels get timeouts.tunnel_drain, not
 * timeouts.drain; 1 if <t> is a tunnel (the caller leaves it alone). */
int tunnel_is_open(const struct txn *t);

/* The gauges of a tunnel going away, however it ends (txn_free()). */
void tunnel_free(struct txn *t);

/* Cuts the tunnel of <t> (drain deadline passed), counted as by drain. */
void tunnel_cut(struct txn *t);

/* ==== txn ==== */
/*
 * txn: one request in flight, from its parsed head to the last byte of
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

struct conn;
struct upconn;

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
	uint8_t up_wait, cl_wait; /* what each side's timer now measures */
	uint8_t early;           /* the request came in TLS early data (0-RTT) */
	uint8_t buffering;       /* reading the body whole before picking a server */
	uint8_t body_buffered;   /* the whole body was read before a server was
	                          * picked and is kept (in c->in or t->body) until
	                          * the request is sent: a replay resends all of it */
	uint8_t continued;       /* 100 Continue was sent */
	uint8_t body_discard;    /* the upstream stopped taking the body: what the
	                          * client still sends of it is read and dropped */

	struct msg req;          /* the request, as the codec parsed it */
	struct msg resp;         /* the response, once its head came */
	struct http_request req_p;  /* HTTP/1 parse state of each head */
	struct http_response resp_p;
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

	struct side up;          /* to the upstream: its codec, queue, head */
	struct side down;        /* to the client (up.chunked, down.chunked:
	                          * the body re-encoded chunked to that peer) */

	ev_tstamp start;         /* first byte of the request */
	ev_tstamp up_start;      /* request sent to the upstream */
	ev_tstamp up_first;      /* first response byte */
	uint64_t bytes_out;      /* bytes written to the client */
	int status;
	struct tunnel tun;       /* an upgrade asked for, then the tunnel (tunnel.h) */
	struct ph_cursor ph;     /* where the request stands in its phases */
	int answer;              /* PH_ANSWER: the error answered with */
	int end_counted, end_logged; /* the log phase: the status counted (0:
	                          * cut) and the one logged */
	uint8_t logged;          /* the log phase ran */

	struct arena arena;      /* the header lists: the request's, then the
	                          * response's (msg.h) */
	struct hdr arena_mem[];  /* limits.headers entries: the arena's bytes */
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

/* ---- txn_phases.c: the life of a request, in order ---------------- */

/* Starts the request whose head in c->in is complete (c->txn set up by
 * conn.c with the parser state): walks its phases (route, access, request
 * filters, pick, connect) and sends it. */
void txn_start(struct txn *t);

/* The phase handler that waited is done: the walk goes on after it. */
void txn_resume(struct txn *t);

/* The response filters, on a response head before it is written.
 * Returns 0 or the error to answer with instead. */
int txn_response_filters(struct txn *t);

/* The log phase, once per request however it ends: counts it with
 * <counted> (0: cut after the answer had started; see txn_count_end)
 * and logs it with <logged>. */
void txn_log_phase(struct txn *t, int counted, int logged);

/* txn.c, for the phases: the body is to be read from its first byte;
 * txn_pick() picks an untried server of the route's group (its index, or
 * -1); txn_connect_server() takes a pooled connection to t->server or
 * opens one (0, or the error); txn_connect() picks and connects until a
 * server takes it (0, or the error to answer with, <last_rc> when every
 * server failed); txn_upstream_begin() sends the request once connected. */
void txn_body_reset(struct txn *t);
int txn_pick(struct txn *t);
int txn_connect_server(struct txn *t);
int txn_connect(struct txn *t, int last_rc);
void txn_upstream_begin(struct txn *t);

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

/* The upstream read, for tunnel.c: through the upstream side's codec
 * into u->in (compacted first when nothing queued points into it);
 * returns bytes, 0 at EOF, WEIR_EAGAIN or an error. */
int txn_upstream_read(struct txn *t);

/* Event entry points from conn.c and upstream.c. */
void txn_on_upstream_event(struct txn *t, int revents);
void txn_on_upstream_timeout(struct txn *t);
void txn_on_client_timeout(struct txn *t);

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

#endif
