/*
 * auth_b64.h: strict base64 for credentials.
 *
 * Principle: a credential is compared as bytes, so there must be exactly
 * one text for each: padding is required in the standard alphabet (Basic)
 * and refused in the URL-safe one (JWT, JWKS, RFC 7515 2), characters of
 * the other alphabet and whitespace are refused, and so are unused bits
 * that are not zero (otherwise "QQ" and "QR" would both decode to "A",
 * and a token altered in its last character would still verify).
 */
#ifndef WEIR_COMMON_AUTH_B64_H
#define WEIR_COMMON_AUTH_B64_H

#include <stddef.h>
#include <stdint.h>

/* Decodes <in>[0..len) into <out> (room for <cap> bytes), URL-safe without
 * padding when <url>, else standard with padding. Returns the number of
 * bytes, or -1 when the text is not canonical base64 or does not fit. */
long auth_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap, int url);

#endif
