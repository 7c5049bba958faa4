/*
 * tunnel.h: Upgrade tunnels (WebSocket and any token a route allows).
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
#ifndef WEIR_WORKER_TUNNEL_H
#define WEIR_WORKER_TUNNEL_H

#include <stdint.h>

#include "common/config.h"

struct txn;

struct tunnel {
	uint8_t on;           /* the stream is a tunnel */
	uint8_t cl_eof;       /* the client shut its side */
	uint8_t up_eof;       /* the upstream shut its side */
	uint8_t up_shut;      /* we shut our write side to the upstream */
	uint8_t cl_shut;      /* we shut our write side to the client */
	uint8_t first_eof;    /* enum tunnel_end of the side that closed first */
	uint8_t proto_len;    /* the upgrade asked for and allowed; 0: none */
	char proto[CONFIG_UPGRADE_MAX];   /* its token, as the client sent it */
	char server[CONFIG_ADDR_STR_MAX]; /* for the access log line */
	uint64_t bytes_up, bytes_down;
	uint32_t idle;        /* ms: timeouts.tunnel of its route, kept past its generation */
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

#endif
