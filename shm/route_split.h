/*
 * route_split.h: routes.split in a route generation (common/split.h for
 * the buckets, shm/route_types.h for struct route_split).
 */
#ifndef WEIR_SHM_ROUTE_SPLIT_H
#define WEIR_SHM_ROUTE_SPLIT_H

#include "common/config.h"
#include "shm/route_types.h"

/* Writes the splits of <cfg> (cfg->nsplits entries, by config_split.index)
 * into <out>; returns how many. */
uint32_t route_split_compile(struct route_split *out, const struct config *cfg);

/* route_entry.split of config route <r>: its split's index + 1, 0 none. */
uint16_t route_split_of(const struct config_route *r);

#endif
