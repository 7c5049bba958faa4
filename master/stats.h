/*
 * stats.h: the stats socket, served by the master's event loop.
 *
 * Principle: a scrape reads the shared segment and costs the workers
 * nothing. `GET /metrics` answers in the Prometheus text format, summed
 * over every worker slot and the counters of workers that have exited.
 * Each connection is answered once and closed; requests are bounded in size
 * and time, so a stuck client cannot hold the master.
 */
#ifndef WEIR_MASTER_STATS_H
#define WEIR_MASTER_STATS_H

#include <ev.h>

#include "common/config.h"

struct shm_segment;

/* Opens the stats socket on <addr> in <loop>. Returns 0, or -1 (logged). */
int stats_open(struct ev_loop *loop, const struct config_addr *addr, struct shm_segment *seg);

/* Serves the stats socket on an already listening <fd> (binary upgrade). */
void stats_adopt(struct ev_loop *loop, int fd, struct shm_segment *seg);

/* The listening socket, -1 if none (for binary upgrade). */
int stats_fd(void);

/* Closes the socket and every open stats connection. */
void stats_close(struct ev_loop *loop);

/* Writes the metrics text into <buf>; returns its length (truncated at cap). */
size_t stats_render(struct shm_segment *seg, char *buf, size_t cap);

#endif
