/*
 * stats.h: the stats socket, served by the master's event loop.
 *
 * Principle: a scrape reads the shared segment and costs the workers
 * nothing; no worker ever serves this socket. It listens on a TCP address
 * (loopback unless the config says allow_remote), on a unix socket path
 * with a file mode, or on both, and answers GET /metrics (Prometheus text)
 * and the admin commands of admin.h in plain text. Each connection is
 * answered once and closed; requests are bounded in size (2 KiB, head and
 * body) and time (5 s), and at most 16 connections are open, so a stuck or
 * hostile client cannot hold the master; when they are all taken, the one
 * waiting longest for its request makes room, so idle connections cannot
 * lock scrapes out. The admin POSTs are taken on the unix socket or with
 * the token; nothing a browser page can send (an Origin header, a Host that
 * is not a loopback stats socket) is answered.
 *
 * The sockets outlive reloads when their address or path stays, and are
 * handed to a new master on binary upgrade (upgrade.h).
 */
#ifndef WEIR_MASTER_STATS_H
#define WEIR_MASTER_STATS_H

#include <ev.h>

#include "common/config.h"

struct shm_segment;

enum stats_kind {
	STATS_TCP = 0,
	STATS_UNIX = 1,
};

/*
 * Makes the open stats sockets match <cfg>: keeps each one whose address
 * (or path) is unchanged, closes those no longer wanted (removing a unix
 * socket's file), opens the new ones, and applies the unix socket's mode.
 * For start-up and reload. Returns 0, or -1 if a socket could not be
 * opened (logged; the others are served).
 */
int stats_configure(struct ev_loop *loop, const struct config *cfg, struct shm_segment *seg);

/* Serves an already listening socket handed over by an upgrading master;
 * <name> is its address text or its path. stats_configure() then decides
 * whether the configuration still wants it. */
void stats_adopt(struct ev_loop *loop, enum stats_kind kind, int fd, const char *name, struct shm_segment *seg);

/* The listening socket of <kind>, -1 if none (for binary upgrade). */
int stats_fd(enum stats_kind kind);

/* Closes the sockets and every open stats connection. With <unlink_unix>
 * the unix socket's file is removed too: not in a forked worker, and not
 * when a new master has taken the socket over. */
void stats_close(struct ev_loop *loop, int unlink_unix);

#endif
