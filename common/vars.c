/*
 * vars.c: compiling templates (common/vars.h); expansion is worker/vars.c.
 */
#include "common/vars.h"

#include <stdio.h>
#include <string.h>

static const char *const vars_names[VARS_COUNT] = {
    [VARS_LITERAL] = "",
#define VARS_NAME(id, name, doc) [VARS_##id] = name,
    VARS_TABLE(VARS_NAME)
#undef VARS_NAME
};

static const char *const vars_docs[VARS_COUNT] = {
    [VARS_LITERAL] = "",
#define VARS_DOC(id, name, doc) [VARS_##id] = doc,
    VARS_TABLE(VARS_DOC)
#undef VARS_DOC
};

const char *vars_name(enum vars_id id)
{
	return (unsigned)id < VARS_COUNT ? vars_names[id] : "";
}

const char *vars_doc(enum vars_id id)
{
	return (unsigned)id < VARS_COUNT ? vars_docs[id] : "";
}

static int vars_name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Appends a piece; NULL or why not. */
static const char *vars_add(struct vars_tpl *t, int id, const char *s, size_t len)
{
	if (t->n >= VARS_PIECES)
		return "has too many pieces (at most 64 variables and literal runs)";
	if (t->used + len > VARS_TEXT)
		return "is too long (at most 4096 bytes)";
	if (id == VARS_LITERAL && t->n && t->p[t->n - 1].id == VARS_LITERAL &&
	    t->p[t->n - 1].off + t->p[t->n - 1].len == t->used) {
		/* "$$" splits a literal: one piece all the same */
		memcpy(t->text + t->used, s, len);
		t->used += (uint16_t)len;
		t->p[t->n - 1].len += (uint16_t)len;
		return NULL;
	}
	memcpy(t->text + t->used, s, len);
	t->p[t->n].id = (uint8_t)id;
	t->p[t->n].off = t->used;
	t->p[t->n].len = (uint16_t)len;
	t->used += (uint16_t)len;
	t->n++;
	return NULL;
}

/* The id of variable <name> (<len> bytes) and, for a family, where its
 * NAME starts; -1 when there is none of that name. */
static int vars_lookup(const char *name, size_t len, size_t *arg)
{
	*arg = len;
	for (int id = 1; id < VARS_COUNT; id++) {
		size_t n = strlen(vars_names[id]);

		if (vars_names[id][n - 1] == '_') {
			if (len > n && memcmp(name, vars_names[id], n) == 0) {
				*arg = n;
				return id;
			}
		} else if (n == len && memcmp(name, vars_names[id], n) == 0) {
			return id;
		}
	}
	return -1;
}

const char *vars_compile(struct vars_tpl *t, const char *src)
{
	static char why[160];
	const char *p = src;
	const char *err;

	memset(t, 0, sizeof(*t));
	while (*p) {
		const char *lit = p;
		const char *name;
		size_t len, arg;
		int id;

		while (*p && *p != '$')
			p++;
		if (p > lit && (err = vars_add(t, VARS_LITERAL, lit, (size_t)(p - lit))) != NULL)
			return err;
		if (!*p)
			break;
		p++; /* the '$' */
		if (*p == '$') {
			if ((err = vars_add(t, VARS_LITERAL, "$", 1)) != NULL)
				return err;
			p++;
			continue;
		}
		if (*p == '{') {
			name = ++p;
			while (vars_name_char((unsigned char)*p))
				p++;
			if (*p != '}' || p == name)
				return "has a \"${\" without a variable name and \"}\" after it";
			len = (size_t)(p - name);
			p++;
		} else {
			name = p;
			while (vars_name_char((unsigned char)*p))
				p++;
			len = (size_t)(p - name);
			if (len == 0)
				return "has a '$' without a variable name (write \"$$\" for a '$')";
		}
		id = vars_lookup(name, len, &arg);
		if (id < 0) {
			snprintf(why, sizeof(why), "uses the unknown variable $%.*s", (int)(len > 64 ? 64 : len), name);
			return why;
		}
		if ((err = vars_add(t, id, name + arg, len - arg)) != NULL)
			return err;
	}
	return NULL;
}

int vars_uses(const struct vars_tpl *t, enum vars_id id)
{
	for (uint16_t i = 0; i < t->n; i++)
		if (t->p[i].id == id)
			return 1;
	return 0;
}

size_t vars_source(const struct vars_tpl *t, char *buf, size_t cap)
{
	size_t o = 0;

	if (cap == 0)
		return 0;
	for (uint16_t i = 0; i < t->n; i++) {
		const struct vars_piece *p = &t->p[i];

		if (p->id == VARS_LITERAL) {
			for (uint16_t k = 0; k < p->len && o + 2 < cap; k++) {
				char ch = t->text[p->off + k];
				if (ch == '$')
					buf[o++] = '$';
				buf[o++] = ch;
			}
		} else {
			int n = snprintf(buf + o, cap - o, "${%s%.*s}", vars_names[p->id], (int)p->len, t->text + p->off);
			if (n < 0 || (size_t)n >= cap - o)
				break;
			o += (size_t)n;
		}
	}
	buf[o < cap ? o : cap - 1] = '\0';
	return o;
}
