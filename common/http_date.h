/*
 * http_date.h: a Retry-After value (RFC 9110, 10.2.3), seconds or an
 * HTTP-date, read without locale, allocation or system call, for the
 * retries (worker/core/retry.c) and their unit test.
 */
#ifndef WEIR_COMMON_HTTP_DATE_H
#define WEIR_COMMON_HTTP_DATE_H

#include <stddef.h>
#include <stdint.h>

/* Seconds since the epoch of HTTP-date <p> (<n> bytes): IMF-fixdate
 * ("Sun, 06 Nov 1994 08:49:37 GMT"), or the obsolete RFC 850
 * ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime ("Sun Nov  6 08:49:37
 * 1994") forms a recipient must accept. -1 if it is none of them. */
int64_t http_date_parse(const char *p, size_t n);

/* The wait Retry-After value <p> (<n> bytes, spaces around allowed) asks
 * for, in seconds from <now> (epoch seconds): delta-seconds as given
 * (capped at 2^31), an HTTP-date's distance from now (0 when past). -1 if
 * the value is neither. */
int64_t http_retry_after(const char *p, size_t n, int64_t now);

#endif
