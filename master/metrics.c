#include "master/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/x509.h>

#include "common/auth_conf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/tlscert.h"
#include "master/adaptive_conc.h"
#include "shm/route_match.h"
#include "shm/shm.h"

static void family(struct textbuf *o, const char *name, const char *type, const char *help);

/* The listener certificates of the configuration in force, as
 * metrics_set_certs() found them: the gauge is notAfter - now at scrape
 * time, so it falls as time passes and goes negative once expired. */
static struct metrics_cert {
	char listener[CONFIG_ADDR_STR_MAX];
	char file[1024];
	char subject[256];
	int64_t not_after; /* Unix time */
} metrics_certs[CONFIG_MAX_CERTS];
static int metrics_ncerts;

/* <t> as Unix time: its distance from the epoch, which ASN1_TIME_diff
 * computes exactly (there is no ASN1_TIME_to_posix in this BoringSSL). */
static int metrics_asn1_time(const ASN1_TIME *t, int64_t *out)
{
	ASN1_TIME *epoch = ASN1_TIME_set(NULL, 0);
	int days, secs, ok = epoch && ASN1_TIME_diff(&days, &secs, epoch, t);

	ASN1_TIME_free(epoch);
	if (ok)
		*out = (int64_t)days * 86400 + secs;
	return ok ? 0 : -1;
}

static void metrics_subject(X509 *leaf, char *buf, size_t cap)
{
	BIO *b = BIO_new(BIO_s_mem());
	const uint8_t *p;
	size_t n = 0;

	buf[0] = 0;
	if (b && X509_NAME_print_ex(b, X509_get_subject_name(leaf), 0, XN_FLAG_RFC2253) >= 0 &&
	    BIO_mem_contents(b, &p, &n)) {
		if (n >= cap)
			n = cap - 1;
		memcpy(buf, p, n);
		buf[n] = 0;
	}
	BIO_free(b);
}

void metrics_set_certs(const struct config *cfg)
{
	metrics_ncerts = 0;
	for (int l = 0; l < cfg->nlisteners; l++) {
		const struct config_listener *li = &cfg->listeners[l];

		for (int i = 0; li->tls && i < li->ncerts; i++) {
			const struct config_cert *c = &cfg->certs[li->first_cert + i];
			struct metrics_cert *mc = &metrics_certs[metrics_ncerts];

			if (!c->loaded || metrics_ncerts == CONFIG_MAX_CERTS ||
			    metrics_asn1_time(X509_get0_notAfter(c->loaded->leaf), &mc->not_after) < 0)
				continue;
			snprintf(mc->listener, sizeof(mc->listener), "%s", li->addr.text);
			snprintf(mc->file, sizeof(mc->file), "%s", c->cert);
			metrics_subject(c->loaded->leaf, mc->subject, sizeof(mc->subject));
			metrics_ncerts++;
		}
	}
}

static void render_certs(struct textbuf *o)
{
	int64_t now = (int64_t)time(NULL);

	if (!metrics_ncerts)
		return;
	family(o, "weir_tls_certificate_expiry_seconds", "gauge",
	       "Seconds until the notAfter of each listener certificate (negative once it has expired).");
	for (int i = 0; i < metrics_ncerts; i++) {
		textbuf_printf(o, "weir_tls_certificate_expiry_seconds{listener=\"");
		textbuf_label(o, metrics_certs[i].listener);
		textbuf_printf(o, "\",file=\"");
		textbuf_label(o, metrics_certs[i].file);
		textbuf_printf(o, "\",subject=\"");
		textbuf_label(o, metrics_certs[i].subject);
		textbuf_printf(o, "\"} %lld\n", (long long)(metrics_certs[i].not_after - now));
	}
}


const struct route_table *metrics_table(struct shm_segment *seg)
{
	return &seg->gens[atomic_load_explicit(&seg->gen_current, memory_order_acquire)];
}

static void family(struct textbuf *o, const char *name, const char *type, const char *help)
{
	textbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric(struct textbuf *o, const char *name, const char *type, const char *help, uint64_t v)
{
	family(o, name, type, help);
	textbuf_printf(o, "%s %llu\n", name, (unsigned long long)v);
}

/* The label values of the enums counted by kind, from their tables. */
static const char *const tunnel_end_labels[] = {
#define TUNNEL_END_LABEL(name, label) label,
	TUNNEL_END_TABLE(TUNNEL_END_LABEL)
#undef TUNNEL_END_LABEL
};
static const char *const h2_ws_refuse_labels[] = {
#define H2_WS_REFUSE_LABEL(name, label) label,
	H2_WS_REFUSE_TABLE(H2_WS_REFUSE_LABEL)
#undef H2_WS_REFUSE_LABEL
};
static const char *const tls_fail_labels[] = {
#define TLS_FAIL_LABEL(name, label) label,
	TLS_FAIL_TABLE(TLS_FAIL_LABEL)
#undef TLS_FAIL_LABEL
};

/* One series per value of <label>: name{label="values[k]"} counts[k]. */
static void by_label(struct textbuf *o, const char *name, const char *label, const char *const *values,
                     const uint64_t *counts, int n)
{
	/* a name may carry labels already: "name{a=\"b\"" */
	const char *open = strchr(name, '{') ? "," : "{";

	for (int k = 0; k < n; k++)
		textbuf_printf(o, "%s%s%s=\"%s\"} %llu\n", name, open, label, values[k], (unsigned long long)counts[k]);
}

/* Response compression (worker/core/compress.h). */
static void render_compress(struct textbuf *o, const struct shm_counters *c)
{
	static const char *const enc[] = {
#define COMPRESS_ENC_TEXT(name, text) text,
	    COMPRESS_ENC_TABLE(COMPRESS_ENC_TEXT)
#undef COMPRESS_ENC_TEXT
	};
	static const char *const skip[] = {
#define COMPRESS_SKIP_TEXT(name, text) text,
	    COMPRESS_SKIP_TABLE(COMPRESS_SKIP_TEXT)
#undef COMPRESS_SKIP_TEXT
	};

	family(o, "weir_compress_responses_total", "counter", "Responses compressed, by encoding.");
	by_label(o, "weir_compress_responses_total", "encoding", enc, c->compress_responses, COMPRESS_ENC_COUNT);
	family(o, "weir_compress_skipped_total", "counter",
	       "Responses on routes with compression sent as they came, by reason.");
	by_label(o, "weir_compress_skipped_total", "reason", skip, c->compress_skipped, COMPRESS_SKIP_COUNT);
	metric(o, "weir_compress_bytes_in_total", "counter", "Response body bytes given to the encoders.",
	       c->compress_bytes_in);
	metric(o, "weir_compress_bytes_out_total", "counter", "Compressed bytes the encoders made of them.",
	       c->compress_bytes_out);
	metric(o, "weir_compress_streams_active", "gauge", "Responses being compressed.", c->compress_streams);
	metric(o, "weir_compress_memory_bytes_in_use", "gauge", "Encoder state handed out of the workers' pools.",
	       c->compress_mem_in_use);
}

/* RFC 9113 7, in the order of the codes; the last: any other. */
static const char *const h2_code_labels[H2_CODES] = {
    "NO_ERROR",       "PROTOCOL_ERROR", "INTERNAL_ERROR",     "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",  "FRAME_SIZE_ERROR", "REFUSED_STREAM",  "CANCEL",             "COMPRESSION_ERROR",
    "CONNECT_ERROR",  "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED", "other"};

/* Handshakes completed, as resumed="false" and resumed="true". */
static void by_resumed(struct textbuf *o, const char *name, uint64_t total, uint64_t resumed)
{
	/* a worker may count between the two loads of a sum */
	textbuf_printf(o, "%s{resumed=\"false\"} %llu\n%s{resumed=\"true\"} %llu\n", name,
	               (unsigned long long)(total > resumed ? total - resumed : 0), name, (unsigned long long)resumed);
}

/*
 * Per slab size class, summed over the workers: weir_slab_class_bytes with
 * kind in_use, held, high_water (the sum of each worker's peak) and
 * unusable (held but of no use to any object: chunk headers and tails),
 * and fragmentation, unusable over held. Labels: the class index and its
 * object size; classes no worker has are left out.
 */
static void render_slab_classes(struct textbuf *o, struct shm_segment *seg, const struct shm_counters *c)
{
	static const char *const kinds[] = {"in_use", "held", "high_water", "unusable"};
	const uint64_t *v[] = {c->slab_class_in_use, c->slab_class_held, c->slab_class_high_water,
	                       c->slab_class_unusable};
	uint32_t sizes[SLAB_MAX_CLASSES];

	shm_slab_sizes(seg, sizes);
	family(o, "weir_slab_class_bytes", "gauge",
	       "Worker slab bytes per size class: in_use by objects, held (mapped), high_water (the most held, "
	       "summed over workers' peaks), unusable (held, of no use to any object).");
	for (int k = 0; k < SLAB_MAX_CLASSES; k++)
		for (int i = 0; sizes[k] && i < 4; i++)
			textbuf_printf(o, "weir_slab_class_bytes{class=\"%d\",size=\"%u\",kind=\"%s\"} %llu\n", k,
			               sizes[k], kinds[i], (unsigned long long)v[i][k]);
	family(o, "weir_slab_class_fragmentation_ratio", "gauge",
	       "Worker slab bytes held but unusable over bytes held, per size class.");
	for (int k = 0; k < SLAB_MAX_CLASSES; k++)
		if (sizes[k])
			textbuf_printf(o, "weir_slab_class_fragmentation_ratio{class=\"%d\",size=\"%u\"} %.6f\n", k,
			               sizes[k],
			               c->slab_class_held[k] ? (double)c->slab_class_unusable[k] / (double)c->slab_class_held[k]
			                                     : 0.0);
}

/* The labels of a route series, without braces: host="...",path="...". */
static void route_labels(struct textbuf *o, const struct route_table *t, const struct route_entry *e)
{
	char hb[CONFIG_HOST_MAX + 2];

	if (e->stat == STAT_ROUTE_OTHER) {
		/* parentheses cannot appear in a configured host or path */
		textbuf_printf(o, "host=\"(other)\",path=\"(other)\"");
		return;
	}
	textbuf_printf(o, "host=\"");
	textbuf_label(o, config_host_text(e->host_kind, route_host(t, e), hb, sizeof(hb)));
	textbuf_printf(o, "\",path=\"");
	textbuf_label(o, route_label(t, e)); /* the path, and a conditional route's conditions */
	textbuf_printf(o, "\"");
}

static void server_labels(struct textbuf *o, const struct route_upstream *u, const struct route_server *s)
{
	if (s->stat == STAT_SERVER_OTHER) {
		textbuf_printf(o, "upstream=\"(other)\",server=\"(other)\"");
		return;
	}
	textbuf_printf(o, "upstream=\"");
	textbuf_label(o, u->name);
	textbuf_printf(o, "\",server=\"");
	textbuf_label(o, s->text);
	textbuf_printf(o, "\"");
}

/* What one render works from, worked out once. */
struct render {
	struct shm_segment *seg;
	const struct route_table *t;
	struct shm_route_counters routes[STAT_ROUTES]; /* sums by stat index */
	struct shm_server_counters servers[STAT_SERVERS];
	/* entries of t to show: the first of each stat index, in table order
	 * (only "other" is shared by routes; servers also share one when an
	 * address is listed twice in a group) */
	uint8_t route_shown[CONFIG_MAX_ROUTES];
	uint8_t server_shown[CONFIG_MAX_SERVERS];
};

static void render_prepare(struct render *r)
{
	const struct route_table *t = r->t;
	uint8_t seen_r[STAT_ROUTES] = {0}, seen_s[STAT_SERVERS] = {0};

	for (uint32_t i = 0; i < t->nroutes; i++) {
		r->route_shown[i] = !seen_r[route_entries(t)[i].stat];
		seen_r[route_entries(t)[i].stat] = 1;
	}
	for (uint32_t i = 0; i < t->nservers; i++) {
		r->server_shown[i] = !seen_s[route_servers(t)[i].stat];
		seen_s[route_servers(t)[i].stat] = 1;
	}
}

static void histogram(struct textbuf *o, const char *name, const struct render *r, int upstream)
{
	for (uint32_t i = 0; i < r->t->nroutes; i++) {
		const struct route_entry *e = &route_entries(r->t)[i];
		const struct shm_route_counters *c = &r->routes[e->stat];
		const uint64_t *b = upstream ? c->upstream : c->duration;
		uint64_t cum = 0, sum_us = upstream ? c->upstream_us : c->duration_us;

		if (!r->route_shown[i])
			continue;
		for (unsigned k = 0; k < STAT_BUCKETS; k++) {
			cum += b[k];
			textbuf_printf(o, "%s_bucket{", name);
			route_labels(o, r->t, e);
			textbuf_printf(o, ",le=\"%s\"} %llu\n", stat_bucket_le(k), (unsigned long long)cum);
		}
		textbuf_printf(o, "%s_sum{", name);
		route_labels(o, r->t, e);
		textbuf_printf(o, "} %llu.%06llu\n%s_count{", (unsigned long long)(sum_us / 1000000),
		               (unsigned long long)(sum_us % 1000000), name);
		route_labels(o, r->t, e);
		textbuf_printf(o, "} %llu\n", (unsigned long long)cum);
	}
}

/* weir_auth_*: the routes that have an auth policy, every outcome shown
 * (zeros too) so that a rate over a reason exists before it happens. */
static void render_auth(struct textbuf *o, const struct render *r)
{
	static const char *const result[] = {
#define AUTH_R_RESULT(n, res, why) res,
	    AUTH_RESULTS(AUTH_R_RESULT)
#undef AUTH_R_RESULT
	};
	static const char *const reason[] = {
#define AUTH_R_REASON(n, res, why) why,
	    AUTH_RESULTS(AUTH_R_REASON)
#undef AUTH_R_REASON
	};
	const struct route_table *t = r->t;

	family(o, "weir_auth_total", "counter", "Authentication checks on routes with auth, by result and reason.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct shm_route_counters *c = &r->routes[route_entries(t)[i].stat];

		if (!r->route_shown[i] || !route_entries(t)[i].auth)
			continue;
		for (int k = 0; k < AUTH_R_COUNT; k++) {
			textbuf_printf(o, "weir_auth_total{");
			route_labels(o, t, &route_entries(t)[i]);
			textbuf_printf(o, ",result=\"%s\"", result[k]);
			if (reason[k][0])
				textbuf_printf(o, ",reason=\"%s\"", reason[k]);
			textbuf_printf(o, "} %llu\n", (unsigned long long)c->auth[k]);
		}
	}
	family(o, "weir_auth_cached_total", "counter",
	       "Credentials let through from a worker's cache of verified ones (JWT, Basic), by route.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		if (!r->route_shown[i] || !route_entries(t)[i].auth)
			continue;
		textbuf_printf(o, "weir_auth_cached_total{");
		route_labels(o, t, &route_entries(t)[i]);
		textbuf_printf(o, "} %llu\n", (unsigned long long)r->routes[route_entries(t)[i].stat].auth_cached);
	}
	family(o, "weir_auth_password_hashes_total", "counter",
	       "Password hashes computed for Basic authentication, by route.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		if (!r->route_shown[i] || route_entries(t)[i].auth != AUTH_BASIC)
			continue;
		textbuf_printf(o, "weir_auth_password_hashes_total{");
		route_labels(o, t, &route_entries(t)[i]);
		textbuf_printf(o, "} %llu\n", (unsigned long long)r->routes[route_entries(t)[i].stat].auth_hashes);
	}
}

/* routes.split: requests per side (by its place, named by the current
 * table's group), those drawn without a key and those forced. */
static void render_split(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;

	if (!t->nsplits)
		return;
	family(o, "weir_route_split_requests_total", "counter",
	       "Requests of a split route put on each side (once routed, before auth and rate limits), by route and "
	       "the side's upstream group.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct route_entry *e = &route_entries(t)[i];
		const struct route_split *s;

		if (!r->route_shown[i] || !e->split)
			continue;
		s = &route_splits(t)[e->split - 1];
		for (int k = 0; k < s->nsides; k++) {
			textbuf_printf(o, "weir_route_split_requests_total{");
			route_labels(o, t, e);
			textbuf_printf(o, ",upstream=\"%s\"} %llu\n", route_upstreams(t)[s->upstream[k]].name,
			               (unsigned long long)r->routes[e->stat].split[k]);
		}
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			family(o, "weir_route_split_overridden_total", "counter",
			       "Requests of a split route whose side split_override chose, by route.");
		else
			family(o, "weir_route_split_unkeyed_total", "counter",
			       "Requests of a split route without its split_key, drawn by weight, by route.");
		for (uint32_t i = 0; i < t->nroutes; i++) {
			const struct route_entry *e = &route_entries(t)[i];

			if (!r->route_shown[i] || !e->split)
				continue;
			textbuf_printf(o, pass ? "weir_route_split_overridden_total{" : "weir_route_split_unkeyed_total{");
			route_labels(o, t, e);
			textbuf_printf(o, "} %llu\n",
			               (unsigned long long)(pass ? r->routes[e->stat].split_override
			                                         : r->routes[e->stat].split_random));
		}
	}
}

/* routes.mirror: copies by how they ended (enum mirror_result). */
static void render_mirror(struct textbuf *o, const struct render *r)
{
	static const char *const result[] = {"sent", "failed", "dropped"};
	const struct route_table *t = r->t;
	int any = 0;

	for (uint32_t i = 0; i < t->nroutes && !any; i++)
		any = route_entries(t)[i].mirror != 0;
	if (!any)
		return;
	family(o, "weir_route_mirror_requests_total", "counter",
	       "Copies of a route's requests to its mirror group, by route and how they ended.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		const struct route_entry *e = &route_entries(t)[i];

		if (!r->route_shown[i] || !e->mirror)
			continue;
		for (int k = 0; k < 3; k++) {
			textbuf_printf(o, "weir_route_mirror_requests_total{");
			route_labels(o, t, e);
			textbuf_printf(o, ",upstream=\"%s\",result=\"%s\"} %llu\n", route_upstreams(t)[e->mirror - 1].name,
			               result[k], (unsigned long long)r->routes[e->stat].mirror[k]);
		}
	}
}

static void render_routes(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;
	const struct shm_route_counters *sums = r->routes;

	family(o, "weir_route_requests_total", "counter", "Requests routed, by configured route host and path.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		if (!r->route_shown[i])
			continue;
		textbuf_printf(o, "weir_route_requests_total{");
		route_labels(o, t, &route_entries(t)[i]);
		textbuf_printf(o, "} %llu\n", (unsigned long long)sums[route_entries(t)[i].stat].requests);
	}
	family(o, "weir_route_responses_total", "counter", "Responses to routed requests, by route and status class.");
	for (uint32_t i = 0; i < t->nroutes; i++) {
		if (!r->route_shown[i])
			continue;
		for (int k = 0; k < 5; k++) {
			textbuf_printf(o, "weir_route_responses_total{");
			route_labels(o, t, &route_entries(t)[i]);
			textbuf_printf(o, ",class=\"%dxx\"} %llu\n", k + 1,
			               (unsigned long long)sums[route_entries(t)[i].stat].responses[k]);
		}
	}
	family(o, "weir_route_request_duration_seconds", "histogram",
	       "Time from the first byte of a request to the end of its answer, by route.");
	histogram(o, "weir_route_request_duration_seconds", r, 0);
	family(o, "weir_route_upstream_response_seconds", "histogram",
	       "Time from handing a request to an upstream connection (connecting included) to the end of its "
	       "response, by route.");
	histogram(o, "weir_route_upstream_response_seconds", r, 1);
	render_auth(o, r);
	render_split(o, r);
	render_mirror(o, r);
}

static void render_servers(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;
	const struct shm_server_counters *sums = r->servers;

	static const struct {
		const char *name, *help;
		size_t off;
	} simple[] = {
	    {"weir_upstream_server_requests_total", "Requests sent to an upstream server, retries included.",
	     offsetof(struct shm_server_counters, requests)},
	    {"weir_upstream_server_connects_total", "Connections opened to an upstream server.",
	     offsetof(struct shm_server_counters, connects)},
	    {"weir_upstream_server_reuses_total", "Requests sent on a kept-alive connection to an upstream server.",
	     offsetof(struct shm_server_counters, reuses)},
	};

	for (size_t f = 0; f < sizeof(simple) / sizeof(simple[0]); f++) {
		family(o, simple[f].name, "counter", simple[f].help);
		for (uint32_t i = 0; i < t->nservers; i++) {
			const char *c = (const char *)&sums[route_servers(t)[i].stat];
			uint64_t v;

			if (!r->server_shown[i])
				continue;
			memcpy(&v, c + simple[f].off, sizeof(v));
			textbuf_printf(o, "%s{", simple[f].name);
			server_labels(o, &route_upstreams(t)[route_servers(t)[i].upstream], &route_servers(t)[i]);
			textbuf_printf(o, "} %llu\n", (unsigned long long)v);
		}
	}
	family(o, "weir_upstream_server_responses_total", "counter",
	       "Answers to requests sent to an upstream server, by status class (weir's own 502 and 504 included).");
	for (uint32_t i = 0; i < t->nservers; i++) {
		if (!r->server_shown[i])
			continue;
		for (int k = 0; k < 5; k++) {
			textbuf_printf(o, "weir_upstream_server_responses_total{");
			server_labels(o, &route_upstreams(t)[route_servers(t)[i].upstream], &route_servers(t)[i]);
			textbuf_printf(o, ",class=\"%dxx\"} %llu\n", k + 1,
			               (unsigned long long)sums[route_servers(t)[i].stat].responses[k]);
		}
	}
	family(o, "weir_upstream_server_weight", "gauge",
	       "Weight an upstream server is picked with: the configured one or an admin override.");
	for (uint32_t i = 0; i < t->nservers; i++) {
		uint32_t a = shm_admin(r->seg, route_servers(t)[i].stat);

		if (!r->server_shown[i])
			continue;
		textbuf_printf(o, "weir_upstream_server_weight{");
		server_labels(o, &route_upstreams(t)[route_servers(t)[i].upstream], &route_servers(t)[i]);
		textbuf_printf(o, "} %u\n", SHM_ADMIN_WEIGHT(a) ? SHM_ADMIN_WEIGHT(a) : route_servers(t)[i].weight);
	}
	family(o, "weir_upstream_server_admin_state", "gauge",
	       "1 for the admin state an upstream server is in (up, drain or down), 0 for the others.");
	for (uint32_t i = 0; i < t->nservers; i++) {
		uint32_t st = SHM_ADMIN_STATE(shm_admin(r->seg, route_servers(t)[i].stat));

		if (!r->server_shown[i])
			continue;
		for (uint32_t k = 0; k < 3; k++) {
			textbuf_printf(o, "weir_upstream_server_admin_state{");
			server_labels(o, &route_upstreams(t)[route_servers(t)[i].upstream], &route_servers(t)[i]);
			textbuf_printf(o, ",state=\"%s\"} %d\n", shm_admin_state_names[k], st == k);
		}
	}
}

const char *metrics_health_text(struct shm_segment *seg, uint16_t stat, char *buf, size_t cap)
{
	uint32_t w = atomic_load_explicit(&seg->health.word[stat], memory_order_relaxed);
	uint32_t res = HEALTH_RESULT(w) < HEALTH_RESULT_COUNT ? HEALTH_RESULT(w) : HEALTH_RESULT_NONE;
	int n = snprintf(buf, cap, "health=%s last_check=%s", health_state_names[HEALTH_STATE(w) < 3 ? HEALTH_STATE(w) : 0],
	                 health_result_names[res]);

	if (HEALTH_STATUS(w) && n > 0 && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, " last_status=%u", HEALTH_STATUS(w));
	return buf;
}

/* Servers with active checks only (a health word set): their state, and
 * their checks by result. */
static void render_health(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;
	const struct shm_health *h = &r->seg->health;

	family(o, "weir_upstream_health", "gauge",
	       "1 while an upstream server passes its active health checks, 0 while it is down by them.");
	for (uint32_t i = 0; i < t->nservers; i++) {
		uint16_t st = route_servers(t)[i].stat;
		uint32_t w = atomic_load_explicit(&h->word[st], memory_order_relaxed);

		if (!r->server_shown[i] || !w || st == STAT_SERVER_OTHER)
			continue;
		textbuf_printf(o, "weir_upstream_health{");
		server_labels(o, &route_upstreams(t)[route_servers(t)[i].upstream], &route_servers(t)[i]);
		textbuf_printf(o, "} %d\n", HEALTH_STATE(w) != HEALTH_DOWN);
	}
	family(o, "weir_health_checks_total", "counter", "Active health checks of an upstream server, by result.");
	for (uint32_t i = 0; i < t->nservers; i++) {
		uint16_t st = route_servers(t)[i].stat;

		if (!r->server_shown[i] || !atomic_load_explicit(&h->word[st], memory_order_relaxed) ||
		    st == STAT_SERVER_OTHER)
			continue;
		for (int k = HEALTH_RESULT_OK; k < HEALTH_RESULT_COUNT; k++) {
			textbuf_printf(o, "weir_health_checks_total{");
			server_labels(o, &route_upstreams(t)[route_servers(t)[i].upstream], &route_servers(t)[i]);
			textbuf_printf(o, ",result=\"%s\"} %llu\n", health_result_names[k],
			               (unsigned long long)atomic_load_explicit(&h->checks[st][k], memory_order_relaxed));
		}
	}
}

/* The outlier state of the servers of groups that have `outlier`
 * (shm/resil.h): node-wide already, read as they are. */
static void render_outlier(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;
	uint64_t now = resil_now_ms();
	static const char *const names[] = {"weir_upstream_server_ejections_total",
	                                    "weir_upstream_server_ejections_refused_total",
	                                    "weir_upstream_server_ejected"};
	static const char *const help[] = {
	    "Outlier ejections of an upstream server, by detector.",
	    "Ejections not made: max_ejection_percent reached, or the group's last usable server.",
	    "1 while an upstream server is ejected by outlier detection."};

	for (int f = 0; f < 3; f++) {
		family(o, names[f], f < 2 ? "counter" : "gauge", help[f]);
		for (uint32_t i = 0; i < t->nservers; i++) {
			const struct route_upstream *u = &route_upstreams(t)[route_servers(t)[i].upstream];
			const struct shm_resil_server *s = &r->seg->resil[route_servers(t)[i].stat];

			if (!r->server_shown[i] || !u->resil.outlier.on || route_servers(t)[i].stat == STAT_SERVER_OTHER)
				continue;
			for (int k = 0; k < (f ? 1 : RESIL_EJECT_COUNT); k++) {
				textbuf_printf(o, "%s{", names[f]);
				server_labels(o, u, &route_servers(t)[i]);
				if (f == 0)
					textbuf_printf(o, ",reason=\"%s\"} %llu\n", resil_eject_names[k],
					               (unsigned long long)atomic_load(&s->ejected_total[k]));
				else
					textbuf_printf(o, "} %llu\n",
					               (unsigned long long)(f == 1 ? atomic_load(&s->ejections_refused)
					                                           : (uint64_t)resil_ejected(s, now)));
			}
		}
	}
}

/* Requests in flight per server of groups on least_request (shm/balance.h):
 * node-wide already. */
static void render_balance(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;

	family(o, "weir_upstream_server_in_flight", "gauge",
	       "Requests in flight to an upstream server, node-wide (groups on least_request or with bounded_load).");
	for (uint32_t i = 0; i < t->nservers; i++) {
		const struct route_upstream *u = &route_upstreams(t)[route_servers(t)[i].upstream];
		uint16_t st = route_servers(t)[i].stat;

		if (!r->server_shown[i] || (u->balance != BALANCE_LEAST_REQUEST && !u->bounded_load) ||
		    st == STAT_SERVER_OTHER)
			continue;
		textbuf_printf(o, "weir_upstream_server_in_flight{");
		server_labels(o, u, &route_servers(t)[i]);
		textbuf_printf(o, "} %u\n", atomic_load_explicit(&r->seg->balance[st].inflight, memory_order_relaxed));
	}
}

/* Per-server caps (limits.max_requests_per_server): the places taken and
 * the picks that passed a full server by. */
static void render_server_limits(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;

	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			family(o, "weir_upstream_server_full_skips_total", "counter",
			       "Picks that passed an upstream server by because it was at its per-server cap.");
		else
			family(o, "weir_upstream_server_requests_active", "gauge",
			       "Requests in flight to an upstream server under its per-server cap, node-wide.");
		for (uint32_t i = 0; i < t->nservers; i++) {
			const struct route_upstream *u = &route_upstreams(t)[route_servers(t)[i].upstream];
			uint16_t st = route_servers(t)[i].stat;

			if (!r->server_shown[i] || !config_uplimits_server_cap(&u->resil.limits) || st == STAT_SERVER_OTHER)
				continue;
			textbuf_printf(o, pass ? "weir_upstream_server_full_skips_total{" : "weir_upstream_server_requests_active{");
			server_labels(o, u, &route_servers(t)[i]);
			if (pass)
				textbuf_printf(o, "} %llu\n", (unsigned long long)atomic_load_explicit(
				                                   &r->seg->resil[st].full_skips, memory_order_relaxed));
			else
				textbuf_printf(o, "} %u\n", atomic_load_explicit(&r->seg->resil[st].active, memory_order_relaxed));
		}
	}
}

/* The limits and breaker state of groups that have them (shm/resil.h). */
static void render_breakers(struct textbuf *o, const struct render *r)
{
	const struct route_table *t = r->t;
	static const char *const by[RESIL_REJECT_COUNT] = {"breaker_open", "upstream_limit", "queue_timeout"};

	family(o, "weir_upstream_breaker_state", "gauge", "1 for the state an upstream group's breaker is in.");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];
		uint32_t st;

		if (up->resil_group == RESIL_GROUP_NONE || !up->resil.breaker.on)
			continue;
		st = BREAKER_STATE(atomic_load(&r->seg->resil_groups.g[up->resil_group].state));
		for (uint32_t k = 0; k < 3; k++) {
			textbuf_printf(o, "weir_upstream_breaker_state{upstream=\"");
			textbuf_label(o, up->name);
			textbuf_printf(o, "\",state=\"%s\"} %d\n", breaker_state_names[k], st == k);
		}
	}
	family(o, "weir_upstream_breaker_transitions_total", "counter",
	       "Times an upstream group's breaker went into a state.");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (up->resil_group == RESIL_GROUP_NONE || !up->resil.breaker.on)
			continue;
		for (uint32_t k = 0; k < 3; k++) {
			textbuf_printf(o, "weir_upstream_breaker_transitions_total{upstream=\"");
			textbuf_label(o, up->name);
			textbuf_printf(o, "\",to=\"%s\"} %llu\n", breaker_state_names[k],
			               (unsigned long long)atomic_load(&r->seg->resil_groups.g[up->resil_group].transitions[k]));
		}
	}
	family(o, "weir_upstream_rejected_total", "counter",
	       "Requests an upstream group's breaker or limits refused (503), or sent to its backup group.");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (up->resil_group == RESIL_GROUP_NONE)
			continue;
		for (uint32_t k = 0; k < RESIL_REJECT_COUNT; k++) {
			textbuf_printf(o, "weir_upstream_rejected_total{upstream=\"");
			textbuf_label(o, up->name);
			textbuf_printf(o, "\",by=\"%s\"} %llu\n", by[k],
			               (unsigned long long)atomic_load(&r->seg->resil_groups.g[up->resil_group].rejected[k]));
		}
	}
	family(o, "weir_upstream_retries_by_result_total", "counter",
	       "Retry verdicts of an upstream group: attempted, succeeded (answered below 500 after a retry), or "
	       "not made (budget_exhausted, limit, attempts_exhausted, not_replayable).");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (up->resil_group == RESIL_GROUP_NONE || !up->resil.retry.on)
			continue;
		for (uint32_t k = 0; k < RETRY_RESULT_COUNT; k++) {
			textbuf_printf(o, "weir_upstream_retries_by_result_total{upstream=\"");
			textbuf_label(o, up->name);
			textbuf_printf(o, "\",result=\"%s\"} %llu\n", retry_result_names[k],
			               (unsigned long long)atomic_load(&r->seg->resil_groups.g[up->resil_group].retry_results[k]));
		}
	}
	family(o, "weir_upstream_retries_in_flight", "gauge", "Retries in flight to an upstream group, node-wide.");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (up->resil_group == RESIL_GROUP_NONE || !up->resil.retry.on)
			continue;
		textbuf_printf(o, "weir_upstream_retries_in_flight{upstream=\"");
		textbuf_label(o, up->name);
		textbuf_printf(o, "\"} %llu\n",
		               (unsigned long long)atomic_load(&r->seg->resil_groups.g[up->resil_group].retries));
	}
	family(o, "weir_upstream_queue_depth", "gauge",
	       "Requests waiting for a place under an upstream group's limits, node-wide.");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (up->resil_group == RESIL_GROUP_NONE || (!up->resil.limits.max_pending && !up->resil.adaptive.on))
			continue;
		textbuf_printf(o, "weir_upstream_queue_depth{upstream=\"");
		textbuf_label(o, up->name);
		textbuf_printf(o, "\"} %llu\n",
		               (unsigned long long)atomic_load(&r->seg->resil_groups.g[up->resil_group].pending));
	}
	family(o, "weir_upstream_requests_in_flight", "gauge",
	       "Requests in flight to an upstream group, node-wide (groups with limits or pool_percent).");
	for (uint32_t u = 0; u < t->nupstreams; u++) {
		const struct route_upstream *up = &route_upstreams(t)[u];

		if (up->resil_group == RESIL_GROUP_NONE)
			continue;
		textbuf_printf(o, "weir_upstream_requests_in_flight{upstream=\"");
		textbuf_label(o, up->name);
		textbuf_printf(o, "\"} %llu\n",
		               (unsigned long long)atomic_load(&r->seg->resil_groups.g[up->resil_group].active));
	}
}

void metrics_render(struct shm_segment *seg, struct textbuf *o)
{
	struct render *r = malloc(sizeof(*r)); /* 90 KiB: not for the stack */
	const struct route_table *t = metrics_table(seg);
	struct shm_counters c;
	if (!r) {
		o->failed = 1;
		return;
	}
	r->seg = seg;
	r->t = t;
	render_prepare(r);
	shm_sum(seg, &c);
	shm_sum_keys(seg, r->routes, r->servers);

	family(o, "weir_build_info", "gauge", "Always 1; the version of the running binary is its label.");
	textbuf_printf(o, "weir_build_info{version=\"");
	textbuf_label(o, WEIR_VERSION);
	textbuf_printf(o, "\"} 1\n");
	metric(o, "weir_start_time_seconds", "gauge",
	       "Unix time the shared segment was created (the first master started).", seg->started_at);
	metric(o, "weir_requests_total", "counter", "Requests whose head was read.", c.requests);
	family(o, "weir_responses_total", "counter", "Responses sent to clients, by status class.");
	for (int k = 1; k <= 5; k++)
		textbuf_printf(o, "weir_responses_total{class=\"%dxx\"} %llu\n", k, (unsigned long long)c.responses[k]);
	metric(o, "weir_client_bytes_received_total", "counter", "Bytes read from clients.", c.bytes_in);
	metric(o, "weir_client_bytes_sent_total", "counter", "Bytes written to clients.", c.bytes_out);
	metric(o, "weir_client_connections_total", "counter", "Client connections accepted.", c.conn_total);
	metric(o, "weir_client_connections_active", "gauge", "Client connections open.", c.conn_active);
	metric(o, "weir_upstream_connects_total", "counter", "Upstream connections opened.", c.upstream_connects);
	metric(o, "weir_upstream_reuses_total", "counter", "Requests sent on a kept-alive upstream connection.",
	       c.upstream_reuses);
	metric(o, "weir_upstream_retries_total", "counter", "Requests sent again after an upstream failure.",
	       c.upstream_retries);
	metric(o, "weir_upstream_pool_trimmed_total", "counter",
	       "Idle upstream connections past the group's keepalive closed at a worker's tick (a burst parked them).",
	       c.upstream_pool_trimmed);
	metric(o, "weir_upstream_replays_refused_total", "counter",
	       "Requests not sent again after their pooled connection closed: not idempotent and sent.",
	       c.upstream_replays_refused);
	metric(o, "weir_upstream_marked_down_total", "counter",
	       "Times a worker marked an upstream server down after max_fails connect failures in a row.",
	       c.upstream_marked_down);
	metric(o, "weir_upstream_panic_total", "counter",
	       "Servers picked with every server of their group marked down (tried anyway).", c.upstream_panics);
	metric(o, "weir_upstream_outlier_panic_total", "counter",
	       "Picks that ignored outlier ejections: fewer servers usable than panic_threshold.", c.outlier_panics);
	metric(o, "weir_upstream_hash_fallbacks_total", "counter",
	       "ring_hash and maglev picks for a request without its hash_key (hash_fallback used).", c.hash_fallbacks);
	metric(o, "weir_upstream_hash_skips_total", "counter",
	       "ring_hash and maglev: servers walked past on the way to a key's server, as not usable.", c.hash_skips);
	metric(o, "weir_upstream_hash_bounded_walks_total", "counter",
	       "ring_hash and maglev: servers walked past as over bounded_load times the mean in flight.",
	       c.hash_bounded_walks);
	metric(o, "weir_upstream_connections_active", "gauge", "Upstream connections open.", c.upstream_active);
	metric(o, "weir_tunnels_active", "gauge", "Upgraded tunnels (WebSocket) open.", c.tunnels_active);
	metric(o, "weir_tunnels_opened_total", "counter", "Upgrades switched to a tunnel (a 101 relayed).",
	       c.tunnels_opened);
	family(o, "weir_tunnel_bytes_total", "counter", "Bytes moved through tunnels, by direction.");
	textbuf_printf(o,
	               "weir_tunnel_bytes_total{direction=\"upstream\"} %llu\n"
	               "weir_tunnel_bytes_total{direction=\"client\"} %llu\n",
	               (unsigned long long)c.tunnel_bytes_up, (unsigned long long)c.tunnel_bytes_down);
	family(o, "weir_pipe_budget_stalls_total", "counter",
	       "Body spans a stream's pipe budget (limits.pipe_budget) held back: more was read than it lets wait "
	       "unwritten, by direction.");
	textbuf_printf(o,
	               "weir_pipe_budget_stalls_total{direction=\"upstream\"} %llu\n"
	               "weir_pipe_budget_stalls_total{direction=\"client\"} %llu\n",
	               (unsigned long long)c.pipe_stalls[0], (unsigned long long)c.pipe_stalls[1]);
	family(o, "weir_stream_buffers_total", "counter",
	       "Reads of a long body (kind: an upstream's response, a client's upload, a TLS origin's records "
	       "read ahead) and TLS writes of more than a record (tls_seal) that asked for a stream or seal "
	       "buffer (limits.stream_buffer): taken, or refused (limits.stream_buffers held already, or no "
	       "memory) and done with the I/O buffer or a record at a time.");
	for (int k = 0; k < STREAM_BUF_KINDS; k++)
		textbuf_printf(o,
		               "weir_stream_buffers_total{kind=\"%s\",result=\"taken\"} %llu\n"
		               "weir_stream_buffers_total{kind=\"%s\",result=\"refused\"} %llu\n",
		               stream_buf_kind_names[k], (unsigned long long)c.stream_buffers[k][0],
		               stream_buf_kind_names[k], (unsigned long long)c.stream_buffers[k][1]);
	family(o, "weir_tunnels_closed_total", "counter", "Tunnels ended, by what ended them.");
	by_label(o, "weir_tunnels_closed_total", "by", tunnel_end_labels, c.tunnels_closed, TUNNEL_END_COUNT);
	metric(o, "weir_h2_connections_total", "counter", "HTTP/2 client connections.", c.h2_sessions_total);
	metric(o, "weir_h2_streams_total", "counter", "HTTP/2 streams clients opened.", c.h2_streams_total);
	metric(o, "weir_h2_streams_active", "gauge", "HTTP/2 streams open, until their upstream work is torn down.",
	       c.h2_streams_active);
	metric(o, "weir_h2_stalls_total", "counter",
	       "Response writes refused because a client's flow-control window kept its stream's buffer full.",
	       c.h2_stalls);
	family(o, "weir_h2_data_bytes_total", "counter",
	       "Response DATA payload to HTTP/2 clients: sent from where it lay (plain connections, the client "
	       "keeping up) or copied into the connection's write buffer first.");
	textbuf_printf(o,
	               "weir_h2_data_bytes_total{how=\"in_place\"} %llu\n"
	               "weir_h2_data_bytes_total{how=\"copied\"} %llu\n",
	               (unsigned long long)c.h2_data_bytes[0], (unsigned long long)c.h2_data_bytes[1]);
	metric(o, "weir_h2_websocket_opened_total", "counter",
	       "WebSocket over HTTP/2 (RFC 8441): tunnels opened, the upstream's 101 checked and answered 200.",
	       c.h2_ws_opened);
	metric(o, "weir_h2_websocket_active", "gauge", "WebSocket-over-HTTP/2 tunnels open.", c.h2_ws_active);
	family(o, "weir_h2_websocket_refused_total", "counter",
	       "Extended CONNECTs refused, by reason: connect (no :protocol), protocol (not websocket), request "
	       "(pseudo-headers or version), bad_accept (the upstream's 101).");
	by_label(o, "weir_h2_websocket_refused_total", "reason", h2_ws_refuse_labels, c.h2_ws_refused,
	         H2_WS_REFUSE_COUNT);
	family(o, "weir_h2_streams_per_connection", "histogram", "HTTP/2 client connections closed, by the streams each carried.");
	{
		static const uint32_t bound[H2_SPC_BUCKETS - 1] = H2_SPC_BOUNDS;
		uint64_t cum = 0;

		for (int b = 0; b < H2_SPC_BUCKETS; b++) {
			cum += c.h2_spc[b];
			if (b < H2_SPC_BUCKETS - 1)
				textbuf_printf(o, "weir_h2_streams_per_connection_bucket{le=\"%u\"} %llu\n", bound[b],
				               (unsigned long long)cum);
			else
				textbuf_printf(o, "weir_h2_streams_per_connection_bucket{le=\"+Inf\"} %llu\n",
				               (unsigned long long)cum);
		}
		textbuf_printf(o, "weir_h2_streams_per_connection_sum %llu\nweir_h2_streams_per_connection_count %llu\n",
		               (unsigned long long)c.h2_spc_sum, (unsigned long long)cum);
	}
	family(o, "weir_h2_resets_total", "counter", "HTTP/2 RST_STREAM frames, by direction and error code.");
	by_label(o, "weir_h2_resets_total{direction=\"received\"", "code", h2_code_labels, c.h2_rst_recv, H2_CODES);
	by_label(o, "weir_h2_resets_total{direction=\"sent\"", "code", h2_code_labels, c.h2_rst_sent, H2_CODES);
	family(o, "weir_h2_goaways_total", "counter", "HTTP/2 GOAWAY frames sent, by error code (the reason).");
	by_label(o, "weir_h2_goaways_total", "code", h2_code_labels, c.h2_goaway_sent, H2_CODES);
	metric(o, "weir_h2_upstream_sessions_total", "counter", "HTTP/2 sessions opened to upstream servers.",
	       c.h2up_sessions_total);
	metric(o, "weir_h2_upstream_sessions_active", "gauge", "HTTP/2 sessions to upstream servers open.",
	       c.h2up_sessions_active);
	metric(o, "weir_h2_upstream_streams_total", "counter", "HTTP/2 streams opened to upstream servers.",
	       c.h2up_streams_total);
	metric(o, "weir_h2_upstream_streams_active", "gauge", "HTTP/2 streams to upstream servers open.",
	       c.h2up_streams_active);
	family(o, "weir_h2_upstream_resets_total", "counter",
	       "HTTP/2 RST_STREAM frames on sessions to upstreams, by direction and error code.");
	by_label(o, "weir_h2_upstream_resets_total{direction=\"received\"", "code", h2_code_labels, c.h2up_rst_recv,
	         H2_CODES);
	by_label(o, "weir_h2_upstream_resets_total{direction=\"sent\"", "code", h2_code_labels, c.h2up_rst_sent,
	         H2_CODES);
	family(o, "weir_h2_upstream_goaways_total", "counter", "HTTP/2 GOAWAY frames received from upstreams, by error code.");
	by_label(o, "weir_h2_upstream_goaways_total", "code", h2_code_labels, c.h2up_goaway_recv, H2_CODES);
	family(o, "weir_log_dropped_total", "counter",
	       "Log lines not written: repeats held back per call site (reported as \"N more like this\"), and lines "
	       "dropped because the log's reader (a pipe, journald) did not keep up.");
	textbuf_printf(o, "weir_log_dropped_total{log=\"error\",reason=\"throttled\"} %llu\n",
	               (unsigned long long)c.log_dropped[LOG_DROP_THROTTLED]);
	textbuf_printf(o, "weir_log_dropped_total{log=\"error\",reason=\"blocked\"} %llu\n",
	               (unsigned long long)c.log_dropped[LOG_DROP_ERROR]);
	textbuf_printf(o, "weir_log_dropped_total{log=\"access\",reason=\"blocked\"} %llu\n",
	               (unsigned long long)c.log_dropped[LOG_DROP_ACCESS]);
	family(o, "weir_errors_total", "counter", "Failures, by kind.");
	for (int e = 1; e < WEIR_ERR_COUNT; e++) /* entry 0 is AGAIN, not a failure */
		textbuf_printf(o, "weir_errors_total{kind=\"%s\"} %llu\n", weir_err_counter(-e - 1),
		               (unsigned long long)c.errors[e]);
	family(o, "weir_tls_handshakes_total", "counter",
	       "TLS handshakes completed, by whether they resumed a session (a ticket).");
	by_resumed(o, "weir_tls_handshakes_total", c.tls_handshakes, c.tls_resumed);
	metric(o, "weir_tls_tickets_total", "counter",
	       "Session tickets sealed for clients (tls.session_tickets after each TLS 1.3 handshake).", c.tls_tickets);
	family(o, "weir_tls_handshake_failures_total", "counter", "Client TLS handshakes that failed, by reason.");
	by_label(o, "weir_tls_handshake_failures_total", "reason", tls_fail_labels, c.tls_failures, TLS_FAIL_COUNT);
	family(o, "weir_upstream_tls_handshakes_total", "counter",
	       "TLS handshakes with upstream servers completed, by whether they resumed a session.");
	by_resumed(o, "weir_upstream_tls_handshakes_total", c.upstream_tls_handshakes, c.upstream_tls_resumed);
	metric(o, "weir_slab_bytes_in_use", "gauge", "Worker slab bytes handed out.", c.slab_in_use);
	metric(o, "weir_slab_bytes_free", "gauge", "Worker slab bytes mapped and free.", c.slab_free);
	render_slab_classes(o, seg, &c);
	metric(o, "weir_tls_memory_bytes_in_use", "gauge",
	       "Workers' BoringSSL memory handed out (TLS state, kept out of core dumps).", c.tls_mem_in_use);
	metric(o, "weir_tls_memory_bytes_held", "gauge",
	       "Workers' BoringSSL memory in blocks, in use or free for reuse (kept, not given back).",
	       c.tls_mem_held);
	metric(o, "weir_h2_memory_bytes_in_use", "gauge",
	       "Workers' libnghttp2 memory handed out (HTTP/2 session and stream state).", c.h2_mem_in_use);
	metric(o, "weir_h2_memory_bytes_held", "gauge",
	       "Workers' libnghttp2 memory in blocks, in use or free for reuse (kept, not given back).", c.h2_mem_held);
	render_compress(o, &c);
	metric(o, "weir_workers_alive", "gauge", "Worker processes running.", (uint64_t)shm_workers_alive(seg));
	metric(o, "weir_worker_restarts_total", "counter", "Workers replaced after an unexpected exit.",
	       atomic_load(&seg->worker_restarts));
	family(o, "weir_reloads_total", "counter", "Configuration reloads, by result.");
	textbuf_printf(o, "weir_reloads_total{result=\"ok\"} %llu\nweir_reloads_total{result=\"failed\"} %llu\n",
	               (unsigned long long)atomic_load(&seg->reloads_ok),
	               (unsigned long long)atomic_load(&seg->reloads_failed));
	metric(o, "weir_reloads_deferred_total", "counter",
	       "Reloads that waited for a draining worker to give back a route generation; each is counted in "
	       "weir_reloads_total once it runs.",
	       atomic_load(&seg->reloads_deferred));
	metric(o, "weir_config_generation", "gauge", "Configuration generation: 1 at start, one more per reload.",
	       atomic_load(&seg->config_generation));
	metric(o, "weir_routes_generation", "gauge", "Id of the route table workers take for new requests.", t->id);
	render_certs(o);
	metrics_render_limits(o);
	render_routes(o, r);
	render_servers(o, r);
	render_health(o, r);
	render_outlier(o, r);
	render_balance(o, r);
	render_breakers(o, r);
	render_server_limits(o, r);
	adaptive_conc_render(o, seg, metrics_table(seg));
	free(r);
}
