/*
 * shm.h: the segment shared by the master and its workers.
 *
 * Principle: one memfd-backed mapping with a fixed layout, a magic and a
 * layout version, checked at attach. It holds three things:
 *
 *  - route tables, as generations: the master writes the next generation in
 *    a slot no live worker can be reading and publishes it with one atomic
 *    store (release); a worker takes the current one (acquire) per request
 *    (route.h). A slot is a header here; the generation's block of
 *    variable size is in the arena that follows the struct (SHM_ARENA);
 *  - one cache-line-aligned counter block per worker slot, written only by
 *    the worker in that slot (single writer, relaxed stores: no locked
 *    instruction on the hot path), read and summed by the master;
 *  - the "retired" block, into which the master folds the counters of a
 *    worker that exited, so totals never go backwards;
 *  - per-route and per-server counters and histograms, in every slot and in
 *    the retired block, indexed by a stat index that stays with a route or
 *    server key across reloads (stat.h);
 *  - one admin word per server stat index (state and weight set at run time
 *    through the stats socket), written by the master, read by workers;
 *  - node-wide traffic-control state (outlier ejection) per server stat
 *    index, written by every worker with atomics (resil.h);
 *  - one health word per server stat index and the count of checks by
 *    result, written by the health prober, read by workers (health.h);
 *  - the TLS session ticket keys, made and rotated by the master, read by
 *    every worker, so a ticket one worker issued resumes on any other
 *    (ticket.h); never written to disk, kept out of core dumps.
 *
 * The segment is created by the master before it forks, so every worker
 * inherits the mapping at the same address; its fd can be handed to a new
 * master on binary upgrade.
 */
#ifndef WEIR_SHM_SHM_H
#define WEIR_SHM_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/auth_result.h"
#include "common/compress_conf.h"
#include "common/err.h"
#include "common/slab.h"
#include "common/split.h"
#include "shm/balance.h"
#include "shm/resil.h"
#include "shm/health.h"
#include "shm/route_types.h"
#include "shm/stat.h"
#include "shm/ticket.h"

#define SHM_MAGIC 0x52494557u /* "WEIR" */
#define SHM_LAYOUT_VERSION 32u
#define SHM_SLOTS 128 /* worker slots: twice the worker maximum, for reloads */
#define SHM_GENS 8    /* route generations */
/* the arena the route generations' blocks are placed in (shm/route.h says
 * how): address space only, since the memfd is sparse and a block's pages
 * are punched out when its slot is reused */
#define SHM_ARENA ((uint64_t)256 << 20)

/* What asked for a stream or seal buffer, weir_stream_buffers_total{kind} */
#define STREAM_BUF_KIND_TABLE(X)                                                                                       \
	X(RESPONSE, "response") /* an upstream's long response body */                                                \
	X(UPLOAD, "upload")     /* a fast client's long request body */                                               \
	X(TLS_READ, "tls_read") /* a TLS origin's records read ahead */                                               \
	X(TLS_SEAL, "tls_seal") /* a TLS write of more than a record, sealed whole */

enum stream_buf_kind {
#define STREAM_BUF_KIND_ENUM(name, label) STREAM_BUF_##name,
	STREAM_BUF_KIND_TABLE(STREAM_BUF_KIND_ENUM)
#undef STREAM_BUF_KIND_ENUM
	    STREAM_BUF_KINDS
};

/* Why a client handshake failed, a closed set so the counter's labels stay
 * bounded: weir_tls_handshake_failures_total{reason=...}. */
#define TLS_FAIL_TABLE(X)                     \
	X(PROTOCOL, "protocol")               \
	X(PLAIN_HTTP, "plain_http")           \
	X(CLIENT_CERT, "client_certificate")  \
	X(TIMEOUT, "timeout")                 \
	X(CLOSED, "closed")                   \
	X(OTHER, "other")

/* Why an HTTP/2 WebSocket (RFC 8441) was refused:
 * weir_h2_websocket_refused_total{reason=...} (worker/h2/h2_ws.c). */
#define H2_WS_REFUSE_TABLE(X)      \
	X(CONNECT, "connect")      \
	X(PROTOCOL, "protocol")    \
	X(REQUEST, "request")      \
	X(BAD_ACCEPT, "bad_accept")  \
	X(NO_SWITCH, "no_switch")

enum h2_ws_refuse {
#define H2_WS_REFUSE_ENUM(name, label) H2_WS_REFUSE_##name,
	H2_WS_REFUSE_TABLE(H2_WS_REFUSE_ENUM)
#undef H2_WS_REFUSE_ENUM
	H2_WS_REFUSE_COUNT
};

/* Who ended an upgraded tunnel: weir_tunnels_closed_total{by=...}. */
#define TUNNEL_END_TABLE(X)        \
	X(CLIENT, "client")        \
	X(UPSTREAM, "upstream")    \
	X(IDLE, "idle_timeout")    \
	X(DRAIN, "drain")          \
	X(ERROR, "error")

enum tunnel_end {
#define TUNNEL_END_ENUM(name, label) TUNNEL_END_##name,
	TUNNEL_END_TABLE(TUNNEL_END_ENUM)
#undef TUNNEL_END_ENUM
	TUNNEL_END_COUNT
};

enum tls_fail {
#define TLS_FAIL_ENUM(name, label) TLS_FAIL_##name,
	TLS_FAIL_TABLE(TLS_FAIL_ENUM)
#undef TLS_FAIL_ENUM
	TLS_FAIL_COUNT
};

/* HTTP/2 error codes counted one by one: NO_ERROR .. HTTP_1_1_REQUIRED,
 * and one more for any other. */
#define H2_CODES 15
/* weir_h2_streams_per_connection's bucket bounds (the last: +Inf) */
#define H2_SPC_BUCKETS 8
#define H2_SPC_BOUNDS {1, 2, 5, 10, 20, 50, 100}

/* One worker's counters. Counters only grow; gauges go up and down. */
struct shm_counters {
	uint64_t requests;          /* requests whose head was read */
	uint64_t responses[6];      /* by status class: [1]..[5]; [0] unused */
	uint64_t bytes_in;          /* bytes read from clients */
	uint64_t bytes_out;         /* bytes written to clients */
	uint64_t conn_total;        /* client connections accepted */
	uint64_t upstream_connects; /* upstream connections opened */
	uint64_t upstream_reuses;   /* requests sent on a pooled connection */
	uint64_t upstream_retries;  /* requests sent again after a failure */
	uint64_t upstream_replays_refused; /* not sent again: not idempotent and sent */
	uint64_t upstream_pool_trimmed; /* idle connections past keepalive closed by the tick */
	uint64_t errors[WEIR_ERR_COUNT];
	uint64_t tls_handshakes;    /* TLS handshakes completed, resumed or not */
	uint64_t tls_resumed;       /* of which resumed a session (ticket) */
	uint64_t tls_tickets;       /* session tickets sealed for clients */
	uint64_t tls_failures[TLS_FAIL_COUNT]; /* client handshakes failed, by enum tls_fail */
	uint64_t upstream_tls_handshakes; /* TLS handshakes with upstreams completed */
	uint64_t upstream_tls_resumed;    /* of which resumed the session offered */
	uint64_t log_dropped[3];          /* log lines not written, by enum log_drop (common/log.h) */
	uint64_t upstream_marked_down;    /* servers marked down after max_fails failures */
	uint64_t upstream_panics;         /* picks made with every server of the group marked down */
	uint64_t tunnels_opened;          /* upgrades switched to a tunnel (101 relayed) */
	uint64_t tunnel_bytes_up;         /* tunnel bytes client to upstream */
	uint64_t tunnel_bytes_down;       /* tunnel bytes upstream to client */
	uint64_t tunnels_closed[TUNNEL_END_COUNT]; /* tunnels ended, by enum tunnel_end */
	uint64_t outlier_panics;          /* picks that ignored ejections: too few servers usable */
	/* response compression (worker/core/compress.h) */
	uint64_t compress_responses[COMPRESS_ENC_COUNT]; /* compressed, by enum compress_enc */
	uint64_t compress_skipped[COMPRESS_SKIP_COUNT];  /* sent as they came, by enum compress_skip */
	uint64_t compress_bytes_in;       /* body bytes given to the encoders */
	uint64_t compress_bytes_out;      /* bytes they made of them */
	/* ring_hash and maglev (worker/up/balance_hash.c): picks of a request
	 * without its hash_key, servers walked past as unusable, and as over
	 * bounded_load */
	uint64_t hash_fallbacks;
	uint64_t hash_skips;
	uint64_t hash_bounded_walks;
	uint64_t pipe_stalls[2];          /* body spans held back by a stream's pipe_budget: [0] request, [1] response */
	/* limits.stream_buffer, by enum stream_buf_kind: [0] taken, [1] not
	 * (limits.stream_buffers held, or no memory) */
	uint64_t stream_buffers[STREAM_BUF_KINDS][2];
	uint64_t h2_sessions_total;       /* HTTP/2 connections (worker/h2/h2.h) */
	uint64_t h2_streams_total;        /* HTTP/2 streams opened by clients */
	uint64_t h2_rst_recv[H2_CODES];   /* RST_STREAM from clients, by error code (last: other) */
	uint64_t h2_rst_sent[H2_CODES];   /* RST_STREAM sent, by error code */
	uint64_t h2_goaway_sent[H2_CODES];/* GOAWAY sent, by error code */
	uint64_t h2_stalls;               /* response writes refused: the client's window held a stream full */
	uint64_t h2_data_bytes[2];        /* response DATA payload: [0] sent from where it lay, [1] copied to be sent */
	uint64_t h2_ws_opened;            /* WebSocket over HTTP/2: tunnels opened (a checked 101 made a 200) */
	uint64_t h2_ws_refused[H2_WS_REFUSE_COUNT]; /* and extended CONNECTs refused, by enum h2_ws_refuse */
	uint64_t h2_spc[H2_SPC_BUCKETS];  /* HTTP/2 connections closed, by the streams they carried (not cumulative) */
	uint64_t h2_spc_sum;              /* and those streams */
	/* HTTP/2 to upstreams (worker/up/h2_client.h) */
	uint64_t h2up_sessions_total;     /* sessions opened */
	uint64_t h2up_streams_total;      /* streams opened */
	uint64_t h2up_rst_recv[H2_CODES]; /* RST_STREAM from servers, by error code */
	uint64_t h2up_rst_sent[H2_CODES]; /* RST_STREAM sent to servers, by error code */
	uint64_t h2up_goaway_recv[H2_CODES]; /* GOAWAY from servers, by error code */
	/* gauges */
	uint64_t conn_active;       /* client connections open */
	uint64_t upstream_active;   /* upstream connections open */
	uint64_t tunnels_active;    /* tunnels open */
	uint64_t h2_streams_active; /* HTTP/2 streams open (until torn down) */
	uint64_t h2_ws_active;      /* WebSocket-over-HTTP/2 tunnels open */
	uint64_t h2up_sessions_active; /* HTTP/2 sessions to upstreams open */
	uint64_t h2up_streams_active;  /* and their streams */
	uint64_t slab_in_use;       /* slab bytes handed out */
	uint64_t slab_free;         /* slab bytes mapped, not handed out */
	uint64_t tls_mem_in_use;    /* BoringSSL heap (common/secmem.h): bytes handed out */
	uint64_t tls_mem_held;      /* and bytes made into blocks, free ones included */
	uint64_t h2_mem_in_use;     /* libnghttp2's heap (worker/h2/h2.h): bytes handed out */
	uint64_t h2_mem_held;       /* and bytes made into blocks, free ones included */
	uint64_t compress_streams;  /* responses being compressed */
	uint64_t compress_mem_in_use; /* encoder state handed out of the pool */
	/* per slab size class (common/slab.h), by class index: bytes of
	 * objects handed out, bytes mapped, the most ever mapped (each
	 * worker's own peak: their sum bounds the total's), and bytes mapped
	 * that no object can use */
	uint64_t slab_class_in_use[SLAB_MAX_CLASSES];
	uint64_t slab_class_held[SLAB_MAX_CLASSES];
	uint64_t slab_class_high_water[SLAB_MAX_CLASSES];
	uint64_t slab_class_unusable[SLAB_MAX_CLASSES];
};

/* Fields from <requests> to <errors> are counters; the rest are gauges. */
#define SHM_COUNTERS_MONOTONIC offsetof(struct shm_counters, conn_active)

/* One route's counters (stat index). Durations are kept per
 * bucket and summed in microseconds; the master renders seconds. */
struct shm_route_counters {
	uint64_t requests;               /* requests routed here */
	uint64_t responses[5];           /* answers by status class: [0] 1xx .. [4] 5xx */
	uint64_t duration[STAT_BUCKETS]; /* first request byte to the end of the answer */
	uint64_t duration_us;
	uint64_t upstream[STAT_BUCKETS]; /* upstream attached to the end of its response */
	uint64_t upstream_us;
	uint64_t auth[AUTH_R_COUNT];     /* routes.auth outcomes (common/auth_result.h) */
	uint64_t auth_cached;            /* of them ok from a worker's cache (JWT, Basic) */
	uint64_t auth_hashes;            /* password hashes computed (Basic) */
	uint64_t split[SPLIT_SIDES];     /* routes.split: requests sent to each side, by its place */
	uint64_t split_random;           /* of them without a key: drawn by weight */
	uint64_t split_override;         /* of them forced by split_override */
	uint64_t mirror[3];              /* routes.mirror copies, by enum mirror_result */
};

/* One server's counters (stat index), one cache line. */
struct shm_server_counters {
	uint64_t requests;     /* requests sent to it, retries included */
	uint64_t responses[5]; /* answers to requests it was sent, by status class */
	uint64_t connects;     /* connections opened to it */
	uint64_t reuses;       /* requests sent on a kept-alive connection to it */
};

/* Admin word of a server stat index: state in the high half, weight in the
 * low half (0: the configured weight). 0 means no override at all. */
enum shm_admin_state {
	SHM_ADMIN_UP = 0,
	SHM_ADMIN_DRAIN = 1,
	SHM_ADMIN_DOWN = 2,
};
/* "up", "drain", "down": by enum shm_admin_state, for /upstreams and /metrics */
extern const char *const shm_admin_state_names[3];
extern const char *const stream_buf_kind_names[STREAM_BUF_KINDS];
#define SHM_ADMIN_STATE(w) ((uint32_t)(w) >> 16)
#define SHM_ADMIN_WEIGHT(w) ((uint32_t)(w)&0xffffu)
#define SHM_ADMIN_WORD(state, weight) (((uint32_t)(state) << 16) | ((uint32_t)(weight)&0xffffu))

enum shm_slot_state {
	SHM_SLOT_FREE = 0,
	SHM_SLOT_RUNNING,
	SHM_SLOT_DRAINING,
};

struct shm_slot {
	_Alignas(64) struct shm_counters c;
	_Alignas(64) _Atomic uint64_t gen_seen; /* generation id the worker last took */
	/* oldest generation a request in flight still reads (0: none): a long
	 * request keeps its table across reloads, and generations only grow,
	 * so every table from this one on is protected */
	_Atomic uint64_t gen_min;
	_Atomic int32_t pid;
	_Atomic int32_t state;
	/* object size of each slab class, 0 past the last: labels, not summed */
	_Atomic uint32_t slab_size[SLAB_MAX_CLASSES];
	_Alignas(64) struct shm_route_counters routes[STAT_ROUTES];
	struct shm_server_counters servers[STAT_SERVERS];
};

struct shm_segment {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	_Atomic uint32_t gen_current; /* index into gens[] */
	uint64_t gen_next_id;         /* master only */
	uint64_t started_at;          /* unix seconds */
	_Atomic uint64_t worker_restarts;
	_Atomic uint64_t reloads_ok;
	_Atomic uint64_t reloads_failed;
	_Atomic uint64_t reloads_deferred; /* waited for a draining worker */
	_Atomic uint64_t config_generation; /* 1 at start, +1 per reload */
	_Alignas(64) struct shm_counters retired; /* master only */
	_Alignas(64) struct shm_route_counters retired_routes[STAT_ROUTES];
	struct shm_server_counters retired_servers[STAT_SERVERS];
	_Alignas(64) _Atomic uint32_t admin[STAT_SERVERS]; /* SHM_ADMIN_WORD per server stat index */
	/* node-wide outlier state per server stat index (resil.h) */
	struct shm_resil_server resil[STAT_SERVERS];
	/* node-wide limits and breaker state per group name (resil.h) */
	struct shm_resil_groups resil_groups;
	struct shm_health health;                          /* active checks' results (health.h) */
	/* requests in flight per server stat index, for least_request (balance.h) */
	struct shm_balance_server balance[STAT_SERVERS];
	struct stat_keys keys;
	struct shm_slot slots[SHM_SLOTS];
	struct route_table gens[SHM_GENS]; /* headers; their blocks are in the arena */
	/* session ticket keys (shm/ticket.h): their own page, so it alone is
	 * kept out of core dumps (MADV_DONTDUMP) */
	struct shm_ticket_keys ticket;
};

/*
 * Size: 31.3 MiB for the struct (each slot's per-key counters are 192 KiB,
 * 64 KiB for routes and 128 KiB for servers, times 128 slots and the
 * retired block; the health words and check counts 152 KiB; outlier state
 * 256 KiB, group limits and breakers 512 KiB, least_request counts 128
 * KiB), then the 256 MiB arena of the route generations (rate limits and
 * returns in them). The
 * memfd is sparse and only pages that are written or read get backed: a
 * slot nobody claimed costs nothing, and sums read only the slots in use
 * and the stat indices handed out.
 */

/* Single-writer counter update: a relaxed load and store, no lock prefix. */
#define SHM_ADD(cnt, field, n) \
	atomic_store_explicit((_Atomic uint64_t *)&(cnt)->field, (cnt)->field + (uint64_t)(n), memory_order_relaxed)
#define SHM_SET(cnt, field, v) \
	atomic_store_explicit((_Atomic uint64_t *)&(cnt)->field, (uint64_t)(v), memory_order_relaxed)

/* Where the arena starts in the segment, and the segment's whole size. */
#define SHM_ARENA_OFF (((uint64_t)sizeof(struct shm_segment) + 4095) & ~(uint64_t)4095)
#define SHM_SIZE (SHM_ARENA_OFF + SHM_ARENA)

static inline char *shm_arena(const struct shm_segment *seg)
{
	return (char *)seg + SHM_ARENA_OFF;
}

/* Gives back the pages of arena bytes [off, off + len) (whole pages
 * within; master only, for a block no reader can be on). */
void shm_arena_release(struct shm_segment *seg, uint64_t off, uint64_t len);

/* Creates and maps a zeroed segment. Returns it, or NULL with errno. *fd
 * receives the memfd (kept for hand-over). */
struct shm_segment *shm_create(int *fd);

/* Maps an existing segment from <fd>; NULL if the magic, version or size
 * do not match this binary (a message goes to *why). */
struct shm_segment *shm_attach(int fd, const char **why);

/* Sums every slot and the retired block into <out>. */
void shm_sum(struct shm_segment *seg, struct shm_counters *out);

/* The object size of each slab class over the slots in use (the largest,
 * when workers of two configs differ), 0 for a class no worker has. */
void shm_slab_sizes(struct shm_segment *seg, uint32_t sizes[SLAB_MAX_CLASSES]);

/* Worker slots with a live process. */
int shm_workers_alive(struct shm_segment *seg);

/* Sums the per-key counters of every slot in use and the retired block
 * into <routes> (STAT_ROUTES entries; may be NULL when only servers are
 * wanted) and <servers> (STAT_SERVERS), for the stat indices handed out so
 * far and the "other" index; the rest is zeroed. */
void shm_sum_keys(struct shm_segment *seg, struct shm_route_counters *routes, struct shm_server_counters *servers);

/* The admin word of server stat index <stat> (relaxed: a worker picking a
 * server may see a change one request late, never a torn word). */
static inline uint32_t shm_admin(const struct shm_segment *seg, uint16_t stat)
{
	return atomic_load_explicit((_Atomic uint32_t *)&seg->admin[stat], memory_order_relaxed);
}

/* Zeroes the counters of route (server) stat index <i> in every slot and
 * the retired block (and a server's admin and health words), for a key index handed to
 * a new key: master only, once no worker can count into it (stat.h). */
void shm_key_zero_route(struct shm_segment *seg, uint16_t i);
void shm_key_zero_server(struct shm_segment *seg, uint16_t i);

/* Claims a free worker slot (marks it running); -1 if none. Atomic, as
 * two masters share the segment during a binary upgrade. */
int shm_slot_claim(struct shm_segment *seg);

/* Folds the counters of slot <i> into the retired block and clears the slot,
 * for a worker that has exited. Master only. */
void shm_slot_retire(struct shm_segment *seg, int i);

#endif
