/*
 * config_match.c: a route's matching conditions and path rewrite
 * (common/config_match.h): the keys read by hand from a routes entry,
 * each regular expression compiled once here to refuse one that does not
 * compile (FILE:LINE and PCRE2's message), and the route's label.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "common/config_match.h"

#include <http_parser.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_dump.h"
#include "common/config_load.h"

#define fail config_fail
#define line_of config_line_of

int config_match_nconds(const struct config_match *m)
{
	if (!m)
		return 0;
	return (m->path_regex[0] != 0) + (m->methods != 0) + m->ncond;
}

/* ---- checks -------------------------------------------------------------- */

/*
 * Compiles <pat> as a worker will (worker/core/match.c: the same options),
 * reporting a failure at <line> under <what>; *<ncap> gets its capture
 * count and <code> (NULL: freed) the code. Returns 1 if good, 0 if not.
 */
static int regex_check(struct loader *ld, int line, const char *what, const char *pat, uint32_t *ncap,
                       pcre2_code **code)
{
	int err;
	PCRE2_SIZE off;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);

	if (!re) {
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(err, msg, sizeof msg);
		fail(ld, line, "%s \"%s\" does not compile: %s at offset %zu", what, pat, (const char *)msg,
		     (size_t)off);
		return 0;
	}
	if (ncap)
		pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, ncap);
	if (code)
		*code = re;
	else
		pcre2_code_free(re);
	return 1;
}

/* Bytes a header value or a matched text may hold: no control bytes. */
static int text_clean(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			return 0;
	return 1;
}

static int is_tchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * rewrite.replace: the references PCRE2 substitutes ($n, ${n}, $name,
 * ${name}, $$) each naming a group of <re>, and nothing a request target
 * path cannot hold. NULL or why not.
 */
static const char *replace_check(const char *rep, const pcre2_code *re, uint32_t ncap)
{
	if (rep[0] != '/' && rep[0] != '$')
		return "must start with '/' (or a group that holds one): the result is the path forwarded";
	for (const char *p = rep; *p; p++) {
		unsigned char c = (unsigned char)*p;
		char name[64];
		size_t n = 0;
		int brace;

		if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#' || c == '\\')
			return "must hold only bytes a path holds: no space, control byte, '?', '#' or '\\'";
		if (c != '$')
			continue;
		if (p[1] == '$') {
			p++;
			continue;
		}
		brace = p[1] == '{';
		p += 1 + brace;
		while (n < sizeof name - 1 && (*p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
		                               (*p >= 'A' && *p <= 'Z')))
			name[n++] = *p++;
		name[n] = '\0';
		if (!n || (brace && *p != '}'))
			return "has a '$' not followed by a group: write $1, ${1}, ${name}, or $$ for a '$'";
		if (name[0] >= '0' && name[0] <= '9') {
			if (strspn(name, "0123456789") != n || strtoul(name, NULL, 10) > ncap)
				return "names a group number the regex does not have";
		} else if (pcre2_substring_number_from_name(re, (PCRE2_SPTR)name) < 0) {
			return "names a group the regex does not have";
		}
		if (!brace)
			p--;
	}
	return NULL;
}

/* ---- reading --------------------------------------------------------------- */

static int method_id(const char *s)
{
#define XX(num, name, string)                                                                                         \
	if (strcmp(s, #string) == 0)                                                                                   \
		return num;
	HTTP_METHOD_MAP(XX)
#undef XX
	return -1;
}

static int read_methods(struct loader *ld, const config_setting_t *e, struct config_match *m)
{
	const config_setting_t *s = config_setting_get_member(e, "methods");
	int n;

	if (!s)
		return 1;
	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		fail(ld, line_of(s), "routes.methods must be a list of strings: methods = [ \"GET\", \"HEAD\" ];");
		return 0;
	}
	n = config_setting_length(s);
	if (n == 0) {
		fail(ld, line_of(s), "routes.methods must name at least one method (leave it out for any)");
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));
		int id = v ? method_id(v) : -1;

		if (id < 0) {
			fail(ld, line_of(s), "routes.methods entry \"%s\" is not a method weir parses (upper case: \"GET\")",
			     v ? v : "");
			return 0;
		}
		m->methods |= (uint64_t)1 << id;
	}
	return 1;
}

static int read_cond(struct loader *ld, const config_setting_t *g, int where, struct config_match *m)
{
	const struct config_keyset *ks = where == MATCH_HEADER ? &config_keys_route_match_header
	                                                       : &config_keys_route_match_query;
	const char *what = where == MATCH_HEADER ? "routes.match_headers" : "routes.match_query";
	static const char *const ops[] = {"exact", "prefix", "regex", "present"};
	struct config_match_cond *c = &m->cond[m->ncond];
	enum got got[CONFIG_KEYS_MAX];
	struct config_match_entry me;
	int given = 0, good = 1;

	memset(&me, 0, sizeof me);
	memset(c, 0, sizeof *c);
	config_engine_read(ld, g, ks, &me, got);
	if (config_engine_got(ks, got, "name") != GOT_OK)
		return 0;
	for (int k = 0; k < 4; k++) {
		enum got r = config_engine_got(ks, got, ops[k]);

		if (r == GOT_BAD)
			return 0;
		if (r == GOT_OK) {
			given++;
			c->op = (uint8_t)k;
		}
	}
	if (given != 1) {
		fail(ld, line_of(g), "%s entry \"%s\" needs exactly one of exact, prefix, regex or present", what,
		     me.name);
		return 0;
	}
	c->where = (uint8_t)where;
	for (size_t i = 0; me.name[i]; i++) {
		char ch = me.name[i];

		if (where == MATCH_HEADER ? !is_tchar(ch) : (unsigned char)ch <= 0x20 || ch == '&' || ch == '=' ||
		                                                 ch == '#' || (unsigned char)ch >= 0x7f) {
			fail(ld, line_of(config_setting_get_member(g, "name")),
			     where == MATCH_HEADER ? "%s name \"%s\" is not a header name (a token)"
			                           : "%s name \"%s\" may not hold spaces, control bytes, '&', '=' or '#'",
			     what, me.name);
			return 0;
		}
		c->name[i] = where == MATCH_HEADER && ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
	}
	if (c->op == MATCH_PRESENT) {
		c->op = me.present ? MATCH_PRESENT : MATCH_ABSENT;
	} else {
		const config_setting_t *v = config_setting_get_member(g, ops[c->op]);
		const char *text = config_setting_get_string(v);

		snprintf(c->value, sizeof c->value, "%s", text ? text : "");
		if (!text_clean(c->value)) {
			fail(ld, line_of(v), "%s entry \"%s\": %s may not hold control bytes", what, me.name, ops[c->op]);
			good = 0;
		} else if (c->op == MATCH_REGEX) {
			char w[160];

			snprintf(w, sizeof w, "%s entry \"%s\": regex", what, me.name);
			good = regex_check(ld, line_of(v), w, c->value, NULL, NULL);
		}
	}
	m->ncond++;
	return good;
}

static int read_conds(struct loader *ld, const config_setting_t *e, const char *key, int where,
                      struct config_match *m)
{
	char what[64];
	const config_setting_t *list;
	int good = 1;

	snprintf(what, sizeof what, "routes.%s", key);
	if (!config_setting_get_member(e, key))
		return 1;
	if (!(list = config_get_list(ld, e, key, what, 0, MATCH_COND_MAX)))
		return 0;
	for (int i = 0; i < config_setting_length(list); i++) {
		const config_setting_t *g = config_get_entry(ld, list, i, what);

		good &= g ? read_cond(ld, g, where, m) : 0;
	}
	return good;
}

static int read_rewrite(struct loader *ld, const config_setting_t *e, struct config_match *m)
{
	const struct config_keyset *ks = &config_keys_route_rewrite;
	config_setting_t *g = config_get_group(ld, e, "rewrite", "routes.rewrite");
	enum got got[CONFIG_KEYS_MAX];
	const char *re_text, *rep, *why;
	pcre2_code *re = NULL;
	uint32_t ncap = 0;
	int good;

	if (!g)
		return !config_setting_get_member(e, "rewrite");
	config_engine_read(ld, g, ks, m, got);
	if (config_engine_got(ks, got, "regex") != GOT_OK || config_engine_got(ks, got, "replace") != GOT_OK)
		return 0;
	config_setting_lookup_string(g, "regex", &re_text);
	config_setting_lookup_string(g, "replace", &rep);
	snprintf(m->rw_regex, sizeof m->rw_regex, "%s", re_text);
	snprintf(m->rw_replace, sizeof m->rw_replace, "%s", rep);
	if (!regex_check(ld, line_of(config_setting_get_member(g, "regex")), "routes.rewrite.regex", m->rw_regex,
	                 &ncap, &re))
		return 0;
	why = replace_check(m->rw_replace, re, ncap);
	good = why == NULL;
	if (why)
		fail(ld, line_of(config_setting_get_member(g, "replace")), "routes.rewrite.replace \"%s\" %s",
		     m->rw_replace, why);
	pcre2_code_free(re);
	return good;
}

static int read_strip(struct loader *ld, const config_setting_t *e, const struct config_route *r,
                      struct config_match *m)
{
	const config_setting_t *s = config_setting_get_member(e, "strip_prefix");
	const char *v;

	if (!s)
		return 1;
	if (config_setting_type(s) == CONFIG_TYPE_BOOL) {
		m->strip = config_setting_get_bool(s) ? 1 : 0;
		return 1;
	}
	v = config_setting_get_string(s); /* the engine checked it is one */
	if (!v || strcmp(v, "false") == 0)
		return 1;
	if (strcmp(v, "true") == 0) {
		m->strip = 1;
		return 1;
	}
	if (v[0] != '/' || !text_clean(v) || strpbrk(v, " ?#")) {
		fail(ld, line_of(s), "routes.strip_prefix \"%s\" must be true or a path prefix starting with '/'", v);
		return 0;
	}
	if (strncmp(r->path, v, strlen(v)) != 0) {
		fail(ld, line_of(s),
		     "routes.strip_prefix \"%s\" is not a prefix of the route's path \"%s\": it would strip nothing", v,
		     r->path);
		return 0;
	}
	m->strip = 2;
	snprintf(m->strip_text, sizeof m->strip_text, "%s", v);
	return 1;
}

/* ---- the label ------------------------------------------------------------- */

static void label_put(char *buf, size_t cap, size_t *n, const char *fmt, const char *a, const char *b)
{
	int k = snprintf(buf + *n, *n < cap ? cap - *n : 0, fmt, a, b);

	if (k > 0)
		*n += (size_t)k;
}

/* The route's label (config_match.h). Too long a label keeps its start
 * and ends in a hash of the whole, so two routes still differ. */
static void make_label(const struct config_route *r, struct config_match *m)
{
	char buf[2048];
	static const char op_sym[] = {[MATCH_EXACT] = '=', [MATCH_PREFIX] = '^', [MATCH_REGEX] = '~'};
	size_t n = 0;

	label_put(buf, sizeof buf, &n, "%s%s", m->exact ? "=" : "", r->path);
	if (m->path_regex[0])
		label_put(buf, sizeof buf, &n, " ~%s%s", m->path_regex, "");
	if (m->methods) {
		int first = 1;

#define XX(num, name, string)                                                                                         \
	if (m->methods & (uint64_t)1 << num) {                                                                         \
		label_put(buf, sizeof buf, &n, "%s%s", first ? " " : ",", #string);                                  \
		first = 0;                                                                                             \
	}
		HTTP_METHOD_MAP(XX)
#undef XX
	}
	for (int i = 0; i < m->ncond; i++) {
		const struct config_match_cond *c = &m->cond[i];
		char head[CONFIG_NAME_MAX + 4];

		snprintf(head, sizeof head, " %s%s%s", c->where == MATCH_QUERY ? "?" : "", c->op == MATCH_ABSENT ? "!" : "",
		         c->name);
		if (c->op == MATCH_PRESENT || c->op == MATCH_ABSENT)
			label_put(buf, sizeof buf, &n, "%s%s", head, "");
		else {
			char sym[2] = {op_sym[c->op], 0};

			label_put(buf, sizeof buf, &n, "%s%s", head, sym);
			label_put(buf, sizeof buf, &n, "%s%s", c->value, "");
		}
	}
	if (n < sizeof m->label) {
		memcpy(m->label, buf, n + 1);
	} else {
		uint32_t h = 2166136261u;

		for (size_t i = 0; i < n && i < sizeof buf - 1; i++)
			h = (h ^ (uint8_t)buf[i]) * 16777619u;
		snprintf(m->label, sizeof m->label, "%.*s #%08x", (int)(sizeof m->label - 11), buf, h);
	}
}

/* ---- the entry point ------------------------------------------------------- */

static int has_any(const config_setting_t *e)
{
	static const char *const keys[] = {"path_exact", "path_regex",  "methods", "match_headers",
	                                   "match_query", "strip_prefix", "rewrite"};

	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (config_setting_get_member(e, keys[i]))
			return 1;
	return 0;
}

int config_match_read(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	const config_setting_t *s;
	struct config_match *m;
	const char *v;
	int good = 1;

	r->match = NULL;
	if (!has_any(e))
		return 1;
	if (!(m = calloc(1, sizeof *m)))
		return -1;
	r->match = m;
	if ((s = config_setting_get_member(e, "path_exact")) && (v = config_setting_get_string(s)) &&
	    !config_check_route_path(v)) {
		if (ld->cfg->merge_slashes && strstr(v, "//")) {
			fail(ld, line_of(s), "routes.path_exact \"%s\" never matches: with merge_slashes on, requests are "
			                     "routed with runs of '/' merged", v);
			good = 0;
		} else if (config_setting_get_member(e, "path")) {
			fail(ld, line_of(s), "routes.path_exact and routes.path exclude each other: path_exact is the "
			                     "whole path, path a prefix");
			good = 0;
		} else {
			snprintf(r->path, sizeof r->path, "%s", v);
			m->exact = 1;
		}
	}
	if ((s = config_setting_get_member(e, "path_regex")) && (v = config_setting_get_string(s))) {
		snprintf(m->path_regex, sizeof m->path_regex, "%s", v);
		if (m->exact) {
			fail(ld, line_of(s), "routes.path_regex and routes.path_exact exclude each other");
			good = 0;
		} else if (!text_clean(v)) {
			fail(ld, line_of(s), "routes.path_regex may not hold control bytes");
			good = 0;
		} else {
			good &= regex_check(ld, line_of(s), "routes.path_regex", v, NULL, NULL);
		}
	}
	good &= read_methods(ld, e, m);
	good &= read_conds(ld, e, "match_headers", MATCH_HEADER, m);
	good &= read_conds(ld, e, "match_query", MATCH_QUERY, m);
	good &= read_strip(ld, e, r, m);
	good &= read_rewrite(ld, e, m);
	make_label(r, m);
	return good;
}

/* ---- weir -T ------------------------------------------------------------ */

const char *config_show_path_exact(const struct config *cfg, const void *route, char *buf, size_t cap)
{
	const struct config_route *r = route;

	(void)cfg;
	(void)buf;
	(void)cap;
	return r->match && r->match->exact ? r->path : NULL;
}

const char *config_show_route_path(const struct config *cfg, const void *route, char *buf, size_t cap)
{
	const struct config_route *r = route;

	(void)cfg;
	(void)buf;
	(void)cap;
	return r->match && r->match->exact ? NULL : r->path;
}

const char *config_show_path_regex(const struct config *cfg, const void *route, char *buf, size_t cap)
{
	const struct config_route *r = route;

	(void)cfg;
	(void)buf;
	(void)cap;
	return r->match && r->match->path_regex[0] ? r->match->path_regex : NULL;
}

const char *config_show_strip_prefix(const struct config *cfg, const void *route, char *buf, size_t cap)
{
	const struct config_route *r = route;

	(void)cfg;
	(void)buf;
	(void)cap;
	if (!r->match || !r->match->strip)
		return NULL;
	return r->match->strip == 1 ? "true" : r->match->strip_text;
}

void config_match_dump(FILE *out, const struct config_match *m)
{
	static const char *const ops[] = {"exact", "prefix", "regex"};

	if (!m)
		return;
	if (m->methods) {
		int first = 1;

		fputs("methods = [", out);
#define XX(num, name, string)                                                                                         \
	if (m->methods & (uint64_t)1 << num) {                                                                         \
		fprintf(out, "%s\"%s\"", first ? " " : ", ", #string);                                               \
		first = 0;                                                                                             \
	}
		HTTP_METHOD_MAP(XX)
#undef XX
		fputs(" ]; ", out);
	}
	for (int w = MATCH_HEADER; w <= MATCH_QUERY; w++) {
		int first = 1;

		for (int i = 0; i < m->ncond; i++) {
			const struct config_match_cond *c = &m->cond[i];

			if (c->where != w)
				continue;
			fprintf(out, "%s{ name = ", first ? (w == MATCH_HEADER ? "match_headers = ( " : "match_query = ( ")
			                                  : ", ");
			config_dump_string(out, c->name);
			if (c->op == MATCH_PRESENT || c->op == MATCH_ABSENT) {
				fprintf(out, "; present = %s; }", c->op == MATCH_PRESENT ? "true" : "false");
			} else {
				fprintf(out, "; %s = ", ops[c->op]);
				config_dump_string(out, c->value);
				fputs("; }", out);
			}
			first = 0;
		}
		if (!first)
			fputs(" ); ", out);
	}
	if (m->rw_regex[0]) {
		fputs("rewrite = { regex = ", out);
		config_dump_string(out, m->rw_regex);
		fputs("; replace = ", out);
		config_dump_string(out, m->rw_replace);
		fputs("; }; ", out);
	}
}
