/*
 * config_keys.c: every key of the configuration file, one descriptor each
 * (common/config_keys.h says what a descriptor drives).
 *
 * To add a scalar key: add its field to struct config (common/config.h)
 * and one line to its group's table below, then run
 * `make docs-keys` to write its row into docs/config.md (the unit test
 * tests/unit/common/test_config_keys.c fails until the docs agree) and
 * describe it in the text there. The order of a table is the order of
 * `weir -T` and of the docs table.
 */
#include "common/config_keys.h"

#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/match_conf.h"
#include "common/split.h"

/* the field <m> of struct <st> */
#define AT(st, m) .offset = offsetof(st, m), .size = sizeof(((st *)0)->m)
/* the longest string <st>.<m> holds */
#define FITS(st, m) .max = sizeof(((st *)0)->m) - 1
#define KEYSET(var, p, w, table)                                                                        \
	const struct config_keyset var = {                                                              \
	    .path = p, .where = w, .keys = table, .nkeys = (int)(sizeof table / sizeof table[0])}

#define DAYS49 .min = 1, .max = UINT32_MAX

/* ---- checks a descriptor names ----------------------------------------- */

static int is_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static const char *log_error_check(const char *v)
{
	return !*v || strcmp(v, "off") == 0 ? "must be \"stderr\" or a file path" : NULL;
}

static const char *log_access_check(const char *v)
{
	if (strncmp(v, "syslog:", 7) == 0)
		return v[7] != '/' ? "must name a unix socket after \"syslog:\", such as \"syslog:/dev/log\"" : NULL;
	return !*v ? "must be \"stderr\", \"off\", \"syslog:/dev/log\" or a file path" : NULL;
}

static const char *stats_unix_check(const char *v)
{
	return v[0] != '/' ? "must be an absolute path, such as /run/weir/stats.sock" : NULL;
}

/* RFC 6750's b64token, long enough not to be guessed */
static const char *stats_token_check(const char *v)
{
	size_t n = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=");

	return v[n] || n < 16 ? "must be 16 to 128 characters of letters, digits and -._~+/= "
	                        "(openssl rand -base64 32 makes one)"
	                      : NULL;
}

static const char *stats_mode_store(const char *v, void *base)
{
	char *end;
	unsigned long mode = strtoul(v, &end, 8);

	if (!v[0] || *end || v[0] == '-' || v[0] == '+' || mode > 0777)
		return "must be an octal file mode from \"0000\" to \"0777\", such as \"0660\"";
	((struct config *)base)->stats_mode = (unsigned)mode;
	return NULL;
}

static const char *stats_mode_show(const struct config *cfg, const void *base, char *buf, size_t cap)
{
	(void)cfg;
	snprintf(buf, cap, "%04o", ((const struct config *)base)->stats_mode);
	return buf;
}

/*
 * A header for the client certificate's subject must be a plain token that
 * is none of the headers weir writes itself (two Host lines would be worse
 * than none), in any spelling a backend reads as the same name: as a CGI
 * backend reads it, X_Forwarded_For is X-Forwarded-For.
 */
static const char *client_header_check(const char *v)
{
	static const char *const owned[] = {
	    "host", "content-length", "transfer-encoding", "connection", "x-forwarded-for", "x-forwarded-proto",
	    "via",  "expect",         "upgrade",           "te",         "trailer",         "keep-alive",
	    NULL};
	char folded[CONFIG_NAME_MAX];
	int bad = !v[0];
	size_t k = 0;

	for (const char *p = v; *p && !bad; p++) {
		bad = !(is_alnum(*p) || *p == '-' || *p == '_');
		folded[k++] = *p == '_' ? '-' : (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
	}
	folded[k] = '\0';
	for (const char *const *o = owned; *o && !bad; o++)
		bad = strcmp(folded, *o) == 0;
	return bad ? "must be a header name of letters, digits, '-' and '_' that weir does not write itself, "
	             "such as \"X-Client-Subject\""
	           : NULL;
}

const char *config_check_header_name(const char *v)
{
	return client_header_check(v);
}

/* An upstream name: 1..63 of [A-Za-z0-9_.-]. */
static const char *upstream_name_check(const char *s)
{
	size_t n = strlen(s);
	int bad = n == 0 || n >= CONFIG_NAME_MAX;

	_Static_assert(CONFIG_NAME_MAX == 64, "the message says 63");
	for (; *s && !bad; s++)
		bad = !is_alnum(*s) && *s != '_' && *s != '.' && *s != '-';
	return bad ? "must be 1 to 63 letters, digits, '_', '.' or '-'" : NULL;
}

/* A name to send as SNI and to check the certificate against: letters,
 * digits, '-', '.', 1 to 253 of them. */
static const char *tls_sni_check(const char *n)
{
	size_t len = strlen(n);
	int bad = len == 0 || len > 253;

	for (const char *p = n; *p && !bad; p++)
		bad = !(is_alnum(*p) || *p == '-' || *p == '.');
	return bad ? "must be a host name" : NULL;
}

static const char *route_host_show(const struct config *cfg, const void *base, char *buf, size_t cap)
{
	const struct config_route *r = base;

	(void)cfg;
	return config_host_text(r->host_kind, r->host, buf, cap);
}

static const char *route_upstream_show(const struct config *cfg, const void *base, char *buf, size_t cap)
{
	int u = ((const struct config_route *)base)->upstream;

	(void)buf;
	(void)cap;
	if (((const struct config_route *)base)->split)
		return NULL; /* its split names the groups (config_split_dump) */
	return u >= 0 ? cfg->upstreams[u].name : NULL; /* a route with a return has none */
}

static const char *const level_names[] = {
    [LOG_LEVEL_DEBUG] = "debug", [LOG_LEVEL_INFO] = "info",   [LOG_LEVEL_NOTICE] = "notice",
    [LOG_LEVEL_WARN] = "warn",   [LOG_LEVEL_ERROR] = "error",
};

const char *config_log_level_name(enum log_level level)
{
	if ((unsigned)level >= sizeof level_names / sizeof level_names[0])
		return "unknown";
	return level_names[level];
}

/* CONFIG_CLIENT_VERIFY_OFF is what no client_ca means; it is not written */
static const char *const verify_names[] = {
    [CONFIG_CLIENT_VERIFY_OPTIONAL] = "optional",
    [CONFIG_CLIENT_VERIFY_REQUIRED] = "required",
};

static const char *const upstream_pp_names[] = {"off", "v1", "v2"};
static const char *const upstream_protocol_names[] = {"http/1.1", "h2c", "h2"};
/* in enum balance_kind's order (shm/balance.h) */
static const char *const upstream_balance_names[] = {"rr", "random", "least_request", "ring_hash", "maglev"};


/* ---- the tables -------------------------------------------------------- */

static const struct config_key log_keys[] = {
    {.name = "error", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_NOECHO, AT(struct config_log, error_path),
     FITS(struct config_log, error_path), .def = "stderr", .check = log_error_check,
     .doc = "the error log: `\"stderr\"` or a file path"},
    {.name = "access", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_NOECHO, AT(struct config_log, access_path),
     FITS(struct config_log, access_path), .def = "stderr", .check = log_access_check,
     .doc = "the access log, one line per request: `\"stderr\"`, `\"off\"`, a file path or `\"syslog:/dev/log\"`"},
    {.name = "access_flush", .type = CONFIG_KEY_DURATION_OFF, AT(struct config_log, access_flush), .min = 1,
     .max = 60000, .def = "1s",
     .doc = "the longest an access line waits in a worker's buffer; `\"off\"`: written at the end of the "
            "event loop's pass that made it"},
    {.name = "format", .type = CONFIG_KEY_STRING, AT(struct config_log, format), FITS(struct config_log, format),
     .def = "weir", .check = config_check_log_format,
     .doc = "`\"weir\"`, `\"combined\"` (nginx's), `\"json\"` or a format of [variables](#variables)"},
    {.name = "level", .type = CONFIG_KEY_ENUM, AT(struct config_log, level), .def = "info",
     .names = level_names, .nnames = 5, .doc = "the least severe level written to the error log"},
};
KEYSET(config_keys_log, "log", "in log", log_keys);

static const struct config_key stats_keys[] = {
    {.name = "listen", .type = CONFIG_KEY_ADDR, .flags = CONFIG_KEY_OPTIONAL, AT(struct config, stats),
     .doc = "TCP address of the stats socket; loopback unless `allow_remote`"},
    {.name = "unix", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, AT(struct config, stats_unix),
     FITS(struct config, stats_unix), .check = stats_unix_check, .doc = "unix socket path, absolute"},
    {.name = "mode", .type = CONFIG_KEY_STRING, .max = 255, .def = "0660", .store = stats_mode_store,
     .show = stats_mode_show, .needs = "unix", .doc = "file mode of the unix socket, in octal"},
    {.name = "allow_remote", .type = CONFIG_KEY_BOOL, AT(struct config, stats_allow_remote), .def = "false",
     .doc = "`listen` may be an address that is not loopback"},
    {.name = "admin_token", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_NOECHO | CONFIG_KEY_SECRET,
     AT(struct config, stats_admin_token), FITS(struct config, stats_admin_token), .check = stats_token_check,
     .doc = "bearer token for admin commands over `listen`, 16 to 128 characters"},
};
KEYSET(config_keys_stats, "stats", "in stats", stats_keys);

/* tls.alpn: "h2" and "http/1.1", each at most once, comma-separated. */
static const char *alpn_check(const char *v)
{
	int h2 = 0, h1 = 0;

	for (const char *p = v; *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 2 && memcmp(p, "h2", 2) == 0 && !h2)
			h2 = 1;
		else if (n == 8 && memcmp(p, "http/1.1", 8) == 0 && !h1)
			h1 = 1;
		else
			return "must list \"h2\" and \"http/1.1\", each at most once, comma-separated";
		p += n + (e != NULL);
	}
	return h1 || h2 ? NULL : "must name at least one protocol";
}

static const struct config_key cert_keys[] = {
    {.name = "cert", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, AT(struct config_cert, cert),
     FITS(struct config_cert, cert), .doc = "PEM file: the certificate, then its intermediates"},
    {.name = "key", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, AT(struct config_cert, key),
     FITS(struct config_cert, key), .doc = "PEM file: its private key"},
    {.name = "ocsp", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, AT(struct config_cert, ocsp),
     FITS(struct config_cert, ocsp), .doc = "DER OCSP response to staple"},
};
KEYSET(config_keys_cert, "listeners.tls.certificates", "in certificates entry", cert_keys);

static const struct config_key listener_tls_keys[] = {
    {.name = "certificates", .type = CONFIG_KEY_LIST, .flags = CONFIG_KEY_REQUIRED, .sub = &config_keys_cert,
     .doc = "1 to 64 certificates, chosen by SNI; the first is the default"},
    {.name = "client_ca", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL,
     AT(struct config_listener, client_ca), FITS(struct config_listener, client_ca),
     .doc = "PEM file of the CAs of client certificates; none: no client certificates"},
    {.name = "client_verify", .type = CONFIG_KEY_ENUM, AT(struct config_listener, client_verify),
     .def = "required", .names = verify_names, .nnames = 3, .needs = "client_ca",
     .doc = "whether a client certificate is required; needs `client_ca`"},
    {.name = "client_header", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL,
     AT(struct config_listener, client_header), FITS(struct config_listener, client_header),
     .check = client_header_check, .needs = "client_ca",
     .doc = "header that carries the client's subject upstream; needs `client_ca`"},
    {.name = "early_data", .type = CONFIG_KEY_BOOL, AT(struct config_listener, early_data), .def = "false",
     .doc = "accept TLS 1.3 0-RTT for bodiless GET, HEAD and OPTIONS"},
    {.name = "session_tickets", .type = CONFIG_KEY_INT, AT(struct config_listener, session_tickets), .min = 0,
     .max = 8, .def = "1", .doc = "session tickets sent after each TLS 1.3 handshake; 0: none, and no resumption"},
    {.name = "alpn", .type = CONFIG_KEY_STRING, AT(struct config_listener, alpn), FITS(struct config_listener, alpn),
     .def = "h2,http/1.1", .check = alpn_check,
     .doc = "protocols offered by ALPN, preferred first: `\"h2,http/1.1\"`, `\"http/1.1,h2\"`, `\"http/1.1\"`"},
};
KEYSET(config_keys_listener_tls, "listeners.tls", "in listeners.tls", listener_tls_keys);

static const struct config_key listener_keys[] = {
    {.name = "address", .type = CONFIG_KEY_ADDR, .flags = CONFIG_KEY_REQUIRED, AT(struct config_listener, addr),
     .doc = "where clients connect; unique"},
    {.name = "backlog", .type = CONFIG_KEY_INT, AT(struct config_listener, backlog), .min = 1, .max = 65535,
     .def = "511", .doc = "the kernel's accept queue per socket"},
    {.name = "tcp_fastopen", .type = CONFIG_KEY_INT, AT(struct config_listener, tcp_fastopen), .min = 0,
     .max = 65535, .def = "0", .doc = "TCP Fast Open: pending handshakes queued; 0: off"},
    {.name = "defer_accept", .type = CONFIG_KEY_DURATION_OFF, AT(struct config_listener, defer_accept),
     .def = "off", .doc = "TCP_DEFER_ACCEPT: wake a worker only once data arrives, waiting at most this; 0: off"},
    {.name = "proxy_protocol", .type = CONFIG_KEY_BOOL, AT(struct config_listener, proxy_protocol),
     .def = "false", .doc = "every connection starts with a PROXY protocol v1 or v2 header"},
    {.name = "h2c", .type = CONFIG_KEY_BOOL, AT(struct config_listener, h2c), .def = "true",
     .doc = "a plain connection opening with the HTTP/2 preface speaks HTTP/2 (prior knowledge)"},
    {.name = "tls", .type = CONFIG_KEY_GROUP, .def = "absent: plain HTTP", .sub = &config_keys_listener_tls,
     .doc = "clients speak TLS"},
};
KEYSET(config_keys_listener, "listeners", "in listeners entry", listener_keys);

static const struct config_key server_keys[] = {
    {.name = "address", .type = CONFIG_KEY_ADDR, .flags = CONFIG_KEY_REQUIRED, AT(struct config_server, addr),
     .doc = "the server's IP address and port"},
    {.name = "weight", .type = CONFIG_KEY_INT, AT(struct config_server, weight), .min = 1, .max = 1000,
     .def = "1", .doc = "its share of the group's requests"},
};
KEYSET(config_keys_server, "upstreams.servers", "in servers entry", server_keys);

static const struct config_key upstream_tls_keys[] = {
    {.name = "verify", .type = CONFIG_KEY_BOOL, AT(struct config_upstream, tls_verify), .def = "true",
     .doc = "check the chain against `ca` and the name against `sni`"},
    {.name = "ca", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, AT(struct config_upstream, tls_ca),
     FITS(struct config_upstream, tls_ca), .doc = "PEM file of the CAs to trust; required while `verify` is on"},
    {.name = "sni", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, AT(struct config_upstream, tls_sni),
     FITS(struct config_upstream, tls_sni), .check = tls_sni_check,
     .doc = "name sent as SNI and checked; required while `verify` is on"},
};
KEYSET(config_keys_upstream_tls, "upstreams.tls", "in upstreams.tls", upstream_tls_keys);

/* timeouts = {...} and limits = {...} of an upstream group or a route: the
 * keys a request reads after it is routed (those read before, for the
 * head, or per connection or worker, stay global). No default: an absent
 * key is inherited (config_overrides_apply). */
#define OVER_TIMEOUT(n, ty)                                                                               \
	{.name = #n, .type = ty, AT(struct config_timeouts, n), DAYS49,                                   \
	 .doc = "`timeouts." #n "` for the requests it takes"}
#define OVER_LIMIT(n, lo, hi)                                                                             \
	{.name = #n, .type = CONFIG_KEY_SIZE, AT(struct config_limits, n), .min = lo, .max = hi,          \
	 .doc = "`limits." #n "` for the requests it takes"}

static const struct config_key over_timeout_keys[] = {
    OVER_TIMEOUT(client_body, CONFIG_KEY_DURATION),      OVER_TIMEOUT(upstream_connect, CONFIG_KEY_DURATION),
    OVER_TIMEOUT(upstream_send, CONFIG_KEY_DURATION),    OVER_TIMEOUT(upstream_read, CONFIG_KEY_DURATION),
    OVER_TIMEOUT(request, CONFIG_KEY_DURATION_OFF),      OVER_TIMEOUT(tunnel, CONFIG_KEY_DURATION),
};
static const struct config_key over_limit_keys[] = {
    OVER_LIMIT(body_size, 0, UINT64_MAX),         OVER_LIMIT(body_buffer, 0, 1048576),
    OVER_LIMIT(response_header_size, 1024, 65536), OVER_LIMIT(client_body_rate, 0, UINT32_MAX),
    OVER_LIMIT(client_send_rate, 0, UINT32_MAX),  OVER_LIMIT(pipe_budget, 1024, 16777216),
};
KEYSET(config_keys_upstream_timeouts, "upstreams.timeouts", "in upstreams.timeouts", over_timeout_keys);
KEYSET(config_keys_upstream_request_limits, "upstreams.request_limits", "in upstreams.request_limits", over_limit_keys);
KEYSET(config_keys_route_timeouts, "routes.timeouts", "in routes.timeouts", over_timeout_keys);
KEYSET(config_keys_route_limits, "routes.limits", "in routes.limits", over_limit_keys);

void config_overrides_apply(const struct config_overrides *o, struct config_timeouts *t, struct config_limits *l)
{
	_Static_assert(sizeof over_timeout_keys / sizeof over_timeout_keys[0] <= 32, "one bit per key");
	_Static_assert(sizeof over_limit_keys / sizeof over_limit_keys[0] <= 32, "one bit per key");
	for (size_t i = 0; i < sizeof over_timeout_keys / sizeof over_timeout_keys[0]; i++)
		if (o->timeouts_set >> i & 1)
			memcpy(config_key_field(&over_timeout_keys[i], t),
			       config_key_field(&over_timeout_keys[i], (void *)&o->timeouts), over_timeout_keys[i].size);
	for (size_t i = 0; i < sizeof over_limit_keys / sizeof over_limit_keys[0]; i++)
		if (o->limits_set >> i & 1)
			memcpy(config_key_field(&over_limit_keys[i], l),
			       config_key_field(&over_limit_keys[i], (void *)&o->limits), over_limit_keys[i].size);
}


/* A health check's request target: a path starting with '/' (a query
 * allowed), visible ASCII only, so it goes on the request line as is. */
static const char *health_path_check(const char *v)
{
	int bad = v[0] != '/';

	for (const char *p = v; *p && !bad; p++)
		bad = *p <= ' ' || *p > '~';
	return bad ? "must start with '/' and hold no spaces or control bytes, such as \"/healthz\"" : NULL;
}

/* A Host header value: a name or address, with a port if wanted. */
static const char *health_host_check(const char *v)
{
	int bad = !v[0];

	for (const char *p = v; *p && !bad; p++)
		bad = !(is_alnum(*p) || strchr("-.:[]_", *p));
	return bad ? "must be a host name or address, with a port if wanted, such as \"api.internal\"" : NULL;
}

static const char *const health_type_names[] = {NULL, "http", "tcp"};

static const struct config_key upstream_health_keys[] = {
    {.name = "type", .type = CONFIG_KEY_ENUM, AT(struct config_health, type), .def = "http",
     .names = health_type_names, .nnames = 3, .doc = "`\"http\"`: GET `path`; `\"tcp\"`: a connect (and TLS handshake)"},
    {.name = "path", .type = CONFIG_KEY_STRING, AT(struct config_health, path), FITS(struct config_health, path),
     .def = "/", .check = health_path_check, .doc = "the target an HTTP check asks for"},
    {.name = "host", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, AT(struct config_health, host),
     FITS(struct config_health, host), .check = health_host_check,
     .doc = "Host of an HTTP check; default the group's `tls.sni`, else the server's address"},
    {.name = "expect", .type = CONFIG_KEY_STRINGS, .def = "`[ \"200-399\" ]`",
     .doc = "statuses that pass: up to 8 of `\"200\"` or `\"200-299\"`"},
    {.name = "interval", .type = CONFIG_KEY_DURATION, AT(struct config_health, interval), DAYS49, .def = "2s",
     .doc = "from the start of one check of a server to the next"},
    {.name = "timeout", .type = CONFIG_KEY_DURATION, AT(struct config_health, timeout), DAYS49, .def = "1s",
     .doc = "a check not done in it fails; at most `interval`"},
    {.name = "jitter", .type = CONFIG_KEY_DURATION_OFF, AT(struct config_health, jitter), .def = "100ms",
     .doc = "each wait is longer by a random part of it, so checks spread; below `interval`"},
    {.name = "rise", .type = CONFIG_KEY_INT, AT(struct config_health, rise), .min = 1, .max = 100, .def = "2",
     .doc = "checks passed in a row that bring a down server back"},
    {.name = "fall", .type = CONFIG_KEY_INT, AT(struct config_health, fall), .min = 1, .max = 100, .def = "3",
     .doc = "checks failed in a row that take a server out"},
    {.name = "skip_when_busy", .type = CONFIG_KEY_BOOL, AT(struct config_health, skip_when_busy), .def = "false",
     .doc = "skip a check (it passes) while real requests to the server succeed"},
};
KEYSET(config_keys_upstream_health, "upstreams.health", "in upstreams.health", upstream_health_keys);

static const struct config_key upstream_keys[] = {
    {.name = "name", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, AT(struct config_upstream, name),
     .max = 255, .check = upstream_name_check, .doc = "what routes name; 1 to 63 of `A-Z a-z 0-9 _ . -`, unique"},
    {.name = "keepalive", .type = CONFIG_KEY_INT, AT(struct config_upstream, keepalive), .min = 0, .max = 10000,
     .def = "32", .doc = "idle connections kept per server per worker; 0 keeps none"},
    {.name = "max_fails", .type = CONFIG_KEY_INT, AT(struct config_upstream, max_fails), .min = 0, .max = 1000,
     .def = "3", .doc = "failed connects in a row that mark a server down; 0: never"},
    {.name = "fail_timeout", .type = CONFIG_KEY_DURATION, AT(struct config_upstream, fail_timeout), DAYS49,
     .def = "10s", .doc = "the window between failures, and how long a server stays down"},
    {.name = "balance", .type = CONFIG_KEY_ENUM, AT(struct config_upstream, balance), .def = "rr",
     .names = upstream_balance_names, .nnames = 5,
     .doc = "`\"rr\"` smooth weighted round robin; `\"random\"` weighted; `\"least_request\"` the least busy of "
            "`choices` drawn, by node-wide requests in flight over weight; `\"ring_hash\"` and `\"maglev\"` by "
            "`hash_key`"},
    {.name = "slow_start", .type = CONFIG_KEY_DURATION_OFF, AT(struct config_upstream, slow_start), DAYS49,
     .def = "off", .doc = "a server that joins on a reload, or returns healthy or from ejection, ramps its weight "
                        "from 10 % over this window"},
    {.name = "choices", .type = CONFIG_KEY_INT, AT(struct config_upstream, choices), .min = 2, .max = 8, .def = "2",
     .doc = "servers `least_request` draws at random and compares"},
    {.name = "hash_key", .type = CONFIG_KEY_STRING, .max = 80, .def = "client_ip", .store = config_store_hash_key,
     .show = config_show_hash_key,
     .doc = "what `ring_hash` and `maglev` hash: `\"client_ip\"`, `\"path\"`, `\"header:NAME\"`, "
            "`\"cookie:NAME\"` or `\"query:NAME\"`"},
    {.name = "hash_fallback", .type = CONFIG_KEY_STRING, .max = 16, .def = "random",
     .store = config_store_hash_fallback, .show = config_show_hash_fallback,
     .doc = "a request without its `hash_key`: `\"random\"`, `\"rr\"` or `\"client_ip\"`"},
    {.name = "bounded_load", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_NUMBER, .max = 16, .def = "off", .store = config_store_bounded_load,
     .show = config_show_bounded_load,
     .doc = "`ring_hash` and `maglev`: no server takes more than this factor (1 to 100) times the mean in flight"},
    {.name = "tls", .type = CONFIG_KEY_GROUP, .def = "absent: plain HTTP", .sub = &config_keys_upstream_tls,
     .doc = "TLS to every server of the group"},
    {.name = "proxy_protocol", .type = CONFIG_KEY_ENUM, AT(struct config_upstream, proxy_protocol), .def = "off",
     .names = upstream_pp_names, .nnames = 3,
     .doc = "a PROXY header with the client's address opens each connection; no pooling then"},
    {.name = "protocol", .type = CONFIG_KEY_ENUM, AT(struct config_upstream, protocol), .def = "http/1.1",
     .names = upstream_protocol_names, .nnames = 3,
     .doc = "what weir speaks to the servers: `\"http/1.1\"`, `\"h2c\"` (HTTP/2 with prior knowledge, plain) or "
            "`\"h2\"` (HTTP/2 over the group's `tls`, ALPN h2); HTTP/2 sessions are pooled and multiplexed"},
    {.name = "outlier", .type = CONFIG_KEY_GROUP, .def = "absent: no ejection", .sub = &config_keys_upstream_outlier,
     .doc = "passive ejection of failing servers, node-wide"},
    {.name = "limits", .type = CONFIG_KEY_GROUP, .def = "absent: no caps", .sub = &config_keys_upstream_limits,
     .doc = "caps on requests and connections in flight, node-wide"},
    {.name = "breaker", .type = CONFIG_KEY_GROUP, .def = "absent: no breaker", .sub = &config_keys_upstream_breaker,
     .doc = "a circuit breaker over the group, node-wide"},
    {.name = "adaptive_concurrency", .type = CONFIG_KEY_GROUP, .def = "absent: no adaptive cap",
     .sub = &config_keys_upstream_adaptive_conc,
     .doc = "a gradient controller's cap on requests in flight, node-wide, from the group's latency"},
    {.name = "retry", .type = CONFIG_KEY_GROUP, .def = "absent: connect failures go to the next server, unbounded",
     .sub = &config_keys_upstream_retry, .doc = "when and how often a request is sent again"},
    {.name = "health", .type = CONFIG_KEY_GROUP, .def = "absent: no active checks",
     .sub = &config_keys_upstream_health, .doc = "active health checks of every server, one prober per node"},
    {.name = "servers", .type = CONFIG_KEY_LIST, .flags = CONFIG_KEY_REQUIRED, .sub = &config_keys_server,
     .doc = "the servers, at least one"},
    {.name = "timeouts", .type = CONFIG_KEY_GROUP, .def = "absent: the global ones",
     .sub = &config_keys_upstream_timeouts, .doc = "per-request timeouts for the routes to this group"},
    {.name = "request_limits", .type = CONFIG_KEY_GROUP, .def = "absent: the global ones",
     .sub = &config_keys_upstream_request_limits, .doc = "per-request limits (`limits` keys) for the routes to this group"},
    {.name = "headers", .type = CONFIG_KEY_GROUP, .def = "absent: none", .sub = &config_keys_headers,
     .doc = "[header rules](#header-rules) for the routes to this group, before theirs"},
};
KEYSET(config_keys_upstream, "upstreams", "in upstreams entry", upstream_keys);

static const struct config_key route_keys[] = {
    {.name = "host", .type = CONFIG_KEY_STRING, .max = CONFIG_HOST_MAX - 1, .def = "*",
     .store = config_store_route_host, .show = route_host_show,
     .doc = "`\"*\"`, `\"*.example.com\"` or `\"example.com\"`"},
    {.name = "path", .type = CONFIG_KEY_STRING, AT(struct config_route, path), FITS(struct config_route, path),
     .def = "/", .check = config_check_route_path, .show = config_show_route_path,
     .doc = "a path prefix, starting with `/`"},
    {.name = "upstream", .type = CONFIG_KEY_STRING, .max = 255, .show = route_upstream_show,
     .doc = "the `name` of an upstream; required unless the route has a `return`"},
    {.name = "upgrade", .type = CONFIG_KEY_STRINGS, .def = "`[ \"websocket\" ]`",
     .doc = "Upgrade protocols passed on as tunnels; `[ ]`: none; never `h2c`"},
    {.name = "return", .type = CONFIG_KEY_GROUP, .def = "absent: proxied", .sub = &config_keys_route_return,
     .doc = "answered by weir: a redirect or a fixed body ([direct responses](#direct-responses))"},
    {.name = "log", .type = CONFIG_KEY_BOOL, AT(struct config_route, log), .def = "true",
     .doc = "`false`: no access log line for the route's requests"},
    {.name = "log_sample", .type = CONFIG_KEY_STRING, .max = 16, .def = "1", .store = config_store_log_sample,
     .show = config_show_log_sample, .doc = "the share of requests logged, `\"0\"` to `\"1\"`, such as `\"0.1\"`"},
    {.name = "abort_on_client_close", .type = CONFIG_KEY_BOOL, AT(struct config_route, abort_on_client_close),
     .flags = CONFIG_KEY_INHERIT, .def = "the top level's",
     .doc = "the top-level [`abort_on_client_close`](#abort_on_client_close) for this route's requests"},
    {.name = "timeouts", .type = CONFIG_KEY_GROUP, .def = "absent: its upstream's", .sub = &config_keys_route_timeouts,
     .doc = "per-request timeouts for this route, over its upstream's"},
    {.name = "limits", .type = CONFIG_KEY_GROUP, .def = "absent: its upstream's", .sub = &config_keys_route_limits,
     .doc = "per-request limits for this route, over its upstream's"},
    {.name = "auth", .type = CONFIG_KEY_GROUP, .def = "absent: none", .sub = &config_keys_route_auth,
     .doc = "authentication: API keys, JWT or Basic ([auth](#authentication))"},
    {.name = "rate_limits", .type = CONFIG_KEY_STRINGS, .def = "`[ ]`",
     .doc = "names of `rate_limits` entries, up to 8, all checked for each request"},
    {.name = "compress", .type = CONFIG_KEY_GROUP, .def = "absent: the top level's", .sub = &config_keys_route_compress,
     .doc = "response compression, its keys over the top level's ([compression](#compress))"},
    /* matching and rewrites (common/config_match.c reads them) */
    {.name = "path_exact", .type = CONFIG_KEY_STRING, .max = CONFIG_PATH_MAX - 1, .check = config_check_route_path,
     .show = config_show_path_exact, .doc = "the whole path, instead of `path`: `\"/x\"` matches `/x` only"},
    {.name = "path_regex", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .show = config_show_path_regex,
     .doc = "a PCRE2 regular expression the path must match, among the routes of `path`"},
    {.name = "methods", .type = CONFIG_KEY_STRINGS, .def = "absent: any",
     .doc = "the request methods it takes, such as `[ \"GET\", \"HEAD\" ]`"},
    {.name = "match_headers", .type = CONFIG_KEY_LIST, .def = "absent: none", .sub = &config_keys_route_match_header,
     .doc = "up to 8 request header conditions, all to be met"},
    {.name = "match_query", .type = CONFIG_KEY_LIST, .def = "absent: none", .sub = &config_keys_route_match_query,
     .doc = "up to 8 query argument conditions, all to be met"},
    {.name = "strip_prefix", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_TRUE_OK, .max = CONFIG_PATH_MAX - 1,
     .show = config_show_strip_prefix,
     .doc = "`true`: the route's `path` is cut from the path forwarded; or the prefix to cut, such as `\"/api\"`"},
    {.name = "rewrite", .type = CONFIG_KEY_GROUP, .def = "absent: none", .sub = &config_keys_route_rewrite,
     .doc = "the forwarded path rewritten by a regex with captures"},
    {.name = "headers", .type = CONFIG_KEY_GROUP, .def = "absent: its upstream's", .sub = &config_keys_headers,
     .doc = "[header rules](#header-rules): set, add, remove request and response headers, after its upstream's"},
    {.name = "split", .type = CONFIG_KEY_LIST, .def = "absent: `upstream`", .sub = &config_keys_route_split,
     .doc = "instead of `upstream`: 1 to 8 groups sharing the route's requests by weight ([splits](#splits))"},
    {.name = "split_key", .type = CONFIG_KEY_STRING, .max = 127, .check = config_check_split_key,
     .show = config_show_split_key,
     .doc = "what keeps a user on one side: `client_ip`, `header:NAME`, `cookie:NAME` or `query:NAME`; "
            "absent: each request drawn by weight"},
    {.name = "split_override", .type = CONFIG_KEY_GROUP, .def = "absent: none",
     .sub = &config_keys_route_split_override, .doc = "a header or cookie naming the side's group forces it"},
    {.name = "mirror", .type = CONFIG_KEY_GROUP, .def = "absent: none", .sub = &config_keys_route_mirror,
     .doc = "copies of a share of the requests to a shadow group, answers discarded ([mirroring](#mirroring))"},
};
KEYSET(config_keys_route, "routes", "in routes entry", route_keys);

static const struct config_key route_match_header_keys[] = {
    {.name = "name", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, AT(struct config_match_entry, name),
     FITS(struct config_match_entry, name), .doc = "the header's name, compared without case"},
    {.name = "exact", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .doc = "a value it must equal"},
    {.name = "prefix", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .doc = "a prefix its value must have"},
    {.name = "regex", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .doc = "a PCRE2 regex its value must match"},
    {.name = "present", .type = CONFIG_KEY_BOOL, AT(struct config_match_entry, present),
     .doc = "`true`: the header must be there; `false`: it must not"},
};
KEYSET(config_keys_route_match_header, "routes.match_headers", "in routes.match_headers entry",
       route_match_header_keys);

static const struct config_key route_match_query_keys[] = {
    {.name = "name", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, AT(struct config_match_entry, name),
     FITS(struct config_match_entry, name), .doc = "the argument's name, compared as sent"},
    {.name = "exact", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .doc = "a value it must equal"},
    {.name = "prefix", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .doc = "a prefix its value must have"},
    {.name = "regex", .type = CONFIG_KEY_STRING, .max = MATCH_TEXT_MAX - 1, .doc = "a PCRE2 regex its value must match"},
    {.name = "present", .type = CONFIG_KEY_BOOL, AT(struct config_match_entry, present),
     .doc = "`true`: the argument must be there; `false`: it must not"},
};
KEYSET(config_keys_route_match_query, "routes.match_query", "in routes.match_query entry", route_match_query_keys);

static const struct config_key route_rewrite_keys[] = {
    {.name = "regex", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, .max = MATCH_TEXT_MAX - 1,
     .doc = "a PCRE2 regex applied to the path (after `strip_prefix`)"},
    {.name = "replace", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, .max = MATCH_TEXT_MAX - 1,
     .doc = "what replaces its first match: `$1`, `${1}`, `${name}` are its groups, `$$` a `$`"},
};
KEYSET(config_keys_route_rewrite, "routes.rewrite", "in routes.rewrite", route_rewrite_keys);

static const struct config_key route_split_keys[] = {
    {.name = "upstream", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, .max = CONFIG_NAME_MAX - 1,
     .doc = "the `name` of an upstream, once per split"},
    {.name = "weight", .type = CONFIG_KEY_INT, .flags = CONFIG_KEY_REQUIRED, AT(struct config_split_side, weight),
     .min = 0, .max = 10000, .doc = "its share: weight over the sum of the weights"},
};
KEYSET(config_keys_route_split, "routes.split", "in routes.split entry", route_split_keys);

static const struct config_key route_split_override_keys[] = {
    {.name = "header", .type = CONFIG_KEY_STRING, .check = config_check_split_name,
     .doc = "a request header whose value is the name of a side's group"},
    {.name = "cookie", .type = CONFIG_KEY_STRING, .check = config_check_split_name,
     .doc = "a cookie whose value is the name of a side's group"},
};
KEYSET(config_keys_route_split_override, "routes.split_override", "in routes.split_override",
       route_split_override_keys);

static const struct config_key route_mirror_keys[] = {
    {.name = "upstream", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, .max = CONFIG_NAME_MAX - 1,
     .doc = "the shadow group: plain HTTP, without `tls` or `proxy_protocol`"},
    {.name = "percent", .type = CONFIG_KEY_INT, .flags = CONFIG_KEY_REQUIRED, AT(struct config_mirror, percent),
     .min = 1, .max = 100, .doc = "the share of the route's requests copied, each drawn at random"},
    {.name = "max_in_flight", .type = CONFIG_KEY_INT, AT(struct config_mirror, max_in_flight), .def = "64",
     .min = 1, .max = 10000, .doc = "copies of the route's requests in flight per worker; more are dropped"},
};
KEYSET(config_keys_route_mirror, "routes.mirror", "in routes.mirror", route_mirror_keys);

static const struct config_key route_return_keys[] = {
    {.name = "status", .type = CONFIG_KEY_INT, .flags = CONFIG_KEY_REQUIRED, AT(struct policy_return, status),
     .min = 200, .max = 599, .doc = "the answer's status; 301, 302, 303, 307 and 308 need a `location`"},
    {.name = "location", .type = CONFIG_KEY_STRING, .max = VARS_TEXT - 1,
     .store = config_store_return_location, .show = config_show_return_location,
     .doc = "a redirect's target, with [variables](#variables)"},
    {.name = "body", .type = CONFIG_KEY_STRING, .max = VARS_TEXT - 1,
     .store = config_store_return_body, .show = config_show_return_body,
     .doc = "the body, with [variables](#variables); absent: none"},
    {.name = "content_type", .type = CONFIG_KEY_STRING, AT(struct policy_return, content_type),
     FITS(struct policy_return, content_type), .def = "text/plain", .check = config_check_content_type,
     .doc = "the body's Content-Type"},
};
KEYSET(config_keys_route_return, "routes.return", "in routes.return", route_return_keys);

#define TIMEOUT(n, d, text)                                                                               \
	{.name = #n, .type = CONFIG_KEY_DURATION, AT(struct config_timeouts, n), DAYS49, .def = d, .doc = text}

static const struct config_key timeout_keys[] = {
    TIMEOUT(client_header, "10s", "the whole request head must arrive in it, else 408"),
    TIMEOUT(client_body, "30s", "longest silence while reading a request body, else 408"),
    TIMEOUT(client_keepalive, "60s", "how long an idle client connection is kept between requests"),
    TIMEOUT(client_send, "30s", "longest time a client may take none of our bytes; then it is closed"),
    TIMEOUT(upstream_connect, "5s", "connecting to a server; then the next one, 504 when none is left"),
    TIMEOUT(upstream_send, "60s", "longest time an upstream may take none of the request, else 504"),
    TIMEOUT(upstream_read, "60s", "longest silence while waiting for response bytes, else 504"),
    TIMEOUT(upstream_keepalive, "60s", "how long an idle pooled upstream connection is kept"),
    TIMEOUT(drain, "30s", "on a graceful stop, how long in-flight requests get to finish"),
    {.name = "rate_window", .type = CONFIG_KEY_DURATION_OFF, AT(struct config_timeouts, rate_window), DAYS49,
     .def = "20s", .doc = "the minimum client rates are averaged over it; 0 turns both checks off"},
    {.name = "request", .type = CONFIG_KEY_DURATION_OFF, AT(struct config_timeouts, request), DAYS49,
     .def = "off", .doc = "a cap on the whole request, first byte to the answer's last; 0: none"},
    TIMEOUT(slab_idle, "30s", "slab memory wholly unused this long goes back to the kernel"),
    TIMEOUT(tunnel, "1h", "longest silence either way in an upgraded tunnel (WebSocket)"),
    TIMEOUT(tunnel_drain, "5m", "a draining worker keeps its open tunnels this long, instead of `drain`"),
    TIMEOUT(proxy_protocol, "5s",
            "a PROXY header must arrive in it, else close ([PROXY protocol](#proxy-protocol-behind-an-l4-balancer))"),
};
KEYSET(config_keys_timeouts, "timeouts", "in timeouts", timeout_keys);

static const struct config_key limit_keys[] = {
    {.name = "header_size", .type = CONFIG_KEY_SIZE, AT(struct config_limits, header_size), .min = 1024,
     .max = 65536, .def = "16k", .doc = "request line plus headers, bytes; 431 past it"},
    {.name = "headers", .type = CONFIG_KEY_INT, AT(struct config_limits, headers), .min = 1, .max = 1000,
     .def = "100", .doc = "request headers; 431 past it"},
    {.name = "uri_size", .type = CONFIG_KEY_SIZE, AT(struct config_limits, uri_size), .min = 64, .max = 65536,
     .def = "8k", .doc = "request target, bytes, at most `header_size`; 414 past it"},
    {.name = "body_size", .type = CONFIG_KEY_SIZE, AT(struct config_limits, body_size), .min = 0,
     .max = UINT64_MAX, .def = "100m", .doc = "request body, bytes; 0: unlimited; 413 past it"},
    {.name = "connections", .type = CONFIG_KEY_INT, AT(struct config_limits, connections), .min = 1,
     .max = 1000000, .def = "16384", .doc = "open client connections per worker"},
    {.name = "response_header_size", .type = CONFIG_KEY_SIZE, AT(struct config_limits, response_header_size),
     .min = 1024, .max = 65536, .def = "16k", .doc = "upstream status line plus headers, bytes; 502 past it"},
    /* a buffered body is held in one slab object: 1 MiB keeps that sane */
    {.name = "body_buffer", .type = CONFIG_KEY_SIZE, AT(struct config_limits, body_buffer), .min = 0,
     .max = 1048576, .def = "64k",
     .doc = "bodies up to it are read whole before a server is picked (never a gRPC one: its messages stream); 0: stream all"},
    {.name = "client_body_rate", .type = CONFIG_KEY_SIZE, AT(struct config_limits, client_body_rate), .min = 0,
     .max = UINT32_MAX, .def = "512", .doc = "bytes per second a request body must arrive at; 0: no minimum; 408"},
    {.name = "client_send_rate", .type = CONFIG_KEY_SIZE, AT(struct config_limits, client_send_rate), .min = 0,
     .max = UINT32_MAX, .def = "512", .doc = "bytes per second a client must take the response at; 0: no minimum"},
    {.name = "pipe_budget", .type = CONFIG_KEY_SIZE, AT(struct config_limits, pipe_budget), .min = 1024,
     .max = 16777216, .def = "64k", .doc = "body bytes a stream holds read and not yet written on, each way"},
    /* one slab object per body streaming: 1 MiB keeps that sane */
    {.name = "stream_buffer", .type = CONFIG_KEY_SIZE, AT(struct config_limits, stream_buffer), .min = 0,
     .max = 1048576, .def = "64k",
     .doc = "read buffer of an HTTP/1 upstream's response body, or an HTTP/1 client's request body, longer than the I/O buffer; 0 or not above the I/O buffer: the I/O buffer"},
    {.name = "stream_buffers", .type = CONFIG_KEY_INT, AT(struct config_limits, stream_buffers), .min = 0,
     .max = 1000000, .def = "1024", .doc = "stream buffers a worker holds at once; past it the I/O buffer serves"},
};
KEYSET(config_keys_limits, "limits", "in limits", limit_keys);

static const char *const rl_mode_names[] = {"reject", "delay", "dry_run"};
static const char *const rl_missing_names[] = {"skip", "shared"};
static const char *const rl_scope_names[] = {"local", "cluster"};

static const struct config_key rate_limit_keys[] = {
    {.name = "name", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED,
     AT(struct config_rate_limit, name), .max = 255, .check = upstream_name_check,
     .doc = "what routes name; 1 to 63 of `A-Z a-z 0-9 _ . -`, unique"},
    {.name = "key", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED, AT(struct config_rate_limit, key),
     FITS(struct config_rate_limit, key), .check = config_check_rl_key,
     .doc = "`client_ip`, `header:NAME`, `cookie:NAME`, `query:NAME`, `route`, joined by `+`"},
    {.name = "rate", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL, AT(struct config_rate_limit, rate),
     FITS(struct config_rate_limit, rate), .check = config_check_rl_rate,
     .doc = "requests per second, minute or hour: `\"100/s\"`, `\"6000/m\"`; or `concurrent`"},
    {.name = "burst", .type = CONFIG_KEY_INT, AT(struct config_rate_limit, burst), .min = 1, .max = 1000000,
     .def = "1", .doc = "requests admitted at once from rest (`delay`: queued at most)"},
    {.name = "concurrent", .type = CONFIG_KEY_INT, AT(struct config_rate_limit, concurrent), .min = 0,
     .max = 1000000, .def = "0", .doc = "requests in flight per key, instead of a `rate`; 0: a rate limit"},
    {.name = "mode", .type = CONFIG_KEY_ENUM, AT(struct config_rate_limit, mode), .def = "reject",
     .names = rl_mode_names, .nnames = 3,
     .doc = "`\"reject\"`, `\"delay\"` (queue up to `burst`) or `\"dry_run\"` (count and log only)"},
    {.name = "missing", .type = CONFIG_KEY_ENUM, AT(struct config_rate_limit, missing), .def = "skip",
     .names = rl_missing_names, .nnames = 2,
     .doc = "a request without the key: `\"skip\"` (not limited) or `\"shared\"` (one key for all such)"},
    {.name = "status", .type = CONFIG_KEY_INT, AT(struct config_rate_limit, status), .min = 400, .max = 599,
     .def = "429", .doc = "the status of a refusal"},
    {.name = "legacy_headers", .type = CONFIG_KEY_BOOL, AT(struct config_rate_limit, legacy_headers),
     .def = "false", .doc = "send `X-RateLimit-Limit`, `-Remaining` and `-Reset` as well"},
    {.name = "ipv4_mask", .type = CONFIG_KEY_INT, AT(struct config_rate_limit, ipv4_mask), .min = 1, .max = 32,
     .def = "32", .doc = "`client_ip`: IPv4 prefix length that makes one key"},
    {.name = "ipv6_mask", .type = CONFIG_KEY_INT, AT(struct config_rate_limit, ipv6_mask), .min = 1, .max = 128,
     .def = "64", .doc = "`client_ip`: IPv6 prefix length that makes one key"},
    {.name = "scope", .type = CONFIG_KEY_ENUM, AT(struct config_rate_limit, scope), .def = "local",
     .names = rl_scope_names, .nnames = 2,
     .doc = "`\"cluster\"`: shared with other nodes through `redis` (a rate only)"},
    {.name = "fail_closed", .type = CONFIG_KEY_BOOL, AT(struct config_rate_limit, fail_closed), .def = "false",
     .doc = "`scope = \"cluster\"`: refuse while redis cannot be reached, rather than admit from local state"},
    {.name = "adaptive", .type = CONFIG_KEY_GROUP, .def = "absent: a fixed rate",
     .sub = &config_keys_rate_limit_adaptive,
     .doc = "the rate follows an upstream's health: 0.6x over `latency_p99`, 0.3x over 5% errors or breaker open"},
};
KEYSET(config_keys_rate_limit, "rate_limits", "in rate_limits entry", rate_limit_keys);

static const struct config_key rl_adaptive_keys[] = {
    {.name = "upstream", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_REQUIRED,
     AT(struct config_rate_limit, adaptive.upstream), .max = 255, .check = upstream_name_check,
     .doc = "the upstream group whose health the rate follows"},
    {.name = "latency_p99", .type = CONFIG_KEY_DURATION, AT(struct config_rate_limit, adaptive.latency_p99),
     DAYS49, .def = "1s", .doc = "above this p99 of the upstream's latency over `window`, the rate is 0.6x"},
    {.name = "floor", .type = CONFIG_KEY_STRING, .flags = CONFIG_KEY_OPTIONAL,
     AT(struct config_rate_limit, adaptive.floor), FITS(struct config_rate_limit, adaptive.floor),
     .check = config_check_rl_rate, .doc = "the rate never goes below this (`\"10/s\"`); absent: no floor"},
    {.name = "window", .type = CONFIG_KEY_DURATION, AT(struct config_rate_limit, adaptive.window), .min = 1000,
     .max = 60000, .def = "10s", .doc = "the window the p99 and error ratio are taken over, 1s to 60s"},
};
KEYSET(config_keys_rate_limit_adaptive, "rate_limits.adaptive", "in rate_limits.adaptive", rl_adaptive_keys);

static const struct config_key redis_keys[] = {
    {.name = "address", .type = CONFIG_KEY_ADDR, .flags = CONFIG_KEY_REQUIRED, AT(struct config, redis_addr),
     .doc = "the redis server's IP address and port"},
    {.name = "interval", .type = CONFIG_KEY_DURATION, AT(struct config, redis_interval), DAYS49,
     .def = "100ms", .doc = "how often each node reconciles its cluster limits with redis"},
};
KEYSET(config_keys_redis, "redis", "in redis", redis_keys);

static const struct config_key http2_keys[] = {
    {.name = "max_concurrent_streams", .type = CONFIG_KEY_INT, AT(struct config_http2, max_concurrent_streams),
     .min = 1, .max = 1000, .def = "100",
     .doc = "streams open at once per connection; a reset stream counts until its upstream work is torn down"},
    {.name = "max_resets", .type = CONFIG_KEY_INT, AT(struct config_http2, max_resets), .min = 1, .max = 100000,
     .def = "100", .doc = "client resets of unanswered streams a second before GOAWAY ENHANCE_YOUR_CALM"},
    {.name = "max_continuations", .type = CONFIG_KEY_INT, AT(struct config_http2, max_continuations), .min = 1,
     .max = 1000, .def = "8", .doc = "CONTINUATION frames after one HEADERS frame"},
    {.name = "control_frames", .type = CONFIG_KEY_INT, AT(struct config_http2, control_frames), .min = 10,
     .max = 1000000, .def = "1000",
     .doc = "PING, SETTINGS, WINDOW_UPDATE, PRIORITY and empty DATA frames a second before GOAWAY"},
    {.name = "overhead_ratio", .type = CONFIG_KEY_INT, AT(struct config_http2, overhead_ratio), .min = 0,
     .max = 1000, .def = "8",
     .doc = "bytes a connection may send per byte of payload (DATA, header fields), past 1 MiB, before GOAWAY; 0: no bound"},
    {.name = "header_table_size", .type = CONFIG_KEY_INT, AT(struct config_http2, header_table_size), .min = 0,
     .max = 65536, .def = "4096", .doc = "HPACK dynamic table size, both directions"},
    {.name = "settings_timeout", .type = CONFIG_KEY_DURATION, AT(struct config_http2, settings_timeout),
     DAYS49, .def = "10s", .doc = "how long the client may take to acknowledge SETTINGS"},
    {.name = "websocket", .type = CONFIG_KEY_BOOL, AT(struct config_http2, websocket), .def = "true",
     .doc = "WebSocket over HTTP/2 (RFC 8441 extended CONNECT, SETTINGS_ENABLE_CONNECT_PROTOCOL)"},
};
KEYSET(config_keys_http2, "http2", "in http2", http2_keys);

/* read from true, false or "auto" */
static const char *const affinity_names[] = {"false", "true", "auto"};
static const char *const steering_names[] = {"cpu", "hash"};

static const struct config_key top_keys[] = {
    {.name = "workers", .type = CONFIG_KEY_INT, .flags = CONFIG_KEY_AUTO, AT(struct config, workers), .min = 1,
     .max = CONFIG_MAX_WORKERS, .def = "auto", .doc = "worker processes; `\"auto\"`: one per online core"},
    {.name = "master_process", .type = CONFIG_KEY_BOOL, AT(struct config, master_process), .def = "true",
     .doc = "`false`: the one worker runs without a master (profiling); needs `workers = 1`"},
    {.name = "worker_cpu_affinity", .type = CONFIG_KEY_ENUM, AT(struct config, worker_cpu_affinity),
     .def = "auto", .names = affinity_names, .nnames = 3,
     .doc = "pin worker i to the i-th allowed CPU; `\"auto\"`: when `workers` equals the online cores"},
    {.name = "reuseport_steering", .type = CONFIG_KEY_ENUM, AT(struct config, reuseport_steering), .def = "hash",
     .names = steering_names, .nnames = 2,
     .doc = "`\"cpu\"`: a connection goes to the worker on the CPU that received it (with affinity on); "
            "`\"hash\"`: the kernel's hash"},
    {.name = "pid_file", .type = CONFIG_KEY_STRING, AT(struct config, pid_file), FITS(struct config, pid_file),
     .def = "", .doc = "where the master writes its pid; `\"\"`: nowhere"},
    {.name = "user", .type = CONFIG_KEY_STRING, AT(struct config, user), FITS(struct config, user), .def = "",
     .doc = "the user workers run as when started as root; `\"\"`: no change"},
    {.name = "tls_ticket_rotate", .type = CONFIG_KEY_DURATION, AT(struct config, tls_ticket_rotate), DAYS49,
     .def = "12h", .doc = "how often a new TLS session ticket key is made"},
    {.name = "merge_slashes", .type = CONFIG_KEY_BOOL, AT(struct config, merge_slashes), .def = "true",
     .doc = "runs of `/` in a request path are one `/` for routing and forwarding"},
    {.name = "underscores_in_headers", .type = CONFIG_KEY_BOOL, AT(struct config, underscores_in_headers),
     .def = "true", .doc = "`false`: drop every request header with `_` in its name"},
    {.name = "abort_on_client_close", .type = CONFIG_KEY_BOOL, AT(struct config, abort_on_client_close),
     .def = "true",
     .doc = "a client that closes before its answer takes its upstream request with it (logged 499); "
            "`false`: the request goes on ([client closes](#abort_on_client_close)); routes may say otherwise"},
    {.name = "trusted_proxies", .type = CONFIG_KEY_STRINGS, .def = "`[ ]`",
     .doc = "peers whose X-Forwarded-For is believed ([real client addresses](#real-client-addresses))"},
    {.name = "real_ip_depth", .type = CONFIG_KEY_INT, AT(struct config, real_ip_depth), .min = 1,
     .max = POLICY_DEPTH_MAX, .def = "1", .doc = "X-Forwarded-For entries believed from the right, at most"},
    {.name = "request_id", .type = CONFIG_KEY_BOOL, AT(struct config, request_id), .def = "false",
     .doc = "X-Request-Id kept from a trusted peer or made, sent upstream and back"},
    {.name = "log", .type = CONFIG_KEY_GROUP, .def = "see [log](#log)", .sub = &config_keys_log,
     .doc = "the error and access logs"},
    {.name = "stats", .type = CONFIG_KEY_GROUP, .def = "absent: no stats socket", .sub = &config_keys_stats,
     .doc = "the metrics and admin socket"},
    {.name = "listeners", .type = CONFIG_KEY_LIST, .flags = CONFIG_KEY_REQUIRED, .sub = &config_keys_listener,
     .doc = "1 to 32 addresses clients connect to"},
    {.name = "upstreams", .type = CONFIG_KEY_LIST, .flags = CONFIG_KEY_REQUIRED, .sub = &config_keys_upstream,
     .doc = "1 to 256 named groups of servers"},
    {.name = "routes", .type = CONFIG_KEY_LIST, .flags = CONFIG_KEY_REQUIRED, .sub = &config_keys_route,
     .doc = "1 to 65536 (host, path prefix) to upstream rules"},
    {.name = "timeouts", .type = CONFIG_KEY_GROUP, .def = "see [timeouts](#timeouts)",
     .sub = &config_keys_timeouts, .doc = "how long weir waits"},
    {.name = "limits", .type = CONFIG_KEY_GROUP, .def = "see [limits](#limits)", .sub = &config_keys_limits,
     .doc = "sizes and counts weir accepts"},
    {.name = "rate_limits", .type = CONFIG_KEY_LIST, .def = "absent: none", .sub = &config_keys_rate_limit,
     .doc = "0 to 64 named [rate limits](#rate_limits) that routes name"},
    {.name = "redis", .type = CONFIG_KEY_GROUP, .def = "absent: no cluster limits", .sub = &config_keys_redis,
     .doc = "where `scope = \"cluster\"` rate limits are reconciled"},
    {.name = "http2", .type = CONFIG_KEY_GROUP, .def = "see [http2](#http2)", .sub = &config_keys_http2,
     .doc = "the HTTP/2 server's bounds"},
    {.name = "rate_limit_table", .type = CONFIG_KEY_INT, AT(struct config, rate_limit_table), .min = 10,
     .max = 100000000, .def = "1048576",
     .doc = "keys the shared rate-limit table holds, 25.6 bytes each; read at start"},
    {.name = "compress", .type = CONFIG_KEY_GROUP, .def = "absent: off", .sub = &config_keys_compress,
     .doc = "gzip and brotli [compression](#compress) of responses"},
};
KEYSET(config_keys_top, "", "at top level", top_keys);
