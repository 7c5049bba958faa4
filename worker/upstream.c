#include "worker/upstream.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/tls_bio.h"
#include "worker/tls_client.h"
#include "worker/txn.h"

static void upstream_pool_remove(struct upconn *u)
{
	struct up_server *s = &wk.servers[u->server];

	for (struct upconn **p = &s->idle; *p; p = &(*p)->next)
		if (*p == u) {
			*p = u->next;
			s->nidle--;
			return;
		}
}

void upstream_close(struct upconn *u)
{
	if (!u->txn)
		upstream_pool_remove(u);
	ev_io_stop(wk.loop, &u->io);
	ev_timer_stop(wk.loop, &u->timer);
	if (u->ssl)
		tls_client_close(u);
	close(u->io.fd);
	if (u->in)
		buf_put(u->in);
	slab_free(&wk.slab, wk.cls_upconn, u);
	SHM_ADD(wk.cnt, upstream_active, -1);
}

void upstream_set_deadline(struct upconn *u, ev_tstamp at)
{
	worker_deadline_set(&u->timer, &u->deadline, at);
}

static void upstream_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct upconn *u = w->data;
	(void)loop;
	(void)revents;

	if (worker_deadline_early(&u->timer, u->deadline))
		return;
	if (u->txn)
		txn_on_upstream_timeout(u->txn);
	else
		upstream_close(u); /* idle too long in the pool */
}

/* The table wk.servers[] and the pools were last reset for (pooled
 * connections all belong to it). Read without route_acquire(), so that
 * neither a tick nor a pool operation moves the generation this worker
 * reports in use under a request still running on an older one. */
static const struct route_table *synced;

static void upstream_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct upconn *u = w->data;
	(void)loop;

	if (u->txn) {
		txn_on_upstream_event(u->txn, revents);
		return;
	}
	/* idle in the pool: a close, or bytes nobody asked for; either way
	 * the connection is no longer fit for a request; over TLS a peek
	 * would show record bytes, never nothing: any readability closes */
	if (u->ssl) {
		upstream_close(u);
		return;
	}
	char b;
	ssize_t n = recv(w->fd, &b, 1, MSG_PEEK);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n > 0) {
		log_warn("upstream %s sent bytes on an idle connection; closing it", synced->servers[u->server].text);
		worker_count_error(WEIR_ERR(UPSTREAM_BAD_RESPONSE));
	}
	upstream_close(u);
}

void upstream_mark_down(uint32_t server)
{
	wk.servers[server].down_until = ev_now(wk.loop) + UPSTREAM_FAIL_SKIP;
}

/*
 * The admin word (shm.h) is read once per server looked at, with a relaxed
 * load: the master publishes a change with one store, and a worker that
 * sees it one request late does no harm. A server set to drain or down is
 * never picked for a new request; its weight, when set, replaces the
 * configured one. The "other" stat index never carries an override.
 */
int upstream_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried)
{
	ev_tstamp now = ev_now(wk.loop);
	int64_t total = 0;
	int best = -1;
	uint32_t n = up->nservers < 64 ? up->nservers : 64;

	if (n == 1) { /* the common case needs no arithmetic */
		uint32_t si = up->first_server;
		return !(tried & 1) && wk.servers[si].down_until <= now &&
		               SHM_ADMIN_STATE(shm_admin(wk.seg, t->servers[si].stat)) == SHM_ADMIN_UP
		           ? (int)si
		           : -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t si = up->first_server + i;
		struct up_server *s = &wk.servers[si];
		uint32_t admin, w;

		if ((tried >> i) & 1 || s->down_until > now)
			continue;
		admin = shm_admin(wk.seg, t->servers[si].stat);
		if (SHM_ADMIN_STATE(admin) != SHM_ADMIN_UP)
			continue;
		w = SHM_ADMIN_WEIGHT(admin) ? SHM_ADMIN_WEIGHT(admin) : t->servers[si].weight;
		s->cw += w;
		total += w;
		if (best < 0 || s->cw > wk.servers[best].cw)
			best = (int)si;
	}
	if (best >= 0)
		wk.servers[best].cw -= total;
	return best;
}

struct upconn *upstream_pool_get(uint32_t server)
{
	struct up_server *s = &wk.servers[server];
	struct upconn *u = s->idle;

	if (!u)
		return NULL;
	s->idle = u->next;
	s->nidle--;
	u->next = NULL;
	u->reused = 1;
	u->readable = 0;
	return u;
}

int upstream_pool_alive(struct upconn *u)
{
	char b;
	ssize_t n = recv(u->io.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && errno == EAGAIN;
}

struct upconn *upstream_connect(const struct route_table *t, uint32_t server, int *rc)
{
	const struct route_server *rs = &t->servers[server];
	struct upconn *u;
	int fd;

	fd = socket(rs->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("upstream socket: %s", strerror(errno));
		*rc = WEIR_ERR(NOMEM);
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	if (connect(fd, (const struct sockaddr *)&rs->sa, rs->len) < 0 && errno != EINPROGRESS) {
		log_warn("upstream %s: connect failed: %s", rs->text, strerror(errno));
		close(fd);
		upstream_mark_down(server);
		*rc = WEIR_ERR(UPSTREAM_REFUSED);
		return NULL;
	}
	u = slab_alloc(&wk.slab, wk.cls_upconn);
	if (!u) {
		close(fd);
		*rc = WEIR_ERR(NOMEM);
		return NULL;
	}
	memset(u, 0, sizeof(*u));
	u->server = server;
	u->table_id = t->id;
	u->connecting = EV_WRITE;
	ev_io_init(&u->io, upstream_io_cb, fd, EV_WRITE);
	if (tls_client_wanted(t, server)) {
		const char *why;
		int trc = tls_client_attach(u, t, &why);

		if (trc < 0) {
			log_warn("upstream %s: TLS: %s", rs->text, why);
			close(fd);
			slab_free(&wk.slab, wk.cls_upconn, u);
			*rc = trc;
			return NULL;
		}
	}
	u->io.data = u;
	ev_init(&u->timer, upstream_timer_cb);
	u->timer.data = u;
	ev_io_start(wk.loop, &u->io);
	SHM_ADD(wk.cnt, upstream_connects, 1);
	SHM_ADD(&wk.scnt[rs->stat], connects, 1);
	SHM_ADD(wk.cnt, upstream_active, 1);
	return u;
}

void upstream_release(struct upconn *u)
{
	struct up_server *s = &wk.servers[u->server];

	/* a connection of the table in force is read in that table (synced);
	 * TLS bytes already read ahead past the response would raise no event
	 * while pooled, and be taken for the next response: not fit to keep */
	if (u->table_id != wk.table_id || s->nidle >= synced->servers[u->server].keepalive ||
	    (u->ssl && tls_bio_pending(u->ssl))) {
		upstream_close(u);
		return;
	}
	if (u->in) {
		buf_put(u->in);
		u->in = NULL;
	}
	u->reused = 0;
	u->next = s->idle;
	s->idle = u;
	s->nidle++;
	worker_io_set(&u->io, EV_READ);
	upstream_set_deadline(u, worker_after(wk.cfg->timeouts.upstream_keepalive));
}

void upstream_close_pools(void)
{
	for (uint32_t i = 0; i < CONFIG_MAX_SERVERS; i++)
		while (wk.servers[i].idle)
			upstream_close(wk.servers[i].idle);
}

void upstream_admin_sweep(void)
{
	const struct route_table *t = synced;

	if (!t || t->id != wk.table_id)
		return; /* the master moved on and may reuse it: the next request syncs */
	for (uint32_t i = 0; i < t->nservers; i++)
		if (wk.servers[i].idle && SHM_ADMIN_STATE(shm_admin(wk.seg, t->servers[i].stat)) != SHM_ADMIN_UP)
			while (wk.servers[i].idle)
				upstream_close(wk.servers[i].idle);
}

void upstream_sync_table(const struct route_table *t)
{
	if (t->id == wk.table_id)
		return;
	upstream_close_pools();
	memset(wk.servers, 0, sizeof(wk.servers));
	wk.table_id = t->id;
	tls_client_sync(t);
	synced = t;
}
