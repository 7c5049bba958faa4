/*
 * upproxy.c: the PROXY protocol towards upstreams (worker/upproxy.h).
 */

#include "worker/core/core.h"
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/proxy_hdr.h"

/* An address as 16 bytes of IPv6 (IPv4 mapped) and as its own family. */
struct upproxy_addr {
	int v6;
	uint8_t a[16];
	uint16_t port;
};

static void upproxy_map(struct upproxy_addr *x)
{
	if (x->v6)
		return;
	memmove(x->a + 12, x->a, 4);
	memset(x->a, 0, 10);
	x->a[10] = x->a[11] = 0xff;
	x->v6 = 1;
}

static void upproxy_from_sa(const struct sockaddr_storage *ss, struct upproxy_addr *x)
{
	memset(x, 0, sizeof(*x));
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
		x->v6 = 1;
		memcpy(x->a, &s6->sin6_addr, 16);
		x->port = ntohs(s6->sin6_port);
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
		memcpy(x->a, &s4->sin_addr, 4);
		x->port = ntohs(s4->sin_port);
	}
}

size_t upproxy_header(const struct txn *t, uint8_t *out)
{
	const struct route_upstream *up = &route_upstreams(t->table)[route_servers(t->table)[t->server].upstream];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct upproxy_addr src, dst, peer;
	char tmp[INET6_ADDRSTRLEN], s1[INET6_ADDRSTRLEN], s2[INET6_ADDRSTRLEN];
	size_t cl;
	const char *client = realip_client(t->c, t, &cl);
	int n;

	if (!up->proxy_protocol)
		return 0;
	memset(&dst, 0, sizeof(dst));
	if (getsockname(t->c->io.fd, (struct sockaddr *)&ss, &sl) == 0)
		upproxy_from_sa(&ss, &dst);
	memset(&peer, 0, sizeof(peer));
	sl = sizeof(ss);
	if (getpeername(t->c->io.fd, (struct sockaddr *)&ss, &sl) == 0)
		upproxy_from_sa(&ss, &peer);
	memset(&src, 0, sizeof(src));
	memcpy(tmp, client, cl < sizeof(tmp) ? cl : sizeof(tmp) - 1);
	tmp[cl < sizeof(tmp) ? cl : sizeof(tmp) - 1] = '\0';
	if (inet_pton(AF_INET, tmp, src.a) != 1 && inet_pton(AF_INET6, tmp, src.a) == 1)
		src.v6 = 1;
	if (src.v6 == peer.v6 && memcmp(src.a, peer.a, src.v6 ? 16 : 4) == 0)
		src.port = peer.port; /* the client is the socket's peer */
	if (src.v6 != dst.v6) {
		upproxy_map(&src);
		upproxy_map(&dst);
	}
	if (up->proxy_protocol == 1) {
		inet_ntop(src.v6 ? AF_INET6 : AF_INET, src.a, s1, sizeof(s1));
		inet_ntop(dst.v6 ? AF_INET6 : AF_INET, dst.a, s2, sizeof(s2));
		n = snprintf((char *)out, PROXY_PROTO_V1_MAX + 1, "PROXY %s %s %s %u %u\r\n", src.v6 ? "TCP6" : "TCP4",
		             s1, s2, src.port, dst.port);
		return n > 0 && n <= PROXY_PROTO_V1_MAX ? (size_t)n : 0;
	}
	memcpy(out, proxy_hdr_v2_sig, 12);
	out[12] = 0x21; /* version 2, PROXY */
	out[13] = src.v6 ? 0x21 : 0x11;
	n = src.v6 ? 36 : 12;
	out[14] = 0;
	out[15] = (uint8_t)n;
	memcpy(out + 16, src.a, src.v6 ? 16 : 4);
	memcpy(out + 16 + (src.v6 ? 16 : 4), dst.a, src.v6 ? 16 : 4);
	out[16 + n - 4] = (uint8_t)(src.port >> 8);
	out[16 + n - 3] = (uint8_t)src.port;
	out[16 + n - 2] = (uint8_t)(dst.port >> 8);
	out[16 + n - 1] = (uint8_t)dst.port;
	return 16 + (size_t)n;
}

int upproxy_send(struct txn *t)
{
	uint8_t h[PROXY_PROTO_V1_MAX + 1];
	size_t n = upproxy_header(t, h);

	errno = 0; /* a short write sets none */
	if (n == 0 || proxy_hdr_send(t->u->io.fd, h, n) == 0)
		return 0;
	log_warn("upstream %s: the PROXY header could not be written: %s", route_servers(t->table)[t->server].text,
	         errno ? strerror(errno) : "short write");
	return WEIR_ERR(UPSTREAM_REFUSED);
}
