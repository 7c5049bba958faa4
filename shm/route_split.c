/*
 * route_split.c: the splits of a generation, compiled once per reload by
 * the master: the bucket bounds are worked out here, so a worker's choice
 * is a hash and a few compares.
 */
#include "shm/route_split.h"

#include <string.h>

uint32_t route_split_compile(struct route_split *out, const struct config *cfg)
{
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_split *s = cfg->routes[i].split;
		struct route_split *o;
		uint32_t w[SPLIT_SIDES];

		if (!s)
			continue;
		o = &out[s->index];
		memset(o, 0, sizeof(*o));
		o->nsides = (uint8_t)s->nsides;
		o->has_key = s->key[0] != 0;
		o->key_kind = s->key_kind;
		o->key_len = s->key_len;
		memcpy(o->key_name, s->key_name, sizeof(o->key_name));
		o->ovr_kind = s->ovr_kind;
		o->ovr_len = s->ovr_len;
		memcpy(o->ovr_name, s->ovr_name, sizeof(o->ovr_name));
		for (int k = 0; k < s->nsides; k++) {
			o->upstream[k] = (uint32_t)s->side[k].upstream;
			w[k] = s->side[k].weight;
		}
		split_bounds(w, s->nsides, o->bound);
	}
	return (uint32_t)cfg->nsplits;
}

void route_split_entry(struct route_entry *e, const struct config_route *r)
{
	e->split = r->split ? (uint16_t)(r->split->index + 1) : 0;
	e->mirror = (uint16_t)r->mirror.group;
	e->mirror_share = (uint16_t)(r->mirror.percent * 100);
	e->mirror_max = (uint16_t)r->mirror.max_in_flight;
}
