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

/* limits = { ... }: capacity, node-wide, over the whole group */
struct config_uplimits {
	uint8_t on;
	/* requests in flight to the group's servers, from the pick to the end
	 * of the answer; and connections in use by them (with HTTP/1.1
	 * upstreams one request holds one connection, so both cap one count;
	 * idle pooled connections are not in use) */
	uint32_t max_requests;
	uint32_t max_connections;
	/* the same per server of the group, node-wide: a full server is
	 * skipped by the pick (breaker_pick) */
	uint32_t max_requests_per_server;
	uint32_t max_connections_per_server;
	uint32_t max_retries;   /* retries in flight at once (retry) */
	uint32_t max_pending;   /* requests waiting for a place, node-wide; 0: none wait */
	uint32_t queue_timeout; /* ms a request waits at most */
};

/* adaptive_concurrency = { ... }: a gradient controller's cap on the
 * requests in flight to the group, node-wide (master/adaptive_conc.c) */
struct config_adaptive_conc {
	uint8_t on;
	uint32_t min_limit, max_limit, initial_limit; /* requests in flight */
	uint32_t window;                              /* ms: the short window, one update of the limit each */
	uint32_t baseline_window;                     /* ms: how slowly the baseline latency follows */
	uint32_t tolerance;                           /* percent: latency over the baseline taken as no queueing */
	uint32_t smoothing;                           /* percent of a window's new limit taken */
	uint32_t max_pending;                         /* requests waiting over the limit, node-wide */
	uint32_t queue_timeout;                       /* ms a request waits at most */
};

/* The per-server cap of <l>: the smaller of the two set, 0: none. */
static inline uint32_t config_uplimits_server_cap(const struct config_uplimits *l)
{
	uint32_t a = l->max_requests_per_server, b = l->max_connections_per_server;

	return a && (!b || a < b) ? a : b;
}

#define BREAKER_BUCKETS   60 /* the longest window, in 1 s buckets */
#define CONFIG_BACKUP_MAX 64

/* breaker = { ... }: closed, open, half-open, node-wide */
struct config_breaker {
	uint8_t on;
	uint32_t window;                /* ms, whole seconds, 1 s .. BREAKER_BUCKETS s */
	uint32_t min_requests;          /* answers the window needs before it may trip */
	uint32_t error_percent;         /* trips past it; 0: off */
	uint32_t pool_percent;          /* trips past this share of limits.max_connections in use; 0: off */
	uint32_t latency_p99;           /* ms: trips when p99 of the window passes it; 0: off */
	uint32_t open_time;             /* ms: the first opening; doubled per reopening */
	uint32_t max_open_time;         /* ms cap */
	uint32_t half_open_trials;      /* requests let through node-wide to probe */
	char backup[CONFIG_BACKUP_MAX]; /* a group to send to while open; "" answers 503 */
	int backup_index;               /* resolved: index into config.upstreams, -1 none */
};

/* retry.on conditions */
enum {
	RETRY_ON_CONNECT = 1 << 0, /* "connect-failure": refused, failed or timed-out connects */
	RETRY_ON_RESET = 1 << 1,   /* "reset": closed before any response byte */
	RETRY_ON_TIMEOUT = 1 << 2, /* "timeout": no response head within per_try_timeout or upstream_read */
};
#define RETRY_STATUS_MIN  400 /* status codes 400..599 may be named */
#define RETRY_ON_TEXT_MAX 160

/* retry = { ... }: sending a request again, to another server */
struct config_retry {
	uint8_t on;
	uint32_t when;                     /* RETRY_ON_* */
	uint64_t status[4];                /* bit s - RETRY_STATUS_MIN: retry on that status */
	char when_text[RETRY_ON_TEXT_MAX]; /* `on` as written, ", "-joined quoted words (weir -T) */
	uint32_t attempts;                 /* tries in all, the first included */
	uint32_t per_try_timeout;          /* ms to the response head, per try; 0: upstream_read only */
	uint32_t backoff;                  /* ms: full-jitter backoff base, doubled per retry */
	uint32_t max_backoff;              /* ms cap */
	uint32_t budget_percent;           /* retries in flight at most this share of the requests in flight */
	uint32_t budget_min;               /* ... or this many, whichever is more */
	/* ms: a retried answer's Retry-After up to this is the backoff; past
	 * it, the answer is returned, not retried; 0: Retry-After ignored */
	uint32_t retry_after_max;
};

struct config_resil {
	struct config_outlier outlier;
	struct config_uplimits limits;
	struct config_breaker breaker;
	struct config_retry retry;
	struct config_adaptive_conc adaptive;
};

/* Does <rc> retry on status <s>? */
static inline int config_retry_status(const struct config_retry *rc, int s)
{
	unsigned i = (unsigned)(s - RETRY_STATUS_MIN);

	return s >= RETRY_STATUS_MIN && i < 200 && (rc->status[i / 64] >> (i % 64) & 1);
}

struct loader;
struct config_keyset;
struct config_setting_t;

extern const struct config_keyset config_keys_upstream_outlier, config_keys_upstream_limits,
    config_keys_upstream_breaker, config_keys_upstream_retry, config_keys_upstream_adaptive_conc;

struct config;

/* Reads the control groups of upstream entry <e> into <r>. */
void config_resil_load(struct loader *ld, const struct config_setting_t *e, struct config_resil *r);

/* Once every group is read: resolves breaker.backup names of <cfg>'s
 * groups (<list>: the upstreams list, for lines). */
void config_resil_resolve(struct loader *ld, const struct config_setting_t *list, struct config *cfg);

#endif
