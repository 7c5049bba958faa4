/*
 * mirror.c: copies of a route's requests to a shadow group (routes.mirror;
 * worker/core/core.h).
 *
 * A copy is a connection of its own, made once the real request's server
 * is picked (the pick phase: a body up to limits.body_buffer read whole)
 * from the HTTP/1 head the HTTP/1 codec wrote for it beside the real one
 * (ph_request_head: the group the real request takes may speak HTTP/2),
 * with "Connection: close" so
 * the shadow's close ends its answer, and the body are copied into one
 * slab buffer that also holds the copy's state, sent without waiting, and
 * whatever comes back is read and thrown away. Nothing of the real request
 * waits on it or refers to it (the copy keeps no pointer to the
 * transaction nor to the route table), so a slow, stalled or dead shadow
 * costs the real request one socket() and connect() and never delays or
 * fails it. A body is copied only when it was read whole with a
 * Content-Length and fits one I/O buffer with the head; a streamed or
 * chunked one (decoded when held) makes the copy dropped. A copy is
 * bounded by the shadow group's
 * upstream_connect + upstream_read timeouts, and the copies of one route
 * in flight in a worker by mirror.max_in_flight (past it: dropped). The
 * servers are picked by the group's balancer (health and admin state as
 * for real requests); a copy's failure is not held against a server.
 */
#include "worker/core/core.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm/shm.h"
#include "worker/up/up.h"

struct mirror {
	ev_io io;
	ev_timer tm;
	struct buf *self; /* the buffer this lives in */
	int fd;
	uint16_t stat;  /* the route's stat index, for its counters and in-flight count */
	uint8_t sent;   /* the copy was written whole */
	uint32_t off, len;
	char data[];    /* the head to send */
};

/* Copies in flight per route stat index (this worker's). */
static uint16_t mirror_busy[STAT_ROUTES];

static const char mirror_close[] = "Connection: close\r\n\r\n";

static void mirror_count(uint16_t stat, int result)
{
	SHM_ADD(&wk.rcnt[stat], mirror[result], 1);
}

static void mirror_end(struct mirror *m, int result)
{
	ev_io_stop(wk.loop, &m->io);
	ev_timer_stop(wk.loop, &m->tm);
	close(m->fd);
	mirror_busy[m->stat]--;
	mirror_count(m->stat, result);
	buf_put(m->self);
}

static void mirror_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	mirror_end(w->data, MIRROR_FAILED);
}

static void mirror_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mirror *m = w->data;
	char sink[4096];
	ssize_t n;

	(void)loop;
	(void)revents;
	if (!m->sent) {
		n = send(m->fd, m->data + m->off, m->len - m->off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			mirror_end(m, MIRROR_FAILED); /* refused, reset */
			return;
		}
		m->off += (uint32_t)n;
		if (m->off < m->len)
			return;
		m->sent = 1;
		ev_io_stop(wk.loop, &m->io);
		ev_io_set(&m->io, m->fd, EV_READ);
		ev_io_start(wk.loop, &m->io);
		return;
	}
	/* the answer: read and dropped, a bounded amount a wakeup */
	for (int i = 0; i < 4; i++) {
		n = recv(m->fd, sink, sizeof(sink), 0);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		mirror_end(m, n == 0 ? MIRROR_SENT : MIRROR_FAILED);
		return;
	}
}

/* The body of <t> to copy, *len bytes (0: none); NULL when it cannot be
 * copied: not read whole before the pick, or chunked (its head says so and
 * the bytes held are decoded). */
static const char *mirror_body(const struct txn *t, uint32_t *len)
{
	*len = 0;
	if (t->req.body == HTTP_BODY_NONE || (t->req.body == HTTP_BODY_LENGTH && !t->req.content_length))
		return "";
	if (t->req.body != HTTP_BODY_LENGTH || !t->body_buffered || t->req.content_length > UINT32_MAX)
		return NULL;
	*len = (uint32_t)t->req.content_length;
	if (t->body) /* moved out of c->in (txn_buffer_step) */
		return t->body->end == *len ? t->body->data : NULL;
	/* in place, behind the head */
	return t->c->in && buf_len(t->c->in) >= *len ? t->c->in->data + t->c->in->start : NULL;
}

/* Starts the copy of <t> to group <g> (a server picked, connecting).
 * Returns 0 when under way (its end counts it), or the result to count
 * now: MIRROR_DROPPED or MIRROR_FAILED. */
static int mirror_begin(struct txn *t, const struct route_upstream *g)
{
	const struct buf *h = t->mirror_head; /* the HTTP/1 codec's (ph_request_head) */
	uint32_t hl = h->end - h->start, need, bl;
	const char *body = mirror_body(t, &bl);
	const struct route_server *rs;
	const struct config_timeouts *to = &route_settings_all(t->table)[g->settings].timeouts;
	struct buf *b;
	struct mirror *m;
	int s, fd;

	/* the head ends with its empty line: Connection: close goes before it */
	if (!body || hl < 4 || memcmp(h->data + h->end - 4, "\r\n\r\n", 4) != 0)
		return MIRROR_DROPPED;
	need = (uint32_t)sizeof(*m) + hl - 2 + (uint32_t)sizeof(mirror_close) - 1 + bl;
	if (need > wk.buf_size || (s = upstream_pick(t->table, g, 0)) < 0)
		return MIRROR_DROPPED;
	rs = &route_servers(t->table)[s];
	if (!(b = buf_get_fit(need)))
		return MIRROR_DROPPED;
	fd = socket(rs->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		buf_put(b);
		return MIRROR_DROPPED; /* a shortage of ours, not the shadow's fault */
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	if (connect(fd, (const struct sockaddr *)&rs->sa, rs->len) < 0 && errno != EINPROGRESS) {
		close(fd);
		buf_put(b);
		return MIRROR_FAILED;
	}
	m = (struct mirror *)b->data;
	m->self = b;
	m->fd = fd;
	m->stat = t->route->stat;
	m->sent = 0;
	m->off = 0;
	memcpy(m->data, h->data + h->start, hl - 2);
	memcpy(m->data + hl - 2, mirror_close, sizeof(mirror_close) - 1);
	m->len = hl - 2 + (uint32_t)sizeof(mirror_close) - 1;
	memcpy(m->data + m->len, body, bl);
	m->len += bl;
	ev_io_init(&m->io, mirror_io_cb, fd, EV_WRITE);
	m->io.data = m;
	ev_timer_init(&m->tm, mirror_timeout_cb, (to->upstream_connect + to->upstream_read) / 1000.0, 0);
	m->tm.data = m;
	ev_io_start(wk.loop, &m->io);
	ev_timer_start(wk.loop, &m->tm);
	mirror_busy[m->stat]++;
	return 0;
}

void mirror_maybe(struct txn *t)
{
	const struct route_entry *e = t->route;
	int rc;

	if (e->mirror_share < SPLIT_BUCKETS && realip_random() % SPLIT_BUCKETS >= e->mirror_share)
		return;
	/* an upgrade is a tunnel, not a request to repeat */
	if (t->tun.proto_len || !t->mirror_head)
		rc = MIRROR_DROPPED;
	else if (mirror_busy[e->stat] >= e->mirror_max)
		rc = MIRROR_DROPPED;
	else
		rc = mirror_begin(t, &route_upstreams(t->table)[e->mirror - 1]);
	if (rc)
		mirror_count(e->stat, rc);
	buf_drop(&t->mirror_head); /* copied, or not to be */
}
