/*
 * rate.c: an open-loop HTTP/1.1 load at a fixed rate, for tail latency.
 *
 *   rate -p PORT -r RATE [-c CONNS] [-d SECONDS] [-u PATH] [-w WARMUP]
 *
 * A load generator that sends as fast as answers come back (wrk, h2load)
 * measures a proxy at saturation, where every request queues behind the
 * others and p99 tells mostly how long the queue is. This one sends RATE
 * requests a second in all, spread evenly over CONNS keep-alive
 * connections to 127.0.0.1:PORT (default 64), each connection one request
 * at a time, and takes each request's latency from the time it was due to
 * be sent, not the time it was sent: a request held back because the one
 * before it was slow counts the wait (what wrk2 calls correcting for
 * coordinated omission). The first WARMUP seconds (default 1) are not
 * counted. It prints one line:
 *
 *   rate=R sent=N done=D errors=E p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=..
 *
 * Answers are read by Content-Length (the origins of the bench scripts
 * send one); anything else is an error and closes the connection, which
 * is then opened anew. Loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXC 4096
#define BUCKETS 4096 /* latency histogram: 64 linear steps per power of two */

struct cn {
	int fd;
	uint64_t due;      /* ns: when its next request is to be sent */
	uint64_t sent_due; /* the due time of the request in flight, 0: none */
	char in[1 << 17];
	size_t have;
};

static struct cn conns[MAXC];
static uint64_t hist[BUCKETS];
static uint64_t n_done, n_sent, n_err, lat_max;
static char req[512];
static size_t req_len;
static struct sockaddr_in dst;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Bucket of a latency in microseconds: exact below 64, then 64 steps per
 * doubling (under 1.6% error). */
static unsigned bucket(uint64_t us)
{
	unsigned e = 0;

	if (us < 64)
		return (unsigned)us;
	while ((us >> e) >= 128)
		e++;
	/* us >> e is in [64, 128) */
	unsigned b = 64 + e * 64 + (unsigned)((us >> e) - 64);
	return b < BUCKETS ? b : BUCKETS - 1;
}

static uint64_t bucket_value(unsigned b)
{
	if (b < 64)
		return b;
	unsigned e = (b - 64) / 64, m = (b - 64) % 64;
	return (uint64_t)(64 + m) << e;
}

static uint64_t quantile(double q)
{
	uint64_t want = (uint64_t)(q * (double)n_done), seen = 0;

	for (unsigned b = 0; b < BUCKETS; b++) {
		seen += hist[b];
		if (seen > want)
			return bucket_value(b);
	}
	return lat_max;
}

static int conn_open(struct cn *c, int ep)
{
	int one = 1;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		perror("rate: connect");
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->have = 0;
	c->sent_due = 0;
	return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void conn_reset(struct cn *c, int ep)
{
	n_err++;
	close(c->fd);
	if (conn_open(c, ep) < 0)
		exit(1);
}

/* A whole answer at the start of c->in: its length, 0 if not yet, -1 if
 * it cannot be read. */
static long answer_len(struct cn *c)
{
	char *end = memmem(c->in, c->have, "\r\n\r\n", 4), *cl;

	if (!end)
		return c->have >= sizeof(c->in) ? -1 : 0;
	if (c->have < 12 || memcmp(c->in, "HTTP/1.1 200", 12) != 0)
		return -1;
	cl = memmem(c->in, (size_t)(end - c->in), "\r\nContent-Length: ", 18);
	if (!cl)
		cl = memmem(c->in, (size_t)(end - c->in), "\r\ncontent-length: ", 18);
	if (!cl)
		return -1;
	long total = (end + 4 - c->in) + strtol(cl + 18, NULL, 10);
	if (total > (long)sizeof(c->in))
		return -1;
	return (long)c->have >= total ? total : 0;
}

int main(int argc, char **argv)
{
	int port = 0, nconn = 64, opt, ep;
	double rate = 0, secs = 5, warm = 1;
	const char *path = "/";
	uint64_t start, end, count_from, interval;
	struct epoll_event evs[256];

	while ((opt = getopt(argc, argv, "p:r:c:d:u:w:")) != -1) {
		switch (opt) {
		case 'p': port = atoi(optarg); break;
		case 'r': rate = atof(optarg); break;
		case 'c': nconn = atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'u': path = optarg; break;
		case 'w': warm = atof(optarg); break;
		default:
			fprintf(stderr, "usage: rate -p PORT -r RATE [-c CONNS] [-d SECONDS] [-u PATH] [-w WARMUP]\n");
			return 2;
		}
	}
	if (port <= 0 || rate <= 0 || nconn <= 0 || nconn > MAXC || secs <= 0 || secs > 300) {
		fprintf(stderr, "rate: -p, -r needed; 1 <= -c <= %d; 0 < -d <= 300\n", MAXC);
		return 2;
	}
	req_len = (size_t)snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)port);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* the kernel lets a sleeping timeout run late by the timer slack, 50 us
	 * by default: a request would go out that late and every latency
	 * carry it, hiding the proxy's own share. 1 ns asks for none */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	ep = epoll_create1(0);
	/* each connection sends every nconn/rate seconds, the connections
	 * staggered so that the whole sends evenly */
	interval = (uint64_t)(1e9 * nconn / rate);
	start = now_ns() + 50000000u;
	for (int i = 0; i < nconn; i++) {
		if (conn_open(&conns[i], ep) < 0)
			return 1;
		conns[i].due = start + interval * (uint64_t)i / (uint64_t)nconn;
	}
	count_from = start + (uint64_t)(warm * 1e9);
	end = count_from + (uint64_t)(secs * 1e9);
	for (;;) {
		uint64_t t = now_ns(), next = end;
		int n;

		if (t >= end)
			break;
		for (int i = 0; i < nconn; i++) {
			struct cn *c = &conns[i];

			if (!c->sent_due && c->due <= t) {
				if (write(c->fd, req, req_len) != (ssize_t)req_len) {
					conn_reset(c, ep);
					continue;
				}
				c->sent_due = c->due;
				c->due += interval;
				if (c->sent_due >= count_from)
					n_sent++;
			}
			if (!c->sent_due && c->due < next)
				next = c->due;
		}
		t = now_ns();
		/* to the nanosecond: a millisecond timeout would spin away the
		 * CPU the proxy under test needs */
		struct timespec to = {.tv_sec = 0, .tv_nsec = next > t ? (long)(next - t) : 0};
		if (to.tv_nsec >= 1000000000L)
			to = (struct timespec){.tv_sec = to.tv_nsec / 1000000000L, .tv_nsec = to.tv_nsec % 1000000000L};
		n = epoll_pwait2(ep, evs, 256, &to, NULL);
		for (int k = 0; k < n; k++) {
			struct cn *c = evs[k].data.ptr;
			ssize_t r = read(c->fd, c->in + c->have, sizeof(c->in) - c->have);
			long len;

			if (r <= 0) {
				conn_reset(c, ep);
				continue;
			}
			c->have += (size_t)r;
			len = answer_len(c);
			if (len < 0 || (len > 0 && !c->sent_due)) {
				conn_reset(c, ep);
				continue;
			}
			if (len == 0)
				continue;
			memmove(c->in, c->in + len, c->have - (size_t)len);
			c->have -= (size_t)len;
			t = now_ns();
			if (c->sent_due >= count_from) {
				uint64_t us = (t - c->sent_due) / 1000u;

				hist[bucket(us)]++;
				n_done++;
				if (us > lat_max)
					lat_max = us;
			}
			c->sent_due = 0;
		}
	}
	printf("rate=%.0f sent=%llu done=%llu errors=%llu p50_us=%llu p90_us=%llu p99_us=%llu p999_us=%llu max_us=%llu\n",
	       rate, (unsigned long long)n_sent, (unsigned long long)n_done, (unsigned long long)n_err,
	       (unsigned long long)quantile(0.5), (unsigned long long)quantile(0.9),
	       (unsigned long long)quantile(0.99), (unsigned long long)quantile(0.999), (unsigned long long)lat_max);
	return 0;
}
