/*
 * config_ratelimit.c: the rate_limits list and the names routes give it.
 *
 * Principle: everything a worker needs to decide on a request is worked
 * out here, once, at load time: the key split into its parts, the rate
 * turned into GCRA's emission interval in nanoseconds (rounded up, so a
 * limit is never looser than written), and the identity of the limit's
 * state (its seed: name, key, masks and kind), which decides whether a
 * reload keeps a limit's state or starts it afresh (shm/limit.h). The
 * descriptors (common/config_keys.c) check each scalar; the rules across
 * keys (a rate or a concurrency, not both; delay needs a rate) are here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/config_load.h"
#include "common/fnv.h"

#define fail    config_fail
#define line_of config_line_of

/* RFC 9110's tchar, for header names. */
static int rl_tchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Parses key <text> into <l>'s parts (l may be NULL: only checked).
 * Returns NULL or what is wrong. */
static const char *rl_key_parse(const char *text, struct config_rate_limit *l)
{
	const char *p = text;
	int n = 0;
	uint32_t seen = 0;

	if (!*p)
		return "must not be empty";
	while (*p) {
		const char *end = strchr(p, '+');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		int kind;
		const char *name = NULL;
		size_t nlen = 0;

		if (n == CONFIG_LIMIT_PARTS)
			return "has more than 4 parts";
		if (len == 9 && !strncmp(p, "client_ip", 9)) {
			kind = CONFIG_RL_CLIENT_IP;
		} else if (len == 5 && !strncmp(p, "route", 5)) {
			kind = CONFIG_RL_ROUTE;
		} else if (len > 7 && !strncmp(p, "header:", 7)) {
			kind = CONFIG_RL_HEADER, name = p + 7, nlen = len - 7;
		} else if (len > 7 && !strncmp(p, "cookie:", 7)) {
			kind = CONFIG_RL_COOKIE, name = p + 7, nlen = len - 7;
		} else if (len > 6 && !strncmp(p, "query:", 6)) {
			kind = CONFIG_RL_QUERY, name = p + 6, nlen = len - 6;
		} else {
			return "must be parts client_ip, route, header:NAME, cookie:NAME or query:NAME joined by '+'";
		}
		if (name) {
			if (nlen >= CONFIG_NAME_MAX)
				return "has a name longer than 63 characters";
			for (size_t i = 0; i < nlen; i++)
				if (kind == CONFIG_RL_HEADER ? !rl_tchar((unsigned char)name[i])
				                             : (name[i] <= ' ' || strchr(";=&?#%", name[i])))
					return "has a header, cookie or parameter name with a character it cannot hold";
		} else if (seen & (1u << kind)) {
			return "names client_ip or route twice";
		}
		seen |= 1u << kind;
		if (l) {
			l->parts[n].kind = (uint8_t)kind;
			l->parts[n].len = (uint8_t)nlen;
			memcpy(l->parts[n].name, name ? name : "", nlen);
			l->parts[n].name[nlen] = 0;
		}
		n++;
		if (!end)
			break;
		p = end + 1;
		if (!*p)
			return "ends with '+'";
	}
	if (l)
		l->nparts = n;
	return NULL;
}

const char *config_rl_key_parse(const char *text, struct config_rate_limit *l)
{
	return rl_key_parse(text, l);
}

const char *config_check_rl_key(const char *text)
{
	return rl_key_parse(text, NULL);
}

/* "N/s", "N/m", "N/h" with 1 <= N <= 1000000. */
static const char *rl_rate_parse(const char *text, uint32_t *quota, uint32_t *window)
{
	char *end;
	unsigned long n = strtoul(text, &end, 10);

	if (text[0] < '0' || text[0] > '9' || n < 1 || n > 1000000 || end[0] != '/' || !end[1] || end[2])
		return "must be a count of 1 to 1000000 per second, minute or hour: \"100/s\", \"6000/m\", \"10/h\"";
	switch (end[1]) {
	case 's': *window = 1; break;
	case 'm': *window = 60; break;
	case 'h': *window = 3600; break;
	default: return "must be a count of 1 to 1000000 per second, minute or hour: \"100/s\", \"6000/m\", \"10/h\"";
	}
	*quota = (uint32_t)n;
	return NULL;
}

const char *config_check_rl_rate(const char *text)
{
	uint32_t q, w;

	return rl_rate_parse(text, &q, &w);
}

/* The identity of a limit's state: what, if changed, makes the old state
 * mean something else. A rate, a burst or a mode may change and keep it. */
static uint64_t rl_seed(const struct config_rate_limit *l)
{
	uint64_t h = FNV64_BASIS;
	int kind = l->concurrent > 0;

	h = fnv1a64(h, l->name, strlen(l->name) + 1);
	h = fnv1a64(h, l->key, strlen(l->key) + 1);
	h = fnv1a64(h, &l->ipv4_mask, sizeof(l->ipv4_mask));
	h = fnv1a64(h, &l->ipv6_mask, sizeof(l->ipv6_mask));
	h = fnv1a64(h, &kind, sizeof(kind));
	return h;
}

/* rate_limits.adaptive: read, and checked against the limit and the
 * upstreams (loaded before the limits). 0, or -1 when refused (logged). */
static int rl_adaptive_load(struct loader *ld, const config_setting_t *e, struct config_rate_limit *l)
{
	const struct config *cfg = ld->cfg;
	config_setting_t *g = config_get_group(ld, e, "adaptive", "rate_limits.adaptive");
	enum got got[CONFIG_KEYS_MAX];
	int found = 0;

	if (!g)
		return 0;
	l->adaptive.latency_p99 = 1000;
	l->adaptive.window = 10000;
	config_engine_read(ld, g, &config_keys_rate_limit_adaptive, l, got);
	if (config_engine_got(&config_keys_rate_limit_adaptive, got, "upstream") != GOT_OK)
		return -1;
	if (l->concurrent > 0) {
		fail(ld, line_of(g), "rate limit \"%s\": adaptive needs a rate, not concurrent", l->name);
		return -1;
	}
	if (l->adaptive.window < 1000 || l->adaptive.window > 60000) {
		/* the master keeps 64 s of snapshots (master/adaptive.h) */
		fail(ld, line_of(config_setting_get_member(g, "window")),
		     "rate limit \"%s\": adaptive.window must be from 1s to 60s", l->name);
		return -1;
	}
	for (int i = 0; i < cfg->nupstreams; i++)
		found |= !strcmp(cfg->upstreams[i].name, l->adaptive.upstream);
	if (!found) {
		fail(ld, line_of(config_setting_get_member(g, "upstream")),
		     "rate limit \"%s\": adaptive.upstream \"%s\" is not an upstream", l->name, l->adaptive.upstream);
		return -1;
	}
	if (l->adaptive.floor[0]) {
		uint32_t q, w;

		rl_rate_parse(l->adaptive.floor, &q, &w);
		l->adaptive.floor_ns = ((uint64_t)w * 1000000000ull + q - 1) / q;
		if (l->adaptive.floor_ns < l->interval_ns) {
			fail(ld, line_of(config_setting_get_member(g, "floor")),
			     "rate limit \"%s\": adaptive.floor \"%s\" is above its rate \"%s\"", l->name,
			     l->adaptive.floor, l->rate);
			return -1;
		}
	}
	l->adaptive.on = 1;
	return 0;
}

int config_load_rate_limits(struct loader *ld, const config_setting_t *root)
{
	const struct config_keyset *ks = &config_keys_rate_limit;
	struct config *cfg = ld->cfg;
	config_setting_t *list = config_setting_get_member(root, "rate_limits");
	config_setting_t *redis = config_get_group(ld, root, "redis", "redis");
	enum got rgot[CONFIG_KEYS_MAX];
	int n;

	config_engine_read(ld, redis, &config_keys_redis, cfg, rgot);
	cfg->has_redis = redis && config_engine_got(&config_keys_redis, rgot, "address") == GOT_OK;

	if (!list)
		return 0;
	if (config_setting_is_list(list) && config_setting_length(list) == 0)
		return 0; /* rate_limits = ( ); says "none" */
	list = config_get_list(ld, root, "rate_limits", "rate_limits", 0, CONFIG_MAX_RATE_LIMITS);
	if (!list)
		return 0;
	n = config_setting_length(list);
	cfg->rate_limits = calloc((size_t)n, sizeof *cfg->rate_limits);
	if (!cfg->rate_limits)
		return -1;
	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_get_entry(ld, list, i, "rate_limits");
		struct config_rate_limit *l = &cfg->rate_limits[cfg->nrate_limits];
		enum got got[CONFIG_KEYS_MAX];
		enum got gr, gc;

		if (!e)
			continue;
		memset(l, 0, sizeof *l);
		l->line = line_of(e);
		config_engine_read(ld, e, ks, l, got);
		if (config_engine_got(ks, got, "name") != GOT_OK || config_engine_got(ks, got, "key") != GOT_OK)
			continue;
		for (int j = 0; j < cfg->nrate_limits; j++)
			if (!strcmp(cfg->rate_limits[j].name, l->name)) {
				fail(ld, line_of(config_setting_get_member(e, "name")),
				     "rate limit \"%s\" is already defined on line %d", l->name,
				     cfg->rate_limits[j].line);
				break;
			}
		rl_key_parse(l->key, l);
		gr = config_engine_got(ks, got, "rate");
		gc = config_engine_got(ks, got, "concurrent");
		if (gr == GOT_BAD || gc == GOT_BAD)
			continue;
		if ((gr == GOT_OK) == (gc == GOT_OK && l->concurrent > 0)) {
			fail(ld, l->line, "rate limit \"%s\" needs either rate = \"N/s\" or concurrent = N, not %s",
			     l->name, gr == GOT_OK ? "both" : "neither");
			continue;
		}
		if (gr != GOT_OK && (l->burst > 1 || l->mode == CONFIG_RL_DELAY)) {
			fail(ld, l->line, "rate limit \"%s\": burst and mode = \"delay\" need a rate, not concurrent",
			     l->name);
			continue;
		}
		if (l->scope == CONFIG_RL_CLUSTER && (gr != GOT_OK || !cfg->has_redis)) {
			fail(ld, l->line,
			     "rate limit \"%s\": scope = \"cluster\" needs a rate and a redis = { address = ...; } "
			     "group",
			     l->name);
			continue;
		}
		if (gr == GOT_OK) {
			rl_rate_parse(l->rate, &l->quota, &l->window);
			/* rounded up: never admits faster than written */
			l->interval_ns = ((uint64_t)l->window * 1000000000ull + l->quota - 1) / l->quota;
		}
		if (rl_adaptive_load(ld, e, l) < 0)
			continue;
		l->seed = rl_seed(l);
		cfg->nrate_limits++;
	}
	return 0;
}

int config_route_rate_limits(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	const struct config *cfg = ld->cfg;
	config_setting_t *s = config_setting_get_member(e, "rate_limits");
	int n;

	if (!s)
		return 1;
	if (!config_setting_is_aggregate(s)) {
		fail(ld, line_of(s), "routes.rate_limits must be a list of names: rate_limits = [ \"per-ip\" ];");
		return 0;
	}
	n = config_setting_length(s);
	if (n > CONFIG_ROUTE_LIMITS) {
		fail(ld, line_of(s), "routes.rate_limits names %d limits, at most %d are allowed", n,
		     CONFIG_ROUTE_LIMITS);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));
		int k;

		for (k = 0; v && k < cfg->nrate_limits && strcmp(cfg->rate_limits[k].name, v); k++)
			;
		if (!v || k == cfg->nrate_limits) {
			fail(ld, line_of(s), "routes.rate_limits: \"%s\" is not a defined rate limit",
			     v ? v : "(not a string)");
			return 0;
		}
		for (int j = 0; j < r->nrate_limits; j++)
			if (r->rate_limits[j] == k) {
				fail(ld, line_of(s), "routes.rate_limits names \"%s\" twice", v);
				return 0;
			}
		r->rate_limits[r->nrate_limits++] = (uint8_t)k;
	}
	return 1;
}
