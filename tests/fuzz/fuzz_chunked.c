/*
 * fuzz_chunked.c: the strict chunked decoder (worker/h1/http_chunked.c) on a
 * body as it comes off the wire.
 *
 * The input is decoded three times: in one buffer, in two pieces cut at a
 * point derived from the input, and one byte at a time. Each decoding must
 * make progress on every call, return data spans inside what it consumed,
 * and all three must agree on the verdict, the bytes consumed and the data.
 */
#include <string.h>

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "worker/h1/h1.h"

#define MAX_INPUT 65536

struct outcome {
	int rc;          /* 0 or the error */
	int done;        /* the last chunk and trailers were read */
	size_t consumed; /* input bytes taken */
	size_t ndata;
	uint8_t data[MAX_INPUT]; /* the data, concatenated */
};

/* Decodes <p>[0..len) given in pieces of at most <piece> bytes, except the
 * first which is <first> bytes. */
static void decode(const uint8_t *p, size_t len, size_t first, size_t piece, struct outcome *o)
{
	struct http_chunked c;
	size_t off = 0, avail = first < len ? first : len;

	http_chunked_init(&c);
	o->rc = o->done = 0;
	o->consumed = o->ndata = 0;
	for (;;) {
		while (off < avail && !c.done) {
			const char *d;
			size_t used = 0, dlen;
			int rc = http_chunked_feed(&c, (const char *)p + off, avail - off, &used, &d, &dlen);

			FUZZ_CHECK(used <= avail - off);
			if (rc) {
				FUZZ_CHECK(rc == WEIR_ERR(SMUGGLING) && !d && !dlen);
				o->rc = rc;
				o->consumed = off + used;
				return;
			}
			FUZZ_CHECK(used > 0);
			if (dlen) {
				FUZZ_CHECK(fuzz_within(d, dlen, p + off, used));
				memcpy(o->data + o->ndata, d, dlen);
				o->ndata += dlen;
			}
			off += used;
		}
		if (c.done || avail == len)
			break;
		avail = avail + piece < len ? avail + piece : len;
	}
	o->done = c.done;
	o->consumed = off;
	/* a finished decoder takes nothing more, and says so */
	if (c.done) {
		const char *d;
		size_t used = 1, dlen;

		FUZZ_CHECK(http_chunked_feed(&c, "0", 1, &used, &d, &dlen) == 0 && used == 0 && dlen == 0);
	}
}

static void check_same(const struct outcome *a, const struct outcome *b)
{
	FUZZ_CHECK(a->rc == b->rc && a->done == b->done && a->ndata == b->ndata);
	FUZZ_CHECK(memcmp(a->data, b->data, a->ndata) == 0);
	/* where the error is found may differ by a piece, not the verdict */
	if (!a->rc)
		FUZZ_CHECK(a->consumed == b->consumed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct outcome whole, split, bytes;

	if (size > MAX_INPUT)
		return 0;
	decode(data, size, size, size, &whole);
	decode(data, size, fuzz_split(data, size), size, &split);
	decode(data, size, 1, 1, &bytes);
	check_same(&whole, &split);
	check_same(&whole, &bytes);
	FUZZ_CHECK(whole.ndata <= size);
	return 0;
}
