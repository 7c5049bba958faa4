/*
 * base: the bottom of a worker: its loop, its memory, its counters (the
 * door of worker/base/; loop.c).
 *
 * Principle: a worker is one thread on one libev loop that never blocks.
 * Everything it needs per connection comes from its private slab (no
 * malloc/free on the request path, no locks); it counts into its own slot
 * of the shared segment. Every layer above includes this door:
 *
 *   base/  the loop, deadlines, buffers, counters        (this)
 *   msg/   the message model: struct msg, header tokens, the arena
 *   net/   client connections and their transports: TLS, the PROXY header
 *   up/    upstream servers: choice, health, pools, TLS to upstreams
 *   h1/    the HTTP/1 codecs (server and client), heads, parsing
 *   core/  the stream core: the phases, the pump, tunnels
 *   worker.c  start-up, accept, signals, the 1 s tick, drain (the top)
 *
 * A file includes its own layer's door and the doors of layers below it
 * (h1 and up sit beside each other, up first); a call up goes through
 * declarations in the lower door that the upper layer implements.
 */
#ifndef WEIR_WORKER_BASE_H
#define WEIR_WORKER_BASE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <ev.h>

#include "common/config.h"
#include "common/slab.h"
#include "shm/route.h"
#include "shm/shm.h"

/* ==== the worker: loop, memory, counters ==== */

struct conn;
struct upconn;

/* Buffer size classes below the I/O buffer, for heads weir writes: 512,
 * 1024, 2048 and 4096 bytes with their struct buf, so a head of a few
 * hundred bytes holds half a kilobyte, not a 16 KiB buffer. */
#define WORKER_SMALL_CLASSES 4
#define WORKER_SMALL_MIN 512

/*
 * The most a head weir writes on may exceed the one it read, with
 * <headers> header lines: its own Host (for an HTTP/1.0 client without
 * one), X-Forwarded-For and -Proto, Early-Data, Via, Upgrade and
 * Connection, framing lines and a reason phrase stay under 512 bytes, and
 * each header may gain the space after its ':'. A buffer holds a head of
 * limits.header_size (response_header_size) plus this, so that every head
 * within the limits can be forwarded (a TLS listener's client_header adds
 * the certificate subject on top, which this does not cover).
 */
#define WORKER_HEAD_GROWTH(headers) (512u + (uint32_t)(headers))

/*
 * Room a stream buffer has in front of its limits.stream_buffer bytes of
 * body: a response head read into one (worker/h1, h1_client_in) leaves
 * the body all of them, so a body of that size comes in one read. Most
 * response heads are a few hundred bytes; a longer one takes the room
 * from the body, which then needs one read more.
 */
#define WORKER_STREAM_HEAD 2048u

/*
 * Per-worker state of one upstream server, keyed by its identity (group
 * name and address), never by its place in a table: a reload may reorder,
 * add or remove servers while requests on the older table are in flight,
 * and those must keep reaching the server they picked (upstream_state.c).
 */
struct up_server {
	char group[CONFIG_NAME_MAX];    /* identity: the upstream group's name */
	char addr[CONFIG_ADDR_STR_MAX]; /* and the address, as route_server.text */
	uint64_t gen;           /* newest table id that maps it; 0: free slot */
	uint8_t tomb;           /* freed slot a probe must walk past */
	uint32_t keepalive;     /* pool size, from the newest table */
	int64_t cw;             /* smooth WRR current weight */
	ev_tstamp down_until;   /* skipped until then after max_fails failures */
	ev_tstamp last_fail;    /* time of the latest counted failure */
	uint32_t fails;         /* consecutive failures counted */
	struct upconn *idle;    /* pooled idle connections (LIFO) */
	uint32_t nidle;
	uint32_t idle_low;      /* fewest idle since the last tick: the cold end
	                         * of the list no request took meanwhile */
	void *session;          /* SSL_SESSION offered on the next TLS connect */
	void *session_ctx;      /* the SSL_CTX it came from */
	void *h2;               /* its HTTP/2 sessions (worker/up/h2_client.h) */
};

/* Slots of the identity hash: the servers of the newest table (at most
 * CONFIG_MAX_SERVERS) and those of older tables still held by requests in
 * flight, at a load that keeps probes short. One more slot at the end is
 * the shared overflow state (never pools, never marked down). */
#define UPSTREAM_STATES 4096
#define UPSTREAM_STATE_OVERFLOW UPSTREAM_STATES

struct worker {
	struct ev_loop *loop;
	const struct config *cfg;
	struct shm_segment *seg;
	struct shm_counters *cnt; /* our slot's counters */
	struct shm_route_counters *rcnt;  /* ours, by route stat index */
	struct shm_server_counters *scnt; /* ours, by server stat index */
	int slot;
	int index;

	struct slab slab;
	int cls_conn, cls_txn, cls_upconn, cls_buf;
	int cls_small[WORKER_SMALL_CLASSES]; /* buffers for heads, by size */
	int cls_body;      /* buffered request bodies past buf_size, -1 when none */
	uint32_t body_size; /* data bytes of one such body buffer */
	int cls_stream;    /* stream buffers (limits.stream_buffer), -1 when none */
	uint32_t buf_size; /* data bytes of one buffer */
	uint32_t stream_size; /* body bytes of one stream buffer */
	uint32_t stream_cap;  /* its data bytes: a head's room in front (WORKER_STREAM_HEAD) */
	uint32_t stream_max;  /* stream buffers it may hold at once */

	ev_io accept_io[CONFIG_MAX_LISTENERS];
	int nlisten;
	ev_signal sig_quit, sig_term, sig_int, sig_usr1;
	ev_timer tick;

	struct conn *conns; /* every client connection, for drain and shutdown */
	uint32_t nconns;
	int draining;
	ev_tstamp drain_deadline;
	ev_tstamp tunnel_deadline; /* a draining worker's tunnels are cut then */
	uint8_t drain_cut;         /* the connections other than tunnels were cut */
	uint32_t ntunnels;         /* tunnels open (tunnel.h) */

	uint64_t table_id; /* newest generation synced (upstream_sync_table) */
	struct {
		uint64_t id;
		uint32_t refs;
	} held[SHM_GENS]; /* tables held by requests in flight */
	/* server states by identity, and per route generation slot (index
	 * into seg->gens) the state of each of its servers, resolved once when
	 * the worker first meets the generation: the request path does one
	 * array load, never a hash lookup */
	struct up_server servers[UPSTREAM_STATES + 1];
	uint16_t server_map[SHM_GENS][CONFIG_MAX_SERVERS];
};

extern struct worker wk;

/* A request in flight holds the routing table it started with; the oldest
 * one held is published in our slot's gen_min so the master never reuses
 * it, however many reloads happen meanwhile. */
void worker_table_hold(const struct route_table *t);
void worker_table_release(const struct route_table *t);

/* Counts error <rc> (negative) in our slot. */
/* A log line rate of one a second per call site: 1 when a line may be
 * written now (the caller then writes *<unlogged> and zeroes it), 0 when
 * it is counted in *<unlogged> instead. */
static inline int worker_log_gate(ev_tstamp *next, uint32_t *unlogged)
{
	ev_tstamp now = ev_now(wk.loop);

	if (now < *next) {
		(*unlogged)++;
		return 0;
	}
	*next = now + 1.0;
	return 1;
}

static inline void worker_count_error(int rc)
{
	int i = weir_err_index(rc);
	if (i >= 0)
		SHM_ADD(wk.cnt, errors[i], 1);
}

/* Called by conn.c when a connection closes during drain. */
void worker_check_drained(void);

/* A buffer: <data>[start, end) holds unconsumed bytes. */
struct buf {
	uint32_t start;
	uint32_t end;
	uint32_t cls; /* slab class it came from, where buf_put gives it back */
	uint32_t cap; /* data bytes it holds (the header stays 16 bytes, so data
	               * is 16-byte aligned, as string functions like) */
	char data[];
};

/* Writes <cnt> iovecs to plain socket <fd>: send() for one or for a few
 * short ones copied together (1 KiB at most), sendmsg() for more, with
 * <flags> (MSG_MORE). Client and upstream sides share it. */
ssize_t worker_sendv(int fd, const struct iovec *iov, int cnt, int flags);

/* Deadlines, one mechanism for client and upstream connections: a timer
 * armed for the earliest deadline and re-armed when it fires early, so that
 * pushing a deadline later costs no timer operation. */
static inline ev_tstamp worker_after(uint32_t ms)
{
	return ev_now(wk.loop) + ms / 1000.0;
}

/* Sets deadline *<dl> to <at>, re-arming <tm> only if it moves earlier.
 * A deadline that changes may be graced again (*<graced> cleared). */
void worker_deadline_set(ev_timer *tm, ev_tstamp *dl, uint8_t *graced, ev_tstamp at);

/* In <tm>'s callback: 1 when it fired before deadline <dl> (it is then
 * re-armed for it, and the callback returns), 0 when the deadline passed. */
int worker_deadline_early(ev_timer *tm, ev_tstamp dl);

/* In <tm>'s callback, once its deadline passed: the events <io> waits for
 * that are ready now, or 0. A worker that could not run for a while
 * (starved of CPU, stopped, a paused VM) comes back with deadlines passed
 * and the I/O that came meanwhile unseen: libev runs a pass's expired
 * timers before its I/O, and an epoll_wait cut short by a stop sees none.
 * So a deadline is judged after the I/O that is there: when this returns
 * nonzero, <tm> is armed to fire at once and the caller runs its I/O
 * callback with those events instead of judging. *<graced> (set here,
 * cleared when the deadline changes) keeps that to once per deadline: one
 * that the I/O did not move is judged when the timer fires again. A flag,
 * not the deadline graced: it fits a hole of struct conn, which stays at
 * 256 bytes (an idle client costs 512 bytes of the worker, test_many_conns). */
int worker_deadline_grace(ev_timer *tm, const ev_io *io, uint8_t *graced);

/* An I/O buffer of wk.buf_size data bytes, or NULL when the slab is out. */
struct buf *buf_get(void);

/* An empty buffer of slab class <cls>, whose objects hold <cap> data
 * bytes, or NULL when the slab is out. */
struct buf *buf_get_class(int cls, uint32_t cap);

/* A stream buffer (limits.stream_buffer) for reading a body of which
 * <left> bytes are still to come, when more than an I/O buffer is left,
 * fewer than limits.stream_buffers are held and the slab has one; else
 * NULL. Counted either way, under <kind> (enum stream_buf_kind,
 * weir_stream_buffers_total). */
struct buf *buf_take_stream(uint64_t left, int kind);

/* buf_take_stream(), or an I/O buffer in its place. NULL when the slab
 * is out. */
struct buf *buf_get_stream(uint64_t left, int kind);

/* The smallest buffer with room for <len> data bytes (an I/O buffer when
 * no smaller class fits, NULL above wk.buf_size or when the slab is out). */
struct buf *buf_get_fit(uint32_t len);

/* Gives back a buffer of either kind. */
void buf_put(struct buf *b);

/* Gives back *<b>, if it holds one, and clears it. */
/* <v> in decimal into <out> (room for 20 digits), no NUL; returns the
 * length. Heads carry numbers on every request, and snprintf costs some
 * 700 instructions a call. */
static inline size_t worker_u64_text(char *out, uint64_t v)
{
	char tmp[20], *p = tmp + sizeof(tmp);
	size_t n;

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	n = (size_t)(tmp + sizeof(tmp) - p);
	__builtin_memcpy(out, p, n);
	return n;
}

/* A status code (100..999) as three digits and a NUL into <out>. */
static inline void worker_status_text(char *out, int status)
{
	out[0] = (char)('0' + status / 100 % 10);
	out[1] = (char)('0' + status / 10 % 10);
	out[2] = (char)('0' + status % 10);
	out[3] = '\0';
}

static inline void buf_drop(struct buf **b)
{
	if (*b) {
		buf_put(*b);
		*b = NULL;
	}
}

static inline uint32_t buf_len(const struct buf *b)
{
	return b->end - b->start;
}

/* Moves unconsumed bytes to the front so the tail has room. */
void buf_compact(struct buf *b);

/* Changes <w>'s events to <events> only if they differ: no system call
 * when nothing changes. Stops the watcher when <events> is 0. */
void worker_io_set(ev_io *w, int events);

#endif
