/*
 * h2_client.c: HTTP/2 sessions to upstream servers (h2_client.h): the
 * per-server pool, connecting (TLS and ALPN), nghttp2's client callbacks,
 * the read batch and the gathered write, GOAWAY and the idle close.
 */
#include "worker/up/h2_client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "common/log.h"
#include "worker/h2/h2.h"
#include "worker/net/net.h"

static nghttp2_session_callbacks *cbs;
static nghttp2_option *opt;
static int cls_session;
static ev_tstamp log_next;
static uint32_t log_unlogged;

static void h2c_session_free(struct h2c_session *s);

/* ---- counters -------------------------------------------------------- */

void h2c_gauges(int dsessions, int dstreams)
{
	static uint64_t sessions, streams;

	sessions += (uint64_t)(int64_t)dsessions;
	streams += (uint64_t)(int64_t)dstreams;
	SHM_SET(wk.cnt, h2up_sessions_active, sessions);
	SHM_SET(wk.cnt, h2up_streams_active, streams);
}

void h2c_count_rst(int sent, uint32_t code)
{
	if (code >= H2_CODES)
		code = H2_CODES - 1;
	if (sent)
		SHM_ADD(wk.cnt, h2up_rst_sent[code], 1);
	else
		SHM_ADD(wk.cnt, h2up_rst_recv[code], 1);
}

/* ---- nghttp2 callbacks ------------------------------------------------ */

static struct h2c_stream *h2c_stream_of(nghttp2_session *ng, int32_t id)
{
	return nghttp2_session_get_stream_user_data(ng, id);
}

static int h2c_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                         const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
	struct h2c_stream *st;
	(void)flags;
	(void)ud;

	if (f->hd.type != NGHTTP2_HEADERS || !(st = h2c_stream_of(ng, f->hd.stream_id)))
		return 0;
	if (h2c_stream_header(st, f, name, nlen, value, vlen) < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM: the head did not fit */
	return 0;
}

/* The first SETTINGS of a session: streams placed on it may go. */
static void h2c_session_settled(struct h2c_session *s)
{
	s->settings = 1;
	for (struct h2c_stream *st = s->streams; st; st = st->next)
		if (!st->submitted)
			h2c_stream_wake(st, EV_WRITE);
}

/* A GOAWAY: no new stream here; those not yet submitted go elsewhere
 * (nghttp2 closes the submitted ones past its last stream id itself). */
static void h2c_session_goaway(struct h2c_session *s)
{
	s->goaway = 1;
	for (struct h2c_stream *st = s->streams; st; st = st->next)
		if (!st->submitted && !st->refused) {
			st->refused = 1;
			h2c_stream_wake(st, EV_READ);
		}
}

static int h2c_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct h2c_session *s = ud;
	struct h2c_stream *st;

	switch (f->hd.type) {
	case NGHTTP2_SETTINGS:
		if (!(f->hd.flags & NGHTTP2_FLAG_ACK) && !s->settings)
			h2c_session_settled(s);
		return 0;
	case NGHTTP2_GOAWAY:
		SHM_ADD(wk.cnt, h2up_goaway_recv[f->goaway.error_code < H2_CODES ? f->goaway.error_code : H2_CODES - 1],
		        1);
		if (worker_log_gate(&log_next, &log_unlogged)) {
			log_info("upstream %s: HTTP/2 GOAWAY, error code %u, last stream %d (%u more not logged)",
			         s->srv->addr, f->goaway.error_code, f->goaway.last_stream_id, log_unlogged);
			log_unlogged = 0;
		}
		h2c_session_goaway(s);
		return 0;
	case NGHTTP2_RST_STREAM:
		h2c_count_rst(0, f->rst_stream.error_code);
		if (f->rst_stream.error_code != NGHTTP2_NO_ERROR && f->rst_stream.error_code != NGHTTP2_REFUSED_STREAM &&
		    worker_log_gate(&log_next, &log_unlogged)) {
			log_info("upstream %s: HTTP/2 RST_STREAM, error code %u (%u more not logged)", s->srv->addr,
			         f->rst_stream.error_code, log_unlogged);
			log_unlogged = 0;
		}
		return 0;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	default:
		return 0;
	}
	if (!(st = h2c_stream_of(ng, f->hd.stream_id)))
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && (f->hd.flags & NGHTTP2_FLAG_END_HEADERS))
		h2c_stream_head_end(st, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0);
	else if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
		h2c_stream_head_end(st, 1);
	return 0;
}

static int h2c_on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *p, size_t len, void *ud)
{
	struct h2c_stream *st = h2c_stream_of(ng, id);
	(void)flags;
	(void)ud;

	if (!st || st->discarding || !st->u.txn)
		nghttp2_session_consume(ng, id, len); /* thrown away: the window back at once */
	else
		h2c_stream_data(st, p, len);
	return 0;
}

static int h2c_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
	struct h2c_stream *st = h2c_stream_of(ng, id);
	(void)ud;

	if (st) {
		nghttp2_session_set_stream_user_data(ng, id, NULL);
		h2c_stream_closed(st, code);
	}
	return 0;
}

static int h2c_on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	(void)ng;
	(void)ud;
	if (f->hd.type == NGHTTP2_RST_STREAM)
		h2c_count_rst(1, f->rst_stream.error_code);
	return 0;
}

/* A request HEADERS that never left (GOAWAY came first, the session
 * closing): unprocessed, so the stream may go again. */
static int h2c_on_frame_not_send(nghttp2_session *ng, const nghttp2_frame *f, int err, void *ud)
{
	struct h2c_stream *st;
	(void)err;
	(void)ud;

	if (f->hd.type == NGHTTP2_HEADERS && (st = h2c_stream_of(ng, f->hd.stream_id)) && !st->head_done) {
		st->refused = 1;
		h2c_stream_wake(st, EV_READ);
	}
	return 0;
}

/* ---- the session -------------------------------------------------------- */

static void h2c_flush_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)revents;
	ev_prepare_stop(loop, w);
	h2c_session_flush(w->data);
}

void h2_client_init(const struct config *cfg)
{
	(void)cfg;
	cls_session = slab_add_class(&wk.slab, sizeof(struct h2c_session) > sizeof(struct h2c_stream)
	                                               ? sizeof(struct h2c_session)
	                                               : sizeof(struct h2c_stream));
	h2c_stream_init();
	if (cbs)
		return;
	nghttp2_session_callbacks_new(&cbs);
	nghttp2_session_callbacks_set_on_header_callback(cbs, h2c_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, h2c_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, h2c_on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, h2c_on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, h2c_on_frame_send);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, h2c_on_frame_not_send);
	nghttp2_option_new(&opt);
	/* WINDOW_UPDATE only for what the core has taken (consume) */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_send_header_block_length(opt, 65536);
}

void *h2c_alloc(void)
{
	return slab_alloc(&wk.slab, cls_session);
}

void h2c_release(void *p)
{
	slab_free(&wk.slab, cls_session, p);
}

void h2c_session_kick(struct h2c_session *s)
{
	h2_kick(&s->flush); /* as the downstream sessions do, with one nudge for all */
}

static void h2c_session_unlist(struct h2c_session *s)
{
	if (!s->listed)
		return;
	for (struct h2c_session **p = (struct h2c_session **)&s->srv->h2; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	s->listed = 0;
}

/* The session cannot carry streams any more: closed at once, its streams
 * told (each ends through the core, the last frees the session). */
static void h2c_session_fail(struct h2c_session *s, int rc)
{
	if (s->dead)
		return;
	s->dead = 1;
	s->fail_rc = rc;
	h2c_session_unlist(s);
	if (s->sock) {
		upstream_close(s->sock);
		s->sock = NULL;
	}
	for (struct h2c_stream *st = s->streams; st; st = st->next)
		h2c_stream_wake(st, EV_READ | EV_WRITE);
	if (!s->nstreams)
		h2c_session_free(s);
}

static void h2c_session_free(struct h2c_session *s)
{
	h2c_session_unlist(s);
	if (s->sock)
		upstream_close(s->sock);
	ev_prepare_stop(wk.loop, &s->flush);
	nghttp2_session_del(s->ng);
	if (s->out)
		buf_put(s->out);
	h2c_gauges(-1, 0);
	h2c_release(s);
}

void h2c_session_stream_gone(struct h2c_session *s)
{
	s->nstreams--;
	if (s->nstreams)
		return;
	if (s->dead) {
		h2c_session_free(s);
		return;
	}
	if (s->goaway) {
		h2c_session_fail(s, WEIR_ERR(UPSTREAM_CLOSED)); /* nothing left to wait for: closes */
		return;
	}
	if (s->ready)
		upstream_set_deadline(s->sock, worker_after(wk.cfg->timeouts.upstream_keepalive));
}

static int h2c_session_write(struct h2c_session *s)
{
	struct upconn *u = s->sock;

	while (s->out && buf_len(s->out)) {
		struct iovec v = {.iov_base = s->out->data + s->out->start, .iov_len = buf_len(s->out)};
		ssize_t n = u->ssl ? tls_client_sendv(u, &v, 1) : worker_sendv(u->io.fd, &v, 1, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		s->out->start += (uint32_t)n;
	}
	if (s->out)
		s->out->start = s->out->end = 0;
	return 1;
}

static void h2c_session_gather(struct h2c_session *s)
{
	if (!s->out && !(s->out = buf_get()))
		return;
	h2_gather(s->ng, s->out, wk.buf_size, &s->pend, &s->pend_len, &s->in_ng);
}

/* The frames of every stream, in one write when they fit a buffer. Also
 * called by a stream's flush, so that the request body is framed (copied
 * out of the core's queue) before the core is told it was written. */
void h2c_session_flush(struct h2c_session *s)
{
	struct upconn *u = s->sock;
	int rc = 1;

	if (s->dead || !s->ready || s->in_ng)
		return;
	for (int i = 0; i < 4 && rc == 1; i++) {
		h2c_session_gather(s);
		if (!s->out || !buf_len(s->out))
			break;
		rc = h2c_session_write(s);
	}
	if (rc < 0) {
		log_info("upstream %s: HTTP/2 session lost: %s", s->srv->addr, strerror(errno));
		h2c_session_fail(s, WEIR_ERR(UPSTREAM_CLOSED));
		return;
	}
	if (!nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng) && !s->pend_len &&
	    (!s->out || !buf_len(s->out))) {
		h2c_session_fail(s, WEIR_ERR(UPSTREAM_CLOSED));
		return;
	}
	if (s->out && !buf_len(s->out) && !s->pend_len) {
		buf_put(s->out); /* an idle session holds no buffer */
		s->out = NULL;
	}
	worker_io_set(&u->io, EV_READ | u->tls_wants | ((s->out && buf_len(s->out)) || s->pend_len ? EV_WRITE : 0));
	if (rc == 1 && nghttp2_session_want_write(s->ng) && (!s->out || !buf_len(s->out)))
		h2c_session_kick(s);
}

/* Reads what the socket has (at most 8 reads) into nghttp2. */
static int h2c_session_read(struct h2c_session *s)
{
	char in[16384];
	struct upconn *u = s->sock;

	for (int i = 0; i < 8 && s->sock; i++) {
		ssize_t n = u->ssl ? tls_client_recv(u, in, sizeof(in)) : recv(u->io.fd, in, sizeof(in), 0);

		if (n > 0) {
			s->in_ng = 1;
			n = nghttp2_session_mem_recv(s->ng, (const uint8_t *)in, (size_t)n);
			s->in_ng = 0;
			if (n < 0) {
				worker_count_error(WEIR_ERR(UPSTREAM_H2));
				log_warn("upstream %s: HTTP/2: %s", s->srv->addr, nghttp2_strerror((int)n));
				return -1;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		return -1; /* closed, or a socket error */
	}
	if (s->sock)
		ev_feed_event(wk.loop, &u->io, EV_READ); /* more: after the others had their turn */
	return 0;
}

/* The connect and the handshake: 0 done, 1 waiting, or an error. */
static int h2c_session_connect(struct h2c_session *s)
{
	struct upconn *u = s->sock;
	const char *why = NULL;
	int rc = 0, ev = 0;

	if (!u->handshaking) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(u->io.fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			log_warn("upstream %s: connect failed: %s", s->srv->addr, strerror(err));
			return upstream_errno_local(err) ? WEIR_ERR(LOCAL_CONNECT_ERROR) : WEIR_ERR(UPSTREAM_REFUSED);
		}
		if (!u->ssl)
			return 0;
		u->handshaking = 1;
	}
	rc = tls_client_handshake(u, &ev, &why);
	if (rc == WEIR_EAGAIN) {
		u->connecting = (uint8_t)ev;
		worker_io_set(&u->io, ev);
		return 1;
	}
	if (rc < 0) {
		log_warn("upstream %s: TLS handshake failed: %s", s->srv->addr, why);
		return rc;
	}
	u->handshaking = 0;
	{
		const uint8_t *p;
		unsigned n;

		SSL_get0_alpn_selected(u->ssl, &p, &n);
		if (n != 2 || memcmp(p, "h2", 2) != 0) {
			log_warn("upstream %s: the TLS server did not pick h2 by ALPN (protocol = \"h2\")", s->srv->addr);
			return WEIR_ERR(UPSTREAM_ALPN);
		}
	}
	return 0;
}

static void h2c_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct h2c_session *s = w->data;
	(void)loop;

	if (!s->ready) {
		int rc = h2c_session_connect(s);

		if (rc == 1)
			return;
		if (rc < 0) {
			/* counted as a failed connect is: by the answer, if the
			 * request finds no other server */
			if (rc != WEIR_ERR(LOCAL_CONNECT_ERROR))
				upstream_fail(s->table, s->si);
			h2c_session_fail(s, rc);
			return;
		}
		s->ready = 1;
		s->sock->connecting = 0;
		upstream_connected(s->sock);
		if (!s->nstreams)
			upstream_set_deadline(s->sock, worker_after(wk.cfg->timeouts.upstream_keepalive));
		else
			upstream_set_deadline(s->sock, ev_now(wk.loop) + 86400.0);
		h2c_session_flush(s);
		return;
	}
	if ((revents & EV_READ) || s->sock->tls_wants) {
		if (h2c_session_read(s) < 0) {
			h2c_session_fail(s, WEIR_ERR(UPSTREAM_CLOSED));
			return;
		}
	}
	h2c_session_flush(s);
}

static void h2c_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct h2c_session *s = w->data;
	int ready;
	(void)revents;

	if (worker_deadline_early(w, s->sock->deadline))
		return;
	if ((ready = worker_deadline_grace(w, &s->sock->io, &s->sock->graced))) {
		h2c_io_cb(loop, &s->sock->io, ready);
		return;
	}
	if (!s->ready) {
		log_warn("upstream %s: %s timed out", s->srv->addr, s->sock->handshaking ? "TLS handshake" : "connect");
		upstream_fail(s->table, s->si);
		h2c_session_fail(s, WEIR_ERR(UPSTREAM_TIMEOUT));
		return;
	}
	if (s->nstreams) /* busy: the streams keep their own clocks */
		return;
	h2c_session_fail(s, WEIR_ERR(UPSTREAM_CLOSED)); /* idle for the keep-alive timeout */
}

static struct h2c_session *h2c_session_new(const struct route_table *t, uint32_t si, uint32_t connect_ms, int *rc)
{
	struct upconn *u = upstream_connect(t, si, rc);
	struct h2c_session *s;
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
	    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2C_WINDOW},
	};

	if (!u)
		return NULL;
	if (!(s = h2c_alloc())) {
		upstream_close(u);
		*rc = WEIR_ERR(NOMEM);
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	if (nghttp2_session_client_new3(&s->ng, cbs, s, opt, h2_nghttp2_mem()) != 0) {
		upstream_close(u);
		h2c_release(s);
		*rc = WEIR_ERR(NOMEM);
		return NULL;
	}
	nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
	/* the connection's window: many streams' worth, each bounded by its own */
	nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0, 64 * (int32_t)H2C_WINDOW);
	s->sock = u;
	s->srv = u->srv;
	s->table = t;
	s->si = si;
	u->txn = NULL;
	ev_set_cb(&u->io, h2c_io_cb);
	u->io.data = s;
	ev_set_cb(&u->timer, h2c_timer_cb);
	u->timer.data = s;
	ev_prepare_init(&s->flush, h2c_flush_cb);
	s->flush.data = s;
	upstream_set_deadline(u, worker_after(connect_ms));
	s->next = s->srv->h2;
	s->srv->h2 = s;
	s->listed = 1;
	SHM_ADD(wk.cnt, h2up_sessions_total, 1);
	h2c_gauges(1, 0);
	return s;
}

/* The session a new stream to <srv> goes on: the first with room under
 * the server's limit, else a new one while fewer than the group's pool
 * are open, else the least loaded (the stream waits there). */
static struct h2c_session *h2c_session_pick(const struct route_table *t, uint32_t si, uint32_t connect_ms, int *rc)
{
	struct up_server *srv = upstream_state(t, si);
	struct h2c_session *least = NULL;
	uint32_t n = 0, pool = srv->keepalive ? srv->keepalive : 1;

	for (struct h2c_session *s = srv->h2; s; s = s->next) {
		uint32_t max = s->settings ? nghttp2_session_get_remote_settings(s->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
		                           : 100;

		if (s->goaway || s->dead)
			continue;
		n++;
		if (s->nstreams < max)
			return s;
		if (!least || s->nstreams < least->nstreams)
			least = s;
	}
	if (n < pool || !least)
		return h2c_session_new(t, si, connect_ms, rc);
	return least;
}

struct upconn *h2_client_open(const struct route_table *t, uint32_t si, uint32_t connect_ms, int *rc)
{
	struct h2c_session *s = h2c_session_pick(t, si, connect_ms, rc);
	struct h2c_stream *st;

	if (!s)
		return NULL;
	st = h2c_stream_new(s);
	if (!st) {
		*rc = WEIR_ERR(NOMEM);
		if (!s->nstreams && !s->ready)
			h2c_session_fail(s, WEIR_ERR(NOMEM));
		return NULL;
	}
	if (s->ready)
		upstream_set_deadline(s->sock, ev_now(wk.loop) + 86400.0); /* busy: no idle clock */
	return &st->u;
}

void h2_client_close_server(struct up_server *srv)
{
	while (srv->h2) {
		struct h2c_session *s = srv->h2;

		h2c_session_unlist(s);
		s->goaway = 1;
		if (!s->nstreams)
			h2c_session_free(s);
	}
}
