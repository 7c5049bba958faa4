/*
 * master.h: the master process.
 *
 * Principle: the master never touches client traffic. It owns what must
 * outlive any worker: the listening sockets, the shared segment, the logs
 * and the pid file. It forks one worker per configured slot, replaces a
 * worker that dies (backing off when one keeps dying young, so a crash
 * loop cannot spin), serves the stats socket, and turns the operator's
 * signals into actions: QUIT drains and stops, TERM and INT stop at once,
 * USR1 reopens the logs.
 */
#ifndef WEIR_MASTER_MASTER_H
#define WEIR_MASTER_MASTER_H

#include "common/config.h"

/* Runs the master with <cfg> (owned by the master from now on) until it is
 * told to stop; <argv> is the command line, kept for binary upgrade. When
 * started by an upgrading master ($WEIR_UPGRADE_FD), takes over its sockets
 * and shared segment. Returns the process exit code. */
int master_run(struct config *cfg, char *const argv[]);

/* master/redis_sync.c: starts, reconfigures (a reload) or stops the
 * reconcile of scope = "cluster" rate limits with cfg->redis on <loop>. */
struct ev_loop;
void redis_sync_configure(struct ev_loop *loop, const struct config *cfg);
void redis_sync_stop(void);
/* In a new worker: drops the master's redis watchers and socket. */
void redis_sync_forget(void);

#endif
