/*
 * fuzz_response.c: response heads from an upstream and their body framing
 * (worker/h1/http_response.c, http_common.c, http_chunked.c), as the worker
 * reads an upstream connection: interim 1xx heads skipped, then the final
 * head, its body, and the next response in the same bytes, up to four
 * heads. Every input is read twice, as the answer to a GET and to a HEAD.
 *
 * Each head is parsed in one call, in two calls split at a point derived
 * from the input, and one byte at a time; all three must agree.
 */
#include <string.h>

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_http.h"
#include "worker/h1/h1.h"

#define MAX_HEADERS 24
#define MAX_HEAD 2048

static struct hdr hdrs[3][MAX_HEADERS];
static struct msg resps[3];

static int parse_cuts(struct msg *r, struct hdr *h, enum http_method m, const char *p, size_t len,
                      size_t cut, int bytewise)
{
	struct http_response rp;
	struct arena a;
	int rc = WEIR_EAGAIN;

	arena_init(&a, h, MAX_HEADERS * sizeof(*h));
	http_response_init(&rp, r, &a, MAX_HEADERS, MAX_HEAD, m);
	if (bytewise) {
		for (size_t n = 1; n <= len && rc == WEIR_EAGAIN; n++)
			rc = http_response_parse(&rp, p, n);
		return len ? rc : http_response_parse(&rp, p, 0);
	}
	rc = http_response_parse(&rp, p, cut);
	if (rc == WEIR_EAGAIN && cut < len)
		rc = http_response_parse(&rp, p, len);
	return rc;
}

static void check_head(const struct msg *r, const char *p, size_t len, enum http_method m)
{
	FUZZ_CHECK(r->head_len > 0 && r->head_len <= len && r->head_len <= MAX_HEAD);
	FUZZ_CHECK(r->status >= 100 && r->status <= 599);
	FUZZ_CHECK(r->version_minor == 0 || r->version_minor == 1);
	FUZZ_CHECK(r->reason && fuzz_within(r->reason, r->reason_len, p, r->head_len));
	FUZZ_CHECK(r->hl.n <= MAX_HEADERS);
	fuzz_check_headers(r->hl.v, r->hl.n, p, r->head_len);
	if (m == HTTP_HEAD || r->status < 200 || r->status == 204 || r->status == 304)
		FUZZ_CHECK(r->body == HTTP_BODY_NONE);
	if (r->body == HTTP_BODY_CHUNKED)
		FUZZ_CHECK(r->version_minor == 1);
	if (r->body == HTTP_BODY_CLOSE)
		FUZZ_CHECK(!r->keep_alive);
}

static void check_same(const struct msg *a, const struct msg *b)
{
	FUZZ_CHECK(a->head_len == b->head_len && a->status == b->status && a->body == b->body);
	FUZZ_CHECK(a->content_length == b->content_length && a->keep_alive == b->keep_alive);
	FUZZ_CHECK(a->hl.n == b->hl.n && a->reason_len == b->reason_len);
	for (uint32_t i = 0; i < a->hl.n; i++) {
		FUZZ_CHECK(a->hl.v[i].name_len == b->hl.v[i].name_len);
		FUZZ_CHECK(a->hl.v[i].value_len == b->hl.v[i].value_len);
		FUZZ_CHECK(a->hl.v[i].flags == b->hl.v[i].flags);
	}
}

static void read_responses(const uint8_t *data, size_t size, enum http_method m)
{
	const char *p = (const char *)data;
	size_t off = 0;

	for (int n = 0; n < 4 && off < size; n++) {
		size_t len = size - off;
		int rc = parse_cuts(&resps[0], hdrs[0], m, p + off, len, len, 0);
		int rc2 = parse_cuts(&resps[1], hdrs[1], m, p + off, len, fuzz_split(data + off, len), 0);
		int rc3 = parse_cuts(&resps[2], hdrs[2], m, p + off, len, 0, 1);
		long body;

		/* every failure of a response is the one code */
		FUZZ_CHECK(rc == 0 || rc == WEIR_EAGAIN || rc == WEIR_ERR(UPSTREAM_BAD_RESPONSE));
		FUZZ_CHECK(rc == rc2 && rc == rc3);
		if (rc)
			return;
		check_head(&resps[0], p + off, len, m);
		check_same(&resps[0], &resps[1]);
		check_same(&resps[0], &resps[2]);
		off += resps[0].head_len;
		if (resps[0].status < 200)
			continue;
		body = fuzz_body(resps[0].body, resps[0].content_length, p + off, size - off);
		if (body < 0 || !resps[0].keep_alive)
			return;
		off += (size_t)body;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	read_responses(data, size, HTTP_GET);
	read_responses(data, size, HTTP_HEAD);
	return 0;
}
