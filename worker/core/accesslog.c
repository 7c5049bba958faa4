/*
 * accesslog.c: access log formats and outputs (worker/accesslog.h).
 */

#include "worker/core/core.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define ACCESSLOG_LINE 16384
#define ACCESSLOG_VALUE 2048
#define ACCESSLOG_VALUE_SHORT 128

static const char fmt_combined[] =
    "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" "
    "\"$http_user_agent\"";
static const char fmt_json[] =
    "{\"time\":\"$time_iso8601\",\"client_ip\":\"$client_ip\",\"peer_addr\":\"$peer_addr\","
    "\"method\":\"$method\",\"host\":\"$host\",\"uri\":\"$request_uri\",\"protocol\":\"$server_protocol\","
    "\"status\":$status,\"bytes_sent\":$bytes_sent,\"request_time\":$request_time,"
    "\"upstream_addr\":\"$upstream_addr\",\"upstream_response_time\":\"$upstream_response_time\","
    "\"request_id\":\"$request_id\",\"route\":\"$route\",\"referer\":\"$http_referer\","
    "\"user_agent\":\"$http_user_agent\",\"tls_sni\":\"$tls_sni\"}";

static struct {
	int custom;          /* a template, else the "weir" line */
	enum vars_esc esc;
	struct vars_tpl tpl;
	int syslog_fd;       /* -1: the log of common/log.h */
	struct sockaddr_un syslog_addr;
	socklen_t syslog_len;
	char line[ACCESSLOG_LINE];
} al = {.syslog_fd = -1};

int accesslog_init(const struct config *cfg)
{
	const char *fmt = cfg->log.format;
	const char *why;

	al.custom = strcmp(fmt, "weir") != 0 && fmt[0];
	al.esc = VARS_ESC_LOG;
	if (!strcmp(fmt, "combined")) {
		fmt = fmt_combined;
	} else if (!strcmp(fmt, "json")) {
		fmt = fmt_json;
		al.esc = VARS_ESC_JSON;
	}
	if (al.custom && (why = vars_compile(&al.tpl, fmt)) != NULL) {
		log_error("log.format %s", why); /* the loader checked it: not reached */
		return -1;
	}
	if (strncmp(cfg->log.access_path, "syslog:", 7) == 0) {
		const char *path = cfg->log.access_path + 7;

		if (strlen(path) >= sizeof(al.syslog_addr.sun_path)) {
			log_error("log.access: the syslog socket path is too long");
			return -1;
		}
		al.syslog_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (al.syslog_fd < 0) {
			log_error("log.access: cannot make a datagram socket: %s", strerror(errno));
			return -1;
		}
		al.syslog_addr.sun_family = AF_UNIX;
		strcpy(al.syslog_addr.sun_path, path);
		al.syslog_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
	}
	return 0;
}

/* The line weir has always written ("weir"), with the client's address
 * as realip.h resolves it. */
static int accesslog_weir(struct conn *c, struct txn *t, int status)
{
	ev_tstamp now = ev_now(wk.loop);
	size_t cl;
	const char *client = realip_client(c, t, &cl);
	int n;

	if (t && t->req.method) {
		/* once the body has flowed, the head's bytes in the input buffer
		 * are gone: the target is read back from the head we wrote */
		const char *target = t->req.target;
		uint32_t tl = t->req.target_len;
		const struct route_server *s = t->server >= 0 ? &route_servers(t->table)[t->server] : NULL;
		char esc[4 * 512 + 1];

		if (t->up.head) { /* as forwarded: strip_prefix, rewrite (match.h) */
			target = t->up.head->data + t->fwd_target_at;
			tl = t->fwd_target_len;
		}
		if (tl > 512)
			tl = 512;
		/* a target may hold '"' or '\\': escaped, a line stays one record */
		log_escape(esc, sizeof(esc), target, tl);
		n = snprintf(al.line, sizeof(al.line), "%.*s [%s] \"%.*s %s %s\" %d %llu %.3f %s %.3f", (int)cl,
		             client, log_time_iso(), (int)t->req.method_len, t->req.method, esc, txn_protocol(t),
		             status, (unsigned long long)t->bytes_out, now - t->start,
		             t->tun.on ? t->tun.server : s ? s->text : "-", t->up_start > 0 ? now - t->up_start : 0.0);
		if (n > 0 && (size_t)n < sizeof(al.line) && breaker_acted(t)) /* the control that acted, if one did */
			n += snprintf(al.line + n, sizeof(al.line) - (size_t)n, " ctl=%s", breaker_acted(t));
		if (n > 0 && (size_t)n < sizeof(al.line) && t->sp.upstream_plus1) /* the side of a split */
			n += snprintf(al.line + n, sizeof(al.line) - (size_t)n, " group=%s",
			              route_upstreams(t->table)[t->sp.upstream_plus1 - 1u].name);
	} else {
		n = snprintf(al.line, sizeof(al.line), "%.*s [%s] \"-\" %d 0 %.3f - 0.000", (int)cl, client,
		             log_time_iso(), status, t ? now - t->start : 0.0);
	}
	if (n < 0)
		return 0;
	return (size_t)n < sizeof(al.line) ? n : (int)sizeof(al.line) - 1;
}

/* One datagram: the RFC 3164 header glibc's syslog(3) writes locally. */
static void accesslog_syslog(const char *line, size_t len)
{
	static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	static time_t cached;
	static char head[64];
	static int head_len;
	char dgram[ACCESSLOG_LINE + 64];
	time_t now = time(NULL);

	if (now != cached) {
		struct tm tm;

		cached = now;
		localtime_r(&now, &tm);
		head_len = snprintf(head, sizeof(head), "<190>%s %2d %02d:%02d:%02d weir[%d]: ", mon[tm.tm_mon],
		                    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
	}
	memcpy(dgram, head, (size_t)head_len);
	memcpy(dgram + head_len, line, len);
	if (sendto(al.syslog_fd, dgram, (size_t)head_len + len, MSG_DONTWAIT | MSG_NOSIGNAL,
	           (const struct sockaddr *)&al.syslog_addr, al.syslog_len) < 0)
		worker_count_error(WEIR_ERR(SYSLOG_DROPPED));
}

void accesslog_write(struct conn *c, struct txn *t, int status)
{
	size_t n;

	if (al.syslog_fd < 0 && !log_access_enabled())
		return;
	if (t && !t->ident.client_len && t->req_p.st.done)
		realip_begin(t); /* a whole head refused before txn_start (400) */
	if (t && t->route) {
		if (!t->route->log)
			return;
		if (t->route->log_sample < 10000 && realip_random() % 10000 >= t->route->log_sample)
			return;
	}
	if (!al.custom) {
		n = (size_t)accesslog_weir(c, t, status);
	} else {
		struct vars_ctx x = {.c = c, .t = t, .status = status, .value_max = ACCESSLOG_VALUE};
		int full, bad;

		n = vars_expand(&al.tpl, &x, al.esc, al.line, sizeof(al.line), &full, &bad);
		if (full) {
			x.value_max = ACCESSLOG_VALUE_SHORT;
			n = vars_expand(&al.tpl, &x, al.esc, al.line, sizeof(al.line), &full, &bad);
		}
	}
	if (al.syslog_fd >= 0)
		accesslog_syslog(al.line, n);
	else
		log_access(al.line, n);
}
