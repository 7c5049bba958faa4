/*
 * h2_trailers.c: trailers on an HTTP/2 stream (h2_trailers.h).
 */
#include "worker/h2/h2_trailers.h"

#include <string.h>

#include "worker/h2/h2_internal.h"

/* Appends field <name>, <value> to record *<b> (got when first needed),
 * the whole of it within an HTTP/1 section's bound (its final CRLF in)
 * and one buffer; 0, or -1. */
static int h2_trailers_put(struct buf **b, const char *name, size_t nlen, const char *value, size_t vlen,
                           int lower)
{
	size_t n = nlen + vlen + 4;

	if (!*b && !(*b = buf_get()))
		return -1;
	if ((*b)->end + n + 2 > TRAILERS_MAX || (*b)->end + n > wk.buf_size)
		return -1;
	(*b)->end += (uint32_t)trailers_rec_add((*b)->data + (*b)->end, name, nlen, value, vlen, lower);
	return 0;
}

int h2_trailers_field(struct h2_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
	/* nghttp2 checked the field (lower-case tchar name, no pseudo
	 * header, no CR, LF or NUL in the value): kept as it is */
	if (trailers_forbidden((const char *)name, nlen) || st->qtr_n == TRAILERS_FIELDS) {
		worker_count_error(WEIR_ERR(TRAILER_DROPPED));
		return 0;
	}
	if (h2_trailers_put(&st->qtr, (const char *)name, nlen, (const char *)value, vlen, 0) < 0) {
		worker_count_error(st->qtr ? WEIR_ERR(HEADERS_TOO_LARGE) : WEIR_ERR(NOMEM));
		buf_drop(&st->qtr);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	st->qtr_n++;
	return 0;
}

void h2_trailers_span(struct h2_stream *st, struct side_in *bi)
{
	struct buf *b = st->qtr;
	struct hdr *v;

	/* with a content-length the upstream's body is not chunked: no
	 * section can go with it */
	if (!b || !b->end || !st->in_chunked)
		return;
	if (!(v = side_trailers(bi))) {
		worker_count_error(WEIR_ERR(NOMEM)); /* the body ends without them */
		return;
	}
	bi->span.ntrailers = trailers_rec_list(b->data, b->end, v);
	bi->span.trailers = v;
}

void h2_trailers_collect(struct h2_stream *st, const struct hdr *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (h2_trailers_put(&st->rtr, v[i].name, v[i].name_len, v[i].value, v[i].value_len, 1) < 0) {
			worker_count_error(WEIR_ERR(TRAILER_DROPPED));
			return;
		}
}

int h2_trailers_submit(struct h2_stream *st)
{
	struct hdr v[TRAILERS_FIELDS];
	nghttp2_nv nv[TRAILERS_FIELDS];
	uint32_t n;
	int rc;

	if (!st->rtr || !st->rtr->end)
		return 0;
	/* the fields the upstream side's codec kept (the refused ones out),
	 * names lowered as they were recorded */
	n = trailers_rec_list(st->rtr->data, st->rtr->end, v);
	for (uint32_t i = 0; i < n; i++)
		nv[i] = (nghttp2_nv){(uint8_t *)(uintptr_t)v[i].name, (uint8_t *)(uintptr_t)v[i].value, v[i].name_len,
		                     v[i].value_len, NGHTTP2_NV_FLAG_NONE};
	/* nghttp2 copies the fields: the record goes back at once */
	rc = n ? nghttp2_submit_trailer(st->s->ng, st->id, nv, n) : -1;
	buf_drop(&st->rtr);
	return rc == 0;
}
