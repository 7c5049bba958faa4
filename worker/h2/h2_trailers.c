/*
 * h2_trailers.c: trailers on an HTTP/2 stream (h2_trailers.h).
 */
#include "worker/h2/h2_trailers.h"

#include <string.h>

#include "worker/h1/trailers.h"
#include "worker/h2/h2_internal.h"

/* Appends <p>[0..n) to *<b> (got when first needed), the whole of it
 * within TRAILERS_MAX; 0, or -1. */
static int h2_trailers_put(struct buf **b, const void *p, size_t n)
{
	if (!*b && !(*b = buf_get()))
		return -1;
	if ((*b)->end + n > TRAILERS_MAX || (*b)->end + n > wk.buf_size)
		return -1;
	memcpy((*b)->data + (*b)->end, p, n);
	(*b)->end += (uint32_t)n;
	return 0;
}

int h2_trailers_field(struct h2_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
	/* nghttp2 checked the field (lower-case tchar name, no pseudo
	 * header, no CR, LF or NUL in the value): HTTP/1 text as it is */
	if (trailers_forbidden((const char *)name, nlen)) {
		worker_count_error(WEIR_ERR(TRAILER_DROPPED));
		return 0;
	}
	if (h2_trailers_put(&st->qtr, name, nlen) < 0 || h2_trailers_put(&st->qtr, ": ", 2) < 0 ||
	    h2_trailers_put(&st->qtr, value, vlen) < 0 || h2_trailers_put(&st->qtr, "\r\n", 2) < 0 ||
	    st->qtr->end + 2 > TRAILERS_MAX) {
		/* the bound of an HTTP/1 trailer section, its final CRLF in */
		worker_count_error(st->qtr ? WEIR_ERR(HEADERS_TOO_LARGE) : WEIR_ERR(NOMEM));
		buf_drop(&st->qtr);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return 0;
}

void h2_trailers_span(struct h2_stream *st, struct body_span *sp)
{
	struct buf *b = st->qtr;

	/* with a content-length the upstream's body is not chunked: no
	 * section can go with it */
	if (!b || !b->end || !st->in_chunked)
		return;
	if (!st->qtr_ended) {
		memcpy(b->data + b->end, "\r\n", 2); /* room kept by h2_trailers_field */
		b->end += 2;
		st->qtr_ended = 1;
	}
	sp->trailers = b->data;
	sp->trailers_len = b->end;
}

int h2_trailers_collect(struct h2_stream *st, const char *p, size_t n)
{
	return h2_trailers_put(&st->rtr, p, n);
}

int h2_trailers_submit(struct h2_stream *st)
{
	struct buf *b = st->rtr, *nb;
	nghttp2_nv *nv;
	size_t off = 0, n = 0, nmax, nlen, vlen;
	const char *name, *value;
	int rc;

	if (!b || b->end <= 2)
		return 0;
	if (!(nb = buf_get()))
		return 0; /* out of memory: the stream ends without them */
	nv = (nghttp2_nv *)(void *)nb->data;
	nmax = wk.buf_size / sizeof(nghttp2_nv);
	while (n < nmax && trailers_next(b->data, b->end, &off, &name, &nlen, &value, &vlen)) {
		char *lower = (char *)name;

		/* connection-specific fields never cross (RFC 9113 8.2.2), nor
		 * what RFC 9110 6.5.1 keeps out of trailers */
		if (trailers_forbidden(name, nlen)) {
			worker_count_error(WEIR_ERR(TRAILER_DROPPED));
			continue;
		}
		for (size_t k = 0; k < nlen; k++)
			if (lower[k] >= 'A' && lower[k] <= 'Z')
				lower[k] = (char)(lower[k] - 'A' + 'a');
		nv[n++] = (nghttp2_nv){(uint8_t *)lower, (uint8_t *)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
	}
	/* nghttp2 copies the fields: both buffers go back at once */
	rc = n ? nghttp2_submit_trailer(st->s->ng, st->id, nv, n) : -1;
	buf_put(nb);
	buf_drop(&st->rtr);
	return rc == 0;
}
