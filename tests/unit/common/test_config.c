/*
 * test_config.c: common/config: real files written into a temporary
 * directory and loaded, checked for their values, their defaults and the
 * exact "FILE:LINE: message" of everything wrong with them.
 *
 * Runs from the repository root (tests read etc/weir.conf).
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/weir-test-config-XXXXXX";
static char path[256]; /* the file written last */
static int nfiles;

/* The smallest valid file is these three lines. */
#define L_LISTEN "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
#define L_UP "upstreams = ( { name = \"app\"; servers = ( { address = \"127.0.0.1:9000\"; } ); } );\n"
#define L_ROUTE "routes = ( { upstream = \"app\"; } );\n"
#define MINIMAL L_LISTEN L_UP L_ROUTE

static int suite_init(void)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int suite_clean(void)
{
	char p[300];

	for (int i = 0; i < nfiles; i++) {
		snprintf(p, sizeof p, "%s/%d.conf", dir, i);
		unlink(p);
	}
	return rmdir(dir);
}

/* Writes <text> to a new file in the directory; its name is left in path. */
static const char *write_conf(const char *text)
{
	FILE *f;

	snprintf(path, sizeof path, "%s/%d.conf", dir, nfiles++);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static struct config cfg;
static struct config_errors errs;

static int load(const char *text)
{
	return config_load(write_conf(text), &cfg, &errs);
}

/* Dumps the messages of a load that was expected to succeed. */
static void show_errors(void)
{
	int kept = errs.count < CONFIG_MAX_ERRORS ? errs.count : CONFIG_MAX_ERRORS;
	for (int i = 0; i < kept; i++)
		fprintf(stderr, "\n    %s", errs.msg[i]);
}

static int load_ok(const char *text)
{
	int rc = load(text);
	if (rc != 0)
		show_errors();
	return rc == 0;
}

/* Whether some kept message starts with "PATH:LINE: " (or "PATH: " when
 * <line> is 0) and holds every one of the NULL-terminated words. */
static int has_error(int line, ...)
{
	int kept = errs.count < CONFIG_MAX_ERRORS ? errs.count : CONFIG_MAX_ERRORS;
	char prefix[300];

	if (line)
		snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
	else
		snprintf(prefix, sizeof prefix, "%s: ", path);
	for (int i = 0; i < kept; i++) {
		const char *m = errs.msg[i], *w;
		int all = 1;
		va_list ap;

		if (strncmp(m, prefix, strlen(prefix)) != 0)
			continue;
		va_start(ap, line);
		while ((w = va_arg(ap, const char *)) != NULL)
			if (!strstr(m, w))
				all = 0;
		va_end(ap);
		if (all)
			return 1;
	}
	show_errors();
	return 0;
}

static int is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* ---- whole files ------------------------------------------------------- */

static const char full_example[] =
	"workers = 4;\n"
	"pid_file = \"/run/weir.pid\";\n"
	"log = { error = \"/var/log/weir/error.log\"; access = \"off\"; level = \"warn\"; };\n"
	"stats = { listen = \"127.0.0.1:9901\"; };\n"
	"listeners = ( { address = \"127.0.0.1:8080\"; backlog = 1024; }, { address = \"[::1]:8080\"; proxy_protocol = true; } );\n"
	"upstreams = (\n"
	"  { name = \"app\"; keepalive = 16;\n"
	"    servers = ( { address = \"127.0.0.1:9000\"; weight = 2; }, { address = \"127.0.0.1:9001\"; } ); },\n"
	"  { name = \"static\"; servers = ( { address = \"[::1]:9100\"; } ); }\n"
	");\n"
	"routes = (\n"
	"  { host = \"api.example.com\"; path = \"/v1/\"; upstream = \"app\"; },\n"
	"  { host = \"*.example.com\"; upstream = \"static\"; },\n"
	"  { path = \"/\"; upstream = \"app\"; }\n"
	");\n"
	"timeouts = { client_header = \"11s\"; client_body = \"31s\"; client_keepalive = \"61s\"; client_send = "
	"\"32s\";\n"
	"             upstream_connect = \"250ms\"; upstream_send = \"2m\"; upstream_read = \"1h\";\n"
	"             upstream_keepalive = 7000; drain = \"33s\"; slab_idle = \"5s\"; proxy_protocol = \"4s\"; };\n"
	"limits = { header_size = \"32k\"; headers = 50; uri_size = \"4K\"; body_size = \"1g\";\n"
	"           connections = 1000; response_header_size = 20000; };\n";

static void test_full_example(void)
{
	const struct sockaddr_in6 *v6;

	CU_ASSERT_FATAL(load_ok(full_example));
	CU_ASSERT_STRING_EQUAL(cfg.file, path);
	CU_ASSERT_EQUAL(cfg.workers, 4);
	CU_ASSERT_STRING_EQUAL(cfg.pid_file, "/run/weir.pid");
	CU_ASSERT_STRING_EQUAL(cfg.log.error_path, "/var/log/weir/error.log");
	CU_ASSERT_STRING_EQUAL(cfg.log.access_path, "off");
	CU_ASSERT_EQUAL(cfg.log.level, LOG_LEVEL_WARN);
	CU_ASSERT_EQUAL(cfg.has_stats, 1);
	CU_ASSERT_STRING_EQUAL(cfg.stats.text, "127.0.0.1:9901");

	CU_ASSERT_EQUAL_FATAL(cfg.nlisteners, 2);
	CU_ASSERT_STRING_EQUAL(cfg.listeners[0].addr.text, "127.0.0.1:8080");
	CU_ASSERT_EQUAL(cfg.listeners[0].backlog, 1024);
	CU_ASSERT_EQUAL(cfg.listeners[0].line, 5);
	CU_ASSERT_STRING_EQUAL(cfg.listeners[1].addr.text, "[::1]:8080");
	CU_ASSERT_EQUAL(cfg.listeners[1].backlog, 511);
	CU_ASSERT_EQUAL(cfg.listeners[0].proxy_protocol, 0);
	CU_ASSERT_EQUAL(cfg.listeners[1].proxy_protocol, 1);
	v6 = (const struct sockaddr_in6 *)&cfg.listeners[1].addr.sa;
	CU_ASSERT_EQUAL(v6->sin6_family, AF_INET6);
	CU_ASSERT_EQUAL(ntohs(v6->sin6_port), 8080);
	CU_ASSERT_EQUAL(cfg.listeners[1].addr.len, sizeof(struct sockaddr_in6));

	CU_ASSERT_EQUAL_FATAL(cfg.nupstreams, 2);
	CU_ASSERT_EQUAL_FATAL(cfg.nservers, 3);
	CU_ASSERT_STRING_EQUAL(cfg.upstreams[0].name, "app");
	CU_ASSERT_EQUAL(cfg.upstreams[0].keepalive, 16);
	CU_ASSERT_EQUAL(cfg.upstreams[0].first_server, 0);
	CU_ASSERT_EQUAL(cfg.upstreams[0].nservers, 2);
	CU_ASSERT_STRING_EQUAL(cfg.upstreams[1].name, "static");
	CU_ASSERT_EQUAL(cfg.upstreams[1].keepalive, 32);
	CU_ASSERT_EQUAL(cfg.upstreams[1].first_server, 2);
	CU_ASSERT_EQUAL(cfg.upstreams[1].nservers, 1);
	CU_ASSERT_STRING_EQUAL(cfg.servers[0].addr.text, "127.0.0.1:9000");
	CU_ASSERT_EQUAL(cfg.servers[0].weight, 2);
	CU_ASSERT_STRING_EQUAL(cfg.servers[1].addr.text, "127.0.0.1:9001");
	CU_ASSERT_EQUAL(cfg.servers[1].weight, 1);
	CU_ASSERT_STRING_EQUAL(cfg.servers[2].addr.text, "[::1]:9100");

	CU_ASSERT_EQUAL_FATAL(cfg.nroutes, 3);
	CU_ASSERT_EQUAL(cfg.routes[0].host_kind, CONFIG_HOST_EXACT);
	CU_ASSERT_STRING_EQUAL(cfg.routes[0].host, "api.example.com");
	CU_ASSERT_STRING_EQUAL(cfg.routes[0].path, "/v1/");
	CU_ASSERT_EQUAL(cfg.routes[0].upstream, 0);
	CU_ASSERT_EQUAL(cfg.routes[0].line, 12);
	CU_ASSERT_EQUAL(cfg.routes[1].host_kind, CONFIG_HOST_WILDCARD);
	CU_ASSERT_STRING_EQUAL(cfg.routes[1].host, ".example.com");
	CU_ASSERT_STRING_EQUAL(cfg.routes[1].path, "/");
	CU_ASSERT_EQUAL(cfg.routes[1].upstream, 1);
	CU_ASSERT_EQUAL(cfg.routes[2].host_kind, CONFIG_HOST_ANY);
	CU_ASSERT_STRING_EQUAL(cfg.routes[2].host, "");
	CU_ASSERT_EQUAL(cfg.routes[2].upstream, 0);

	CU_ASSERT_EQUAL(cfg.timeouts.client_header, 11000);
	CU_ASSERT_EQUAL(cfg.timeouts.client_body, 31000);
	CU_ASSERT_EQUAL(cfg.timeouts.client_keepalive, 61000);
	CU_ASSERT_EQUAL(cfg.timeouts.client_send, 32000);
	CU_ASSERT_EQUAL(cfg.timeouts.upstream_connect, 250);
	CU_ASSERT_EQUAL(cfg.timeouts.upstream_send, 120000);
	CU_ASSERT_EQUAL(cfg.timeouts.upstream_read, 3600000);
	CU_ASSERT_EQUAL(cfg.timeouts.upstream_keepalive, 7000);
	CU_ASSERT_EQUAL(cfg.timeouts.drain, 33000);
	CU_ASSERT_EQUAL(cfg.timeouts.slab_idle, 5000);
	CU_ASSERT_EQUAL(cfg.timeouts.proxy_protocol, 4000);

	CU_ASSERT_EQUAL(cfg.limits.header_size, 32768);
	CU_ASSERT_EQUAL(cfg.limits.headers, 50);
	CU_ASSERT_EQUAL(cfg.limits.uri_size, 4096);
	CU_ASSERT_EQUAL(cfg.limits.body_size, 1ull << 30);
	CU_ASSERT_EQUAL(cfg.limits.connections, 1000);
	CU_ASSERT_EQUAL(cfg.limits.response_header_size, 20000);

	config_free(&cfg);
	CU_ASSERT(is_zero(&cfg, sizeof cfg));
}

static void check_defaults(const struct config *c)
{
	CU_ASSERT_EQUAL(c->timeouts.client_header, 10000);
	CU_ASSERT_EQUAL(c->timeouts.client_body, 30000);
	CU_ASSERT_EQUAL(c->timeouts.client_keepalive, 60000);
	CU_ASSERT_EQUAL(c->timeouts.client_send, 30000);
	CU_ASSERT_EQUAL(c->timeouts.upstream_connect, 5000);
	CU_ASSERT_EQUAL(c->timeouts.upstream_send, 60000);
	CU_ASSERT_EQUAL(c->timeouts.upstream_read, 60000);
	CU_ASSERT_EQUAL(c->timeouts.upstream_keepalive, 60000);
	CU_ASSERT_EQUAL(c->timeouts.drain, 30000);
	CU_ASSERT_EQUAL(c->timeouts.slab_idle, 30000);
	CU_ASSERT_EQUAL(c->timeouts.tunnel, 3600000);
	CU_ASSERT_EQUAL(c->timeouts.tunnel_drain, 300000);
	for (int i = 0; i < c->nroutes; i++)
		CU_ASSERT_STRING_EQUAL(c->routes[i].upgrade, "websocket");
	CU_ASSERT_EQUAL(c->timeouts.proxy_protocol, 5000);
	CU_ASSERT_EQUAL(c->limits.header_size, 16384);
	CU_ASSERT_EQUAL(c->limits.headers, 100);
	CU_ASSERT_EQUAL(c->limits.uri_size, 8192);
	CU_ASSERT_EQUAL(c->limits.body_size, 104857600);
	CU_ASSERT_EQUAL(c->limits.connections, 16384);
	CU_ASSERT_EQUAL(c->limits.response_header_size, 16384);
	CU_ASSERT_STRING_EQUAL(c->log.error_path, "stderr");
	CU_ASSERT_STRING_EQUAL(c->log.access_path, "stderr");
	CU_ASSERT_EQUAL(c->log.level, LOG_LEVEL_INFO);
}

static void test_defaults(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	CU_ASSERT_FATAL(load_ok(MINIMAL));
	check_defaults(&cfg);
	CU_ASSERT_EQUAL(cfg.workers, cores > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : cores);
	CU_ASSERT_STRING_EQUAL(cfg.pid_file, "");
	CU_ASSERT_EQUAL(cfg.has_stats, 0);
	CU_ASSERT_EQUAL(cfg.listeners[0].backlog, 511);
	CU_ASSERT_EQUAL(cfg.upstreams[0].keepalive, 32);
	CU_ASSERT_EQUAL(cfg.servers[0].weight, 1);
	CU_ASSERT_EQUAL(cfg.routes[0].host_kind, CONFIG_HOST_ANY);
	CU_ASSERT_STRING_EQUAL(cfg.routes[0].path, "/");
	config_free(&cfg);

	/* empty groups change nothing either */
	CU_ASSERT_FATAL(load_ok(MINIMAL "log = { };\ntimeouts = { };\nlimits = { };\n"));
	check_defaults(&cfg);
	config_free(&cfg);
}

static void test_workers(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	CU_ASSERT_FATAL(load_ok("workers = \"auto\";\n" MINIMAL));
	CU_ASSERT_EQUAL(cfg.workers, cores > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : cores);
	config_free(&cfg);
	CU_ASSERT_FATAL(load_ok("workers = 64;\n" MINIMAL));
	CU_ASSERT_EQUAL(cfg.workers, 64);
	config_free(&cfg);

	CU_ASSERT_EQUAL(load("workers = 0;\n" MINIMAL), -1);
	CU_ASSERT(has_error(1, "workers", "from 1 to 64", NULL));
	CU_ASSERT_EQUAL(load("workers = 65;\n" MINIMAL), -1);
	CU_ASSERT(has_error(1, "workers", NULL));
	CU_ASSERT_EQUAL(load("workers = \"many\";\n" MINIMAL), -1);
	CU_ASSERT(has_error(1, "workers must be \"auto\"", NULL));
}

static void test_etc_weir_conf(void)
{
	const char *p = "etc/weir.conf";
	int rc = config_load(p, &cfg, &errs);

	if (rc != 0)
		show_errors();
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	check_defaults(&cfg);
	CU_ASSERT(cfg.workers >= 1 && cfg.workers <= CONFIG_MAX_WORKERS);
	CU_ASSERT_EQUAL(cfg.nlisteners, 1);
	CU_ASSERT_STRING_EQUAL(cfg.listeners[0].addr.text, "127.0.0.1:8080");
	CU_ASSERT_EQUAL(cfg.listeners[0].backlog, 511);
	CU_ASSERT_EQUAL_FATAL(cfg.nupstreams, 1);
	CU_ASSERT_STRING_EQUAL(cfg.upstreams[0].name, "demo");
	CU_ASSERT_EQUAL(cfg.upstreams[0].keepalive, 32);
	CU_ASSERT_EQUAL_FATAL(cfg.nservers, 1);
	CU_ASSERT_STRING_EQUAL(cfg.servers[0].addr.text, "127.0.0.1:9000");
	CU_ASSERT_EQUAL_FATAL(cfg.nroutes, 1);
	CU_ASSERT_EQUAL(cfg.routes[0].host_kind, CONFIG_HOST_ANY);
	CU_ASSERT_STRING_EQUAL(cfg.routes[0].path, "/");
	CU_ASSERT_EQUAL(cfg.routes[0].upstream, 0);
	CU_ASSERT_EQUAL(cfg.has_stats, 1);
	CU_ASSERT_STRING_EQUAL(cfg.stats.text, "127.0.0.1:9901");
	CU_ASSERT_STRING_EQUAL(cfg.file, p);
	config_free(&cfg);
}

/* ---- errors ------------------------------------------------------------ */

static void test_failed_load_leaves_zero(void)
{
	CU_ASSERT_EQUAL(load(MINIMAL "routes2 = 1;\n"), -1);
	CU_ASSERT(is_zero(&cfg, sizeof cfg));
	CU_ASSERT_EQUAL(errs.count, 1);
	config_free(&cfg); /* harmless on a zeroed struct */
	CU_ASSERT(is_zero(&cfg, sizeof cfg));
}

static void test_undefined_upstream(void)
{
	CU_ASSERT_EQUAL(load(L_LISTEN L_UP "routes = (\n  { upstream = \"app\"; },\n  { path = \"/api/\"; upstream = "
	                                   "\"api\"; }\n);\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 1);
	CU_ASSERT(has_error(5, "route upstream \"api\" is not defined", NULL));
}

static void test_unknown_keys(void)
{
	CU_ASSERT_EQUAL(load(MINIMAL "listner = 1;\n"), -1);
	CU_ASSERT(has_error(4, "unknown key \"listner\" at top level", NULL));

	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = (\n  {\n    adress = \"127.0.0.1:80\"; } );\n"), -1);
	CU_ASSERT(has_error(5, "unknown key \"adress\" in listeners entry", NULL));
	CU_ASSERT(has_error(4, "listeners.address is required", NULL));

	CU_ASSERT_EQUAL(load(MINIMAL "timeouts = { client_heder = \"1s\"; };\nlimits = { body = 1; };\n"
	                             "log = { file = \"x\"; };\nstats = { listen = \"127.0.0.1:1\"; port = 1; };\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 4);
	CU_ASSERT(has_error(4, "unknown key \"client_heder\" in timeouts", NULL));
	CU_ASSERT(has_error(5, "unknown key \"body\" in limits", NULL));
	CU_ASSERT(has_error(6, "unknown key \"file\" in log", NULL));
	CU_ASSERT(has_error(7, "unknown key \"port\" in stats", NULL));

	CU_ASSERT_EQUAL(load(L_LISTEN L_ROUTE "upstreams = ( { name = \"app\"; timeout = 1;\n"
	                                      "  servers = ( { address = \"127.0.0.1:1\"; weigth = 2; } ); } );\n"),
	                -1);
	CU_ASSERT(has_error(3, "unknown key \"timeout\" in upstreams entry", NULL));
	CU_ASSERT(has_error(4, "unknown key \"weigth\" in servers entry", NULL));

	CU_ASSERT_EQUAL(load(L_LISTEN L_UP "routes = ( { upstream = \"app\"; prefix = \"/\"; } );\n"), -1);
	CU_ASSERT(has_error(3, "unknown key \"prefix\" in routes entry", NULL));
}

static void test_wrong_types(void)
{
	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = ( { address = \"127.0.0.1:80\"; backlog = \"511\"; } );\n"
	                                  "timeouts = 5;\n"
	                                  "pid_file = 1;\n"
	                                  "limits = { headers = \"100\"; body_size = 1.5; };\n"
	                                  "log = { level = 3; };\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 6);
	CU_ASSERT(has_error(3, "listeners.backlog must be an integer", NULL));
	CU_ASSERT(has_error(4, "timeouts must be a group", NULL));
	CU_ASSERT(has_error(5, "pid_file must be a string", NULL));
	CU_ASSERT(has_error(6, "limits.headers must be an integer", NULL));
	CU_ASSERT(has_error(6, "limits.body_size must be a size", NULL));
	CU_ASSERT(has_error(7, "log.level must be a string", NULL));

	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = { address = \"127.0.0.1:80\"; };\n"), -1);
	CU_ASSERT(has_error(3, "listeners must be a list", NULL));
	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = ( \"127.0.0.1:80\" );\n"), -1);
	CU_ASSERT(has_error(3, "listeners entry must be a group", NULL));
}

static void test_syntax_error(void)
{
	CU_ASSERT_EQUAL(load(MINIMAL "pid_file = \"x\";\nworkers = ;\n"), -1);
	CU_ASSERT_EQUAL(errs.count, 1);
	CU_ASSERT(has_error(5, "syntax error", NULL));
	CU_ASSERT(is_zero(&cfg, sizeof cfg));

	/* libconfig itself refuses a key given twice */
	CU_ASSERT_EQUAL(load(MINIMAL "workers = 2;\nworkers = 3;\n"), -1);
	CU_ASSERT(has_error(5, "syntax error: duplicate setting name", NULL));
}

static void test_unreadable(void)
{
	snprintf(path, sizeof path, "%s/missing.conf", dir);
	CU_ASSERT_EQUAL(config_load(path, &cfg, &errs), -1);
	CU_ASSERT_EQUAL(errs.count, 1);
	CU_ASSERT(has_error(0, "cannot read: No such file or directory", NULL));
	CU_ASSERT(is_zero(&cfg, sizeof cfg));

	snprintf(path, sizeof path, "%s", dir);
	CU_ASSERT_EQUAL(config_load(path, &cfg, &errs), -1);
	CU_ASSERT(has_error(0, "cannot read: Is a directory", NULL));
}

static void test_required_sections(void)
{
	CU_ASSERT_EQUAL(load("# nothing here\n"), -1);
	CU_ASSERT_EQUAL(errs.count, 3);
	CU_ASSERT(has_error(0, "listeners is required", NULL));
	CU_ASSERT(has_error(0, "upstreams is required", NULL));
	CU_ASSERT(has_error(0, "routes is required", NULL));

	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = ( );\n"), -1);
	CU_ASSERT(has_error(3, "listeners must have at least one entry", NULL));
}

/* A duration key's descriptor range holds, as an integer key's does:
 * breaker.window (1s..1m) took 2m before the engine read its range. */
static void test_durations_are_held_to_their_range(void)
{
	CU_ASSERT_EQUAL(load(L_LISTEN "upstreams = ( { name = \"app\"; servers = ( { address = \"127.0.0.1:9000\"; } );\n"
	                     "  breaker = { window = \"2m\"; }; } );\n" L_ROUTE),
	                -1);
	CU_ASSERT(has_error(3, "upstreams.breaker.window must be from 1s to 1m (got 2m)", NULL));
	CU_ASSERT_EQUAL(load(L_LISTEN "upstreams = ( { name = \"app\"; servers = ( { address = \"127.0.0.1:9000\"; } );\n"
	                     "  breaker = { window = 60000; }; } );\n" L_ROUTE),
	                0);
	config_free(&cfg);
}

static void test_several_errors_in_order(void)
{
	CU_ASSERT_EQUAL(load("limits = { headers = 0; };\n"                              /* 1 */
	                     "listeners = ( { address = \"localhost:80\"; } );\n"        /* 2 */
	                     "upstreams = ( { name = \"app\"; servers = ( ); } );\n"     /* 3 */
	                     "routes = ( { host = \"a.com:80\"; upstream = \"nope\"; } );\n" /* 4 */
	                     "timeouts = { drain = \"0s\"; };\n"),                       /* 5 */
	                -1);
	CU_ASSERT_EQUAL(errs.count, 6);
	CU_ASSERT(has_error(1, "limits.headers must be from 1 to 1000 (got 0)", NULL));
	CU_ASSERT(has_error(2, "listeners.address \"localhost:80\"", "use an IP address", NULL));
	CU_ASSERT(has_error(3, "upstreams.servers must have at least one entry", NULL));
	CU_ASSERT(has_error(4, "routes.host \"a.com:80\" must not include a port", NULL));
	CU_ASSERT(has_error(4, "route upstream \"nope\" is not defined", NULL));
	CU_ASSERT(has_error(5, "timeouts.drain \"0s\" is not a duration", NULL));
	/* kept in line order although found in another order */
	for (int i = 1; i < 6; i++) {
		const char *a = errs.msg[i - 1] + strlen(path) + 1;
		const char *b = errs.msg[i] + strlen(path) + 1;
		CU_ASSERT(atoi(a) <= atoi(b));
	}
}

static void test_errors_past_the_limit(void)
{
	char text[8192] = MINIMAL;
	size_t n = strlen(text);

	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "unknown%d = 1;\n", i);
	CU_ASSERT_EQUAL(load(text), -1);
	CU_ASSERT_EQUAL(errs.count, 40);
	/* the first CONFIG_MAX_ERRORS by line are kept */
	CU_ASSERT(has_error(4, "unknown key \"unknown0\"", NULL));
	CU_ASSERT(has_error(3 + CONFIG_MAX_ERRORS, "unknown key \"unknown31\"", NULL));
}

static void test_upstream_names(void)
{
	CU_ASSERT_EQUAL(load(L_LISTEN L_ROUTE "upstreams = (\n"
	                                      "  { name = \"app\"; servers = ( { address = \"127.0.0.1:1\"; } ); },\n"
	                                      "  { name = \"app\"; servers = ( { address = \"127.0.0.1:2\"; } ); },\n"
	                                      "  { name = \"a b\"; servers = ( { address = \"127.0.0.1:3\"; } ); },\n"
	                                      "  { name = \"\"; servers = ( { address = \"127.0.0.1:3\"; } ); },\n"
	                                      "  { servers = ( { address = \"127.0.0.1:4\"; } ); },\n"
	                                      "  { name = \"ok-1.b_c\"; keepalive = 10001;\n"
	                                      "    servers = ( { address = \"127.0.0.1:5\"; weight = 0; } ); },\n"
	                                      "  { name = \"nosrv\"; }\n"
	                                      ");\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 7);
	CU_ASSERT(has_error(5, "upstream \"app\" is already defined on line 4", NULL));
	CU_ASSERT(has_error(6, "upstreams.name \"a b\" must be 1 to 63", NULL));
	CU_ASSERT(has_error(7, "upstreams.name \"\" must be 1 to 63", NULL));
	CU_ASSERT(has_error(8, "upstreams.name is required", NULL));
	CU_ASSERT(has_error(9, "upstreams.keepalive must be from 0 to 10000 (got 10001)", NULL));
	CU_ASSERT(has_error(10, "upstreams.servers.weight must be from 1 to 1000 (got 0)", NULL));
	CU_ASSERT(has_error(11, "upstreams.servers is required", NULL));

	/* 63 characters is the longest name */
	CU_ASSERT_FATAL(load_ok(L_LISTEN "upstreams = ( { name = "
	                                 "\"abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abc\";\n"
	                                 "  servers = ( { address = \"127.0.0.1:1\"; } ); } );\n"
	                                 "routes = ( { upstream = "
	                                 "\"abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abc\"; } );\n"));
	config_free(&cfg);
	CU_ASSERT_EQUAL(load(L_LISTEN "upstreams = ( { name = "
	                              "\"abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcd\";\n"
	                              "  servers = ( { address = \"127.0.0.1:1\"; } ); } );\n" L_ROUTE),
	                -1);
	CU_ASSERT(has_error(2, "must be 1 to 63", NULL));
}

static void test_too_many_servers(void)
{
	static char text[200000];
	size_t n;

	n = (size_t)snprintf(text, sizeof text, "%s%s", L_LISTEN L_ROUTE, "upstreams = (\n");
	for (int u = 0; u < 2; u++) {
		n += (size_t)snprintf(text + n, sizeof text - n, "{ name = \"%s\"; servers = (\n", u ? "b" : "app");
		for (int i = 0; i < 513; i++)
			n += (size_t)snprintf(text + n, sizeof text - n, "{ address = \"127.0.%d.%d:80\"; },\n", u,
			                      i % 250 + 1);
		text[n - 2] = ' ';
		n += (size_t)snprintf(text + n, sizeof text - n, "); }%s\n", u ? "" : ",");
	}
	snprintf(text + n, sizeof text - n, ");\n");
	CU_ASSERT_EQUAL(load(text), -1);
	CU_ASSERT_EQUAL(errs.count, 1);
	CU_ASSERT(has_error(3, "1026 servers in all, at most 1024", NULL));

	/* exactly the maximum is fine */
	n = (size_t)snprintf(text, sizeof text, "%s%s", L_LISTEN L_ROUTE,
	                     "upstreams = ( { name = \"app\"; servers = (\n");
	for (int i = 0; i < CONFIG_MAX_SERVERS; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "{ address = \"10.0.%d.%d:80\"; }%s\n", i / 250,
		                      i % 250 + 1, i + 1 < CONFIG_MAX_SERVERS ? "," : "");
	snprintf(text + n, sizeof text - n, "); } );\n");
	CU_ASSERT_FATAL(load_ok(text));
	CU_ASSERT_EQUAL(cfg.nservers, CONFIG_MAX_SERVERS);
	CU_ASSERT_EQUAL(cfg.upstreams[0].nservers, CONFIG_MAX_SERVERS);
	config_free(&cfg);
}

static void test_too_many_listeners(void)
{
	char text[8192];
	size_t n = (size_t)snprintf(text, sizeof text, "%s", L_UP L_ROUTE "listeners = (\n");

	for (int i = 0; i < CONFIG_MAX_LISTENERS + 1; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "{ address = \"127.0.0.1:%d\"; }%s\n", 8000 + i,
		                      i < CONFIG_MAX_LISTENERS ? "," : "");
	snprintf(text + n, sizeof text - n, ");\n");
	CU_ASSERT_EQUAL(load(text), -1);
	CU_ASSERT(has_error(3, "listeners has 33 entries, at most 32", NULL));
}

static void test_duplicate_listener(void)
{
	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = (\n { address = \"127.0.0.1:80\"; },\n"
	                                  " { address = \"127.0.0.2:80\"; backlog = 0; },\n"
	                                  " { address = \"127.0.0.1:80\"; } );\n"),
	                -1);
	CU_ASSERT(has_error(5, "listeners.backlog must be from 1 to 65535 (got 0)", NULL));
	CU_ASSERT(has_error(6, "listeners.address \"127.0.0.1:80\" is already used on line 4", NULL));
}

/* ---- routes ------------------------------------------------------------ */

static void test_route_hosts(void)
{
	CU_ASSERT_FATAL(load_ok(L_LISTEN L_UP "routes = (\n"
	                                      "  { host = \"API.Example.COM\"; upstream = \"app\"; },\n"
	                                      "  { host = \"*.Example.com\"; path = \"/x\"; upstream = \"app\"; },\n"
	                                      "  { host = \"*\"; path = \"/y\"; upstream = \"app\"; },\n"
	                                      "  { host = \"10.0.0.1\"; upstream = \"app\"; },\n"
	                                      "  { host = \"localhost\"; upstream = \"app\"; }\n"
	                                      ");\n"));
	CU_ASSERT_EQUAL(cfg.routes[0].host_kind, CONFIG_HOST_EXACT);
	CU_ASSERT_STRING_EQUAL(cfg.routes[0].host, "api.example.com");
	CU_ASSERT_EQUAL(cfg.routes[1].host_kind, CONFIG_HOST_WILDCARD);
	CU_ASSERT_STRING_EQUAL(cfg.routes[1].host, ".example.com");
	CU_ASSERT_STRING_EQUAL(cfg.routes[1].path, "/x");
	CU_ASSERT_EQUAL(cfg.routes[2].host_kind, CONFIG_HOST_ANY);
	CU_ASSERT_STRING_EQUAL(cfg.routes[2].host, "");
	CU_ASSERT_EQUAL(cfg.routes[3].host_kind, CONFIG_HOST_EXACT);
	CU_ASSERT_STRING_EQUAL(cfg.routes[4].host, "localhost");
	config_free(&cfg);
}

static void test_bad_route_hosts_and_paths(void)
{
	CU_ASSERT_EQUAL(load(L_LISTEN L_UP "routes = (\n"
	                                   "  { host = \"a.com:8080\"; upstream = \"app\"; },\n"
	                                   "  { host = \"a_b.com\"; upstream = \"app\"; },\n"
	                                   "  { host = \"a.*.com\"; upstream = \"app\"; },\n"
	                                   "  { host = \"a..com\"; upstream = \"app\"; },\n"
	                                   "  { host = \"*.\"; upstream = \"app\"; },\n"
	                                   "  { host = \"\"; upstream = \"app\"; },\n"
	                                   "  { path = \"api\"; upstream = \"app\"; },\n"
	                                   "  { path = \"/a b\"; upstream = \"app\"; },\n"
	                                   "  { path = \"/a?b=1\"; upstream = \"app\"; },\n"
	                                   "  { host = \"b.com\"; }\n"
	                                   ");\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 10);
	CU_ASSERT(has_error(4, "routes.host \"a.com:8080\" must not include a port", NULL));
	CU_ASSERT(has_error(5, "routes.host \"a_b.com\" may hold only letters, digits", NULL));
	CU_ASSERT(has_error(6, "routes.host \"a.*.com\"", "'*'", NULL));
	CU_ASSERT(has_error(7, "routes.host \"a..com\" has an empty label", NULL));
	CU_ASSERT(has_error(8, "routes.host \"*.\"", NULL));
	CU_ASSERT(has_error(9, "routes.host \"\"", NULL));
	CU_ASSERT(has_error(10, "routes.path \"api\" must start with '/'", NULL));
	CU_ASSERT(has_error(11, "routes.path \"/a b\" must not contain spaces", NULL));
	CU_ASSERT(has_error(12, "routes.path \"/a?b=1\"", "query", NULL));
	CU_ASSERT(has_error(13, "routes.upstream is required", NULL));
}

/* Requests are routed on their normalised path (worker/h1/http_path.c): a
 * prefix no normalised path can start with is a mistake, named here. */
static void test_route_paths_that_no_normalised_path_matches(void)
{
	static const char *const never[] = {"/a/../b/", "/a/./b", "/%7Euser/", "/a%2fb", "/a%zz", "/a%00", "/a%2e%2e/"};
	/* prefixes that a normalised path can start with */
	static const char *const can[] = {"/a/.", "/b/..", "/.well-known/", "/c%2F", "/d%2", "/e%", "/~user/%C3%A9"};
	char text[512], want[128];

	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
		snprintf(text, sizeof text, L_LISTEN L_UP "routes = (\n  { path = \"%s\"; upstream = \"app\"; }\n);\n",
		         never[i]);
		snprintf(want, sizeof want, "routes.path \"%s\" never matches", never[i]);
		CU_ASSERT_EQUAL(load(text), -1);
		CU_ASSERT_EQUAL(errs.count, 1);
		CU_ASSERT(has_error(4, want, "normalised", NULL));
	}
	for (size_t i = 0; i < sizeof(can) / sizeof(can[0]); i++) {
		snprintf(text, sizeof text, L_LISTEN L_UP "routes = (\n  { path = \"%s\"; upstream = \"app\"; }\n);\n",
		         can[i]);
		CU_ASSERT(load_ok(text));
		config_free(&cfg);
	}
}

static void test_duplicate_routes(void)
{
	CU_ASSERT_EQUAL(load(L_LISTEN L_UP "routes = (\n"
	                                   "  { upstream = \"app\"; },\n"
	                                   "  { host = \"*\"; path = \"/\"; upstream = \"app\"; },\n"
	                                   "  { host = \"api.example.com\"; path = \"/v1\"; upstream = \"app\"; },\n"
	                                   "  { host = \"API.example.com\"; path = \"/v1\"; upstream = \"app\"; },\n"
	                                   "  { host = \"*.example.com\"; upstream = \"app\"; },\n"
	                                   "  { host = \"*.EXAMPLE.com\"; path = \"/\"; upstream = \"app\"; },\n"
	                                   "  { host = \"api.example.com\"; path = \"/v2\"; upstream = \"app\"; },\n"
	                                   "  { host = \".example.com\"; upstream = \"app\"; }\n"
	                                   ");\n"),
	                -1);
	CU_ASSERT(has_error(5, "route for host \"*\" and path \"/\" is already defined on line 4", NULL));
	CU_ASSERT(has_error(7, "route for host \"api.example.com\" and path \"/v1\" is already defined on line 6",
	                    NULL));
	CU_ASSERT(has_error(9, "route for host \"*.example.com\" and path \"/\" is already defined on line 8", NULL));
	/* ".example.com" is not a valid exact host (empty first label) */
	CU_ASSERT(has_error(11, "routes.host \".example.com\" has an empty label", NULL));
	CU_ASSERT_EQUAL(errs.count, 4);
}

/* ---- limits, timeouts, log, stats ---------------------------------------- */

static void test_limits_ranges(void)
{
	CU_ASSERT_EQUAL(load(MINIMAL "limits = {\n"
	                             "  header_size = 1023;\n"
	                             "  headers = 1001;\n"
	                             "  connections = 1000001;\n"
	                             "  response_header_size = \"65537\";\n"
	                             "  body_size = -1;\n"
	                             "};\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 5);
	CU_ASSERT(has_error(5, "limits.header_size must be from 1024 to 65536 bytes (got 1023)", NULL));
	CU_ASSERT(has_error(6, "limits.headers must be from 1 to 1000 (got 1001)", NULL));
	CU_ASSERT(has_error(7, "limits.connections must be from 1 to 1000000", NULL));
	CU_ASSERT(has_error(8, "limits.response_header_size must be from 1024 to 65536", NULL));
	CU_ASSERT(has_error(9, "limits.body_size must not be negative", NULL));

	/* uri_size is bounded by header_size, given or default */
	CU_ASSERT_EQUAL(load(MINIMAL "limits = { header_size = \"4k\"; uri_size = \"8k\"; };\n"), -1);
	CU_ASSERT(has_error(4, "limits.uri_size (8192) must not exceed limits.header_size (4096)", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "limits = { uri_size = \"32k\"; };\n"), -1);
	CU_ASSERT(has_error(4, "must not exceed limits.header_size (16384)", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "limits = { uri_size = 63; };\n"), -1);
	CU_ASSERT(has_error(4, "limits.uri_size must be from 64", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "limits = { body_size = \"10q\"; };\n"), -1);
	CU_ASSERT(has_error(4, "limits.body_size \"10q\" is not a size", NULL));

	/* the edges themselves are accepted */
	CU_ASSERT_FATAL(load_ok(MINIMAL "limits = { header_size = \"64k\"; uri_size = \"64K\"; headers = 1000;\n"
	                                "  connections = 1000000; response_header_size = 1024; body_size = 0; };\n"));
	CU_ASSERT_EQUAL(cfg.limits.header_size, 65536);
	CU_ASSERT_EQUAL(cfg.limits.uri_size, 65536);
	CU_ASSERT_EQUAL(cfg.limits.body_size, 0);
	CU_ASSERT_EQUAL(cfg.limits.connections, 1000000);
	config_free(&cfg);

	/* a 64-bit integer needs libconfig's L suffix */
	CU_ASSERT_FATAL(load_ok(MINIMAL "limits = { body_size = 5000000000L; };\n"));
	CU_ASSERT_EQUAL(cfg.limits.body_size, 5000000000ull);
	config_free(&cfg);
}

static void test_timeouts(void)
{
	CU_ASSERT_FATAL(load_ok(MINIMAL "timeouts = { client_header = 250; drain = \"1ms\"; "
	                                "upstream_read = 4294967295L; upstream_send = \"1193h\"; };\n"));
	CU_ASSERT_EQUAL(cfg.timeouts.client_header, 250);
	CU_ASSERT_EQUAL(cfg.timeouts.drain, 1);
	CU_ASSERT_EQUAL(cfg.timeouts.upstream_read, 4294967295u);
	CU_ASSERT_EQUAL(cfg.timeouts.upstream_send, 1193u * 3600000u);
	config_free(&cfg);

	CU_ASSERT_EQUAL(load(MINIMAL "timeouts = {\n"
	                             "  client_header = 0;\n"
	                             "  client_body = \"5 s\";\n"
	                             "  client_send = \"1194h\";\n"
	                             "  upstream_connect = 1.5;\n"
	                             "  upstream_keepalive = -1;\n"
	                             "  drain = 4294967296L;\n"
	                             "};\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 6);
	CU_ASSERT(has_error(5, "timeouts.client_header must be from 1 to 4294967295 milliseconds (got 0)", NULL));
	CU_ASSERT(has_error(6, "timeouts.client_body \"5 s\" is not a duration", NULL));
	CU_ASSERT(has_error(7, "timeouts.client_send \"1194h\" is not a duration", NULL));
	CU_ASSERT(has_error(8, "timeouts.upstream_connect must be a duration", NULL));
	CU_ASSERT(has_error(9, "timeouts.upstream_keepalive must be from 1", NULL));
	CU_ASSERT(has_error(10, "timeouts.drain must be from 1", NULL));
}

static void test_log_and_stats(void)
{
	static const char *const names[] = {"debug", "info", "notice", "warn", "error"};
	char text[1024];

	for (int i = 0; i < 5; i++) {
		snprintf(text, sizeof text, MINIMAL "log = { level = \"%s\"; };\n", names[i]);
		CU_ASSERT_FATAL(load_ok(text));
		CU_ASSERT_EQUAL(cfg.log.level, (enum log_level)i);
		config_free(&cfg);
	}
	CU_ASSERT_EQUAL(load(MINIMAL "log = { level = \"verbose\"; error = \"off\"; access = \"\"; };\n"
	                             "stats = { };\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 4);
	CU_ASSERT(has_error(4, "log.level \"verbose\" is not one of debug, info, notice, warn, error", NULL));
	CU_ASSERT(has_error(4, "log.error must be \"stderr\" or a file path", NULL));
	CU_ASSERT(has_error(4, "log.access must be", NULL));
	CU_ASSERT(has_error(5, "stats.listen is required", NULL));

	CU_ASSERT_EQUAL(load(MINIMAL "stats = { listen = \"localhost:9901\"; };\n"), -1);
	CU_ASSERT(has_error(4, "stats.listen \"localhost:9901\" is a host name: use an IP address", NULL));
}

static void test_stats_socket(void)
{
	/* a unix socket alone, with the default mode */
	CU_ASSERT_FATAL(load_ok(MINIMAL "stats = { unix = \"/run/weir/stats.sock\"; };\n"));
	CU_ASSERT_EQUAL(cfg.has_stats, 0);
	CU_ASSERT_STRING_EQUAL(cfg.stats_unix, "/run/weir/stats.sock");
	CU_ASSERT_EQUAL(cfg.stats_mode, 0660);
	config_free(&cfg);
	/* both, with a mode */
	CU_ASSERT_FATAL(load_ok(MINIMAL "stats = { listen = \"[::1]:9901\"; unix = \"/tmp/s.sock\"; mode = \"0600\"; };\n"));
	CU_ASSERT_EQUAL(cfg.has_stats, 1);
	CU_ASSERT_STRING_EQUAL(cfg.stats.text, "[::1]:9901");
	CU_ASSERT_EQUAL(cfg.stats_mode, 0600);
	config_free(&cfg);
	/* any loopback address is fine without allow_remote */
	CU_ASSERT_FATAL(load_ok(MINIMAL "stats = { listen = \"127.1.2.3:9901\"; };\n"));
	config_free(&cfg);
	/* a non-loopback address needs allow_remote */
	CU_ASSERT_EQUAL(load(MINIMAL "stats = { listen = \"0.0.0.0:9901\"; };\n"), -1);
	CU_ASSERT_EQUAL(errs.count, 1);
	CU_ASSERT(has_error(4, "stats.listen \"0.0.0.0:9901\" is not a loopback address", "allow_remote", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "stats = { listen = \"*:9901\"; allow_remote = false; };\n"), -1);
	CU_ASSERT(has_error(4, "is not a loopback address", NULL));
	CU_ASSERT_FATAL(load_ok(MINIMAL "stats = { listen = \"10.1.2.3:9901\"; allow_remote = true; };\n"));
	CU_ASSERT_EQUAL(cfg.stats_allow_remote, 1);
	config_free(&cfg);
	/* an admin token: kept as given, or refused when short or not a b64token */
	CU_ASSERT_FATAL(load_ok(MINIMAL "stats = { listen = \"10.1.2.3:9901\"; allow_remote = true;"
	                                " admin_token = \"abcDEF0123456789-._~+/=\"; };\n"));
	CU_ASSERT_STRING_EQUAL(cfg.stats_admin_token, "abcDEF0123456789-._~+/=");
	config_free(&cfg);
	CU_ASSERT_FATAL(load_ok(MINIMAL "stats = { listen = \"127.0.0.1:9901\"; };\n"));
	CU_ASSERT_STRING_EQUAL(cfg.stats_admin_token, "");
	config_free(&cfg);
	CU_ASSERT_EQUAL(load(MINIMAL "stats = { listen = \"127.0.0.1:9901\"; admin_token = \"0123456789abcde\"; };\n"), -1);
	CU_ASSERT(has_error(4, "stats.admin_token must be 16 to 128 characters", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "stats = { listen = \"127.0.0.1:9901\"; admin_token = \"0123456789 abcdef\"; };\n"), -1);
	CU_ASSERT(has_error(4, "stats.admin_token must be 16 to 128 characters", NULL));
	/* bad values, each reported */
	CU_ASSERT_EQUAL(load(MINIMAL "stats = {\n unix = \"stats.sock\";\n mode = \"0999\";\n"
	                             " allow_remote = 1;\n};\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 3);
	CU_ASSERT(has_error(5, "stats.unix \"stats.sock\" must be an absolute path", NULL));
	CU_ASSERT(has_error(6, "stats.mode \"0999\" must be an octal file mode", NULL));
	CU_ASSERT(has_error(7, "stats.allow_remote must be true or false", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "stats = { unix = \"/tmp/s.sock\"; mode = 0660; };\n"), -1);
	CU_ASSERT(has_error(4, "stats.mode must be a string", NULL));
	CU_ASSERT_EQUAL(load(MINIMAL "stats = { mode = \"0600\"; };\n"), -1);
	CU_ASSERT(has_error(4, "stats.listen is required unless stats.unix is given", NULL));
}

static void test_log_level_names(void)
{
	CU_ASSERT_STRING_EQUAL(config_log_level_name(LOG_LEVEL_DEBUG), "debug");
	CU_ASSERT_STRING_EQUAL(config_log_level_name(LOG_LEVEL_INFO), "info");
	CU_ASSERT_STRING_EQUAL(config_log_level_name(LOG_LEVEL_NOTICE), "notice");
	CU_ASSERT_STRING_EQUAL(config_log_level_name(LOG_LEVEL_WARN), "warn");
	CU_ASSERT_STRING_EQUAL(config_log_level_name(LOG_LEVEL_ERROR), "error");
	CU_ASSERT_STRING_EQUAL(config_log_level_name((enum log_level)99), "unknown");
}

/* ---- the parsers on their own ------------------------------------------ */

static void test_addr_v4(void)
{
	struct config_addr a;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&a.sa;

	CU_ASSERT_EQUAL_FATAL(config_parse_addr("192.168.1.20:443", &a), 0);
	CU_ASSERT_EQUAL(sin->sin_family, AF_INET);
	CU_ASSERT_EQUAL(ntohs(sin->sin_port), 443);
	CU_ASSERT_EQUAL(ntohl(sin->sin_addr.s_addr), 0xc0a80114u);
	CU_ASSERT_EQUAL(a.len, sizeof(struct sockaddr_in));
	CU_ASSERT_STRING_EQUAL(a.text, "192.168.1.20:443");

	CU_ASSERT_EQUAL(config_parse_addr("1.2.3.4:1", &a), 0);
	CU_ASSERT_EQUAL(config_parse_addr("1.2.3.4:65535", &a), 0);
	CU_ASSERT_STRING_EQUAL(a.text, "1.2.3.4:65535");
	CU_ASSERT_EQUAL(config_parse_addr("1.2.3.4:080", &a), 0);
	CU_ASSERT_STRING_EQUAL(a.text, "1.2.3.4:80");
}

static void test_addr_v6(void)
{
	struct config_addr a;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&a.sa;

	CU_ASSERT_EQUAL_FATAL(config_parse_addr("[::1]:8080", &a), 0);
	CU_ASSERT_EQUAL(sin6->sin6_family, AF_INET6);
	CU_ASSERT_EQUAL(ntohs(sin6->sin6_port), 8080);
	CU_ASSERT(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
	CU_ASSERT_EQUAL(a.len, sizeof(struct sockaddr_in6));
	CU_ASSERT_STRING_EQUAL(a.text, "[::1]:8080");

	/* written back in canonical form */
	CU_ASSERT_EQUAL(config_parse_addr("[2001:DB8:0:0:0:0:0:1]:80", &a), 0);
	CU_ASSERT_STRING_EQUAL(a.text, "[2001:db8::1]:80");
	CU_ASSERT_EQUAL(config_parse_addr("[::]:80", &a), 0);
	CU_ASSERT_STRING_EQUAL(a.text, "[::]:80");
}

static void test_addr_any(void)
{
	struct config_addr a;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&a.sa;

	CU_ASSERT_EQUAL_FATAL(config_parse_addr("*:80", &a), 0);
	CU_ASSERT_EQUAL(sin->sin_family, AF_INET);
	CU_ASSERT_EQUAL(sin->sin_addr.s_addr, htonl(INADDR_ANY));
	CU_ASSERT_STRING_EQUAL(a.text, "0.0.0.0:80");
}

static void test_addr_bad(void)
{
	static const char *const bad[] = {
		"1.2.3.4",         "1.2.3.4:",      "1.2.3.4:0",   "1.2.3.4:65536", "1.2.3.4:99999999999",
		"1.2.3.4:8o",      "1.2.3.4:-1",    "1.2.3.4:+80", "1.2.3:80",      "1.2.3.256:80",
		"::1:80",          "[::1]",         "[::1]80",     "[::1:80",       "[1.2.3.4]:80",
		"localhost:80",    "example.com:80", ":80",        "",              "*:0",
		"[fe80::1%lo]:80", " 1.2.3.4:80",   "1.2.3.4:80 ",
	};
	struct config_addr a;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = config_parse_addr(bad[i], &a);
		CU_ASSERT_EQUAL(rc, -1);
		if (rc != -1)
			fprintf(stderr, "\n    accepted \"%s\"", bad[i]);
	}
}

static void test_addr_messages(void)
{
	CU_ASSERT_EQUAL(load(L_UP L_ROUTE "listeners = (\n"
	                                  "  { address = \"example.com:80\"; },\n"
	                                  "  { address = \"127.0.0.1\"; },\n"
	                                  "  { address = \"127.0.0.1:70000\"; },\n"
	                                  "  { address = \"::1:80\"; },\n"
	                                  "  { address = \"300.1.1.1:80\"; }\n"
	                                  ");\n"),
	                -1);
	CU_ASSERT_EQUAL(errs.count, 5);
	CU_ASSERT(has_error(4, "listeners.address \"example.com:80\" is a host name: use an IP address", NULL));
	CU_ASSERT(has_error(5, "listeners.address \"127.0.0.1\" has no port", NULL));
	CU_ASSERT(has_error(6, "has a bad port: it must be a number from 1 to 65535", NULL));
	CU_ASSERT(has_error(7, "without brackets", NULL));
	CU_ASSERT(has_error(8, "\"300.1.1.1:80\" is not an IPv4 address", NULL));
}

static void test_durations(void)
{
	static const struct {
		const char *text;
		uint32_t ms;
	} good[] = {
		{"1", 1},           {"250ms", 250},         {"5s", 5000},         {"2m", 120000},
		{"1h", 3600000},    {"4294967295", 4294967295u}, {"4294967295ms", 4294967295u},
		{"4294967s", 4294967000u}, {"71582m", 4294920000u}, {"1193h", 4294800000u},
		{"007s", 7000},
	};
	static const char *const bad[] = {
		"",      "0",      "0s",         "0ms",     "s",           "ms",
		"-5s",   "5 s",    " 5s",        "5s ",     "5S",          "5sec",      "5d",
		"1.5s",  "4294967296", "4294968s", "71583m", "1194h",       "99999999999999999999",
		"99999999999999999999ms", "18446744073709551616h", "5hm", "5ms5",
	};
	uint32_t ms;

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		ms = 0;
		CU_ASSERT_EQUAL(config_parse_duration(good[i].text, &ms), 0);
		CU_ASSERT_EQUAL(ms, good[i].ms);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = config_parse_duration(bad[i], &ms);
		CU_ASSERT_EQUAL(rc, -1);
		if (rc != -1)
			fprintf(stderr, "\n    accepted \"%s\"", bad[i]);
	}
}

static void test_sizes(void)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} good[] = {
		{"0", 0},
		{"512", 512},
		{"16k", 16384},
		{"16K", 16384},
		{"1m", 1048576},
		{"100M", 104857600},
		{"1g", 1073741824},
		{"5G", 5ull << 30},
		{"18446744073709551615", UINT64_MAX},
		{"18014398509481983k", 18014398509481983ull << 10},
		{"17179869183g", 17179869183ull << 30},
	};
	static const char *const bad[] = {
		"",     "k",     "16kb",  "16 k", " 16",  "16k ", "-1",  "1.5m", "1t",  "0x10",
		"18446744073709551616", "18014398509481984k", "17592186044416m", "17179869184g", "99999999999999999999g",
	};
	uint64_t b;

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		b = 1;
		CU_ASSERT_EQUAL(config_parse_size(good[i].text, &b), 0);
		CU_ASSERT_EQUAL(b, good[i].bytes);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = config_parse_size(bad[i], &b);
		CU_ASSERT_EQUAL(rc, -1);
		if (rc != -1)
			fprintf(stderr, "\n    accepted \"%s\"", bad[i]);
	}
}

static const struct unit_test tests[] = {
	{"the full example loads with every value as written", test_full_example},
	{"every default applies when only listeners, upstreams and routes are given", test_defaults},
	{"workers is \"auto\" (online cores, at most 64) or a number from 1 to 64", test_workers},
	{"etc/weir.conf loads with the demo upstream and the documented defaults", test_etc_weir_conf},
	{"a failed load leaves the config zeroed and config_free may still be called", test_failed_load_leaves_zero},
	{"a route to an undefined upstream is an error naming its line", test_undefined_upstream},
	{"an unknown key is an error naming the key, its line and its group", test_unknown_keys},
	{"a value of the wrong type is an error naming the key and the type wanted", test_wrong_types},
	{"a syntax error gives its line and libconfig's words", test_syntax_error},
	{"a file that cannot be read is reported with the reason and no line", test_unreadable},
	{"missing listeners, upstreams and routes are each reported", test_required_sections},
	{"a duration is held to its descriptor's range", test_durations_are_held_to_their_range},
	{"several errors in one file are all reported, in line order", test_several_errors_in_order},
	{"errors past CONFIG_MAX_ERRORS are counted and the earliest are kept", test_errors_past_the_limit},
	{"an upstream needs a unique valid name, sane numbers and at least one server", test_upstream_names},
	{"more than CONFIG_MAX_SERVERS servers in all is an error", test_too_many_servers},
	{"more than CONFIG_MAX_LISTENERS listeners is an error", test_too_many_listeners},
	{"a listener address given twice is an error naming the first line", test_duplicate_listener},
	{"route hosts are lower-cased and classified as any, exact or wildcard", test_route_hosts},
	{"a route host with a port or bad characters, or a path without '/', is refused",
	 test_bad_route_hosts_and_paths},
	{"a route path that no normalised request path can start with is refused",
	 test_route_paths_that_no_normalised_path_matches},
	{"a duplicate host and path pair is an error naming the first line", test_duplicate_routes},
	{"limits outside their ranges are errors and their edges are accepted", test_limits_ranges},
	{"timeouts take units or milliseconds and refuse zero, junk and overflow", test_timeouts},
	{"log level names and the stats block are checked", test_log_and_stats},
	{"the stats socket takes a loopback address, a unix path with a mode, or both; "
	 "a remote address needs allow_remote",
	 test_stats_socket},
	{"config_log_level_name names every level", test_log_level_names},
	{"IPv4 addresses parse into their canonical text", test_addr_v4},
	{"IPv6 addresses in brackets parse into their canonical text", test_addr_v6},
	{"*:port means every IPv4 address", test_addr_any},
	{"addresses without a valid port, host names and malformed IPs are refused", test_addr_bad},
	{"a refused address says why: host name, no port, bad port, no brackets", test_addr_messages},
	{"durations parse with ms, s, m, h or none and refuse zero and overflow", test_durations},
	{"sizes parse with k, m, g in either case and refuse junk and overflow", test_sizes},
};

UNIT_MAIN_WITH("common/config", tests, suite_init, suite_clean)
