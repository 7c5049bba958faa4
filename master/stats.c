#include "master/stats.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "master/listen.h"
#include "shm/shm.h"

#define STATS_MAX_CONNS 16
#define STATS_REQ_MAX 2048
#define STATS_TIMEOUT 5.0

struct stats_conn {
	ev_io io;
	ev_timer timer;
	int used;
	char req[STATS_REQ_MAX];
	size_t req_len;
	char *resp; /* malloc'd: the master is not on the request path */
	size_t resp_len, resp_off;
};

static struct {
	ev_io accept_io;
	int fd;
	struct shm_segment *seg;
	struct stats_conn conns[STATS_MAX_CONNS];
} st = {.fd = -1};

struct out {
	char *buf;
	size_t cap, len;
};

static void out_printf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->len >= o->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len = o->len + (size_t)n < o->cap ? o->len + (size_t)n : o->cap;
}

static void out_metric(struct out *o, const char *name, const char *type, const char *help, uint64_t v)
{
	out_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, (unsigned long long)v);
}

size_t stats_render(struct shm_segment *seg, char *buf, size_t cap)
{
	struct shm_counters c;
	struct out o = {buf, cap, 0};
	int alive = 0;

	shm_sum(seg, &c);
	for (int i = 0; i < SHM_SLOTS; i++)
		alive += atomic_load(&seg->slots[i].pid) != 0;

	out_metric(&o, "weir_requests_total", "counter", "Requests whose head was read.", c.requests);
	out_printf(&o, "# HELP weir_responses_total Responses sent to clients, by status class.\n"
	               "# TYPE weir_responses_total counter\n");
	for (int k = 1; k <= 5; k++)
		out_printf(&o, "weir_responses_total{class=\"%dxx\"} %llu\n", k, (unsigned long long)c.responses[k]);
	out_metric(&o, "weir_client_bytes_received_total", "counter", "Bytes read from clients.", c.bytes_in);
	out_metric(&o, "weir_client_bytes_sent_total", "counter", "Bytes written to clients.", c.bytes_out);
	out_metric(&o, "weir_client_connections_total", "counter", "Client connections accepted.", c.conn_total);
	out_metric(&o, "weir_client_connections_active", "gauge", "Client connections open.", c.conn_active);
	out_metric(&o, "weir_upstream_connects_total", "counter", "Upstream connections opened.",
	           c.upstream_connects);
	out_metric(&o, "weir_upstream_reuses_total", "counter", "Requests sent on a kept-alive upstream connection.",
	           c.upstream_reuses);
	out_metric(&o, "weir_upstream_retries_total", "counter", "Requests sent again after an upstream failure.",
	           c.upstream_retries);
	out_metric(&o, "weir_upstream_connections_active", "gauge", "Upstream connections open.", c.upstream_active);
	out_printf(&o, "# HELP weir_errors_total Failures, by kind.\n# TYPE weir_errors_total counter\n");
	for (int e = 1; e < WEIR_ERR_COUNT; e++) /* entry 0 is AGAIN, not a failure */
		out_printf(&o, "weir_errors_total{kind=\"%s\"} %llu\n", weir_err_counter(-e - 1),
		           (unsigned long long)c.errors[e]);
	out_metric(&o, "weir_slab_bytes_in_use", "gauge", "Worker slab bytes handed out.", c.slab_in_use);
	out_metric(&o, "weir_slab_bytes_free", "gauge", "Worker slab bytes mapped and free.", c.slab_free);
	out_metric(&o, "weir_workers_alive", "gauge", "Worker processes running.", (uint64_t)alive);
	out_metric(&o, "weir_worker_restarts_total", "counter", "Workers replaced after an unexpected exit.",
	           atomic_load(&seg->worker_restarts));
	out_printf(&o, "# HELP weir_reloads_total Configuration reloads, by result.\n# TYPE weir_reloads_total counter\n"
	               "weir_reloads_total{result=\"ok\"} %llu\nweir_reloads_total{result=\"failed\"} %llu\n",
	           (unsigned long long)atomic_load(&seg->reloads_ok),
	           (unsigned long long)atomic_load(&seg->reloads_failed));
	out_metric(&o, "weir_config_generation", "gauge", "Configuration generation: 1 at start, one more per reload.",
	           atomic_load(&seg->config_generation));
	out_metric(&o, "weir_start_time_seconds", "gauge", "Unix time the master started.", seg->started_at);
	return o.len;
}

static void stats_conn_close(struct ev_loop *loop, struct stats_conn *sc)
{
	ev_io_stop(loop, &sc->io);
	ev_timer_stop(loop, &sc->timer);
	close(sc->io.fd);
	free(sc->resp);
	sc->resp = NULL;
	sc->used = 0;
}

static void stats_conn_reply(struct stats_conn *sc, const char *status, const char *type, const char *body,
                             size_t body_len)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
	                 type, body_len);

	sc->resp = malloc((size_t)n + body_len);
	if (!sc->resp)
		return;
	memcpy(sc->resp, head, (size_t)n);
	memcpy(sc->resp + n, body, body_len);
	sc->resp_len = (size_t)n + body_len;
	sc->resp_off = 0;
}

static void stats_conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stats_conn *sc = w->data;
	(void)revents;

	if (!sc->resp) {
		ssize_t n = read(w->fd, sc->req + sc->req_len, sizeof(sc->req) - 1 - sc->req_len);
		if (n <= 0) {
			if (n < 0 && errno == EAGAIN)
				return;
			stats_conn_close(loop, sc);
			return;
		}
		sc->req_len += (size_t)n;
		sc->req[sc->req_len] = 0;
		if (!strstr(sc->req, "\r\n\r\n")) {
			if (sc->req_len == sizeof(sc->req) - 1)
				stats_conn_close(loop, sc);
			return;
		}
		if (strncmp(sc->req, "GET /metrics ", 13) == 0 || strncmp(sc->req, "GET /metrics?", 13) == 0) {
			size_t cap = 256 * 1024;
			char *body = malloc(cap);
			if (!body) {
				stats_conn_close(loop, sc);
				return;
			}
			size_t len = stats_render(st.seg, body, cap);
			stats_conn_reply(sc, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, len);
			free(body);
		} else {
			static const char nf[] = "404 Not Found: try GET /metrics\n";
			stats_conn_reply(sc, "404 Not Found", "text/plain", nf, sizeof(nf) - 1);
		}
		if (!sc->resp) {
			stats_conn_close(loop, sc);
			return;
		}
		ev_io_stop(loop, &sc->io);
		ev_io_set(&sc->io, sc->io.fd, EV_WRITE);
		ev_io_start(loop, &sc->io);
	}
	while (sc->resp_off < sc->resp_len) {
		ssize_t n = write(w->fd, sc->resp + sc->resp_off, sc->resp_len - sc->resp_off);
		if (n < 0) {
			if (errno == EAGAIN)
				return;
			break;
		}
		sc->resp_off += (size_t)n;
	}
	stats_conn_close(loop, sc);
}

static void stats_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	stats_conn_close(loop, w->data);
}

static void stats_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct stats_conn *sc = NULL;

		if (fd < 0)
			return;
		for (int i = 0; i < STATS_MAX_CONNS && !sc; i++)
			if (!st.conns[i].used)
				sc = &st.conns[i];
		if (!sc) {
			close(fd); /* a scraper retries; the master stays bounded */
			continue;
		}
		sc->used = 1;
		sc->req_len = 0;
		sc->resp = NULL;
		ev_io_init(&sc->io, stats_conn_cb, fd, EV_READ);
		sc->io.data = sc;
		ev_timer_init(&sc->timer, stats_timeout_cb, STATS_TIMEOUT, 0);
		sc->timer.data = sc;
		ev_io_start(loop, &sc->io);
		ev_timer_start(loop, &sc->timer);
	}
}

void stats_adopt(struct ev_loop *loop, int fd, struct shm_segment *seg)
{
	st.fd = fd;
	st.seg = seg;
	ev_io_init(&st.accept_io, stats_accept_cb, st.fd, EV_READ);
	ev_io_start(loop, &st.accept_io);
}

int stats_open(struct ev_loop *loop, const struct config_addr *addr, struct shm_segment *seg)
{
	int fd = listen_socket(addr, 64, 0);

	if (fd < 0) {
		log_error("cannot open the stats socket on %s: %s", addr->text, strerror(errno));
		return -1;
	}
	stats_adopt(loop, fd, seg);
	return 0;
}

int stats_fd(void)
{
	return st.fd;
}

void stats_close(struct ev_loop *loop)
{
	if (st.fd < 0)
		return;
	ev_io_stop(loop, &st.accept_io);
	close(st.fd);
	st.fd = -1;
	for (int i = 0; i < STATS_MAX_CONNS; i++)
		if (st.conns[i].used)
			stats_conn_close(loop, &st.conns[i]);
}
