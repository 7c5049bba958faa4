/*
 * proxy_local.h: the one piece of the PROXY protocol towards upstreams
 * that a process other than a worker needs (the master's health checks,
 * master/health_probe.c), without the rest of the worker. Implemented in
 * worker/core/upproxy.c; the worker's layers see it through net.h.
 */
#ifndef WEIR_WORKER_NET_PROXY_LOCAL_H
#define WEIR_WORKER_NET_PROXY_LOCAL_H

/* A connection of weir's own (a health check, master/health_probe.c) to a
 * server of a group with proxy_protocol <version> (1 or 2) opens with the
 * header that says so: "PROXY UNKNOWN" (v1) or the LOCAL command (v2), as
 * HAProxy's checks do; the server takes the socket's addresses. Written on
 * <fd> just connected; returns 0, or -1 when it could not be written whole. */
int upproxy_send_local(int fd, int version);

#endif
