/*
 * upproxy.h: the PROXY protocol towards an upstream group
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
#ifndef WEIR_WORKER_UPPROXY_H
#define WEIR_WORKER_UPPROXY_H

#include <stddef.h>
#include <stdint.h>

struct txn;

/* Writes the header of <t> on its just-connected upstream if its group
 * asks for one. Returns 0, or WEIR_ERR(UPSTREAM_REFUSED) when it could not
 * be written whole. */
int upproxy_send(struct txn *t);

/* The header for <t> into <out> (at least 108 bytes): its length, 0 when
 * the group sends none. */
size_t upproxy_header(const struct txn *t, uint8_t *out);

/* A connection of weir's own (a health check, master/health_probe.c) to a
 * server of a group with proxy_protocol <version> (1 or 2) opens with the
 * header that says so: "PROXY UNKNOWN" (v1) or the LOCAL command (v2), as
 * HAProxy's checks do; the server takes the socket's addresses. Written on
 * <fd> just connected; returns 0, or -1 when it could not be written whole. */
int upproxy_send_local(int fd, int version);

#endif
