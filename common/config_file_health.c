/*
 * config_file_health.c: health = { ... } of an upstreams entry (the scalar keys
 * are described in common/config_keys.c; this reads the group, its expect
 * list and the rules across keys). Named as config_file.c is: the types
 * are config_health.h, which config.h includes, so the loader part may
 * include config_load.h without a cycle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_load.h"

/* "200" or "200-399" into [lo, hi], statuses 100..599. 0, or -1. */
static int health_expect_parse(const char *v, uint16_t range[2])
{
	char *end;
	long lo = strtol(v, &end, 10), hi = lo;

	if (end == v || v[0] == '-' || v[0] == '+')
		return -1;
	if (*end == '-') {
		const char *h = end + 1;

		if (*h < '0' || *h > '9')
			return -1;
		hi = strtol(h, &end, 10);
	}
	if (*end || lo < 100 || hi > 599 || lo > hi)
		return -1;
	range[0] = (uint16_t)lo;
	range[1] = (uint16_t)hi;
	return 0;
}

static void health_expect(struct loader *ld, const config_setting_t *g, struct config_health *h)
{
	config_setting_t *s = config_setting_get_member(g, "expect");
	int n;

	h->nexpect = 1;
	h->expect[0][0] = 200;
	h->expect[0][1] = 399;
	if (!s)
		return;
	n = config_setting_is_aggregate(s) ? config_setting_length(s) : -1;
	if (n < 1 || n > CONFIG_HEALTH_EXPECT_MAX) {
		config_fail(
		    ld, config_line_of(s),
		    "upstreams.health.expect must be a list of 1 to %d status ranges: expect = [ \"200-399\" ];",
		    CONFIG_HEALTH_EXPECT_MAX);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));

		if (!v || health_expect_parse(v, h->expect[i]) < 0) {
			config_fail(
			    ld, config_line_of(s),
			    "upstreams.health.expect entries must be statuses such as \"200\" or ranges such as "
			    "\"200-399\", from 100 to 599");
			return;
		}
	}
	h->nexpect = n;
}

/* The line of key <key> of <g>, or of <g> when it is absent. */
static int health_line(const config_setting_t *g, const char *key)
{
	const config_setting_t *k = config_setting_get_member(g, key);

	return config_line_of(k ? k : g);
}

void config_load_health(struct loader *ld, const config_setting_t *e, struct config_upstream *u)
{
	config_setting_t *g = config_get_group(ld, e, "health", "upstreams.health");
	struct config_health *h = &u->health;
	enum got got[CONFIG_KEYS_MAX];

	if (!g)
		return;
	h->line = config_line_of(g);
	config_engine_read(ld, g, &config_keys_upstream_health, h, got);
	health_expect(ld, g, h);
	/* one check of a server at a time: the next starts once this one
	 * ended; the default timeout shrinks to a short interval */
	if (h->timeout > h->interval && config_engine_got(&config_keys_upstream_health, got, "timeout") == GOT_NONE)
		h->timeout = h->interval;
	if (h->timeout > h->interval)
		config_fail(ld, health_line(g, "timeout"),
		            "upstreams.health.timeout (%u ms) must be at most interval (%u ms)", h->timeout,
		            h->interval);
	/* the default jitter shrinks to a tenth of a short interval */
	if (h->jitter >= h->interval && config_engine_got(&config_keys_upstream_health, got, "jitter") == GOT_NONE)
		h->jitter = h->interval / 10;
	if (h->jitter >= h->interval)
		config_fail(ld, health_line(g, "jitter"),
		            "upstreams.health.jitter (%u ms) must be below interval (%u ms)", h->jitter, h->interval);
}
