/*
 * health_probe.c: the prober process's loop: one check of each server at
 * a time, non-blocking, on libev (master/health.h says why a process of
 * its own).
 *
 * A check: connect, the TLS handshake when the group speaks TLS (chain and
 * name checked as its tls block says, SNI sent), then for type "http" a
 * GET of the path with Connection: close, judged on the status line alone;
 * for type "tcp" the connect (and handshake) is the check. The whole check
 * runs under the timeout. Checks of one server start interval apart (plus
 * a random part of jitter), the first within jitter of the prober's start,
 * so a reload or an upgrade checks again at once. Each result moves the
 * server's health word (shm/health.h) and is counted by result; a change
 * of state is logged once, with the check that made it.
 */
#include "master/health.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/proxy_hdr.h"
#include "shm/route.h"
#include "shm/shm.h"

enum probe_phase {
	PROBE_IDLE,
	PROBE_CONNECTING,
	PROBE_HANDSHAKE,
	PROBE_SENDING,
	PROBE_READING,
};

struct probe {
	ev_io io;
	ev_timer deadline; /* the check's timeout */
	ev_timer next;     /* the next check's start */
	int fd;            /* -1 between checks */
	enum probe_phase phase;
	SSL *ssl;
	SSL_CTX *ctx; /* the group's, NULL for plain TCP */
	const struct config_upstream *cu;
	const struct config_health *h;
	uint16_t stat;
	struct sockaddr_storage sa;
	socklen_t len;
	char addr[CONFIG_ADDR_STR_MAX];
	char req[CONFIG_HEALTH_PATH_MAX + CONFIG_HEALTH_HOST_MAX + 96];
	size_t req_len, sent;
	char resp[32]; /* enough for "HTTP/1.1 200 " */
	size_t got;
	/* skip_when_busy: the server's answers (all but 5xx) and 5xx
	 * counted by the workers at the last check */
	uint64_t answered, failed;
};

static struct {
	struct ev_loop *loop;
	struct shm_segment *seg;
	struct probe *probes;
	int nprobes;
	SSL_CTX *ctx[CONFIG_MAX_UPSTREAMS]; /* by config upstream index */
	uint64_t rnd;
	ev_signal usr1;
	ev_timer tick;
} hp;

/* xorshift64*: spreads checks, nothing secret */
static double probe_random(void)
{
	hp.rnd ^= hp.rnd >> 12;
	hp.rnd ^= hp.rnd << 25;
	hp.rnd ^= hp.rnd >> 27;
	return (double)((hp.rnd * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static SSL_CTX *probe_ctx_new(const struct config_upstream *cu)
{
	static const uint8_t alpn[] = "\x08http/1.1";
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0 /* 0 is success here */)
		goto fail;
	if (cu->tls_verify) {
		if (!SSL_CTX_set1_verify_cert_store(ctx, cu->tls_store) ||
		    !X509_VERIFY_PARAM_set1_host(SSL_CTX_get0_param(ctx), cu->tls_sni, strlen(cu->tls_sni)))
			goto fail;
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	/* a check proves the server can do a full handshake: no resumption */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

static void probe_close(struct probe *p)
{
	ev_io_stop(hp.loop, &p->io);
	ev_timer_stop(hp.loop, &p->deadline);
	if (p->ssl) {
		SSL_free(p->ssl);
		p->ssl = NULL;
	}
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->phase = PROBE_IDLE;
	ERR_clear_error();
}

/*
 * The check of <p> ended with <result> (<status>: the HTTP status, or 0;
 * <why>: what failed, for the log): counts it and moves the server's word.
 * A failure of our own (local_error: no descriptor, no memory) is counted
 * but moves nothing: another server would fare no better.
 */
static void probe_done(struct probe *p, enum health_result result, unsigned status, const char *why)
{
	_Atomic uint32_t *wp = &hp.seg->health.word[p->stat];
	uint32_t old = atomic_load_explicit(wp, memory_order_relaxed);
	uint32_t state = HEALTH_STATE(old) == HEALTH_DOWN ? HEALTH_DOWN : HEALTH_UP, run = HEALTH_RUN(old);
	int pass = result == HEALTH_RESULT_OK || result == HEALTH_RESULT_SKIPPED;

	probe_close(p);
	atomic_fetch_add_explicit(&hp.seg->health.checks[p->stat][result], 1, memory_order_relaxed);
	if (result != HEALTH_RESULT_LOCAL) {
		/* the run counts the checks in a row that disagree with the state */
		run = pass == (state == HEALTH_UP) ? 0 : run + 1;
		if (state == HEALTH_UP && run >= (uint32_t)p->h->fall) {
			log_warn("upstream %s server %s: health down after %u failed check(s) in a row (last: %s)",
			         p->cu->name, p->addr, run, why);
			state = HEALTH_DOWN;
			run = 0;
		} else if (state == HEALTH_DOWN && run >= (uint32_t)p->h->rise) {
			log_notice("upstream %s server %s: health up after %u passed check(s) in a row (last: %s)",
			           p->cu->name, p->addr, run, why);
			state = HEALTH_UP;
			run = 0;
			if (p->cu->slow_start) /* its weight ramps up from here */
				balance_ramp_start(&hp.seg->balance[p->stat], resil_now_ms());
		}
	} else {
		/* one shortage hits every server's checks: a line a second at most */
		static ev_tstamp last;
		static unsigned more;

		if (ev_now(hp.loop) - last < 1.0) {
			more++;
		} else {
			log_error("upstream %s server %s: health check not made: %s (not counted against the server; "
			          "%u more since the last such line)",
			          p->cu->name, p->addr, why, more);
			last = ev_now(hp.loop);
			more = 0;
		}
	}
	atomic_store_explicit(wp, HEALTH_WORD(state, result, run > 255 ? 255 : run, status), memory_order_relaxed);
}

/* The TLS error of the last call, for the log. */
static const char *probe_tls_why(struct probe *p, char *buf, size_t cap)
{
	long v = p->ssl ? SSL_get_verify_result(p->ssl) : X509_V_OK;
	uint32_t e = ERR_peek_last_error();

	if (v != X509_V_OK)
		snprintf(buf, cap, "TLS handshake failed: certificate: %s", X509_verify_cert_error_string(v));
	else
		snprintf(buf, cap, "TLS handshake failed: %s", e ? ERR_reason_error_string(e) : "closed");
	return buf;
}

/* "HTTP/1.x NNN" at the start of what was read: the status, 0 when not
 * there yet, -1 when it cannot be a status line. */
static int probe_status(const struct probe *p)
{
	const char *r = p->resp;

	if (p->got < 13)
		return memcmp(r, "HTTP/1.", p->got < 7 ? p->got : 7) == 0 ? 0 : -1;
	if (memcmp(r, "HTTP/1.", 7) != 0 || (r[7] != '0' && r[7] != '1') || r[8] != ' ' || r[9] < '1' || r[9] > '5' ||
	    r[10] < '0' || r[10] > '9' || r[11] < '0' || r[11] > '9' || (r[12] != ' ' && r[12] != '\r'))
		return -1;
	return (r[9] - '0') * 100 + (r[10] - '0') * 10 + (r[11] - '0');
}

static int probe_expected(const struct config_health *h, int status)
{
	for (int i = 0; i < h->nexpect; i++)
		if (status >= h->expect[i][0] && status <= h->expect[i][1])
			return 1;
	return 0;
}

static void probe_wait(struct probe *p, int events)
{
	ev_io_stop(hp.loop, &p->io);
	ev_io_set(&p->io, p->fd, events);
	ev_io_start(hp.loop, &p->io);
}

/* After SSL_read or SSL_write returned <rc> <= 0: 1 when it must wait,
 * with the socket watched for what TLS wants (a write may need a read
 * first and a read a write), so a wait never spins. */
static int probe_tls_wait(struct probe *p, int rc)
{
	int err = SSL_get_error(p->ssl, rc);

	if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
		return 0;
	probe_wait(p, err == SSL_ERROR_WANT_READ ? EV_READ : EV_WRITE);
	return 1;
}

/* Connected (and handshaken): a TCP check has passed; an HTTP one sends. */
/* A server of a group with proxy_protocol takes a LOCAL header first,
 * as HAProxy's checks send: it then uses the socket's own addresses. */
static int probe_send_local(const struct probe *p)
{
	uint8_t h[PROXY_HDR_LOCAL_MAX];

	return proxy_hdr_send(p->fd, h, proxy_hdr_local(p->cu->proxy_protocol, h));
}

static void probe_connected(struct probe *p)
{
	if (p->h->type == CONFIG_HEALTH_TCP) {
		probe_done(p, HEALTH_RESULT_OK, 0, p->ssl ? "connected, TLS handshake done" : "connected");
		return;
	}
	p->phase = PROBE_SENDING;
	p->sent = 0;
	probe_wait(p, EV_WRITE);
}

/* One step of the check, on an event of its socket. */
static void probe_step(struct probe *p)
{
	char why[192];
	ssize_t n;
	int err = 0, rc;
	socklen_t el = sizeof(err);

	switch (p->phase) {
	case PROBE_CONNECTING:
		if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err) {
			snprintf(why, sizeof why, "connect failed: %s", strerror(err));
			probe_done(p, HEALTH_RESULT_REFUSED, 0, why);
			return;
		}
		if (p->cu->proxy_protocol && probe_send_local(p) < 0) {
			/* the server expects a PROXY header first */
			probe_done(p, HEALTH_RESULT_CLOSED, 0, "the PROXY header could not be written");
			return;
		}
		if (!p->ctx) {
			probe_connected(p);
			return;
		}
		p->ssl = SSL_new(p->ctx);
		if (!p->ssl || !SSL_set_fd(p->ssl, p->fd) ||
		    (p->cu->tls_sni[0] && !SSL_set_tlsext_host_name(p->ssl, p->cu->tls_sni))) {
			probe_done(p, HEALTH_RESULT_LOCAL, 0, "out of memory for TLS");
			return;
		}
		SSL_set_connect_state(p->ssl);
		p->phase = PROBE_HANDSHAKE;
		/* fall through */
	case PROBE_HANDSHAKE:
		rc = SSL_do_handshake(p->ssl);
		if (rc == 1) {
			probe_connected(p);
			return;
		}
		err = SSL_get_error(p->ssl, rc);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			probe_wait(p, err == SSL_ERROR_WANT_READ ? EV_READ : EV_WRITE);
			return;
		}
		probe_done(p, HEALTH_RESULT_TLS, 0, probe_tls_why(p, why, sizeof why));
		return;
	case PROBE_SENDING:
		while (p->sent < p->req_len) {
			if (p->ssl) {
				rc = SSL_write(p->ssl, p->req + p->sent, (int)(p->req_len - p->sent));
				n = rc > 0 ? rc : -1;
				if (rc <= 0 && probe_tls_wait(p, rc))
					return;
			} else {
				n = send(p->fd, p->req + p->sent, p->req_len - p->sent, MSG_NOSIGNAL);
				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					return;
			}
			if (n <= 0) {
				probe_done(p, HEALTH_RESULT_CLOSED, 0, "closed while the request was sent");
				return;
			}
			p->sent += (size_t)n;
		}
		p->phase = PROBE_READING;
		p->got = 0;
		probe_wait(p, EV_READ);
		return;
	case PROBE_READING:
		for (;;) {
			size_t room = sizeof(p->resp) - p->got;
			int status;

			if (p->ssl) {
				rc = SSL_read(p->ssl, p->resp + p->got, (int)room);
				n = rc > 0                                                          ? rc
				    : rc == 0 || SSL_get_error(p->ssl, rc) == SSL_ERROR_ZERO_RETURN ? 0
				                                                                    : -1;
				if (rc <= 0 && probe_tls_wait(p, rc))
					return;
			} else {
				n = recv(p->fd, p->resp + p->got, room, 0);
				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					return;
			}
			if (n <= 0) {
				probe_done(p, HEALTH_RESULT_CLOSED, 0,
				           n == 0 ? "closed before a status line" : "reset before a status line");
				return;
			}
			p->got += (size_t)n;
			status = probe_status(p);
			if (status < 0) {
				probe_done(p, HEALTH_RESULT_BAD_RESPONSE, 0, "not an HTTP/1 status line");
				return;
			}
			if (status == 0 && p->got < sizeof(p->resp))
				continue;
			snprintf(why, sizeof why, "HTTP status %d", status);
			probe_done(p, probe_expected(p->h, status) ? HEALTH_RESULT_OK : HEALTH_RESULT_STATUS,
			           (unsigned)status, why);
			return;
		}
	case PROBE_IDLE: break;
	}
}

static void probe_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_step(w->data);
}

static void probe_deadline_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct probe *p = t->data;
	char why[96];
	(void)loop;
	(void)revents;

	snprintf(why, sizeof why, "no %s within %u ms",
	         p->phase == PROBE_CONNECTING  ? "connection"
	         : p->phase == PROBE_HANDSHAKE ? "TLS handshake"
	         : p->phase == PROBE_SENDING   ? "room for the request"
	                                       : "status line",
	         p->h->timeout);
	probe_done(p, HEALTH_RESULT_TIMEOUT, 0, why);
}

/* The workers' answers from server stat index <stat> (1xx to 4xx) into
 * *answered, and 5xx (weir's own 502 and 504 included) into *failed: every
 * slot in use and the retired block. A worker that exits while this reads
 * may be counted twice or not at all for once; the next check sees right. */
static void probe_traffic(uint16_t stat, uint64_t *answered, uint64_t *failed)
{
	const struct shm_server_counters *r = &hp.seg->retired_servers[stat];

	*answered = r->responses[0] + r->responses[1] + r->responses[2] + r->responses[3];
	*failed = r->responses[4];
	for (int i = 0; i < SHM_SLOTS; i++) {
		const struct shm_server_counters *c = &hp.seg->slots[i].servers[stat];

		if (atomic_load_explicit(&hp.seg->slots[i].state, memory_order_relaxed) == SHM_SLOT_FREE)
			continue;
		*answered += c->responses[0] + c->responses[1] + c->responses[2] + c->responses[3];
		*failed += c->responses[4];
	}
}

/* skip_when_busy: has the server answered real requests since the last
 * check, with no 5xx? Then they said what a check would. */
static int probe_busy(struct probe *p)
{
	uint64_t answered, failed;
	int busy;

	probe_traffic(p->stat, &answered, &failed);
	busy = answered > p->answered && failed == p->failed;
	p->answered = answered;
	p->failed = failed;
	return busy;
}

/* The start of a check, and the next one's time set. */
static void probe_start(struct probe *p)
{
	char why[128];

	if (p->fd >= 0) /* cannot outlast the interval, but if it did: */
		probe_deadline_cb(hp.loop, &p->deadline, 0);
	ev_timer_set(&p->next, (p->h->interval + probe_random() * p->h->jitter) / 1000.0, 0);
	ev_timer_start(hp.loop, &p->next);
	if (p->h->skip_when_busy && probe_busy(p)) {
		probe_done(p, HEALTH_RESULT_SKIPPED, 0, "real requests answered since the last check");
		return;
	}

	p->fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0) {
		snprintf(why, sizeof why, "socket: %s", strerror(errno));
		probe_done(p, HEALTH_RESULT_LOCAL, 0, why);
		return;
	}
	setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	ev_timer_set(&p->deadline, p->h->timeout / 1000.0, 0);
	ev_timer_start(hp.loop, &p->deadline);
	p->phase = PROBE_CONNECTING;
	if (connect(p->fd, (const struct sockaddr *)&p->sa, p->len) < 0 && errno != EINPROGRESS) {
		int err = errno;
		int local = err == EADDRNOTAVAIL || err == EAGAIN || err == ENOBUFS || err == ENOMEM;

		snprintf(why, sizeof why, "connect failed: %s", strerror(err));
		probe_done(p, local ? HEALTH_RESULT_LOCAL : HEALTH_RESULT_REFUSED, 0, why);
		return;
	}
	probe_wait(p, EV_WRITE);
}

static void probe_next_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	probe_start(t->data);
}

static const struct config_upstream *probe_group(const struct config *cfg, const char *name, int *index)
{
	for (int i = 0; i < cfg->nupstreams; i++)
		if (strcmp(cfg->upstreams[i].name, name) == 0) {
			*index = i;
			return &cfg->upstreams[i];
		}
	return NULL;
}

/* A probe for every server of a group with checks in the current table. */
static int probe_setup(const struct config *cfg)
{
	const struct route_table *t = &hp.seg->gens[atomic_load_explicit(&hp.seg->gen_current, memory_order_acquire)];

	hp.probes = calloc(t->nservers ? t->nservers : 1, sizeof(*hp.probes));
	if (!hp.probes)
		return -1;
	for (uint32_t i = 0; i < t->nservers; i++) {
		const struct route_server *rs = &route_servers(t)[i];
		int ui = 0;
		const struct config_upstream *cu = probe_group(cfg, route_upstreams(t)[rs->upstream].name, &ui);
		struct probe *p;
		const char *host;

		if (!cu || !cu->health.type || rs->stat == STAT_SERVER_OTHER)
			continue;
		if (cu->tls && !hp.ctx[ui] && !(hp.ctx[ui] = probe_ctx_new(cu))) {
			log_error("health checks of upstream %s: cannot make a TLS context", cu->name);
			return -1;
		}
		p = &hp.probes[hp.nprobes++];
		p->fd = -1;
		p->cu = cu;
		p->h = &cu->health;
		p->ctx = cu->tls ? hp.ctx[ui] : NULL;
		p->stat = rs->stat;
		probe_traffic(p->stat, &p->answered, &p->failed); /* the first check is never skipped */
		p->sa = rs->sa;
		p->len = rs->len;
		memcpy(p->addr, rs->text, sizeof(p->addr));
		host = p->h->host[0] ? p->h->host : cu->tls_sni[0] ? cu->tls_sni : rs->text;
		p->req_len = (size_t)snprintf(p->req, sizeof(p->req),
		                              "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: weir-health-check\r\n"
		                              "Connection: close\r\n\r\n",
		                              p->h->path, host);
		ev_init(&p->io, probe_io_cb);
		p->io.data = p;
		ev_init(&p->deadline, probe_deadline_cb);
		p->deadline.data = p;
		/* the first check soon, spread over the jitter */
		ev_timer_init(&p->next, probe_next_cb, probe_random() * p->h->jitter / 1000.0, 0);
		p->next.data = p;
		ev_timer_start(hp.loop, &p->next);
	}
	return 0;
}

/* USR1, forwarded by the master: the log files were moved */
static void probe_usr1_cb(struct ev_loop *loop, ev_signal *s, int revents)
{
	(void)loop;
	(void)s;
	(void)revents;
	log_reopen();
}

/* Once a second: what a slow log reader left pending. */
static void probe_tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	log_flush();
}

int health_probe_main(struct ev_loop *loop, struct shm_segment *seg, const struct config *cfg)
{
	hp.loop = loop;
	hp.seg = seg;
	hp.rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ull;
	log_set_who("health");
	if (probe_setup(cfg) < 0)
		return 1;
	ev_signal_init(&hp.usr1, probe_usr1_cb, SIGUSR1);
	ev_signal_start(loop, &hp.usr1);
	ev_timer_init(&hp.tick, probe_tick_cb, 1.0, 1.0);
	ev_timer_start(loop, &hp.tick);
	log_info("health prober started, pid %d: %d server(s) to check", (int)getpid(), hp.nprobes);
	ev_run(loop, 0);
	return 0;
}
