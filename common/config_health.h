/*
 * config_health.h: an upstream group's active health checks, as configured
 * (health = { ... } in an upstreams entry). Read by common/config_file_health.c,
 * run by the prober (master/health.h).
 */
#ifndef WEIR_COMMON_CONFIG_HEALTH_H
#define WEIR_COMMON_CONFIG_HEALTH_H

#include <stdint.h>

#define CONFIG_HEALTH_PATH_MAX   256 /* the probe's request target, with the NUL */
#define CONFIG_HEALTH_HOST_MAX   256 /* its Host header, with the NUL */
#define CONFIG_HEALTH_EXPECT_MAX 8   /* status ranges in expect */

enum config_health_type {
	CONFIG_HEALTH_NONE = 0, /* no health block: no active checks, servers are up */
	CONFIG_HEALTH_HTTP,     /* GET <path>, the status must be in <expect> */
	CONFIG_HEALTH_TCP,      /* a connect (and the TLS handshake of a TLS group) */
};

struct config_health {
	int type; /* enum config_health_type */
	char path[CONFIG_HEALTH_PATH_MAX];
	char host[CONFIG_HEALTH_HOST_MAX]; /* "": the group's tls.sni, else the server's address */
	uint32_t interval;                 /* ms between the starts of two checks of one server */
	uint32_t timeout;                  /* ms a check may take, connect to status line; at most interval */
	uint32_t jitter;                   /* ms: each wait is lengthened by a random part of it; below interval */
	int rise;                          /* checks passed in a row that bring a down server back */
	int fall;                          /* checks failed in a row that take an up server out */
	/* a check is skipped, and counts as passed, when the server answered
	 * real requests since the last one and weir counted no 5xx for it */
	int skip_when_busy;
	int nexpect;
	uint16_t expect[CONFIG_HEALTH_EXPECT_MAX][2]; /* inclusive status ranges; default 200-399 */
	int line;                                     /* of the health block, for messages */
};

#endif
