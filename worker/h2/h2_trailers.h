/*
 * h2_trailers.h: trailers on an HTTP/2 stream (h2_trailers.c), as the
 * header list the core carries (worker/h1/h1.h, trailers).
 *
 * A client's trailing HEADERS is recorded (trailers_rec_add(), the
 * refused fields dropped and counted) and becomes the trailer list of the
 * request body handed up (when the head went chunked: with a
 * content-length the upstream's body is length-framed, and the fields
 * are dropped); the response's trailer list, as the upstream side's codec
 * handed it up, is recorded with its end (names lower case) and becomes a
 * trailing HEADERS after DATA that does not end the stream.
 */
#ifndef WEIR_WORKER_H2_TRAILERS_H
#define WEIR_WORKER_H2_TRAILERS_H

#include <stddef.h>
#include <stdint.h>

struct h2_stream;
struct side_in;
struct hdr;

/* A field of the client's trailing HEADERS: 0, or an nghttp2 error code
 * (the stream is reset) for a section past 16 KiB or out of memory. */
int h2_trailers_field(struct h2_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen);

/* The request body's last span, bi->span (its eos set): the client's
 * trailer fields with it (in bi->tr), when there are some to pass. */
void h2_trailers_span(struct h2_stream *st, struct side_in *bi);

/* The response's trailer fields <v>[0..n), with its end: recorded for
 * the trailing HEADERS (out of memory, or past the bound: the rest
 * dropped, counted). */
void h2_trailers_collect(struct h2_stream *st, const struct hdr *v, uint32_t n);

/* In the data source at the response body's end: submits the trailing
 * HEADERS when there are fields to send; 1 if so (the DATA must then
 * not end the stream), else 0. */
int h2_trailers_submit(struct h2_stream *st);

#endif
