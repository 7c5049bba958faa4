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

/* The split and mirror fields of route entry <e> from config route <r>. */
void route_split_entry(struct route_entry *e, const struct config_route *r);

#endif
