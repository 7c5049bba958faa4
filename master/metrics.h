/*
 * metrics.h: the Prometheus text of GET /metrics.
 *
 * Principle: everything comes from the shared segment, summed at scrape
 * time over the worker slots in use and the counters folded in from
 * workers that exited, so a scrape costs the workers nothing and totals
 * never go backwards across restarts, reloads and upgrades. Every family
 * has HELP and TYPE and the weir_ prefix. Label values come only from the
 * configuration (route host and path as written, upstream names, server
 * addresses) and fixed sets (status class, error kind, bucket), never from
 * a client, so the number of series is bounded by the config and by the
 * stat key table (shm/stat.h).
 */
#ifndef WEIR_MASTER_METRICS_H
#define WEIR_MASTER_METRICS_H

#include "common/config.h"
#include "master/textbuf.h"
#include "shm/route.h"

struct shm_segment;

/* Appends the exposition text (format 0.0.4) of <seg> to <out>. */
void metrics_render(struct shm_segment *seg, struct textbuf *out);

/* Appends the rate limits' families (master/metrics_limit.c). */
void metrics_render_limits(struct textbuf *out);

/* Takes the notAfter of every listener certificate of <cfg> (the master's
 * configuration in force: at start and after each reload) for
 * weir_tls_certificate_expiry_seconds. Keeps copies, not pointers into
 * <cfg>. */
void metrics_set_certs(const struct config *cfg);

/* The current route table of <seg> (master side: the master is the only
 * writer and never overwrites the current one). */
const struct route_table *metrics_table(struct shm_segment *seg);

/* "health=up last_check=ok last_status=200" for server stat index
 * <stat> (/upstreams): its health state, and what its last check found
 * (last_status only for an HTTP answer). Written into <buf>. */
const char *metrics_health_text(struct shm_segment *seg, uint16_t stat, char *buf, size_t cap);

#endif
