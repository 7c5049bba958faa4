/*
 * config_hdrrules.c: headers = { request = {...}; response = {...}; } of an
 * upstream group and of a route (common/hdrrules.h), read into the
 * configuration's pools and checked: names, literals, which variables a
 * direction can know.
 *
 *   headers = {
 *     request  = { remove = [ "X-Debug" ]; set = { X-Client = "$client_ip"; };
 *                  add = { X-Trace = "weir"; }; };
 *     response = { set = { Strict-Transport-Security = "max-age=31536000"; }; };
 *   };
 *
 * A route's run is its group's rules and then its own, per direction, each
 * level in the order remove, set, add: so a route's remove drops what its
 * group set, and a route's set overrides its group's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth_conf.h"
#include "common/config_dump.h"
#include "common/config_load.h"
#include "common/hdrrules.h"

#define fail config_fail
#define line_of config_line_of

static const struct config_key dir_keys[] = {
    {.name = "remove", .type = CONFIG_KEY_STRINGS, .def = "`[ ]`",
     .doc = "header names dropped, applied first"},
    {.name = "set", .type = CONFIG_KEY_GROUP, .def = "absent: none",
     .doc = "`{ Name = \"value\"; }`: replaces every header of the name with one; an empty result removes it"},
    {.name = "add", .type = CONFIG_KEY_GROUP, .def = "absent: none",
     .doc = "`{ Name = \"value\"; }`: one more header of the name, applied last; an empty result adds none"},
};
const struct config_keyset config_keys_headers_request = {
    .path = "headers.request", .where = "in headers.request", .keys = dir_keys,
    .nkeys = (int)(sizeof dir_keys / sizeof dir_keys[0])};
const struct config_keyset config_keys_headers_response = {
    .path = "headers.response", .where = "in headers.response", .keys = dir_keys,
    .nkeys = (int)(sizeof dir_keys / sizeof dir_keys[0])};

static const struct config_key headers_keys[] = {
    {.name = "request", .type = CONFIG_KEY_GROUP, .def = "absent: none", .sub = &config_keys_headers_request,
     .doc = "rules on the request, before it goes upstream"},
    {.name = "response", .type = CONFIG_KEY_GROUP, .def = "absent: none", .sub = &config_keys_headers_response,
     .doc = "rules on the response, before it goes to the client"},
};
const struct config_keyset config_keys_headers = {
    .path = "headers", .where = "in headers", .keys = headers_keys,
    .nkeys = (int)(sizeof headers_keys / sizeof headers_keys[0])};

void hdrrules_conf_free(struct hdrrules_conf *h)
{
	if (!h)
		return;
	free(h->rules);
	free(h->pieces);
	free(h->text);
	free(h);
}

/* Room for <n> more of an array of <size>-byte items; -1 without memory. */
static int grow(void **v, uint32_t *cap, uint32_t used, uint32_t n, size_t size)
{
	uint32_t c = *cap ? *cap : 16;
	void *p;

	if (used + n <= *cap)
		return 0;
	while (c < used + n)
		c *= 2;
	if (!(p = realloc(*v, (size_t)c * size)))
		return -1;
	*v = p;
	*cap = c;
	return 0;
}

/*
 * NULL, or why header name <v> cannot be a rule's: a token weir does not
 * own. Beside what a client_header may not be (config_check_header_name:
 * Host, framing, hop-by-hop, X-Forwarded-*, Via, Expect), the other
 * hop-by-hop names (Proxy-*, HTTP2-Settings) and X-Request-Id (request_id
 * writes it), in any spelling a backend reads as the same variable.
 */
static const char *rule_name_check(const char *v)
{
	static const char *const more[] = {"x-request-id", "http2-settings", NULL};
	char folded[CONFIG_NAME_MAX];
	size_t n = strlen(v);
	const char *why;

	if (n == 0 || n >= CONFIG_NAME_MAX)
		return "must be a header name of 1 to 63 letters, digits, '-' and '_'";
	if ((why = config_check_header_name(v)) != NULL)
		return why;
	for (size_t i = 0; i <= n; i++)
		folded[i] = v[i] == '_' ? '-' : (v[i] >= 'A' && v[i] <= 'Z') ? (char)(v[i] - 'A' + 'a') : v[i];
	if (!strncmp(folded, "proxy-", 6))
		return "is hop-by-hop (Proxy-*): weir never forwards it";
	for (const char *const *m = more; *m; m++)
		if (!strcmp(folded, *m))
			return "is weir's own (X-Request-Id is request_id's; HTTP2-Settings is hop-by-hop)";
	return NULL;
}

/* NULL, or why template <t> cannot be a value of direction <resp>: a
 * request rule runs before a server is picked and an answer exists; a
 * response rule runs when the request's token is gone. */
static const char *rule_vars_check(const struct vars_tpl *t, int resp)
{
	static const uint8_t not_req[] = {VARS_UPSTREAM_ADDR, VARS_STATUS, VARS_UPSTREAM_RESPONSE_TIME,
	                                  VARS_BYTES_SENT, VARS_BODY_BYTES_SENT};

	if (resp)
		return vars_uses(t, VARS_JWT_CLAIM) ? "uses $jwt_claim_...: claims are read in request rules only "
		                                      "(pass one with claims_to_headers and use $http_NAME)"
		                                    : NULL;
	for (size_t i = 0; i < sizeof not_req; i++)
		if (vars_uses(t, not_req[i]))
			return "uses a variable of the answer ($upstream_addr, $status, ...): a request rule runs before "
			       "a server is picked; use it in a response rule";
	return NULL;
}

/* Appends one rule to <h>; 0, -1 without memory. Reported errors return 0
 * with the rule left out. */
static int rule_add(struct loader *ld, struct hdrrules_conf *h, int op, int resp, const char *what,
                    const config_setting_t *s, const char *name, const char *value)
{
	static struct vars_tpl t; /* 4 KiB: not on the stack */
	const char *why;
	size_t nlen = strlen(name);
	struct hdrrule *r;

	if ((why = rule_name_check(name)) != NULL) {
		fail(ld, line_of(s), "%s \"%.64s\" %s", what, name, why);
		return 0;
	}
	memset(&t, 0, sizeof(t));
	if (value) {
		if ((why = config_header_tpl(&t, value)) != NULL || (why = rule_vars_check(&t, resp)) != NULL) {
			fail(ld, line_of(s), "%s.%s %s", what, name, why);
			return 0;
		}
	}
	if (grow((void **)&h->rules, &h->caprules, h->nrules, 1, sizeof(*h->rules)) < 0 ||
	    grow((void **)&h->pieces, &h->cappieces, h->npieces, t.n, sizeof(*h->pieces)) < 0 ||
	    grow((void **)&h->text, &h->captext, h->ntext, (uint32_t)(nlen + 1 + t.used + 1), 1) < 0)
		return -1;
	r = &h->rules[h->nrules++];
	memset(r, 0, sizeof(*r));
	r->op = (uint8_t)op;
	r->name_off = h->ntext;
	r->name_len = (uint16_t)nlen;
	memcpy(h->text + h->ntext, name, nlen + 1);
	h->ntext += (uint32_t)nlen + 1;
	/* the value's text right after the name: pieces are relative to it */
	memcpy(h->text + h->ntext, t.text, t.used);
	h->text[h->ntext + t.used] = '\0';
	h->ntext += (uint32_t)t.used + 1;
	r->value_len = t.used;
	r->first = h->npieces;
	r->n = t.n;
	r->literal = 1;
	for (uint16_t i = 0; i < t.n; i++) {
		h->pieces[h->npieces++] = t.p[i];
		if (t.p[i].id != VARS_LITERAL)
			r->literal = 0;
	}
	return 0;
}

/* One direction's group <g> (may be NULL) into <h>: remove, set, add.
 * Returns the rules added, or -1 without memory. */
static int dir_read(struct loader *ld, struct hdrrules_conf *h, const config_setting_t *g, int resp,
                    const char *what)
{
	const struct config_keyset *ks = resp ? &config_keys_headers_response : &config_keys_headers_request;
	static const struct {
		const char *key;
		int op;
	} order[] = {{"remove", HDRRULE_REMOVE}, {"set", HDRRULE_SET}, {"add", HDRRULE_ADD}};
	uint32_t before = h->nrules;
	char sub[96];

	if (!g)
		return 0;
	if (!config_setting_is_group(g)) {
		fail(ld, line_of(g), "%s must be a group: { set = { ... }; add = { ... }; remove = [ ... ]; }", what);
		return 0;
	}
	config_engine_read(ld, g, ks, NULL, NULL);
	for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
		const config_setting_t *s = config_setting_get_member(g, order[k].key);
		int n;

		if (!s)
			continue;
		snprintf(sub, sizeof sub, "%s.%s", what, order[k].key);
		n = config_setting_length(s);
		if (order[k].op == HDRRULE_REMOVE ? !config_setting_is_aggregate(s) || config_setting_is_group(s)
		                                  : !config_setting_is_group(s)) {
			fail(ld, line_of(s), order[k].op == HDRRULE_REMOVE
			                         ? "%s must be a list of header names: [ \"X-Debug\" ]"
			                         : "%s must be a group of names and values: { X-Client = \"$client_ip\"; }",
			     sub);
			continue;
		}
		for (int i = 0; i < n; i++) {
			const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
			const char *v = config_setting_get_string(e);
			int rc;

			if (h->nrules - before >= HDRRULES_SET_MAX) {
				fail(ld, line_of(e), "%s has more than %d rules", what, HDRRULES_SET_MAX);
				return (int)(h->nrules - before);
			}
			if (!v) {
				fail(ld, line_of(e), order[k].op == HDRRULE_REMOVE ? "%s entries must be strings"
				                                                  : "%s values must be strings",
				     sub);
				continue;
			}
			if (order[k].op == HDRRULE_REMOVE)
				rc = rule_add(ld, h, HDRRULE_REMOVE, resp, sub, e, v, NULL);
			else
				rc = rule_add(ld, h, order[k].op, resp, sub, e, config_setting_name(e), v);
			if (rc < 0)
				return -1;
		}
	}
	return (int)(h->nrules - before);
}

/* Copies the rules [first, first + n) of <h> to its end (a route's copy of
 * its group's). */
static int copy_rules(struct hdrrules_conf *h, uint32_t first, uint32_t n)
{
	if (grow((void **)&h->rules, &h->caprules, h->nrules, n, sizeof(*h->rules)) < 0)
		return -1;
	memmove(h->rules + h->nrules, h->rules + first, (size_t)n * sizeof(*h->rules));
	h->nrules += n;
	return 0;
}

int config_hdrrules_read(struct loader *ld, const config_setting_t *e, const char *what,
                         const struct hdrrules_ref *inherit, struct hdrrules_ref *out)
{
	config_setting_t *g = config_get_group(ld, e, "headers", what);
	struct hdrrules_conf *h = ld->cfg->hdr;
	char path[64];
	int nreq, nresp;

	memset(out, 0, sizeof(*out));
	if (!g && (!inherit || inherit->nreq + inherit->nresp == 0))
		return 0;
	if (!h) {
		if (!(h = ld->cfg->hdr = calloc(1, sizeof(*h))))
			return -1;
	}
	if (g)
		config_engine_read(ld, g, &config_keys_headers, NULL, NULL);
	/* the route's run: its group's request rules, its own, then the same
	 * for responses; the group's are copied (16 bytes each), their pieces
	 * and text shared */
	out->first = h->nrules;
	if (inherit && inherit->nreq && copy_rules(h, inherit->first, inherit->nreq) < 0)
		return -1;
	snprintf(path, sizeof path, "%s.request", what);
	if ((nreq = dir_read(ld, h, g ? config_setting_get_member(g, "request") : NULL, 0, path)) < 0)
		return -1;
	out->nreq = (uint16_t)((inherit ? inherit->nreq : 0) + nreq);
	if (inherit && inherit->nresp && copy_rules(h, inherit->first + inherit->nreq, inherit->nresp) < 0)
		return -1;
	snprintf(path, sizeof path, "%s.response", what);
	if ((nresp = dir_read(ld, h, g ? config_setting_get_member(g, "response") : NULL, 1, path)) < 0)
		return -1;
	out->nresp = (uint16_t)((inherit ? inherit->nresp : 0) + nresp);
	return 0;
}

/* Whether header names <a> and <b> read as the same variable to a CGI
 * backend (case aside, '-' and '_' alike), as head.c compares vouched
 * names. */
static int same_var(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		int x = *a == '_' ? '-' : (*a >= 'A' && *a <= 'Z') ? *a + 32 : *a;
		int y = *b == '_' ? '-' : (*b >= 'A' && *b <= 'Z') ? *b + 32 : *b;

		if (x != y)
			return 0;
	}
	return *a == *b;
}

/* The name weir vouches for that <name> reads as, or NULL. */
static const char *vouched(const struct config *cfg, const char *name)
{
	for (int i = 0; i < cfg->nlisteners; i++)
		if (cfg->listeners[i].client_header[0] && same_var(cfg->listeners[i].client_header, name))
			return cfg->listeners[i].client_header;
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_auth *a = cfg->routes[i].auth;

		if (!a)
			continue;
		if (a->consumer_header[0] && same_var(a->consumer_header, name))
			return a->consumer_header;
		for (int k = 0; k < a->nclaims; k++)
			if (same_var(a->claims[k].header, name))
				return a->claims[k].header;
	}
	return NULL;
}

void config_hdrrules_check(struct loader *ld)
{
	const struct config *cfg = ld->cfg;
	const struct hdrrules_conf *h = cfg->hdr;

	if (!h)
		return;
	for (int i = 0; i < cfg->nroutes; i++) {
		const struct config_route *r = &cfg->routes[i];

		for (uint32_t k = r->hdr.first; k < r->hdr.first + r->hdr.nreq; k++) {
			const char *name = hdrrule_name(h->text, &h->rules[k]), *v = vouched(cfg, name);

			/* head.c drops a client's header of such a name as forged:
			 * a rule's would be dropped the same way */
			if (v)
				fail(ld, r->line,
				     "routes entry: a request header rule (its own or its upstream's) names %s, which weir "
				     "vouches for (%s: a listener's client_header or an auth consumer or claim header)",
				     name, v);
		}
	}
}

/* weir -T: rules [from, to) of <h> that have op <op>, as libconfig. */
static void dump_op(FILE *out, const struct hdrrules_conf *h, uint32_t from, uint32_t to, int op)
{
	static struct vars_tpl t; /* 4 KiB: not on the stack */
	static char src[2 * VARS_TEXT];
	int any = 0;

	for (uint32_t k = from; k < to; k++) {
		const struct hdrrule *r = &h->rules[k];

		if (r->op != op)
			continue;
		if (!any)
			fputs(op == HDRRULE_REMOVE ? "remove = [ " : op == HDRRULE_SET ? "set = { " : "add = { ", out);
		if (op == HDRRULE_REMOVE) {
			fprintf(out, "%s", any ? ", " : "");
			config_dump_string(out, hdrrule_name(h->text, r));
		} else {
			memset(&t, 0, sizeof(t));
			t.n = r->n;
			t.used = r->value_len;
			memcpy(t.p, h->pieces + r->first, (size_t)r->n * sizeof(*t.p));
			memcpy(t.text, hdrrule_name(h->text, r) + r->name_len + 1, r->value_len);
			vars_source(&t, src, sizeof src);
			fprintf(out, "%s = ", hdrrule_name(h->text, r)); /* a token: as it is */
			config_dump_string(out, src);
			fputs("; ", out);
		}
		any = 1;
	}
	if (any)
		fputs(op == HDRRULE_REMOVE ? " ]; " : "}; ", out);
}

void config_hdrrules_dump(FILE *out, const struct config *cfg, const struct hdrrules_ref *own,
                          const struct hdrrules_ref *inherit)
{
	const struct hdrrules_conf *h = cfg->hdr;
	uint32_t ireq = inherit ? inherit->nreq : 0, iresp = inherit ? inherit->nresp : 0;
	uint32_t req0 = own->first + ireq, req1 = own->first + own->nreq;
	uint32_t resp0 = req1 + iresp, resp1 = req1 + own->nresp;

	if (!h || (req0 == req1 && resp0 == resp1))
		return;
	fputs("headers = { ", out);
	for (int d = 0; d < 2; d++) {
		uint32_t from = d ? resp0 : req0, to = d ? resp1 : req1;

		if (from == to)
			continue;
		fputs(d ? "response = { " : "request = { ", out);
		dump_op(out, h, from, to, HDRRULE_REMOVE);
		dump_op(out, h, from, to, HDRRULE_SET);
		dump_op(out, h, from, to, HDRRULE_ADD);
		fputs("}; ", out);
	}
	fputs("}; ", out);
}
