/*
 * msg.c: the token table of well-known header names, the stream arena and
 * header lists (msg.h).
 *
 * A name is looked up once, by the codec, when its head is parsed: a hash
 * of its length and its first and last letters picks a slot of a small
 * open-addressed table (msg.h), and one comparison decides. The table is
 * built before main from HDR_TOKEN_TABLE, so the list of names stays one
 * X-macro.
 */
#include "worker/msg/msg.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"

const struct hdr_token hdr_tokens[HT_COUNT] = {
#define HDR_TOKEN_ROW(name, text, fl) {text, sizeof(text) - 1, fl},
	HDR_TOKEN_TABLE(HDR_TOKEN_ROW)
#undef HDR_TOKEN_ROW
};

uint8_t hdr_tok_slot[HDR_TOK_SLOTS];

/* Before main, so that no lookup can find the table empty (a missed
 * Content-Length would be a framing hole, not a slow path). */
__attribute__((constructor)) static void tok_build(void)
{
	for (unsigned t = 1; t < HT_COUNT; t++) {
		unsigned i = hdr_tok_hash(hdr_tokens[t].name, hdr_tokens[t].len);

		while (hdr_tok_slot[i])
			i = (i + 1) & (HDR_TOK_SLOTS - 1);
		hdr_tok_slot[i] = (uint8_t)(t + 1);
	}
}

static inline uint64_t tok_ld64(const char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint32_t tok_ld32(const char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * <p> against lower-case <lower>, both <len> bytes, a word at a time:
 * OR-ing 0x20 into each byte lowers a letter and maps no other tchar
 * onto a letter, a digit or '-' (the only bytes of the table's names:
 * their other preimages are controls), so for a header name, which the
 * parser has checked to be tchar only, it is an exact caseless compare.
 * The words overlap at the end instead of a byte loop.
 */
static int tok_ieq(const char *p, const char *lower, size_t len)
{
	const uint64_t m64 = 0x2020202020202020ull;
	const uint32_t m32 = 0x20202020u;
	size_t i;

	if (len >= 8) {
		for (i = 0; i + 8 < len; i += 8)
			if ((tok_ld64(p + i) | m64) != tok_ld64(lower + i))
				return 0;
		return (tok_ld64(p + len - 8) | m64) == tok_ld64(lower + len - 8);
	}
	if (len >= 4)
		return (tok_ld32(p) | m32) == tok_ld32(lower) && (tok_ld32(p + len - 4) | m32) == tok_ld32(lower + len - 4);
	for (i = 0; i < len; i++)
		if (((unsigned char)p[i] | 0x20) != (unsigned char)lower[i])
			return 0;
	return 1;
}

enum hdr_tok hdr_token_probe(const char *p, size_t len, unsigned i)
{
	for (; hdr_tok_slot[i]; i = (i + 1) & (HDR_TOK_SLOTS - 1)) {
		const struct hdr_token *t = &hdr_tokens[hdr_tok_slot[i] - 1];

		if (t->len == len && tok_ieq(p, t->name, len))
			return (enum hdr_tok)(hdr_tok_slot[i] - 1);
	}
	return HT_OTHER;
}

/* ---- the arena ------------------------------------------------------ */

char *arena_bytes(struct arena *a, uint32_t n)
{
	if (n > a->hi - a->lo)
		return NULL;
	a->hi -= n;
	return a->base + a->hi;
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

/* ---- answers weir makes itself ----------------------------------------- */

int answer_length(struct answer *a, uint64_t len)
{
	int k = snprintf(a->length, sizeof(a->length), "%llu", (unsigned long long)len);

	return answer_add(a, "Content-Length", a->length, (size_t)k);
}

int answer_lines(struct answer *a, const char *p, size_t n)
{
	const char *end = p + n;

	while (p < end) {
		const char *colon = memchr(p, ':', (size_t)(end - p)), *eol;

		if (!colon || !(eol = memchr(colon, '\r', (size_t)(end - colon))))
			return -1; /* not weir's lines: cannot happen */
		if (a->n == a->cap)
			return -1;
		a->f[a->n].name = p;
		a->f[a->n].name_len = (uint32_t)(colon - p);
		colon += colon + 1 < eol && colon[1] == ' ' ? 2 : 1;
		a->f[a->n].value = colon;
		a->f[a->n].value_len = (uint32_t)(eol - colon);
		a->n++;
		p = eol + 2;
	}
	return 0;
}
