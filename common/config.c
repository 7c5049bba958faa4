/*
 * config.c: weir's configuration file format (libconfig syntax) and its checks.
 *
 * Principle: walk the libconfig tree once, group by group. Every group's
 * children are compared against the keys it allows, every value is checked
 * for its type and range, and every problem is recorded with its file and
 * line while the walk goes on, so one run of `weir -t` reports everything
 * that is wrong, not just the first thing. Only when nothing was recorded
 * does the caller get the struct; otherwise it is freed and zeroed.
 *
 * docs/config.md is the reference for the format; keep the two together.
 *
 * Known limit: libconfig 1.5 silently truncates an integer literal above
 * 2147483647 unless it carries the L suffix; sizes that large are better
 * written as strings ("5g"), which this file parses itself.
 */
#include "common/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pwd.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tlscert.h"

#include <openssl/err.h>
#include <openssl/x509.h>

/* The state of one load: where errors go, kept sorted by line. */
struct loader {
	const char *file;
	struct config *cfg;
	struct config_errors *errs;
	int lines[CONFIG_MAX_ERRORS]; /* line of each kept message */
};

/* A value read from the file: absent, present and valid, or present and
 * wrong (already reported). */
enum got {
	GOT_NONE,
	GOT_OK,
	GOT_BAD,
};

/* ---- errors ------------------------------------------------------------ */

/*
 * Records "FILE:LINE: message" (or "FILE: message" when <line> is 0). Kept
 * messages stay sorted by line, so an operator reads them top to bottom;
 * when CONFIG_MAX_ERRORS are kept already, a message for an earlier line
 * pushes out the last one. errs->count counts every message.
 */
static void fail(struct loader *ld, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(struct loader *ld, int line, const char *fmt, ...)
{
	struct config_errors *e = ld->errs;
	int kept = e->count < CONFIG_MAX_ERRORS ? e->count : CONFIG_MAX_ERRORS;
	int at = kept;
	size_t cap = sizeof e->msg[0];
	char *m;
	int n;
	va_list ap;

	e->count++;
	while (at > 0 && ld->lines[at - 1] > line)
		at--;
	if (at == CONFIG_MAX_ERRORS)
		return;
	if (kept == CONFIG_MAX_ERRORS)
		kept--; /* the last one makes room */
	memmove(&e->msg[at + 1], &e->msg[at], (size_t)(kept - at) * cap);
	memmove(&ld->lines[at + 1], &ld->lines[at], (size_t)(kept - at) * sizeof ld->lines[0]);
	ld->lines[at] = line;

	m = e->msg[at];
	if (line > 0)
		n = snprintf(m, cap, "%s:%d: ", ld->file, line);
	else
		n = snprintf(m, cap, "%s: ", ld->file);
	if (n < 0)
		n = 0;
	if ((size_t)n >= cap)
		return; /* the path alone filled it */
	va_start(ap, fmt);
	vsnprintf(m + n, cap - (size_t)n, fmt, ap);
	va_end(ap);
}

static int line_of(const config_setting_t *s)
{
	return s ? (int)config_setting_source_line(s) : 0;
}

/* ---- value parsers ----------------------------------------------------- */

/* Reads the decimal digits at <*p> into <*v>. Returns -1 if there are none or
 * the number does not fit 64 bits. */
static int parse_digits(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t n = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (n > (UINT64_MAX - d) / 10)
			return -1;
		n = n * 10 + d;
	}
	*p = s;
	*v = n;
	return 0;
}

/*
 * A duration: digits followed by "ms", "s", "m" or "h" (lower case), or bare
 * digits meaning milliseconds. Every duration in weir is a timeout, so 0 is
 * refused here, as is anything above UINT32_MAX ms (about 49 days).
 */
int config_parse_duration(const char *text, uint32_t *ms)
{
	const char *p = text;
	uint64_t n, unit;

	if (!text || parse_digits(&p, &n) < 0)
		return -1;
	if (*p == '\0' || strcmp(p, "ms") == 0)
		unit = 1;
	else if (strcmp(p, "s") == 0)
		unit = 1000;
	else if (strcmp(p, "m") == 0)
		unit = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		unit = 60 * 60 * 1000;
	else
		return -1;
	if (n == 0 || n > UINT32_MAX / unit)
		return -1;
	*ms = (uint32_t)(n * unit);
	return 0;
}

/* A size: digits with an optional k, m or g (powers of 1024, either case). */
int config_parse_size(const char *text, uint64_t *bytes)
{
	const char *p = text;
	uint64_t n;
	int shift;

	if (!text || parse_digits(&p, &n) < 0)
		return -1;
	switch (*p) {
	case '\0':
		shift = 0;
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		return -1;
	}
	if (shift && p[1] != '\0')
		return -1;
	if (n > (UINT64_MAX >> shift))
		return -1;
	*bytes = n << shift;
	return 0;
}

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

/*
 * Parses an address into <a>. Returns NULL, or the reason it is not one,
 * worded to follow the address in a message.
 */
static const char *addr_parse(const char *text, struct config_addr *a)
{
	const char *host, *port, *colon;
	size_t hlen;
	char hbuf[INET6_ADDRSTRLEN];
	char ip[INET6_ADDRSTRLEN];
	uint64_t pnum;
	int v6 = 0;

	memset(a, 0, sizeof *a);
	if (text[0] == '[') {
		const char *end = strchr(text, ']');
		if (!end)
			return "lacks the closing ']'";
		host = text + 1;
		hlen = (size_t)(end - host);
		if (end[1] != ':')
			return "has no port: write it as [::1]:80";
		port = end + 2;
		v6 = 1;
	} else {
		colon = strrchr(text, ':');
		if (colon && strchr(text, ':') != colon)
			return "is an IPv6 address without brackets: write it as [::1]:80";
		host = text;
		hlen = colon ? (size_t)(colon - text) : strlen(text);
		for (size_t i = 0; i < hlen; i++)
			if (is_alpha(host[i]) || host[i] == '-' || host[i] == '_')
				return "is a host name: use an IP address, such as 127.0.0.1:80";
		if (!colon)
			return "has no port: write it as 127.0.0.1:80, [::1]:80 or *:80";
		port = colon + 1;
	}

	if (strlen(port) > 5 || parse_digits(&port, &pnum) < 0 || *port != '\0' || pnum < 1 || pnum > 65535)
		return "has a bad port: it must be a number from 1 to 65535";
	if (hlen == 0 || hlen >= sizeof hbuf)
		return v6 ? "is not an IPv6 address" : "is not an IPv4 address";
	memcpy(hbuf, host, hlen);
	hbuf[hlen] = '\0';

	if (v6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&a->sa;
		if (inet_pton(AF_INET6, hbuf, &sin6->sin6_addr) != 1)
			return "is not an IPv6 address";
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)pnum);
		a->len = sizeof *sin6;
		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof ip);
		snprintf(a->text, sizeof a->text, "[%s]:%u", ip, (unsigned)pnum);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&a->sa;
		if (strcmp(hbuf, "*") == 0)
			sin->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (inet_pton(AF_INET, hbuf, &sin->sin_addr) != 1)
			return "is not an IPv4 address";
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)pnum);
		a->len = sizeof *sin;
		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
		snprintf(a->text, sizeof a->text, "%s:%u", ip, (unsigned)pnum);
	}
	return NULL;
}

int config_parse_addr(const char *text, struct config_addr *addr)
{
	if (!text || addr_parse(text, addr)) {
		memset(addr, 0, sizeof *addr);
		return -1;
	}
	return 0;
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

/* ---- typed getters ----------------------------------------------------- */

/* Reports every child of <group> whose name is not in <allowed>. <where>
 * ends the message: "at top level", "in listeners entry". */
static void check_keys(struct loader *ld, const config_setting_t *group, const char *const *allowed,
                       const char *where)
{
	int n = config_setting_length(group);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
		const char *name = config_setting_name(s);
		const char *const *k;

		for (k = allowed; *k && strcmp(*k, name) != 0; k++)
			;
		if (!*k)
			fail(ld, line_of(s), "unknown key \"%s\" %s", name, where);
	}
}

static int is_int(const config_setting_t *s)
{
	return config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64;
}

/* <key> of <group> as a group, reported under <what> if it is not one. */
static config_setting_t *get_group(struct loader *ld, const config_setting_t *group, const char *key,
                                   const char *what)
{
	config_setting_t *s = config_setting_get_member(group, key);

	if (s && !config_setting_is_group(s)) {
		fail(ld, line_of(s), "%s must be a group: %s = { ... };", what, key);
		return NULL;
	}
	return s;
}

/* <key> of <group> as a list of groups with at most <max> entries; reports
 * an absent (when <required>), mistyped or empty list. */
static config_setting_t *get_list(struct loader *ld, const config_setting_t *group, const char *key,
                                  const char *what, int required, int max)
{
	config_setting_t *s = config_setting_get_member(group, key);
	int n;

	if (!s) {
		if (required)
			fail(ld, line_of(group), "%s is required", what);
		return NULL;
	}
	if (!config_setting_is_list(s)) {
		fail(ld, line_of(s), "%s must be a list of groups: %s = ( { ... }, { ... } );", what, key);
		return NULL;
	}
	n = config_setting_length(s);
	if (n == 0) {
		fail(ld, line_of(s), "%s must have at least one entry", what);
		return NULL;
	}
	if (n > max) {
		fail(ld, line_of(s), "%s has %d entries, at most %d are allowed", what, n, max);
		return NULL;
	}
	return s;
}

/* Entry <i> of <list>, reported under <what> if it is not a group. */
static config_setting_t *get_entry(struct loader *ld, const config_setting_t *list, int i, const char *what)
{
	config_setting_t *e = config_setting_get_elem(list, (unsigned)i);

	if (!config_setting_is_group(e)) {
		fail(ld, line_of(e), "%s entry must be a group: { ... }", what);
		return NULL;
	}
	return e;
}

static enum got get_string(struct loader *ld, const config_setting_t *group, const char *key, const char *what,
                           const char **out, size_t max_len)
{
	config_setting_t *s = config_setting_get_member(group, key);

	if (!s)
		return GOT_NONE;
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		fail(ld, line_of(s), "%s must be a string", what);
		return GOT_BAD;
	}
	*out = config_setting_get_string(s);
	if (strlen(*out) > max_len) {
		fail(ld, line_of(s), "%s is too long (at most %zu bytes)", what, max_len);
		return GOT_BAD;
	}
	return GOT_OK;
}

static enum got get_int(struct loader *ld, const config_setting_t *group, const char *key, const char *what,
                        long long min, long long max, int *out)
{
	config_setting_t *s = config_setting_get_member(group, key);
	long long v;

	if (!s)
		return GOT_NONE;
	if (!is_int(s)) {
		fail(ld, line_of(s), "%s must be an integer", what);
		return GOT_BAD;
	}
	v = config_setting_get_int64(s);
	if (v < min || v > max) {
		fail(ld, line_of(s), "%s must be from %lld to %lld (got %lld)", what, min, max, v);
		return GOT_BAD;
	}
	*out = (int)v;
	return GOT_OK;
}

static enum got get_duration(struct loader *ld, const config_setting_t *group, const char *key, const char *what,
                             uint32_t *out)
{
	config_setting_t *s = config_setting_get_member(group, key);

	if (!s)
		return GOT_NONE;
	if (is_int(s)) {
		long long v = config_setting_get_int64(s);
		if (v < 1 || v > (long long)UINT32_MAX) {
			fail(ld, line_of(s), "%s must be from 1 to %u milliseconds (got %lld)", what, UINT32_MAX, v);
			return GOT_BAD;
		}
		*out = (uint32_t)v;
		return GOT_OK;
	}
	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *t = config_setting_get_string(s);
		if (config_parse_duration(t, out) == 0)
			return GOT_OK;
		fail(ld, line_of(s),
		     "%s \"%s\" is not a duration: write a number with ms, s, m or h (\"250ms\", \"5s\"), "
		     "more than 0 and at most 49 days",
		     what, t);
		return GOT_BAD;
	}
	fail(ld, line_of(s), "%s must be a duration such as \"5s\" or a number of milliseconds", what);
	return GOT_BAD;
}

/* A duration where 0 (or "off") turns the feature off. */
static enum got get_duration_or_off(struct loader *ld, const config_setting_t *group, const char *key,
                                    const char *what, uint32_t *out)
{
	config_setting_t *s = config_setting_get_member(group, key);

	if (s && ((is_int(s) && config_setting_get_int64(s) == 0) ||
	          (config_setting_type(s) == CONFIG_TYPE_STRING &&
	           (!strcmp(config_setting_get_string(s), "0") || !strcmp(config_setting_get_string(s), "off"))))) {
		*out = 0;
		return GOT_OK;
	}
	return get_duration(ld, group, key, what, out);
}

static enum got get_size(struct loader *ld, const config_setting_t *group, const char *key, const char *what,
                         uint64_t min, uint64_t max, uint64_t *out)
{
	config_setting_t *s = config_setting_get_member(group, key);
	uint64_t v;

	if (!s)
		return GOT_NONE;
	if (is_int(s)) {
		long long i = config_setting_get_int64(s);
		if (i < 0) {
			fail(ld, line_of(s), "%s must not be negative (got %lld)", what, i);
			return GOT_BAD;
		}
		v = (uint64_t)i;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *t = config_setting_get_string(s);
		if (config_parse_size(t, &v) < 0) {
			fail(ld, line_of(s), "%s \"%s\" is not a size: write a number of bytes with an optional k, m or g",
			     what, t);
			return GOT_BAD;
		}
	} else {
		fail(ld, line_of(s), "%s must be a size such as \"16k\" or a number of bytes", what);
		return GOT_BAD;
	}
	if (v < min || v > max) {
		fail(ld, line_of(s), "%s must be from %llu to %llu bytes (got %llu)", what, (unsigned long long)min,
		     (unsigned long long)max, (unsigned long long)v);
		return GOT_BAD;
	}
	*out = v;
	return GOT_OK;
}

/* <key> of <group> as an address; reports a missing one when <required>. */
static enum got get_addr(struct loader *ld, const config_setting_t *group, const char *key, const char *what,
                         int required, struct config_addr *out)
{
	const char *text, *why;
	enum got g = get_string(ld, group, key, what, &text, 255);

	if (g == GOT_NONE && required)
		fail(ld, line_of(group), "%s is required", what);
	if (g != GOT_OK)
		return g == GOT_NONE && required ? GOT_BAD : g;
	why = addr_parse(text, out);
	if (why) {
		fail(ld, line_of(config_setting_get_member(group, key)), "%s \"%s\" %s", what, text, why);
		return GOT_BAD;
	}
	return GOT_OK;
}

static enum got get_bool(struct loader *ld, const config_setting_t *group, const char *key, const char *what,
                         int *out)
{
	config_setting_t *s = config_setting_get_member(group, key);

	if (!s)
		return GOT_NONE;
	if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
		fail(ld, line_of(s), "%s must be true or false", what);
		return GOT_BAD;
	}
	*out = config_setting_get_bool(s);
	return GOT_OK;
}

/* ---- sections ---------------------------------------------------------- */

static void load_workers(struct loader *ld, const config_setting_t *root)
{
	config_setting_t *s = config_setting_get_member(root, "workers");
	int n;

	if (s && is_int(s)) {
		get_int(ld, root, "workers", "workers", 1, CONFIG_MAX_WORKERS, &ld->cfg->workers);
		return;
	}
	if (s && (config_setting_type(s) != CONFIG_TYPE_STRING || strcmp(config_setting_get_string(s), "auto") != 0)) {
		fail(ld, line_of(s), "workers must be \"auto\" or a number from 1 to %d", CONFIG_MAX_WORKERS);
		return;
	}
	n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	ld->cfg->workers = n < 1 ? 1 : n > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : n;
}

static void load_log(struct loader *ld, const config_setting_t *root)
{
	static const char *const keys[] = {"error", "access", "level", NULL};
	struct config_log *log = &ld->cfg->log;
	config_setting_t *g = get_group(ld, root, "log", "log");
	const char *v;

	strcpy(log->error_path, "stderr");
	strcpy(log->access_path, "stderr");
	log->level = LOG_LEVEL_INFO;
	if (!g)
		return;
	check_keys(ld, g, keys, "in log");

	if (get_string(ld, g, "error", "log.error", &v, sizeof log->error_path - 1) == GOT_OK) {
		if (*v == '\0' || strcmp(v, "off") == 0)
			fail(ld, line_of(config_setting_get_member(g, "error")),
			     "log.error must be \"stderr\" or a file path");
		else
			strcpy(log->error_path, v);
	}
	if (get_string(ld, g, "access", "log.access", &v, sizeof log->access_path - 1) == GOT_OK) {
		if (*v == '\0')
			fail(ld, line_of(config_setting_get_member(g, "access")),
			     "log.access must be \"stderr\", \"off\" or a file path");
		else
			strcpy(log->access_path, v);
	}
	if (get_string(ld, g, "level", "log.level", &v, 255) == GOT_OK) {
		int i, n = (int)(sizeof level_names / sizeof level_names[0]);
		for (i = 0; i < n && strcmp(v, level_names[i]) != 0; i++)
			;
		if (i == n)
			fail(ld, line_of(config_setting_get_member(g, "level")),
			     "log.level \"%s\" is not one of debug, info, notice, warn, error", v);
		else
			log->level = (enum log_level)i;
	}
}

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
	static const char *const keys[] = {"listen", "unix", "mode", "allow_remote", "admin_token", NULL};
	struct config *cfg = ld->cfg;
	config_setting_t *g = get_group(ld, root, "stats", "stats");
	const char *v;
	enum got gl, gu;

	cfg->stats_mode = 0660;
	if (!g)
		return;
	check_keys(ld, g, keys, "in stats");
	get_bool(ld, g, "allow_remote", "stats.allow_remote", &cfg->stats_allow_remote);
	gu = get_string(ld, g, "unix", "stats.unix", &v, sizeof cfg->stats_unix - 1);
	if (gu == GOT_OK) {
		if (v[0] != '/') {
			fail(ld, line_of(config_setting_get_member(g, "unix")),
			     "stats.unix \"%s\" must be an absolute path, such as /run/weir/stats.sock", v);
			gu = GOT_BAD;
		} else {
			strcpy(cfg->stats_unix, v);
		}
	}
	if (get_string(ld, g, "admin_token", "stats.admin_token", &v, sizeof cfg->stats_admin_token - 1) ==
	    GOT_OK) {
		/* RFC 6750's b64token, long enough not to be guessed */
		size_t n = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=");

		if (v[n] || n < 16)
			fail(ld, line_of(config_setting_get_member(g, "admin_token")),
			     "stats.admin_token must be 16 to 128 characters of letters, digits and -._~+/= "
			     "(openssl rand -base64 32 makes one)");
		else
			strcpy(cfg->stats_admin_token, v);
	}
	if (get_string(ld, g, "mode", "stats.mode", &v, 255) == GOT_OK) {
		char *end;
		unsigned long mode = strtoul(v, &end, 8);

		if (!v[0] || *end || v[0] == '-' || v[0] == '+' || mode > 0777)
			fail(ld, line_of(config_setting_get_member(g, "mode")),
			     "stats.mode \"%s\" must be an octal file mode from \"0000\" to \"0777\", such as \"0660\"", v);
		else
			cfg->stats_mode = (unsigned)mode;
	}
	gl = get_addr(ld, g, "listen", "stats.listen", 0, &cfg->stats);
	if (gl == GOT_OK) {
		cfg->has_stats = 1;
		if (!cfg->stats_allow_remote && !addr_is_loopback(&cfg->stats))
			fail(ld, line_of(config_setting_get_member(g, "listen")),
			     "stats.listen \"%s\" is not a loopback address: anyone who reaches it can read the "
			     "metrics and change upstream servers; set stats.allow_remote = true to mean it",
			     cfg->stats.text);
	}
	if (gl == GOT_NONE && gu == GOT_NONE)
		fail(ld, line_of(g), "stats.listen is required unless stats.unix is given");
}

/*
 * client_ca, client_verify and client_header of listeners.tls group <g>.
 * The CA file is read here, as certificates are, so `weir -t` names a
 * missing or bad one. client_header must be a plain token that is none of
 * the headers weir writes itself (two Host lines would be worse than none),
 * in any spelling a backend reads as the same name.
 */
static void load_listener_client_ca(struct loader *ld, const config_setting_t *g, struct config_listener *l)
{
	static const char *const owned[] = {
	    "host", "content-length", "transfer-encoding", "connection", "x-forwarded-for", "x-forwarded-proto",
	    "via",  "expect",         "upgrade",           "te",         "trailer",         "keep-alive",
	    NULL};
	const char *v;
	enum got gca, gv, gh;
	char why[400];

	tlsca_free(l->client_cas); /* from an entry that failed in this slot */
	l->client_cas = NULL;
	l->client_verify = CONFIG_CLIENT_VERIFY_OFF;
	l->client_header[0] = '\0';
	gca = get_string(ld, g, "client_ca", "listeners.tls.client_ca", &v, sizeof l->client_ca - 1);
	if (gca == GOT_OK) {
		strcpy(l->client_ca, v);
		l->client_verify = CONFIG_CLIENT_VERIFY_REQUIRED;
		l->client_cas = tlsca_load(l->client_ca, why, sizeof why);
		if (!l->client_cas)
			fail(ld, line_of(config_setting_get_member(g, "client_ca")), "client_ca %s: %s", l->client_ca,
			     why);
	}
	gv = get_string(ld, g, "client_verify", "listeners.tls.client_verify", &v, 255);
	if (gv == GOT_OK) {
		if (strcmp(v, "required") == 0)
			l->client_verify = CONFIG_CLIENT_VERIFY_REQUIRED;
		else if (strcmp(v, "optional") == 0)
			l->client_verify = CONFIG_CLIENT_VERIFY_OPTIONAL;
		else
			fail(ld, line_of(config_setting_get_member(g, "client_verify")),
			     "listeners.tls.client_verify \"%s\" must be \"required\" or \"optional\"", v);
	}
	gh = get_string(ld, g, "client_header", "listeners.tls.client_header", &v, sizeof l->client_header - 1);
	if (gh == GOT_OK) {
		char folded[CONFIG_NAME_MAX];
		int bad = !v[0];
		size_t k = 0;

		/* as a CGI backend reads it: X_Forwarded_For is X-Forwarded-For */
		for (const char *p = v; *p && !bad; p++) {
			bad = !(is_alpha(*p) || is_digit(*p) || *p == '-' || *p == '_');
			folded[k++] = *p == '_' ? '-' : (char)to_lower(*p);
		}
		folded[k] = '\0';
		for (const char *const *o = owned; *o && !bad; o++)
			bad = strcmp(folded, *o) == 0;
		if (bad)
			fail(ld, line_of(config_setting_get_member(g, "client_header")),
			     "listeners.tls.client_header \"%s\" must be a header name of letters, digits, '-' and '_' "
			     "that weir does not write itself, such as \"X-Client-Subject\"",
			     v);
		else
			strcpy(l->client_header, v);
	}
	if (gca == GOT_NONE && (gv != GOT_NONE || gh != GOT_NONE))
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
	static const char *const tkeys[] = {"certificates",  "client_ca",  "client_verify",
	                                    "client_header", "early_data", NULL};
	static const char *const ckeys[] = {"cert", "key", "ocsp", NULL};
	struct config *cfg = ld->cfg;
	config_setting_t *g = get_group(ld, e, "tls", "listeners.tls");
	config_setting_t *list;
	int n;

	if (!g)
		return 0;
	check_keys(ld, g, tkeys, "in listeners.tls");
	l->tls = 1;
	get_bool(ld, g, "early_data", "listeners.tls.early_data", &l->early_data);
	l->first_cert = cfg->ncerts;
	load_listener_client_ca(ld, g, l);
	list = get_list(ld, g, "certificates", "listeners.tls.certificates", 1, CONFIG_MAX_CERTS);
	if (!list)
		return 0;
	if (!cfg->certs && !(cfg->certs = calloc(CONFIG_MAX_CERTS, sizeof *cfg->certs)))
		return -1;
	n = config_setting_length(list);
	for (int i = 0; i < n; i++) {
		config_setting_t *ce = get_entry(ld, list, i, "listeners.tls.certificates");
		struct config_cert *c;
		const char *v;
		enum got gc, gk;
		char why[400];

		if (!ce)
			continue;
		if (cfg->ncerts == CONFIG_MAX_CERTS) {
			fail(ld, line_of(ce), "listeners.tls.certificates: at most %d certificates are allowed over all "
			     "listeners", CONFIG_MAX_CERTS);
			break;
		}
		check_keys(ld, ce, ckeys, "in certificates entry");
		c = &cfg->certs[cfg->ncerts++];
		l->ncerts++;
		c->line = line_of(ce);
		gc = get_string(ld, ce, "cert", "listeners.tls.certificates.cert", &v, sizeof c->cert - 1);
		if (gc == GOT_OK)
			strcpy(c->cert, v);
		gk = get_string(ld, ce, "key", "listeners.tls.certificates.key", &v, sizeof c->key - 1);
		if (gk == GOT_OK)
			strcpy(c->key, v);
		if (get_string(ld, ce, "ocsp", "listeners.tls.certificates.ocsp", &v, sizeof c->ocsp - 1) == GOT_OK)
			strcpy(c->ocsp, v);
		if (gc == GOT_NONE)
			fail(ld, c->line, "listeners.tls.certificates.cert is required");
		if (gk == GOT_NONE)
			fail(ld, c->line, "listeners.tls.certificates.key is required");
		if (gc != GOT_OK || gk != GOT_OK)
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
	static const char *const keys[] = {"address", "backlog", "tls", "proxy_protocol", NULL};
	struct config *cfg = ld->cfg;
	config_setting_t *list = get_list(ld, root, "listeners", "listeners", 1, CONFIG_MAX_LISTENERS);
	int n = list ? config_setting_length(list) : 0;

	for (int i = 0; i < n; i++) {
		config_setting_t *e = get_entry(ld, list, i, "listeners");
		struct config_listener *l = &cfg->listeners[cfg->nlisteners];

		if (!e)
			continue;
		check_keys(ld, e, keys, "in listeners entry");
		l->backlog = 511;
		l->line = line_of(e);
		get_int(ld, e, "backlog", "listeners.backlog", 1, 65535, &l->backlog);
		get_bool(ld, e, "proxy_protocol", "listeners.proxy_protocol", &l->proxy_protocol);
		if (load_listener_tls(ld, e, l) < 0)
			return -1;
		if (get_addr(ld, e, "address", "listeners.address", 1, &l->addr) != GOT_OK)
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

/* An upstream name: 1..63 of [A-Za-z0-9_.-]. */
static int valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CONFIG_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!is_alpha(*s) && !is_digit(*s) && *s != '_' && *s != '.' && *s != '-')
			return 0;
	return 1;
}

static void load_servers(struct loader *ld, const config_setting_t *ue, struct config_upstream *u, int capacity)
{
	static const char *const keys[] = {"address", "weight", NULL};
	struct config *cfg = ld->cfg;
	config_setting_t *list = get_list(ld, ue, "servers", "upstreams.servers", 1, CONFIG_MAX_SERVERS);
	int n = list ? config_setting_length(list) : 0;

	u->first_server = cfg->nservers;
	for (int i = 0; i < n; i++) {
		config_setting_t *e = get_entry(ld, list, i, "upstreams.servers");
		struct config_server srv = {.weight = 1};

		if (!e)
			continue;
		check_keys(ld, e, keys, "in servers entry");
		get_int(ld, e, "weight", "upstreams.servers.weight", 1, 1000, &srv.weight);
		get_addr(ld, e, "address", "upstreams.servers.address", 1, &srv.addr);
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

/* A name to send as SNI and to check the certificate against: letters,
 * digits, '-', '.', 1 to 253 of them. */
static int valid_tls_name(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len > 253)
		return 0;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '.'))
			return 0;
	return 1;
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
	static const char *const tkeys[] = {"ca", "verify", "sni", NULL};
	config_setting_t *g = get_group(ld, e, "tls", "upstreams.tls");
	const char *v;
	enum got gc;

	if (!g)
		return 0;
	check_keys(ld, g, tkeys, "in upstreams.tls");
	u->tls = 1;
	u->tls_verify = 1;
	get_bool(ld, g, "verify", "upstreams.tls.verify", &u->tls_verify);
	gc = get_string(ld, g, "ca", "upstreams.tls.ca", &v, sizeof u->tls_ca - 1);
	if (gc == GOT_OK)
		strcpy(u->tls_ca, v);
	if (get_string(ld, g, "sni", "upstreams.tls.sni", &v, sizeof u->tls_sni - 1) == GOT_OK) {
		if (valid_tls_name(v))
			strcpy(u->tls_sni, v);
		else
			fail(ld, line_of(config_setting_get_member(g, "sni")),
			     "upstreams.tls.sni \"%s\" must be a host name", v);
	}
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
	}
	return 0;
}

static int load_upstreams(struct loader *ld, const config_setting_t *root)
{
	static const char *const keys[] = {"name", "keepalive", "max_fails", "fail_timeout", "tls", "servers", NULL};
	struct config *cfg = ld->cfg;
	config_setting_t *list = get_list(ld, root, "upstreams", "upstreams", 1, CONFIG_MAX_UPSTREAMS);
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
		config_setting_t *e = get_entry(ld, list, i, "upstreams");
		struct config_upstream *u = &cfg->upstreams[i];
		const char *name;
		enum got g;

		if (!e)
			continue;
		check_keys(ld, e, keys, "in upstreams entry");
		u->keepalive = 32;
		get_int(ld, e, "keepalive", "upstreams.keepalive", 0, 10000, &u->keepalive);
		u->max_fails = 3;
		get_int(ld, e, "max_fails", "upstreams.max_fails", 0, 1000, &u->max_fails);
		u->fail_timeout = 10000;
		get_duration(ld, e, "fail_timeout", "upstreams.fail_timeout", &u->fail_timeout);
		g = get_string(ld, e, "name", "upstreams.name", &name, 255);
		if (g == GOT_NONE)
			fail(ld, line_of(e), "upstreams.name is required");
		if (g == GOT_OK && !valid_name(name))
			fail(ld, line_of(config_setting_get_member(e, "name")),
			     "upstreams.name \"%s\" must be 1 to %d letters, digits, '_', '.' or '-'", name,
			     CONFIG_NAME_MAX - 1);
		else if (g == GOT_OK) {
			for (int j = 0; j < i; j++) {
				if (strcmp(cfg->upstreams[j].name, name) == 0) {
					fail(ld, line_of(config_setting_get_member(e, "name")),
					     "upstream \"%s\" is already defined on line %d", name,
					     line_of(config_setting_get_elem(list, (unsigned)j)));
					break;
				}
			}
			strcpy(u->name, name);
		}
		if (load_upstream_tls(ld, e, u) < 0)
			return -1;
		load_servers(ld, e, u, total);
	}
	return 0;
}

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
	return NULL;
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

static int load_routes(struct loader *ld, const config_setting_t *root)
{
	static const char *const keys[] = {"host", "path", "upstream", NULL};
	struct config *cfg = ld->cfg;
	config_setting_t *list = get_list(ld, root, "routes", "routes", 1, CONFIG_MAX_ROUTES);
	char ok[CONFIG_MAX_ROUTES] = {0};
	int n;

	if (!list)
		return 0;
	n = config_setting_length(list);
	cfg->routes = calloc((size_t)n, sizeof *cfg->routes);
	if (!cfg->routes)
		return -1;
	cfg->nroutes = n;

	for (int i = 0; i < n; i++) {
		config_setting_t *e = get_entry(ld, list, i, "routes");
		struct config_route *r = &cfg->routes[i];
		const char *v, *why = NULL;
		enum got g;
		int good = 1;

		r->upstream = -1;
		if (!e)
			continue;
		r->line = line_of(e);
		check_keys(ld, e, keys, "in routes entry");

		r->host_kind = CONFIG_HOST_ANY;
		g = get_string(ld, e, "host", "routes.host", &v, CONFIG_HOST_MAX - 1);
		if (g == GOT_OK && (why = route_host(v, r)) != NULL)
			fail(ld, line_of(config_setting_get_member(e, "host")), "routes.host \"%s\" %s", v, why);
		good &= g != GOT_BAD && !(g == GOT_OK && why);

		strcpy(r->path, "/");
		g = get_string(ld, e, "path", "routes.path", &v, CONFIG_PATH_MAX - 1);
		if (g == GOT_OK && (why = route_path(v)) != NULL)
			fail(ld, line_of(config_setting_get_member(e, "path")), "routes.path \"%s\" %s", v, why);
		else if (g == GOT_OK)
			strcpy(r->path, v);
		good &= g != GOT_BAD && !(g == GOT_OK && why);

		g = get_string(ld, e, "upstream", "routes.upstream", &v, 255);
		if (g == GOT_NONE)
			fail(ld, line_of(e), "routes.upstream is required");
		if (g == GOT_OK && (r->upstream = find_upstream(cfg, v)) < 0)
			fail(ld, line_of(config_setting_get_member(e, "upstream")), "route upstream \"%s\" is not defined",
			     v);

		if (!good)
			continue;
		for (int j = 0; j < i; j++) {
			const struct config_route *o = &cfg->routes[j];
			char buf[CONFIG_HOST_MAX + 1];
			if (ok[j] && o->host_kind == r->host_kind && strcmp(o->host, r->host) == 0 &&
			    strcmp(o->path, r->path) == 0) {
				fail(ld, r->line, "route for host \"%s\" and path \"%s\" is already defined on line %d",
				     config_host_text(r->host_kind, r->host, buf, sizeof buf), r->path, o->line);
				good = 0;
				break;
			}
		}
		ok[i] = (char)good;
	}
	return 0;
}

static void load_timeouts(struct loader *ld, const config_setting_t *root)
{
	static const char *const keys[] = {"client_header", "client_body", "client_keepalive",
	                                   "client_send", "upstream_connect", "upstream_send",
	                                   "upstream_read", "upstream_keepalive", "drain", "rate_window",
	                                   "request", "slab_idle", "proxy_protocol", NULL};
	struct config_timeouts *t = &ld->cfg->timeouts;
	config_setting_t *g = get_group(ld, root, "timeouts", "timeouts");

	*t = (struct config_timeouts){
		.client_header = 10000,
		.client_body = 30000,
		.client_keepalive = 60000,
		.client_send = 30000,
		.upstream_connect = 5000,
		.upstream_send = 60000,
		.upstream_read = 60000,
		.upstream_keepalive = 60000,
		.drain = 30000,
		.rate_window = 20000,
		.request = 0,
		.slab_idle = 30000,
		.proxy_protocol = 5000,
	};
	if (!g)
		return;
	check_keys(ld, g, keys, "in timeouts");
	get_duration(ld, g, "client_header", "timeouts.client_header", &t->client_header);
	get_duration(ld, g, "client_body", "timeouts.client_body", &t->client_body);
	get_duration(ld, g, "client_keepalive", "timeouts.client_keepalive", &t->client_keepalive);
	get_duration(ld, g, "client_send", "timeouts.client_send", &t->client_send);
	get_duration(ld, g, "upstream_connect", "timeouts.upstream_connect", &t->upstream_connect);
	get_duration(ld, g, "upstream_send", "timeouts.upstream_send", &t->upstream_send);
	get_duration(ld, g, "upstream_read", "timeouts.upstream_read", &t->upstream_read);
	get_duration(ld, g, "upstream_keepalive", "timeouts.upstream_keepalive", &t->upstream_keepalive);
	get_duration(ld, g, "drain", "timeouts.drain", &t->drain);
	get_duration_or_off(ld, g, "rate_window", "timeouts.rate_window", &t->rate_window);
	get_duration_or_off(ld, g, "request", "timeouts.request", &t->request);
	get_duration(ld, g, "slab_idle", "timeouts.slab_idle", &t->slab_idle);
	get_duration(ld, g, "proxy_protocol", "timeouts.proxy_protocol", &t->proxy_protocol);
}

static void load_limits(struct loader *ld, const config_setting_t *root)
{
	static const char *const keys[] = {"header_size", "headers",     "uri_size", "body_size",
	                                   "connections", "response_header_size", "body_buffer",
	                                   "client_body_rate", "client_send_rate", NULL};
	struct config_limits *l = &ld->cfg->limits;
	config_setting_t *g = get_group(ld, root, "limits", "limits");
	uint64_t v;
	int i;

	*l = (struct config_limits){
		.header_size = 16384,
		.headers = 100,
		.uri_size = 8192,
		.body_size = 104857600,
		.connections = 16384,
		.response_header_size = 16384,
		.body_buffer = 65536,
		.client_body_rate = 512,
		.client_send_rate = 512,
	};
	if (!g)
		return;
	check_keys(ld, g, keys, "in limits");
	if (get_size(ld, g, "header_size", "limits.header_size", 1024, 65536, &v) == GOT_OK)
		l->header_size = (uint32_t)v;
	if (get_int(ld, g, "headers", "limits.headers", 1, 1000, &i) == GOT_OK)
		l->headers = (uint32_t)i;
	if (get_size(ld, g, "uri_size", "limits.uri_size", 64, 65536, &v) == GOT_OK) {
		if (v > l->header_size)
			fail(ld, line_of(config_setting_get_member(g, "uri_size")),
			     "limits.uri_size (%llu) must not exceed limits.header_size (%u)", (unsigned long long)v,
			     l->header_size);
		else
			l->uri_size = (uint32_t)v;
	}
	get_size(ld, g, "body_size", "limits.body_size", 0, UINT64_MAX, &l->body_size);
	if (get_int(ld, g, "connections", "limits.connections", 1, 1000000, &i) == GOT_OK)
		l->connections = (uint32_t)i;
	if (get_size(ld, g, "response_header_size", "limits.response_header_size", 1024, 65536, &v) == GOT_OK)
		l->response_header_size = (uint32_t)v;
	/* a buffered body is held in one slab object: 1 MiB keeps that sane */
	if (get_size(ld, g, "body_buffer", "limits.body_buffer", 0, 1048576, &v) == GOT_OK)
		l->body_buffer = (uint32_t)v;
	if (get_size(ld, g, "client_body_rate", "limits.client_body_rate", 0, UINT32_MAX, &v) == GOT_OK)
		l->client_body_rate = (uint32_t)v;
	if (get_size(ld, g, "client_send_rate", "limits.client_send_rate", 0, UINT32_MAX, &v) == GOT_OK)
		l->client_send_rate = (uint32_t)v;
}

/* ---- entry points ------------------------------------------------------ */

static int load_tree(struct loader *ld, const config_setting_t *root)
{
	static const char *const keys[] = {"workers",   "master_process", "pid_file", "user",     "log",    "stats",
	                                   "listeners", "upstreams",      "routes",   "timeouts", "limits",
	                                   "tls_ticket_rotate", NULL};
	const char *v;
	config_setting_t *mp;

	check_keys(ld, root, keys, "at top level");
	load_workers(ld, root);
	ld->cfg->master_process = 1;
	if (get_bool(ld, root, "master_process", "master_process", &ld->cfg->master_process) == GOT_OK &&
	    !ld->cfg->master_process && ld->cfg->workers != 1) {
		mp = config_setting_get_member(root, "master_process");
		fail(ld, line_of(mp), "master_process = false runs one worker in the master's process: set workers = 1");
	}
	if (get_string(ld, root, "pid_file", "pid_file", &v, sizeof ld->cfg->pid_file - 1) == GOT_OK)
		strcpy(ld->cfg->pid_file, v);
	if (get_string(ld, root, "user", "user", &v, sizeof ld->cfg->user - 1) == GOT_OK && v[0]) {
		struct passwd *pw = getpwnam(v);

		if (!pw) {
			fail(ld, line_of(config_setting_get_member(root, "user")), "user \"%s\" does not exist", v);
		} else {
			strcpy(ld->cfg->user, v);
			ld->cfg->uid = pw->pw_uid;
			ld->cfg->gid = pw->pw_gid;
		}
	}
	load_log(ld, root);
	load_stats(ld, root);
	if (load_listeners(ld, root) < 0 || load_upstreams(ld, root) < 0 || load_routes(ld, root) < 0)
		return -1;
	ld->cfg->tls_ticket_rotate = 12 * 60 * 60 * 1000;
	get_duration(ld, root, "tls_ticket_rotate", "tls_ticket_rotate", &ld->cfg->tls_ticket_rotate);
	load_timeouts(ld, root);
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
	free(cfg->routes);
	for (int i = 0; i < cfg->ncerts; i++)
		tlscert_free(cfg->certs[i].loaded);
	free(cfg->certs);
	/* every slot: an entry that failed later (a bad address) left its
	 * CA in the slot the next entry reuses */
	for (int i = 0; i < CONFIG_MAX_LISTENERS; i++)
		tlsca_free(cfg->listeners[i].client_cas);
	memset(cfg, 0, sizeof *cfg);
}
