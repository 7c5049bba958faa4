/*
 * config_split.c: routes.split, split_key and split_override (common/split.h).
 *
 * The descriptors (common/config_keys.c) check each scalar where it is
 * written; the rules across keys are here: a split instead of an upstream,
 * each side a defined group named once, weights that do not all add up to
 * nothing, a key of one part read as the rate limiter reads its parts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_load.h"
#include "common/split.h"

#define fail    config_fail
#define line_of config_line_of

/* A header, cookie or argument name: a token without the bytes a cookie
 * or a query splits on. */
static const char *split_name_check(const char *v)
{
	if (!*v)
		return "must not be empty";
	if (strlen(v) >= SPLIT_NAME_MAX)
		return "is longer than 63 characters";
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}&#%", *p))
			return "must be a token: letters, digits and !#$'*+-.^_`|~";
	return NULL;
}

const char *config_check_split_name(const char *text)
{
	return split_name_check(text);
}

/* split_key: one part of a rate limit's key (common/config_ratelimit.c
 * parses it); <s> may be NULL (only checked). */
static const char *split_key_parse(const char *text, struct config_split *s)
{
	static struct config_rate_limit l; /* a few KiB: not on the stack */
	const char *why;

	if (strchr(text, '+') || !strcmp(text, "route"))
		return "must be one of client_ip, header:NAME, cookie:NAME or query:NAME (one part)";
	if ((why = config_rl_key_parse(text, &l)) != NULL)
		return why;
	if (s) {
		s->key_kind = l.parts[0].kind;
		s->key_len = l.parts[0].len;
		memcpy(s->key_name, l.parts[0].name, sizeof(s->key_name) - 1);
		snprintf(s->key, sizeof(s->key), "%s", text);
	}
	return NULL;
}

const char *config_check_split_key(const char *text)
{
	return split_key_parse(text, NULL);
}

const char *config_show_split_key(const struct config *cfg, const void *route, char *buf, size_t cap)
{
	const struct config_route *r = route;

	(void)cfg;
	(void)buf;
	(void)cap;
	return r->split && r->split->key[0] ? r->split->key : NULL;
}

static int split_sides_read(struct loader *ld, const config_setting_t *e, struct config_route *r);

static int split_group(const struct config *cfg, const char *name)
{
	for (int i = 0; i < cfg->nupstreams; i++)
		if (cfg->upstreams[i].name[0] && strcmp(cfg->upstreams[i].name, name) == 0)
			return i;
	return -1;
}

/* split_override = { header = "X-Canary"; } or { cookie = "canary"; } */
static int split_override_load(struct loader *ld, const config_setting_t *e, struct config_split *s)
{
	config_setting_t *g = config_get_group(ld, e, "split_override", "routes.split_override");
	const struct config_keyset *ks = &config_keys_route_split_override;
	enum got got[CONFIG_KEYS_MAX];
	const char *h = NULL, *c = NULL;

	if (!g)
		return !config_setting_get_member(e, "split_override");
	config_engine_read(ld, g, ks, s, got); /* no key has a field: read below */
	if (config_engine_got(ks, got, "header") == GOT_BAD || config_engine_got(ks, got, "cookie") == GOT_BAD)
		return 0;
	config_setting_lookup_string(g, "header", &h);
	config_setting_lookup_string(g, "cookie", &c);
	if (!h == !c) {
		fail(ld, line_of(g), "routes.split_override needs one of header or cookie");
		return 0;
	}
	s->ovr_kind = h ? SPLIT_OVERRIDE_HEADER : SPLIT_OVERRIDE_COOKIE;
	s->ovr_len = (uint8_t)strlen(h ? h : c);
	memcpy(s->ovr_name, h ? h : c, s->ovr_len + 1u);
	return 1;
}

static int split_sides_load(struct loader *ld, const config_setting_t *list, struct config_split *s)
{
	const struct config_keyset *ks = &config_keys_route_split;
	uint64_t total = 0;
	int n = config_setting_length(list), good = 1;

	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_get_entry(ld, list, i, "routes.split");
		struct config_split_side *side = &s->side[s->nsides];
		enum got got[CONFIG_KEYS_MAX];
		const char *v = NULL;

		if (!e) {
			good = 0;
			continue;
		}
		config_engine_read(ld, e, ks, side, got);
		if (config_engine_got(ks, got, "upstream") != GOT_OK || config_engine_got(ks, got, "weight") != GOT_OK) {
			good = 0;
			continue;
		}
		config_setting_lookup_string(e, "upstream", &v);
		if ((side->upstream = split_group(ld->cfg, v)) < 0) {
			fail(ld, line_of(config_setting_get_member(e, "upstream")),
			     "routes.split upstream \"%s\" is not defined", v);
			good = 0;
			continue;
		}
		for (int k = 0; k < s->nsides; k++)
			if (s->side[k].upstream == side->upstream) {
				fail(ld, line_of(e), "routes.split names upstream \"%s\" twice", v);
				good = 0;
			}
		total += side->weight;
		s->nsides++;
	}
	if (good && !total) {
		fail(ld, line_of(list), "routes.split: the weights add up to 0; one side at least needs a weight");
		good = 0;
	}
	return good;
}

/* mirror = { upstream = "shadow"; percent = 10; } */
static int split_mirror_load(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	config_setting_t *g = config_get_group(ld, e, "mirror", "routes.mirror");
	const struct config_keyset *ks = &config_keys_route_mirror;
	enum got got[CONFIG_KEYS_MAX];
	const struct config_upstream *u;
	const char *v = NULL;
	int k;

	r->mirror.group = 0;
	if (!g)
		return !config_setting_get_member(e, "mirror");
	config_engine_read(ld, g, ks, &r->mirror, got);
	if (config_engine_got(ks, got, "upstream") != GOT_OK || config_engine_got(ks, got, "percent") != GOT_OK ||
	    config_engine_got(ks, got, "max_in_flight") == GOT_BAD)
		return 0;
	if (config_setting_get_member(e, "return")) {
		fail(ld, line_of(g), "routes.mirror needs a proxied route: a route with a return has no request to copy");
		return 0;
	}
	config_setting_lookup_string(g, "upstream", &v);
	if ((k = split_group(ld->cfg, v)) < 0) {
		fail(ld, line_of(config_setting_get_member(g, "upstream")), "routes.mirror upstream \"%s\" is not defined",
		     v);
		return 0;
	}
	u = &ld->cfg->upstreams[k];
	if (u->tls || u->proxy_protocol || u->protocol) {
		fail(ld, line_of(config_setting_get_member(g, "upstream")),
		     "routes.mirror upstream \"%s\" has tls, proxy_protocol or protocol: a shadow group is plain HTTP/1.1", v);
		return 0;
	}
	r->mirror.group = k + 1;
	return 1;
}

int config_split_load(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	int m = split_mirror_load(ld, e, r), rc = split_sides_read(ld, e, r);

	return rc < 0 ? -1 : m && rc;
}

static int split_sides_read(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	config_setting_t *list = config_setting_get_member(e, "split");
	const config_setting_t *key = config_setting_get_member(e, "split_key");
	const char *v;
	struct config_split *s;
	int good;

	if (!list) {
		if (key || config_setting_get_member(e, "split_override")) {
			fail(ld, line_of(key ? key : config_setting_get_member(e, "split_override")),
			     "routes.%s needs a routes.split", key ? "split_key" : "split_override");
			return 0;
		}
		return 1;
	}
	if (config_setting_get_member(e, "upstream")) {
		fail(ld, line_of(list), "routes.split and routes.upstream exclude each other: the split names the groups");
		return 0;
	}
	if (config_setting_get_member(e, "return")) {
		fail(ld, line_of(list), "routes.split and routes.return exclude each other: a route is answered by "
		                        "weir or proxied");
		return 0;
	}
	list = config_get_list(ld, e, "split", "routes.split", 1, SPLIT_SIDES);
	if (!list)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	good = split_sides_load(ld, list, s);
	good &= split_override_load(ld, e, s);
	/* the descriptor checked it (routes.split_key) */
	if (key && (v = config_setting_get_string(key)) != NULL && split_key_parse(v, s) != NULL)
		good = 0;
	if (!good) {
		free(s);
		return 0;
	}
	s->index = ld->cfg->nsplits++;
	r->split = s;
	/* the first side stands for the split wherever one group is read
	 * before a side is chosen (the route's settings: shm/route_split.c) */
	r->upstream = s->side[0].upstream;
	return 1;
}

void config_split_dump(FILE *out, const struct config *cfg, const struct config_route *r)
{
	const struct config_split *s = r->split;

	if (r->mirror.group)
		fprintf(out, "mirror = { upstream = \"%s\"; percent = %u; max_in_flight = %u; }; ",
		        cfg->upstreams[r->mirror.group - 1].name, r->mirror.percent, r->mirror.max_in_flight);
	if (!s)
		return;
	fputs("split = (", out);
	for (int i = 0; i < s->nsides; i++)
		fprintf(out, "%s{ upstream = \"%s\"; weight = %u; }", i ? ", " : " ",
		        cfg->upstreams[s->side[i].upstream].name, s->side[i].weight);
	fputs(" ); ", out); /* split_key: a descriptor's show (config_show_split_key) */
	if (s->ovr_kind)
		fprintf(out, "split_override = { %s = \"%s\"; }; ", s->ovr_kind == SPLIT_OVERRIDE_HEADER ? "header" : "cookie",
		        s->ovr_name);
}
