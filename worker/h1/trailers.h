/*
 * trailers.h: trailer fields passed through (trailers.c), for gRPC and
 * the like: the chunked trailer section of one side goes to the other.
 *
 * Principle: a trailer section crosses between codecs as a header list
 * (struct hdr, msg.h), never as protocol text. The codec that reads it
 * builds the list once, in room its side gets with the first trailers
 * (side_trailers(), h1.h: a small buffer freed with the stream, at most
 * TRAILERS_FIELDS), dropping and counting (trailer_dropped) what RFC
 * 9110 6.5.1 keeps out of trailers (framing, routing, hop-by-hop, authentication, controls,
 * the content's own description) and the fields past the cap; names and
 * values point where the codec keeps them (HTTP/1: the input buffer the
 * chunked decoder checked them in, field syntax and 16 KiB; HTTP/2: the
 * codec's record of the trailing HEADERS, trailers_rec_add()). The other
 * codec writes the list with its peer's end: HTTP/1 after the last chunk
 * when that peer's body is chunked too (a length-framed, HTTP/1.0 or
 * re-encoded body drops it), HTTP/2 as a trailing HEADERS. A body
 * buffered whole copies the bytes into its buffer (txn_client.c). No
 * allocation on a body without trailers.
 */
#ifndef WEIR_WORKER_H1_TRAILERS_H
#define WEIR_WORKER_H1_TRAILERS_H

#include <stddef.h>
#include <stdint.h>

/* A trailer section is at most this, its final CRLF in (the chunked
 * decoder's bound, http_chunked.c). */
#define TRAILERS_MAX 16384

/* A trailer list has at most this many fields: those past it are
 * dropped and counted as refused ones are. */
#define TRAILERS_FIELDS 64

/* On a trailer field's hdr.flags (above the name's, msg.h): the field is
 * an HTTP/1 line where it points, its name the line's start and its CRLF
 * past the value (and the OWS around it): HTTP/1 writes the line as it
 * came, HTTP/2 the name and the trimmed value. */
#define TRAILER_LINE 0x8000

struct hdr;

/* Whether field name <p>[0..len) (any case) must not be in trailers. */
int trailers_forbidden(const char *p, size_t len);

/*
 * The list of the checked trailer section <p>[0..len) ("name: value\r\n"
 * lines, then "\r\n") into <v> (room for TRAILERS_FIELDS), pointing into
 * it (TRAILER_LINE): the forbidden fields and those past the cap left
 * out, counted in *dropped. Returns the fields kept.
 */
uint32_t trailers_list(const char *p, size_t len, struct hdr *v, uint32_t *dropped);

/* The bytes of field <h> as an HTTP/1 line, its CRLF in (TRAILER_LINE:
 * the line as it came). */
size_t trailers_line_len(const struct hdr *h);

/* The size of list <v>[0..n) as an HTTP/1 trailer section, its final
 * CRLF in: the bound every codec keeps (TRAILERS_MAX). */
size_t trailers_size(const struct hdr *v, uint32_t n);

/* When list <v>[0..n) is HTTP/1 lines (TRAILER_LINE) that lie one after
 * the other from v[0].name, the final CRLF right after the last: the
 * section's length there; else 0 (it must be written). */
size_t trailers_in_place(const struct hdr *v, uint32_t n);

/* Writes list <v>[0..n) as an HTTP/1 trailer section, its final CRLF in,
 * at <dst> (room for trailers_size()). Returns the bytes written. */
size_t trailers_write(char *dst, const struct hdr *v, uint32_t n);

/*
 * An HTTP/2 codec's record of a trailing HEADERS: each field as its two
 * lengths (16 bits each) then its name and value, so a record takes the
 * bytes the field's HTTP/1 line would and the bound stays that of an
 * HTTP/1 section. trailers_rec_add() appends one field at <dst> (room for
 * nlen + vlen + 4), its name lowered when <lower> (an HTTP/2 writer's);
 * returns the bytes written (the codec keeps at most TRAILERS_FIELDS).
 * trailers_rec_list() is the list of the record <p>[0..len) into <v>
 * (room for TRAILERS_FIELDS), pointing into it.
 */
size_t trailers_rec_add(char *dst, const char *name, size_t nlen, const char *value, size_t vlen, int lower);
uint32_t trailers_rec_list(const char *p, size_t len, struct hdr *v);

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
