/*
 * auth_b64.c: strict base64 decoding (auth_b64.h).
 */
#include "common/auth_b64.h"

/* 0..63, or -1 for a character outside the alphabet */
static int b64_value(int c, int url)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == (url ? '-' : '+'))
		return 62;
	if (c == (url ? '_' : '/'))
		return 63;
	return -1;
}

long auth_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap, int url)
{
	uint32_t acc = 0;
	size_t n = 0, bits = 0;

	if (!url) {
		/* standard: whole quanta, at most two '=' at the very end */
		if (len % 4)
			return -1;
		if (len && in[len - 1] == '=')
			len--;
		if (len && in[len - 1] == '=')
			len--;
	} else if (len % 4 == 1) {
		return -1; /* no length of bytes encodes to this */
	}
	for (size_t i = 0; i < len; i++) {
		int v = b64_value((unsigned char)in[i], url);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	/* the bits left over pad the last character: they must be zero */
	if (bits && (acc & ((1u << bits) - 1)))
		return -1;
	return (long)n;
}
