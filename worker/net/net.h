/*
 * net: client connections and their transports (the door of
 * worker/net/): struct conn, TLS termination (tls.c, tls_bio.c,
 * tls_pick.c, tls_names.c) and the PROXY protocol header (proxy_proto.c,
 * conn_proxy.c). Above: the HTTP/1 server codec reads and writes a
 * connection through conn_recv()/conn_sendv() (h1/conn.c), which are
 * SSL_read/SSL_write on a TLS connection.
 */
#ifndef WEIR_WORKER_NET_H
#define WEIR_WORKER_NET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <ev.h>
#include <openssl/base.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/config.h"
#include "shm/shm.h"

/* ==== conn: a client connection ==== */
/*
 * A connection is small while it waits. An idle keep-alive connection
 * holds its socket, one watcher, one timer and no buffer; the input buffer
 * is taken when bytes arrive and given back when they are all consumed,
 * and the request state (struct txn) exists only while a request is in
 * flight. The transports below (TLS, the PROXY header) work on it; its
 * codec above (worker/h1) reads requests from it and writes answers.
 *
 * Timeouts use one timer per connection and a deadline field: moving a
 * deadline later is a store, the timer re-arms itself when it fires early.
 */
struct txn;
struct codec_ops;
struct h2_session;
struct h2_stream;

enum conn_state {
	CONN_PROXY,   /* proxy_protocol listener: reading the PROXY header (conn_proxy.c) */
	CONN_HANDSHAKE, /* TLS listener: the handshake is under way (tls.c) */
	CONN_IDLE,    /* between requests, no bytes pending */
	CONN_HEAD,    /* reading a request head */
	CONN_TXN,     /* a request is in flight (core/txn.c drives) */
	CONN_ANSWER,  /* writing an answer weir made itself */
	CONN_LINGER,  /* answer sent, write side shut, discarding input */
	CONN_H2,      /* an HTTP/2 session (worker/h2/h2.h): its streams have conns of their own */
	CONN_STREAM,  /* an HTTP/2 stream's conn before its transaction (h2_stream_begin) */
};

struct conn {
	ev_io io;
	ev_timer timer;
	ev_tstamp deadline;
	struct conn *next, *prev; /* worker's connection list */
	struct buf *in;           /* request bytes, NULL when none are pending */
	struct txn *txn;
	const char *answer;       /* CONN_ANSWER: remaining bytes of the answer */
	struct buf *answer_buf;   /* the answer's own copy when it carries an X-Request-Id */
	uint32_t answer_len;      /* (CONN_LINGER: bytes discarded so far) */
	uint8_t graced;           /* its deadline was graced (worker_deadline_grace) */
	ev_tstamp linger_until;   /* CONN_LINGER: close by then whatever happens */
	uint8_t state;
	uint8_t readable;         /* the socket reported readable, not yet drained */
	uint8_t read_long;        /* the last read took half a buffer or more */
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
	struct h2_session *h2;    /* CONN_H2: the session on this socket */
	struct h2_stream *h2s;    /* a stream's conn: no socket of its own (h2.h) */
	uint8_t h2c;              /* the listener takes HTTP/2 with prior knowledge */
	char peer[INET6_ADDRSTRLEN];
	uint8_t peer_len;
};

/* An HTTP/2 stream's conn (c->h2s set): the connection of its session,
 * which holds the socket, its watcher and the SSL (worker/h2/h2.h). */
struct conn *h2_conn_parent(const struct conn *c);

/* ==== tls_names ==== */
/*
 * tls_names: matching the SNI host name against a certificate's names.
 *
 * Principle: the names come from the certificates (common/tlscert.h), so a
 * certificate is served for exactly the names a client will accept it for.
 * An exact name wins over a wildcard, whichever certificate carries it; among
 * equals the certificate listed first wins; no match (or no SNI) means the
 * listener's first certificate. A wildcard "*.example.com" covers one label:
 * "a.example.com", not "example.com" nor "a.b.example.com" (RFC 6125 6.4.3).
 * Among equals, worker/net/net.h then goes by the key types the client can
 * verify (an ECDSA and an RSA certificate for the same names), and makes
 * the choice (tls_pick_choose_cert).
 */

struct tls_name {
	const char *name; /* lower case, "*.example.com" for a wildcard */
	size_t len;
	int cert;         /* index of the certificate within its listener */
};

/* 2 when <host> (<hlen> bytes, any case, one trailing dot allowed) equals
 * <pattern>, 1 when wildcard <pattern> covers it, 0 otherwise. */
int tls_name_match(const char *pattern, size_t plen, const char *host, size_t hlen);

/* ==== tls_pick ==== */
/*
 * tls_pick: choosing a listener's certificate from the ClientHello: the
 * SNI name first (tls_names.h), then the key type the client can verify.
 *
 * Principle: a listener may list an ECDSA and an RSA certificate for the
 * same names, as nginx and HAProxy allow. Among the certificates that fit
 * the name equally well (all exact matches, or else all wildcard matches),
 * or, without SNI or a match, the first certificate and those carrying
 * exactly its names, the first ECDSA one the client can verify is served,
 * else the first RSA one it can verify, else the first candidate (the
 * handshake then fails as it would have anyway). ECDSA is preferred because
 * its handshakes are cheaper for both sides.
 *
 * "Can verify" is read from the ClientHello alone:
 *   - a client offering TLS 1.3 gets 1.3 (weir supports it), so only its
 *     signature_algorithms count: ecdsa_secp256r1_sha256 (0x0403) for a
 *     P-256 key, 0x0503 for P-384, 0x0603 for P-521 (TLS 1.3 binds the
 *     curve to the scheme), rsa_pss_rsae_* for RSA;
 *   - any other client gets TLS 1.2 at best: it must also offer one of
 *     our ECDHE-ECDSA (or ECDHE-RSA) suites, and a signature_algorithms
 *     extension, when sent, must list such a scheme (RFC 5246 7.4.1.4.1:
 *     without the extension, SHA-1 with the certificate's key type is
 *     assumed, which BoringSSL accepts).
 *
 * Nothing here allocates or calls BoringSSL's SSL layer: the functions
 * read byte spans the caller takes from the SSL_CLIENT_HELLO, so they run
 * in the early (select_certificate) callback and in unit tests alike.
 */

/* A certificate's key type, as far as choosing goes. */
enum {
	TLS_PICK_KEY_OTHER = 0, /* never preferred, served when listed first */
	TLS_PICK_KEY_RSA,
	TLS_PICK_KEY_P256,
	TLS_PICK_KEY_P384,
	TLS_PICK_KEY_P521,
};

/* The parts of a ClientHello the choice reads; a span is NULL (and 0) when
 * the extension is absent. Extension spans are the extension's contents,
 * without its type and length. */
struct tls_pick_raw {
	uint16_t version; /* legacy_version */
	const uint8_t *suites;
	size_t suites_len;
	const uint8_t *sni;
	size_t sni_len;
	const uint8_t *sigalgs;
	size_t sigalgs_len;
	const uint8_t *versions;
	size_t versions_len;
};

/* What the ClientHello says, parsed. <host> points into the raw span. */
struct tls_pick_hello {
	const char *host; /* NULL: no SNI */
	size_t host_len;
	int tls13;        /* offers TLS 1.3: 1.3 is what it gets */
	int has_sigalgs;  /* sent signature_algorithms */
	unsigned sigalgs; /* TLS_PICK_SIG_* bits of the schemes listed */
	int ecdsa_suite;  /* offers one of our ECDHE-ECDSA suites */
	int rsa_suite;    /* offers one of our ECDHE-RSA suites */
};

#define TLS_PICK_SIG_P256 0x01u /* ecdsa_secp256r1_sha256 */
#define TLS_PICK_SIG_P384 0x02u /* ecdsa_secp384r1_sha384 */
#define TLS_PICK_SIG_P521 0x04u /* ecdsa_secp521r1_sha512 */
#define TLS_PICK_SIG_PSS  0x08u /* rsa_pss_rsae_sha256/384/512 */
#define TLS_PICK_SIG_PKCS 0x10u /* rsa_pkcs1_sha1/256/384/512 (TLS 1.2 only) */

/* The key type of <pkey_id> (EVP_PKEY_id) with curve <curve_nid> (for EC
 * keys, NID_undef otherwise). */
int tls_pick_key_type(int pkey_id, int curve_nid);

/*
 * Parses <raw> into <out> with bounds checks on every length. Returns 0,
 * or -1 when an extension is malformed (BoringSSL refuses such a hello
 * itself: the caller leaves the choice to the default certificate).
 */
int tls_pick_parse_hello(const struct tls_pick_raw *raw, struct tls_pick_hello *out);

/* Whether the client of <h> can verify a signature by a key of <key>. */
int tls_pick_key_usable(const struct tls_pick_hello *h, int key);

/*
 * The certificate (index within its listener) for hello <h>. <names> are
 * the listener's <nnames> names in certificate order; <keys> the key type
 * of each of its <ncerts> certificates; <siblings> has bit k set when
 * certificate k carries exactly the names of certificate 0 (bit 0 always).
 */
int tls_pick_choose_cert(const struct tls_name *names, int nnames, const uint8_t *keys, int ncerts, uint64_t siblings,
                         const struct tls_pick_hello *h);

/* The <siblings> mask for tls_pick_choose_cert(): certificates whose name
 * set equals certificate 0's. <ncerts> is at most 64. */
uint64_t tls_pick_find_siblings(const struct tls_name *names, int nnames, int ncerts);

/* ==== tls ==== */
/*
 * tls: TLS termination on a worker's client connections (BoringSSL).
 *
 * Principle: the master reads certificates and keys with the configuration
 * (common/tlscert.h) and makes the ticket keys (shm/ticket.h); it never
 * builds an SSL_CTX nor shakes hands. Each worker builds its contexts once
 * at start-up from those parsed objects: per TLS listener one SSL_CTX per
 * certificate, the first being the default one that receives the
 * ClientHello and switches to another by SNI; each staples its OCSP
 * response if it has one, and all of them ask for client certificates when
 * the listener has a client_ca. TLS 1.2 and 1.3 only, ALPN
 * http/1.1 only, stateless resumption with tickets sealed by the keys in
 * the shared segment, so any worker resumes what another issued.
 *
 * Per connection, tls_new() makes the SSL (BoringSSL allocates per
 * connection and per handshake: the one place on a worker's request path
 * that calls malloc, and it cannot be avoided without forking BoringSSL),
 * tls_handshake() drives the handshake; after it, conn_recv() and
 * conn_sendv() (h1/conn.c) are SSL_read and SSL_write, and tls_close() sends
 * close_notify once, without waiting for the client's.
 */

struct conn;

/* Builds the contexts of every TLS listener in <cfg> and maps the page the
 * ticket keys are copied to. Returns 0, or -1 after logging why. */
int tls_init(const struct config *cfg);

/* Frees every context and wipes the ticket key copy (worker exit). */
void tls_cleanup(void);

/* Is listener <l> (index in cfg->listeners) a TLS one? */
int tls_listener(int l);

/* A new server SSL for socket <fd> accepted on TLS listener <l>, or NULL
 * when out of memory. */
SSL *tls_new(int l, int fd);

/* One step of the handshake of <c>. Returns 0 when it is complete (and
 * counted), WEIR_EAGAIN with *events set to what to wait for (EV_READ or
 * EV_WRITE), or WEIR_ERR(TLS_HANDSHAKE) when it failed: then *why says why,
 * or is NULL when the client left before sending a byte (not a failure
 * worth a line: a port probe or a health check). */
int tls_handshake(struct conn *c, int *events, const char **why, int *reason);

/*
 * The client_header of <c>'s listener (<len> bytes), or NULL when it has
 * none or <c> is not TLS: head.c drops every client header of that name and
 * writes its own. *subj is the verified client certificate's subject then,
 * or NULL when the client showed no certificate (client_verify optional).
 */
const char *tls_client_header(const struct conn *c, size_t *len, const char **subj, size_t *subj_len);

/* Did the client send anything yet on <c> (for a quiet close)? */
int tls_got_bytes(const struct conn *c);

/* Counts a failed handshake on <c> and logs <why> at info level, at most
 * TLS_LOG_PER_SEC lines a second, then one line saying how many were left
 * out. */
void tls_handshake_failed(struct conn *c, int reason, const char *why);

/* Sends close_notify once if the handshake completed (never waits for the
 * answer) and frees c->ssl. Any later I/O on <c> is on the raw socket. */
void tls_close(struct conn *c);

/* Once a second (worker tick): the "N more suppressed" line, and, when
 * there is no master (master_process = false), the ticket key rotation. */
void tls_tick(void);

/* 1 while <c> is still reading TLS 1.3 early data (0-RTT): the handshake
 * has not finished, so what was read could be a replay. */
int tls_in_early_data(const struct conn *c);

struct tls_pick_raw;

/* The spans of ClientHello <ch> that tls_pick_parse_hello() reads
 * (worker/net/net.h): the cipher suites and the server_name,
 * signature_algorithms and supported_versions extensions, NULL if absent.
 * Used by the select-certificate callback and the fuzz target. */
void tls_hello_raw(const SSL_CLIENT_HELLO *ch, struct tls_pick_raw *raw);

/* The watcher events a handshake waits for after SSL_get_error() said
 * <err>: EV_READ, EV_WRITE, or 0 when it failed. Client and upstream
 * handshakes share it; their failures differ and stay with each. */
static inline int tls_want_events(int err)
{
	return err == SSL_ERROR_WANT_READ ? EV_READ : err == SSL_ERROR_WANT_WRITE ? EV_WRITE : 0;
}

/* A context with what the client and upstream sides share: TLS 1.2 and
 * 1.3 only, and partial writes (SSL_write returns after each record, as
 * write(2) returns short) from a moving buffer (a retry after WANT_WRITE
 * comes from a fresh copy of the same bytes, see tls_gather). NULL when
 * out of memory. */
SSL_CTX *tls_ctx_base(void);

/* Records carry at most 16 KiB of plaintext: the gather buffer of
 * tls_gather() holds one, and gathering more buys nothing. */
#define TLS_GATHER_MAX 16384

/* Ends <ssl>, client or upstream side: one close_notify if the handshake
 * completed, no waiting for the peer's (with a full socket buffer it is
 * simply not sent, as nginx does on lingering close), then frees it. */
static inline void tls_ssl_close(SSL *ssl)
{
	if (SSL_is_init_finished(ssl))
		SSL_shutdown(ssl);
	ERR_clear_error();
	SSL_free(ssl);
}

/*
 * One TLS record for several iovecs: a head and the first body bytes, or
 * chunk framing, are copied into <buf> (<cap> bytes, at most a record) so
 * they leave in one record and one send(2). Sets *p to what SSL_write
 * should send and returns its length; a single or large first iovec goes
 * as it is. A retry after WANT_WRITE gathers the same bytes again, as
 * BoringSSL's moving-buffer mode allows.
 */
static inline size_t tls_gather(const struct iovec *iov, int cnt, char *buf, size_t cap, const void **p)
{
	size_t len = iov[0].iov_len;

	*p = iov[0].iov_base;
	if (cnt == 1 || len >= cap)
		return len;
	len = 0;
	for (int i = 0; i < cnt && len < cap; i++) {
		size_t k = iov[i].iov_len < cap - len ? iov[i].iov_len : cap - len;

		memcpy(buf + len, iov[i].iov_base, k);
		len += k;
	}
	*p = buf;
	return len;
}

/* ==== tls_bio ==== */
/*
 * tls_bio: the socket under a TLS connection, read ahead.
 *
 * BoringSSL reads a record in two calls, its 5-byte header and then its
 * body, and with a plain socket BIO each call is a read(2): two system
 * calls for every small request. This BIO reads whatever the socket holds
 * into a worker buffer (one recv(2) for a whole request, or for several
 * pipelined records) and serves BoringSSL's calls from it. The buffer is
 * taken from the slab only while it holds bytes, so an idle connection
 * keeps none. A large record body, asked for whole, is read straight into
 * BoringSSL's buffer with no copy.
 *
 * Writes of up to a record go to the socket as they come. A longer write
 * (tls_sendv) is sealed record by record into a seal buffer taken from the
 * slab and leaves in one send(2), where BoringSSL alone would make one
 * per 16 KiB record. What the socket does not take stays in the BIO and
 * goes first, before any other byte, when the socket has room; plaintext
 * is told written only once its record has wholly left, so the caller's
 * contract is write(2)'s: bytes not taken are passed again.
 *
 * Because bytes can wait in the BIO that no readiness event will announce,
 * a reader that finds the socket "drained" must also ask tls_bio_pending().
 */

/* Sets up the method; once per worker, before any tls_bio_attach(). */
int tls_bio_init(void);
void tls_bio_cleanup(void);

/* Gives <ssl> a read-ahead BIO over socket <fd> for both directions (in
 * place of SSL_set_fd). Returns 0, or -1 when out of memory. */
int tls_bio_attach(SSL *ssl, int fd);

/* 1 when <ssl> has bytes no event will announce: read ahead into its BIO,
 * or held by BoringSSL (decrypted, or part of a record). */
int tls_bio_pending(const SSL *ssl);

/* Whether the next reads of <ssl> fill <room> bytes, more than an I/O
 * buffer (a long body into a stream buffer): then what the socket holds is
 * read ahead into a stream buffer of its own, so several records come in
 * one recv(2), and the reader decrypts them while tls_bio_pending(). */
void tls_bio_read_ahead(SSL *ssl, size_t room);

/* A write of <iov> to <ssl>, client or upstream side: the sealed records
 * still owed first (tls_bio_settle), more than a record sealed at once
 * (tls_sendv), else one record, several iovecs gathered into it
 * (tls_gather). Returns the plaintext taken (> 0), or -1 with errno, or 0
 * with *sslrc SSL_write's result for SSL_get_error(), which each side
 * reads its own way. */
ssize_t tls_write(SSL *ssl, const struct iovec *iov, int cnt, int *sslrc);

/* ==== proxy_proto ==== */
/*
 * proxy_proto: parsing the PROXY protocol header (versions 1 and 2) that
 * an L4 balancer (HAProxy's send-proxy / send-proxy-v2, AWS NLB) puts in
 * front of a connection to tell the client's real address.
 *
 * Principle: a pure function of the bytes received so far, allocating
 * nothing, called again from the start as more arrive. It answers "need
 * more" only while what it has is a prefix of a header it would accept, so
 * a client that sends anything else (an HTTP request, a TLS ClientHello) is
 * refused at its first byte. Strict, per haproxy's doc/proxy-protocol.txt:
 *
 * Version 1, "PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n", at most 107 bytes
 * with the CRLF: exactly one space between fields; IPv4 as four decimal
 * numbers 0..255 without leading zeros ("0" itself is fine); IPv6 in any
 * form inet_pton(3) takes (the spec's groups of 4 hex digits, "::",
 * and the dotted IPv4 tail "::ffff:192.0.2.1" that inet_ntop writes);
 * both addresses of the family named; ports decimal 0..65535 without
 * leading zeros. "PROXY UNKNOWN" with anything printable up to the CRLF
 * means "use the socket's addresses". A lone CR or LF, a control byte or
 * a line without CRLF in 107 bytes is refused.
 *
 * Version 2: the 12-byte signature, version 2, command LOCAL (the block is
 * skipped unread: the socket's addresses stand) or PROXY; family and
 * protocol nibbles of assigned values only. TCP over IPv4 (0x11) and IPv6
 * (0x21) give the addresses; the other valid combinations (UNSPEC 0x00,
 * UDP 0x12/0x22, AF_UNIX 0x31/0x32) fall back to the socket's addresses, as
 * the spec asks of a receiver that does not implement them; any other
 * combination is refused. The address block must fit in the announced
 * length; the TLVs after it are walked and bounds-checked, and a CRC32C
 * TLV (0x03) must match the header. A header longer than PROXY_PROTO_MAX
 * is refused: no known sender comes near it, and it bounds what a
 * connection can make weir hold before it is known to be a balancer's.
 */

/* The longest header accepted, both versions (v1 is at most 107). */
#define PROXY_PROTO_MAX 4096
#define PROXY_PROTO_V1_MAX 107

struct proxy_proto {
	uint32_t len;    /* header bytes, to consume; what follows is the client's */
	uint8_t version; /* 1 or 2 */
	/* 1: LOCAL, UNKNOWN or a family weir does not use: the connection's
	 * own addresses stand, the fields below are unset */
	uint8_t local;
	int family;       /* AF_INET or AF_INET6 */
	uint8_t src[16];  /* network order; 4 bytes used for AF_INET */
	uint8_t dst[16];
	uint16_t sport;   /* host order */
	uint16_t dport;
	const char *why;  /* on a refusal: what was wrong, for the log */
};

/*
 * Parses the <n> bytes at <p>, the first bytes of a connection. Returns 0
 * with *<pp> filled when they start with a complete header (<pp>->len
 * bytes), WEIR_EAGAIN when they are a prefix of one (every byte given is
 * then part of the header), or WEIR_ERR(PROXY_PROTOCOL) with <pp>->why set.
 */
int proxy_proto_parse(const void *p, size_t n, struct proxy_proto *pp);

/* CRC32C (Castagnoli, RFC 4960 appendix B) of <n> bytes at <p>, continuing
 * from <crc> (0 to start): the v2 checksum TLV's algorithm. */
uint32_t proxy_proto_crc32c(uint32_t crc, const void *p, size_t n);

/* ==== conn_proxy ==== */
/*
 * conn_proxy: the PROXY protocol header on a proxy_protocol listener
 * (the parsing is worker/net/net.h's).
 *
 * Principle: a connection accepted on such a listener is in CONN_PROXY
 * until its header is read, before the TLS handshake or the first request,
 * within timeouts.proxy_protocol; then its source address is the client's
 * (c->peer: the access log, X-Forwarded-For). No byte past the header is
 * taken from the socket on a TLS listener: the header is peeked, then just
 * its bytes read, so BoringSSL finds the ClientHello where it looks. On a
 * plain listener the header is read with what follows it, which stays in
 * c->in for the HTTP parser. Bytes that are only a part of a header are
 * read, never left in the socket, so a level-triggered watcher cannot spin
 * on them. A bad, cut or late header closes the connection without an
 * answer (the peer is a balancer, not a browser), counted as
 * weir_errors_total{kind="proxy_protocol"} and logged (log.c's
 * per-call-site limit: 10 lines a second); a connection that closes or
 * times out before its first byte (a balancer's TCP health check) is
 * closed quietly, as an idle plain connection is.
 */

struct conn;

/* Reads the header of <c>. Returns 0 when it is complete (c->peer is then
 * its source, unless it said LOCAL or UNKNOWN), WEIR_EAGAIN to wait for
 * more, or a negative code, already counted and logged: then close <c>. */
int conn_proxy_read(struct conn *c);

/* timeouts.proxy_protocol ran out on <c>: counts and logs it if any of the
 * header had come (the caller closes). */
void conn_proxy_timeout(struct conn *c);

#endif
