/*
 * proxy_hdr.h: the PROXY protocol header a connection of weir's own opens
 * with, for a server of a group with proxy_protocol set: the master's
 * health checks (master/health_probe.c) and the workers' upstream side
 * (worker/core/upproxy.c, which adds the headers that carry a client).
 */
#ifndef WEIR_COMMON_PROXY_HDR_H
#define WEIR_COMMON_PROXY_HDR_H

#include <stddef.h>
#include <stdint.h>

/* The 12 bytes every v2 header starts with. */
extern const uint8_t proxy_hdr_v2_sig[12];

/* "PROXY UNKNOWN\r\n" (v1) or the v2 LOCAL command, as HAProxy's checks
 * send: the server takes the socket's own addresses. */
#define PROXY_HDR_LOCAL_MAX 16

/* Writes the LOCAL header of <version> (1 or 2) into <out>
 * (PROXY_HDR_LOCAL_MAX bytes); returns its length. */
size_t proxy_hdr_local(int version, uint8_t out[PROXY_HDR_LOCAL_MAX]);

/* Sends <h>[0..n) on <fd>, just connected and non-blocking, whole or not
 * at all (a fresh socket's buffer takes a few bytes); 0 or -1. */
int proxy_hdr_send(int fd, const void *h, size_t n);

#endif
