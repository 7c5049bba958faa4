/*
 * policy.h: what the configuration says about real client addresses and
 * direct responses, as plain, pointer-free data (it is copied into the
 * shared segment's route tables): trusted proxy networks and a route's
 * return = { ... }. Read by common/config_policy.c, used by worker/realip.c
 * and worker/respond.c.
 */
#ifndef WEIR_COMMON_POLICY_H
#define WEIR_COMMON_POLICY_H

#include <stdint.h>

#include "common/vars.h"

#define POLICY_TRUSTED_MAX 64 /* trusted_proxies entries */
#define POLICY_RETURNS_MAX 64 /* routes with a return, per configuration */
#define POLICY_DEPTH_MAX 16   /* real_ip_depth at most */

/* An address block: "10.0.0.0/8", "2001:db8::/32", or one address. */
struct policy_cidr {
	uint8_t v6;
	uint8_t bits;
	uint8_t addr[16]; /* network order, masked to bits */
};

/* Parses <text>; NULL or why not, worded to follow the key. */
const char *policy_cidr_parse(const char *text, struct policy_cidr *c);

/* Whether the address <addr> (4 or 16 bytes, <v6>) is in one of <n>
 * blocks of <list>. */
int policy_cidr_match(const struct policy_cidr *list, int n, int v6, const uint8_t *addr);

/* routes.return = { status; location; body; content_type; } */
struct policy_return {
	uint32_t status;
	uint8_t has_location;
	char content_type[128]; /* literal; "" with no body */
	struct vars_tpl location;
	struct vars_tpl body;
};

/* Is <status> one of the redirects a location goes with? */
static inline int policy_is_redirect(int status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

#endif
