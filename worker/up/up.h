/*
 * up: upstream servers, per worker (the door of worker/up/): server
 * choice and passive health (upstream.c), state by identity
 * (upstream_state.c), keep-alive pools and connecting, TLS to upstreams
 * (tls_client.c). Beside the codecs: the HTTP/1 client codec (h1/) runs
 * on a struct upconn; events on a connection that carries a stream go up
 * to the core through the upcalls at the end.
 */
#ifndef WEIR_WORKER_UP_H
#define WEIR_WORKER_UP_H

#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <ev.h>
#include <openssl/base.h>

#include "common/config.h"
#include "shm/balance.h"
#include "shm/route.h"
#include "worker/base/base.h"

/* ==== upstream ==== */
/*
 * upstream: upstream servers and connections, per worker.
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
	uint8_t ended;        /* TLS: the server's end read behind a response's
	                       * records: no event will tell it, never pooled */
	uint8_t graced;       /* its deadline was graced (worker_deadline_grace) */
	uint8_t long_body;    /* its last response went past an I/O buffer: the
	                       * next head reads into a stream buffer (worker/h1) */
	SSL *ssl;             /* TLS groups only (tls_client.h), else NULL */
	const struct codec_ops *codec; /* its codec (worker/h1), set by the core when it
	                               * first carries a stream */
	void *h2;             /* a virtual upconn's HTTP/2 stream (h2_client.h): no socket */
};

/* HTTP/2 groups (h2_client.h): protocol = "h2c" or "h2". */
void h2_client_init(const struct config *cfg);
void h2_client_close_server(struct up_server *srv);
struct upconn *h2_client_open(const struct route_table *t, uint32_t si, uint32_t connect_ms, int *rc);
void h2_client_io_set(struct upconn *u, int events);
void h2_client_stream_end(struct upconn *u);
/* The client codec of HTTP/2 streams (worker/h1/h1.h: codec). */
extern const struct codec_ops h2_client_codec;

/* Arms <u>'s watcher for what the core waits for; a virtual upconn
 * (HTTP/2) is woken by its session instead. */
static inline void upstream_io_set(struct upconn *u, int events)
{
	if (u->h2)
		h2_client_io_set(u, events);
	else
		worker_io_set(&u->io, events);
}

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

/* The weight server <si> of group <up> of <t> is picked with (the admin
 * override or the configured one; scaled by its slow_start ramp when the
 * group has one), or 0 when it may not be picked now: not up by admin
 * state, ejected at <eject_now> (ms; 0: ejections not judged), or marked
 * down or down by health checks (then *<marked> is set) unless <panic>. */
uint32_t upstream_server_usable(const struct route_table *t, const struct route_upstream *up, uint32_t si,
                                int panic, uint64_t eject_now, int *marked);

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

/* ==== tls_client ==== */
/*
 * tls_client: TLS to upstream servers (BoringSSL), per upstream group.
 *
 * Principle: the config loader reads each group's CA file into an
 * X509_STORE (as root, with the configuration); each worker builds one
 * client SSL_CTX per TLS group at start-up from it: TLS 1.2 and 1.3, ALPN
 * http/1.1 offered, the chain checked against the CA and the certificate's
 * name against the group's sni (X509_VERIFY_PARAM_set1_host) unless
 * verify = false. The servers are addressed by IP, so the name checked is
 * the one configured, never the address.
 *
 * The handshake runs after connect() completes and before the request head
 * is written, as part of "connecting": under timeouts.upstream_connect, and
 * its failure fails the connect (the server is skipped, the request goes to
 * another). Each worker keeps the last session (ticket) it received from
 * each server (in the server's state, by identity: a reload that keeps the
 * server keeps it) and offers it on the next connect to that server.
 *
 * BoringSSL allocates per connection (the SSL, its buffers, the handshake
 * state) and per session: with tls.h's server side, the only mallocs on a
 * worker's request path. A plain upstream never reaches this module.
 */

struct upconn;

/* Builds the context of every TLS upstream group of <cfg>; logs a warning
 * (worker 0 only) for each group with verify off. Returns 0, or -1 after
 * logging why. */
int tls_client_init(const struct config *cfg);

/* Frees the contexts and the kept sessions (worker exit). */
void tls_client_cleanup(void);

/* The routing table changed to <t>: maps its groups to contexts. The kept
 * sessions live in the server states, by identity (upstream_state.c). */
void tls_client_sync(const struct route_table *t);

/* Does the group of <server> in <t> speak TLS? */
static inline int tls_client_wanted(const struct route_table *t, uint32_t server)
{
	return route_upstreams(t)[route_servers(t)[server].upstream].tls;
}

/* Attaches a new client SSL to <u> (socket and state set) for server
 * <server> of <t>, offering the session kept for it. Returns 0, or a negative
 * error with *why set: WEIR_ERR(NOMEM), or WEIR_ERR(UPSTREAM_TLS) when this
 * worker has no context for the group (it started before a reload that
 * added it: the new workers have one). */
int tls_client_attach(struct upconn *u, const struct route_table *t, uint32_t server, const char **why);

/* One step of <u>'s handshake. Returns 0 when complete (and counted),
 * WEIR_EAGAIN with *events (EV_READ or EV_WRITE) to wait for, or
 * WEIR_ERR(UPSTREAM_TLS) with *why (the verification error, if that was
 * it). */
int tls_client_handshake(struct upconn *u, int *events, const char **why);

/* The upstream byte stream once the handshake is done, behaving as
 * read(2) and writev(2): -1 with errno (EAGAIN: wait). recv returns 0 at
 * close_notify or end of stream; when SSL_read needs the socket writable
 * (a TLS 1.3 KeyUpdate answer), u->tls_wants says so. */
ssize_t tls_client_recv(struct upconn *u, void *p, size_t n);
ssize_t tls_client_sendv(struct upconn *u, const struct iovec *iov, int cnt);

/* Sends close_notify once if the handshake completed (never waits) and
 * frees u->ssl. */
void tls_client_close(struct upconn *u);

/* ==== balance ==== */
/*
 * balance: the load-balancing algorithms of an upstream group other than
 * smooth weighted round robin (which stays in upstream.c, free of locked
 * instructions): `balance = "random"` and `"least_request"`; `"ring_hash"`
 * and `"maglev"` are balance_hash, below.
 *
 * Principle: every algorithm picks among the same usable servers
 * (upstream_server_usable: admin state, ejection, down marks, health), so
 * a down, ejected or drained server is skipped whichever one a group uses,
 * and panic covers them all. least_request is power of two choices: it
 * draws `choices` usable servers at random and takes the one with the
 * fewest requests in flight node-wide (shm/balance.h) over its weight;
 * two draws avoid the herd a full scan sends to one idle server from
 * every worker at once.
 *
 * Costs: random, one draw of a per-worker xorshift per request and a pass
 * over the group; least_request, `choices` draws and relaxed loads, and one
 * locked add at the pick and one subtract at the end of the request on
 * the chosen server's own cache line. Nothing for a group on rr.
 */

/* Picks a usable server of <up> not in <tried> (upstream_pick_among's
 * arguments); -1 if none, BALANCE_PICK_RR to fall back to round robin. */
int balance_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried, int panic,
                 uint64_t eject_now, int *marked);

/* Server <si> of <t> was picked for a request whose count is *<held>
 * (stat index + 1 counted in flight; 0: none): moves the count to it when
 * its group is on least_request. */
void balance_begin(const struct route_table *t, uint32_t si, uint16_t *held);

/* The request ends: gives back its count in flight, if any. */
void balance_end(uint16_t *held);

/* A per-worker xorshift64* draw (no lock, no system call). */
uint64_t balance_rand(void);

/*
 * balance_hash: `balance = "ring_hash"` and `"maglev"` (worker/up/
 * balance_hash.c), over the tables the master built into the generation
 * (shm/route_hash.h). The pick looks the request's key up, then walks on
 * from its entry: a server not usable (upstream_server_usable) or already
 * tried is passed to the next entry's server, so only its own keys move;
 * with bounded_load, so is a server over its share of the group's
 * requests in flight (node-wide counts, as least_request's).
 *
 * Costs: the key's hash (worker/core/balance_key.c) and a binary search
 * of the ring (at most 15 steps) or one division for maglev; with
 * bounded_load a pass over the group and the locked add and subtract of
 * least_request. Nothing for a group on another algorithm.
 */
enum {
	BALANCE_KEY_HASHED = 0, /* the request's key */
	BALANCE_KEY_FALLBACK,   /* no key: hash_fallback = "client_ip" hashed */
	BALANCE_KEY_NONE,       /* no key: hash_fallback "random" or "rr" decides */
};
#define BALANCE_PICK_RR (-2) /* balance_pick(): use the group's round robin */

/* The key of the next pick: hash <h>, found as <how> (BALANCE_KEY_*). */
void balance_hash_use(uint64_t h, int how);

/* balance_pick() for a ring_hash or maglev group; BALANCE_PICK_RR when the
 * request has no key and hash_fallback is "rr". */
int balance_hash_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried, int panic,
                      uint64_t eject_now, int *marked);

/* ==== outlier ==== */
/*
 * outlier: passive outlier ejection from real traffic, node-wide.
 *
 * Principle: the answers a group's servers give (a 5xx, a connect that
 * fails or times out, anything else) are counted in the shared segment
 * (shm/resil.h), so every worker's traffic makes one count and an ejection
 * holds in every worker at once. Three detectors: consecutive_5xx,
 * consecutive_gateway_failures, and a failure percentage over an interval
 * once a server has min_requests in it. An ejection lasts
 * base_ejection_time times the ejections in a row, capped; it is checked
 * after it is made (max_ejection_percent, and never the last usable
 * server: either undoes it). When fewer than panic_threshold percent of a
 * group's servers are usable, picks ignore ejections (panic). One log line
 * per ejection and one per return, each with its reason.
 *
 * A group without `outlier` pays nothing: every entry point returns on a
 * flag of the table it already holds.
 */



enum outlier_outcome {
	OUTLIER_OK,      /* an answer below 500 */
	OUTLIER_5XX,     /* an answer of 500 or more */
	OUTLIER_GATEWAY, /* a connect failure or a timeout */
};

/* Counts outcome <o> of server <si> of <t>, and ejects it when a detector
 * says so. */
void outlier_observe(const struct route_table *t, uint32_t si, enum outlier_outcome o);

/* The upstream answered request to server <si> with <status>. */
static inline void outlier_answer(const struct route_table *t, uint32_t si, int status)
{
	if (route_upstreams(t)[route_servers(t)[si].upstream].resil.outlier.on)
		outlier_observe(t, si, status >= 500 ? OUTLIER_5XX : OUTLIER_OK);
}

/* The time (ms) to judge ejections of group <up> by when picking, or 0
 * when they are to be ignored: outlier off, or panic (too few servers
 * usable; counted and logged). */
uint64_t outlier_pick_now(const struct route_table *t, const struct route_upstream *up);

/* Once a second: logs the return of servers whose ejection ran out (once
 * node-wide: the first worker to see it). */
void outlier_sweep(const struct route_table *t);

/* ==== upcalls: what the stream core above implements for the pools ==== */
/*
 * Events on a connection that carries a stream go to the stream
 * (u->txn): declared here so that no file of this layer includes the
 * core's door (worker/core/txn.c).
 */
void txn_on_upstream_event(struct txn *t, int revents);
void txn_on_upstream_timeout(struct txn *t);
/* An HTTP/2 stream that never reached the server: its session did not
 * come up (<rc>, a failed connect: the next server), or the server left
 * it unprocessed (<unprocessed>: REFUSED_STREAM, past a GOAWAY), sent
 * again once when it can be replayed, else answered with <rc>. */
void txn_upstream_refused(struct txn *t, int rc, int unprocessed);

#endif
