/*
 * http_chunked.c: the strict chunked body decoder (RFC 9112 7.1).
 *
 * One byte at a time through a state machine, so input may be split
 * anywhere. Nothing loose is accepted: a size is 1*HEXDIG, extensions
 * follow the grammar and are dropped, every line ends in CRLF, the data is
 * followed by CRLF and nothing else, and trailer fields are checked like
 * header fields (the codec forwards them: worker/h1/h1.h, trailers). Anything
 * else is a framing error, since two parsers that differ here see
 * different request boundaries.
 */
#include <string.h>

#include "common/err.h"
#include "worker/h1/h1.h"
#include "worker/h1/http_internal.h"

#define CHUNK_LINE_MAX 4096            /* one chunk-size line with its extensions, CRLF excluded */
#define CHUNK_TRAILER_MAX TRAILERS_MAX /* the trailer section, final CRLF included */

enum chunk_state {
	CK_SIZE_START,  /* first hex digit of a chunk size */
	CK_SIZE,        /* more hex digits */
	CK_EXT_BWS,     /* BWS before ";" */
	CK_EXT_NAME0,   /* BWS after ";", then the first tchar of a name */
	CK_EXT_NAME,    /* in an extension name */
	CK_EXT_NAME_WS, /* BWS after a name, before "=" or ";" */
	CK_EXT_VAL0,    /* BWS after "=", then a token or a quoted-string */
	CK_EXT_TOKEN,   /* in a token value */
	CK_EXT_QSTR,    /* in a quoted-string value */
	CK_EXT_QPAIR,   /* after a backslash in a quoted-string */
	CK_EXT_QEND,    /* after the closing quote */
	CK_SIZE_LF,     /* LF ending the size line */
	CK_DATA,        /* chunk data */
	CK_DATA_CR,     /* CR after the data */
	CK_DATA_LF,     /* LF after the data */
	CK_TR_START,    /* start of a trailer line, or CR of the final CRLF */
	CK_TR_NAME,     /* in a trailer field name */
	CK_TR_VALUE,    /* in a trailer field value */
	CK_TR_LF,       /* LF ending a trailer field */
	CK_END_LF,      /* LF of the final CRLF */
	CK_ERROR,       /* a framing error was found; sticky */
};

void http_chunked_init(struct http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CK_SIZE_START;
}

void http_chunked_unread(struct http_chunked *c, size_t n)
{
	/* a data span ends the call that returns it, in CK_DATA or, its
	 * chunk done, in CK_DATA_CR: either way the data state again */
	if (n == 0)
		return;
	c->remaining += n;
	c->state = CK_DATA;
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20;
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* The byte after an extension value or name: BWS, ";" or the CR. */
static int ext_next(unsigned char ch)
{
	if (ch == ' ' || ch == '\t')
		return CK_EXT_BWS;
	if (ch == ';')
		return CK_EXT_NAME0;
	if (ch == '\r')
		return CK_SIZE_LF;
	return CK_ERROR;
}

/* One framing byte <ch> in the size line; returns the next state. */
static int size_line_byte(struct http_chunked *c, unsigned char ch)
{
	int d;

	if (ch != '\r' && ++c->line_bytes > CHUNK_LINE_MAX)
		return CK_ERROR;
	switch (c->state) {
	case CK_SIZE_START:
	case CK_SIZE:
		d = hexval(ch);
		if (d >= 0) {
			/* At most 16 digits, and the size stays below 2^62. */
			if (++c->digits > 16 || (c->remaining >> 58) != 0)
				return CK_ERROR;
			c->remaining = (c->remaining << 4) | (uint64_t)d;
			return CK_SIZE;
		}
		return c->state == CK_SIZE ? ext_next(ch) : CK_ERROR;
	case CK_EXT_BWS:
		if (ch == ' ' || ch == '\t')
			return CK_EXT_BWS;
		return ch == ';' ? CK_EXT_NAME0 : CK_ERROR;
	case CK_EXT_NAME0:
		if (ch == ' ' || ch == '\t')
			return CK_EXT_NAME0;
		return http_is(ch, HTTP_C_TCHAR) ? CK_EXT_NAME : CK_ERROR;
	case CK_EXT_NAME:
		if (http_is(ch, HTTP_C_TCHAR))
			return CK_EXT_NAME;
		if (ch == ' ' || ch == '\t')
			return CK_EXT_NAME_WS;
		return ch == '=' ? CK_EXT_VAL0 : ext_next(ch);
	case CK_EXT_NAME_WS:
		if (ch == ' ' || ch == '\t')
			return CK_EXT_NAME_WS;
		if (ch == '=')
			return CK_EXT_VAL0;
		return ch == ';' ? CK_EXT_NAME0 : CK_ERROR;
	case CK_EXT_VAL0:
		if (ch == ' ' || ch == '\t')
			return CK_EXT_VAL0;
		if (ch == '"')
			return CK_EXT_QSTR;
		return http_is(ch, HTTP_C_TCHAR) ? CK_EXT_TOKEN : CK_ERROR;
	case CK_EXT_TOKEN:
		return http_is(ch, HTTP_C_TCHAR) ? CK_EXT_TOKEN : ext_next(ch);
	case CK_EXT_QSTR:
		if (ch == '"')
			return CK_EXT_QEND;
		if (ch == '\\')
			return CK_EXT_QPAIR;
		return http_is(ch, HTTP_C_QDTEXT) ? CK_EXT_QSTR : CK_ERROR;
	case CK_EXT_QPAIR:
		return http_is(ch, HTTP_C_VCHAR | HTTP_C_WS) ? CK_EXT_QSTR : CK_ERROR;
	case CK_EXT_QEND:
		return ext_next(ch);
	default:
		return CK_ERROR;
	}
}

/* One byte of the trailer section; returns the next state. */
static int trailer_byte(struct http_chunked *c, unsigned char ch)
{
	/* the final LF is the only byte that may be the 16384th: a section
	 * that has reached the bound unfinished is refused at once, not when
	 * a byte that no longer fits a full input buffer comes */
	if (++c->trailer_bytes >= CHUNK_TRAILER_MAX)
		return CK_ERROR;
	switch (c->state) {
	case CK_TR_START:
		if (ch == '\r')
			return CK_END_LF;
		return http_is(ch, HTTP_C_TCHAR) ? CK_TR_NAME : CK_ERROR;
	case CK_TR_NAME:
		if (http_is(ch, HTTP_C_TCHAR))
			return CK_TR_NAME;
		return ch == ':' ? CK_TR_VALUE : CK_ERROR;
	case CK_TR_VALUE:
		if (http_is(ch, HTTP_C_VCHAR | HTTP_C_WS))
			return CK_TR_VALUE;
		return ch == '\r' ? CK_TR_LF : CK_ERROR;
	case CK_TR_LF:
		return ch == '\n' ? CK_TR_START : CK_ERROR;
	default:
		return CK_ERROR;
	}
}

uint32_t http_chunked_trailer_restart(struct http_chunked *c)
{
	uint32_t n = c->trailer_bytes;

	if (c->done || c->state < CK_TR_START || c->state > CK_END_LF)
		return 0;
	c->state = CK_TR_START;
	c->trailer_bytes = 0;
	return n;
}

int http_chunked_feed(struct http_chunked *c, const char *p, size_t len, size_t *used,
                      const char **data, size_t *data_len)
{
	size_t i = 0;

	*data = NULL;
	*data_len = 0;
	while (i < len && !c->done && c->state != CK_ERROR) {
		unsigned char ch;

		if (c->state == CK_DATA) {
			size_t n = len - i;

			if (n > c->remaining)
				n = (size_t)c->remaining;
			*data = p + i;
			*data_len = n;
			c->remaining -= n;
			i += n;
			if (c->remaining == 0)
				c->state = CK_DATA_CR;
			break; /* one data span per call */
		}
		ch = (unsigned char)p[i++];
		switch (c->state) {
		case CK_SIZE_LF:
			if (ch != '\n') {
				c->state = CK_ERROR;
			} else if (c->remaining == 0) {
				c->state = CK_TR_START; /* last-chunk */
			} else {
				c->state = CK_DATA;
			}
			break;
		case CK_DATA_CR:
			c->state = ch == '\r' ? CK_DATA_LF : CK_ERROR;
			break;
		case CK_DATA_LF:
			if (ch == '\n') {
				c->state = CK_SIZE_START;
				c->digits = 0;
				c->line_bytes = 0;
			} else {
				c->state = CK_ERROR;
			}
			break;
		case CK_TR_START:
		case CK_TR_NAME:
		case CK_TR_VALUE:
		case CK_TR_LF:
			c->state = trailer_byte(c, ch);
			break;
		case CK_END_LF:
			if (ch == '\n' && ++c->trailer_bytes <= CHUNK_TRAILER_MAX)
				c->done = 1;
			else
				c->state = CK_ERROR;
			break;
		default:
			c->state = size_line_byte(c, ch);
			break;
		}
	}
	*used = i;
	if (c->state == CK_ERROR) {
		*data = NULL;
		*data_len = 0;
		return WEIR_ERR(SMUGGLING);
	}
	return 0;
}
