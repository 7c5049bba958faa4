/*
 * match_conf.h: what the key descriptors (common/config_keys.c) read of a
 * route's match_headers and match_query entries; the rest of matching is
 * common/config_match.h. Apart so that the descriptors need none of the
 * loader's matching code, which needs the loader.
 */
#ifndef WEIR_COMMON_MATCH_CONF_H
#define WEIR_COMMON_MATCH_CONF_H

#include "common/config.h"

#define MATCH_COND_MAX 8   /* match_headers entries, and match_query entries, each */
#define MATCH_TEXT_MAX 256 /* a value, a pattern or a replacement, with its NUL */

/* A match_headers or match_query entry as the descriptors read it; the
 * rest is read by hand (config_match.c). */
struct config_match_entry {
	char name[CONFIG_NAME_MAX];
	int present;
};

#endif
