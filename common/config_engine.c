/*
 * config_engine.c: the part of the loader that no key needs to know about.
 *
 * Principle: a group of the file is read against its table of descriptors
 * (common/config_keys.h) in one walk: names that are not in the table are
 * refused, every default is applied, every value present is checked for
 * its type and range, and every problem is recorded with its file and line
 * in words made from the descriptor ("limits.headers must be from 1 to
 * 1000 (got 0)"), while the walk goes on. The value parsers (durations,
 * sizes, addresses) and the error list live here too; the hand-written
 * sections of common/config_file.c use them for what descriptors cannot say.
 */
#include "common/config_load.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config_dump.h"

/* ---- errors ------------------------------------------------------------ */

/*
 * Kept messages stay sorted by line, so an operator reads them top to
 * bottom; when CONFIG_MAX_ERRORS are kept already, a message for an
 * earlier line pushes out the last one.
 */
void config_fail(struct loader *ld, int line, const char *fmt, ...)
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

/* the short names, as in common/config_file.c */
#define fail config_fail
#define line_of config_line_of

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

int config_parse_decimal(const char *text, uint32_t scale, uint32_t *v)
{
	const char *p = text;
	uint64_t n, frac = 0;

	if (!text || parse_digits(&p, &n) < 0 || n > UINT32_MAX / scale)
		return -1;
	n *= scale;
	if (*p == '.') {
		if (!*++p)
			return -1;
		for (; *p >= '0' && *p <= '9' && scale > 1; p++) {
			scale /= 10;
			frac += (uint64_t)(*p - '0') * scale;
		}
	}
	if (*p || n + frac > UINT32_MAX)
		return -1;
	*v = (uint32_t)(n + frac);
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

const char *config_addr_parse(const char *text, struct config_addr *a)
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
	if (!text || config_addr_parse(text, addr)) {
		memset(addr, 0, sizeof *addr);
		return -1;
	}
	return 0;
}

/* ---- groups and lists -------------------------------------------------- */

config_setting_t *config_get_group(struct loader *ld, const config_setting_t *group, const char *key,
                                   const char *what)
{
	config_setting_t *s = config_setting_get_member(group, key);

	if (s && !config_setting_is_group(s)) {
		fail(ld, line_of(s), "%s must be a group: %s = { ... };", what, key);
		return NULL;
	}
	return s;
}

config_setting_t *config_get_list(struct loader *ld, const config_setting_t *group, const char *key,
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

config_setting_t *config_get_entry(struct loader *ld, const config_setting_t *list, int i, const char *what)
{
	config_setting_t *e = config_setting_get_elem(list, (unsigned)i);

	if (!config_setting_is_group(e)) {
		fail(ld, line_of(e), "%s entry must be a group: { ... }", what);
		return NULL;
	}
	return e;
}

/* ---- the engine -------------------------------------------------------- */

const struct config_key *config_keys_find(const struct config_keyset *ks, const char *name)
{
	for (int i = 0; i < ks->nkeys; i++)
		if (strcmp(ks->keys[i].name, name) == 0)
			return &ks->keys[i];
	return NULL;
}

enum got config_engine_got(const struct config_keyset *ks, const enum got *got, const char *name)
{
	const struct config_key *k = config_keys_find(ks, name);

	return k ? got[k - ks->keys] : GOT_NONE;
}

static int is_int(const config_setting_t *s)
{
	return config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64;
}

/* Stores <v> in <k>'s field: 4 bytes (int or uint32_t, both holding it
 * once the range is checked) or 8 (uint64_t). */
static void store_number(const struct config_key *k, void *base, uint64_t v)
{
	void *f = config_key_field(k, base);

	if (k->size == sizeof(uint64_t)) {
		memcpy(f, &v, sizeof v);
	} else {
		uint32_t v32 = (uint32_t)v;
		memcpy(f, &v32, sizeof v32);
	}
}

static uint64_t auto_count(const struct config_key *k)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t v = n < 1 ? 1 : (uint64_t)n;

	return v < k->min ? k->min : v > k->max ? k->max : v;
}

static int enum_index(const struct config_key *k, const char *text)
{
	for (int i = 0; i < k->nnames; i++)
		if (k->names[i] && strcmp(k->names[i], text) == 0)
			return i;
	return -1;
}

/* A string value: NULL, or why it is not one for <k> (the value already
 * type-checked and short enough). */
static const char *take_string(const struct config_key *k, const char *text, void *base, struct config_addr *addr)
{
	const char *why;
	int i;

	switch (k->type) {
	case CONFIG_KEY_ENUM:
		if ((i = enum_index(k, text)) < 0)
			return "";
		store_number(k, base, (uint64_t)i);
		return NULL;
	case CONFIG_KEY_ADDR:
		if ((why = config_addr_parse(text, addr)) != NULL)
			return why;
		memcpy(config_key_field(k, base), addr, sizeof *addr);
		return NULL;
	default:
		if (k->check && (why = k->check(text)) != NULL)
			return why;
		if (k->store)
			return k->store(text, base);
		if (k->size)
			memcpy(config_key_field(k, base), text, strlen(text) + 1);
		return NULL;
	}
}

/* The default of <k> into its field; a key without one is zeroed, so a
 * list entry's slot reused after a bad entry holds nothing of it. */
static void apply_default(const struct config_key *k, void *base)
{
	const char *d = k->def;
	struct config_addr addr;
	uint64_t v = 0;
	uint32_t ms = 0;

	if (k->type == CONFIG_KEY_GROUP || k->type == CONFIG_KEY_LIST || k->type == CONFIG_KEY_STRINGS)
		return;
	if (!d || (k->flags & CONFIG_KEY_INHERIT)) { /* inherited: its loader copies the value */
		if (k->size)
			memset(config_key_field(k, base), 0, k->size);
		return;
	}
	switch (k->type) {
	case CONFIG_KEY_DURATION:
	case CONFIG_KEY_DURATION_OFF:
		if (strcmp(d, "off") != 0)
			config_parse_duration(d, &ms);
		store_number(k, base, ms);
		break;
	case CONFIG_KEY_SIZE:
		config_parse_size(d, &v);
		store_number(k, base, v);
		break;
	case CONFIG_KEY_INT:
		store_number(k, base, (k->flags & CONFIG_KEY_AUTO) && strcmp(d, "auto") == 0 ? auto_count(k)
		                                                                              : strtoull(d, NULL, 10));
		break;
	case CONFIG_KEY_BOOL:
		store_number(k, base, strcmp(d, "true") == 0);
		break;
	default:
		take_string(k, d, base, &addr);
		break;
	}
}

/* A list of <k>'s names for a message: "debug, info, notice". */
static const char *enum_list(const struct config_key *k, char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < k->nnames; i++)
		if (k->names[i] && n < cap)
			n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", k->names[i]);
	return buf;
}

/* A duration within its descriptor's range (min and max in ms; 0: from
 * 1 ms, to about 49 days), stored; else the error with the range in the
 * units the docs use. */
static enum got duration_in_range(struct loader *ld, int line, const struct config_key *k, const char *what,
                                  void *base, uint32_t ms)
{
	uint64_t lo = k->min ? k->min : 1, hi = k->max ? k->max : UINT32_MAX;
	char a[32], b[32], c[32];

	if (ms < lo || ms > hi) {
		fail(ld, line, "%s must be from %s to %s (got %s)", what, config_dump_duration((uint32_t)lo, a, sizeof a),
		     config_dump_duration((uint32_t)hi, b, sizeof b), config_dump_duration(ms, c, sizeof c));
		return GOT_BAD;
	}
	store_number(k, base, ms);
	return GOT_OK;
}

/* Member <s> for key <k> (called <what> in messages) into <base>. */
static enum got read_key(struct loader *ld, const config_setting_t *s, const struct config_key *k, const char *what,
                         void *base)
{
	int line = line_of(s);
	int t = config_setting_type(s);
	long long iv = is_int(s) ? config_setting_get_int64(s) : 0;
	const char *text = t == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
	struct config_addr addr;
	const char *why;
	char buf[256], num[48];
	uint32_t ms;
	uint64_t v;

	if (!text && (k->flags & CONFIG_KEY_NUMBER) && (t == CONFIG_TYPE_FLOAT || is_int(s))) {
		/* as short as it reads back (1.25, not 1.250000): the store() judges the decimals */
		if (t == CONFIG_TYPE_FLOAT)
			snprintf(num, sizeof num, "%.10g", config_setting_get_float(s));
		else
			snprintf(num, sizeof num, "%lld", iv);
		text = num;
	}
	switch (k->type) {
	case CONFIG_KEY_INT:
		if ((k->flags & CONFIG_KEY_AUTO) && text && strcmp(text, "auto") == 0) {
			store_number(k, base, auto_count(k));
			return GOT_OK;
		}
		if (!is_int(s)) {
			if (k->flags & CONFIG_KEY_AUTO)
				fail(ld, line, "%s must be \"auto\" or a number from %llu to %llu", what,
				     (unsigned long long)k->min, (unsigned long long)k->max);
			else
				fail(ld, line, "%s must be an integer", what);
			return GOT_BAD;
		}
		if (iv < (long long)k->min || iv > (long long)k->max) {
			fail(ld, line, "%s must be from %lld to %lld (got %lld)", what, (long long)k->min, (long long)k->max,
			     iv);
			return GOT_BAD;
		}
		store_number(k, base, (uint64_t)iv);
		return GOT_OK;
	case CONFIG_KEY_DURATION_OFF:
		if ((is_int(s) && iv == 0) || (text && (strcmp(text, "0") == 0 || strcmp(text, "off") == 0))) {
			store_number(k, base, 0);
			return GOT_OK;
		}
		/* fall through */
	case CONFIG_KEY_DURATION:
		if (is_int(s)) {
			if (iv < 1 || iv > (long long)UINT32_MAX) {
				fail(ld, line, "%s must be from 1 to %u milliseconds (got %lld)", what, UINT32_MAX, iv);
				return GOT_BAD;
			}
			return duration_in_range(ld, line, k, what, base, (uint32_t)iv);
		}
		if (text && config_parse_duration(text, &ms) == 0)
			return duration_in_range(ld, line, k, what, base, ms);
		if (text)
			fail(ld, line,
			     "%s \"%s\" is not a duration: write a number with ms, s, m or h (\"250ms\", \"5s\"), "
			     "more than 0 and at most 49 days%s",
			     what, text, k->type == CONFIG_KEY_DURATION_OFF ? ", or 0 or \"off\"" : "");
		else
			fail(ld, line, "%s must be a duration such as \"5s\" or a number of milliseconds", what);
		return GOT_BAD;
	case CONFIG_KEY_SIZE:
		if (is_int(s)) {
			if (iv < 0) {
				fail(ld, line, "%s must not be negative (got %lld)", what, iv);
				return GOT_BAD;
			}
			v = (uint64_t)iv;
		} else if (text) {
			if (config_parse_size(text, &v) < 0) {
				fail(ld, line, "%s \"%s\" is not a size: write a number of bytes with an optional k, m or g",
				     what, text);
				return GOT_BAD;
			}
		} else {
			fail(ld, line, "%s must be a size such as \"16k\" or a number of bytes", what);
			return GOT_BAD;
		}
		if (v < k->min || v > k->max) {
			fail(ld, line, "%s must be from %llu to %llu bytes (got %llu)", what, (unsigned long long)k->min,
			     (unsigned long long)k->max, (unsigned long long)v);
			return GOT_BAD;
		}
		store_number(k, base, v);
		return GOT_OK;
	case CONFIG_KEY_BOOL:
		if (t != CONFIG_TYPE_BOOL) {
			fail(ld, line, "%s must be true or false", what);
			return GOT_BAD;
		}
		store_number(k, base, (uint64_t)config_setting_get_bool(s));
		return GOT_OK;
	case CONFIG_KEY_GROUP:
	case CONFIG_KEY_LIST:
	case CONFIG_KEY_STRINGS:
		return GOT_OK; /* read by hand */
	default:
		break;
	}

	/* an ENUM may name its values false and true (worker_cpu_affinity) */
	if ((k->type == CONFIG_KEY_ENUM || (k->flags & CONFIG_KEY_TRUE_OK)) && t == CONFIG_TYPE_BOOL)
		text = config_setting_get_bool(s) ? "true" : "false";
	/* STRING, ENUM and ADDR are strings in the file */
	if (!text) {
		fail(ld, line, "%s must be a string", what);
		return GOT_BAD;
	}
	if (strlen(text) > (k->max ? k->max : 255)) {
		fail(ld, line, "%s is too long (at most %llu bytes)", what, (unsigned long long)(k->max ? k->max : 255));
		return GOT_BAD;
	}
	why = take_string(k, text, base, &addr);
	if (!why)
		return GOT_OK;
	if (k->type == CONFIG_KEY_ENUM)
		fail(ld, line, "%s \"%s\" is not one of %s", what, text, enum_list(k, buf, sizeof buf));
	else if (k->flags & CONFIG_KEY_NOECHO)
		fail(ld, line, "%s %s", what, why);
	else
		fail(ld, line, "%s \"%s\" %s", what, text, why);
	return GOT_BAD;
}

void config_engine_read(struct loader *ld, const config_setting_t *g, const struct config_keyset *ks, void *base,
                        enum got *got)
{
	int n = g ? config_setting_length(g) : 0;
	char what[128];

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(s);

		if (!config_keys_find(ks, name))
			fail(ld, line_of(s), "unknown key \"%s\" %s", name, ks->where);
	}
	for (int i = 0; i < ks->nkeys; i++) {
		const struct config_key *k = &ks->keys[i];
		const config_setting_t *s = g ? config_setting_get_member(g, k->name) : NULL;
		enum got r = GOT_NONE;

		snprintf(what, sizeof what, "%s%s%s", ks->path, ks->path[0] ? "." : "", k->name);
		apply_default(k, base);
		if (s)
			r = read_key(ld, s, k, what, base);
		else if (g && (k->flags & CONFIG_KEY_REQUIRED) && k->type != CONFIG_KEY_GROUP &&
		         k->type != CONFIG_KEY_LIST && k->type != CONFIG_KEY_STRINGS)
			fail(ld, line_of(g), "%s is required", what);
		if (got)
			got[i] = r;
	}
}
