/*
 * config_resil.h: the traffic controls of an upstream group (outlier
 * ejection, and later the breaker and retries), as configured.
 *
 * Principle: each control is a group of keys inside an upstream entry
 * (`outlier = { ... };`), described by descriptors like every other key
 * (common/config_keys.h), read by config_resil_load(), and copied as a
 * plain struct into the route table (route_upstream.resil), so a worker
 * reads its settings with the table it already holds and a reload changes
 * them with everything else. A control whose group is absent is off and
 * costs nothing on the hot path.
 */
#ifndef WEIR_COMMON_CONFIG_RESIL_H
#define WEIR_COMMON_CONFIG_RESIL_H

#include <stdint.h>

/* outlier = { ... }: passive ejection from real traffic, node-wide */
struct config_outlier {
	uint8_t on;                    /* the group is present */
	uint32_t consecutive_5xx;      /* 5xx answers in a row that eject; 0: off */
	uint32_t consecutive_gateway;  /* connect failures and timeouts in a row; 0: off */
	uint32_t failure_percentage;   /* percent of failed requests in an interval; 0: off */
	uint32_t failure_min_requests; /* requests an interval needs before that is judged */
	uint32_t interval;             /* ms: the failure-percentage window */
	uint32_t base_ejection_time;   /* ms, times the number of ejections */
	uint32_t max_ejection_time;    /* ms cap */
	uint32_t max_ejection_percent; /* of the group's servers ejected at once */
	uint32_t panic_threshold;      /* percent usable below which ejections are ignored; 0: never */
};

struct config_resil {
	struct config_outlier outlier;
};

struct loader;
struct config_keyset;
struct config_setting_t;

extern const struct config_keyset config_keys_upstream_outlier;

/* Reads the control groups of upstream entry <e> into <r>. */
void config_resil_load(struct loader *ld, const struct config_setting_t *e, struct config_resil *r);

#endif
