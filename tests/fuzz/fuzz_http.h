/*
 * fuzz_http.h: what the request and response targets share: the checks on
 * a parsed header list, and the body framing the worker applies after a
 * head.
 */
#ifndef WEIR_TESTS_FUZZ_HTTP_H
#define WEIR_TESTS_FUZZ_HTTP_H

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "worker/h1/h1.h"
#include "worker/h1/http_internal.h"

/* Every header of a complete head: a tchar name and a trimmed value of
 * field bytes, both inside the head <p>[0..head_len). */
static inline void fuzz_check_headers(const struct hdr *hs, uint32_t n, const char *p, size_t head_len)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct hdr *h = &hs[i];

		FUZZ_CHECK(h->name_len > 0 && fuzz_within(h->name, h->name_len, p, head_len));
		FUZZ_CHECK(h->value && fuzz_within(h->value, h->value_len, p, head_len));
		for (uint32_t k = 0; k < h->name_len; k++)
			FUZZ_CHECK(http_is((unsigned char)h->name[k], HTTP_C_TCHAR));
		for (uint32_t k = 0; k < h->value_len; k++)
			FUZZ_CHECK(http_is((unsigned char)h->value[k], HTTP_C_VCHAR | HTTP_C_WS));
		if (h->value_len)
			FUZZ_CHECK(!http_is((unsigned char)h->value[0], HTTP_C_WS) &&
			           !http_is((unsigned char)h->value[h->value_len - 1], HTTP_C_WS));
	}
}

/*
 * A body as the worker frames it: chunked through the strict decoder until
 * it is done or fails, Content-Length counted. Returns the bytes of
 * <p>[0..len) the body took, or -1 when the framing failed (or the body did
 * not end within the input).
 */
static inline long fuzz_body(enum http_body_kind kind, uint64_t content_length, const char *p, size_t len)
{
	struct http_chunked c;
	size_t off = 0;

	switch (kind) {
	case HTTP_BODY_NONE:
		return 0;
	case HTTP_BODY_LENGTH:
		return content_length <= len ? (long)content_length : -1;
	case HTTP_BODY_CLOSE:
		return (long)len;
	case HTTP_BODY_CHUNKED:
		break;
	}
	http_chunked_init(&c);
	while (off < len && !c.done) {
		const char *data;
		size_t used = 0, data_len;
		int rc = http_chunked_feed(&c, p + off, len - off, &used, &data, &data_len);

		FUZZ_CHECK(used <= len - off);
		if (rc) {
			FUZZ_CHECK(rc == WEIR_ERR(SMUGGLING) && !data && !data_len);
			return -1;
		}
		FUZZ_CHECK(used > 0); /* progress on every call */
		if (data_len)
			FUZZ_CHECK(fuzz_within(data, data_len, p + off, used));
		off += used;
	}
	return c.done ? (long)off : -1;
}

#endif
