#include "common/config_dump.h"

#include <arpa/inet.h>
#include <http_parser.h> /* HTTP_METHOD_MAP */
#include <inttypes.h>
#include <string.h>

#include "common/config_keys.h"
#include "common/config_match.h"

const char *config_dump_duration(uint32_t ms, char *buf, size_t cap)
{
	static const struct {
		uint32_t ms;
		const char *unit;
	} units[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}};

	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (ms && ms % units[i].ms == 0) {
			snprintf(buf, cap, "%" PRIu32 "%s", ms / units[i].ms, units[i].unit);
			return buf;
		}
	snprintf(buf, cap, "%" PRIu32 "ms", ms);
	return buf;
}

const char *config_dump_size(uint64_t bytes, char *buf, size_t cap)
{
	static const struct {
		uint64_t bytes;
		const char *unit;
	} units[] = {{1ull << 30, "g"}, {1ull << 20, "m"}, {1ull << 10, "k"}};

	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (bytes && bytes % units[i].bytes == 0) {
			snprintf(buf, cap, "%" PRIu64 "%s", bytes / units[i].bytes, units[i].unit);
			return buf;
		}
	snprintf(buf, cap, "%" PRIu64, bytes);
	return buf;
}

/* <s> as a libconfig string literal: quotes, backslashes and control
 * characters escaped, so any path reads back as it was. */
static void dump_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(out, "\\x%02x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static const char *dump_bool(int v)
{
	return v ? "true" : "false";
}

static uint64_t dump_number(const struct config_key *k, const void *base)
{
	const void *f = (const char *)base + k->offset;
	uint64_t v;
	uint32_t v32;

	if (k->size == sizeof v) {
		memcpy(&v, f, sizeof v);
		return v;
	}
	memcpy(&v32, f, sizeof v32);
	return v32;
}

/* Is STRING or ADDR key <k> set in <base>: not "", an address given? */
static int dump_is_set(const struct config_key *k, const void *base)
{
	const char *f = (const char *)base + k->offset;

	if (k->type == CONFIG_KEY_ADDR)
		return ((const struct config_addr *)(const void *)f)->len != 0;
	return k->size && f[0];
}

/*
 * The scalar keys of <ks> in the struct at <base>, in the table's order:
 * one a line after <indent>, or all on the current line ("k = v; ") when
 * <indent> is NULL. GROUP and LIST keys are the caller's.
 */
static void dump_keys(FILE *out, const struct config *cfg, const struct config_keyset *ks, const void *base,
                      const char *indent)
{
	for (int i = 0; i < ks->nkeys; i++) {
		const struct config_key *k = &ks->keys[i];
		const struct config_key *need = k->needs ? config_keys_find(ks, k->needs) : NULL;
		uint64_t v = 0;
		char buf[CONFIG_HOST_MAX + 32];

		if (k->type == CONFIG_KEY_GROUP || k->type == CONFIG_KEY_LIST || k->type == CONFIG_KEY_STRINGS)
			continue;
		if (((k->flags & (CONFIG_KEY_OPTIONAL | CONFIG_KEY_SECRET)) && !dump_is_set(k, base)) ||
		    (need && !dump_is_set(need, base)))
			continue;
		if (k->type == CONFIG_KEY_STRING && k->show && !k->show(cfg, base, buf, sizeof buf))
			continue; /* a key shown by hand that is not set (a route's upstream beside a return) */
		if (k->flags & CONFIG_KEY_SECRET) {
			fprintf(out, "%s# %s is set: masked by weir -T\n", indent ? indent : "", k->name);
			continue;
		}
		fprintf(out, "%s%s = ", indent ? indent : "", k->name);
		if (k->size && k->type != CONFIG_KEY_STRING && k->type != CONFIG_KEY_ADDR)
			v = dump_number(k, base);
		switch (k->type) {
		case CONFIG_KEY_DURATION_OFF:
			if (!v) {
				fputs("\"off\"", out);
				break;
			}
			/* fall through */
		case CONFIG_KEY_DURATION:
			fprintf(out, "\"%s\"", config_dump_duration((uint32_t)v, buf, sizeof buf));
			break;
		case CONFIG_KEY_SIZE:
			fprintf(out, "\"%s\"", config_dump_size(v, buf, sizeof buf));
			break;
		case CONFIG_KEY_INT:
			fprintf(out, "%d", (int)(uint32_t)v);
			break;
		case CONFIG_KEY_BOOL:
			fputs(dump_bool((int)v), out);
			break;
		case CONFIG_KEY_ENUM: {
			const char *name = (int)v < k->nnames && k->names[v] ? k->names[v] : "";

			/* worker_cpu_affinity's false and true are booleans in a file */
			if (strcmp(name, "true") == 0 || strcmp(name, "false") == 0)
				fputs(name, out);
			else
				dump_str(out, name);
			break;
		}
		case CONFIG_KEY_ADDR:
			dump_str(out, ((const struct config_addr *)(const void *)((const char *)base + k->offset))->text);
			break;
		default:
			dump_str(out, k->show ? k->show(cfg, base, buf, sizeof buf) : (const char *)base + k->offset);
			break;
		}
		fputs(indent ? ";\n" : "; ", out);
	}
}

void config_dump_string(FILE *out, const char *s)
{
	dump_str(out, s);
}

void config_dump_keys(FILE *out, const struct config *cfg, const struct config_keyset *ks, const void *base,
                      const char *indent)
{
	dump_keys(out, cfg, ks, base, indent);
}

/* "name = {\n" the keys "};\n" */
static void dump_group(FILE *out, const struct config *cfg, const char *name, const struct config_keyset *ks,
                       const void *base)
{
	fprintf(out, "%s = {\n", name);
	dump_keys(out, cfg, ks, base, "\t");
	fputs("};\n", out);
}

static void dump_stats(FILE *out, const struct config *cfg)
{
	if (!cfg->has_stats && !cfg->stats_unix[0]) {
		fputs("# stats: none (no stats block)\n", out);
		return;
	}
	dump_group(out, cfg, "stats", &config_keys_stats, cfg);
}

static void dump_listener_tls(FILE *out, const struct config *cfg, const struct config_listener *l)
{
	fputs("\t\ttls = {\n\t\t\tcertificates = (\n", out);
	for (int c = 0; c < l->ncerts; c++) {
		fputs("\t\t\t\t{ ", out);
		dump_keys(out, cfg, &config_keys_cert, &cfg->certs[l->first_cert + c], NULL);
		fprintf(out, "}%s\n", c + 1 < l->ncerts ? "," : "");
	}
	fputs("\t\t\t);\n", out);
	dump_keys(out, cfg, &config_keys_listener_tls, l, "\t\t\t");
	fputs("\t\t};\n", out);
}

static void dump_listeners(FILE *out, const struct config *cfg)
{
	fputs("listeners = (\n", out);
	for (int i = 0; i < cfg->nlisteners; i++) {
		const struct config_listener *l = &cfg->listeners[i];

		fputs("\t{\n", out);
		dump_keys(out, cfg, &config_keys_listener, l, "\t\t");
		if (l->tls)
			dump_listener_tls(out, cfg, l);
		fprintf(out, "\t}%s\n", i + 1 < cfg->nlisteners ? "," : "");
	}
	fputs(");\n", out);
}

/* timeouts = { ... }; limits = { ... }; of an upstream or route: only the
 * keys it gives (the rest it inherits), each after <lead> and before <end>. */
static void dump_overrides(FILE *out, const struct config *cfg, const struct config_overrides *o,
                           const struct config_keyset *tks, const struct config_keyset *lks, const char *lead,
                           const char *end)
{
	const struct config_keyset *ks[2] = {tks, lks};
	const void *base[2] = {&o->timeouts, &o->limits};
	uint32_t set[2] = {o->timeouts_set, o->limits_set};

	for (int g = 0; g < 2; g++) {
		struct config_key keys[32];
		struct config_keyset only = *ks[g];
		int n = 0;

		for (int i = 0; i < ks[g]->nkeys && i < 32; i++)
			if (set[g] >> i & 1)
				keys[n++] = ks[g]->keys[i];
		if (!n)
			continue;
		only.keys = keys;
		only.nkeys = n;
		fprintf(out, "%s%s = { ", lead, strrchr(ks[g]->path, '.') + 1);
		dump_keys(out, cfg, &only, base[g], NULL);
		fprintf(out, "};%s", end);
	}
}

static void dump_health(FILE *out, const struct config *cfg, const struct config_health *h)
{
	fputs("\t\thealth = {\n", out);
	dump_keys(out, cfg, &config_keys_upstream_health, h, "\t\t\t");
	/* expect is a list of strings, read and written by hand */
	fputs("\t\t\texpect = [", out);
	for (int i = 0; i < h->nexpect; i++) {
		if (h->expect[i][0] == h->expect[i][1])
			fprintf(out, "%s\"%u\"", i ? ", " : " ", h->expect[i][0]);
		else
			fprintf(out, "%s\"%u-%u\"", i ? ", " : " ", h->expect[i][0], h->expect[i][1]);
	}
	fputs(" ];\n\t\t};\n", out);
}

static void dump_upstreams(FILE *out, const struct config *cfg)
{
	fputs("upstreams = (\n", out);
	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *u = &cfg->upstreams[i];

		fputs("\t{\n", out);
		dump_keys(out, cfg, &config_keys_upstream, u, "\t\t");
		if (u->tls) {
			fputs("\t\ttls = {\n", out);
			dump_keys(out, cfg, &config_keys_upstream_tls, u, "\t\t\t");
			fputs("\t\t};\n", out);
		}
		dump_overrides(out, cfg, &u->over, &config_keys_upstream_timeouts, &config_keys_upstream_request_limits, "\t\t",
		               "\n");
		if (u->resil.outlier.on) {
			fputs("\t\toutlier = {\n", out);
			dump_keys(out, cfg, &config_keys_upstream_outlier, &u->resil.outlier, "\t\t\t");
			fputs("\t\t};\n", out);
		}
		if (u->resil.limits.on) {
			fputs("\t\tlimits = {\n", out);
			dump_keys(out, cfg, &config_keys_upstream_limits, &u->resil.limits, "\t\t\t");
			fputs("\t\t};\n", out);
		}
		if (u->resil.breaker.on) {
			fputs("\t\tbreaker = {\n", out);
			dump_keys(out, cfg, &config_keys_upstream_breaker, &u->resil.breaker, "\t\t\t");
			fputs("\t\t};\n", out);
		}
		if (u->resil.adaptive.on) {
			fputs("\t\tadaptive_concurrency = {\n", out);
			dump_keys(out, cfg, &config_keys_upstream_adaptive_conc, &u->resil.adaptive, "\t\t\t");
			fputs("\t\t};\n", out);
		}
		if (u->resil.retry.on) {
			fprintf(out, "\t\tretry = {\n\t\t\ton = [ %s ];\n", u->resil.retry.when_text);
			dump_keys(out, cfg, &config_keys_upstream_retry, &u->resil.retry, "\t\t\t");
			fputs("\t\t};\n", out);
		}
		if (u->health.type)
			dump_health(out, cfg, &u->health);
		if (u->hdr.nreq + u->hdr.nresp) {
			fputs("\t\t", out);
			config_hdrrules_dump(out, cfg, &u->hdr, NULL);
			fputs("\n", out);
		}
		fputs("\t\tservers = (\n", out);
		for (int s = 0; s < u->nservers; s++) {
			fputs("\t\t\t{ ", out);
			dump_keys(out, cfg, &config_keys_server, &cfg->servers[u->first_server + s], NULL);
			fprintf(out, "}%s\n", s + 1 < u->nservers ? "," : "");
		}
		fprintf(out, "\t\t);\n\t}%s\n", i + 1 < cfg->nupstreams ? "," : "");
	}
	fputs(");\n", out);
}

/* A route's matching keys (common/config_match.h), written back. */
static void dump_match(FILE *out, const struct config_match *m)
{
	static const char *const ops[] = {"exact", "prefix", "regex"};

	if (!m)
		return;
	if (m->methods) {
		int first = 1;

		fputs("methods = [", out);
#define XX(num, name, string)                                                                                         \
	if (m->methods & (uint64_t)1 << num) {                                                                         \
		fprintf(out, "%s\"%s\"", first ? " " : ", ", #string);                                               \
		first = 0;                                                                                             \
	}
		HTTP_METHOD_MAP(XX)
#undef XX
		fputs(" ]; ", out);
	}
	for (int w = MATCH_HEADER; w <= MATCH_QUERY; w++) {
		int first = 1;

		for (int i = 0; i < m->ncond; i++) {
			const struct config_match_cond *c = &m->cond[i];

			if (c->where != w)
				continue;
			fprintf(out, "%s{ name = ", first ? (w == MATCH_HEADER ? "match_headers = ( " : "match_query = ( ")
			                                  : ", ");
			config_dump_string(out, c->name);
			if (c->op == MATCH_PRESENT || c->op == MATCH_ABSENT) {
				fprintf(out, "; present = %s; }", c->op == MATCH_PRESENT ? "true" : "false");
			} else {
				fprintf(out, "; %s = ", ops[c->op]);
				config_dump_string(out, c->value);
				fputs("; }", out);
			}
			first = 0;
		}
		if (!first)
			fputs(" ); ", out);
	}
	if (m->rw_regex[0]) {
		fputs("rewrite = { regex = ", out);
		config_dump_string(out, m->rw_regex);
		fputs("; replace = ", out);
		config_dump_string(out, m->rw_replace);
		fputs("; }; ", out);
	}
}

static void dump_routes(FILE *out, const struct config *cfg)
{
	fputs("routes = (\n", out);
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_route *r = &cfg->routes[i];

		fputs("\t{ ", out);
		dump_keys(out, cfg, &config_keys_route, r, NULL);
		dump_overrides(out, cfg, &r->over, &config_keys_route_timeouts, &config_keys_route_limits, "", " ");
		/* upgrade is a list of strings, read and written by hand */
		fputs("upgrade = [", out);
		for (const char *p = r->upgrade; *p;) {
			size_t n = strcspn(p, " ");
			/* tokens: nothing in them needs escaping */
			fprintf(out, "%s\"%.*s\"", p == r->upgrade ? " " : ", ", (int)n, p);
			p += n + (p[n] == ' ');
		}
		fprintf(out, "%s];", r->upgrade[0] ? " " : "");
		if (r->nrate_limits) {
			fputs(" rate_limits = [", out);
			for (int k = 0; k < r->nrate_limits; k++)
				fprintf(out, "%s\"%s\"", k ? ", " : " ", cfg->rate_limits[r->rate_limits[k]].name);
			fputs(" ];", out);
		}
		fputs(" ", out);
		if (r->ret >= 0) {
			fputs("return = { ", out);
			dump_keys(out, cfg, &config_keys_route_return, &cfg->returns[r->ret], NULL);
			fputs("}; ", out);
		}
		if (r->auth)
			config_auth_dump(out, cfg, r->auth);
		if (r->compress)
			config_compress_dump(out, cfg, r->compress, 0);
		dump_match(out, r->match);
		config_hdrrules_dump(out, cfg, &r->hdr,
		                     r->upstream >= 0 && !r->split ? &cfg->upstreams[r->upstream].hdr : NULL);
		config_split_dump(out, cfg, r);
		fprintf(out, "}%s\n", i + 1 < cfg->nroutes ? "," : "");
	}
	fputs(");\n", out);
}

static void dump_rate_limits(FILE *out, const struct config *cfg)
{
	if (!cfg->nrate_limits)
		return;
	fputs("rate_limits = (\n", out);
	for (int i = 0; i < cfg->nrate_limits; i++) {
		fputs("\t{ ", out);
		dump_keys(out, cfg, &config_keys_rate_limit, &cfg->rate_limits[i], NULL);
		if (cfg->rate_limits[i].adaptive.on) {
			fputs("adaptive = { ", out);
			dump_keys(out, cfg, &config_keys_rate_limit_adaptive, &cfg->rate_limits[i], NULL);
			fputs("}; ", out);
		}
		fprintf(out, "}%s\n", i + 1 < cfg->nrate_limits ? "," : "");
	}
	fputs(");\n\n", out);
}

int config_dump(FILE *out, const struct config *cfg)
{
	fputs("# weir -T: the configuration in force", out);
	if (cfg->file) {
		fputs(" as loaded from ", out);
		dump_str(out, cfg->file);
	}
	fputs(",\n# every default filled in and secrets masked. `weir -t` accepts it.\n\n", out);
	dump_keys(out, cfg, &config_keys_top, cfg, "");
	if (cfg->ntrusted) {
		fputs("trusted_proxies = [", out);
		for (int i = 0; i < cfg->ntrusted; i++) {
			char a[INET6_ADDRSTRLEN];
			const struct policy_cidr *c = &cfg->trusted[i];

			inet_ntop(c->v6 ? AF_INET6 : AF_INET, c->addr, a, sizeof a);
			fprintf(out, "%s\"%s/%u\"", i ? ", " : " ", a, c->bits);
		}
		fputs(" ];\n", out);
	}
	fputc('\n', out);
	dump_group(out, cfg, "log", &config_keys_log, &cfg->log);
	fputc('\n', out);
	dump_stats(out, cfg);
	fputc('\n', out);
	dump_listeners(out, cfg);
	fputc('\n', out);
	dump_upstreams(out, cfg);
	fputc('\n', out);
	if (cfg->has_redis) {
		dump_group(out, cfg, "redis", &config_keys_redis, cfg);
		fputc('\n', out);
	}
	dump_rate_limits(out, cfg);
	dump_routes(out, cfg);
	fputc('\n', out);
	dump_group(out, cfg, "timeouts", &config_keys_timeouts, &cfg->timeouts);
	fputc('\n', out);
	dump_group(out, cfg, "http2", &config_keys_http2, &cfg->http2);
	fputc('\n', out);
	dump_group(out, cfg, "limits", &config_keys_limits, &cfg->limits);
	if (cfg->compress.line) {
		fputc('\n', out);
		config_compress_dump(out, cfg, &cfg->compress, 1);
	}
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
