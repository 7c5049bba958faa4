/*
 * tls.h: TLS termination on a worker's client connections (BoringSSL).
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
 * conn_sendv() (conn.c) are SSL_read and SSL_write, and tls_close() sends
 * close_notify once, without waiting for the client's.
 */
#ifndef WEIR_WORKER_TLS_H
#define WEIR_WORKER_TLS_H

#include <string.h>
#include <sys/uio.h>
#include <ev.h>
#include <openssl/base.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/config.h"
#include "shm/shm.h"

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
 * (worker/tls_pick.h): the cipher suites and the server_name,
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
 * they leave in one record and one write(2). Sets *p to what SSL_write
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

#endif
