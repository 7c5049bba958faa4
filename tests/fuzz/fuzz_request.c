/*
 * fuzz_request.c: request heads and their body framing, as the worker reads
 * a keep-alive connection: a head (worker/h1/http_request.c and
 * http_common.c), its body (Content-Length counted, chunked through
 * http_chunked.c), then the next head in the same bytes, up to four.
 *
 * Each head is parsed three ways: in one call, in two calls split at a
 * point derived from the input, and one byte at a time. All three must give
 * the same answer and the same spans, since the worker parses a head as
 * its bytes arrive, however the network cuts them.
 */
#include <string.h>

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_http.h"
#include "worker/h1/h1.h"

/* Small limits, so that inputs of a few kB reach every limit check. */
static const struct config_limits limits = {
	.header_size = 2048,
	.headers = 24,
	.uri_size = 512,
	.body_size = 100000,
};

static struct hdr hdrs[3][HTTP_MAX_HEADERS];
static struct msg reqs[3];
static struct http_request rp;
static struct arena arena;

/* A new head into <m>, its list in <h> (as a stream's arena holds it). */
static void req_init(struct msg *m, struct hdr *h)
{
	arena_init(&arena, h, HTTP_MAX_HEADERS * sizeof(*h));
	http_request_init(&rp, m, &arena, &limits);
}

static int parse_whole(struct msg *r, struct hdr *h, const char *p, size_t len)
{
	req_init(r, h);
	return http_request_parse(&rp, p, len);
}

static int parse_split(struct msg *r, struct hdr *h, const char *p, size_t len, size_t cut)
{
	int rc;

	req_init(r, h);
	rc = http_request_parse(&rp, p, cut);
	if (rc == WEIR_EAGAIN)
		rc = http_request_parse(&rp, p, len);
	return rc;
}

static int parse_bytes(struct msg *r, struct hdr *h, const char *p, size_t len)
{
	int rc = WEIR_EAGAIN;

	req_init(r, h);
	for (size_t n = 1; n <= len && rc == WEIR_EAGAIN; n++)
		rc = http_request_parse(&rp, p, n);
	if (len == 0)
		rc = http_request_parse(&rp, p, 0);
	return rc;
}

/* What a complete head must look like: every span inside the head. */
static void check_head(const struct msg *r, const char *p, size_t len)
{
	FUZZ_CHECK(r->head_len > 0 && r->head_len <= len && r->head_len <= limits.header_size);
	FUZZ_CHECK(r->method && r->method_len > 0);
	FUZZ_CHECK(r->version_minor == 0 || r->version_minor == 1);
	FUZZ_CHECK(r->target_len > 0);
	/* an absolute-form target of only an authority is served as "/" */
	if (!(r->target_len == 1 && r->target[0] == '/'))
		FUZZ_CHECK(fuzz_within(r->target, r->target_len, p, r->head_len));
	FUZZ_CHECK(r->path_end >= r->target && r->path_end <= r->target + r->target_len);
	if (r->host)
		FUZZ_CHECK(fuzz_within(r->host, r->host_len, p, r->head_len) && r->host_len > 0);
	else
		FUZZ_CHECK(r->version_minor == 0);
	FUZZ_CHECK(r->hl.n <= limits.headers);
	fuzz_check_headers(r->hl.v, r->hl.n, p, r->head_len);
	if (r->body == HTTP_BODY_LENGTH)
		FUZZ_CHECK(r->content_length <= limits.body_size);
	else
		FUZZ_CHECK(r->body == HTTP_BODY_NONE || r->body == HTTP_BODY_CHUNKED);
	if (r->body == HTTP_BODY_CHUNKED)
		FUZZ_CHECK(r->version_minor == 1);
}

/* Same answer from two parses of the same bytes (spans compared by offset). */
static void check_same(const struct msg *a, const struct msg *b)
{
	FUZZ_CHECK(a->head_len == b->head_len && a->hl.n == b->hl.n && a->body == b->body);
	FUZZ_CHECK(a->content_length == b->content_length && a->method_id == b->method_id);
	FUZZ_CHECK(a->target_len == b->target_len && a->host_len == b->host_len);
	FUZZ_CHECK(a->keep_alive == b->keep_alive && a->expect_continue == b->expect_continue);
	for (uint32_t i = 0; i < a->hl.n; i++) {
		FUZZ_CHECK(a->hl.v[i].name_len == b->hl.v[i].name_len);
		FUZZ_CHECK(a->hl.v[i].value_len == b->hl.v[i].value_len);
		FUZZ_CHECK(a->hl.v[i].flags == b->hl.v[i].flags);
	}
}

static int is_limit(int rc)
{
	return rc == WEIR_ERR(HEADERS_TOO_LARGE) || rc == WEIR_ERR(URI_TOO_LONG);
}

/*
 * Whether two parses of one head agree. The code must be the same, except
 * that a limit passed inside a name or target (431, 414) may lose to a bad
 * byte later in the same token (400) when the token arrived in one piece:
 * http-parser reports a token to the callbacks, which count and measure,
 * only when it ends or the piece does. Both refuse and close.
 */
static int same_answer(int a, int b)
{
	if (a == b)
		return 1;
	return a < 0 && b < 0 && a != WEIR_EAGAIN && b != WEIR_EAGAIN &&
	       ((is_limit(a) && b == WEIR_ERR(BAD_REQUEST)) || (is_limit(b) && a == WEIR_ERR(BAD_REQUEST)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	size_t off = 0;

	for (int n = 0; n < 4 && off < size; n++) {
		size_t len = size - off;
		int rc = parse_whole(&reqs[0], hdrs[0], p + off, len);
		int rc2 = parse_split(&reqs[1], hdrs[1], p + off, len, fuzz_split(data + off, len));
		int rc3 = parse_bytes(&reqs[2], hdrs[2], p + off, len);
		long body;

		FUZZ_CHECK(same_answer(rc, rc2) && same_answer(rc, rc3));
		if (rc)
			return 0;
		check_head(&reqs[0], p + off, len);
		check_same(&reqs[0], &reqs[1]);
		check_same(&reqs[0], &reqs[2]);
		off += reqs[0].head_len;
		body = fuzz_body(reqs[0].body, reqs[0].content_length, p + off, size - off);
		if (body < 0 || !reqs[0].keep_alive)
			return 0;
		off += (size_t)body;
	}
	return 0;
}
