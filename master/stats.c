#include "master/stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/mem.h>

#include "common/log.h"
#include "master/admin.h"
#include "master/listen.h"
#include "master/textbuf.h"

#define STATS_MAX_CONNS 16
#define STATS_REQ_MAX   2048 /* request head and body together */
#define STATS_TIMEOUT   5.0  /* for the whole exchange */
#define STATS_BACKLOG   64

struct stats_conn {
	ev_io io;
	ev_timer timer;
	int used;
	int on_unix; /* accepted on the unix socket */
	ev_tstamp since; /* accepted at, to evict the oldest when full */
	char req[STATS_REQ_MAX + 1];
	size_t req_len;
	struct textbuf resp; /* the whole answer, head and body */
	size_t resp_off;
};

struct stats_listener {
	ev_io io;
	int fd;
	int adopted; /* handed over by the old master, which still serves it */
	char name[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* address text or path */
};

static struct {
	struct shm_segment *seg;
	struct stats_listener l[2]; /* by enum stats_kind */
	struct stats_conn conns[STATS_MAX_CONNS];
	char admin_token[sizeof(((struct config *)0)->stats_admin_token)];
	int allow_remote;
	char tcp_host[CONFIG_ADDR_STR_MAX]; /* the TCP address without its port: "127.0.0.1", "[::1]" */
	char tcp_port[8];
	ev_timer resume; /* accepting again after running out of descriptors */
} st = {.l = {{.fd = -1}, {.fd = -1}}};

static const char *stats_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	default: return "Internal Server Error";
	}
}

static void stats_conn_close(struct ev_loop *loop, struct stats_conn *sc)
{
	ev_io_stop(loop, &sc->io);
	ev_timer_stop(loop, &sc->timer);
	close(sc->io.fd);
	textbuf_free(&sc->resp);
	sc->used = 0;
}

/* Frames <r> as the whole HTTP answer in sc->resp. */
static void stats_conn_reply(struct stats_conn *sc, struct stats_reply *r)
{
	if (r->body.failed) {
		textbuf_free(&r->body);
		r->status = 500;
		r->allow = NULL;
		r->type = "text/plain";
		textbuf_printf(&r->body, "out of memory rendering the answer\n");
	}
	textbuf_printf(&sc->resp,
	               "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s%s"
	               "Connection: close\r\n\r\n",
	               r->status, stats_reason(r->status), r->type ? r->type : "text/plain", r->body.len,
	               r->allow ? "Allow: " : "", r->allow ? r->allow : "", r->allow ? "\r\n" : "",
	               r->status == 401 ? "WWW-Authenticate: Bearer realm=\"weir admin\"\r\n" : "");
	if (r->body.len)
		textbuf_put(&sc->resp, r->body.buf, r->body.len);
	textbuf_free(&r->body);
}

static void stats_conn_error(struct stats_conn *sc, int status, const char *text)
{
	struct stats_reply r = {.status = status, .type = "text/plain; charset=utf-8"};

	textbuf_printf(&r.body, "%s\n", text);
	stats_conn_reply(sc, &r);
}

/* The value of header <name> in the head [head, end), or NULL. */
static const char *stats_header(const char *head, const char *end, const char *name, size_t *len)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p && p + 2 < end; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;
		if ((size_t)(end - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1, *e = strstr(v, "\r\n");
			while (*v == ' ' || *v == '\t')
				v++;
			*len = e ? (size_t)(e - v) : 0;
			return v;
		}
	}
	return NULL;
}

/* May the sender of the request with head [head, end) change things? The
 * unix socket's file mode decides who connects to it; over TCP, only the
 * token: loopback alone lets in every local process and whatever a local
 * backend or browser can be made to send. */
static enum admin_access stats_access(const struct stats_conn *sc, const char *head, const char *end)
{
	size_t vlen, tlen = strlen(st.admin_token);
	const char *v;

	if (sc->on_unix)
		return ADMIN_ALLOWED;
	if (!tlen)
		return ADMIN_NO_TOKEN;
	v = stats_header(head, end, "Authorization", &vlen);
	while (v && vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (!v || vlen != 7 + tlen || strncasecmp(v, "Bearer ", 7) != 0)
		return ADMIN_NEED_TOKEN;
	/* in constant time: how much of a guess was right must not show */
	return CRYPTO_memcmp(v + 7, st.admin_token, tlen) == 0 ? ADMIN_ALLOWED : ADMIN_NEED_TOKEN;
}

/* Is Host value [v, v+len) the loopback stats address: its own address,
 * 127.0.0.1, [::1] or localhost, with our port or none? A DNS rebinding
 * page reaches 127.0.0.1 under its own name, and that name is in Host. */
static int stats_host_ok(const char *v, size_t len)
{
	static const char *const names[] = {"localhost", "127.0.0.1", "[::1]", st.tcp_host};
	const char *colon = NULL;
	size_t hl;

	for (size_t i = len; i > 0; i--) {
		if (v[i - 1] == ']')
			break;
		if (v[i - 1] == ':') {
			colon = v + i - 1;
			break;
		}
	}
	if (colon && ((size_t)(v + len - colon - 1) != strlen(st.tcp_port) ||
	              strncmp(colon + 1, st.tcp_port, strlen(st.tcp_port)) != 0))
		return 0;
	hl = colon ? (size_t)(colon - v) : len;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (hl && strlen(names[i]) == hl && strncasecmp(v, names[i], hl) == 0)
			return 1;
	return 0;
}

/* Refuses, into sc->resp, what a web page could make a browser send: a
 * request with an Origin header (a cross-site form POST or fetch), and on
 * a loopback TCP socket one whose Host names anything but that socket (DNS
 * rebinding, which would let a page read the answers). Returns 1 when
 * refused. With allow_remote the address is reachable anyway and the
 * token guards the POSTs; Host then names whatever the operator uses. */
static int stats_conn_refuse(struct stats_conn *sc, const char *end)
{
	const char *v;
	size_t vlen;
	char why[160];

	if (stats_header(sc->req, end, "Origin", &vlen)) {
		stats_conn_error(sc, 403, "requests with an Origin header (from a web page) are refused: the stats "
		                          "socket is not for browsers");
		return 1;
	}
	if (sc->on_unix || st.allow_remote)
		return 0;
	v = stats_header(sc->req, end, "Host", &vlen);
	while (v && vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (v && !stats_host_ok(v, vlen)) {
		snprintf(why, sizeof(why), "Host \"%.*s\" is not this stats socket: use %s:%s or localhost:%s",
		         vlen > 64 ? 64 : (int)vlen, v, st.tcp_host, st.tcp_port, st.tcp_port);
		stats_conn_error(sc, 403, why);
		return 1;
	}
	return 0;
}

/*
 * Looks at what has arrived. Returns 0 while more is needed, 1 when
 * sc->resp holds the answer. Only what the commands need is parsed: the
 * request line, and Content-Length for a form body; Transfer-Encoding is
 * refused, as are heads or bodies past STATS_REQ_MAX.
 */
static int stats_conn_request(struct stats_conn *sc)
{
	char *end = strstr(sc->req, "\r\n\r\n"), *sp1, *sp2, *eol;
	size_t head_len, body_len = 0, vlen;
	const char *v;
	struct stats_reply r = {0};
	enum admin_access access;

	if (!end) {
		if (sc->req_len >= STATS_REQ_MAX || memchr(sc->req, 0, sc->req_len)) {
			stats_conn_error(sc, 400, "request head too large or malformed");
			return 1;
		}
		return 0;
	}
	head_len = (size_t)(end - sc->req) + 4;
	eol = strstr(sc->req, "\r\n");
	sp1 = memchr(sc->req, ' ', (size_t)(eol - sc->req));
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == sc->req || sp2 == sp1 + 1 || sp1[1] != '/' || (size_t)(eol - sp2 - 1) != 8 ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
		stats_conn_error(sc, 400, "malformed request line");
		return 1;
	}
	if (stats_conn_refuse(sc, end + 2))
		return 1;
	if (stats_header(sc->req, end + 2, "Transfer-Encoding", &vlen)) {
		stats_conn_error(sc, 400, "send arguments in the query or in a body with Content-Length");
		return 1;
	}
	v = stats_header(sc->req, end + 2, "Content-Length", &vlen);
	if (v) {
		char *e;
		unsigned long long n = strtoull(v, &e, 10);

		if (vlen == 0 || e != v + vlen || *v == '-' || *v == '+') {
			stats_conn_error(sc, 400, "bad Content-Length");
			return 1;
		}
		if (n > STATS_REQ_MAX - head_len) {
			stats_conn_error(sc, 413, "request too large: the stats socket takes 2 KiB at most");
			return 1;
		}
		body_len = (size_t)n;
	}
	if (sc->req_len < head_len + body_len)
		return 0;
	access = stats_access(sc, sc->req, end + 2); /* before the request line is cut */
	*sp1 = 0;
	*sp2 = 0;
	admin_dispatch(st.seg, sc->req, sp1 + 1, sc->req + head_len, body_len, access, &r);
	stats_conn_reply(sc, &r);
	return 1;
}

static void stats_conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stats_conn *sc = w->data;
	(void)revents;

	if (!sc->resp.len) {
		ssize_t n = read(w->fd, sc->req + sc->req_len, STATS_REQ_MAX - sc->req_len);
		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			stats_conn_close(loop, sc);
			return;
		}
		sc->req_len += (size_t)n;
		sc->req[sc->req_len] = 0;
		if (!stats_conn_request(sc))
			return;
		if (sc->resp.failed) {
			stats_conn_close(loop, sc);
			return;
		}
		ev_io_stop(loop, &sc->io);
		ev_io_set(&sc->io, sc->io.fd, EV_WRITE);
		ev_io_start(loop, &sc->io);
	}
	while (sc->resp_off < sc->resp.len) {
		ssize_t n = write(w->fd, sc->resp.buf + sc->resp_off, sc->resp.len - sc->resp_off);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
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

/* The connection that has waited longest for its request, or NULL if all
 * are writing answers. A scraper sends its request at once and is answered
 * in the same pass, so only idle or dribbling connections are ever old. */
static struct stats_conn *stats_oldest_reading(void)
{
	struct stats_conn *oldest = NULL;

	for (int i = 0; i < STATS_MAX_CONNS; i++)
		if (st.conns[i].used && !st.conns[i].resp.len && (!oldest || st.conns[i].since < oldest->since))
			oldest = &st.conns[i];
	return oldest;
}

static void stats_listen_set(struct ev_loop *loop, int on)
{
	for (int k = 0; k < 2; k++)
		if (st.l[k].fd >= 0) {
			if (on)
				ev_io_start(loop, &st.l[k].io);
			else
				ev_io_stop(loop, &st.l[k].io);
		}
}

static void stats_resume_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)t;
	(void)revents;
	stats_listen_set(loop, 1);
}

static void stats_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct stats_conn *sc = NULL;

		if (fd < 0) {
			if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM)
				return;
			/* out of descriptors, the listening socket stays readable:
			 * free one held by a connection still waiting for its
			 * request, else stop accepting for a moment, never spin */
			sc = stats_oldest_reading();
			if (sc) {
				stats_conn_close(loop, sc);
				continue;
			}
			log_error("stats: accept: %s; not accepting for 500 ms", strerror(errno));
			stats_listen_set(loop, 0);
			ev_timer_stop(loop, &st.resume);
			ev_timer_set(&st.resume, 0.5, 0);
			ev_timer_start(loop, &st.resume);
			return;
		}
		for (int i = 0; i < STATS_MAX_CONNS && !sc; i++)
			if (!st.conns[i].used)
				sc = &st.conns[i];
		if (!sc) {
			/* full: make room by closing the connection that has waited
			 * longest for its request, so a handful of idle ones cannot
			 * lock scrapes out for the whole timeout */
			sc = stats_oldest_reading();
			if (!sc) {
				close(fd); /* all are writing answers: the master stays bounded */
				continue;
			}
			stats_conn_close(loop, sc);
		}
		sc->used = 1;
		sc->on_unix = w == &st.l[STATS_UNIX].io;
		sc->since = ev_now(loop);
		sc->req_len = 0;
		sc->resp_off = 0;
		memset(&sc->resp, 0, sizeof(sc->resp));
		ev_io_init(&sc->io, stats_conn_cb, fd, EV_READ);
		sc->io.data = sc;
		ev_timer_init(&sc->timer, stats_timeout_cb, STATS_TIMEOUT, 0);
		sc->timer.data = sc;
		ev_io_start(loop, &sc->io);
		ev_timer_start(loop, &sc->timer);
	}
}

void stats_adopt(struct ev_loop *loop, enum stats_kind kind, int fd, const char *name, struct shm_segment *seg)
{
	struct stats_listener *l = &st.l[kind];

	st.seg = seg;
	if (!ev_is_active(&st.resume))
		ev_timer_init(&st.resume, stats_resume_cb, 0.5, 0);
	l->fd = fd;
	l->adopted = 1;
	snprintf(l->name, sizeof(l->name), "%s", name);
	ev_io_init(&l->io, stats_accept_cb, fd, EV_READ);
	ev_io_start(loop, &l->io);
}

/*
 * A listening unix socket at <path> with file mode <mode>. A socket file
 * already there is taken over only if nobody answers on it (a weir that
 * died left it); anything else there is an error, never removed.
 */
static int stats_unix_socket(const char *path, unsigned mode)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat sb;
	mode_t old;
	int fd, rc, saved;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_error("cannot open the stats socket %s: the path is too long", path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	if (lstat(path, &sb) == 0) {
		int probe;

		if (!S_ISSOCK(sb.st_mode)) {
			log_error("cannot open the stats socket %s: a file that is not a socket is there", path);
			return -1;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		rc = probe < 0 ? -1 : connect(probe, (struct sockaddr *)&sun, sizeof(sun));
		saved = errno;
		if (probe >= 0)
			close(probe);
		if (rc == 0 || saved == EAGAIN || saved == EINPROGRESS) {
			log_error("cannot open the stats socket %s: another process is listening on it", path);
			return -1;
		}
		unlink(path); /* nobody home: a stale file */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("cannot open the stats socket %s: %s", path, strerror(errno));
		return -1;
	}
	/* bind creates the file with 0777 less the umask: narrow the umask so
	 * the file is never, even for a moment, more open than <mode> */
	old = umask((mode_t)(~mode & 0777));
	rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (rc < 0 || chmod(path, (mode_t)mode) < 0 || listen(fd, STATS_BACKLOG) < 0) {
		saved = errno;
		if (rc == 0)
			unlink(path);
		close(fd);
		log_error("cannot open the stats socket %s: %s", path, strerror(saved));
		return -1;
	}
	return fd;
}

static void stats_close_one(struct ev_loop *loop, enum stats_kind kind, int unlink_unix)
{
	struct stats_listener *l = &st.l[kind];

	if (l->fd < 0)
		return;
	ev_io_stop(loop, &l->io);
	close(l->fd);
	l->fd = -1;
	if (kind == STATS_UNIX && unlink_unix)
		unlink(l->name);
	l->name[0] = 0;
}

int stats_configure(struct ev_loop *loop, const struct config *cfg, struct shm_segment *seg)
{
	int rc = 0, fd;

	st.seg = seg;
	strcpy(st.admin_token, cfg->stats_admin_token);
	st.allow_remote = cfg->stats_allow_remote;
	st.tcp_host[0] = st.tcp_port[0] = 0;
	if (cfg->has_stats) {
		const char *colon = strrchr(cfg->stats.text, ':');
		size_t hl = colon ? (size_t)(colon - cfg->stats.text) : 0;

		if (colon && hl < sizeof(st.tcp_host) && strlen(colon + 1) < sizeof(st.tcp_port)) {
			memcpy(st.tcp_host, cfg->stats.text, hl);
			st.tcp_host[hl] = 0;
			strcpy(st.tcp_port, colon + 1);
		}
	}
	if (cfg->has_stats && !cfg->stats_admin_token[0])
		log_info("stats on %s: admin commands are refused there without stats.admin_token%s", cfg->stats.text,
		         cfg->stats_unix[0] ? "; the unix socket takes them" : "");
	if (st.l[STATS_TCP].fd >= 0 && (!cfg->has_stats || strcmp(st.l[STATS_TCP].name, cfg->stats.text) != 0))
		stats_close_one(loop, STATS_TCP, 0);
	if (cfg->has_stats && st.l[STATS_TCP].fd < 0) {
		fd = listen_socket(&cfg->stats, STATS_BACKLOG, 0);
		if (fd < 0) {
			log_error("cannot open the stats socket on %s: %s", cfg->stats.text, strerror(errno));
			rc = -1;
		} else {
			stats_adopt(loop, STATS_TCP, fd, cfg->stats.text, seg);
		}
	}
	st.l[STATS_TCP].adopted = 0;

	/* an inherited socket this config moved elsewhere keeps its file: until
	 * the upgrade succeeds it is the old master's, and a stale file is
	 * replaced by whoever binds that path next */
	if (st.l[STATS_UNIX].fd >= 0 && strcmp(st.l[STATS_UNIX].name, cfg->stats_unix) != 0)
		stats_close_one(loop, STATS_UNIX, !st.l[STATS_UNIX].adopted);
	if (cfg->stats_unix[0] && st.l[STATS_UNIX].fd < 0) {
		fd = stats_unix_socket(cfg->stats_unix, cfg->stats_mode);
		if (fd < 0)
			rc = -1;
		else
			stats_adopt(loop, STATS_UNIX, fd, cfg->stats_unix, seg);
		st.l[STATS_UNIX].adopted = 0;
	} else if (cfg->stats_unix[0] && chmod(cfg->stats_unix, (mode_t)cfg->stats_mode) < 0) {
		/* kept (reload, upgrade): the mode may have changed */
		log_error("cannot set the mode of the stats socket %s: %s", cfg->stats_unix, strerror(errno));
	}
	st.l[STATS_UNIX].adopted = 0; /* from now on it is ours alone */
	return rc;
}

int stats_fd(enum stats_kind kind)
{
	return st.l[kind].fd;
}

void stats_close(struct ev_loop *loop, int unlink_unix)
{
	ev_timer_stop(loop, &st.resume);
	stats_close_one(loop, STATS_TCP, 0);
	stats_close_one(loop, STATS_UNIX, unlink_unix);
	for (int i = 0; i < STATS_MAX_CONNS; i++)
		if (st.conns[i].used)
			stats_conn_close(loop, &st.conns[i]);
}
