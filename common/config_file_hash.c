/*
 * config_file_hash.c: hash_key, hash_fallback and bounded_load of an
 * upstreams entry (common/config_hash.h; the keys are described in
 * common/config_keys.c) and the rules across them and `balance`. Named as
 * config_file.c is: config.h includes config_hash.h for its types, so the
 * loader part may include config_load.h without a cycle.
 */
#include <stdio.h>
#include <string.h>

#include "common/config_load.h"
#include "shm/balance.h"

static int hash_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

const char *config_store_hash_key(const char *text, void *upstream)
{
	struct config_hash *h = &((struct config_upstream *)upstream)->hash;
	const char *name = NULL;
	size_t len = strlen(text), nlen = 0;
	int kind;

	if (!strcmp(text, "client_ip"))
		kind = CONFIG_HASH_CLIENT_IP;
	else if (!strcmp(text, "path"))
		kind = CONFIG_HASH_PATH;
	else if (len > 7 && !strncmp(text, "header:", 7))
		kind = CONFIG_HASH_HEADER, name = text + 7, nlen = len - 7;
	else if (len > 7 && !strncmp(text, "cookie:", 7))
		kind = CONFIG_HASH_COOKIE, name = text + 7, nlen = len - 7;
	else if (len > 6 && !strncmp(text, "query:", 6))
		kind = CONFIG_HASH_QUERY, name = text + 6, nlen = len - 6;
	else
		return "must be \"client_ip\", \"path\", \"header:NAME\", \"cookie:NAME\" or \"query:NAME\"";
	if (nlen >= sizeof(h->name))
		return "has a name longer than 63 characters";
	/* the rate limits' rule (config_ratelimit.c): a name that could
	 * never match is a mistake the operator should hear of */
	for (size_t i = 0; i < nlen; i++)
		if (kind == CONFIG_HASH_HEADER ? !hash_tchar((unsigned char)name[i])
		                               : (name[i] <= ' ' || strchr(";=&?#%", name[i])))
			return "has a header, cookie or parameter name with a character it cannot hold";
	h->kind = kind;
	h->name_len = (uint8_t)nlen;
	memcpy(h->name, name ? name : "", nlen);
	h->name[nlen] = 0;
	return NULL;
}

/* in enum config_hash_fallback's order */
static const char *const hash_fallback_names[] = {"random", "rr", "client_ip"};

static int hash_balanced(const void *upstream)
{
	int b = ((const struct config_upstream *)upstream)->balance;

	return b == BALANCE_RING_HASH || b == BALANCE_MAGLEV;
}

const char *config_show_hash_key(const struct config *cfg, const void *upstream, char *buf, size_t cap)
{
	const struct config_hash *h = &((const struct config_upstream *)upstream)->hash;
	static const char *const prefix[] = {[CONFIG_HASH_HEADER] = "header:", [CONFIG_HASH_COOKIE] = "cookie:",
	                                     [CONFIG_HASH_QUERY] = "query:"};

	(void)cfg;
	if (!hash_balanced(upstream))
		return NULL;
	if (h->kind == CONFIG_HASH_CLIENT_IP)
		snprintf(buf, cap, "client_ip");
	else if (h->kind == CONFIG_HASH_PATH)
		snprintf(buf, cap, "path");
	else
		snprintf(buf, cap, "%s%s", prefix[h->kind], h->name);
	return buf;
}

const char *config_store_hash_fallback(const char *text, void *upstream)
{
	struct config_hash *h = &((struct config_upstream *)upstream)->hash;

	for (int i = 0; i < (int)(sizeof hash_fallback_names / sizeof hash_fallback_names[0]); i++)
		if (!strcmp(text, hash_fallback_names[i])) {
			h->fallback = i;
			return NULL;
		}
	return "must be \"random\", \"rr\" or \"client_ip\"";
}

const char *config_show_hash_fallback(const struct config *cfg, const void *upstream, char *buf, size_t cap)
{
	(void)cfg;
	if (!hash_balanced(upstream))
		return NULL;
	snprintf(buf, cap, "%s", hash_fallback_names[((const struct config_upstream *)upstream)->hash.fallback]);
	return buf;
}

/* A factor from 1 to 100, at most 2 decimals ("1.25", or 1.25 written as
 * a number, config_engine.c), exact in hundredths; "off" or 0 turns it
 * off. */
const char *config_store_bounded_load(const char *text, void *upstream)
{
	struct config_hash *h = &((struct config_upstream *)upstream)->hash;
	uint32_t v;

	if (!strcmp(text, "off") || !strcmp(text, "0")) {
		h->bounded_load = 0;
		return NULL;
	}
	if (config_parse_decimal(text, 100, &v) < 0 || v < 100 || v > 10000)
		return "must be a factor from 1 to 100 (such as 1.25, at most 2 decimals), or \"off\"";
	h->bounded_load = v;
	return NULL;
}

const char *config_show_bounded_load(const struct config *cfg, const void *upstream, char *buf, size_t cap)
{
	const struct config_hash *h = &((const struct config_upstream *)upstream)->hash;

	(void)cfg;
	if (!hash_balanced(upstream))
		return NULL;
	if (!h->bounded_load)
		snprintf(buf, cap, "off");
	else
		snprintf(buf, cap, "%u.%02u", h->bounded_load / 100, h->bounded_load % 100);
	return buf;
}

void config_hash_check(struct loader *ld, const config_setting_t *e, const struct config_upstream *u)
{
	const struct config_hash *h = &u->hash;
	const char *key = h->bounded_load                        ? "bounded_load"
	                  : h->kind != CONFIG_HASH_CLIENT_IP     ? "hash_key"
	                  : h->fallback != CONFIG_HASH_FALLBACK_RANDOM ? "hash_fallback"
	                                                         : NULL;

	/* a key the chosen algorithm never reads is a mistake, not a no-op;
	 * its default written out is neither */
	if (key && u->balance != BALANCE_RING_HASH && u->balance != BALANCE_MAGLEV)
		config_fail(ld, config_line_of(config_setting_get_member(e, key)),
		            "upstreams.%s needs balance = \"ring_hash\" or \"maglev\"", key);
}
