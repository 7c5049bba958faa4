#include "master/admin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "master/metrics.h"
#include "shm/shm.h"

#define TEXT_PLAIN    "text/plain; charset=utf-8"
#define ADMIN_ARG_MAX 256

static const char help_text[] =
    "weir stats socket. Commands:\n"
    "  GET  /metrics     Prometheus metrics (text format 0.0.4)\n"
    "  GET  /info        version, uptime, workers alive, config and routes generation\n"
    "  GET  /routes      the current route table (host, path, upstream), in matching order\n"
    "  GET  /upstreams   every upstream group and server: state, weight, counters, health\n"
    "  POST /upstreams/GROUP/ADDRESS?state=up|drain|down\n"
    "  POST /upstreams/GROUP/ADDRESS?weight=N   (1..1000, or \"default\" for the configured one)\n"
    "       change a server at run time, without a reload: drain and down take it out of\n"
    "       the choice for new requests, up puts it back. Arguments may be combined with &\n"
    "       or sent as a form body: curl -d state=drain http://HOST/upstreams/api/10.0.0.1:80\n"
    "  POST /upstreams/GROUP/ADDRESS?action=uneject|reset\n"
    "       end an outlier ejection now; reset also forgets its ejection count and runs\n"
    "  POST /upstreams/GROUP?action=reset   close the group's breaker and clear its window\n";


static void reply(struct stats_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply(struct stats_reply *r, int status, const char *fmt, ...)
{
	va_list ap;

	r->status = status;
	r->type = TEXT_PLAIN;
	va_start(ap, fmt);
	textbuf_vprintf(&r->body, fmt, ap);
	va_end(ap);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes [s, s+n) into <out> of <cap> bytes (with <plus>, '+' is
 * a space, as in a form). Returns 0, or -1 if it is malformed, holds a NUL
 * or a control byte, or does not fit. */
static int decode(const char *s, size_t n, char *out, size_t cap, int plus)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int h, l;
			if (i + 2 >= n)
				return -1;
			h = hexval(s[i + 1]);
			l = hexval(s[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			c = h * 16 + l;
			i += 2;
		} else if (c == '+' && plus) {
			c = ' ';
		}
		if (c < 0x20 || c == 0x7f || o + 1 >= cap)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = 0;
	return 0;
}

/* ---- GET ----------------------------------------------------------------- */

static void admin_info(struct shm_segment *seg, struct stats_reply *r)
{
	const struct route_table *t = metrics_table(seg);
	long long now = (long long)time(NULL);

	r->status = 200;
	r->type = TEXT_PLAIN;
	textbuf_printf(&r->body,
	               "version %s\npid %d\nstart_time %llu\nuptime_seconds %lld\nworkers_alive %d\n"
	               "config_generation %llu\nroutes_generation %llu\nroutes %u\nupstreams %u\nservers %u\n",
	               WEIR_VERSION, (int)getpid(), (unsigned long long)seg->started_at,
	               now - (long long)seg->started_at, shm_workers_alive(seg),
	               (unsigned long long)atomic_load(&seg->config_generation), (unsigned long long)t->id, t->nroutes,
	               t->nupstreams, t->nservers);
}

static void admin_routes(struct shm_segment *seg, struct stats_reply *r)
{
	const struct route_table *t = metrics_table(seg);
	char hb[CONFIG_HOST_MAX + 2];
	int wh = 4, wp = 4;

	for (uint32_t i = 0; i < t->nroutes; i++) {
		int h = (int)strlen(config_host_text(route_entries(t)[i].host_kind, route_host(t, &route_entries(t)[i]), hb, sizeof(hb)));
		int p = (int)route_entries(t)[i].path_len;
		wh = h > wh ? h : wh;
		wp = p > wp ? p : wp;
	}
	r->status = 200;
	r->type = TEXT_PLAIN;
	/* hosts and paths hold no spaces (the config refuses them): columns
	 * split on whitespace */
	textbuf_printf(&r->body, "%-*s  %-*s  %s\n", wh, "HOST", wp, "PATH", "UPSTREAM");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct route_entry *e = &route_entries(t)[i];
		textbuf_printf(&r->body, "%-*s  %-*s  %s", wh, config_host_text(e->host_kind, route_host(t, e), hb, sizeof(hb)), wp,
		               route_path(t, e), e->ret >= 0 ? "(return)" : e->split ? "" : route_upstreams(t)[e->upstream].name);
		if (e->split) { /* each side's group and its buckets of 10,000: "v1:9500,v2:500" */
			const struct route_split *s = &route_splits(t)[e->split - 1];

			for (int k = 0; k < s->nsides; k++)
				textbuf_printf(&r->body, "%s%s:%u", k ? "," : "", route_upstreams(t)[s->upstream[k]].name,
				               (unsigned)(s->bound[k] - (k ? s->bound[k - 1] : 0)));
		}
		textbuf_printf(&r->body, "\n");
	}
}

/* "    outlier ejected=... reason=... ejections=..." for one server. */
static void admin_outlier_state(struct textbuf *o, const struct shm_resil_server *s)
{
	uint64_t now = resil_now_ms(), until = atomic_load(&s->ejected_until);
	uint32_t why = atomic_load(&s->ejected);

	textbuf_printf(o, "    outlier ejected=%s", until > now ? "yes" : "no");
	if (until > now)
		textbuf_printf(o, " for=%.1fs reason=%s", (double)(until - now) / 1000.0,
		               why && why <= RESIL_EJECT_COUNT ? resil_eject_names[why - 1] : "?");
	textbuf_printf(o, " ejections_in_a_row=%u run_5xx=%u run_gateway_failures=%u\n", atomic_load(&s->ejections),
	               atomic_load(&s->run_5xx), atomic_load(&s->run_gateway));
}

/* "  breaker state=... in_flight=..." for one group. */
static void admin_breaker_state(struct textbuf *o, const struct route_upstream *up, const struct shm_resil_group *g)
{
	uint64_t w = atomic_load(&g->state), now = resil_now_ms();
	uint32_t st = BREAKER_STATE(w), why = atomic_load(&g->reason);

	textbuf_printf(o, "  breaker state=%s", up->resil.breaker.on && st < 3 ? breaker_state_names[st] : "none");
	if (up->resil.breaker.on && st == BREAKER_OPEN)
		textbuf_printf(o, " for=%.1fs reason=%s", BREAKER_UNTIL(w) > now ? (double)(BREAKER_UNTIL(w) - now) / 1000.0 : 0.0,
		               why < BREAKER_TRIP_COUNT ? breaker_trip_names[why] : "?");
	textbuf_printf(o, " openings_in_a_row=%u in_flight=%llu rejected_breaker=%llu rejected_limit=%llu\n",
	               atomic_load(&g->opens), (unsigned long long)atomic_load(&g->active),
	               (unsigned long long)atomic_load(&g->rejected[RESIL_REJECT_BREAKER]),
	               (unsigned long long)atomic_load(&g->rejected[RESIL_REJECT_LIMIT]));
	if (up->resil.adaptive.on) {
		uint32_t l = atomic_load(&g->ac_limit);

		textbuf_printf(o, "  adaptive_concurrency limit=%u latency=%.1fms baseline=%.1fms refused=%llu\n",
		               l ? l : up->resil.adaptive.initial_limit, atomic_load(&g->ac_latency_us) / 1000.0,
		               atomic_load(&g->ac_baseline_us) / 1000.0, (unsigned long long)atomic_load(&g->ac_refused));
	}
}

static void admin_upstreams(struct shm_segment *seg, struct stats_reply *r)
{
	const struct route_table *t = metrics_table(seg);
	struct shm_server_counters *sums = malloc(sizeof(*sums) * STAT_SERVERS);

	if (!sums) {
		reply(r, 500, "out of memory\n");
		return;
	}
	shm_sum_keys(seg, NULL, sums);
	r->status = 200;
	r->type = TEXT_PLAIN;
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		textbuf_printf(&r->body, "upstream %s keepalive=%u servers=%u\n", up->name, up->keepalive,
		               up->nservers);
		if (up->resil_group != RESIL_GROUP_NONE)
			admin_breaker_state(&r->body, up, &seg->resil_groups.g[up->resil_group]);
		for (uint32_t k = 0; k < up->nservers; k++) {
			const struct route_server *s = &route_servers(t)[up->first_server + k];
			const struct shm_server_counters *c = &sums[s->stat];
			uint32_t a = shm_admin(seg, s->stat);
			uint32_t st = SHM_ADMIN_STATE(a);
			char hw[96];

			textbuf_printf(
			    &r->body,
			    "  server %s state=%s weight=%u configured_weight=%u requests=%llu connects=%llu "
			    "reuses=%llu 1xx=%llu 2xx=%llu 3xx=%llu 4xx=%llu 5xx=%llu %s%s\n",
			    s->text, st < 3 ? shm_admin_state_names[st] : "?",
			    SHM_ADMIN_WEIGHT(a) ? SHM_ADMIN_WEIGHT(a) : s->weight, s->weight,
			    (unsigned long long)c->requests, (unsigned long long)c->connects,
			    (unsigned long long)c->reuses, (unsigned long long)c->responses[0],
			    (unsigned long long)c->responses[1], (unsigned long long)c->responses[2],
			    (unsigned long long)c->responses[3], (unsigned long long)c->responses[4],
			    metrics_health_text(seg, s->stat, hw, sizeof(hw)), s->stat == STAT_SERVER_OTHER ? " shared_counters=other" : "");
			if (up->resil.outlier.on)
				admin_outlier_state(&r->body, &seg->resil[s->stat]);
		}
	}
	free(sums);
}

/* ---- POST ---------------------------------------------------------------- */

/* The arguments of a server change: -1 when not given. */
struct admin_args {
	int state;  /* enum shm_admin_state */
	int weight; /* 1..1000, 0 for "default" */
	int action; /* ADMIN_UNEJECT, ADMIN_RESET */
};

enum { ADMIN_UNEJECT = 1, ADMIN_RESET = 2 };

/* Parses "a=b&c=d" from [s, s+n) into <a>. Returns NULL, or what is wrong
 * (into <why> of <cap> bytes). */
static const char *parse_args(const char *s, size_t n, struct admin_args *a, char *why, size_t cap)
{
	const char *end = s + n;

	while (s < end) {
		const char *amp = memchr(s, '&', (size_t)(end - s));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(s, '=', (size_t)(pe - s));
		char key[ADMIN_ARG_MAX], val[ADMIN_ARG_MAX];

		if (pe == s) { /* "&&" or a trailing "&" */
			s = pe + 1;
			continue;
		}
		if (!eq || decode(s, (size_t)(eq - s), key, sizeof(key), 1) < 0 ||
		    decode(eq + 1, (size_t)(pe - eq - 1), val, sizeof(val), 1) < 0) {
			snprintf(why, cap, "arguments must be NAME=VALUE pairs joined by &");
			return why;
		}
		if (strcmp(key, "state") == 0) {
			int k;
			for (k = 0; k < 3 && strcmp(val, shm_admin_state_names[k]) != 0; k++)
				;
			if (k == 3) {
				snprintf(why, cap, "state \"%.64s\" is not one of up, drain, down", val);
				return why;
			}
			a->state = k;
		} else if (strcmp(key, "weight") == 0) {
			char *e;
			long w = strtol(val, &e, 10);

			if (strcmp(val, "default") == 0) {
				a->weight = 0;
			} else if (!val[0] || *e || val[0] == '-' || val[0] == '+' || w < 1 || w > 1000) {
				snprintf(why, cap, "weight \"%.64s\" must be a number from 1 to 1000, or \"default\"",
				         val);
				return why;
			} else {
				a->weight = (int)w;
			}
		} else if (strcmp(key, "action") == 0) {
			if (strcmp(val, "uneject") != 0 && strcmp(val, "reset") != 0) {
				snprintf(why, cap, "action \"%.64s\" is not one of uneject, reset", val);
				return why;
			}
			a->action = val[0] == 'u' ? ADMIN_UNEJECT : ADMIN_RESET;
		} else {
			snprintf(why, cap, "unknown argument \"%.64s\": give state, weight or action", key);
			return why;
		}
		s = pe + (pe < end);
	}
	return NULL;
}

/* The group named <group> in <t>, or NULL, answered with 404. */
static const struct route_upstream *admin_find_group(const struct route_table *t, const char *group,
                                                     struct stats_reply *r)
{
	for (uint32_t u = 0; u < t->nupstreams; u++)
		if (strcmp(route_upstreams(t)[u].name, group) == 0)
			return &route_upstreams(t)[u];
	reply(r, 404, "no upstream group \"%s\" in the current configuration (GET /upstreams lists them)\n", group);
	return NULL;
}

/* POST /upstreams/GROUP?action=reset: closes the group's breaker and
 * clears its window. <rest> is "GROUP" (still encoded). */
static void admin_group_change(struct shm_segment *seg, const char *rest, const char *query, size_t qlen,
                               const char *body, size_t body_len, struct stats_reply *r)
{
	const struct route_table *t = metrics_table(seg);
	struct admin_args a = {.state = -1, .weight = -1, .action = -1};
	const struct route_upstream *up = NULL;
	char group[ADMIN_ARG_MAX], why[256];

	if (decode(rest, strlen(rest), group, sizeof(group), 0) < 0 || !group[0]) {
		reply(r, 400, "say which group: POST /upstreams/GROUP?action=reset\n");
		return;
	}
	if (parse_args(query, qlen, &a, why, sizeof(why)) || parse_args(body, body_len, &a, why, sizeof(why))) {
		reply(r, 400, "%s\n", why);
		return;
	}
	if (a.action != ADMIN_RESET || a.state >= 0 || a.weight >= 0) {
		reply(r, 400, "say which server: POST /upstreams/GROUP/ADDRESS?state=up|drain|down or ?weight=N; "
		              "a group alone takes only ?action=reset (its breaker)\n");
		return;
	}
	if (!(up = admin_find_group(t, group, r)))
		return;
	if (up->resil_group == RESIL_GROUP_NONE) {
		reply(r, 409, "upstream \"%s\" has no breaker or limits\n", group);
		return;
	}
	resil_group_reset(&seg->resil_groups.g[up->resil_group]);
	log_notice("stats: upstream \"%s\": breaker reset (closed, window cleared)", group);
	reply(r, 200, "upstream %s breaker reset\n", group);
}

/* POST /upstreams/GROUP/ADDRESS; <rest> is "GROUP/ADDRESS" (still encoded). */
static void admin_server_change(struct shm_segment *seg, const char *rest, const char *query, size_t qlen,
                                const char *body, size_t body_len, struct stats_reply *r)
{
	const struct route_table *t = metrics_table(seg);
	const char *slash = strchr(rest, '/');
	char group[ADMIN_ARG_MAX], addr_text[ADMIN_ARG_MAX], why[256];
	struct config_addr addr;
	struct admin_args a = {.state = -1, .weight = -1, .action = -1};
	const struct route_upstream *up = NULL;
	const struct route_server *s = NULL;
	uint32_t old, word, st, w;

	if (!slash || decode(rest, (size_t)(slash - rest), group, sizeof(group), 0) < 0 ||
	    decode(slash + 1, strlen(slash + 1), addr_text, sizeof(addr_text), 0) < 0 || !group[0] || !addr_text[0]) {
		reply(r, 400, "say which server: POST /upstreams/GROUP/ADDRESS?state=up|drain|down or ?weight=N\n");
		return;
	}
	if (config_parse_addr(addr_text, &addr) < 0) {
		reply(r, 400, "\"%s\" is not a server address such as 10.0.0.1:8080 or [::1]:8080\n", addr_text);
		return;
	}
	if (parse_args(query, qlen, &a, why, sizeof(why)) || parse_args(body, body_len, &a, why, sizeof(why))) {
		reply(r, 400, "%s\n", why);
		return;
	}
	if (a.state < 0 && a.weight < 0 && a.action < 0) {
		reply(r, 400, "nothing to change: give ?state=up|drain|down, ?weight=N (1..1000, or default) or "
		              "?action=uneject|reset\n");
		return;
	}
	if (!(up = admin_find_group(t, group, r)))
		return;
	for (uint32_t k = 0; k < up->nservers && !s; k++)
		if (strcmp(route_servers(t)[up->first_server + k].text, addr.text) == 0)
			s = &route_servers(t)[up->first_server + k];
	if (!s) {
		reply(r, 404, "upstream \"%s\" has no server %s (GET /upstreams lists them)\n", group, addr.text);
		return;
	}
	if (s->stat == STAT_SERVER_OTHER) {
		reply(r, 409,
		      "server %s of upstream \"%s\" has no stat index of its own (the configurations still in use "
		      "hold more than %d servers between them), so it cannot be changed at run time; reload once "
		      "the draining workers are gone\n",
		      addr.text, group, STAT_SERVER_OTHER);
		return;
	}
	if (a.action > 0) {
		uint32_t was = resil_uneject(&seg->resil[s->stat], a.action == ADMIN_RESET);

		log_notice("stats: upstream \"%s\" server %s: %s%s", group, addr.text,
		           a.action == ADMIN_RESET ? "outlier state reset" : "unejected",
		           was ? " (it was ejected)" : " (it was not ejected)");
		if (a.state < 0 && a.weight < 0) {
			reply(r, 200, "upstream %s server %s %s%s\n", group, addr.text,
			      a.action == ADMIN_RESET ? "reset" : "unejected", was ? "" : " (was not ejected)");
			return;
		}
	}
	/* one word, so a worker never sees a new state with an old weight;
	 * the master is its only writer, but during a binary upgrade the other
	 * master may answer too: compare-and-swap keeps both changes */
	old = atomic_load(&seg->admin[s->stat]);
	do {
		st = a.state >= 0 ? (uint32_t)a.state : SHM_ADMIN_STATE(old);
		w = a.weight >= 0 ? (uint32_t)a.weight : SHM_ADMIN_WEIGHT(old);
		word = SHM_ADMIN_WORD(st, w);
	} while (!atomic_compare_exchange_weak(&seg->admin[s->stat], &old, word));
	log_notice("stats: upstream \"%s\" server %s set to state %s, weight %u%s", group, addr.text, shm_admin_state_names[st],
	           w ? w : s->weight, w ? "" : " (configured)");
	reply(r, 200, "upstream %s server %s state=%s weight=%u configured_weight=%u\n", group, addr.text,
	      shm_admin_state_names[st], w ? w : s->weight, s->weight);
}

/* ---- dispatch ------------------------------------------------------------ */

static void not_allowed(struct stats_reply *r, const char *allow)
{
	r->allow = allow;
	reply(r, 405, "method not allowed here: use %s\n\n%s", allow, help_text);
}

void admin_dispatch(struct shm_segment *seg, const char *method, const char *target, const char *body, size_t body_len,
                    enum admin_access access, struct stats_reply *r)
{
	const char *q = strchr(target, '?');
	size_t plen = q ? (size_t)(q - target) : strlen(target);
	const char *query = q ? q + 1 : "";
	int get = strcmp(method, "GET") == 0;
	char path[ADMIN_ARG_MAX * 2 + 16];

	r->status = 0;
	r->allow = NULL;
	if (plen >= sizeof(path)) {
		reply(r, 404, "%s", help_text);
		return;
	}
	memcpy(path, target, plen);
	path[plen] = 0;

	if (strcmp(path, "/metrics") == 0) {
		if (!get) {
			not_allowed(r, "GET");
			return;
		}
		r->status = 200;
		r->type = "text/plain; version=0.0.4; charset=utf-8";
		metrics_render(seg, &r->body);
		return;
	}
	if (strcmp(path, "/") == 0 || strcmp(path, "/info") == 0 || strcmp(path, "/routes") == 0 ||
	    strcmp(path, "/upstreams") == 0) {
		if (!get) {
			not_allowed(r, "GET");
			return;
		}
		if (path[1] == 0)
			reply(r, 200, "%s", help_text);
		else if (path[1] == 'i')
			admin_info(seg, r);
		else if (path[1] == 'r')
			admin_routes(seg, r);
		else
			admin_upstreams(seg, r);
		return;
	}
	if (strncmp(path, "/upstreams/", 11) == 0) {
		if (strcmp(method, "POST") != 0) {
			not_allowed(r, "POST");
			return;
		}
		if (access == ADMIN_NEED_TOKEN) {
			reply(r, 401, "admin commands need \"Authorization: Bearer <stats.admin_token>\"\n");
			return;
		}
		if (access == ADMIN_NO_TOKEN) {
			/* any local process, a forged request from a co-located
			 * backend or a browser page can reach a TCP port: a file
			 * mode or a secret must say who may change routing */
			reply(r, 403, "admin commands over TCP need stats.admin_token (and \"Authorization: Bearer "
			              "<token>\"); without a token, use the unix socket (stats.unix), whose file mode "
			              "says who may connect\n");
			return;
		}
		if (!strchr(path + 11, '/'))
			admin_group_change(seg, path + 11, query, strlen(query), body, body_len, r);
		else
			admin_server_change(seg, path + 11, query, strlen(query), body, body_len, r);
		return;
	}
	reply(r, 404, "no such command: %s\n\n%s", path, help_text);
}
