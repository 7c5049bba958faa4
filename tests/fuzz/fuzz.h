/*
 * fuzz.h: what the libFuzzer targets in tests/fuzz/ share.
 *
 * Principle: a target feeds untrusted bytes to one of weir's parsers the way
 * the worker does, then checks what the parser promises (spans inside the
 * buffer, the same answer however the input is split, progress on every
 * call). A broken promise aborts, so libFuzzer keeps the input as a crash;
 * the sanitizers catch the rest.
 */
#ifndef WEIR_TESTS_FUZZ_H
#define WEIR_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                           \
		}                                                                          \
	} while (0)

/* 1 if [p, p + n) lies within [base, base + len). */
static inline int fuzz_within(const void *p, size_t n, const void *base, size_t len)
{
	const char *c = p, *b = base;

	return c >= b && n <= len && (size_t)(c - b) <= len - n;
}

/* A split point derived from the bytes, so a run is reproducible from the
 * input alone and different inputs are split differently. */
static inline size_t fuzz_split(const uint8_t *data, size_t size)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 16777619u;
	return size ? h % (size + 1) : 0;
}

#endif
