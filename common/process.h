/*
 * process.h: the contract between the master and a worker process.
 *
 * The master (master/) forks and calls worker_main() (worker/) in the child.
 * The two folders never include each other; this header is the one door
 * between them: what a worker is given when it starts, and how it reports.
 */
#ifndef WEIR_COMMON_PROCESS_H
#define WEIR_COMMON_PROCESS_H

#include "common/config.h"

struct shm_segment;

struct worker_start {
	const struct config *cfg;
	struct shm_segment *seg;
	int slot;   /* this worker's counter slot in the segment */
	int index;  /* worker number, 0..cfg->workers-1: which listening socket of
	             * each listener is ours */
	int listen_fds[CONFIG_MAX_LISTENERS]; /* one per listener, non-blocking */
	int nlisten;
};

/* Runs a worker until it is told to stop; returns the process exit code.
 * Signals: QUIT drains (stop accepting, finish in-flight requests within
 * timeouts.drain), TERM and INT stop at once. */
int worker_main(const struct worker_start *ws);

/* Exit code of a worker that failed to start (the master backs off). */
#define WORKER_EXIT_STARTUP 3

#endif
