#include "worker/up/up.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/net/net.h"

/* A connection left <s>'s idle list: one fewer, and the pool's low mark
 * since the last tick follows (upstream_pool_trim). */
static void upstream_pool_left(struct up_server *s)
{
	s->nidle--;
	if (s->nidle < s->idle_low)
		s->idle_low = s->nidle;
}

static void upstream_pool_remove(struct upconn *u)
{
	struct up_server *s = u->srv;

	for (struct upconn **p = &s->idle; *p; p = &(*p)->next)
		if (*p == u) {
			*p = u->next;
			upstream_pool_left(s);
			return;
		}
}

static void upstream_close_socket(struct upconn *u);

void upstream_close(struct upconn *u)
{
	if (u->h2) {
		h2_client_stream_end(u);
		return;
	}
	if (!u->txn)
		upstream_pool_remove(u);
	upstream_close_socket(u);
}

/* <u>, in no pool and with no stream, goes. */
static void upstream_close_socket(struct upconn *u)
{
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
	worker_deadline_set(&u->timer, &u->deadline, &u->graced, at);
}

static void upstream_io_cb(struct ev_loop *loop, ev_io *w, int revents);

static void upstream_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct upconn *u = w->data;
	int ready;
	(void)revents;

	if (worker_deadline_early(&u->timer, u->deadline))
		return;
	if ((ready = worker_deadline_grace(&u->timer, &u->io, &u->graced))) {
		upstream_io_cb(loop, &u->io, ready);
		return;
	}
	if (u->txn)
		txn_on_upstream_timeout(u->txn);
	else
		upstream_close(u); /* idle too long in the pool */
}

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
		log_warn("upstream %s sent bytes on an idle connection; closing it", u->srv->addr);
		worker_count_error(WEIR_ERR(UPSTREAM_BAD_RESPONSE));
	}
	upstream_close(u);
}

void upstream_fail(const struct route_table *t, uint32_t si)
{
	const struct route_upstream *up = &route_upstreams(t)[route_servers(t)[si].upstream];
	struct up_server *s = upstream_state(t, si);
	ev_tstamp now = ev_now(wk.loop), window = up->fail_timeout / 1000.0;

	outlier_observe(t, si, OUTLIER_GATEWAY);
	if (!up->max_fails || s == &wk.servers[UPSTREAM_STATE_OVERFLOW])
		return;
	if (s->fails && now - s->last_fail > window)
		s->fails = 0; /* the last failure is too old to make a run with this one */
	s->fails++;
	s->last_fail = now;
	if (s->fails < up->max_fails || s->down_until > now)
		return;
	s->down_until = now + window;
	SHM_ADD(wk.cnt, upstream_marked_down, 1);
	log_warn("upstream %s server %s: %u failures in a row; skipped for %.3g s", up->name, s->addr, s->fails,
	         window);
}

/* A log line at most once a second per kind, with the count left out. */
struct upstream_quiet {
	ev_tstamp last;
	uint64_t more;
};

/* 1 when a line is due (*more: how many were left out since the last one). */
static int upstream_log_due(struct upstream_quiet *q, uint64_t *more)
{
	ev_tstamp now = ev_now(wk.loop);

	if (now - q->last < 1.0) {
		q->more++;
		return 0;
	}
	*more = q->more;
	q->last = now;
	q->more = 0;
	return 1;
}

/* Every server of a group is marked down. */
static void upstream_log_panic(const struct route_upstream *up)
{
	static struct upstream_quiet q;
	uint64_t more;

	if (upstream_log_due(&q, &more))
		log_warn("upstream %s: every server is marked down; trying them anyway (panic; %llu more since "
		         "the last such line)",
		         up->name, (unsigned long long)more);
}

/*
 * The admin word (shm.h) is read once per server looked at, with a relaxed
 * load: the master publishes a change with one store, and a worker that
 * sees it one request late does no harm. A server set to drain or down is
 * never picked for a new request; its weight, when set, replaces the
 * configured one. The "other" stat index never carries an override.
 *
 * A server whose active health checks say down (shm/health.h, one relaxed
 * load) is skipped as a down mark is, so panic covers it too.
 *
 * <panic>: down marks are ignored (every untried server that is up by
 * admin state is marked down or down by its health checks). <eject_now>:
 * outlier ejections are judged at that time (ms), 0 for not at all
 * (outlier.h). upstream_server_usable() judges one server for every
 * algorithm (up.h).
 */
/* slow_start: the ramp starts at the later of the master's or prober's
 * stamp (joined, back healthy) and the end of the last ejection, so a
 * return from ejection needs no writer of its own */
static uint32_t upstream_ramp(const struct route_upstream *up, uint16_t stat, uint32_t w)
{
	uint64_t now = resil_now_ms(), from, back;

	from = atomic_load_explicit(&wk.seg->balance[stat].ramp_from, memory_order_relaxed);
	back = atomic_load_explicit(&wk.seg->resil[stat].ejected_until, memory_order_relaxed);
	if (back <= now && back > from)
		from = back;
	return balance_ramp_weight(w, from, now, up->slow_start);
}

uint32_t upstream_server_usable(const struct route_table *t, const struct route_upstream *up, uint32_t si,
                                int panic, uint64_t eject_now, int *marked)
{
	struct up_server *s = upstream_state(t, si);
	uint32_t admin = shm_admin(wk.seg, route_servers(t)[si].stat), w;

	if (SHM_ADMIN_STATE(admin) != SHM_ADMIN_UP)
		return 0;
	if (eject_now && resil_ejected(&wk.seg->resil[route_servers(t)[si].stat], eject_now))
		return 0;
	if ((s->down_until > ev_now(wk.loop) || health_down(&wk.seg->health, route_servers(t)[si].stat)) && !panic) {
		*marked = 1;
		return 0;
	}
	w = SHM_ADMIN_WEIGHT(admin) ? SHM_ADMIN_WEIGHT(admin) : route_servers(t)[si].weight;
	return up->slow_start ? upstream_ramp(up, route_servers(t)[si].stat, w) : w;
}

static int upstream_pick_among(const struct route_table *t, const struct route_upstream *up, uint64_t tried,
                               int panic, uint64_t eject_now, int *marked)
{
	int64_t total = 0;
	struct up_server *best_s = NULL;
	int best = -1;
	uint32_t n = up->nservers < 64 ? up->nservers : 64;

	if (up->balance != BALANCE_RR && n > 1) {
		int si = balance_pick(t, up, tried, panic, eject_now, marked);

		if (si != BALANCE_PICK_RR)
			return si;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t si = up->first_server + i;
		struct up_server *s = upstream_state(t, si);
		uint32_t w;

		if ((tried >> i) & 1)
			continue;
		w = upstream_server_usable(t, up, si, panic, eject_now, marked);
		if (!w)
			continue;
		if (n == 1) /* the common case needs no arithmetic */
			return (int)si;
		s->cw += w;
		total += w;
		if (best < 0 || s->cw > best_s->cw) {
			best = (int)si;
			best_s = s;
		}
	}
	if (best >= 0)
		best_s->cw -= total;
	return best;
}

int upstream_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried)
{
	int marked = 0;
	uint64_t eject_now = outlier_pick_now(t, up);
	int si = upstream_pick_among(t, up, tried, 0, eject_now, &marked);

	if (si >= 0 || !marked)
		return si;
	SHM_ADD(wk.cnt, upstream_panics, 1);
	upstream_log_panic(up);
	return upstream_pick_among(t, up, tried, 1, eject_now, &marked);
}

struct upconn *upstream_pool_get(const struct route_table *t, uint32_t si)
{
	struct up_server *s = upstream_state(t, si);
	struct upconn *u = s->idle;

	if (!u)
		return NULL;
	s->idle = u->next;
	upstream_pool_left(s);
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

/* A socket() or connect() that failed for want of something of ours. */
static void upstream_log_local(const struct route_server *rs, const char *call, int err)
{
	static struct upstream_quiet q;
	uint64_t more;

	if (upstream_log_due(&q, &more))
		log_error("upstream %s: %s failed: %s (a local shortage, not counted against the server; %llu more "
		          "since the last such line)",
		          rs->text, call, strerror(err), (unsigned long long)more);
}

struct upconn *upstream_connect(const struct route_table *t, uint32_t server, int *rc)
{
	const struct route_server *rs = &route_servers(t)[server];
	struct upconn *u;
	int fd;

	fd = socket(rs->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		upstream_log_local(rs, "socket", errno);
		*rc = WEIR_ERR(LOCAL_CONNECT_ERROR);
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	if (connect(fd, (const struct sockaddr *)&rs->sa, rs->len) < 0 && errno != EINPROGRESS) {
		int err = errno;

		close(fd);
		if (upstream_errno_local(err)) {
			upstream_log_local(rs, "connect", err);
			*rc = WEIR_ERR(LOCAL_CONNECT_ERROR);
			return NULL;
		}
		log_warn("upstream %s: connect failed: %s", rs->text, strerror(err));
		upstream_fail(t, server);
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
	u->srv = upstream_state(t, server);
	u->connecting = EV_WRITE;
	ev_io_init(&u->io, upstream_io_cb, fd, EV_WRITE);
	if (tls_client_wanted(t, server)) {
		const char *why;
		int trc = tls_client_attach(u, t, server, &why);

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

/* Past keepalive, a connection is still parked, up to UPSTREAM_SURPLUS
 * times keepalive, until a tick finds it idle for a whole second
 * (upstream_pool_trim): a batch of requests in one loop pass (HTTP/2
 * streams, above all) releases its connections just before the next
 * batch needs as many again, and closing the surplus at once meant
 * connecting again each pass: with keepalive 256 and 640 streams in
 * flight, 3,200 connects for 20,000 requests instead of 640
 * (tests/bench/h2peers.sh --mode syscalls). Each parked connection was
 * in use a moment ago, so the surplus is bounded by the load itself; the
 * factor bounds it for a group with a small keepalive. HAProxy keeps its
 * idle connections and purges them over time likewise. */
#define UPSTREAM_SURPLUS 8

void upstream_release(struct upconn *u)
{
	struct up_server *s = u->srv;

	if (u->h2) { /* an HTTP/2 stream: its session is the pool */
		h2_client_stream_end(u);
		return;
	}
	/* only a server of the newest table has a pool (a sync closed those of
	 * servers that left it); TLS bytes already read ahead past the
	 * response would raise no event while pooled, and be taken for the
	 * next response, and an end read behind it is no better: not fit to
	 * keep */
	if (s->gen != wk.table_id || !s->keepalive || s->nidle >= s->keepalive * UPSTREAM_SURPLUS ||
	    (u->ssl && (u->ended || tls_bio_pending(u->ssl)))) {
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

/*
 * Once a second: closes the idle connections of <s> past its keepalive
 * that no request took since the last tick, the coldest (the end of the
 * LIFO list) first. Those a request took are the load's: under a steady
 * load above keepalive, the pool's low mark each second is near zero,
 * and trimming to keepalive regardless closed connections the next pass
 * opened again (with 640 HTTP/2 streams in flight and keepalive 256,
 * some 380 connects a second: 1,460 of 55,700 system calls of
 * tests/bench/h2peers.sh --mode syscalls were connects, and as many
 * sockets and closes). A surplus left idle goes within two ticks.
 */
static void upstream_pool_trim(struct up_server *s)
{
	struct upconn **p = &s->idle, *u;
	uint32_t k, keep, cold = s->idle_low;

	s->idle_low = s->nidle;
	if (s->nidle <= s->keepalive || !cold)
		return;
	keep = s->nidle - cold > s->keepalive ? s->nidle - cold : s->keepalive; /* cold <= nidle */
	for (k = 0; k < keep && *p; k++)
		p = &(*p)->next;
	u = *p;
	*p = NULL;
	s->nidle = s->idle_low = k;
	while (u) {
		struct upconn *next = u->next;

		SHM_ADD(wk.cnt, upstream_pool_trimmed, 1);
		upstream_close_socket(u);
		u = next;
	}
}

void upstream_admin_sweep(void)
{
	uint32_t g = atomic_load_explicit(&wk.seg->gen_current, memory_order_acquire);
	const struct route_table *t = &wk.seg->gens[g];

	/* only the table this worker synced last, which its gen_seen keeps
	 * the master from reusing; if the master moved on, the next request
	 * syncs and the next tick sweeps */
	if (t->id != wk.table_id)
		return;
	outlier_sweep(t);
	for (uint32_t i = 0; i < t->nservers; i++) {
		struct up_server *s = upstream_state(t, i);

		upstream_pool_trim(s);
		if ((s->idle || s->h2) && SHM_ADMIN_STATE(shm_admin(wk.seg, route_servers(t)[i].stat)) != SHM_ADMIN_UP) {
			while (s->idle)
				upstream_close(s->idle);
			/* HTTP/2: idle sessions close, busy ones take no new stream
			 * and close when their streams end */
			h2_client_close_server(s);
		}
	}
}
