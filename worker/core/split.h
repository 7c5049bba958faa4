/*
 * split.h: a request's side of its route's split (routes.split;
 * common/split.h has the buckets, split.c the choice).
 */
#ifndef WEIR_WORKER_CORE_SPLIT_H
#define WEIR_WORKER_CORE_SPLIT_H

#include <stdint.h>

/* In struct txn, zeroed with it. */
struct split_txn {
	uint16_t upstream_plus1; /* the group chosen, + 1; 0: the route's own (no split) */
	uint8_t side;            /* its place in the split, when chosen */
};

struct txn;

/* Chooses the side of <t>, whose route has a split: the override's group
 * if the request names one, else the side of its key's bucket, else (no
 * key) a bucket drawn at random; counts it; t->set becomes the group's
 * settings unless the route has its own. Never fails. */
void split_choose(struct txn *t);

/* routes.mirror (mirror.c): once t->up.head is written, a copy of <t> to
 * the shadow group for mirror_share of the requests, counted in the
 * route's mirror[enum mirror_result]. Never waits, never fails <t>. */
void mirror_maybe(struct txn *t);

#endif
