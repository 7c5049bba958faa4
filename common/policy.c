/*
 * policy.c: address blocks (common/policy.h).
 */
#include "common/policy.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

const char *policy_cidr_parse(const char *text, struct policy_cidr *c)
{
	char host[64];
	const char *slash = strchr(text, '/');
	size_t hl = slash ? (size_t)(slash - text) : strlen(text);
	unsigned long bits;
	char *end;
	int max;

	memset(c, 0, sizeof(*c));
	if (hl == 0 || hl >= sizeof(host))
		return "must be an address or a block such as \"10.0.0.0/8\" or \"2001:db8::/32\"";
	memcpy(host, text, hl);
	host[hl] = '\0';
	if (inet_pton(AF_INET, host, c->addr) == 1) {
		max = 32;
	} else if (inet_pton(AF_INET6, host, c->addr) == 1) {
		c->v6 = 1;
		max = 128;
	} else {
		return "must be an address or a block such as \"10.0.0.0/8\" or \"2001:db8::/32\"";
	}
	bits = (unsigned long)max;
	if (slash) {
		if (!slash[1] || slash[1] < '0' || slash[1] > '9')
			return "has no prefix length after '/'";
		bits = strtoul(slash + 1, &end, 10);
		if (*end || bits > (unsigned long)max)
			return c->v6 ? "has a prefix length past 128" : "has a prefix length past 32";
	}
	c->bits = (uint8_t)bits;
	for (int i = 0; i < 16; i++) {
		int keep = (int)bits - 8 * i;
		uint8_t mask = keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));

		if (c->addr[i] & ~mask)
			return "has bits set past its prefix length (write the network address, such as "
			       "\"10.0.0.0/8\")";
		c->addr[i] &= mask;
	}
	return NULL;
}

int policy_cidr_match(const struct policy_cidr *list, int n, int v6, const uint8_t *addr)
{
	for (int k = 0; k < n; k++) {
		const struct policy_cidr *c = &list[k];
		int full = c->bits / 8, rest = c->bits % 8;

		if (c->v6 != v6)
			continue;
		if (memcmp(c->addr, addr, (size_t)full) != 0)
			continue;
		if (rest && ((addr[full] ^ c->addr[full]) & (uint8_t)(0xff << (8 - rest))))
			continue;
		return 1;
	}
	return 0;
}
