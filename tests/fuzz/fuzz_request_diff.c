/*
 * fuzz_request_diff.c: weir's accept or reject decision on a request head
 * (worker/h1/http_request.c) against the reference checker written from the
 * RFCs (tests/fuzz/ref_http1.c). Aborts when one accepts what the other
 * refuses, or when both accept but see a different head length or body
 * framing: weir must neither accept what HTTP/1.1 forbids nor refuse what
 * it allows, beyond the refusals listed as POLICY in the reference.
 *
 * Incomplete heads: weir refuses some heads before their end (a bad byte
 * in the request line), the reference only judges whole heads. When either
 * says "wait", both are asked again about the input completed by the bytes
 * that end a head (CRLF CRLF); a head weir refused early must still be
 * refused, by both, once complete.
 */
#include <string.h>

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/ref_http1.h"
#include "worker/h1/h1.h"

static const struct config_limits limits = {
	.header_size = 4096,
	.headers = 32,
	.uri_size = 1024,
	.body_size = 1000000,
};
static const struct ref_limits rlimits = {
	.head = 4096,
	.target = 1024,
	.headers = 32,
	.body = 1000000,
};

static struct hdr hdrs[HTTP_MAX_HEADERS];
static struct arena arena;
static struct msg req;
static struct http_request req_p;

static int weir_parse(const uint8_t *p, size_t len)
{
	arena_init(&arena, hdrs, sizeof(hdrs));
	http_request_init(&req_p, &req, &arena, &limits);
	return http_request_parse(&req_p, (const char *)p, len);
}

static void disagree(const char *what, const uint8_t *p, size_t len, int rc, const struct ref_result *ref)
{
	fprintf(stderr, "request_diff: %s: weir %d (%s), reference %s (%s), %zu bytes\n", what, rc,
	        rc < 0 ? weir_err_text(rc) : "accepted",
	        ref->verdict == REF_ACCEPT   ? "accepts"
	        : ref->verdict == REF_REJECT ? "refuses"
	        : ref->verdict == REF_EITHER ? "takes either"
	                                     : "waits",
	        ref->why ? ref->why : "-", len);
	fwrite(p, 1, len < 600 ? len : 600, stderr);
	fputc('\n', stderr);
	abort();
}

/* Compares weir and the reference on <p>[0..len). Returns 1 if one wants
 * more bytes (the other waits too, or refused early), 0 when both judged a
 * whole head, the same way. */
static int compare(const uint8_t *p, size_t len)
{
	struct ref_result ref;
	int rc = weir_parse(p, len);

	ref_http1_request(p, len, &rlimits, &ref);
	if (rc == WEIR_EAGAIN || ref.verdict == REF_INCOMPLETE) {
		if (rc == 0 || ref.verdict == REF_ACCEPT || ref.verdict == REF_EITHER)
			disagree("complete for one, not the other", p, len, rc, &ref);
		return 1;
	}
	if (ref.verdict != REF_EITHER && (rc == 0) != (ref.verdict == REF_ACCEPT))
		disagree("accept or refuse", p, len, rc, &ref);
	if (rc == 0) {
		enum ref_body body = req.body == HTTP_BODY_CHUNKED  ? REF_BODY_CHUNKED
		                     : req.body == HTTP_BODY_LENGTH ? REF_BODY_LENGTH
		                                                    : REF_BODY_NONE;

		if (req.head_len != ref.head_len)
			disagree("head length", p, len, rc, &ref);
		if (body != ref.body || req.content_length != ref.content_length)
			disagree("body framing", p, len, rc, &ref);
		if (req.version_minor != ref.minor)
			disagree("version", p, len, rc, &ref);
	}
	return 0;
}

static uint8_t completed[8192 + 8];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *tail;
	int weir_refused;

	if (size > 8192)
		return 0;
	if (!compare(data, size))
		return 0;
	/* one wants more: end the head and ask both again */
	weir_refused = weir_parse(data, size) != WEIR_EAGAIN;
	if (size >= 2 && data[size - 2] == '\r' && data[size - 1] == '\n')
		tail = "\r\n";
	else if (size >= 1 && data[size - 1] == '\r')
		tail = "\n\r\n";
	else
		tail = "\r\n\r\n";
	memcpy(completed, data, size);
	memcpy(completed + size, tail, strlen(tail));
	size += strlen(tail);
	if (compare(completed, size) == 0 && weir_refused && weir_parse(completed, size) == 0)
		disagree("weir refused a prefix of a head it accepts", completed, size, 0,
		         &(struct ref_result){.verdict = REF_ACCEPT});
	return 0;
}
