/*
 * config_file_resil.c: the keys of an upstream group's traffic controls
 * (common/config_resil.h), read like every other group. Named as
 * config_file.c is: config.h includes config_resil.h for its types, so
 * the loader part may include config_load.h without an include cycle.
 */
#include "common/config_resil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_keys.h"
#include "common/config_load.h"

#define AT(st, m) .offset = offsetof(st, m), .size = sizeof(((st *)0)->m)
#define PERCENT(st, m, d, text)                                                                                        \
	{                                                                                                              \
		.name = #m, .type = CONFIG_KEY_INT, AT(st, m), .min = 0, .max = 100, .def = d, .doc = text             \
	}
#define COUNT(st, m, d, text)                                                                                          \
	{                                                                                                              \
		.name = #m, .type = CONFIG_KEY_INT, AT(st, m), .min = 0, .max = 100000, .def = d, .doc = text          \
	}
#define TIME(st, m, d, text)                                                                                           \
	{                                                                                                              \
		.name = #m, .type = CONFIG_KEY_DURATION, AT(st, m), .min = 1, .max = UINT32_MAX, .def = d, .doc = text \
	}

static const struct config_key outlier_keys[] = {
    COUNT(struct config_outlier, consecutive_5xx, "5", "5xx answers in a row that eject a server; 0: off"),
    {.name = "consecutive_gateway_failures",
     .type = CONFIG_KEY_INT,
     AT(struct config_outlier, consecutive_gateway),
     .min = 0,
     .max = 100000,
     .def = "5",
     .doc = "connect failures and timeouts in a row that eject a server; 0: off"},
    PERCENT(struct config_outlier, failure_percentage, "0",
            "failed requests (5xx, connect failure, timeout) in an `interval` that eject; 0: off"),
    COUNT(struct config_outlier, failure_min_requests, "20",
          "requests a server needs in an `interval` before its failure percentage is judged"),
    TIME(struct config_outlier, interval, "10s", "the window of the failure-percentage detector"),
    TIME(struct config_outlier, base_ejection_time, "30s", "ejection time, times the ejections so far"),
    TIME(struct config_outlier, max_ejection_time, "300s", "the cap on one ejection"),
    PERCENT(struct config_outlier, max_ejection_percent, "50",
            "most of the group's servers ejected at once; never its last usable one"),
    PERCENT(struct config_outlier, panic_threshold, "50",
            "when fewer servers than this percent are usable, balance over all of them; 0: never"),
};
const struct config_keyset config_keys_upstream_outlier = {.path = "upstreams.outlier",
                                                           .where = "in upstreams.outlier",
                                                           .keys = outlier_keys,
                                                           .nkeys =
                                                               (int)(sizeof outlier_keys / sizeof outlier_keys[0])};

static const struct config_key limits_keys[] = {
    COUNT(struct config_uplimits, max_requests, "0",
          "requests in flight to the group at once, node-wide; past it 503; 0: no cap"),
    COUNT(struct config_uplimits, max_connections, "0",
          "upstream connections in use by requests at once, node-wide; past it 503; 0: no cap"),
    COUNT(struct config_uplimits, max_requests_per_server, "0",
          "requests in flight to each server of the group, node-wide; a full server is skipped; all full: as "
          "past `max_requests`; 0: no cap"),
    COUNT(struct config_uplimits, max_connections_per_server, "0",
          "connections in use to each server, node-wide (with HTTP/1.1 upstreams the same count); 0: no cap"),
    COUNT(struct config_uplimits, max_retries, "3", "retries in flight to the group at once, node-wide"),
    COUNT(struct config_uplimits, max_pending, "0",
          "requests that wait for a place past the caps, node-wide; 0: none wait, 503 at once"),
    TIME(struct config_uplimits, queue_timeout, "1s", "how long a request waits for a place at most; then 503"),
};
const struct config_keyset config_keys_upstream_limits = {.path = "upstreams.limits",
                                                          .where = "in upstreams.limits",
                                                          .keys = limits_keys,
                                                          .nkeys = (int)(sizeof limits_keys / sizeof limits_keys[0])};

#define LIMIT(m, d, text)                                                                                              \
	{                                                                                                              \
		.name = #m, .type = CONFIG_KEY_INT, AT(struct config_adaptive_conc, m), .min = 1, .max = 100000,       \
		.def = d, .doc = text                                                                                  \
	}
static const struct config_key adaptive_conc_keys[] = {
    LIMIT(min_limit, "5", "the limit never falls below this many requests in flight"),
    LIMIT(max_limit, "1000", "nor rises above this many"),
    LIMIT(initial_limit, "20", "the limit at first start (a reload or upgrade keeps the current one)"),
    {.name = "window",
     .type = CONFIG_KEY_DURATION,
     AT(struct config_adaptive_conc, window),
     .min = 250,
     .max = 10000,
     .def = "1s",
     .doc = "the short window: its mean upstream latency against the baseline moves the limit once per window"},
    {.name = "baseline_window",
     .type = CONFIG_KEY_DURATION,
     AT(struct config_adaptive_conc, baseline_window),
     .min = 1000,
     .max = 3600000,
     .def = "60s",
     .doc = "the baseline latency follows the short windows' latency as a moving average over this long"},
    {.name = "tolerance",
     .type = CONFIG_KEY_INT,
     AT(struct config_adaptive_conc, tolerance),
     .min = 100,
     .max = 1000,
     .def = "150",
     .doc = "percent: a short-window latency up to this share of the baseline is not taken as queueing"},
    {.name = "smoothing",
     .type = CONFIG_KEY_INT,
     AT(struct config_adaptive_conc, smoothing),
     .min = 1,
     .max = 100,
     .def = "20",
     .doc = "percent of each window's new limit taken, the rest kept from the limit before"},
    COUNT(struct config_adaptive_conc, max_pending, "100",
          "requests waiting for a place over the limit, node-wide; past it 503 at once (`limits.max_pending` wins "
          "when set)"),
    TIME(struct config_adaptive_conc, queue_timeout, "100ms",
         "how long a request waits at most, then 503 (`limits.queue_timeout` wins with `limits.max_pending`)"),
};
const struct config_keyset config_keys_upstream_adaptive_conc = {
    .path = "upstreams.adaptive_concurrency",
    .where = "in upstreams.adaptive_concurrency",
    .keys = adaptive_conc_keys,
    .nkeys = (int)(sizeof adaptive_conc_keys / sizeof adaptive_conc_keys[0])};

static const struct config_key breaker_keys[] = {
    {.name = "window",
     .type = CONFIG_KEY_DURATION,
     AT(struct config_breaker, window),
     .min = 1000,
     .max = BREAKER_BUCKETS * 1000,
     .def = "10s",
     .doc = "the sliding window, in 1 s buckets"},
    COUNT(struct config_breaker, min_requests, "20", "answers in the window before it may trip"),
    PERCENT(struct config_breaker, error_percent, "50",
            "trips when more answers than this are 5xx, connect failures or timeouts; 0: off"),
    PERCENT(struct config_breaker, pool_percent, "0",
            "trips when more than this share of `limits.max_connections` is in use; 0: off"),
    {.name = "latency_p99",
     .type = CONFIG_KEY_DURATION_OFF,
     AT(struct config_breaker, latency_p99),
     .min = 1,
     .max = UINT32_MAX,
     .def = "off",
     .doc = "trips when the window's 99th percentile upstream time passes it"},
    TIME(struct config_breaker, open_time, "5s", "how long it stays open at first; doubled each reopening"),
    TIME(struct config_breaker, max_open_time, "60s", "the cap on the open time"),
    {.name = "half_open_trials",
     .type = CONFIG_KEY_INT,
     AT(struct config_breaker, half_open_trials),
     .min = 1,
     .max = 1000,
     .def = "3",
     .doc = "requests let through node-wide once open time is over; all must succeed"},
    {.name = "backup",
     .type = CONFIG_KEY_STRING,
     .flags = CONFIG_KEY_OPTIONAL,
     AT(struct config_breaker, backup),
     .max = CONFIG_BACKUP_MAX - 1,
     .def = "",
     .doc = "an upstream to send to while open; none: 503 with Retry-After"},
};
const struct config_keyset config_keys_upstream_breaker = {.path = "upstreams.breaker",
                                                           .where = "in upstreams.breaker",
                                                           .keys = breaker_keys,
                                                           .nkeys =
                                                               (int)(sizeof breaker_keys / sizeof breaker_keys[0])};

static const struct config_key retry_keys[] = {
    {.name = "on",
     .type = CONFIG_KEY_STRINGS,
     .def = "`[ \"connect-failure\" ]`",
     .doc = "`connect-failure`, `reset`, `timeout`, `5xx`, `gateway-error` (502, 503, 504) or a status 400..599"},
    {.name = "attempts",
     .type = CONFIG_KEY_INT,
     AT(struct config_retry, attempts),
     .min = 1,
     .max = 10,
     .def = "2",
     .doc = "tries in all, the first included, each to another server while there is one"},
    {.name = "per_try_timeout",
     .type = CONFIG_KEY_DURATION_OFF,
     AT(struct config_retry, per_try_timeout),
     .min = 1,
     .max = UINT32_MAX,
     .def = "off",
     .doc = "a try's wait for the response head; then `timeout` applies"},
    TIME(struct config_retry, backoff, "25ms", "full-jitter backoff base, doubled per retry"),
    TIME(struct config_retry, max_backoff, "250ms", "the cap on one backoff"),
    PERCENT(struct config_retry, budget_percent, "20",
            "retries in flight at most this share of the group's requests in flight, node-wide"),
    COUNT(struct config_retry, budget_min, "3", "retries in flight always allowed, whatever the share"),
    {.name = "retry_after_max",
     .type = CONFIG_KEY_DURATION_OFF,
     AT(struct config_retry, retry_after_max),
     .min = 0,
     .max = UINT32_MAX,
     .def = "1s",
     .doc = "a retried answer's `Retry-After` up to this is the wait before the retry; a longer one: the answer "
            "is returned; `\"off\"`: ignored"},
};
const struct config_keyset config_keys_upstream_retry = {.path = "upstreams.retry",
                                                         .where = "in upstreams.retry",
                                                         .keys = retry_keys,
                                                         .nkeys = (int)(sizeof retry_keys / sizeof retry_keys[0])};

/* Sets status <s> in <rc>'s set. */
static void retry_status_set(struct config_retry *rc, int s)
{
	unsigned i = (unsigned)(s - RETRY_STATUS_MIN);

	rc->status[i / 64] |= 1ull << (i % 64);
}

/* retry.on: a list of condition words and status codes. */
static void retry_load_on(struct loader *ld, const config_setting_t *g, struct config_retry *rc)
{
	const config_setting_t *s = config_setting_get_member(g, "on");
	size_t len = 0;

	if (!s) {
		rc->when = RETRY_ON_CONNECT;
		snprintf(rc->when_text, sizeof(rc->when_text), "\"connect-failure\"");
		return;
	}
	if (!config_setting_is_aggregate(s)) {
		config_fail(ld, config_line_of(s),
		            "upstreams.retry.on must be a list of strings: on = [ \"reset\", \"503\" ];");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));
		char *end;
		long code = v ? strtol(v, &end, 10) : 0;

		if (!v) {
			config_fail(ld, config_line_of(s), "upstreams.retry.on entries must be strings");
			return;
		}
		if (strcmp(v, "connect-failure") == 0) {
			rc->when |= RETRY_ON_CONNECT;
		} else if (strcmp(v, "reset") == 0) {
			rc->when |= RETRY_ON_RESET;
		} else if (strcmp(v, "timeout") == 0) {
			rc->when |= RETRY_ON_TIMEOUT;
		} else if (strcmp(v, "5xx") == 0) {
			for (int k = 500; k < 600; k++)
				retry_status_set(rc, k);
		} else if (strcmp(v, "gateway-error") == 0) {
			retry_status_set(rc, 502);
			retry_status_set(rc, 503);
			retry_status_set(rc, 504);
		} else if (v[0] >= '1' && v[0] <= '9' && !*end && code >= RETRY_STATUS_MIN && code <= 599) {
			retry_status_set(rc, (int)code);
		} else {
			config_fail(ld, config_line_of(s),
			            "upstreams.retry.on \"%.64s\" is not one of connect-failure, reset, timeout, 5xx, "
			            "gateway-error or a status from 400 to 599",
			            v);
			return;
		}
		if (len + strlen(v) + 4 < sizeof(rc->when_text))
			len += (size_t)snprintf(rc->when_text + len, sizeof(rc->when_text) - len, "%s\"%s\"",
			                        len ? ", " : "", v);
	}
}

static void config_retry_load(struct loader *ld, const struct config_setting_t *e, struct config_retry *rc)
{
	config_setting_t *g = config_get_group(ld, e, "retry", "upstreams.retry");

	if (!g)
		return;
	rc->on = 1;
	config_engine_read(ld, g, &config_keys_upstream_retry, rc, NULL);
	retry_load_on(ld, g, rc);
	if (rc->max_backoff < rc->backoff)
		config_fail(ld, config_line_of(g), "upstreams.retry.max_backoff must be at least backoff");
}

void config_resil_load(struct loader *ld, const struct config_setting_t *e, struct config_resil *r)
{
	config_setting_t *g = config_get_group(ld, e, "outlier", "upstreams.outlier");

	if (g) {
		r->outlier.on = 1;
		config_engine_read(ld, g, &config_keys_upstream_outlier, &r->outlier, NULL);
		if (r->outlier.max_ejection_time < r->outlier.base_ejection_time)
			config_fail(ld, config_line_of(g),
			            "upstreams.outlier.max_ejection_time must be at least base_ejection_time");
	}
	g = config_get_group(ld, e, "limits", "upstreams.limits");
	if (g) {
		r->limits.on = 1;
		config_engine_read(ld, g, &config_keys_upstream_limits, &r->limits, NULL);
	}
	r->breaker.backup_index = -1;
	g = config_get_group(ld, e, "breaker", "upstreams.breaker");
	if (g) {
		struct config_breaker *b = &r->breaker;

		b->on = 1;
		config_engine_read(ld, g, &config_keys_upstream_breaker, b, NULL);
		if (b->window % 1000)
			config_fail(ld, config_line_of(config_setting_get_member(g, "window")),
			            "upstreams.breaker.window must be whole seconds (it is kept in 1 s buckets)");
		if (b->max_open_time < b->open_time)
			config_fail(ld, config_line_of(g),
			            "upstreams.breaker.max_open_time must be at least open_time");
		if (b->pool_percent && !r->limits.max_connections)
			config_fail(
			    ld, config_line_of(config_setting_get_member(g, "pool_percent")),
			    "upstreams.breaker.pool_percent needs upstreams.limits.max_connections: the pool it "
			    "is a share of");
		if (!b->error_percent && !b->pool_percent && !b->latency_p99)
			config_fail(
			    ld, config_line_of(g),
			    "upstreams.breaker trips on nothing: set error_percent, pool_percent or latency_p99");
	}
	config_retry_load(ld, e, &r->retry);
	g = config_get_group(ld, e, "adaptive_concurrency", "upstreams.adaptive_concurrency");
	if (g) {
		struct config_adaptive_conc *a = &r->adaptive;

		a->on = 1;
		config_engine_read(ld, g, &config_keys_upstream_adaptive_conc, a, NULL);
		if (a->max_limit < a->min_limit)
			config_fail(ld, config_line_of(g),
			            "upstreams.adaptive_concurrency.max_limit must be at least min_limit");
		else if (a->initial_limit < a->min_limit || a->initial_limit > a->max_limit)
			config_fail(ld, config_line_of(g),
			            "upstreams.adaptive_concurrency.initial_limit must lie within min_limit..max_limit");
		/* durations are not held to their descriptors' range: by hand */
		if (a->window < 250 || a->window > 10000)
			config_fail(ld, config_line_of(config_setting_get_member(g, "window")),
			            "upstreams.adaptive_concurrency.window must be from 250ms to 10s");
		else if (a->baseline_window < 2 * a->window || a->baseline_window > 3600000)
			config_fail(ld, config_line_of(g),
			            "upstreams.adaptive_concurrency.baseline_window must be at least twice window, and at "
			            "most 1h");
	}
}

void config_resil_resolve(struct loader *ld, const struct config_setting_t *list, struct config *cfg)
{
	for (int i = 0; i < cfg->nupstreams; i++) {
		struct config_breaker *b = &cfg->upstreams[i].resil.breaker;
		const config_setting_t *e, *g;
		int k;

		if (!b->on || !b->backup[0])
			continue;
		for (k = 0; k < cfg->nupstreams && strcmp(cfg->upstreams[k].name, b->backup) != 0; k++)
			;
		e = config_setting_get_elem(list, (unsigned)i);
		g = e ? config_setting_get_member(e, "breaker") : NULL;
		g = g ? config_setting_get_member(g, "backup") : NULL;
		if (k == cfg->nupstreams)
			config_fail(ld, config_line_of(g), "upstreams.breaker.backup \"%s\" is not defined", b->backup);
		else if (k == i)
			config_fail(ld, config_line_of(g), "upstreams.breaker.backup \"%s\" is the group itself",
			            b->backup);
		else
			b->backup_index = k;
	}
}
