/*
 * config_policy.c: the configuration of real client addresses, access log
 * formats and direct responses (common/policy.h, common/vars.h): the checks
 * and stores the descriptors in common/config_keys.c name, and the parts
 * read by hand (trusted_proxies, routes.return).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_load.h"

#define fail config_fail
#define line_of config_line_of

const char *config_check_log_format(const char *text)
{
	static struct vars_tpl t; /* 4 KiB: not on the stack */
	const char *why;

	if (!strcmp(text, "weir") || !strcmp(text, "combined") || !strcmp(text, "json"))
		return NULL;
	if ((why = vars_compile(&t, text)) != NULL)
		return why;
	for (uint16_t i = 0; i < t.n; i++)
		if (t.p[i].id != VARS_LITERAL)
			return NULL;
	return "must be \"weir\", \"combined\", \"json\" or a format with variables such as \"$client_ip $status\"";
}

/* A Content-Type is one header value: visible ASCII and spaces only. */
const char *config_check_content_type(const char *text)
{
	if (!*text)
		return "must not be empty";
	for (const char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return "must be visible ASCII: a header value cannot hold control bytes";
	return NULL;
}

const char *config_store_log_sample(const char *text, void *route)
{
	struct config_route *r = route;
	uint32_t v;

	if (config_parse_decimal(text, 10000, &v) < 0 || v > 10000)
		return "must be a share from \"0\" to \"1\", at most 4 decimals, such as \"0.1\"";
	r->log_sample = v;
	return NULL;
}

const char *config_show_log_sample(const struct config *cfg, const void *route, char *buf, size_t cap)
{
	const struct config_route *r = route;

	(void)cfg;
	if (r->log_sample == 10000)
		snprintf(buf, cap, "1");
	else
		snprintf(buf, cap, "0.%04u", r->log_sample);
	return buf;
}

/* A header value made of <t>'s literals: no CR, LF or NUL may reach the
 * head (a NUL cannot be in a libconfig string; CR and LF can). */
const char *config_header_tpl(struct vars_tpl *t, const char *text)
{
	const char *why = vars_compile(t, text);

	if (why)
		return why;
	if (strpbrk(text, "\r\n"))
		return "must not hold CR or LF: it is a header value";
	for (const char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return "must not hold control bytes: it is a header value";
	return NULL;
}

const char *config_store_return_location(const char *text, void *ret)
{
	struct policy_return *r = ret;
	const char *why = config_header_tpl(&r->location, text);

	if (!why)
		r->has_location = text[0] != '\0';
	return why;
}

const char *config_store_return_body(const char *text, void *ret)
{
	return vars_compile(&((struct policy_return *)ret)->body, text);
}

static const char *show_tpl(const struct vars_tpl *t)
{
	static char src[2 * VARS_TEXT];

	vars_source(t, src, sizeof(src));
	return src;
}

const char *config_show_return_location(const struct config *cfg, const void *ret, char *buf, size_t cap)
{
	(void)cfg;
	(void)buf;
	(void)cap;
	return ((const struct policy_return *)ret)->has_location ? show_tpl(&((const struct policy_return *)ret)->location)
	                                                         : NULL;
}

const char *config_show_return_body(const struct config *cfg, const void *ret, char *buf, size_t cap)
{
	(void)cfg;
	(void)buf;
	(void)cap;
	return ((const struct policy_return *)ret)->body.n ? show_tpl(&((const struct policy_return *)ret)->body)
	                                                   : NULL;
}

void config_policy_load_top(struct loader *ld, const config_setting_t *root)
{
	struct config *cfg = ld->cfg;
	config_setting_t *s = config_setting_get_member(root, "trusted_proxies");
	int n;

	if (!s)
		return;
	if (!config_setting_is_aggregate(s)) {
		fail(ld, line_of(s), "trusted_proxies must be a list of strings: trusted_proxies = [ \"10.0.0.0/8\" ];");
		return;
	}
	n = config_setting_length(s);
	if (n > POLICY_TRUSTED_MAX) {
		fail(ld, line_of(s), "trusted_proxies has %d entries, at most %d are allowed", n, POLICY_TRUSTED_MAX);
		return;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		const char *v = config_setting_get_string(e);
		const char *why;

		if (!v) {
			fail(ld, line_of(e), "trusted_proxies entries must be strings such as \"10.0.0.0/8\"");
			continue;
		}
		why = policy_cidr_parse(v, &cfg->trusted[cfg->ntrusted]);
		if (why) {
			fail(ld, line_of(e), "trusted_proxies \"%.64s\" %s", v, why);
			continue;
		}
		cfg->ntrusted++;
	}
}

int config_policy_load_route(struct loader *ld, const config_setting_t *e, struct config_route *r, int has_upstream)
{
	struct config *cfg = ld->cfg;
	const struct config_keyset *ks = &config_keys_route_return;
	config_setting_t *g = config_get_group(ld, e, "return", "routes.return");
	enum got got[CONFIG_KEYS_MAX];
	struct policy_return *pr, *grown;

	r->ret = -1;
	if (!g) {
		if (!has_upstream && !config_setting_get_member(e, "return"))
			fail(ld, r->line, "routes.upstream is required unless the route has a return");
		return config_setting_get_member(e, "return") ? 0 : 1;
	}
	if (has_upstream) {
		fail(ld, line_of(g), "routes.return and routes.upstream exclude each other: a route is answered by "
		                     "weir or proxied");
		return 0;
	}
	if (cfg->nreturns >= POLICY_RETURNS_MAX) {
		fail(ld, line_of(g), "at most %d routes may have a return", POLICY_RETURNS_MAX);
		return 0;
	}
	grown = realloc(cfg->returns, (size_t)(cfg->nreturns + 1) * sizeof(*cfg->returns));
	if (!grown)
		return -1;
	cfg->returns = grown;
	pr = &cfg->returns[cfg->nreturns];
	memset(pr, 0, sizeof(*pr));
	config_engine_read(ld, g, ks, pr, got);
	if (config_engine_got(ks, got, "status") != GOT_OK || config_engine_got(ks, got, "location") == GOT_BAD ||
	    config_engine_got(ks, got, "body") == GOT_BAD || config_engine_got(ks, got, "content_type") == GOT_BAD)
		return 0;
	if (policy_is_redirect(pr->status) && !pr->has_location) {
		fail(ld, line_of(g), "routes.return status %u is a redirect: it needs a location", pr->status);
		return 0;
	}
	if (!policy_is_redirect(pr->status) && pr->has_location) {
		fail(ld, line_of(config_setting_get_member(g, "location")),
		     "routes.return.location needs a redirect status (301, 302, 303, 307 or 308)");
		return 0;
	}
	if ((pr->status == 204 || pr->status == 304) && pr->body.n) {
		fail(ld, line_of(config_setting_get_member(g, "body")), "routes.return status %u has no body",
		     pr->status);
		return 0;
	}
	r->ret = cfg->nreturns++;
	return 1;
}
