/*
 * trailers.h: trailer fields passed through (trailers.c), for gRPC and
 * the like: the chunked trailer section of one side goes to the other.
 *
 * Principle: a trailer section is kept as HTTP/1 text where it was read
 * (the chunked decoder checked it: field syntax, 16 KiB), and is written
 * with the peer's last chunk when that peer's body is chunked too; a
 * length-framed, HTTP/1.0 or re-encoded (compressed) body drops it, as
 * a body buffered whole does. What RFC 9110 6.5.1 keeps out of trailers
 * (framing, routing, hop-by-hop, authentication, controls, the content's
 * own description) is dropped from it and counted (trailer_dropped).
 * HTTP/2 turns the section into a trailing HEADERS and back
 * (worker/h2/h2_trailers.c). No allocation: the section is filtered in
 * place.
 */
#ifndef WEIR_WORKER_H1_TRAILERS_H
#define WEIR_WORKER_H1_TRAILERS_H

#include <stddef.h>
#include <stdint.h>

/* A trailer section is at most this, its final CRLF in (the chunked
 * decoder's bound, http_chunked.c). */
#define TRAILERS_MAX 16384

/* Whether field name <p>[0..len) (any case) must not be in trailers. */
int trailers_forbidden(const char *p, size_t len);

/*
 * Drops the forbidden fields from the checked trailer section
 * <p>[0..len) ("name: value\r\n" lines, then "\r\n"), in place: the lines
 * kept move down over those dropped. Returns the new length; *dropped
 * gets the number of fields dropped.
 */
size_t trailers_filter(char *p, size_t len, uint32_t *dropped);

/*
 * The next field of a checked trailer section <p>[0..len) from *off:
 * 1 with its name and its value (OWS trimmed) and *off past its line, 0
 * at the final CRLF (or the end).
 */
int trailers_next(const char *p, size_t len, size_t *off, const char **name, size_t *nlen, const char **value,
                  size_t *vlen);

/* Whether the value <p>[0..len) of a TE field lists "trailers" (RFC 9110
 * 10.1.4): the one TE weir forwards, as gRPC needs it. */
int trailers_te_listed(const char *p, size_t len);

#endif
