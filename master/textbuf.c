#include "master/textbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for <more> bytes and a NUL. Returns 0, or -1 (failed set). */
static int textbuf_room(struct textbuf *t, size_t more)
{
	size_t want = t->len + more + 1, cap;
	char *nb;

	if (t->failed)
		return -1;
	if (want <= t->cap)
		return 0;
	if (want > TEXTBUF_MAX) {
		t->failed = 1;
		return -1;
	}
	for (cap = t->cap ? t->cap : 4096; cap < want; cap *= 2)
		;
	if (cap > TEXTBUF_MAX)
		cap = TEXTBUF_MAX;
	nb = realloc(t->buf, cap);
	if (!nb) {
		t->failed = 1;
		return -1;
	}
	t->buf = nb;
	t->cap = cap;
	return 0;
}

void textbuf_put(struct textbuf *t, const char *s, size_t n)
{
	if (textbuf_room(t, n) < 0)
		return;
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = 0;
}

void textbuf_vprintf(struct textbuf *t, const char *fmt, va_list ap)
{
	va_list again;
	int n;

	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	if (n >= 0 && textbuf_room(t, (size_t)n) == 0) {
		vsnprintf(t->buf + t->len, t->cap - t->len, fmt, again);
		t->len += (size_t)n;
	}
	va_end(again);
}

void textbuf_printf(struct textbuf *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	textbuf_vprintf(t, fmt, ap);
	va_end(ap);
}

void textbuf_label(struct textbuf *t, const char *s)
{
	for (const char *p = s; *p; p++) {
		size_t run = strcspn(p, "\\\"\n");

		textbuf_put(t, p, run);
		p += run;
		if (!*p)
			break;
		textbuf_put(t, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n", 2);
	}
}

void textbuf_free(struct textbuf *t)
{
	free(t->buf);
	memset(t, 0, sizeof(*t));
}
