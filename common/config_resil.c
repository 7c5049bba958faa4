/*
 * config_resil.c: the keys of an upstream group's traffic controls
 * (common/config_resil.h), read like every other group.
 */
#include "common/config_resil.h"

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
}
