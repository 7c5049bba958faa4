#include "common/config_dump.h"

#include <inttypes.h>
#include <string.h>

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

static void dump_kv_str(FILE *out, const char *indent, const char *key, const char *v)
{
	fprintf(out, "%s%s = ", indent, key);
	dump_str(out, v);
	fputs(";\n", out);
}

static const char *dump_bool(int v)
{
	return v ? "true" : "false";
}

static void dump_stats(FILE *out, const struct config *cfg)
{
	if (!cfg->has_stats && !cfg->stats_unix[0]) {
		fputs("# stats: none (no stats block)\n", out);
		return;
	}
	fputs("stats = {\n", out);
	if (cfg->has_stats)
		dump_kv_str(out, "\t", "listen", cfg->stats.text);
	if (cfg->stats_unix[0]) {
		dump_kv_str(out, "\t", "unix", cfg->stats_unix);
		fprintf(out, "\tmode = \"%04o\";\n", cfg->stats_mode);
	}
	fprintf(out, "\tallow_remote = %s;\n", dump_bool(cfg->stats_allow_remote));
	if (cfg->stats_admin_token[0])
		fputs("\t# admin_token is set: masked by weir -T\n", out);
	fputs("};\n", out);
}

static void dump_listener_tls(FILE *out, const struct config *cfg, const struct config_listener *l)
{
	fputs("\t\ttls = {\n\t\t\tcertificates = (\n", out);
	for (int c = 0; c < l->ncerts; c++) {
		const struct config_cert *ce = &cfg->certs[l->first_cert + c];

		fputs("\t\t\t\t{ cert = ", out);
		dump_str(out, ce->cert);
		fputs("; key = ", out);
		dump_str(out, ce->key);
		fputs(";", out);
		if (ce->ocsp[0]) {
			fputs(" ocsp = ", out);
			dump_str(out, ce->ocsp);
			fputs(";", out);
		}
		fprintf(out, " }%s\n", c + 1 < l->ncerts ? "," : "");
	}
	fputs("\t\t\t);\n", out);
	if (l->client_ca[0]) {
		dump_kv_str(out, "\t\t\t", "client_ca", l->client_ca);
		dump_kv_str(out, "\t\t\t", "client_verify",
		            l->client_verify == CONFIG_CLIENT_VERIFY_OPTIONAL ? "optional" : "required");
		if (l->client_header[0])
			dump_kv_str(out, "\t\t\t", "client_header", l->client_header);
	}
	fprintf(out, "\t\t\tearly_data = %s;\n\t\t};\n", dump_bool(l->early_data));
}

static void dump_listeners(FILE *out, const struct config *cfg)
{
	fputs("listeners = (\n", out);
	for (int i = 0; i < cfg->nlisteners; i++) {
		const struct config_listener *l = &cfg->listeners[i];

		fputs("\t{\n", out);
		dump_kv_str(out, "\t\t", "address", l->addr.text);
		fprintf(out, "\t\tbacklog = %d;\n", l->backlog);
		fprintf(out, "\t\tproxy_protocol = %s;\n", dump_bool(l->proxy_protocol));
		if (l->tls)
			dump_listener_tls(out, cfg, l);
		fprintf(out, "\t}%s\n", i + 1 < cfg->nlisteners ? "," : "");
	}
	fputs(");\n", out);
}

static void dump_upstreams(FILE *out, const struct config *cfg)
{
	fputs("upstreams = (\n", out);
	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *u = &cfg->upstreams[i];
		char buf[32];

		fputs("\t{\n", out);
		dump_kv_str(out, "\t\t", "name", u->name);
		fprintf(out, "\t\tkeepalive = %d;\n", u->keepalive);
		fprintf(out, "\t\tmax_fails = %d;\n", u->max_fails);
		fprintf(out, "\t\tfail_timeout = \"%s\";\n", config_dump_duration(u->fail_timeout, buf, sizeof buf));
		if (u->tls) {
			fprintf(out, "\t\ttls = {\n\t\t\tverify = %s;\n", dump_bool(u->tls_verify));
			if (u->tls_ca[0])
				dump_kv_str(out, "\t\t\t", "ca", u->tls_ca);
			if (u->tls_sni[0])
				dump_kv_str(out, "\t\t\t", "sni", u->tls_sni);
			fputs("\t\t};\n", out);
		}
		fputs("\t\tservers = (\n", out);
		for (int s = 0; s < u->nservers; s++) {
			const struct config_server *srv = &cfg->servers[u->first_server + s];

			fputs("\t\t\t{ address = ", out);
			dump_str(out, srv->addr.text);
			fprintf(out, "; weight = %d; }%s\n", srv->weight, s + 1 < u->nservers ? "," : "");
		}
		fprintf(out, "\t\t);\n\t}%s\n", i + 1 < cfg->nupstreams ? "," : "");
	}
	fputs(");\n", out);
}

static void dump_routes(FILE *out, const struct config *cfg)
{
	fputs("routes = (\n", out);
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_route *r = &cfg->routes[i];
		char buf[CONFIG_HOST_MAX + 1];

		fputs("\t{ host = ", out);
		dump_str(out, config_host_text(r->host_kind, r->host, buf, sizeof buf));
		fputs("; path = ", out);
		dump_str(out, r->path);
		fputs("; upstream = ", out);
		dump_str(out, cfg->upstreams[r->upstream].name);
		fprintf(out, "; }%s\n", i + 1 < cfg->nroutes ? "," : "");
	}
	fputs(");\n", out);
}

static void dump_timeouts(FILE *out, const struct config_timeouts *t)
{
	const struct {
		const char *key;
		uint32_t ms;
		int off; /* 0 is written "off" (a key that takes it) */
	} keys[] = {
	    {"client_header", t->client_header, 0},       {"client_body", t->client_body, 0},
	    {"client_keepalive", t->client_keepalive, 0}, {"client_send", t->client_send, 0},
	    {"upstream_connect", t->upstream_connect, 0}, {"upstream_send", t->upstream_send, 0},
	    {"upstream_read", t->upstream_read, 0},       {"upstream_keepalive", t->upstream_keepalive, 0},
	    {"drain", t->drain, 0},                    {"rate_window", t->rate_window, 1},
	    {"request", t->request, 1},                {"slab_idle", t->slab_idle, 0},
	    {"proxy_protocol", t->proxy_protocol, 0},
	};
	char buf[32];

	fputs("timeouts = {\n", out);
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		fprintf(out, "\t%s = \"%s\";\n", keys[i].key,
		        keys[i].off && !keys[i].ms ? "off" : config_dump_duration(keys[i].ms, buf, sizeof buf));
	fputs("};\n", out);
}

static void dump_limits(FILE *out, const struct config_limits *l)
{
	char buf[32];

	fputs("limits = {\n", out);
	fprintf(out, "\theader_size = \"%s\";\n", config_dump_size(l->header_size, buf, sizeof buf));
	fprintf(out, "\theaders = %" PRIu32 ";\n", l->headers);
	fprintf(out, "\turi_size = \"%s\";\n", config_dump_size(l->uri_size, buf, sizeof buf));
	fprintf(out, "\tbody_size = \"%s\";\n", config_dump_size(l->body_size, buf, sizeof buf));
	fprintf(out, "\tconnections = %" PRIu32 ";\n", l->connections);
	fprintf(out, "\tresponse_header_size = \"%s\";\n", config_dump_size(l->response_header_size, buf, sizeof buf));
	fprintf(out, "\tbody_buffer = \"%s\";\n", config_dump_size(l->body_buffer, buf, sizeof buf));
	fprintf(out, "\tclient_body_rate = \"%s\";\n", config_dump_size(l->client_body_rate, buf, sizeof buf));
	fprintf(out, "\tclient_send_rate = \"%s\";\n", config_dump_size(l->client_send_rate, buf, sizeof buf));
	fputs("};\n", out);
}

int config_dump(FILE *out, const struct config *cfg)
{
	char buf[32];

	fputs("# weir -T: the configuration in force", out);
	if (cfg->file) {
		fputs(" as loaded from ", out);
		dump_str(out, cfg->file);
	}
	fputs(",\n# every default filled in and secrets masked. `weir -t` accepts it.\n\n", out);
	fprintf(out, "workers = %d;\n", cfg->workers);
	fprintf(out, "master_process = %s;\n", dump_bool(cfg->master_process));
	dump_kv_str(out, "", "pid_file", cfg->pid_file);
	dump_kv_str(out, "", "user", cfg->user);
	fprintf(out, "tls_ticket_rotate = \"%s\";\n\n", config_dump_duration(cfg->tls_ticket_rotate, buf, sizeof buf));

	fputs("log = {\n", out);
	dump_kv_str(out, "\t", "error", cfg->log.error_path);
	dump_kv_str(out, "\t", "access", cfg->log.access_path);
	dump_kv_str(out, "\t", "level", config_log_level_name(cfg->log.level));
	fputs("};\n\n", out);
	dump_stats(out, cfg);
	fputc('\n', out);
	dump_listeners(out, cfg);
	fputc('\n', out);
	dump_upstreams(out, cfg);
	fputc('\n', out);
	dump_routes(out, cfg);
	fputc('\n', out);
	dump_timeouts(out, &cfg->timeouts);
	fputc('\n', out);
	dump_limits(out, &cfg->limits);
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
