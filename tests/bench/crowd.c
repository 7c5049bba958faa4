/*
 * crowd.c: holds a crowd of idle keep-alive HTTP/1.1 clients on one epoll.
 *
 *   crowd -p PORT -n N [-d DST] [-s SRC] [-a ADDRS] [-b BATCH] [-u PATH]
 *         [-w SECONDS]
 *
 * Opens N connections to DST:PORT (default 127.0.0.1), at most BATCH
 * (default 500) in progress at once. Each is bound to a source address of
 * its own spread over ADDRS (default 256) addresses from SRC (default
 * 127.1.0.1 upwards), with IP_BIND_ADDRESS_NO_PORT so the port is chosen at
 * connect time from the whole 4-tuple: one source address gives about
 * 28,000 connections to one listener, a few hundred give millions. Each
 * connection sends one "GET PATH" (default /), reads the whole answer
 * (Content-Length framing) and then sits idle with only EPOLLIN|EPOLLRDHUP
 * armed, so a close by the server is seen and counted.
 *
 * When every connection is idle or failed (or after -w SECONDS, default
 * 120, of opening), it prints one line on stdout and flushes it:
 *
 *   ready ok=N failed=F first_error=TEXT secs=S
 *
 * and then holds. Each line read on stdin ("status") prints
 *
 *   status open=O closed=C
 *
 * (C: idle connections the server closed since ready); end of stdin, or
 * SIGTERM, closes them all and exits. The limit of open files is raised to
 * N + 64 (root raises the hard limit too). Loopback only: the addresses
 * must be in 127.0.0.0/8.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { ST_FREE, ST_CONNECTING, ST_READING, ST_IDLE, ST_CLOSED, ST_FAILED };

struct cl {
	int fd;
	uint8_t st;
	uint16_t got;   /* head bytes kept so far */
	long need;      /* body bytes still to come once the head is read, -1 before */
	char head[512]; /* the response head, until its end is seen */
};

static struct cl *cls;
static int n, batch = 500, naddr = 256, ep;
static int ok, failed, inflight, closed_idle;
static char first_error[128] = "none";
static char req[512];
static size_t req_len;
static volatile sig_atomic_t stop;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(struct cl *c, const char *what, int err)
{
	if (!failed)
		snprintf(first_error, sizeof(first_error), "%s:%s", what, err ? strerror(err) : "answer");
	for (char *p = first_error; *p; p++)
		if (*p == ' ')
			*p = '_';
	failed++;
	inflight--;
	close(c->fd);
	c->fd = -1;
	c->st = ST_FAILED;
}

static void start_one(int i, uint32_t src_base, struct sockaddr_in *dst)
{
	struct cl *c = &cls[i];
	struct sockaddr_in src = {.sin_family = AF_INET};
	struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
	int one = 1;

	c->need = -1;
	c->got = 0;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	inflight++;
	if (c->fd < 0) {
		c->st = ST_CONNECTING;
		fail(c, "socket", errno);
		return;
	}
	src.sin_addr.s_addr = htonl(src_base + (uint32_t)(i % naddr));
	setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		fail(c, "bind", errno);
		return;
	}
	c->st = ST_CONNECTING;
	if (connect(c->fd, (struct sockaddr *)dst, sizeof(*dst)) < 0 && errno != EINPROGRESS) {
		fail(c, "connect", errno);
		return;
	}
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		fail(c, "epoll", errno);
}

/* The answer's framing: the head is read whole (it fits in c->head), its
 * Content-Length says how many body bytes follow. */
static void on_read(struct cl *c)
{
	char buf[16384];
	ssize_t r;

	for (;;) {
		r = read(c->fd, buf, sizeof(buf));
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			fail(c, "read", r < 0 ? errno : ECONNRESET);
			return;
		}
		size_t off = 0;
		if (c->need < 0) {
			size_t take = (size_t)r < sizeof(c->head) - 1 - c->got ? (size_t)r : sizeof(c->head) - 1 - c->got;
			memcpy(c->head + c->got, buf, take);
			c->got = (uint16_t)(c->got + take);
			c->head[c->got] = 0;
			char *end = strstr(c->head, "\r\n\r\n");
			if (!end) {
				if (c->got == sizeof(c->head) - 1)
					fail(c, "head", 0);
				continue;
			}
			if (strncmp(c->head, "HTTP/1.1 200", 12) != 0) {
				fail(c, "status", 0);
				return;
			}
			char *cl = strcasestr(c->head, "\r\ncontent-length:");
			c->need = cl && cl < end ? strtol(cl + 17, NULL, 10) : 0;
			off = (size_t)(end + 4 - c->head) - (c->got - take);
		}
		c->need -= (long)((size_t)r - off);
		if (c->need == 0) {
			struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)(c - cls)};

			epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
			c->st = ST_IDLE;
			ok++;
			inflight--;
			return;
		}
		if (c->need < 0) {
			fail(c, "extra_bytes", 0);
			return;
		}
	}
}

static void on_event(struct cl *c, uint32_t events)
{
	if (c->st == ST_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err || (events & (EPOLLERR | EPOLLHUP))) {
			fail(c, "connect", err ? err : ECONNREFUSED);
			return;
		}
		if (write(c->fd, req, req_len) != (ssize_t)req_len) {
			fail(c, "write", errno);
			return;
		}
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(c - cls)};
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		c->st = ST_READING;
		return;
	}
	if (c->st == ST_READING) {
		on_read(c);
		return;
	}
	if (c->st == ST_IDLE) {
		/* an idle connection only turns readable when the server closes
		 * it (or sends what it should not): either way it is gone */
		closed_idle++;
		ok--;
		close(c->fd);
		c->fd = -1;
		c->st = ST_CLOSED;
	}
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	const char *dst_s = "127.0.0.1", *src_s = "127.1.0.1", *path = "/";
	int port = 0, opt, next = 0, ready = 0;
	double wait_s = 120, t0;
	struct sockaddr_in dst = {.sin_family = AF_INET};
	struct in_addr src;
	struct rlimit rl;
	struct epoll_event evs[512];

	while ((opt = getopt(argc, argv, "p:n:d:s:a:b:u:w:")) != -1) {
		switch (opt) {
		case 'p': port = atoi(optarg); break;
		case 'n': n = atoi(optarg); break;
		case 'd': dst_s = optarg; break;
		case 's': src_s = optarg; break;
		case 'a': naddr = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 'u': path = optarg; break;
		case 'w': wait_s = atof(optarg); break;
		default: goto usage;
		}
	}
	if (port <= 0 || n <= 0 || naddr <= 0 || batch <= 0 || inet_pton(AF_INET, dst_s, &dst.sin_addr) != 1 ||
	    inet_pton(AF_INET, src_s, &src) != 1)
		goto usage;
	if ((ntohl(dst.sin_addr.s_addr) >> 24) != 127 || (ntohl(src.s_addr) >> 24) != 127 ||
	    ((ntohl(src.s_addr) + (uint32_t)naddr - 1) >> 24) != 127) {
		fprintf(stderr, "crowd: addresses must be in 127.0.0.0/8\n");
		return 2;
	}
	dst.sin_port = htons((uint16_t)port);
	req_len = (size_t)snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: crowd\r\n\r\n", path);

	rl.rlim_cur = rl.rlim_max = (rlim_t)n + 64;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < (rlim_t)n + 16) {
			fprintf(stderr, "crowd: open files limit %llu is too low for %d connections\n",
			        (unsigned long long)rl.rlim_cur, n);
			return 1;
		}
	}
	cls = calloc((size_t)n, sizeof(*cls));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!cls || ep < 0) {
		perror("crowd");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);

	t0 = now();
	while (!stop && ok + failed < n && now() - t0 < wait_s) {
		while (next < n && inflight < batch)
			start_one(next++, ntohl(src.s_addr), &dst);
		int k = epoll_wait(ep, evs, 512, 100);
		for (int i = 0; i < k; i++)
			on_event(&cls[evs[i].data.u32], evs[i].events);
	}
	for (int i = 0; i < n; i++)
		if (cls[i].st == ST_CONNECTING || cls[i].st == ST_READING || (cls[i].st == ST_FREE && i >= next)) {
			if (cls[i].fd >= 0 && cls[i].st != ST_FREE)
				close(cls[i].fd);
			cls[i].fd = -1;
			cls[i].st = ST_FAILED;
			if (!failed)
				snprintf(first_error, sizeof(first_error), "timeout");
			failed++;
		}
	printf("ready ok=%d failed=%d first_error=%s secs=%.1f\n", ok, failed, first_error, now() - t0);
	fflush(stdout);
	ready = 1;

	struct epoll_event sev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
	epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);
	while (!stop && ready) {
		int k = epoll_wait(ep, evs, 512, 1000);
		for (int i = 0; i < k; i++) {
			if (evs[i].data.u32 == UINT32_MAX) {
				char line[256];
				ssize_t r = read(0, line, sizeof(line));
				if (r <= 0) {
					stop = 1;
					break;
				}
				printf("status open=%d closed=%d\n", ok, closed_idle);
				fflush(stdout);
				continue;
			}
			on_event(&cls[evs[i].data.u32], evs[i].events);
		}
	}
	for (int i = 0; i < n; i++)
		if (cls[i].st == ST_IDLE)
			close(cls[i].fd);
	return 0;
usage:
	fprintf(stderr, "usage: crowd -p PORT -n N [-d DST] [-s SRC] [-a ADDRS] [-b BATCH] [-u PATH] [-w SECONDS]\n");
	return 2;
}
