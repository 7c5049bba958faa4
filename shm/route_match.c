/*
 * route_match.c: routes' conditions and rewrites into a route generation
 * (shm/route_match.h), and the order among routes of one path.
 */
#include "shm/route_match.h"

#include <string.h>

#include "common/config.h"
#include "common/config_match.h"

#define RM_ALIGN(n) (((n) + 7) & ~(size_t)7)

int route_match_order(const struct config_route *x, const struct config_route *y)
{
	int xe = x->match && x->match->exact, ye = y->match && y->match->exact;
	int xn = config_match_nconds(x->match), yn = config_match_nconds(y->match);

	if (xe != ye)
		return ye - xe;
	if (xn != yn)
		return yn - xn;
	return x < y ? -1 : x > y;
}

/* What the matches of <cfg> take: counts and string bytes. */
struct rm_counts {
	uint32_t nmatches, nmconds, nregexes, strings;
	size_t off_mconds, off_regexes, off_mstrings, size;
};

static void rm_count(const struct config *cfg, struct rm_counts *c)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_match *m = cfg->routes[i].match;

		if (!m)
			continue;
		c->nmatches++;
		c->strings += (uint32_t)strlen(m->label) + 1;
		if (m->path_regex[0]) {
			c->nregexes++;
			c->strings += (uint32_t)strlen(m->path_regex) + 1;
		}
		if (m->rw_regex[0]) {
			c->nregexes++;
			c->strings += (uint32_t)(strlen(m->rw_regex) + strlen(m->rw_replace) + 2);
		}
		for (int k = 0; k < m->ncond; k++) {
			c->nmconds++;
			c->nregexes += m->cond[k].op == MATCH_REGEX;
			c->strings += (uint32_t)(strlen(m->cond[k].name) + strlen(m->cond[k].value) + 2);
		}
	}
	c->off_mconds = RM_ALIGN(c->nmatches * sizeof(struct route_match));
	c->off_regexes = c->off_mconds + RM_ALIGN(c->nmconds * sizeof(struct route_mcond));
	c->off_mstrings = c->off_regexes + RM_ALIGN(c->nregexes * sizeof(struct route_regex));
	c->size = c->off_mstrings + RM_ALIGN(c->strings);
}

size_t route_match_size(const struct config *cfg)
{
	struct rm_counts c;

	rm_count(cfg, &c);
	return c.size;
}

/* Appends <s> to the strings at <str> (*<at> bytes used): its offset. */
static uint32_t rm_put(char *str, uint32_t *at, const char *s)
{
	uint32_t off = *at;
	size_t n = strlen(s);

	memcpy(str + off, s, n + 1);
	*at += (uint32_t)n + 1;
	return off;
}

static uint32_t rm_regex(struct route_regex *rx, uint32_t *nrx, char *str, uint32_t *at, const char *pat)
{
	rx[*nrx].off = rm_put(str, at, pat);
	rx[*nrx].len = (uint32_t)strlen(pat);
	return (*nrx)++;
}

void route_match_compile(struct route_table *t, struct route_entry *routes, char *block, uint32_t off,
                         const struct config *cfg)
{
	struct rm_counts c;
	struct route_match *ms = (struct route_match *)(void *)block;
	struct route_mcond *mc;
	struct route_regex *rx;
	char *str;
	uint32_t nm = 0, nc = 0, nrx = 0, at = 0;

	rm_count(cfg, &c);
	mc = (struct route_mcond *)(void *)(block + c.off_mconds);
	rx = (struct route_regex *)(void *)(block + c.off_regexes);
	str = block + c.off_mstrings;
	t->off_matches = off;
	t->off_mconds = off + (uint32_t)c.off_mconds;
	t->off_regexes = off + (uint32_t)c.off_regexes;
	t->off_mstrings = off + (uint32_t)c.off_mstrings;
	for (uint32_t i = 0; i < t->nroutes; i++) {
		struct route_entry *e = &routes[i];
		const struct config_route *cr;
		const struct config_match *m;
		struct route_match *w;

		e->cond = 0;
		if (e->match == ROUTE_NONE)
			continue;
		cr = &cfg->routes[e->match];
		m = cr->match;
		w = &ms[nm];
		e->match = nm++;
		memset(w, 0, sizeof *w);
		w->methods = m->methods;
		w->label_off = rm_put(str, &at, m->label);
		w->path_regex = m->path_regex[0] ? rm_regex(rx, &nrx, str, &at, m->path_regex) : ROUTE_NONE;
		w->rw_regex = ROUTE_NONE;
		if (m->rw_regex[0]) {
			w->rw_regex = rm_regex(rx, &nrx, str, &at, m->rw_regex);
			w->rw_replace_len = (uint32_t)strlen(m->rw_replace);
			w->rw_replace_off = rm_put(str, &at, m->rw_replace);
		}
		w->strip_len = m->strip == 1 ? (uint32_t)strlen(cr->path)
		               : m->strip == 2 ? (uint32_t)strlen(m->strip_text)
		                               : 0;
		w->first_cond = nc;
		w->ncond = (uint32_t)m->ncond;
		for (int k = 0; k < m->ncond; k++) {
			const struct config_match_cond *cc = &m->cond[k];
			struct route_mcond *d = &mc[nc++];

			d->where = cc->where;
			d->op = cc->op;
			d->name_len = (uint16_t)strlen(cc->name);
			d->name_off = rm_put(str, &at, cc->name);
			d->value_len = (uint32_t)strlen(cc->value);
			d->value_off = rm_put(str, &at, cc->value);
			d->regex = cc->op == MATCH_REGEX ? rm_regex(rx, &nrx, str, &at, cc->value) : ROUTE_NONE;
		}
		e->cond = (uint8_t)((m->exact ? ROUTE_COND_EXACT : 0) | (config_match_nconds(m) ? ROUTE_COND_CALL : 0));
		t->ncond_routes += e->cond != 0;
	}
	t->nmatches = nm;
	t->nmconds = nc;
	t->nregexes = nrx;
}
