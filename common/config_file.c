/*
 * config_file.c: weir's configuration file format (libconfig syntax) and its
 * checks; config_load() and config_free() of common/config.h.
 *
 * Principle: walk the libconfig tree once, group by group. Every group is
 * read against its table of descriptors (common/config_keys.c) by one
 * engine (common/config_engine.c): unknown names refused, defaults
 * applied, each value checked for its type and range, every problem
 * recorded with its file and line while the walk goes on, so one run of
 * `weir -t` reports everything that is wrong, not just the first thing.
 * What stays here, by hand, is what a descriptor cannot say: the lists
 * (listeners, upstreams and their servers, routes, certificates), the
 * rules across keys (a route's upstream must exist, TLS verification needs
 * a CA and a name, an address is used once) and the files read with the
 * configuration (certificates, CAs, the user). Only when nothing was
 * recorded does the caller get the struct; otherwise it is freed and
 * zeroed.
 *
 * docs/config.md is the reference for the format; keep the two together.
 *
 * Not named config.c: common/config is config.h alone, the types every
 * part of the loader shares (config_keys.c takes offsets into them), so
 * the includes run one way, config.h <- config_keys <- config_load.h <-
 * this file, with no cycle.
 *
 * Known limit: libconfig 1.5 silently truncates an integer literal above
 * 2147483647 unless it carries the L suffix; sizes that large are better
 * written as strings ("5g"), which common/config_engine.c parses itself.
 */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auth_conf.h"
#include "common/config_keys.h"
#include "common/config_load.h"
#include "common/config_match.h"
#include "common/fnv.h"
#include "common/tlscert.h"

#include <openssl/err.h>
#include <openssl/x509.h>

/* the short names every section uses */
#define fail config_fail
#define line_of config_line_of

static int is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int to_lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* ---- routes' host and path --------------------------------------------- */

/*
 * Checks a route host and stores its kind and form in <r>. Returns NULL or
 * what is wrong with it.
 */
static const char *route_host(const char *text, struct config_route *r)
{
	const char *h = text;
	size_t len, label = 0;
	char *out = r->host;

	if (strcmp(text, "*") == 0) {
		r->host_kind = CONFIG_HOST_ANY;
		r->host[0] = '\0';
		return NULL;
	}
	r->host_kind = CONFIG_HOST_EXACT;
	if (h[0] == '*' && h[1] == '.') {
		r->host_kind = CONFIG_HOST_WILDCARD;
		*out++ = '.';
		h += 2;
	}
	len = strlen(h);
	if (len == 0 || len > 253)
		return "must be a host name of 1 to 253 characters";
	for (const char *p = h; *p; p++) {
		if (*p == ':')
			return "must not include a port: routes match the host without it";
		if (*p == '*')
			return "may use '*' only alone or as the first label (\"*.example.com\")";
		if (*p == '.') {
			if (label == 0)
				return "has an empty label";
			label = 0;
		} else if (is_alpha(*p) || is_digit(*p) || *p == '-') {
			if (++label > 63)
				return "has a label longer than 63 characters";
		} else {
			return "may hold only letters, digits, '-' and '.'";
		}
		*out++ = (char)to_lower(*p);
	}
	if (label == 0)
		return "has an empty label";
	*out = '\0';
	return NULL;
}

static int route_hex(int c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/*
 * Requests are routed on their path as worker/http_path.c normalises it:
 * no dot segments, no encoded unreserved character, upper-case hex. 1 if
 * such a path can start with prefix <text>, which may end inside a
 * segment or an encoding ("/a/." matches "/a/.well-known", "/a%2" matches
 * "/a%2F").
 */
static int route_path_normal(const char *text)
{
	const char *seg = text + 1;

	for (const char *p = seg;; p++) {
		if (*p == '/') {
			size_t n = (size_t)(p - seg);

			if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
				return 0;
			seg = p + 1;
		} else if (*p == '%') {
			int h = (unsigned char)p[1], l, v;

			if (!h)
				return 1;
			l = (unsigned char)p[2];
			if (!(is_digit(h) || (h >= 'A' && h <= 'F')) || (l && !(is_digit(l) || (l >= 'A' && l <= 'F'))))
				return 0; /* not hex, or lower case */
			if (!l)
				return 1;
			v = route_hex(h) << 4 | route_hex(l);
			if (v == 0 || is_alpha(v) || is_digit(v) || v == '-' || v == '.' || v == '_' || v == '~')
				return 0;
			p += 2;
		} else if (!*p) {
			return 1;
		}
	}
}

/*
 * NULL, or why no request path can start with prefix <text> (already
 * normal as route_path_normal() checks): worker/http_path.c answers 400 to
 * a path holding '\' or "%5C", or a "." or ".." segment with parameters
 * (";" or "%3B" after the dots), whatever follows, so such a route is
 * never reached.
 */
static const char *route_path_refused(const char *text)
{
	for (const char *seg = text + 1;; seg++) {
		const char *p = seg;

		while (*p == '.')
			p++;
		if (p - seg >= 1 && p - seg <= 2 && (*p == ';' || strncmp(p, "%3B", 3) == 0))
			return "never matches: a request whose path has a \".\" or \"..\" segment with parameters "
			       "(\"..;x\", \"/.%3B/\") is refused (400), as Tomcat and Spring read it as a dot segment";
		for (; *p && *p != '/'; p++)
			if (*p == '\\' || strncmp(p, "%5C", 3) == 0)
				return "never matches: a request whose path holds '\\' or \"%5C\" is refused (400), as "
				       "IIS-style servers read it as '/'";
		if (!*p)
			return NULL;
		seg = p;
	}
}

static const char *route_path(const char *text)
{
	if (text[0] != '/')
		return "must start with '/'";
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		if (*p <= ' ' || *p == 0x7f)
			return "must not contain spaces or control characters";
		if (*p == '?' || *p == '#')
			return "must not contain a query or fragment ('?', '#')";
	}
	if (!route_path_normal(text))
		return "never matches: requests are routed on their normalised path, without \".\" or \"..\" "
		       "segments, with encoded letters, digits, '-', '.', '_' and '~' decoded and other encodings "
		       "in upper case (\"%2F\"); an encoding must be '%' and two hex digits, never \"%00\"";
	return route_path_refused(text);
}

static int find_upstream(const struct config *cfg, const char *name)
{
	for (int i = 0; i < cfg->nupstreams; i++)
		if (cfg->upstreams[i].name[0] && strcmp(cfg->upstreams[i].name, name) == 0)
			return i;
	return -1;
}

const char *config_host_text(int host_kind, const char *host, char *buf, size_t cap)
{
	if (host_kind == CONFIG_HOST_ANY)
		return "*";
	if (host_kind == CONFIG_HOST_WILDCARD) {
		snprintf(buf, cap, "*%s", host);
		return buf;
	}
	return host;
}

/* An Upgrade protocol as a route lists it: a token, or token/token. */
static int upgrade_token_valid(const char *v)
{
	int slash = 0;
	size_t n = strlen(v);

	if (n == 0 || v[0] == '/' || v[n - 1] == '/')
		return 0;
	for (; *v; v++) {
		if (*v == '/' && !slash++)
			continue;
		if (!isalnum((unsigned char)*v) && !strchr("!#$%&'*+-.^_`|~", *v))
			return 0;
	}
	return 1;
}

/* routes.upgrade = [ "websocket", ... ] into r->upgrade, lower case and
 * space-separated; absent: "websocket"; empty: upgrades off. Returns 1 if
 * good. */
static int route_upgrade(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	config_setting_t *s = config_setting_get_member(e, "upgrade");
	size_t len = 0;
	int n;

	if (!s) {
		strcpy(r->upgrade, "websocket");
		return 1;
	}
	if (!config_setting_is_aggregate(s)) {
		fail(ld, line_of(s), "routes.upgrade must be a list of strings: upgrade = [ \"websocket\" ];");
		return 0;
	}
	n = config_setting_length(s);
	for (int i = 0; i < n; i++) {
		const config_setting_t *t = config_setting_get_elem(s, (unsigned)i);
		const char *v = config_setting_get_string(t);
		size_t vl;

		if (!v || !upgrade_token_valid(v)) {
			fail(ld, line_of(s), "routes.upgrade entries must be protocol tokens such as \"websocket\"");
			return 0;
		}
		if (!strcasecmp(v, "h2c")) {
			fail(ld, line_of(s), "routes.upgrade \"h2c\" is not allowed: weir never forwards an h2c upgrade");
			return 0;
		}
		vl = strlen(v);
		if (len + vl + (len > 0) >= sizeof(r->upgrade)) {
			fail(ld, line_of(s), "routes.upgrade is too long (at most %zu bytes together)",
			     sizeof(r->upgrade) - 1);
			return 0;
		}
		if (len)
			r->upgrade[len++] = ' ';
		for (size_t k = 0; k < vl; k++)
			r->upgrade[len++] = (char)tolower((unsigned char)v[k]);
	}
	r->upgrade[len] = '\0';
	return 1;
}

const char *config_store_route_host(const char *text, void *route)
{
	return route_host(text, route);
}

const char *config_check_route_path(const char *text)
{
	return route_path(text);
}

/* ---- sections ---------------------------------------------------------- */

/* Is <a> on a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x)? */
static int addr_is_loopback(const struct config_addr *a)
{
	if (a->sa.ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)&a->sa;
		return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	}
	if (a->sa.ss_family == AF_INET6) {
		const struct in6_addr *ip = &((const struct sockaddr_in6 *)&a->sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(ip) || (IN6_IS_ADDR_V4MAPPED(ip) && ip->s6_addr[12] == 127);
	}
	return 0;
}

/*
 * The stats socket answers admin commands that change routing as well as
 * metrics: so a TCP address that is not loopback must be asked for twice
 * (allow_remote), and then its admin commands need a token (admin_token;
 * without one they are refused); a unix socket gets a file mode that
 * keeps it to its owner and group by default.
 */
static void load_stats(struct loader *ld, const config_setting_t *root)
{
	const struct config_keyset *ks = &config_keys_stats;
	struct config *cfg = ld->cfg;
	config_setting_t *g = config_get_group(ld, root, "stats", "stats");
	enum got got[CONFIG_KEYS_MAX];
	enum got gl;

	config_engine_read(ld, g, ks, cfg, got);
	if (!g)
		return;
	gl = config_engine_got(ks, got, "listen");
	if (gl == GOT_OK) {
		cfg->has_stats = 1;
		if (!cfg->stats_allow_remote && !addr_is_loopback(&cfg->stats))
			fail(ld, line_of(config_setting_get_member(g, "listen")),
			     "stats.listen \"%s\" is not a loopback address: anyone who reaches it can read the "
			     "metrics and change upstream servers; set stats.allow_remote = true to mean it",
			     cfg->stats.text);
	}
	if (gl == GOT_NONE && config_engine_got(ks, got, "unix") == GOT_NONE)
		fail(ld, line_of(g), "stats.listen is required unless stats.unix is given");
}

/*
 * client_ca, client_verify and client_header of listeners.tls group <g>:
 * the CA file is read here, as certificates are, so `weir -t` names a
 * missing or bad one; without it there is no verification to tune.
 */
static void load_listener_client_ca(struct loader *ld, const config_setting_t *g, struct config_listener *l,
                                    const enum got *got)
{
	const struct config_keyset *ks = &config_keys_listener_tls;
	char why[400];

	if (!l->client_ca[0])
		l->client_verify = CONFIG_CLIENT_VERIFY_OFF;
	if (config_engine_got(ks, got, "client_ca") == GOT_OK) {
		l->client_cas = tlsca_load(l->client_ca, why, sizeof why);
		if (!l->client_cas)
			fail(ld, line_of(config_setting_get_member(g, "client_ca")), "client_ca %s: %s", l->client_ca,
			     why);
	}
	if (config_engine_got(ks, got, "client_ca") == GOT_NONE &&
	    (config_engine_got(ks, got, "client_verify") != GOT_NONE ||
	     config_engine_got(ks, got, "client_header") != GOT_NONE))
		fail(ld, line_of(g),
		     "listeners.tls.client_verify and client_header need client_ca, the CA file "
		     "that signs client certificates");
}

/*
 * tls = { certificates = ( { cert = "..."; key = "..."; }, ... ); } of
 * listener entry <e>. Every file is read and checked here, so `weir -t`,
 * start-up and a reload all refuse a missing file, bad PEM or a key that
 * is not the certificate's, naming the certificate. Returns -1 only when
 * out of memory.
 */
static int load_listener_tls(struct loader *ld, const config_setting_t *e, struct config_listener *l)
{
	struct config *cfg = ld->cfg;
	config_setting_t *g = config_get_group(ld, e, "tls", "listeners.tls");
	config_setting_t *list;
	enum got got[CONFIG_KEYS_MAX];
	int n;

	if (!g)
		return 0;
	l->tls = 1;
	config_engine_read(ld, g, &config_keys_listener_tls, l, got);
	l->first_cert = cfg->ncerts;
	load_listener_client_ca(ld, g, l, got);
	list = config_get_list(ld, g, "certificates", "listeners.tls.certificates", 1, CONFIG_MAX_CERTS);
	if (!list)
		return 0;
	if (!cfg->certs && !(cfg->certs = calloc(CONFIG_MAX_CERTS, sizeof *cfg->certs)))
		return -1;
	n = config_setting_length(list);
	for (int i = 0; i < n; i++) {
		config_setting_t *ce = config_get_entry(ld, list, i, "listeners.tls.certificates");
		enum got cgot[CONFIG_KEYS_MAX];
		struct config_cert *c;
		char why[400];

		if (!ce)
			continue;
		if (cfg->ncerts == CONFIG_MAX_CERTS) {
			fail(ld, line_of(ce), "listeners.tls.certificates: at most %d certificates are allowed over all "
			     "listeners", CONFIG_MAX_CERTS);
			break;
		}
		c = &cfg->certs[cfg->ncerts++];
		l->ncerts++;
		c->line = line_of(ce);
		config_engine_read(ld, ce, &config_keys_cert, c, cgot);
		if (config_engine_got(&config_keys_cert, cgot, "cert") != GOT_OK ||
		    config_engine_got(&config_keys_cert, cgot, "key") != GOT_OK)
			continue;
		c->loaded = tlscert_load(c->cert, c->key, why, sizeof why);
		if (!c->loaded)
			fail(ld, c->line, "certificate %s: %s", c->cert, why);
		else if (c->ocsp[0] && tlscert_load_ocsp(c->loaded, c->ocsp, why, sizeof why) < 0)
			fail(ld, line_of(config_setting_get_member(ce, "ocsp")), "OCSP response %s: %s", c->ocsp, why);
	}
	return 0;
}

static int load_listeners(struct loader *ld, const config_setting_t *root)
{
	struct config *cfg = ld->cfg;
	config_setting_t *list = config_get_list(ld, root, "listeners", "listeners", 1, CONFIG_MAX_LISTENERS);
	int n = list ? config_setting_length(list) : 0;

	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_get_entry(ld, list, i, "listeners");
		struct config_listener *l = &cfg->listeners[cfg->nlisteners];
		enum got got[CONFIG_KEYS_MAX];

		if (!e)
			continue;
		/* the slot may hold an entry that failed: start it afresh */
		tlsca_free(l->client_cas);
		memset(l, 0, sizeof *l);
		l->line = line_of(e);
		config_engine_read(ld, e, &config_keys_listener, l, got);
		if (load_listener_tls(ld, e, l) < 0)
			return -1;
		if (config_engine_got(&config_keys_listener, got, "address") != GOT_OK)
			continue;
		for (int j = 0; j < cfg->nlisteners; j++) {
			if (strcmp(cfg->listeners[j].addr.text, l->addr.text) == 0) {
				fail(ld, line_of(config_setting_get_member(e, "address")),
				     "listeners.address \"%s\" is already used on line %d", l->addr.text,
				     cfg->listeners[j].line);
				break;
			}
		}
		cfg->nlisteners++;
	}
	return 0;
}

static void load_servers(struct loader *ld, const config_setting_t *ue, struct config_upstream *u, int capacity)
{
	struct config *cfg = ld->cfg;
	config_setting_t *list = config_get_list(ld, ue, "servers", "upstreams.servers", 1, CONFIG_MAX_SERVERS);
	int n = list ? config_setting_length(list) : 0;

	u->first_server = cfg->nservers;
	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_get_entry(ld, list, i, "upstreams.servers");
		struct config_server srv;

		if (!e)
			continue;
		config_engine_read(ld, e, &config_keys_server, &srv, NULL);
		if (cfg->nservers < capacity) {
			cfg->servers[cfg->nservers++] = srv;
			u->nservers++;
		}
	}
}

/* Counts the servers the upstreams declare, before they are checked, so the
 * array can be allocated once. */
static int count_servers(const config_setting_t *list)
{
	int total = 0, n = config_setting_length(list);

	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
		const config_setting_t *s;

		if (!config_setting_is_group(e))
			continue;
		s = config_setting_get_member(e, "servers");
		if (s && config_setting_is_list(s))
			total += config_setting_length(s);
	}
	return total;
}

/* FNV-1a of the bytes of file <path> (0 when unreadable): a worker's TLS
 * context made from a CA file is matched against a generation's group by
 * what the file held, not only by its name (worker/tls_client.c). */
static uint64_t file_digest(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint64_t h = FNV64_BASIS;
	unsigned char b[4096];
	size_t n;

	if (!f)
		return 0;
	while ((n = fread(b, 1, sizeof b, f)) > 0)
		h = fnv1a64(h, b, n);
	fclose(f);
	return h;
}

/*
 * tls = { ca = "..."; verify = true; sni = "..."; } of upstream entry <e>.
 * The servers are addressed by IP, so with verification on there is no
 * name to check unless one is given: sni is then required, and is the
 * name checked (RFC 6125 rules, X509_VERIFY_PARAM_set1_host). The CA file
 * is read here, so `weir -t`, start-up and reload refuse a bad one alike.
 * Returns -1 only when out of memory.
 */
static int load_upstream_tls(struct loader *ld, const config_setting_t *e, struct config_upstream *u)
{
	config_setting_t *g = config_get_group(ld, e, "tls", "upstreams.tls");
	enum got got[CONFIG_KEYS_MAX];
	enum got gc;

	if (!g)
		return 0;
	u->tls = 1;
	config_engine_read(ld, g, &config_keys_upstream_tls, u, got);
	gc = config_engine_got(&config_keys_upstream_tls, got, "ca");
	if (u->tls_verify && gc == GOT_NONE)
		fail(ld, line_of(g), "upstreams.tls.ca is required while verify is on (verify = false turns it off)");
	if (u->tls_verify && !config_setting_get_member(g, "sni"))
		fail(ld, line_of(g), "upstreams.tls.sni is required while verify is on: it is the name the "
		     "certificate must carry (the servers are addressed by IP)");
	if (gc != GOT_OK)
		return 0;
	if (!(u->tls_store = X509_STORE_new()))
		return -1;
	errno = 0;
	if (!X509_STORE_load_locations(u->tls_store, u->tls_ca, NULL)) {
		uint32_t err = ERR_peek_last_error();
		const char *r = err ? ERR_reason_error_string(err) : NULL;

		fail(ld, line_of(config_setting_get_member(g, "ca")), "upstreams.tls.ca %s: %s", u->tls_ca,
		     errno ? strerror(errno) : r ? r : "no certificate in it");
		ERR_clear_error();
		return 0;
	}
	u->tls_ca_sum = file_digest(u->tls_ca);
	return 0;
}

/* protocol of upstream entry <e>: what cannot work with it is refused. */
static void load_upstream_protocol(struct loader *ld, const config_setting_t *e, const struct config_upstream *u)
{
	const config_setting_t *k = config_setting_get_member(e, "protocol");

	if (u->protocol == 2 && !u->tls)
		fail(ld, line_of(k), "upstreams.protocol \"h2\" needs the group's tls = { ... } (ALPN h2); "
		     "\"h2c\" is HTTP/2 without TLS");
	if (u->protocol == 1 && u->tls)
		fail(ld, line_of(k), "upstreams.protocol \"h2c\" is HTTP/2 without TLS, and the group has tls: "
		     "write \"h2\" for HTTP/2 over TLS");
	if (u->protocol && u->proxy_protocol)
		fail(ld, line_of(k), "upstreams.protocol \"%s\" with proxy_protocol: an HTTP/2 session carries many "
		     "clients' requests, a PROXY header names one", u->protocol == 1 ? "h2c" : "h2");
	if (u->protocol && u->health.type == CONFIG_HEALTH_HTTP)
		fail(ld, u->health.line, "upstreams.health of type \"http\" speaks HTTP/1.1, and the group's protocol is "
		     "\"%s\": use type = \"tcp\" (a connect, and the TLS handshake)", u->protocol == 1 ? "h2c" : "h2");
}

/* timeouts = {...} and limits = {...} of upstream or route entry <e>, as
 * <tks> and <lks> describe them: the keys given, marked in <o>. */
static void load_overrides(struct loader *ld, const config_setting_t *e, const struct config_keyset *tks,
                           const struct config_keyset *lks, struct config_overrides *o)
{
	const struct config_keyset *ks[2] = {tks, lks};
	void *base[2] = {&o->timeouts, &o->limits};
	uint32_t *set[2] = {&o->timeouts_set, &o->limits_set};

	for (int k = 0; k < 2; k++) {
		/* the group's name: the last part of its path ("upstreams.request_limits") */
		config_setting_t *g = config_get_group(ld, e, strrchr(ks[k]->path, '.') + 1, ks[k]->path);
		enum got got[CONFIG_KEYS_MAX];

		if (!g)
			continue;
		config_engine_read(ld, g, ks[k], base[k], got);
		for (int i = 0; i < ks[k]->nkeys; i++)
			if (got[i] == GOT_OK)
				*set[k] |= 1u << i;
	}
}

static int load_upstreams(struct loader *ld, const config_setting_t *root)
{
	struct config *cfg = ld->cfg;
	config_setting_t *list = config_get_list(ld, root, "upstreams", "upstreams", 1, CONFIG_MAX_UPSTREAMS);
	int n, total;

	if (!list)
		return 0;
	n = config_setting_length(list);
	total = count_servers(list);
	if (total > CONFIG_MAX_SERVERS) {
		fail(ld, line_of(list), "upstreams have %d servers in all, at most %d are allowed", total,
		     CONFIG_MAX_SERVERS);
		total = CONFIG_MAX_SERVERS;
	}
	cfg->upstreams = calloc((size_t)n, sizeof *cfg->upstreams);
	cfg->servers = calloc((size_t)(total > 0 ? total : 1), sizeof *cfg->servers);
	if (!cfg->upstreams || !cfg->servers)
		return -1;
	cfg->nupstreams = n;

	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_get_entry(ld, list, i, "upstreams");
		struct config_upstream *u = &cfg->upstreams[i];
		enum got got[CONFIG_KEYS_MAX];

		if (!e)
			continue;
		config_engine_read(ld, e, &config_keys_upstream, u, got);
		for (int j = 0; j < i && config_engine_got(&config_keys_upstream, got, "name") == GOT_OK; j++) {
			if (strcmp(cfg->upstreams[j].name, u->name) == 0) {
				fail(ld, line_of(config_setting_get_member(e, "name")),
				     "upstream \"%s\" is already defined on line %d", u->name,
				     line_of(config_setting_get_elem(list, (unsigned)j)));
				break;
			}
		}
		if (load_upstream_tls(ld, e, u) < 0)
			return -1;
		load_overrides(ld, e, &config_keys_upstream_timeouts, &config_keys_upstream_request_limits, &u->over);
		config_resil_load(ld, e, &u->resil);
		config_load_health(ld, e, u);
		load_upstream_protocol(ld, e, u);
		if (config_hdrrules_read(ld, e, "upstreams.headers", NULL, &u->hdr) < 0)
			return -1;
		config_hash_check(ld, e, u);
		load_servers(ld, e, u, total);
	}
	config_resil_resolve(ld, list, cfg);
	return 0;
}

/* FNV-1a of a route's (host kind, host, label): its path and conditions. */
static uint32_t route_key_hash(const struct config_route *r)
{
	uint32_t h = (2166136261u ^ (uint32_t)r->host_kind) * 16777619u;

	for (const char *p = r->host; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *p = config_route_label(r); *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h;
}

/* With merge_slashes no request path holds "//" once routed: 0 (and
 * reported, with the path to write) for a route path that does. */
static int route_slashes(struct loader *ld, const config_setting_t *e, const struct config_route *r)
{
	char merged[sizeof r->path];
	size_t n = 0;

	if (!ld->cfg->merge_slashes || !strstr(r->path, "//"))
		return 1;
	for (const char *p = r->path; *p; p++)
		if (!(*p == '/' && n && merged[n - 1] == '/'))
			merged[n++] = *p;
	merged[n] = '\0';
	fail(ld, line_of(config_setting_get_member(e, "path")),
	     "routes.path \"%s\" never matches: with merge_slashes on, requests are routed with runs of '/' merged: "
	     "write \"%s\" (or set merge_slashes = false)",
	     r->path, merged);
	return 0;
}

static int load_routes(struct loader *ld, const config_setting_t *root)
{
	const struct config_keyset *ks = &config_keys_route;
	struct config *cfg = ld->cfg;
	config_setting_t *list = config_get_list(ld, root, "routes", "routes", 1, CONFIG_MAX_ROUTES);
	uint32_t *seen, cap = 1;
	int n;

	if (!list)
		return 0;
	n = config_setting_length(list);
	while (cap < 2 * (uint32_t)n)
		cap <<= 1;
	cfg->routes = calloc((size_t)n, sizeof *cfg->routes);
	seen = calloc(cap, sizeof *seen);
	if (!cfg->routes || !seen) {
		free(seen);
		return -1;
	}
	cfg->nroutes = n;

	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_get_entry(ld, list, i, "routes");
		struct config_route *r = &cfg->routes[i];
		enum got got[CONFIG_KEYS_MAX];
		const char *v;
		int good, rc;

		r->upstream = -1;
		r->ret = -1;
		if (!e)
			continue;
		r->line = line_of(e);
		config_engine_read(ld, e, ks, r, got);
		if (config_engine_got(ks, got, "abort_on_client_close") == GOT_NONE)
			r->abort_on_client_close = cfg->abort_on_client_close; /* read before the routes */
		good = config_engine_got(ks, got, "host") != GOT_BAD && config_engine_got(ks, got, "path") != GOT_BAD;
		if (config_engine_got(ks, got, "path") == GOT_OK)
			good &= route_slashes(ld, e, r);
		if (config_engine_got(ks, got, "upstream") == GOT_OK && config_setting_lookup_string(e, "upstream", &v) &&
		    (r->upstream = find_upstream(cfg, v)) < 0)
			fail(ld, line_of(config_setting_get_member(e, "upstream")), "route upstream \"%s\" is not defined",
			     v);
		rc = config_split_load(ld, e, r);
		if (rc < 0)
			return -1;
		good &= rc;
		rc = config_policy_load_route(ld, e, r,
		                              config_engine_got(ks, got, "upstream") != GOT_NONE || r->split != NULL);
		if (rc < 0)
			return -1;
		good &= rc;

		good &= route_upgrade(ld, e, r);
		load_overrides(ld, e, &config_keys_route_timeouts, &config_keys_route_limits, &r->over);
		if (config_auth_read(ld, e, &r->auth) < 0)
			return -1;
		if (r->ret >= 0 && config_setting_get_member(e, "headers"))
			fail(ld, line_of(config_setting_get_member(e, "headers")),
			     "routes.headers needs an upstream: a return's answer is written whole by weir");
		else if (config_hdrrules_read(ld, e, "routes.headers",
		                              r->upstream >= 0 && !r->split ? &cfg->upstreams[r->upstream].hdr : NULL,
		                              &r->hdr) < 0) /* a split's sides' groups' rules: not applied (config.md) */
			return -1;
		good &= config_route_rate_limits(ld, e, r);
		if ((rc = config_match_read(ld, e, r)) < 0)
			return -1;
		good &= rc;
		if ((rc = config_compress_read_route(ld, e, r)) < 0)
			return -1;
		good &= rc;
		if (!good)
			continue;
		/* the routes before it that loaded, by (host kind, host, path) in
		 * a hash: a long list is checked in linear time, not quadratic */
		for (uint32_t h = route_key_hash(r) & (cap - 1);; h = (h + 1) & (cap - 1)) {
			const struct config_route *o = seen[h] ? &cfg->routes[seen[h] - 1] : NULL;
			char buf[CONFIG_HOST_MAX + 1];

			if (!o) {
				seen[h] = (uint32_t)i + 1;
				break;
			}
			/* the label: the path and the conditions (config_match.h) */
			if (o->host_kind == r->host_kind && strcmp(o->host, r->host) == 0 &&
			    strcmp(config_route_label(o), config_route_label(r)) == 0) {
				fail(ld, r->line, "route for host \"%s\" and path \"%s\" is already defined on line %d",
				     config_host_text(r->host_kind, r->host, buf, sizeof buf), config_route_label(r), o->line);
				break;
			}
		}
	}
	free(seen);
	return 0;
}

static void load_limits(struct loader *ld, const config_setting_t *root)
{
	struct config_limits *l = &ld->cfg->limits;
	config_setting_t *g = config_get_group(ld, root, "limits", "limits");
	enum got got[CONFIG_KEYS_MAX];

	config_engine_read(ld, g, &config_keys_limits, l, got);
	if (config_engine_got(&config_keys_limits, got, "uri_size") == GOT_OK && l->uri_size > l->header_size)
		fail(ld, line_of(config_setting_get_member(g, "uri_size")),
		     "limits.uri_size (%u) must not exceed limits.header_size (%u)", l->uri_size, l->header_size);
}

/* ---- entry points ------------------------------------------------------ */

static int load_tree(struct loader *ld, const config_setting_t *root)
{
	struct config *cfg = ld->cfg;
	enum got got[CONFIG_KEYS_MAX];

	config_engine_read(ld, root, &config_keys_top, cfg, got);
	if (config_engine_got(&config_keys_top, got, "master_process") == GOT_OK && !cfg->master_process &&
	    cfg->workers != 1)
		fail(ld, line_of(config_setting_get_member(root, "master_process")),
		     "master_process = false runs one worker in the master's process: set workers = 1");
	if (cfg->user[0]) {
		struct passwd *pw = getpwnam(cfg->user);

		if (!pw) {
			fail(ld, line_of(config_setting_get_member(root, "user")), "user \"%s\" does not exist", cfg->user);
		} else {
			cfg->uid = pw->pw_uid;
			cfg->gid = pw->pw_gid;
		}
	}
	config_engine_read(ld, config_get_group(ld, root, "log", "log"), &config_keys_log, &cfg->log, NULL);
	config_policy_load_top(ld, root);
	config_compress_load_top(ld, root); /* before the routes: theirs start from it */
	load_stats(ld, root);
	if (load_listeners(ld, root) < 0 || load_upstreams(ld, root) < 0 || config_load_rate_limits(ld, root) < 0 ||
	    load_routes(ld, root) < 0)
		return -1;
	config_hdrrules_check(ld);
	config_engine_read(ld, config_get_group(ld, root, "timeouts", "timeouts"), &config_keys_timeouts,
	                   &cfg->timeouts, NULL);
	config_engine_read(ld, config_get_group(ld, root, "http2", "http2"), &config_keys_http2, &cfg->http2, NULL);
	load_limits(ld, root);
	return 0;
}

int config_load(const char *path, struct config *cfg, struct config_errors *errs)
{
	struct loader ld = {.file = path, .cfg = cfg, .errs = errs};
	struct stat st;
	config_t lc;
	FILE *f;

	memset(cfg, 0, sizeof *cfg);
	memset(errs, 0, sizeof *errs);

	f = fopen(path, "r");
	if (!f) {
		fail(&ld, 0, "cannot read: %s", strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		fail(&ld, 0, "cannot read: %s", strerror(EISDIR));
		return -1;
	}
	config_init(&lc);
	if (config_read(&lc, f) != CONFIG_TRUE) {
		const char *text = config_error_text(&lc) ? config_error_text(&lc) : "unknown";
		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO)
			fail(&ld, 0, "cannot read: %s", text);
		else if (strncmp(text, "syntax error", 12) == 0)
			fail(&ld, config_error_line(&lc), "%s", text);
		else
			fail(&ld, config_error_line(&lc), "syntax error: %s", text);
		config_destroy(&lc);
		fclose(f);
		return -1;
	}
	fclose(f);

	if (load_tree(&ld, config_root_setting(&lc)) < 0)
		fail(&ld, 0, "out of memory");
	config_destroy(&lc);
	if (errs->count == 0 && !(cfg->file = strdup(path)))
		fail(&ld, 0, "out of memory");
	if (errs->count) {
		config_free(cfg);
		return -1;
	}
	return 0;
}

void config_free(struct config *cfg)
{
	free(cfg->file);
	for (int i = 0; i < cfg->nupstreams; i++)
		X509_STORE_free(cfg->upstreams[i].tls_store);
	free(cfg->upstreams);
	free(cfg->servers);
	for (int i = 0; i < cfg->nroutes; i++)
		auth_conf_free(cfg->routes[i].auth), free(cfg->routes[i].split);
	for (int i = 0; i < cfg->nroutes; i++)
		free(cfg->routes[i].match), free(cfg->routes[i].compress);
	free(cfg->routes);
	free(cfg->returns);
	hdrrules_conf_free(cfg->hdr);
	free(cfg->rate_limits);
	for (int i = 0; i < cfg->ncerts; i++)
		tlscert_free(cfg->certs[i].loaded);
	free(cfg->certs);
	/* every slot: an entry that failed later (a bad address) left its
	 * CA in the slot the next entry reuses */
	for (int i = 0; i < CONFIG_MAX_LISTENERS; i++)
		tlsca_free(cfg->listeners[i].client_cas);
	memset(cfg, 0, sizeof *cfg);
}
