/*
 * realip.h: the request's client address and its request id.
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
#ifndef WEIR_WORKER_REALIP_H
#define WEIR_WORKER_REALIP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "worker/http.h"

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
static inline int realip_is_request_id(const struct http_header *h)
{
	return h->name_len == 12 && http_name_same_var(h->name, "X-Request-Id", 12);
}

/* 64 random bits from the worker's generator (not for secrets). */
uint64_t realip_random(void);

#endif
