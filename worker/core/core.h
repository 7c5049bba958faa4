/*
 * core: the stream core (the door of worker/core/): one request in
 * flight as a stream with two sides, its fixed phases (phase.c,
 * txn_phases.c: the life of a request in order), the pump that moves both
 * directions with back-pressure (txn.c), the client's clocks and body
 * buffering (txn_client.c), and Upgrade tunnels (tunnel.c).
 */
#ifndef WEIR_WORKER_CORE_H
#define WEIR_WORKER_CORE_H

#include <ev.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "common/auth_conf.h"
#include "common/config.h"
#include "shm/route.h"
#include "common/vars.h"
#include <stdint.h>
#include <sys/uio.h>

#include "common/compress_conf.h"
#include "common/config.h"
#include "worker/base/base.h"
#include "worker/core/phase.h"
#include "worker/h1/h1.h"

/* ==== compress ==== */
/*
 * compress: gzip and brotli compression of responses (compress = { ... },
 * common/compress_conf.h), the worker's side.
 *
 * Principle: a response filter decides, a body filter encodes. In the
 * request phase the client's Accept-Encoding is read into q-values (the
 * request's header list is gone once the response head is parsed). The
 * response filter then compresses a response only if its route's block
 * is on, it has a body, the upstream sent no Content-Encoding, it is no
 * range (206, Content-Range), no Cache-Control: no-transform, its type is
 * listed, its length is unknown or at least min_length, and the client
 * accepts br or gzip (the higher q-value; br on a tie). Such a response
 * loses Content-Length and Accept-Ranges, gains Content-Encoding and
 * Vary: Accept-Encoding (Vary also when only the client's acceptance was
 * missing, so caches keep both forms apart), and a strong ETag becomes a
 * weak one, as nginx does; it goes chunked to an HTTP/1.1 client and
 * until the close to an HTTP/1.0 one. Every response on a route with
 * compression on is counted, compressed by encoding or skipped by reason.
 *
 * Memory is bounded per stream and per worker. Each body span is encoded
 * into one output buffer of the worker's slab, queued to the client; the
 * upstream is not read again until that buffer is written and the span
 * wholly encoded (the source is consumed as the encoder takes it), so a
 * slow client holds one input and one output buffer whatever the size of
 * the response. The encoders' own state comes from a per-worker region of
 * compress.memory bytes (compress_pool.h) through zlib's zalloc and
 * brotli's alloc_func: a stream is admitted only when its encoder's
 * reservation (zlib's exact size, smaller for a short body of known
 * length; brotli's measured peak and a margin) still fits beside those
 * under way, and at most compress.max_streams at once; past either the
 * response goes uncompressed and is counted (busy, no_memory). Brotli
 * runs with a 256 KiB window (lgwin 18) to keep its state small.
 *
 * A stream of bytes (chunked or close-delimited from the upstream) is
 * flushed whenever the upstream has nothing more to read at once, so
 * server-sent events and long polls still arrive as they are sent; a
 * counted body is flushed only at its end.
 */
struct body_span;
struct buf;
struct config;
struct txn;
struct cz_stream;

/* What a request carries of compression (in struct txn, zeroed with it). */
struct compress_txn {
	const struct config_compress *pol; /* its route's block, when on */
	uint16_t q[COMPRESS_ENC_COUNT];    /* the client's q-values, 0..1000 */
	struct cz_stream *s;               /* the response is being encoded */
};

/* Worker start: maps the pool when any block of <cfg> is on. Returns 0,
 * or -1 (logged) when it cannot. */
int compress_init(const struct config *cfg);

/* The request phase's handler: the route's block and Accept-Encoding. */
enum ph_rc compress_ph_request(struct txn *t, const void *conf);

/* The response filter's: decides, rewrites the head, starts the encoder. */
enum ph_rc compress_ph_response(struct txn *t, const void *conf);

/* Whether the response of <t> is being encoded (its head then says no
 * length: head_resp.recoded). */
static inline int compress_on(const struct cz_stream *s)
{
	return s != NULL;
}

/*
 * The body filter: encodes span <sp> of the response body, as the
 * upstream's codec handed it up (body_next), and queues what it made to
 * the client (at most one output buffer: the rest is pending). The span
 * is consumed on the upstream side as the encoder takes it; t->resp_done
 * is set once the encoded body's end is queued. Returns 1, or
 * WEIR_ECOMPRESS_FAILED.
 */
int compress_body(struct txn *t, const struct body_span *sp);

/* Input or output still pending from the last span: compress_resume()
 * (the same, for what is left) before the upstream's codec is asked for
 * more or the upstream read. */
int compress_pending(const struct txn *t);
int compress_resume(struct txn *t);

/* <t> is freed: its encoder and buffer go back. */
void compress_end(struct txn *t);

/*
 * Reads one Accept-Encoding value <v>[0, len) into <q> (entries the
 * value does not name, directly or through "*", are left alone; a value
 * may be one of several headers): q-values in thousandths, "x-gzip" as
 * gzip. Pure, for the unit test.
 */
void compress_accept_parse(const char *v, size_t len, int16_t q[COMPRESS_ENC_COUNT], int16_t *star);

/* ==== split ==== */
/*
 * split: a request's side of its route's split (routes.split;
 * common/split.h has the buckets, split.c the choice) and the mirror
 * copies (mirror.c).
 */
/* In struct txn, zeroed with it. */
struct split_txn {
	uint16_t upstream_plus1; /* the group chosen, + 1; 0: the route's own (no split) */
	uint8_t side;            /* its place in the split, when chosen */
};

/* Chooses the side of <t>, whose route has a split: the override's group
 * if the request names one, else the side of its key's bucket, else (no
 * key) a bucket drawn at random; counts it; t->set becomes the group's
 * settings unless the route has its own. Never fails. */
void split_choose(struct txn *t);

/* routes.mirror (mirror.c): once t->mirror_head is written, a copy of <t> to
 * the shadow group for mirror_share of the requests, counted in the
 * route's mirror[enum mirror_result]. Never waits, never fails <t>. */
void mirror_maybe(struct txn *t);

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
	uint32_t idle;        /* ms: timeouts.tunnel of its route, kept past its generation */
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

/* The client's end of <t>'s tunnel went under its codec (an HTTP/2
 * stream reset or closed): the tunnel ends, logged and counted. */
void tunnel_end_stream(struct txn *t);

/* ==== auth ==== */
/*
 * auth: authentication per route (routes.auth), the worker's side.
 *
 * Principle: one check between routing and picking a server. It either
 * lets the request on, with what it learnt (the consumer, the headers to
 * pass upstream) kept in the request's state, or answers it itself: 401
 * with WWW-Authenticate, 403 for a consumer the policy does not allow,
 * 503 while the password-hash budget is spent. Every outcome is counted
 * per route (weir_auth_total{result, reason}); no secret is ever logged.
 *
 * The policy and its keys are the worker's own configuration's, inherited
 * from the master (common/auth_conf.h). The route table in the shared
 * segment only says that a route has auth: a worker finds the policy of
 * the same (host, path) in its own configuration, and answers 503 for a
 * route whose policy it does not know (a draining worker of an older
 * configuration, handed a newer table) rather than let it through.
 *
 * Costs are bounded per request: an API key is one SHA-256 and a binary
 * search; a JWT is verified once and then found in a per-worker cache
 * keyed by its SHA-256 until it expires; a Basic password is hashed once
 * and then found in a cache keyed by an HMAC under a key made when the
 * worker starts, and a worker hashes at most hash_rate passwords a second.
 */



struct txn;

/* What a check left in the request (struct txn's auth). */
struct auth_state {
	const char *extra; /* header lines for the upstream ("Name: v\r\n"...),
	                    * valid until the next check in this worker:
	                    * head_write_request() copies them right after */
	uint32_t extra_len;
	uint8_t consumer_len;
	char consumer[AUTH_NAME_MAX]; /* who the credentials name ("" none): for
	                               * logs and rate-limit keys (`consumer`) */
	const struct config_auth *jwt; /* the policy that verified the request's
	                                * JWT, NULL none: $jwt_claim_NAME */
};

/* Worker start: the answers, caches and keys of <cfg>'s policies. Returns
 * 0, or -1 when out of memory. */
int auth_init(const struct config *cfg);

/* Calls <vouch> with every header name a policy of <cfg> writes upstream
 * (consumer_header, claims_to_headers): a client's own is never passed. */
void auth_vouch_names(const struct config *cfg, void (*vouch)(const char *name));

/* For a request whose route has auth (t->route->auth): 0 to go on, or -1
 * when it has been answered (and <t> freed). */
int auth_check(struct txn *t);

/* ---- inside worker/auth*.c ---- */

struct auth_rt;

/* JWT (worker/auth_jwt.c): checks the token of <t> for <p>; returns an
 * enum auth_result, with st's consumer and extra set on AUTH_R_OK and
 * *<cached> set when it came from the cache. */
int auth_jwt_check(struct txn *t, const struct config_auth *p, struct auth_state *st, int *cached);

/* $jwt_claim_NAME: claim <name> (<nlen> bytes) of the request's verified
 * token as header text in <tmp>; 1 with *<v>, *<len>, or 0. */
int auth_jwt_claim(const struct txn *t, const char *name, size_t nlen, char *tmp, size_t cap, const char **v,
                   size_t *len);
int auth_jwt_init(void);

/* The request header named <name> (any case): NULL if absent; *<dup> is
 * set when there is more than one. */
struct hdr;
const struct hdr *auth_header(const struct txn *t, const char *name, int *dup);

/* ==== fwdauth ==== */
/*
 * fwdauth: routes.auth type "forward" (worker/core/fwdauth.c): a
 * subrequest to the policy's auth group in the access phase; 2xx lets the
 * request on with the chosen response headers, 401/403 are answered with
 * the service's body, anything else 502, no answer in time 503. The walk
 * waits meanwhile and resumes after ph_auth. Results are cached per
 * worker for auth.cache, keyed by the cache_key headers' values.
 */
struct fwdauth_txn {
	struct buf *self;      /* the small buffer it lives in */
	struct upconn *u;      /* the subrequest's connection, NULL when none */
	const struct config_auth *p;
	struct buf *out;       /* its head */
	struct buf *extra;     /* 2xx: header lines for the upstream (t->auth.extra) */
	uint32_t sent;         /* bytes of <out> written */
	int server;            /* the server asked, -1 none */
	uint64_t tried;        /* servers of the group tried (bitmap) */
	ev_tstamp until;       /* the policy's timeout */
	uint8_t keyed;         /* <key> holds the cache key */
	uint8_t key[32];
};

/* Worker start: the result cache, when a policy of <cfg> caches. */
int fwdauth_init(const struct config *cfg);

/* auth_check() of a forward policy <p>: 0 to go on (a cached 2xx), or -1
 * when <t> waits for the service (txn_resume() follows) or was answered. */
int fwdauth_begin(struct txn *t, const struct config_auth *p);

/* Events and the deadline of the subrequest's connection (txn.c's
 * upcalls hand them here while t->fa.u is set). */
void fwdauth_on_event(struct txn *t, int revents);
void fwdauth_on_timeout(struct txn *t);

/* The end of <t> (t->fa set): closes a subrequest under way, gives back
 * its buffers and the state; t->fa is NULL after it. */
void fwdauth_release(struct txn *t);
#define fwdauth_end(t)                                                                                                 \
	do {                                                                                                           \
		if ((t)->fa)                                                                                           \
			fwdauth_release(t);                                                                            \
	} while (0)

/* ==== ratelimit ==== */
/*
 * ratelimit: a route's rate limits, applied to one request.
 *
 * Principle: one call once the route is known, before a server is
 * picked: it makes each limit's key from the request, takes from every
 * limit at once or from none (shm/limit.h), and either lets the request
 * go on, holds it on a timer (mode = "delay": never blocking, the worker
 * serves others meanwhile) or answers it itself (429, Retry-After and the
 * RateLimit headers). Concurrency a request holds is given back in
 * txn_free(), the one place every request ends, however it ends.
 */



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

/* The value of key part <kind> (header, cookie or query; enum
 * config_rl_part) named <name> (<nl> bytes) in the request of <t>, *vl
 * bytes; NULL if the request has none. Shared with splits (split.c) and
 * the hashing balancers (balance_key.c). */
const char *ratelimit_part_value(const struct txn *t, int kind, const char *name, size_t nl, size_t *vl);

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

/* ring_hash and maglev: hashes <t>'s hash_key for group <up> and hands it
 * to the next pick (worker/core/balance_key.c, worker/up/up.h). */
void balance_key_prepare(const struct txn *t, const struct route_upstream *up);

/* ==== realip ==== */
/*
 * realip: the request's client address and its request id.
 *
 * Principle: the connection's peer (the socket's source, or a PROXY
 * header's) is the client unless it is one of trusted_proxies. From a
 * trusted peer, X-Forwarded-For is read from the right, one entry per hop,
 * as nginx's real_ip_recursive: an entry that is not trusted is the
 * client; a trusted one is a hop passed through, and the walk goes on to
 * its left, at most real_ip_depth entries. If every entry read is trusted,
 * the last one read is the client. An entry that is not an address
 * (garbage, "unknown", a port) ends the walk there: the hop that wrote it
 * is trusted, so the address before it stands, and the request is counted
 * as weir_errors_total{kind="bad_forwarded_for"}.
 *
 * The result is what every module means by the client: the access log,
 * $client_ip, the X-Forwarded-For weir sends upstream (the entries
 * believed and the peer: what a client wrote to the left of its own
 * address is not passed on as if it were true), and the keys of rate
 * limits. Without trusted_proxies weir behaves as before: the peer is the
 * client and X-Forwarded-For is appended to.
 *
 * Request ids (request_id = true): a trusted peer's X-Request-Id is kept
 * if it is 1 to 64 of [A-Za-z0-9._:+/=-], otherwise a new one is made: 32
 * hex digits from a per-worker generator seeded once from getrandom(2) (no
 * system call per request). It goes upstream and back in the response as
 * X-Request-Id (weir's own answers too: conn.c, respond.c); a client's or
 * upstream's own header of that name is replaced, never passed beside it.
 */



struct conn;
struct txn;

#define REALIP_ID_MAX 64

/* What a request knows of its client, in struct txn. */
struct realip {
	char client[INET6_ADDRSTRLEN]; /* "" until realip_begin() */
	uint8_t client_len;
	uint8_t believed;   /* X-Forwarded-For entries believed, from the right */
	uint8_t id_len;     /* 0: no request id */
	char id[REALIP_ID_MAX + 1];
};

/* Worker start: seeds the generator. */
void realip_init(void);

/* Resolves the client of <t> and its request id, from its parsed head. */
void realip_begin(struct txn *t);

/* The client's address of <t> on <c> (<t> may be NULL, or not yet
 * resolved: then the peer). The one function other modules call. */
const char *realip_client(const struct conn *c, const struct txn *t, size_t *len);

/* The X-Forwarded-For value to send upstream, into <dst>: NULL when
 * weir appends to the client's as before (no trusted_proxies). */
const char *realip_xff(const struct txn *t, char *dst, size_t cap, size_t *len);

/* A header of <h>'s name weir replaces with its own X-Request-Id. */
static inline int realip_is_request_id(const struct hdr *h)
{
	return h->name_len == 12 && http_name_same_var(h->name, "X-Request-Id", 12);
}

/* 64 random bits from the worker's generator (not for secrets). */
uint64_t realip_random(void);

/* ==== accesslog ==== */
/*
 * accesslog: the access log line of a request, in the format log.format
 * names, to the output log.access names.
 *
 * Principle: one line per request, written once it ends (or is cut),
 * never blocking. Formats: "weir" (the default, the line weir has always
 * written, so existing parsers keep working), "combined" (nginx's, byte
 * for byte: $remote_addr - $remote_user [$time_local] "$request" $status
 * $body_bytes_sent "$http_referer" "$http_user_agent", values escaped as
 * nginx's default escape), "json" (one object a line, every string escaped
 * as JSON, control bytes and bytes of no UTF-8 sequence as \u00XX), or a
 * format of variables (common/vars.h) escaped as nginx does. A value is
 * cut at 2 KiB; a line that would pass 16 KiB is written with values cut
 * at 128 bytes, so a hostile header cannot make a JSON line invalid.
 *
 * Outputs: the buffered log of common/log.h (a file or stderr), or
 * "syslog:/path", a unix datagram socket (such as /dev/log): one datagram
 * per line, "<190>Mmm dd hh:mm:ss weir[pid]: line" (local7.info, as
 * nginx's default), sent with MSG_DONTWAIT to the path each time (a
 * restarted syslog daemon is found again); a datagram the socket does not
 * take at once is dropped and counted as
 * weir_errors_total{kind="syslog_dropped"}.
 *
 * Per route, log = false writes no line and log_sample = "0.1" one for
 * about that share of requests (drawn from the worker's generator).
 * Answers to requests without a route (404, a malformed head) are always
 * written.
 */


struct conn;
struct txn;

/* Worker start: compiles log.format, opens the syslog socket. Returns 0
 * or -1 (logged). */
int accesslog_init(const struct config *cfg);

/* Writes the line of <t> (NULL: no request parsed) on <c>, answered
 * <status>. */
void accesslog_write(struct conn *c, struct txn *t, int status);

/* ==== respond ==== */
/*
 * respond: a route's return = { ... }: a redirect or a fixed body,
 * answered by weir without an upstream.
 *
 * Principle: the answer is written whole (head and body) into one buffer
 * of its size and queued as the response of the transaction, so keep-alive,
 * pipelining, the client's send deadline, counters and the access log are
 * those of any proxied answer. The location and the body are templates
 * (common/vars.h) expanded for the request; a location whose variables
 * would put CR, LF or another control byte in the head (the parser refuses
 * such bytes in what variables read: a guard), or make it pass 8 KiB, is
 * not sent: the request is answered 500 and counted as
 * weir_errors_total{kind="bad_header_value"}. A request body
 * is not read: the connection lingers to discard it and then closes, as
 * after any answer given before the body.
 */

struct txn;

/* Answers <t>, whose route has a return, and pumps it out. */
void respond_start(struct txn *t);

/* Answers <t> with <a> (msg.h): its status, fields (Content-Length among
 * them) and body, with X-Request-Id and Connection added as due (room
 * for two more fields left in <a>) and the body left out for a HEAD;
 * the client's codec sends it, and it is pumped out. Returns 0, or -1
 * when it does not fit (nothing sent: the caller answers otherwise). */
int respond_send(struct txn *t, struct answer *a);

/* ==== hdrrules ==== */
/*
 * hdrrules: a route's header rules (routes.headers, upstreams.headers;
 * common/hdrrules.h), as phase handlers: hdrrules_request() in the request
 * filters, before the upstream head is written from the message, and
 * hdrrules_response() in the response filters, before the client head is.
 * A route without rules pays one test. A value a variable fills with CR,
 * LF, NUL or another control byte (or past 4 KiB) is not written: counted
 * as weir_errors_total{kind="header_rule_dropped"}, logged at most once a
 * second. An arena too full for a new header is a 500 (header_space).
 */
enum ph_rc hdrrules_request(struct txn *t, const void *conf);
enum ph_rc hdrrules_response(struct txn *t, const void *conf);

/* ==== upproxy ==== */
/*
 * upproxy: the PROXY protocol towards an upstream group
 * (upstreams.proxy_protocol = "v1" | "v2").
 *
 * Principle: the header opens the connection, before the TLS handshake or
 * the request, with the request's client (worker/realip.h: after
 * trusted_proxies) as its source and the listener's address the client
 * reached as its destination. The source port is the client's own when the
 * client is the socket's peer, else 0 (an address learnt from
 * X-Forwarded-For or a PROXY header has no port weir keeps). An IPv4
 * client on an IPv6 listener, or the other way round, is sent as TCP6 with
 * the IPv4 address mapped (::ffff:a.b.c.d), as the header has one family.
 * It is written at once on a socket that has just connected (its send
 * buffer is empty, and the header is at most 108 bytes); a short write
 * fails the connection like a refused one. A connection that told one
 * client's address is never given to another: such groups keep no pool.
 */


struct txn;

/* Writes the header of <t> on its just-connected upstream if its group
 * asks for one. Returns 0, or WEIR_ERR(UPSTREAM_REFUSED) when it could not
 * be written whole. */
int upproxy_send(struct txn *t);

/* The header for <t> into <out> (at least 108 bytes): its length, 0 when
 * the group sends none. */
size_t upproxy_header(const struct txn *t, uint8_t *out);


/* ==== vars ==== */
/*
 * vars: expanding a compiled template (common/vars.h) for one request.
 *
 * Principle: a variable's value is read where the request already keeps
 * it, never copied in advance: the head weir wrote upstream (head_up, kept
 * for the whole request) once there is one, else the parsed request head,
 * whose spans are still valid then (the response head reuses the header
 * array only after head_up exists). So $http_NAME is the header as
 * forwarded (hop-by-hop headers are not), and costs a scan of the head
 * only when a template uses it. Values are written into the caller's
 * buffer, escaped as the caller's output needs; nothing is allocated.
 */



struct conn;
struct txn;

enum vars_esc {
	VARS_ESC_NONE, /* raw: a header value or a body (see <bad> below) */
	VARS_ESC_LOG,  /* '"', '\\' and bytes outside printable ASCII as \xHH,
	                * an absent value as "-", as nginx's access log */
	VARS_ESC_JSON, /* a JSON string's content: \" \\ and \u00XX for control
	                * bytes and bytes that are not UTF-8; absent as "" */
};

/* What a template is expanded for. <t> may be NULL (no request parsed). */
struct vars_ctx {
	struct conn *c;
	struct txn *t;
	int status;
	size_t value_max; /* bytes of one value taken at most (0: no cap) */
};

/*
 * Expands <tpl> into <dst> (<cap> bytes, not NUL-ended). Returns the bytes
 * written; *<full> is set when something did not fit. With VARS_ESC_NONE,
 * *<bad> is set when a variable's value held a byte no header value may
 * (CR, LF, NUL or another control byte but HTAB); literals were checked
 * when the configuration was read.
 */
size_t vars_expand(const struct vars_tpl *tpl, const struct vars_ctx *x, enum vars_esc esc, char *dst, size_t cap,
                   int *full, int *bad);

/* The same for the <n> pieces at <pc> of a template whose text is at
 * <text> (header rules keep theirs in the route generation's pools). */
size_t vars_expand_pieces(const struct vars_piece *pc, unsigned n, const char *text, const struct vars_ctx *x,
                          enum vars_esc esc, char *dst, size_t cap, int *full, int *bad);

/* ==== breaker ==== */
/*
 * breaker: an upstream group's limits (requests and connections in
 * flight, node-wide) and its circuit breaker (closed, open, half-open,
 * node-wide), checked once per request before a server is picked.
 *
 * Principle: the counts live in the shared segment per group name
 * (shm/resil.h), so a limit is one limit for the node and a breaker opens
 * for every worker at once, and both survive reloads and upgrades. The
 * breaker judges a sliding window of 1 s buckets, one word per bucket
 * (answers, errors, slow answers) so an answer costs one locked add; it
 * trips on the error share, on the pool share in use, or on p99 latency
 * (p99 past L means more than 1 % of answers slower than L, so it needs
 * no histogram, only a count of slow answers). Open, it answers 503 with
 * Retry-After (or sends to its `backup` group) until its open time ends;
 * then it lets exactly half_open_trials requests through, counted in the
 * state word itself so the number is exact node-wide; all of them
 * answered well close it, one failure reopens it for twice as long, up to
 * max_open_time.
 *
 * Costs, only in a group that has them: `limits` (or pool_percent) one
 * locked add and one subtract per request on the group's own line;
 * `breaker` one relaxed load of its state word per request and one locked
 * add per answer; the window is summed only on an error or a slow answer.
 */



struct txn;

/* A request's part in the controls (in struct txn, zeroed with it). */
struct breaker_txn {
	uint16_t group_plus1;    /* shm group entry counted into, + 1; 0: none */
	uint16_t upstream_plus1; /* the group sent to instead of the route's (backup), + 1; 0: the route's */
	uint8_t active;          /* counted in the group's requests in flight */
	uint8_t judged;          /* its answer goes into the breaker's window */
	uint8_t trial;           /* a half-open trial */
	uint8_t done;            /* its outcome was recorded */
	uint8_t queued;          /* waiting for a place (limits.max_pending) */
	uint16_t server_plus1;   /* server stat index + 1 holding a place (max_requests_per_server); 0: none */
	uint8_t all_full;        /* the last pick passed by full servers and found none */
	struct txn *qnext;       /* the worker's queue */
	double queued_at;
	const char *acted; /* the control that acted on it, for the access log; NULL: none */
};

/* The group <t> is sent to: its route's, or the backup its breaker chose. */
const struct route_upstream *breaker_upstream(const struct txn *t);

/* Before the first pick: admits <t> (0), queues it (WEIR_EAGAIN: it
 * waits for a place, then txn_upstream_go() or txn_fail() follows), or
 * returns the error to answer with (WEIR_EBREAKER_OPEN: 503 with
 * Retry-After; WEIR_EUPSTREAM_LIMIT: 503). May switch the request to the
 * breaker's backup group. */
int breaker_admit(struct txn *t);

/* The request ended with <status> (0: cut after the answer started):
 * counts it into the window, judges a trial. */
void breaker_answer(struct txn *t, int status);

/* The request is freed: gives back its place in flight (and a trial
 * that never got an answer). */
void breaker_release(struct txn *t);

/* The pick in a group with limits.max_requests_per_server (or
 * max_connections_per_server): upstream_pick() over the servers not yet
 * tried, passing by (and counting) a server that is full, taking a place
 * on the one picked (a compare-and-swap under the cap, so exact across
 * workers; given back at the next pick or in breaker_release()). -1 when
 * none has room. */
int breaker_pick(struct txn *t, const struct route_upstream *up);

/* The first pick found no server (txn_pick() < 0): when it passed full
 * servers by, the group is full after all (admission looked at every
 * server, drained and down ones too, and another worker may have taken
 * the last place since): WEIR_EAGAIN, queued again (txn_upstream_go()
 * picks anew), or the refusal to answer with (the queue full or none:
 * WEIR_EUPSTREAM_LIMIT); 0 when no server could be picked at all. */
int breaker_pick_missed(struct txn *t);

/* The per-server cap of <up>'s limits, 0: none. */
static inline uint32_t breaker_server_cap(const struct route_upstream *up)
{
	return config_uplimits_server_cap(&up->resil.limits);
}

/* The control that acted on <t>, for the access log ("breaker_open",
 * "breaker_backup", "upstream_limit", "queue_timeout", "adaptive_concurrency", "retry_budget", "retry_limit",
 * "retried"), or NULL when none did. */
const char *breaker_acted(const struct txn *t);

/* The Retry-After of the last refusal made by this worker, in seconds
 * (at most 60), for the 503 of an open breaker (conn.c answers it). */
uint32_t breaker_retry_secs(void);

/* ==== retry ==== */
/*
 * retry: sending a request again, to another server, when the group's
 * `retry` says so.
 *
 * Principle: a try that fails in a way `on` names (connect-failure,
 * reset: closed before any response byte, timeout: no response head in
 * per_try_timeout or upstream_read, or a status code) is tried again on
 * a server not tried yet (any server once all were), at most `attempts`
 * tries in all. A request is tried again only if every byte it sent can
 * be sent again (t->replayable) and, once bytes reached the server, only
 * if it is idempotent or its body was read whole before the first try
 * (request buffering). Retries after a connect failure go at once (no
 * byte was sent: another server is the whole remedy); the others wait a
 * full-jitter backoff (uniform in 0 .. min(max_backoff, backoff x 2^n))
 * on an ev_timer. A node-wide budget stops a retry storm: retries in
 * flight in the group at most budget_percent of its requests in flight,
 * or budget_min, whichever is more (and at most limits.max_retries when
 * the group has `limits`). When no retry is left, the last try's outcome
 * stands: its response when it answered (a retried status is only
 * retried while a retry is possible), 502 or 504 when it did not.
 *
 * Costs, only in a group with `retry`: the requests-in-flight count the
 * budget needs (one locked add and subtract per request, breaker.h), and
 * per retry one add and subtract of the retries in flight.
 */


struct txn;

/* A request's retry state (in struct txn, zeroed with it). */
struct retry_txn {
	ev_timer timer;  /* the backoff */
	uint8_t retries; /* retries made */
	uint8_t counted; /* counted in the group's retries in flight */
	uint8_t armed;   /* the backoff timer runs */
	uint8_t connect; /* txn_connect() may pick again without asking (a retry just granted) */
	int last_rc;     /* what the last try failed with */
	uint32_t after;  /* ms + 1: the upstream's Retry-After is the next backoff; 0: none */
};

/* May <t>, whose try failed for <why> (a RETRY_ON_* bit, or 0 with
 * <status> for a response), be tried again? Counts the verdict and, when
 * yes, the retry (attempted, in flight). <sent>: bytes of it reached the
 * server. */
int retry_wanted(struct txn *t, unsigned why, int status, int sent);

/* retry_wanted() for <t>'s response head, whose status may be retried:
 * its Retry-After (seconds or an HTTP-date) up to retry.retry_after_max
 * becomes the next backoff; a longer one keeps the answer (0). */
int retry_answer_wanted(struct txn *t);

/* Starts the backoff of <t>, whose upstream is detached; the timer sends
 * it again (txn_retry_send) or fails it with <rc>. */
void retry_schedule(struct txn *t, int rc);

/* txn_connect() is about to pick again after a connect failure: 1 if it
 * may (a group without `retry` always may: every server is tried). */
int retry_connect_allowed(struct txn *t);

/* <t> ended with <status>: a retried request that got an answer below
 * 500 counts as succeeded. */
void retry_end(struct txn *t, int status);

/* <t> is freed: stops its backoff, gives back its place in the budget. */
void retry_release(struct txn *t);

/* The deadline for the response head of the current try: <at>, or the
 * try's own per_try_timeout when that comes first. */
double retry_try_deadline(const struct txn *t, double at);

/* ==== txn_settings ==== */
/*
 * txn_settings: where a request reads its timeouts, limits and rules.
 *
 * Principle: from the one route generation it took (shm/route.h), never
 * from the worker's fork-time config: once routed, its route's settings
 * (global, then its upstream group's, then its route's, resolved by the
 * master); before that, or with no route, the generation's global ones.
 * So a draining worker on an old table, or a new worker serving a request
 * that took an older one, cannot mix two configs in one request. Only a
 * request that has taken no generation yet falls back to the worker's
 * own config; connection-level settings (head size and timeout,
 * keep-alive, drain) stay the worker's.
 */
struct txn;

/* The settings of the worker's own config, for a request that has taken
 * no generation yet. */
const struct route_settings *txn_settings_own(void);

/* <t>'s settings: t->set, or the worker's own before it took a table. */
#define TXN_SET(t) ((t)->set ? (t)->set : txn_settings_own())

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
	/* what it reads of timeouts and limits: from <table>, its route's
	 * once routed (txn_settings); NULL before it took one */
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
	uint8_t up_wait, cl_wait; /* what each side's timer now measures */
	uint8_t early;           /* the request came in TLS early data (0-RTT) */
	uint8_t grpc;            /* a gRPC call (grpc_request()), noted once routed: the
	                          * request's header list is dead once the response
	                          * head begins, and weir's own answer must still
	                          * be a gRPC status */
	uint32_t grpc_deadline;  /* ms from its start: a gRPC call's grpc-timeout (grpc_deadline()); 0 none */
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
	uint32_t req_head_start; /* offset of the request head in c->in */
	struct buf *body;        /* buffered body that did not fit behind the head
	                          * in c->in (decoded if it came chunked) */
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
	struct realip ident;     /* the client's address and request id (realip.h) */
	struct auth_state auth;  /* what routes.auth learnt: consumer, headers (auth.h) */
	struct ratelimit_txn rl; /* a delay under way, concurrency held (ratelimit.h) */
	struct breaker_txn bk;   /* limits and breaker (breaker.h) */
	struct retry_txn rt;     /* retries (retry.h) */
	struct split_txn sp;     /* the side of its route's split (==== split ====) */
	uint16_t bal_held;       /* stat index + 1 counted in flight for least_request (up.h: balance) */
	struct compress_txn cz;  /* the client's Accept-Encoding, the encoder (==== compress ====) */
	uint32_t fwd_target_at;  /* the target forwarded (a rewrite's, match.h) lies */
	uint32_t fwd_target_len; /* here in up.head, whatever its codec */
	struct buf *head_alt;    /* the head for the breaker's backup group when it
	                          * speaks the other protocol (its target at
	                          * alt_target_at), swapped in as it is attached */
	uint32_t alt_target_at;
	struct buf *mirror_head; /* the shadow group's head (HTTP/1), until the pick */
	struct fwdauth_txn *fa;  /* a forward auth subrequest (fwdauth.h), NULL none */

	struct arena arena;      /* the header lists: the request's, then the
	                          * response's (msg.h) */
	struct hdr arena_mem[];  /* limits.headers entries: the arena's bytes */
};

/* The group <t> is sent to before any control steps in: its route's, or
 * the side its route's split chose (==== split ====). */
static inline uint32_t split_group(const struct txn *t)
{
	return t->sp.upstream_plus1 ? t->sp.upstream_plus1 - 1u : t->route->upstream;
}

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

/* The protocol the client spoke, for logs and $server_protocol: an
 * HTTP/2 stream's conn has c->h2s (worker/h2/h2.h). */
static inline const char *txn_protocol(const struct txn *t)
{
	return t->c->h2s ? "HTTP/2.0" : t->req.version_minor ? "HTTP/1.1" : "HTTP/1.0";
}

/* RFC 9110 9.2.2: is the method of <t> idempotent? */
int txn_method_idempotent(const struct txn *t);

/* breaker.c, once a queued request got its place: the walk goes on after
 * the breaker's handler (the pick, the connect). */
void txn_upstream_go(struct txn *t);

/* retry.c, once the backoff ran out: sends <t> again, to another server
 * if one is left; <rc> is the error to answer with if it cannot. */
void txn_retry_send(struct txn *t, int rc);

/* <t> waits on a control and has no upstream yet: a rate limit's delay,
 * a place in a group's queue, a retry's backoff, a forward auth answer.
 * Nothing moves meanwhile but the client's close (txn_wait_client). */
static inline int txn_waiting(const struct txn *t)
{
	return !t->u && (t->rl.waiting || t->bk.queued || t->rt.armed || (t->fa && t->fa->u));
}

/* txn.c. A wait of txn_waiting() begins: an HTTP/1 client is watched for
 * its close, and read while its input buffer has room: pipelined requests
 * after a whole request, the body's bytes before it. */
void txn_wait_arm(struct txn *t);

/* txn.c. The client's socket is readable during such a wait: bytes are
 * kept (pipelined requests, or the body for its phase), a close or reset
 * ends the request as one during a wait on the upstream does
 * (abort_on_client_close), and at once when it leaves a Content-Length
 * body short of its end. */
void txn_wait_client(struct txn *t);

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

/* The rate limiter's delay is over (ratelimit.c): the walk goes on after
 * the access handler that waited (txn_resume). */
void txn_continue(struct txn *t);

/* Answers <t> with <status>: the answer the client's codec took from
 * its answer op (HTTP/1: its text in t->down.head, queued here; HTTP/2:
 * already submitted, t->down.head NULL), then ends it as any answer ends
 * (the access log, the counters, keep-alive, or a lingering close while
 * a body is unread). */
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

/* The log phase of a request whose client left before its answer ended
 * (an HTTP/1 close, an HTTP/2 RST_STREAM): 499, as nginx logs it, or the
 * status sent once the answer had begun; not counted as a response. */
void txn_log_gone(struct txn *t);

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
