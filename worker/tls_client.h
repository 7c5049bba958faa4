/*
 * tls_client.h: TLS to upstream servers (BoringSSL), per upstream group.
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
#ifndef WEIR_WORKER_TLS_CLIENT_H
#define WEIR_WORKER_TLS_CLIENT_H

#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/base.h>

#include "common/config.h"
#include "shm/route.h"

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

#endif
