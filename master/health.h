/*
 * health.h: active health checks, run by one prober per node.
 *
 * Principle: the prober is a child of the master, like a worker but only
 * one: it runs the checks of every group with a health block on its own
 * libev loop with non-blocking sockets, and publishes each server's state
 * as a word in the shared segment (shm/health.h), which every worker reads
 * when it picks a server. A process of its own rather than the master's
 * loop because it talks to the upstreams: it parses their bytes (TLS
 * included) as the workers' user, never as root, a fault in it costs a
 * prober the master replaces, not the master, and no handshake or slow
 * server can delay the master's signals, reloads or stats socket.
 *
 * The state outlives the prober: a reload starts a new prober for the new
 * configuration (the old one is stopped) and a binary upgrade a new master
 * with its own, both reading the words the last one left, keyed by server
 * identity. A server that starts being checked (a first start, a server or
 * a health block added) starts up but one failed check from down, as
 * HAProxy's servers do: no request is refused while the first checks run,
 * and a dead new server is out after its first check (within jitter plus
 * timeout). A server no longer checked is up again ("unchecked").
 */
#ifndef WEIR_MASTER_HEALTH_H
#define WEIR_MASTER_HEALTH_H

#include <ev.h>
#include <sys/types.h>

#include "common/config.h"

struct shm_segment;

/* Does any upstream group of <cfg> have a health block? */
int health_wanted(const struct config *cfg);

/* Master, once the routes of <cfg> are current: the servers of the current
 * table that <cfg> checks and have no word yet start up (one failure from
 * down); the words of every other server are cleared (unchecked). */
void health_configure(struct shm_segment *seg, const struct config *cfg);

/*
 * Master: stops the prober, if any, and starts one for <cfg> when
 * health_wanted(). <in_child> runs first in the new process and gives up
 * what is the master's (watchers, sockets, privileges). A prober that dies
 * is replaced (after a growing delay if it died young).
 */
void health_start(struct ev_loop *loop, struct shm_segment *seg, const struct config *cfg, void (*in_child)(void));

/* Master: 1 when <pid> was the prober (replaced unless stopping), else 0. */
int health_child_exited(pid_t pid, int status);

/* Master: sends <sig> to the prober, if any (USR1: it reopens its logs). */
void health_signal(int sig);

/* Master stopping: the prober is told to stop and not replaced. */
void health_stop(void);

/* In any child of the master: forget the master's prober watchers. */
void health_in_child(void);

/* The prober's loop (health_probe.c); returns its exit code. */
int health_probe_main(struct ev_loop *loop, struct shm_segment *seg, const struct config *cfg);

#endif
