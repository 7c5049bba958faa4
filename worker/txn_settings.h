/*
 * txn_settings.h: where a request reads its timeouts, limits and rules.
 *
 * Principle: from the one route generation it took (shm/route.h), never
 * from the worker's fork-time config: once routed, its route's settings
 * (global, then its upstream group's, then its route's, resolved by the
 * master); before that, or with no route, the generation's global ones.
 * So a draining worker on an old table, or a new worker serving a request
 * that took an older one, cannot mix two configs in one request. Only a
 * request that has taken no generation yet falls back to the worker's
 * own config; connection-level settings (head size and timeout,
 * keep-alive, drain) stay the worker's.
 */
#ifndef WEIR_WORKER_TXN_SETTINGS_H
#define WEIR_WORKER_TXN_SETTINGS_H

#include "shm/route.h"

struct txn;

/* The settings of the worker's own config, for a request that has taken
 * no generation yet. */
const struct route_settings *txn_settings_own(void);

/* <t>'s settings: t->set, or the worker's own before it took a table. */
#define TXN_SET(t) ((t)->set ? (t)->set : txn_settings_own())

#endif
