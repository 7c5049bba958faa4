#include "worker/base/base.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/affinity.h"
#include "common/log.h"
#include "common/secmem.h"
#include "common/process.h"
#include "worker/h1/h1.h"
#include "worker/h2/h2.h"
#include "worker/net/net.h"
#include "worker/up/up.h"
#include "worker/core/core.h"
#include "worker/core/match.h"

/* A worker never maps more than this for connections and buffers; past it
 * new requests are answered 503 and counted as no_memory. */
#define WORKER_SLAB_LIMIT (2048ul * 1024 * 1024)
#define ACCEPT_BATCH 64

static ev_prepare log_prepare;
static ev_timer access_flush; /* log.access_flush: the access lines' own clock */
_Static_assert(sizeof(((struct shm_counters *)0)->log_dropped) / sizeof(uint64_t) == LOG_DROP_COUNT,
               "shm_counters.log_dropped has one counter per enum log_drop");

/*
 * Out of descriptors or kernel memory, accept4 fails while the connection
 * stays queued, so the listening socket stays readable: retrying at once
 * would spin the loop at 100% and log a line per pass. Like nginx and
 * HAProxy, stop accepting for a moment instead (connections wait in the
 * backlog; the ones we hold finish and free descriptors), count each
 * failure, and log at most once a second with how many there were.
 */
#define ACCEPT_PAUSE 0.5

static struct {
	ev_timer resume;
	uint64_t failures; /* since the last line logged */
	ev_tstamp log_after;
} acc;

static void worker_accept_set(int on)
{
	for (int i = 0; i < wk.nlisten; i++)
		if (on)
			ev_io_start(wk.loop, &wk.accept_io[i]);
		else
			ev_io_stop(wk.loop, &wk.accept_io[i]);
}

static void worker_accept_resume_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	worker_accept_set(1); /* after a drain nlisten is 0: nothing to start */
}

static void worker_accept_pause(int err)
{
	ev_tstamp now = ev_now(wk.loop);

	worker_count_error(WEIR_ERR(ACCEPT_FAILED));
	acc.failures++;
	if (now >= acc.log_after) {
		log_error("accept: %s (%llu time(s) since the last report); not accepting for %d ms: raise the open "
		          "files limit or lower limits.connections",
		          strerror(err), (unsigned long long)acc.failures, (int)(ACCEPT_PAUSE * 1000));
		acc.failures = 0;
		acc.log_after = now + 1.0;
	}
	worker_accept_set(0);
	ev_timer_stop(wk.loop, &acc.resume);
	ev_timer_set(&acc.resume, ACCEPT_PAUSE, 0);
	ev_timer_start(wk.loop, &acc.resume);
}

static void worker_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(w->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				worker_accept_pause(errno);
			else if (errno == EINTR || errno == ECONNABORTED)
				continue; /* that one is gone; the next may be there */
			return;
		}
		if (wk.nconns >= wk.cfg->limits.connections) {
			/* the kernel already completed the handshake: closing is the
			 * clearest answer we can give without spending memory */
			worker_count_error(WEIR_ERR(CONN_LIMIT));
			close(fd);
			continue;
		}
		conn_accept(fd, (struct sockaddr *)&ss, (int)(intptr_t)w->data);
	}
}

static void worker_stop_accepting(void)
{
	ev_timer_stop(wk.loop, &acc.resume);
	for (int i = 0; i < wk.nlisten; i++) {
		ev_io_stop(wk.loop, &wk.accept_io[i]);
		close(wk.accept_io[i].fd);
	}
	wk.nlisten = 0;
}


static void worker_drain(void)
{
	struct conn *c, *next;

	if (wk.draining)
		return;
	wk.draining = 1;
	wk.drain_deadline = worker_after(wk.cfg->timeouts.drain);
	wk.tunnel_deadline = worker_after(wk.cfg->timeouts.tunnel_drain);
	worker_stop_accepting();
	log_info("draining %u connection(s)", wk.nconns);
	for (c = wk.conns; c; c = next) {
		next = c->next;
		conn_drain(c);
	}
	worker_check_drained();
}

static void worker_signal_cb(struct ev_loop *loop, ev_signal *s, int revents)
{
	(void)revents;
	switch (s->signum) {
	case SIGQUIT:
		worker_drain();
		break;
	case SIGUSR1:
		log_reopen();
		break;
	default:
		ev_break(loop, EVBREAK_ALL);
		break;
	}
}

/* Error lines of this pass go out in one write, without blocking, just
 * before the loop waits (common/log.h); access lines too when
 * log.access_flush is off. */
static void worker_log_cb(struct ev_loop *loop, ev_prepare *p, int revents)
{
	(void)loop;
	(void)p;
	(void)revents;
	log_flush_errors();
	if (!wk.cfg->log.access_flush)
		log_flush_access();
}

static void worker_access_flush_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	log_flush_access();
}

/* The slab's gauges, whole and per class, into this worker's slot. */
static void worker_publish_slab(void)
{
	struct shm_slot *slot = &wk.seg->slots[wk.slot];

	SHM_SET(wk.cnt, slab_in_use, wk.slab.in_use_bytes);
	SHM_SET(wk.cnt, slab_free, slab_free_bytes(&wk.slab));
	for (int i = 0; i < wk.slab.nclasses; i++) {
		const struct slab_class *c = &wk.slab.classes[i];

		SHM_SET(wk.cnt, slab_class_in_use[i], c->in_use * c->size);
		SHM_SET(wk.cnt, slab_class_held[i], c->held);
		SHM_SET(wk.cnt, slab_class_high_water[i], c->high_water);
		SHM_SET(wk.cnt, slab_class_unusable[i], slab_class_unusable(&wk.slab, i));
		atomic_store_explicit(&slot->slab_size[i], (uint32_t)c->size, memory_order_relaxed);
	}
}

/* The drain's bounds: timeouts.drain cuts what is left but tunnels, which
 * live until timeouts.tunnel_drain (a WebSocket may be open for hours). */
static void worker_drain_tick(ev_tstamp now)
{
	struct conn *c, *next;
	int tunnels = now >= wk.tunnel_deadline;

	if (now >= wk.drain_deadline && !wk.drain_cut) {
		wk.drain_cut = 1;
		if (wk.nconns > wk.ntunnels)
			log_warn("drain timeout: cutting %u connection(s)", wk.nconns - wk.ntunnels);
		for (c = wk.conns; c; c = next) {
			next = c->next;
			if (c->state == CONN_TXN && tunnel_is_open(c->txn))
				continue;
			if (c->state == CONN_H2 && h2_session_drain_cut(c, 0))
				continue; /* its WebSocket streams stay, as tunnels do */
			worker_count_error(WEIR_ERR(DRAIN_CUT));
			conn_close(c);
		}
		/* only tunnels are left, and they hold no generation: nothing
		 * here reads a route table again, so the one last seen is given
		 * back, or draining workers kept for their tunnels would use up
		 * the generations and stop reloads (the sweep then skips too) */
		wk.table_id = 0;
		atomic_store_explicit(&wk.seg->slots[wk.slot].gen_seen, 0, memory_order_seq_cst);
	}
	if (tunnels && wk.ntunnels) {
		log_warn("tunnel drain timeout: cutting %u tunnel(s)", wk.ntunnels);
		for (c = wk.conns; c; c = next) {
			next = c->next;
			if (c->state == CONN_TXN && tunnel_is_open(c->txn))
				tunnel_cut(c->txn);
			else if (c->state == CONN_H2)
				h2_session_drain_cut(c, 1);
		}
	}
	if (wk.drain_cut && (tunnels || !wk.ntunnels))
		ev_break(wk.loop, EVBREAK_ALL);
}

static void worker_tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)t;
	(void)revents;
	log_flush_held(); /* the access lines keep their own clock */
	for (int i = 0; i < LOG_DROP_COUNT; i++)
		SHM_SET(wk.cnt, log_dropped[i], log_dropped((enum log_drop)i));
	/* chunks a surge left wholly free go back to the kernel */
	slab_release_idle(&wk.slab, (uint64_t)(ev_now(loop) * 1000.0), wk.cfg->timeouts.slab_idle);
	worker_publish_slab();
	{
		struct secmem_stats st;
		secmem_get_stats(&st);
		SHM_SET(wk.cnt, tls_mem_in_use, st.in_use);
		SHM_SET(wk.cnt, tls_mem_held, st.held);
	}
	{
		size_t in_use, held;
		h2_memory(&in_use, &held);
		SHM_SET(wk.cnt, h2_mem_in_use, in_use);
		SHM_SET(wk.cnt, h2_mem_held, held);
	}
	upstream_admin_sweep();
	tls_tick();
	if (wk.draining)
		worker_drain_tick(ev_now(loop));
}

/* The largest limits.body_buffer a request can be given: the global one,
 * or a group's or a route's over it. Each resolves to one of these, so
 * their maximum bounds them all. */
static uint32_t worker_body_buffer_max(const struct config *cfg)
{
	uint32_t max = cfg->limits.body_buffer;
	struct config_timeouts tm;
	struct config_limits l;

	for (int i = 0; i < cfg->nupstreams + cfg->nroutes; i++) {
		tm = cfg->timeouts;
		l = cfg->limits;
		config_overrides_apply(i < cfg->nupstreams ? &cfg->upstreams[i].over : &cfg->routes[i - cfg->nupstreams].over,
		                       &tm, &l);
		if (l.body_buffer > max)
			max = l.body_buffer;
	}
	return max;
}

static int worker_setup(const struct worker_start *ws)
{
	const struct config *cfg = ws->cfg;
	char who[32];

	wk.cfg = cfg;
	wk.seg = ws->seg;
	wk.slot = ws->slot;
	wk.index = ws->index;
	wk.cnt = &ws->seg->slots[ws->slot].c;
	wk.rcnt = ws->seg->slots[ws->slot].routes;
	wk.scnt = ws->seg->slots[ws->slot].servers;
	wk.loop = EV_DEFAULT;

	snprintf(who, sizeof(who), "worker %d", ws->index);
	log_set_who(who);
	log_set_deferred();
	if (affinity_on(cfg)) {
		int cpu;

		/* the master steers this worker's listeners to the same CPU */
		if (affinity_pin(ws->index, &cpu) < 0)
			log_error("cannot pin to a CPU: %s", strerror(errno));
		else
			log_info("pinned to CPU %d", cpu);
	}

	/* one size serves heads and bodies: large enough for the biggest
	 * allowed head as read and as written on, and at least 16 KiB so
	 * bodies move in few calls */
	wk.buf_size = (cfg->limits.header_size > cfg->limits.response_header_size ? cfg->limits.header_size
	                                                                         : cfg->limits.response_header_size) +
	              WORKER_HEAD_GROWTH(cfg->limits.headers);
	if (wk.buf_size < 16384)
		wk.buf_size = 16384;
	slab_init(&wk.slab, WORKER_SLAB_LIMIT);
	wk.cls_conn = slab_add_class(&wk.slab, sizeof(struct conn));
	wk.cls_txn = slab_add_class(&wk.slab, txn_size(cfg->limits.headers));
	wk.cls_upconn = slab_add_class(&wk.slab, sizeof(struct upconn));
	wk.cls_buf = slab_add_class(&wk.slab, sizeof(struct buf) + wk.buf_size);
	for (int i = 0; i < WORKER_SMALL_CLASSES; i++)
		wk.cls_small[i] = slab_add_class(&wk.slab, (size_t)WORKER_SMALL_MIN << i);
	/* a long response body from an HTTP/1 upstream reads into the
	 * stream class (held only while such a body streams, as an I/O
	 * buffer would be), with room for a head in front of it */
	wk.stream_size = cfg->limits.stream_buffer;
	wk.stream_cap = wk.stream_size + WORKER_STREAM_HEAD;
	wk.stream_max = cfg->limits.stream_buffers;
	/* a request body buffered before connecting fits in one object: a
	 * plain buffer when it is small, this class (taken only while such a
	 * body is held) when a body_buffer is larger: the largest of the
	 * global one and those of groups and routes. Of a stream buffer's
	 * body size, it is the stream class too, its objects sized for one;
	 * with stream buffers off, nothing shares it, and a head's room in
	 * front would never be used */
	wk.body_size = worker_body_buffer_max(cfg);
	wk.cls_body = wk.body_size > wk.buf_size
	                  ? slab_add_class(&wk.slab, sizeof(struct buf) + (wk.body_size == wk.stream_size && wk.stream_max
	                                                                       ? wk.stream_cap
	                                                                       : wk.body_size))
	                  : -1;
	if (wk.cls_body < 0)
		wk.body_size = 0; /* every body past an I/O buffer streams */
	if (wk.stream_size <= wk.buf_size || wk.stream_max == 0)
		wk.cls_stream = -1;
	else if (wk.stream_size == wk.body_size)
		wk.cls_stream = wk.cls_body;
	else
		wk.cls_stream = slab_add_class(&wk.slab, sizeof(struct buf) + wk.stream_cap);
	h2_init(cfg);
	h2_client_init(cfg);

	signal(SIGPIPE, SIG_IGN);
	/* reload and upgrade are the master's business (and without a master,
	 * nobody's): a stray HUP or USR2 must not kill a worker */
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	ev_signal_init(&wk.sig_quit, worker_signal_cb, SIGQUIT);
	ev_signal_init(&wk.sig_term, worker_signal_cb, SIGTERM);
	ev_signal_init(&wk.sig_int, worker_signal_cb, SIGINT);
	ev_signal_init(&wk.sig_usr1, worker_signal_cb, SIGUSR1);
	ev_signal_start(wk.loop, &wk.sig_quit);
	ev_signal_start(wk.loop, &wk.sig_term);
	ev_signal_start(wk.loop, &wk.sig_int);
	ev_signal_start(wk.loop, &wk.sig_usr1);
	ev_timer_init(&wk.tick, worker_tick_cb, 1.0, 1.0);
	ev_timer_start(wk.loop, &wk.tick);
	ev_prepare_init(&log_prepare, worker_log_cb);
	ev_prepare_start(wk.loop, &log_prepare);
	if (cfg->log.access_flush && log_access_enabled()) {
		ev_tstamp every = cfg->log.access_flush / 1000.0;

		ev_timer_init(&access_flush, worker_access_flush_cb, every, every);
		ev_timer_start(wk.loop, &access_flush);
	}

	ev_timer_init(&acc.resume, worker_accept_resume_cb, ACCEPT_PAUSE, 0);
	wk.nlisten = ws->nlisten;
	for (int i = 0; i < ws->nlisten; i++) {
		ev_io_init(&wk.accept_io[i], worker_accept_cb, ws->listen_fds[i], EV_READ);
		wk.accept_io[i].data = (void *)(intptr_t)i; /* the listener, for TLS */
		ev_io_start(wk.loop, &wk.accept_io[i]);
	}
	if (tls_bio_init() < 0) {
		log_error("TLS: out of memory");
		return -1;
	}
	if (tls_client_init(cfg) < 0) /* before the sync, which maps groups to its contexts */
		return -1;
	upstream_sync_table(route_acquire(wk.seg, wk.slot));
	match_prepare(route_acquire(wk.seg, wk.slot)); /* the route regexes, before the first request */
	head_init(cfg);
	auth_vouch_names(cfg, head_vouch); /* routes.auth's header names, too */
	realip_init();
	if (accesslog_init(cfg) < 0)
		return -1;
	if (auth_init(cfg) < 0) {
		log_error("auth: out of memory");
		return -1;
	}
	if (compress_init(cfg) < 0)
		return -1;
	return tls_init(cfg);
}

int worker_main(const struct worker_start *ws)
{
	if (worker_setup(ws) < 0) {
		log_flush(); /* why: error lines wait for the loop, which will not run */
		return WORKER_EXIT_STARTUP;
	}
	ev_run(wk.loop, 0);

	while (wk.conns)
		conn_close(wk.conns);
	upstream_close_pools();
	tls_client_cleanup();
	tls_cleanup();
	tls_bio_cleanup();
	log_flush();
	return 0;
}
