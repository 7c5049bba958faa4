/*
 * msg.c: the token table of well-known header names, the stream arena and
 * header lists (msg.h).
 *
 * A name is looked up once, by the codec, when its head is parsed: a hash
 * of its length and its first and last letters picks a slot of a small
 * open-addressed table, and one comparison decides. The table is built on
 * first use from HDR_TOKEN_TABLE, so the list of names stays one X-macro.
 */
#include "worker/msg.h"

#include <string.h>

#include "common/err.h"

const struct hdr_token hdr_tokens[HT_COUNT] = {
#define HDR_TOKEN_ROW(name, text, fl) {text, sizeof(text) - 1, fl},
	HDR_TOKEN_TABLE(HDR_TOKEN_ROW)
#undef HDR_TOKEN_ROW
};

/* 4 times the names, so that a miss usually ends at an empty slot */
#define TOK_SLOTS 256

static uint8_t tok_slot[TOK_SLOTS]; /* token + 1; 0: empty */
static int tok_built;

static inline unsigned tok_lower(unsigned char c)
{
	return c | 0x20; /* letters, digits and '-' only matter here */
}

static inline unsigned tok_hash(const char *p, size_t len)
{
	return ((unsigned)len * 31u + tok_lower((unsigned char)p[0]) * 7u +
	        tok_lower((unsigned char)p[len - 1])) & (TOK_SLOTS - 1);
}

static void tok_build(void)
{
	for (unsigned t = 1; t < HT_COUNT; t++) {
		unsigned i = tok_hash(hdr_tokens[t].name, hdr_tokens[t].len);

		while (tok_slot[i])
			i = (i + 1) & (TOK_SLOTS - 1);
		tok_slot[i] = (uint8_t)(t + 1);
	}
	tok_built = 1;
}

/* <p> against lower-case <lower>, both <len> bytes. */
static int tok_ieq(const char *p, const char *lower, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c >= 'A' && c <= 'Z')
			c |= 0x20;
		if (c != (unsigned char)lower[i])
			return 0;
	}
	return 1;
}

enum hdr_tok hdr_token(const char *p, size_t len)
{
	unsigned i;

	if (len == 0 || len > 32)
		return HT_OTHER;
	if (__builtin_expect(!tok_built, 0))
		tok_build();
	for (i = tok_hash(p, len); tok_slot[i]; i = (i + 1) & (TOK_SLOTS - 1)) {
		const struct hdr_token *t = &hdr_tokens[tok_slot[i] - 1];

		if (t->len == len && tok_ieq(p, t->name, len))
			return (enum hdr_tok)(tok_slot[i] - 1);
	}
	return HT_OTHER;
}

/* ---- the arena ------------------------------------------------------ */

void arena_init(struct arena *a, void *mem, uint32_t cap)
{
	a->base = mem;
	a->cap = cap;
	a->lo = 0;
	a->hi = cap;
}

void arena_reset(struct arena *a)
{
	a->lo = 0;
	a->hi = a->cap;
}

char *arena_bytes(struct arena *a, uint32_t n)
{
	if (n > a->hi - a->lo)
		return NULL;
	a->hi -= n;
	return a->base + a->hi;
}

/* Entries stay aligned for struct hdr: lo only ever moves by whole
 * entries, and the base is the slab object's tail (8-byte aligned). */
struct hdr *hlist_open(struct arena *a, uint32_t max, uint32_t *room)
{
	uint32_t n = (a->hi - a->lo) / (uint32_t)sizeof(struct hdr);

	*room = n < max ? n : max;
	return (struct hdr *)(void *)(a->base + a->lo);
}

void hlist_close(struct arena *a, struct hlist *l, struct hdr *v, uint32_t n)
{
	l->v = v;
	l->n = n;
	a->lo = (uint32_t)((char *)(v + n) - a->base);
}

const struct hdr *hlist_find(const struct hlist *l, enum hdr_tok tok, const struct hdr *from)
{
	const struct hdr *h = from ? from + 1 : l->v, *end = l->v + l->n;

	for (; h < end; h++)
		if (h->tok == tok)
			return h;
	return NULL;
}

struct hdr *hlist_add(struct arena *a, struct hlist *l, const char *name, uint32_t name_len,
                      const char *value, uint32_t value_len)
{
	struct hdr *h = l->v + l->n;
	enum hdr_tok tok;

	if ((char *)(h + 1) > a->base + a->hi || (char *)h != a->base + a->lo)
		return NULL;
	tok = hdr_token(name, name_len);
	h->name = name;
	h->name_len = name_len;
	h->value = value;
	h->value_len = value_len;
	h->tok = (uint16_t)tok;
	h->flags = hdr_tokens[tok].flags;
	l->n++;
	a->lo += (uint32_t)sizeof(*h);
	return h;
}

int hdr_set_value(struct arena *a, struct hdr *h, const char *p, uint32_t len)
{
	char *q = arena_bytes(a, len);

	if (!q)
		return WEIR_ERR(HEADER_SPACE);
	memcpy(q, p, len);
	h->value = q;
	h->value_len = len;
	return 0;
}
