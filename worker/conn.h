/*
 * conn.h: a client connection.
 *
 * Principle: a connection is small while it waits. An idle keep-alive
 * connection holds its socket, one watcher, one timer and no buffer; the
 * input buffer is taken when bytes arrive and given back when they are all
 * consumed, and the request state (struct txn) exists only while a request
 * is in flight. Requests on one connection are handled one at a time, in
 * order: pipelined requests wait in the input buffer, so answers can only
 * come back in order.
 *
 * Timeouts use one timer per connection and a deadline field: moving a
 * deadline later is a store, the timer re-arms itself when it fires early.
 */
#ifndef WEIR_WORKER_CONN_H
#define WEIR_WORKER_CONN_H

#include <ev.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <openssl/base.h>

#include "worker/worker.h"

struct txn;
struct codec_ops;

enum conn_state {
	CONN_PROXY,   /* proxy_protocol listener: reading the PROXY header (conn_proxy.c) */
	CONN_HANDSHAKE, /* TLS listener: the handshake is under way (tls.c) */
	CONN_IDLE,    /* between requests, no bytes pending */
	CONN_HEAD,    /* reading a request head */
	CONN_TXN,     /* a request is in flight (txn.c drives) */
	CONN_ANSWER,  /* writing an answer weir made itself */
	CONN_LINGER,  /* answer sent, write side shut, discarding input */
};

struct conn {
	ev_io io;
	ev_timer timer;
	ev_tstamp deadline;
	struct conn *next, *prev; /* worker's connection list */
	struct buf *in;           /* request bytes, NULL when none are pending */
	struct txn *txn;
	const char *answer;       /* CONN_ANSWER: remaining bytes of the answer */
	uint32_t answer_len;      /* (CONN_LINGER: bytes discarded so far) */
	ev_tstamp linger_until;   /* CONN_LINGER: close by then whatever happens */
	uint8_t state;
	uint8_t readable;         /* the socket reported readable, not yet drained */
	uint8_t close_after;      /* close once the current answer is written */
	uint8_t eof;              /* the client shut its write side */
	uint8_t tls;              /* accepted on a TLS listener */
	/* what the TLS layer waits for beyond what the caller asked: SSL_read
	 * may need the socket writable (EV_WRITE in tls_read_wants), SSL_write
	 * readable (EV_READ in tls_write_wants); conn_io_set() arms them and
	 * conn_io_cb() turns the event back into a retry of that call */
	uint8_t tls_read_wants;
	uint8_t tls_write_wants;
	SSL *ssl;                 /* NULL on a plain connection (and after tls_close) */
	const struct codec_ops *codec; /* its codec (codec.h): HTTP/1 */
	char peer[INET6_ADDRSTRLEN];
	uint8_t peer_len;
};

/* Takes a new socket accepted on listener <l> (index in cfg->listeners). */
void conn_accept(int fd, const struct sockaddr *sa, int l);

/* Arms <c>'s watcher for <events> (EV_READ, EV_WRITE) plus whatever the
 * TLS layer waits for to finish a read or write it could not: every client
 * watcher change goes through here. */
void conn_io_set(struct conn *c, int events);

/* Sets the deadline of <c>, re-arming its timer if it moves earlier. */
void conn_set_deadline(struct conn *c, ev_tstamp at);

/* Sends the canned answer for error <rc> (its status from err.h) and, when
 * <close> is set or the status requires it, closes after it. Counts it. */
void conn_answer_error(struct conn *c, int rc, int close);

/* The request in flight has ended: with <keep> the connection waits for the
 * next request (which may already be buffered), otherwise it closes. */
void conn_txn_done(struct conn *c, int keep);

/* The connection is done with but the client may still be sending (a
 * request body weir did not read to its end): shut the write side after
 * what is queued, discard the input for a bounded time and byte count,
 * then close, so that no reset destroys the answer before it is read. */
void conn_linger(struct conn *c);

/* Bytes the client may send after its request ends unread before weir
 * stops reading it (during the answer and while lingering, each). */
#define CONN_LINGER_BYTES (1024 * 1024)

/* Closes the connection now, releasing everything it holds. */
void conn_close(struct conn *c);

/* The client's byte stream: every read and write on a client connection
 * goes through these two, so the TLS layer has one place to sit: on a TLS
 * connection they are SSL_read and SSL_write. They behave as read(2) and
 * sendmsg(2): -1 with errno (EAGAIN when it would block: then arm with
 * conn_io_set()). <more> says more bytes follow at once (MSG_MORE; plain
 * only). */
ssize_t conn_recv(struct conn *c, void *p, size_t n);
ssize_t conn_sendv(struct conn *c, const struct iovec *iov, int cnt, int more);

/* Reads from the client into c->in (taking a buffer if needed). Returns
 * bytes read (> 0), 0 at end of stream, WEIR_EAGAIN, or WEIR_ECLIENT_CLOSED
 * on a socket error. Counts bytes_in. */
int conn_read(struct conn *c);

/* Drain: close <c> now if it is idle. */
void conn_drain(struct conn *c);

#endif
