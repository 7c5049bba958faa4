/*
 * conn_proxy.c: reading the PROXY protocol header (see conn_proxy.h).
 */
#include "worker/net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "worker/base/base.h"

/* Counts a failed header on <c> and logs <why> with the balancer's
 * address (c->peer is still the socket's); log.c holds back what passes
 * ten lines a second from this call site and says how many. */
static int conn_proxy_fail(struct conn *c, const char *why)
{
	worker_count_error(WEIR_ERR(PROXY_PROTOCOL));
	log_warn("%s: PROXY protocol header refused: %s, closing", c->peer, why);
	return WEIR_ERR(PROXY_PROTOCOL);
}

/* End of stream or a socket error after <have> header bytes. */
static int conn_proxy_cut(struct conn *c, uint32_t have)
{
	if (have == 0)
		return WEIR_ERR(CLIENT_CLOSED); /* a TCP health check: not worth a line */
	return conn_proxy_fail(c, "connection closed in the header");
}

void conn_proxy_timeout(struct conn *c)
{
	if (c->in && c->in->end)
		conn_proxy_fail(c, "timed out in the header");
}

/* Reads the <n> bytes at <c>->in->data + <at> that were peeked. */
static int conn_proxy_consume(struct conn *c, uint32_t at, uint32_t n)
{
	ssize_t got;

	do
		got = recv(c->io.fd, c->in->data + at, n, 0);
	while (got < 0 && errno == EINTR);
	return got == (ssize_t)n ? 0 : -1;
}

int conn_proxy_read(struct conn *c)
{
	struct proxy_proto pp;
	int peek = c->ssl != NULL;

	if (!c->in && !(c->in = buf_get())) {
		worker_count_error(WEIR_ERR(NOMEM));
		return WEIR_ERR(NOMEM);
	}
	for (;;) {
		/* c->in holds header bytes only, from its start */
		uint32_t have = c->in->end, took;
		size_t room = (peek ? PROXY_PROTO_MAX : c->in->cap) - have;
		ssize_t n = recv(c->io.fd, c->in->data + have, room, peek ? MSG_PEEK : 0);
		int rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			c->readable = 0;
			return WEIR_EAGAIN;
		}
		if (n <= 0)
			return conn_proxy_cut(c, have);
		rc = proxy_proto_parse(c->in->data, have + (size_t)n, &pp);
		if (rc != 0 && rc != WEIR_EAGAIN)
			return conn_proxy_fail(c, pp.why);
		/* when more is needed, every byte so far is the header's */
		took = rc == 0 ? pp.len - have : (uint32_t)n;
		if (peek && conn_proxy_consume(c, have, took) < 0)
			return conn_proxy_cut(c, have);
		c->in->end = have + (peek ? took : (uint32_t)n);
		SHM_ADD(wk.cnt, bytes_in, peek ? took : (uint32_t)n);
		if (rc == WEIR_EAGAIN) {
			if ((size_t)n < room) {
				c->readable = 0;
				return WEIR_EAGAIN;
			}
			continue;
		}
		break;
	}
	if (peek) {
		/* the TLS layer reads the socket itself: the ClientHello
		 * may be there already */
		buf_put(c->in);
		c->in = NULL;
		c->readable = 1;
	} else {
		c->in->start = pp.len; /* the rest is the first request's */
		c->readable = c->in->end == c->in->cap;
	}
	if (!pp.local && inet_ntop(pp.family, pp.src, c->peer, sizeof(c->peer)))
		c->peer_len = (uint8_t)strlen(c->peer);
	return 0;
}
