/*
 * h2_trailers.h: trailers on an HTTP/2 stream (h2_trailers.c), as the
 * HTTP/1 chunked trailer section the core carries (worker/h1/trailers.h).
 *
 * A client's trailing HEADERS becomes the trailer section of the request
 * body handed up (when the head went chunked: with a content-length the
 * upstream's body is length-framed, and the fields are dropped); the
 * trailer section of the response as the core wrote it becomes a
 * trailing HEADERS (names lower case, the refused fields dropped) after
 * DATA that does not end the stream.
 */
#ifndef WEIR_WORKER_H2_TRAILERS_H
#define WEIR_WORKER_H2_TRAILERS_H

#include <stddef.h>
#include <stdint.h>

struct h2_stream;
struct body_span;

/* A field of the client's trailing HEADERS: 0, or an nghttp2 error code
 * (the stream is reset) for a section past 16 KiB or out of memory. */
int h2_trailers_field(struct h2_stream *st, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen);

/* The request body's last span <sp> (its eos set): the client's
 * trailer section with it, when there is one to pass. */
void h2_trailers_span(struct h2_stream *st, struct body_span *sp);

/* <p>[0..n): trailer section bytes of the response as the core wrote
 * it (the chunked decoder counted them); 0, or -1 out of memory. */
int h2_trailers_collect(struct h2_stream *st, const char *p, size_t n);

/* In the data source at the response body's end: submits the trailing
 * HEADERS when there are fields to send; 1 if so (the DATA must then
 * not end the stream), else 0. */
int h2_trailers_submit(struct h2_stream *st);

#endif
