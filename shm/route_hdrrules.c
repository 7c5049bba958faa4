/*
 * route_hdrrules.c: the header rules' arrays in a route generation
 * (common/hdrrules.h): the configuration's three pools copied whole, after
 * the rest of the block. They are pointer-free (indices and offsets), so
 * a copy is all it takes; a configuration without rules adds nothing.
 */
#include <string.h>

#include "shm/route.h"

#define HDR_ALIGN(n) (((n) + 7) & ~(size_t)7)

size_t route_hdrrules_layout(const struct config *cfg, size_t at, struct route_hdr_layout *l)
{
	const struct hdrrules_conf *h = cfg->hdr;

	memset(l, 0, sizeof(*l));
	l->off_rules = l->off_pieces = l->off_text = at;
	if (!h)
		return at;
	l->off_rules = at;
	at += HDR_ALIGN((size_t)h->nrules * sizeof(struct hdrrule));
	l->off_pieces = at;
	at += HDR_ALIGN((size_t)h->npieces * sizeof(struct vars_piece));
	l->off_text = at;
	at += HDR_ALIGN((size_t)h->ntext);
	return at;
}

void route_hdrrules_write(struct route_table *t, char *block, const struct route_hdr_layout *l,
                          const struct config *cfg)
{
	const struct hdrrules_conf *h = cfg->hdr;

	t->off_hdr_rules = (uint32_t)l->off_rules;
	t->off_hdr_pieces = (uint32_t)l->off_pieces;
	t->off_hdr_text = (uint32_t)l->off_text;
	if (!h)
		return;
	t->nhdr_rules = h->nrules;
	t->nhdr_pieces = h->npieces;
	t->nhdr_text = h->ntext;
	memcpy(block + l->off_rules, h->rules, (size_t)h->nrules * sizeof(struct hdrrule));
	if (h->npieces)
		memcpy(block + l->off_pieces, h->pieces, (size_t)h->npieces * sizeof(struct vars_piece));
	memcpy(block + l->off_text, h->text, h->ntext);
}
