/*
 * floor.c: the least a keep-alive HTTP/1 proxy can do on this kernel, as a
 * yardstick for weir, nginx and HAProxy (tests/bench/cpusplit.sh).
 *
 *   floor [--splice] LISTEN_PORT ORIGIN_PORT      (both on 127.0.0.1)
 *
 * Principle: one thread, one level-triggered epoll set, and for every client
 * connection one upstream connection opened when the client arrives and
 * kept for its life (no pool, no choice of server). Bytes go client to
 * origin and origin to client through one buffer per direction; the only
 * parsing is what finding the end of a response needs: the Content-Length
 * of its head, then a count. A direction whose destination cannot take more
 * stops reading its source until it can (back-pressure), which is the one
 * piece of bookkeeping every real proxy shares. It moves bytes with recv(2)
 * and send(2), never read(2) and write(2): on a socket those pass through
 * the file layer first (vfs_read, vfs_write: about 3% of the floor's CPU
 * in a perf profile on this kernel), which a proxy need not pay.
 *
 * --splice moves response bodies from the origin to the client through a
 * pipe with splice(2), never through user space: the head is read alone
 * (its end found with MSG_PEEK), the body spliced. It shows what a proxy
 * could save on large plain bodies by the same means.
 *
 * What it leaves out on purpose, so that it stays a floor: routing, header
 * checks and rewriting, chunked bodies, timeouts, logs, counters, TLS. A
 * response without a Content-Length ends the pair of connections. It is a
 * benchmark tool, not a server: errors close the pair, and it never frees
 * more than it must.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (256 * 1024)
#define PIPE_SIZE (256 * 1024)

static int use_splice;

struct side {
	int fd;
	struct pair *p;
	int is_up;
};

/* One direction's pending bytes: buf[off, len) not yet written. */
struct pipe {
	char *buf;
	size_t off, len;
};

struct pair {
	struct side cl, up;
	struct pipe to_up, to_cl;
	int connecting;       /* the upstream connect is under way */
	int head_done;        /* the current response's head has been seen */
	uint64_t body_left;   /* its body bytes still to come */
	uint32_t cl_ev, up_ev; /* events armed on each side */
	int pfd[2];            /* --splice: the body's pipe, origin to client */
	size_t in_pipe;        /* bytes in it not yet spliced to the client */
	int dead;              /* closed: freed after the current batch */
	struct pair *next_dead;
};

/* Pairs closed during one epoll batch, freed after it: the batch may still
 * hold an event for the other side of a pair just closed. */
static struct pair *dead;

static int ep;
static struct sockaddr_in origin;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void arm(struct side *s, uint32_t *cur, uint32_t ev)
{
	struct epoll_event e = {.events = ev, .data.ptr = s};

	if (*cur == ev)
		return;
	if (epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e) < 0)
		die("epoll_ctl");
	*cur = ev;
}

static void pair_close(struct pair *p)
{
	close(p->cl.fd);
	close(p->up.fd);
	p->dead = 1;
	p->next_dead = dead;
	dead = p;
}

static void pair_free_dead(void)
{
	while (dead) {
		struct pair *p = dead;

		dead = p->next_dead;
		free(p->to_up.buf);
		free(p->to_cl.buf);
		if (use_splice) {
			close(p->pfd[0]);
			close(p->pfd[1]);
		}
		free(p);
	}
}

/* Tracks where the current response ends in the <n> new bytes at <b>.
 * Returns -1 for a response this floor does not handle. */
static int track_response(struct pair *p, const char *b, size_t n)
{
	while (n) {
		if (!p->head_done) {
			/* the head arrives whole in one read for these benchmarks'
			 * responses; a split head is not worth handling here */
			const char *end = memmem(b, n, "\r\n\r\n", 4);
			const char *cl;

			if (!end)
				return -1;
			cl = memmem(b, (size_t)(end - b), "\r\nContent-Length:", 17);
			if (!cl)
				cl = memmem(b, (size_t)(end - b), "\r\ncontent-length:", 17);
			if (!cl)
				return -1;
			p->body_left = strtoull(cl + 17, NULL, 10);
			p->head_done = 1;
			n -= (size_t)(end + 4 - b);
			b = end + 4;
			continue;
		}
		if (n < p->body_left) {
			p->body_left -= n;
			return 0;
		}
		n -= p->body_left;
		b += p->body_left;
		p->body_left = 0;
		p->head_done = 0; /* the next response's head follows */
	}
	return 0;
}

/* --splice, origin to client: the body of the current response through
 * the pair's pipe. Returns -1 when the pair must close. */
static int relay_body(struct pair *p)
{
	ssize_t n;

	if (p->in_pipe == 0 && p->body_left == 0) { /* an empty body: the next head */
		p->head_done = 0;
		return 0;
	}
	if (p->in_pipe == 0) {
		n = splice(p->up.fd, NULL, p->pfd[1], NULL, p->body_left < PIPE_SIZE ? p->body_left : PIPE_SIZE,
		           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		p->in_pipe = (size_t)n;
		p->body_left -= (uint64_t)n;
		if (p->body_left == 0)
			p->head_done = 0;
	}
	n = splice(p->pfd[0], NULL, p->cl.fd, NULL, p->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	p->in_pipe -= (size_t)n;
	return 0;
}

/* --splice: how much of what the origin has sent to read now, so that a
 * read never takes body bytes: the head alone (found by peeking), or 0
 * while a body is under way. */
static size_t head_room(struct pair *p)
{
	char peek[4096];
	ssize_t n;
	const char *end;

	if (p->head_done)
		return 0;
	n = recv(p->up.fd, peek, sizeof(peek), MSG_PEEK);
	if (n <= 0)
		return BUF_SIZE; /* the read sees the close or the error */
	end = memmem(peek, (size_t)n, "\r\n\r\n", 4);
	return end ? (size_t)(end + 4 - peek) : BUF_SIZE;
}

/* Moves bytes from <src> into <q> and on to <dst> as far as they go.
 * Returns -1 when the pair must close. */
static int relay(struct pair *p, struct side *src, struct side *dst, struct pipe *q)
{
	ssize_t n;

	if (use_splice && src->is_up && q->len == q->off) {
		size_t room;

		if (p->head_done || p->in_pipe)
			return relay_body(p);
		room = head_room(p);
		n = recv(src->fd, q->buf, room, 0);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		if (track_response(p, q->buf, (size_t)n) < 0)
			return -1;
		q->off = 0;
		q->len = (size_t)n;
	} else if (q->len == q->off) {
		n = recv(src->fd, q->buf, BUF_SIZE, 0);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		if (src->is_up && track_response(p, q->buf, (size_t)n) < 0)
			return -1;
		q->off = 0;
		q->len = (size_t)n;
	}
	n = send(dst->fd, q->buf + q->off, q->len - q->off, 0);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	q->off += (size_t)n;
	return 0;
}

/* Arms each side: read a source only while its pipe is empty, wait for a
 * destination to be writable only while its pipe holds bytes. */
static void pair_arm(struct pair *p)
{
	uint32_t cl = 0, up = 0;

	if (p->to_up.off == p->to_up.len)
		cl |= EPOLLIN;
	else
		up |= EPOLLOUT;
	if (p->to_cl.off == p->to_cl.len && p->in_pipe == 0)
		up |= EPOLLIN;
	else
		cl |= EPOLLOUT;
	arm(&p->cl, &p->cl_ev, cl);
	arm(&p->up, &p->up_ev, up);
}

static void on_accept(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK), one = 1;
		struct epoll_event e;
		struct pair *p;

		if (fd < 0)
			return;
		p = calloc(1, sizeof(*p));
		p->to_up.buf = malloc(BUF_SIZE);
		p->to_cl.buf = malloc(BUF_SIZE);
		if (use_splice && (pipe2(p->pfd, O_NONBLOCK) < 0 || fcntl(p->pfd[0], F_SETPIPE_SZ, PIPE_SIZE) < 0))
			die("pipe");
		p->cl = (struct side){.fd = fd, .p = p};
		p->up = (struct side){.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), .p = p, .is_up = 1};
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(p->up.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(p->up.fd, (struct sockaddr *)&origin, sizeof(origin)) < 0 && errno != EINPROGRESS) {
			pair_close(p);
			continue;
		}
		/* until the connect completes, the upstream waits for writability
		 * and the client is not read */
		e = (struct epoll_event){.events = EPOLLOUT, .data.ptr = &p->up};
		epoll_ctl(ep, EPOLL_CTL_ADD, p->up.fd, &e);
		p->up_ev = EPOLLOUT;
		e = (struct epoll_event){.events = 0, .data.ptr = &p->cl};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
		p->cl_ev = 0;
		p->connecting = 1;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct epoll_event evs[256], e;
	int lfd, one = 1;
	static int lmark;

	/* a client gone mid-body must close its pair, not end the floor:
	 * splice(2) has no MSG_NOSIGNAL */
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "--splice") == 0) {
		use_splice = 1;
		argv++;
		argc--;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: floor [--splice] LISTEN_PORT ORIGIN_PORT\n");
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	origin = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	                              .sin_port = htons((uint16_t)atoi(argv[2]))};
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0)
		die("listen");
	ep = epoll_create1(0);
	e = (struct epoll_event){.events = EPOLLIN, .data.ptr = &lmark};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct side *s = evs[i].data.ptr;
			struct pair *p;
			int rc = 0;

			if (evs[i].data.ptr == &lmark) {
				on_accept(lfd);
				continue;
			}
			p = s->p;
			if (p->dead)
				continue;
			if (p->connecting) {
				int err = !s->is_up; /* a client hang-up before the connect ends */
				socklen_t len = sizeof(err);

				getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
				if (err) {
					pair_close(p);
					continue;
				}
				p->connecting = 0;
				pair_arm(p);
				continue;
			}
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				rc = s->is_up ? relay(p, &p->up, &p->cl, &p->to_cl) : relay(p, &p->cl, &p->up, &p->to_up);
			if (rc == 0 && (evs[i].events & EPOLLOUT))
				rc = s->is_up ? relay(p, &p->cl, &p->up, &p->to_up) : relay(p, &p->up, &p->cl, &p->to_cl);
			if (rc < 0) {
				pair_close(p);
				continue;
			}
			pair_arm(p);
		}
		pair_free_dead();
	}
}
