/*
 * load.c: the chaos suite's HTTP/1.1 load client.
 *
 * Principle: every request it starts ends in exactly one outcome, counted by
 * kind, so the suite can hold weir's counters against what a client saw
 * (wrk folds a reset, a short body and a timeout into "socket errors").
 * One thread, epoll, non-blocking sockets; every wait is bounded by the
 * request timeout and the whole run by the duration plus that timeout.
 *
 *   load -a IP:PORT [-H host] [-p path] [-c conns] [-d seconds] [-t timeout_ms]
 *        [-n] [-s surge_total] [-B bind_ip] [-R percent] [-b body_bytes]
 *
 *   closed loop (default): <conns> connections, each sends a request as soon
 *     as the previous answer is complete, for <seconds>; keep-alive unless
 *     -n (a new connection, "Connection: close", per request).
 *   -s N: a surge: N new connections spread evenly over <seconds>, each
 *     sending one request with "Connection: close"; no steady load.
 *   -b N: each request is a POST with a body of N bytes (an upload).
 *   -R P: P% of the requests are given up by the client once the head and
 *     the first body bytes are in: the connection is reset (SO_LINGER 0).
 *     Counted as "aborted", not as a failure: the client chose it.
 *
 * Prints one JSON object: requests, ok (2xx), by status class, failures by
 * kind (connect, reset, eof_head, eof_body, timeout, parse), latency
 * percentiles of the complete answers in milliseconds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 16384 /* a head must fit; bodies are counted, not kept */
#define MAX_LAT (4u << 20)

enum { ST_IDLE, ST_CONNECTING, ST_SENDING, ST_READING };
enum { F_CONNECT, F_RESET, F_EOF_HEAD, F_EOF_BODY, F_TIMEOUT, F_PARSE, F_N };
static const char *fname[F_N] = {"connect", "reset", "eof_head", "eof_body", "timeout", "parse"};

struct conn {
	int fd, state;
	double start;      /* when the current request began */
	size_t sent;
	char buf[RBUF];
	size_t len;
	int have_head;
	long status;
	long long want;    /* body bytes still expected; -1: until close */
	int close_after;
	int abort_me;      /* reset this request once its body has begun */
};

static struct {
	struct sockaddr_in addr, bind;
	int use_bind;
	const char *host, *path;
	int conns, keepalive;
	double duration, timeout;
	long surge;
	int abort_pct;
	char *req;         /* the request, head and body, sent as is */
	size_t reqlen;
	long body;         /* -b: POST a body of this many bytes */
	int ep;
	/* results */
	long requests, active, classes[6], fail[F_N], aborted;
	double opened_at; /* when the last connection of a surge was opened */
	float *lat;
	size_t nlat;
} g;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void conn_reset(struct conn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(g.ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->state = ST_IDLE;
}

static void record(struct conn *c, int failure)
{
	g.active--;
	if (failure >= 0) {
		g.fail[failure]++;
		conn_reset(c);
		return;
	}
	g.classes[c->status / 100 < 6 ? c->status / 100 : 0]++;
	if (g.nlat < MAX_LAT)
		g.lat[g.nlat++] = (float)((now() - c->start) * 1000.0);
}

static int conn_open(struct conn *c)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (g.use_bind) {
		setsockopt(c->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		bind(c->fd, (struct sockaddr *)&g.bind, sizeof(g.bind));
	}
	if (connect(c->fd, (struct sockaddr *)&g.addr, sizeof(g.addr)) < 0 && errno != EINPROGRESS) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	c->state = ST_CONNECTING;
	epoll_ctl(g.ep, EPOLL_CTL_ADD, c->fd, &ev);
	return 0;
}

static void conn_start(struct conn *c)
{
	c->start = now();
	c->sent = 0;
	c->len = 0;
	c->have_head = 0;
	c->want = 0;
	c->close_after = !g.keepalive;
	c->abort_me = g.abort_pct && rand() % 100 < g.abort_pct;
	g.requests++;
	g.active++;
	if (c->fd < 0 && conn_open(c) < 0) {
		record(c, F_CONNECT);
		return;
	}
	if (c->state == ST_IDLE) {
		struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
		c->state = ST_SENDING;
		epoll_ctl(g.ep, EPOLL_CTL_MOD, c->fd, &ev);
	}
}

/* Parses the head in c->buf; 1 when complete, 0 when more is needed, -1 bad. */
static int head_parse(struct conn *c)
{
	char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
	char *p, *line;
	size_t hlen;

	if (!end)
		return c->len >= RBUF ? -1 : 0;
	hlen = (size_t)(end - c->buf) + 4;
	if (c->len < 12 || memcmp(c->buf, "HTTP/1.", 7) != 0)
		return -1;
	c->status = strtol(c->buf + 9, NULL, 10);
	if (c->status < 100 || c->status > 599)
		return -1;
	c->want = -1;
	*end = 0;
	for (line = strstr(c->buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
		p = line + 2;
		if (strncasecmp(p, "content-length:", 15) == 0)
			c->want = strtoll(p + 15, NULL, 10);
		else if (strncasecmp(p, "connection:", 11) == 0 && strcasestr(p, "close"))
			c->close_after = 1;
		else if (strncasecmp(p, "transfer-encoding:", 18) == 0)
			return -1; /* the suite asks only for Content-Length answers */
	}
	if (c->status == 204 || c->status == 304 || (c->status >= 100 && c->status < 200))
		c->want = 0;
	if (c->want < 0)
		c->close_after = 1;
	memmove(c->buf, c->buf + hlen, c->len - hlen);
	c->len -= hlen;
	c->have_head = 1;
	return 1;
}

static double stop_at;

/* A complete answer; in the closed loop the next request starts at once. */
static void conn_done(struct conn *c, double t)
{
	record(c, -1);
	if (c->close_after) {
		conn_reset(c);
	} else {
		struct epoll_event ev = {.events = 0, .data.ptr = c};
		c->state = ST_IDLE;
		epoll_ctl(g.ep, EPOLL_CTL_MOD, c->fd, &ev);
	}
	if (!g.surge && t < stop_at)
		conn_start(c);
}

static void conn_event(struct conn *c, uint32_t events)
{
	if (c->state == ST_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			record(c, F_CONNECT);
			return;
		}
		c->state = ST_SENDING;
	}
	if (c->state == ST_SENDING) {
		ssize_t n = send(c->fd, g.req + c->sent, g.reqlen - c->sent, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN)
				return;
			record(c, errno == ECONNRESET || errno == EPIPE ? F_RESET : F_EOF_HEAD);
			return;
		}
		c->sent += (size_t)n;
		if (c->sent == g.reqlen) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
			c->state = ST_READING;
			epoll_ctl(g.ep, EPOLL_CTL_MOD, c->fd, &ev);
		}
		return;
	}
	if (c->state != ST_READING)
		return;
	(void)events;
	for (;;) {
		ssize_t n = recv(c->fd, c->buf + c->len, RBUF - c->len, 0);
		if (n < 0) {
			if (errno == EAGAIN)
				return;
			record(c, errno == ECONNRESET ? F_RESET : (c->have_head ? F_EOF_BODY : F_EOF_HEAD));
			return;
		}
		if (n == 0) {
			if (c->have_head && c->want < 0) {
				c->close_after = 1;
				conn_done(c, now());
			} else {
				record(c, c->have_head ? F_EOF_BODY : F_EOF_HEAD);
			}
			return;
		}
		c->len += (size_t)n;
		if (!c->have_head) {
			int r = head_parse(c);
			if (r < 0) {
				record(c, F_PARSE);
				return;
			}
			if (r == 0)
				continue;
		}
		if (c->abort_me && c->len > 0) {
			struct linger lg = {.l_onoff = 1, .l_linger = 0};
			setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			g.aborted++;
			g.active--;
			conn_reset(c);
			return;
		}
		if (c->want >= 0) {
			if ((long long)c->len > c->want) {
				record(c, F_PARSE); /* bytes beyond the answer */
				return;
			}
			c->want -= (long long)c->len;
			c->len = 0;
			if (c->want == 0) {
				conn_done(c, now());
				return;
			}
		} else {
			c->len = 0;
		}
	}
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static double pct(double p)
{
	size_t i;
	if (g.nlat == 0)
		return 0;
	i = (size_t)(p * (double)(g.nlat - 1) + 0.5);
	return g.lat[i];
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char ip[64];
	const char *colon = strrchr(s, ':');

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	if (colon) {
		snprintf(ip, sizeof(ip), "%.*s", (int)(colon - s), s);
		a->sin_port = htons((uint16_t)atoi(colon + 1));
	} else {
		snprintf(ip, sizeof(ip), "%s", s);
	}
	return inet_pton(AF_INET, ip, &a->sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct conn *cs;
	int opt, nconn;
	double t0, stop, hard;
	long opened = 0;
	struct rlimit rl;

	g.host = "localhost";
	g.path = "/";
	g.conns = 8;
	g.keepalive = 1;
	g.duration = 5;
	g.timeout = 5;
	while ((opt = getopt(argc, argv, "a:H:p:c:d:t:ns:B:R:b:")) != -1) {
		switch (opt) {
		case 'a':
			if (parse_addr(optarg, &g.addr) < 0)
				return 2;
			break;
		case 'B':
			if (parse_addr(optarg, &g.bind) < 0)
				return 2;
			g.use_bind = 1;
			break;
		case 'H': g.host = optarg; break;
		case 'p': g.path = optarg; break;
		case 'c': g.conns = atoi(optarg); break;
		case 'd': g.duration = atof(optarg); break;
		case 't': g.timeout = atof(optarg) / 1000.0; break;
		case 'n': g.keepalive = 0; break;
		case 's': g.surge = atol(optarg); break;
		case 'R': g.abort_pct = atoi(optarg); break;
		case 'b': g.body = atol(optarg); break;
		default:
			fprintf(stderr, "usage: load -a IP:PORT [-H host] [-p path] [-c conns] [-d s] "
			                "[-t ms] [-n] [-s surge] [-B bind_ip] [-R percent] [-b body_bytes]\n");
			return 2;
		}
	}
	if (!g.addr.sin_port)
		return 2;
	if (g.surge) {
		g.conns = (int)g.surge;
		g.keepalive = 0;
	}
	nconn = g.conns;
	rl.rlim_cur = rl.rlim_max = (rlim_t)nconn + 256;
	setrlimit(RLIMIT_NOFILE, &rl); /* root raises it; otherwise what is allowed */
	g.req = malloc(1024 + (size_t)g.body);
	if (!g.req)
		return 1;
	if (g.body)
		g.reqlen = (size_t)snprintf(g.req, 1024, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %ld\r\n%s\r\n",
		                            g.path, g.host, g.body, g.keepalive ? "" : "Connection: close\r\n");
	else
		g.reqlen = (size_t)snprintf(g.req, 1024, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", g.path, g.host,
		                            g.keepalive ? "" : "Connection: close\r\n");
	memset(g.req + g.reqlen, 'x', (size_t)g.body);
	g.reqlen += (size_t)g.body;
	g.lat = malloc(MAX_LAT * sizeof(float));
	cs = calloc((size_t)nconn, sizeof(*cs));
	if (!g.lat || !cs)
		return 1;
	g.ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < nconn; i++)
		cs[i].fd = -1;
	t0 = now();
	stop = stop_at = t0 + g.duration;
	hard = stop + g.timeout + 1;
	double next_scan = 0;
	for (;;) {
		struct epoll_event evs[256];
		double t = now();
		int n, limit = g.surge ? (int)opened : nconn;

		if (t > hard)
			break;
		if (g.surge) {
			/* open the share of the surge that is due by now */
			long due = t >= stop ? g.surge : (long)((double)g.surge * (t - t0) / g.duration);
			while (opened < due && opened < g.surge)
				conn_start(&cs[opened++]);
			if (opened == g.surge && !g.opened_at)
				g.opened_at = now() - t0;
			limit = (int)opened;
		}
		if (t >= next_scan) {
			/* timeouts, and (closed loop) connections whose last request failed */
			next_scan = t + (g.surge ? 0.05 : 0.01);
			for (int i = 0; i < limit; i++) {
				struct conn *c = &cs[i];
				if (c->state != ST_IDLE && t - c->start > g.timeout)
					record(c, F_TIMEOUT);
				if (c->state == ST_IDLE && !g.surge && t < stop)
					conn_start(c);
			}
		}
		if (g.active == 0 && (t >= stop || (g.surge && opened == g.surge)))
			break;
		n = epoll_wait(g.ep, evs, 256, g.surge ? 1 : 10);
		for (int i = 0; i < n; i++)
			conn_event(evs[i].data.ptr, evs[i].events);
	}
	for (int i = 0; i < (g.surge ? opened : nconn); i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	qsort(g.lat, g.nlat, sizeof(float), cmp_float);
	{
		long failed = 0;
		for (int i = 0; i < F_N; i++)
			failed += g.fail[i];
		printf("{\"requests\": %ld, \"ok\": %ld, \"completed\": %zu, \"failed\": %ld, \"seconds\": %.3f, ",
		       g.requests, g.classes[2], g.nlat, failed, now() - t0);
		printf("\"open_seconds\": %.3f, \"aborted\": %ld, ", g.opened_at, g.aborted);
		printf("\"classes\": {\"1xx\": %ld, \"2xx\": %ld, \"3xx\": %ld, \"4xx\": %ld, \"5xx\": %ld}, ",
		       g.classes[1], g.classes[2], g.classes[3], g.classes[4], g.classes[5]);
		printf("\"failures\": {");
		for (int i = 0; i < F_N; i++)
			printf("%s\"%s\": %ld", i ? ", " : "", fname[i], g.fail[i]);
		printf("}, \"ms\": {\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f, \"max\": %.2f}}\n", pct(0.5),
		       pct(0.9), pct(0.99), g.nlat ? g.lat[g.nlat - 1] : 0.0);
	}
	return 0;
}
