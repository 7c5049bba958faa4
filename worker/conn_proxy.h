/*
 * conn_proxy.h: the PROXY protocol header on a proxy_protocol listener
 * (the parsing is worker/proxy_proto.h's).
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
#ifndef WEIR_WORKER_CONN_PROXY_H
#define WEIR_WORKER_CONN_PROXY_H

struct conn;

/* Reads the header of <c>. Returns 0 when it is complete (c->peer is then
 * its source, unless it said LOCAL or UNKNOWN), WEIR_EAGAIN to wait for
 * more, or a negative code, already counted and logged: then close <c>. */
int conn_proxy_read(struct conn *c);

/* timeouts.proxy_protocol ran out on <c>: counts and logs it if any of the
 * header had come (the caller closes). */
void conn_proxy_timeout(struct conn *c);

#endif
