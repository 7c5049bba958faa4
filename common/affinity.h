/*
 * affinity.h: which CPU a worker runs on.
 *
 * Principle: with worker_cpu_affinity on, worker i runs on the i-th CPU of
 * the process's allowed set (sched_getaffinity: a cpuset or taskset may
 * leave out some), wrapping when there are more workers than CPUs. The
 * master computes the same mapping to steer each listener's connections
 * (master/listen.c), so a connection is accepted on the CPU whose softirq
 * received it and its socket stays warm in that CPU's caches.
 */
#ifndef WEIR_COMMON_AFFINITY_H
#define WEIR_COMMON_AFFINITY_H

#include "common/config.h"

/* Whether <cfg> pins workers: "auto" is on when workers equal the online
 * CPUs. */
int affinity_on(const struct config *cfg);

/* The CPU worker <index> runs on, or -1 when the allowed set cannot be
 * read. */
int affinity_cpu_of(int index);

/* Pins the calling process to affinity_cpu_of(<index>); 0, or -1 with
 * errno. */
int affinity_pin(int index, int *cpu);

#endif
