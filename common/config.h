/*
 * config.h: weir's configuration, read from a libconfig file.
 *
 * Principle: loading never exits and never half-succeeds. config_load()
 * either fills a complete struct config (every default applied, every value
 * checked, every route resolved to an upstream index) or returns the list of
 * everything that is wrong, each as "FILE:LINE: what is wrong". The master
 * uses it for start-up, for `weir -t` and for reload alike, so a reload is
 * all or nothing: a bad file changes nothing.
 *
 * The struct is plain data allocated with malloc (it lives in the master and
 * is inherited by forked workers); config_free() releases it.
 */
#ifndef WEIR_COMMON_CONFIG_H
#define WEIR_COMMON_CONFIG_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/policy.h"
#include "common/config_resil.h"
#include "common/config_health.h"
#include "common/compress_conf.h"
#include "common/hdrrules.h"
#include "common/split.h"
#include "common/config_hash.h"

#define CONFIG_NAME_MAX 64    /* upstream names, including the NUL */
#define CONFIG_HOST_MAX 256   /* route host pattern, including the NUL */
#define CONFIG_PATH_MAX 256   /* route path prefix, including the NUL */
#define CONFIG_ADDR_STR_MAX 64 /* "[v6]:port" text, including the NUL */
#define CONFIG_UPGRADE_MAX 64  /* a route's upgrade tokens, space-separated, with the NUL */
#define CONFIG_MAX_WORKERS 64
#define CONFIG_MAX_LISTENERS 32
#define CONFIG_MAX_UPSTREAMS 256
#define CONFIG_MAX_SERVERS 1024 /* over all upstreams */
#define CONFIG_MAX_ROUTES 65536 /* the route generation has no fixed room: shm/route.h */
#define CONFIG_MAX_ERRORS 32
#define CONFIG_MAX_CERTS 64 /* over all TLS listeners */
#define CONFIG_MAX_RATE_LIMITS 64 /* rate_limits entries */
#define CONFIG_ROUTE_LIMITS 8     /* rate limits one route names */
#define CONFIG_LIMIT_PARTS 4      /* parts of one limit's key, joined by '+' */

/* A socket address as parsed from "1.2.3.4:80" or "[::1]:80". <text> keeps
 * the address as written back in canonical form, for logs. */
struct config_addr {
	struct sockaddr_storage sa;
	socklen_t len;
	char text[CONFIG_ADDR_STR_MAX];
};

struct tlscert;
struct tlsca;
struct x509_store_st;
struct config_auth;
struct config_split;

/* One certificate of a TLS listener: its files, and what was read from
 * them (common/tlscert.h), owned by the config. */
struct config_cert {
	char cert[1024];
	char key[1024];
	char ocsp[1024]; /* DER OCSP response to staple, "" for none */
	int line;
	struct tlscert *loaded;
};

enum config_client_verify {
	CONFIG_CLIENT_VERIFY_OFF,      /* no client_ca: no certificate asked for */
	CONFIG_CLIENT_VERIFY_OPTIONAL, /* asked for; none is fine, a bad one is not */
	CONFIG_CLIENT_VERIFY_REQUIRED, /* no valid certificate, no handshake */
};

enum config_affinity { CONFIG_AFFINITY_OFF, CONFIG_AFFINITY_ON, CONFIG_AFFINITY_AUTO };
enum config_steering { CONFIG_STEER_CPU, CONFIG_STEER_HASH };

struct config_listener {
	struct config_addr addr;
	int backlog; /* default 511 */
	/* tcp_fastopen: TCP_FASTOPEN queue length, 0 (default) off;
	 * defer_accept: TCP_DEFER_ACCEPT in ms, 0 (default) off */
	int tcp_fastopen;
	uint32_t defer_accept;
	int line;    /* line of the entry in the file, for messages */
	/* tls = { certificates = ( { cert = ...; key = ...; }, ... ); }: the
	 * first certificate is the default, the others are chosen by SNI */
	int tls;
	int first_cert; /* index into config.certs */
	int ncerts;
	/* client certificates: client_ca = "..."; client_verify = "required"
	 * (default) | "optional"; client_header = "X-Client-Subject" (optional:
	 * the verified subject goes upstream in it, and a client's own header
	 * of that name never does) */
	char client_ca[1024];
	struct tlsca *client_cas; /* loaded from client_ca, owned by the config */
	enum config_client_verify client_verify;
	char client_header[CONFIG_NAME_MAX]; /* "" for none */
	/* early_data = true: TLS 1.3 0-RTT accepted on resumption (default
	 * false). Only bodiless GET, HEAD and OPTIONS requests are served from
	 * early data, with "Early-Data: 1" upstream (RFC 8470); any other
	 * request that arrives in early data is answered 425 Too Early */
	int early_data;
	/* session_tickets = N (0..8, default 1): tickets sent after each TLS
	 * 1.3 handshake; 0 sends none and resumes none (TLS 1.2 too) */
	int session_tickets;
	/* proxy_protocol = true: every connection starts with a PROXY protocol
	 * header (v1 or v2, worker/proxy_proto.h) from an L4 balancer, whose
	 * source address becomes the client's; one without it is closed.
	 * Default false: a PROXY line is then a malformed request, as ever */
	int proxy_protocol;
	/* h2c = true (default): a plain connection that opens with the
	 * HTTP/2 preface speaks HTTP/2 (prior knowledge, worker/h2/h2.h) */
	int h2c;
	/* tls.alpn = "h2,http/1.1" (default): the protocols offered, in the
	 * server's order of preference; "http/1.1" turns HTTP/2 off */
	char alpn[32];
};

/* http2 = { ... }: the HTTP/2 server's bounds (worker/h2/h2.h). */
struct config_http2 {
	uint32_t max_concurrent_streams; /* 100; a reset stream counts until torn down */
	uint32_t max_resets;        /* client resets of unanswered streams a second: 100, then GOAWAY */
	uint32_t max_continuations; /* CONTINUATION frames after one HEADERS: 8 */
	uint32_t control_frames;    /* frames that do no work a second: 1000, then GOAWAY */
	uint32_t overhead_ratio;    /* bytes received per payload byte, past 1 MiB: 8, then GOAWAY; 0 none */
	uint32_t header_table_size; /* HPACK dynamic table, both ways: 4096 */
	uint32_t settings_timeout;  /* ms: 10 s for the client's SETTINGS ACK */
	/* websocket = true (default): SETTINGS_ENABLE_CONNECT_PROTOCOL, and
	 * an extended CONNECT (RFC 8441) becomes a WebSocket upgrade upstream */
	int websocket;
};

/* All durations in milliseconds. */
struct config_timeouts {
	uint32_t client_header;    /* whole request head must arrive: 10 s, else 408 */
	uint32_t client_body;      /* idle gap while reading a request body: 30 s, else 408 */
	uint32_t client_keepalive; /* idle client connection between requests: 60 s */
	uint32_t client_send;      /* client not taking our bytes: 30 s, then close */
	uint32_t upstream_connect; /* 5 s, then the next server; 504 when none is left */
	uint32_t upstream_send;    /* upstream not taking the request: 60 s, 504 */
	uint32_t upstream_read;    /* idle gap while waiting for response bytes: 60 s, 504 */
	uint32_t upstream_keepalive; /* pooled idle upstream connection: 60 s */
	uint32_t drain;            /* graceful stop bound: 30 s */
	uint32_t rate_window;      /* minimum rates are averaged over this: 20 s (0 = no rate checks) */
	uint32_t request;          /* first request byte to last response byte: 0 = no cap */
	uint32_t slab_idle;        /* a wholly free slab chunk is unmapped after: 30 s */
	uint32_t tunnel;           /* idle gap either way in an upgraded tunnel: 1 h */
	uint32_t tunnel_drain;     /* a draining worker keeps its tunnels this long: 5 min */
	uint32_t proxy_protocol;   /* PROXY header on a proxy_protocol listener: 5 s, else close */
};

struct config_limits {
	uint32_t header_size;  /* request line + headers, bytes: 16384 (1024..65536), 431 past it */
	uint32_t headers;      /* header count: 100 (1..1000), 431 past it */
	uint32_t uri_size;     /* request target: 8192 (64..header_size), 414 past it */
	uint32_t stream_buffer; /* read buffer of a long upstream response body: 65536 (0 = the I/O
	                         * buffer); global only */
	uint64_t body_size;    /* request body: 104857600 (0 = unlimited), 413 past it */
	uint32_t connections;  /* client connections per worker: 16384 */
	uint32_t response_header_size; /* upstream status line + headers: 16384, 502 past it */
	uint32_t body_buffer;  /* request bodies up to this are read whole before connecting: 65536 (0 = off) */
	uint32_t client_body_rate; /* request body bytes/s at least, over rate_window: 512 (0 = off), 408 */
	uint32_t client_send_rate; /* response bytes/s the client takes at least: 512 (0 = off), cut */
	uint32_t pipe_budget;  /* body bytes a stream holds read from one side, not yet written to the
	                        * other, per direction: 65536 (1024..16777216) */
	uint32_t stream_buffers; /* stream buffers a worker holds at once: 1024 (0 = none); global only */
};
/* route tables in the shared segment hold this struct: a change of its size
 * is a change of the segment's layout (SHM_LAYOUT_VERSION) */
_Static_assert(sizeof(struct config_limits) == 56, "struct config_limits keeps its layout");

/*
 * timeouts = { ... } and request_limits = { ... } on an upstream group,
 * timeouts = { ... } and limits = { ... } on a route:
 * the keys that make sense per request (config_keys_over_timeouts and
 * config_keys_over_limits, common/config_keys.c), only those given; bit i
 * of <timeouts_set> (<limits_set>) says key i of that keyset was. They
 * override the global values, a route's over its group's
 * (config_overrides_apply); the master resolves them into the route
 * generation (shm/route.h), where requests read them.
 */
struct config_overrides {
	struct config_timeouts timeouts;
	struct config_limits limits;
	uint32_t timeouts_set;
	uint32_t limits_set;
};

/* Writes the keys <o> gives over <t> and <l>. */
void config_overrides_apply(const struct config_overrides *o, struct config_timeouts *t, struct config_limits *l);

struct config_server {
	struct config_addr addr;
	int weight; /* 1..1000, default 1 */
};

struct config_upstream {
	char name[CONFIG_NAME_MAX];
	int first_server; /* index into config.servers */
	int nservers;     /* at least 1 */
	int keepalive;    /* idle connections kept per server per worker, default 32, 0 = none */
	/* passive health, per worker: max_fails connect failures in a row
	 * (default 3, 0 = never), each within fail_timeout (ms, default 10 s)
	 * of the one before, skip a server for fail_timeout */
	int max_fails;
	uint32_t fail_timeout;
	/* balance = "rr" | "random" | "least_request" | "ring_hash" | "maglev"
	 * (worker/up/up.h: balance);
	 * choices: candidates least_request draws (2..8) */
	int balance;
	int choices;
	uint32_t slow_start; /* ms a joining or returning server ramps its weight over; 0: off */
	/* tls = { ca = ...; verify = ...; sni = ...; }: TLS to every server of
	 * the group. verify (default true) checks the chain against <tls_ca>
	 * and the name against <tls_sni>, both then required; the CA file is
	 * read by the loader (as root, like certificates) into <tls_store>,
	 * owned by the config */
	int tls;
	int tls_verify;
	char tls_ca[1024];
	char tls_sni[CONFIG_HOST_MAX]; /* SNI sent and name checked; "" none */
	struct x509_store_st *tls_store;
	/* proxy_protocol = "v1" | "v2": a PROXY header with the client's
	 * address opens every connection to the group's servers (worker/
	 * upproxy.h), which are then never pooled; "off" (default): none */
	int proxy_protocol;
	/* protocol = "http/1.1" (0, default) | "h2c" (1) | "h2" (2): HTTP/2
	 * sessions to the servers (worker/up/h2_client.h); "h2" needs tls */
	int protocol;
	uint64_t tls_ca_sum; /* digest of the CA file as read, so a context is matched by what it trusts */
	struct config_resil resil;    /* outlier, ...: common/config_resil.h */
	struct config_health health;  /* active checks: health.type 0 when none */
	struct config_overrides over; /* timeouts = {...}, request_limits = {...} */
	struct hdrrules_ref hdr;      /* headers = {...}: its run in config.hdr (common/hdrrules.h) */
	struct config_hash hash;      /* ring_hash and maglev: common/config_hash.h */
};

enum config_host_kind {
	CONFIG_HOST_ANY,      /* "*" or host omitted: matches every host */
	CONFIG_HOST_EXACT,    /* "api.example.com" */
	CONFIG_HOST_WILDCARD, /* "*.example.com": any host ending in ".example.com" */
};

/* A route's host as operators write it: "*", "api.example.com" or
 * "*.example.com" (a wildcard's ".example.com" is put in <buf>). */
const char *config_host_text(int host_kind, const char *host, char *buf, size_t cap);

struct config_route {
	enum config_host_kind host_kind;
	/* lower-case; for WILDCARD the suffix with its leading dot (".example.com");
	 * for ANY the empty string */
	char host[CONFIG_HOST_MAX];
	char path[CONFIG_PATH_MAX]; /* prefix, starts with '/', default "/" */
	int upstream;               /* index into config.upstreams */
	/* upgrade = [ "websocket" ]: the Upgrade tokens forwarded (lower case,
	 * space-separated; default "websocket", "" turns upgrades off); h2c
	 * is never allowed */
	char upgrade[CONFIG_UPGRADE_MAX];
	/* return = { ... }: answered by weir, no upstream (upstream is then
	 * -1): index into config.returns, -1 for none */
	int ret;
	/* log = false: no access log line; log_sample = "0.1": a line for
	 * that share of requests, in 1/10000 (default 10000: every one) */
	int log;
	uint32_t log_sample;
	/* abort_on_client_close: the top-level key's, unless the route says */
	int abort_on_client_close;
	struct config_overrides over; /* timeouts = {...}, limits = {...}: over its group's */
	/* auth = { type = ...; }: the route's authentication policy and the
	 * keys it loaded (common/auth_conf.h), malloc'd; NULL for none */
	struct config_auth *auth;
	/* rate_limits = [ "per-ip", ... ]: indices into config.rate_limits,
	 * checked all at once (worker/ratelimit.h) */
	uint8_t rate_limits[CONFIG_ROUTE_LIMITS];
	uint8_t nrate_limits;
	/* compress = { ... }: its keys over the top level's (compress_conf.h),
	 * malloc'd; NULL: the top level's applies */
	struct config_compress *compress;
	int line;
	/* path_exact, path_regex, methods, match_headers, match_query,
	 * strip_prefix, rewrite (common/config_match.h), malloc'd; NULL for
	 * a route with none of them */
	struct config_match *match;
	/* headers = {...}: its run in config.hdr, its group's rules first
	 * (common/hdrrules.h) */
	struct hdrrules_ref hdr;
	/* split = ( ... ): the groups it splits between, instead of one
	 * upstream (common/split.h), malloc'd; NULL for none. upstream is
	 * then its first side's group */
	struct config_split *split;
	struct config_mirror mirror; /* mirror = { ... } (common/split.h); group 0: none */
};

/* rate_limits entries (docs/config.md, "Rate limits"): how a request's key
 * is made, and what a key may do. */
enum config_rl_mode { CONFIG_RL_REJECT, CONFIG_RL_DELAY, CONFIG_RL_DRY_RUN };
enum config_rl_missing { CONFIG_RL_SKIP, CONFIG_RL_SHARED };
enum config_rl_scope { CONFIG_RL_LOCAL, CONFIG_RL_CLUSTER };
enum config_rl_part { CONFIG_RL_CLIENT_IP, CONFIG_RL_HEADER, CONFIG_RL_COOKIE, CONFIG_RL_QUERY, CONFIG_RL_ROUTE };

struct config_rate_limit {
	char name[CONFIG_NAME_MAX];
	char key[256]; /* as written: "client_ip+header:X-Api-Key" */
	char rate[32]; /* as written: "100/s", "6000/m", "10/h"; "" for a concurrent limit */
	struct {
		uint8_t kind; /* enum config_rl_part */
		uint8_t len;  /* of name */
		char name[CONFIG_NAME_MAX]; /* header, cookie or query parameter name */
	} parts[CONFIG_LIMIT_PARTS];
	int nparts;
	uint64_t interval_ns; /* rate: one request per this (GCRA's emission interval) */
	uint32_t quota;       /* rate: requests per window, as written (100 of "100/s") */
	uint32_t window;      /* and the window in seconds (1, 60, 3600) */
	int burst;            /* requests admitted at once from rest, or queued (delay) */
	int concurrent;       /* > 0: requests in flight per key, instead of a rate */
	int mode;             /* enum config_rl_mode */
	int missing;          /* enum config_rl_missing */
	int status;           /* answer when refused: 429 */
	int legacy_headers;   /* X-RateLimit-* as well */
	int ipv4_mask, ipv6_mask;
	/* scope = "cluster": reconciled with the other nodes through redis
	 * (master/redis_sync.c); fail_closed: refuse while redis is away */
	int scope;
	int fail_closed;
	/* adaptive = { upstream; latency_p99; floor; window; }: the master
	 * scales the rate by its upstream's health (master/adaptive.c) */
	struct {
		int on;
		char upstream[CONFIG_NAME_MAX];
		char floor[32];       /* as written; "" for no floor */
		uint32_t latency_p99; /* ms: above it, 0.6x */
		uint32_t window;      /* ms the health is judged over */
		uint64_t floor_ns;    /* the emission interval never exceeds it; 0: none */
	} adaptive;
	int line;
	/* identity of the state: name, key, masks and kind hashed; the same
	 * across reloads and upgrades while those stay (shm/limit.h) */
	uint64_t seed;
	uint32_t id; /* stable index for counters, given by the master (limit_assign) */
};

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_NOTICE,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};

struct config_log {
	char error_path[4096];  /* "stderr" (default) or a file path */
	char access_path[4096]; /* "stderr", "off" (default "stderr") or a file path */
	enum log_level level;   /* default LOG_LEVEL_INFO */
	/* ms an access line may wait in a worker's buffer before it is
	 * written (default 1000); 0: at the end of the loop pass that made it */
	uint32_t access_flush;
	/* "weir" (default, the line weir always wrote), "combined" (nginx's),
	 * "json", or a format of variables (common/vars.h) */
	char format[VARS_TEXT];
};

struct config {
	char *file;  /* the path it was read from (malloc'd) */
	int workers; /* resolved: "auto" becomes the number of online cores; 1..64 */
	/* false: no master process, the single worker runs in the process
	 * started (as nginx's "master_process off"): for profiling and
	 * benchmarks, not production. Requires workers = 1. Default true. */
	int master_process;
	/* worker_cpu_affinity: worker i pins itself to the i-th CPU the
	 * process may run on (common/affinity.h). "auto" (the default) is on
	 * when workers equal the online cores */
	enum config_affinity worker_cpu_affinity;
	/* reuseport_steering = "cpu": while affinity is on, a reuseport BPF
	 * program hands a connection to the worker on the CPU that received
	 * it; "hash" (default): the kernel's 4-tuple hash. Not "cpu" by
	 * default: behind a NIC with fewer queues than workers it would feed
	 * every connection to the few workers on the receiving CPUs */
	enum config_steering reuseport_steering;

	struct config_listener listeners[CONFIG_MAX_LISTENERS];
	int nlisteners; /* at least 1 */

	struct config_upstream *upstreams; /* malloc'd, nupstreams entries */
	int nupstreams;
	struct config_server *servers; /* malloc'd, nservers entries */
	int nservers;
	struct config_route *routes; /* malloc'd, nroutes entries, in file order */
	int nroutes;
	struct config_cert *certs; /* malloc'd, ncerts entries (TLS listeners) */
	int ncerts;
	struct config_rate_limit *rate_limits; /* malloc'd, nrate_limits entries */
	int nrate_limits;
	int nsplits; /* routes with a split (config_split.index: 0..nsplits - 1) */
	/* rate_limit_table: keys the shared rate-limit table holds (all limits
	 * together); read at start, kept across reloads (shm/limit.h) */
	uint32_t rate_limit_table;
	/* redis = { address = "127.0.0.1:6379"; interval = "100ms"; }: where
	 * scope = "cluster" limits are reconciled, and how often */
	int has_redis;
	struct config_addr redis_addr;
	uint32_t redis_interval; /* ms */
	struct config_http2 http2;
	/* tls_ticket_rotate: how often the master makes a new session ticket
	 * key (the previous one still decrypts); default 12 h */
	uint32_t tls_ticket_rotate;
	/* merge_slashes: runs of '/' in a request path are one '/' for
	 * routing and forwarding ("//admin" is "/admin"), as nginx's
	 * merge_slashes; default true */
	int merge_slashes;
	/* underscores_in_headers: false drops every request header with a
	 * '_' in its name, as nginx's default; true (default) drops only
	 * those that read as a header weir owns (Transfer_Encoding) */
	int underscores_in_headers;
	/* abort_on_client_close: a client that closes (or half-closes) its
	 * connection before the answer has come takes its upstream request
	 * with it, logged 499, as nginx's default; false keeps it, as
	 * HAProxy's default, for clients that half-close after sending.
	 * Default true */
	int abort_on_client_close;

	struct config_timeouts timeouts;
	struct config_limits limits;
	struct config_log log;
	char pid_file[4096]; /* "" (default): none */

	/* user the workers run as when the master starts as root (the master
	 * keeps root to bind sockets and for reloads); "" (default): no change */
	char user[64];
	unsigned uid, gid; /* resolved from user at load time */

	/* stats socket served by the master: GET /metrics (Prometheus text) and
	 * the admin commands; on a TCP address, a unix socket, or both */
	int has_stats;            /* 1 when stats.listen is set */
	struct config_addr stats; /* stats.listen, e.g. "127.0.0.1:9901" */
	char stats_unix[108];     /* stats.unix, a socket path; "" for none */
	unsigned stats_mode;      /* stats.mode, file mode of the unix socket: 0660 */
	int stats_allow_remote;   /* stats.allow_remote: listen may be non-loopback */
	/* stats.admin_token: admin commands over TCP need "Authorization:
	 * Bearer <it>"; "" (default): they need a loopback-only socket */
	char stats_admin_token[129];

	/* trusted_proxies = [ "10.0.0.0/8", ... ]: peers whose X-Forwarded-For
	 * (and X-Request-Id) are believed, to real_ip_depth hops
	 * (worker/realip.h); none (default): the peer is the client */
	struct policy_cidr trusted[POLICY_TRUSTED_MAX];
	int ntrusted;
	uint32_t real_ip_depth; /* 1..16, default 1 */
	/* request_id = true: X-Request-Id kept from a trusted peer or made,
	 * sent upstream and in the response; default false */
	int request_id;
	struct policy_return *returns; /* malloc'd, nreturns entries */
	int nreturns;
	/* compress = { ... }: response compression for every route that
	 * has no block of its own (compress_conf.h); off when absent */
	struct config_compress compress;
	/* every route's and group's header rules (common/hdrrules.h), NULL
	 * when there are none */
	struct hdrrules_conf *hdr;
};

struct config_errors {
	int count; /* may exceed CONFIG_MAX_ERRORS; only the first are kept */
	char msg[CONFIG_MAX_ERRORS][512];
};

/*
 * Reads <path> into <cfg>. Returns 0 with <cfg> complete, or -1 with <errs>
 * filled and <cfg> left zeroed (nothing to free). Never exits, never prints.
 */
int config_load(const char *path, struct config *cfg, struct config_errors *errs);

/* Frees what config_load() allocated; <cfg> may be zeroed. */
void config_free(struct config *cfg);

/*
 * Parses "1.2.3.4:80", "[::1]:80" or "*:80" (all IPv4 addresses) into
 * <addr>. Returns 0, or -1 if it is not such an address. Used by the loader
 * and by tests.
 */
int config_parse_addr(const char *text, struct config_addr *addr);

/* Parses a duration: "250ms", "5s", "2m", "1h" or a bare number of ms. */
int config_parse_duration(const char *text, uint32_t *ms);

/* Parses a size: "512", "16k", "1m", "1g" (powers of 1024). */
int config_parse_size(const char *text, uint64_t *bytes);

/* Parses a decimal "1", "0.25" exactly (no locale, no float rounding)
 * into *<v> in 1/<scale> (a power of ten: at most that many decimals).
 * Returns 0, or -1 if it is not such a number or passes 2^32 / <scale>. */
int config_parse_decimal(const char *text, uint32_t scale, uint32_t *v);

const char *config_log_level_name(enum log_level level);

#endif
