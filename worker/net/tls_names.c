/*
 * tls_names.c: SNI name matching (tls_names.h). A linear scan: listeners
 * carry a handful of certificates, and it runs once per full handshake.
 */
#include "worker/net/net.h"

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* <a> (pattern, lower case) against <b> (any case), <n> bytes each. */
static int same(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != lower((unsigned char)b[i]))
			return 0;
	return 1;
}

int tls_name_match(const char *pattern, size_t plen, const char *host, size_t hlen)
{
	if (hlen > 0 && host[hlen - 1] == '.')
		hlen--;
	if (hlen == 0 || plen == 0)
		return 0;
	if (pattern[0] != '*')
		return plen == hlen && same(pattern, host, hlen) ? 2 : 0;
	/* "*.rest": one non-empty label, then ".rest" */
	if (plen < 3 || pattern[1] != '.' || hlen <= plen - 1)
		return 0;
	{
		size_t label = hlen - (plen - 1);
		for (size_t i = 0; i < label; i++)
			if (host[i] == '.')
				return 0;
		return same(pattern + 1, host + label, plen - 1) ? 1 : 0;
	}
}
