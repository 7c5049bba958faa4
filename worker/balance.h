/*
 * balance.h: the load-balancing algorithms of an upstream group other than
 * smooth weighted round robin (which stays in upstream.c, free of locked
 * instructions): `balance = "random"` and `"least_request"`.
 *
 * Principle: every algorithm picks among the same usable servers
 * (upstream_server_usable: admin state, ejection, down marks, health), so
 * a down, ejected or drained server is skipped whichever one a group uses,
 * and panic covers them all. least_request is power of two choices: it
 * draws `choices` usable servers at random and takes the one with the
 * fewest requests in flight node-wide (shm/balance.h) over its weight;
 * two draws avoid the herd a full scan sends to one idle server from
 * every worker at once.
 *
 * Costs: random, one draw of a per-worker xorshift per request and a pass
 * over the group; least_request, `choices` draws and relaxed loads, and one
 * locked add at the pick and one subtract at the end of the request on
 * the chosen server's own cache line. Nothing for a group on rr.
 */
#ifndef WEIR_WORKER_BALANCE_H
#define WEIR_WORKER_BALANCE_H

#include <stdint.h>

#include "shm/balance.h"
#include "shm/route.h"

/* Picks a usable server of <up> not in <tried> (upstream_pick_among's
 * arguments); -1 if none. */
int balance_pick(const struct route_table *t, const struct route_upstream *up, uint64_t tried, int panic,
                 uint64_t eject_now, int *marked);

/* Server <si> of <t> was picked for a request whose count is *<held>
 * (stat index + 1 counted in flight; 0: none): moves the count to it when
 * its group is on least_request. */
void balance_begin(const struct route_table *t, uint32_t si, uint16_t *held);

/* The request ends: gives back its count in flight, if any. */
void balance_end(uint16_t *held);

#endif
