/*
 * textbuf.h: a growable text buffer for the stats socket's answers.
 *
 * Principle: the master renders an answer whole before it sends a byte, so
 * the size is known for Content-Length and a slow reader costs one buffer.
 * The master is off every request path, so malloc is fine here; growth is
 * bounded by TEXTBUF_MAX and a failure sticks (<failed>), so a renderer
 * writes on without checking every call and the caller checks once.
 */
#ifndef WEIR_MASTER_TEXTBUF_H
#define WEIR_MASTER_TEXTBUF_H

#include <stdarg.h>
#include <stddef.h>

#define TEXTBUF_MAX (64u * 1024 * 1024)

struct textbuf {
	char *buf; /* malloc'd; NUL-terminated while len < cap */
	size_t len, cap;
	int failed; /* out of memory or past TEXTBUF_MAX: the text is cut */
};

/* Appends formatted text. */
void textbuf_printf(struct textbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void textbuf_vprintf(struct textbuf *t, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Appends <n> bytes of <s>. */
void textbuf_put(struct textbuf *t, const char *s, size_t n);

/* Appends <s> as a Prometheus label value: backslash, double quote and
 * newline escaped (the exposition format's three escapes). */
void textbuf_label(struct textbuf *t, const char *s);

/* Frees the text and zeroes <t>. */
void textbuf_free(struct textbuf *t);

#endif
