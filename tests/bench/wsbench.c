/*
 * wsbench.c: a WebSocket echo origin and load generator for comparing
 * proxies' tunnels (weir, nginx, HAProxy), one epoll thread each.
 *
 *   wsbench origin PORT
 *   wsbench client HOST:PORT CONNS SECONDS [SIZE]
 *
 * The origin answers every upgrade with a 101 (no Sec-WebSocket-Accept
 * check: neither the proxies nor our client verify it), then unmasks each
 * client frame and echoes it as a server frame. The client opens CONNS
 * sockets, upgrades them, and keeps one binary message of SIZE bytes (64
 * by default, < 126) in flight on each: the frame is framed and masked
 * once, so a message costs the client one write and one read, less than
 * the proxy's two of each: the proxy saturates first. It prints messages
 * per second and the latency percentiles over SECONDS after all sockets
 * are up.
 *
 * Build: cc -O2 -o wsbench tests/bench/wsbench.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF 65536
#define MAX_US 1000000 /* latency histogram: 1 us buckets up to 1 s */

struct sock {
	int fd;
	int up;           /* upgraded */
	uint32_t got;     /* bytes of the current answer (client) or input (origin) */
	uint32_t outlen;  /* origin: echo bytes not written yet */
	double sent_at;
	char *in, *out;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nonblock(int fd)
{
	int one = 1;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void ep_set(int ep, int op, struct sock *s, uint32_t ev)
{
	struct epoll_event e = {.events = ev, .data.ptr = s};

	epoll_ctl(ep, op, s->fd, &e);
}

/* ---- origin ---------------------------------------------------------- */

static const char resp101[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Accept: bench\r\n\r\n";

/* Unmasks the complete frames in s->in into server frames in s->out. */
static void origin_frames(struct sock *s)
{
	uint32_t off = 0;

	for (;;) {
		unsigned char *p = (unsigned char *)s->in + off;
		uint32_t avail = s->got - off, hl = 2, len;

		if (avail < 2)
			break;
		len = p[1] & 0x7f;
		if (len == 126) {
			if (avail < 4)
				break;
			len = (uint32_t)p[2] << 8 | p[3];
			hl = 4;
		} else if (len == 127) {
			fprintf(stderr, "origin: 64-bit lengths are not supported\n");
			exit(1);
		}
		if (avail < hl + 4 + len || s->outlen + hl + len > BUF)
			break;
		unsigned char *mask = p + hl, *data = p + hl + 4, *o = (unsigned char *)s->out + s->outlen;
		o[0] = p[0];
		o[1] = (unsigned char)(hl == 4 ? 126 : len);
		if (hl == 4) {
			o[2] = p[2];
			o[3] = p[3];
		}
		for (uint32_t i = 0; i < len; i++)
			o[hl + i] = data[i] ^ mask[i & 3];
		s->outlen += hl + len;
		off += hl + 4 + len;
	}
	memmove(s->in, s->in + off, s->got - off);
	s->got -= off;
}

static void origin_close(struct sock *s)
{
	close(s->fd);
	free(s->in);
	free(s->out);
	free(s);
}

static void origin_event(int ep, struct sock *s)
{
	for (;;) {
		if (s->outlen) {
			ssize_t n = write(s->fd, s->out, s->outlen);
			if (n < 0 && errno == EAGAIN) {
				ep_set(ep, EPOLL_CTL_MOD, s, EPOLLOUT);
				return;
			}
			if (n <= 0) {
				origin_close(s);
				return;
			}
			memmove(s->out, s->out + n, s->outlen - (uint32_t)n);
			s->outlen -= (uint32_t)n;
			continue;
		}
		ssize_t n = read(s->fd, s->in + s->got, BUF - s->got);
		if (n < 0 && errno == EAGAIN) {
			ep_set(ep, EPOLL_CTL_MOD, s, EPOLLIN);
			return;
		}
		if (n <= 0) {
			origin_close(s);
			return;
		}
		s->got += (uint32_t)n;
		if (!s->up) {
			char *e = memmem(s->in, s->got, "\r\n\r\n", 4);
			if (!e)
				continue;
			uint32_t hl = (uint32_t)(e + 4 - s->in);
			memmove(s->in, s->in + hl, s->got - hl);
			s->got -= hl;
			memcpy(s->out, resp101, sizeof(resp101) - 1);
			s->outlen = sizeof(resp101) - 1;
			s->up = 1;
		}
		origin_frames(s);
	}
}

static int origin(int port)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ep = epoll_create1(0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct sock ls = {.fd = lfd};
	struct epoll_event evs[256];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4096)) {
		perror("origin: bind");
		return 1;
	}
	nonblock(lfd);
	ep_set(ep, EPOLL_CTL_ADD, &ls, EPOLLIN);
	printf("ready 127.0.0.1:%d\n", port);
	fflush(stdout);
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		for (int i = 0; i < n; i++) {
			struct sock *s = evs[i].data.ptr;
			if (s == &ls) {
				int fd;
				while ((fd = accept(lfd, NULL, NULL)) >= 0) {
					struct sock *c = calloc(1, sizeof(*c));
					c->fd = fd;
					c->in = malloc(BUF);
					c->out = malloc(BUF);
					nonblock(fd);
					ep_set(ep, EPOLL_CTL_ADD, c, EPOLLIN);
				}
				continue;
			}
			origin_event(ep, s);
		}
	}
}

/* ---- client ---------------------------------------------------------- */

static char frame[2 + 4 + 125];
static uint32_t frame_len, answer_len;
static uint32_t *hist;
static uint64_t msgs, errors;
static int counting;

static void client_send(struct sock *s)
{
	/* one small frame into an empty socket buffer: never short */
	if (write(s->fd, frame, frame_len) != (ssize_t)frame_len)
		errors++;
	s->sent_at = now_s();
	s->got = 0;
}

static void client_event(struct sock *s, int *ready)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(s->fd, buf, sizeof(buf));
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			fprintf(stderr, "client: a socket closed (%s)\n", n ? strerror(errno) : "EOF");
			exit(1);
		}
		if (!s->up) {
			/* the 101 head alone: the origin sends nothing before our frame */
			if (!memmem(buf, (size_t)n, "\r\n\r\n", 4))
				continue;
			if (memcmp(buf, "HTTP/1.1 101", 12) != 0) {
				fprintf(stderr, "client: no 101: %.*s\n", (int)n, buf);
				exit(1);
			}
			s->up = 1;
			(*ready)++;
			client_send(s);
			continue;
		}
		s->got += (uint32_t)n;
		if (s->got >= answer_len) {
			if (counting) {
				uint64_t us = (uint64_t)((now_s() - s->sent_at) * 1e6);
				hist[us < MAX_US ? us : MAX_US - 1]++;
				msgs++;
			}
			client_send(s);
		}
	}
}

static int client(const char *hostport, int conns, double seconds, uint32_t size)
{
	char host[64], req[256];
	const char *colon = strrchr(hostport, ':');
	struct sockaddr_in a = {.sin_family = AF_INET};
	int ep = epoll_create1(0), ready = 0, reqlen;
	struct epoll_event evs[512];
	struct sock *socks = calloc((size_t)conns, sizeof(*socks));
	double t0 = 0, end = 0;

	if (!colon || size == 0 || size > 125) {
		fprintf(stderr, "client: HOST:PORT, 1 <= SIZE <= 125\n");
		return 2;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, host, &a.sin_addr);
	hist = calloc(MAX_US, sizeof(*hist));
	frame[0] = (char)0x82;
	frame[1] = (char)(0x80 | size);
	memcpy(frame + 2, "\x12\x34\x56\x78", 4);
	for (uint32_t i = 0; i < size; i++)
		frame[6 + i] = (char)(('a' + i % 26) ^ frame[2 + (i & 3)]);
	frame_len = 6 + size;
	answer_len = 2 + size;
	reqlen = snprintf(req, sizeof(req),
	                  "GET /echo HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
	                  hostport);
	for (int i = 0; i < conns; i++) {
		struct sock *s = &socks[i];
		s->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s->fd, (struct sockaddr *)&a, sizeof(a)) || write(s->fd, req, (size_t)reqlen) != reqlen) {
			perror("client: connect");
			return 1;
		}
		nonblock(s->fd);
		ep_set(ep, EPOLL_CTL_ADD, s, EPOLLIN);
	}
	for (;;) {
		int n = epoll_wait(ep, evs, 512, 100);
		double t = now_s();
		for (int i = 0; i < n; i++)
			client_event(evs[i].data.ptr, &ready);
		if (!counting && ready == conns) {
			counting = 1;
			t0 = t;
			end = t + seconds;
		}
		if (counting && t >= end)
			break;
	}
	double took = now_s() - t0;
	uint64_t acc = 0, p50 = 0, p99 = 0, p999 = 0;
	for (uint32_t us = 0; us < MAX_US; us++) {
		acc += hist[us];
		if (!p50 && acc * 2 >= msgs)
			p50 = us;
		if (!p99 && acc * 100 >= msgs * 99)
			p99 = us;
		if (!p999 && acc * 1000 >= msgs * 999) {
			p999 = us;
			break;
		}
	}
	printf("conns %d size %u: %llu messages in %.2f s: %.0f msg/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, "
	       "errors %llu\n",
	       conns, size, (unsigned long long)msgs, took, msgs / took, p50 / 1e3, p99 / 1e3, p999 / 1e3,
	       (unsigned long long)errors);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "origin"))
		return origin(atoi(argv[2]));
	if (argc >= 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atof(argv[4]), argc > 5 ? (uint32_t)atoi(argv[5]) : 64);
	fprintf(stderr, "usage: wsbench origin PORT | wsbench client HOST:PORT CONNS SECONDS [SIZE]\n");
	return 2;
}
