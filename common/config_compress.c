/*
 * config_compress.c: compress = { ... } at the top level and on routes
 * (common/compress_conf.h): the descriptors of its keys, its types list
 * read by hand, and a route's block resolved over the top level's.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_dump.h"
#include "common/config_load.h"

#define fail config_fail
#define line_of config_line_of

/* the field <m> of struct config_compress */
#define A(m) .offset = offsetof(struct config_compress, m), .size = sizeof(((struct config_compress *)0)->m)

#define COMPRESS_DEFAULT_TYPES                                                                                  \
	"text/html text/plain text/css text/javascript text/xml application/javascript application/json "      \
	"application/xml image/svg+xml"

#define COMPRESS_KEYS                                                                                           \
	{.name = "types", .type = CONFIG_KEY_STRINGS,                                                           \
	 .def = "`[ \"text/html\", \"text/plain\", \"text/css\", \"text/javascript\", \"text/xml\", "           \
	        "\"application/javascript\", \"application/json\", \"application/xml\", \"image/svg+xml\" ]`",  \
	 .doc = "media types compressed: `\"type/subtype\"`, `\"type/*\"` or `\"*\"`; `[ ]`: none (off)"},     \
	    {.name = "min_length", .type = CONFIG_KEY_SIZE, A(min_length), .min = 0, .max = UINT32_MAX,         \
	     .def = "1024", .doc = "a response whose Content-Length is under it goes as it is"},               \
	    {.name = "gzip_level", .type = CONFIG_KEY_INT, A(gzip_level), .min = 1, .max = 9, .def = "5",      \
	     .doc = "zlib's level for `gzip`"},                                                                 \
	    {.name = "brotli_level", .type = CONFIG_KEY_INT, A(brotli_level), .min = 0, .max = 11, .def = "4", \
	     .doc = "brotli's quality for `br`; 10 and 11 are far too slow for answers on the fly"}

static const struct config_key top_keys[] = {
    COMPRESS_KEYS,
    {.name = "max_streams", .type = CONFIG_KEY_INT, A(max_streams), .min = 1, .max = 65536, .def = "64",
     .doc = "responses a worker compresses at once; past it they go uncompressed (`busy`)"},
    {.name = "memory", .type = CONFIG_KEY_SIZE, A(memory), .min = 1048576, .max = 1ull << 34, .def = "64m",
     .doc = "encoder state a worker holds at most, over its streams; past it `no_memory`"},
};
static const struct config_key route_keys[] = {COMPRESS_KEYS};

const struct config_keyset config_keys_compress = {
    .path = "compress", .where = "in compress", .keys = top_keys, .nkeys = (int)(sizeof top_keys / sizeof top_keys[0])};
const struct config_keyset config_keys_route_compress = {.path = "routes.compress",
                                                         .where = "in routes.compress",
                                                         .keys = route_keys,
                                                         .nkeys = (int)(sizeof route_keys / sizeof route_keys[0])};

/* A media type as a Content-Type names it: token "/" token, a type and "/" and a star,
 * or "*" (RFC 9110 8.3.1). */
static int type_valid(const char *v)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";
	int slash = 0;
	size_t n = 0;

	if (!strcmp(v, "*"))
		return 1;
	for (const char *p = v; *p; p++, n++) {
		if (*p == '/') {
			if (slash++ || n == 0 || !p[1])
				return 0;
		} else if (!isalnum((unsigned char)*p) && !strchr(tchar, *p)) {
			return 0;
		}
	}
	return slash == 1;
}

/* types = [ ... ] of group <g> into c->types. Returns 1, or 0 (reported). */
static int read_types(struct loader *ld, const config_setting_t *g, const char *what, struct config_compress *c)
{
	config_setting_t *s = config_setting_get_member(g, "types");
	size_t len = 0;
	int n;

	if (!config_setting_is_aggregate(s)) {
		fail(ld, line_of(s), "%s.types must be a list of strings: types = [ \"text/html\" ];", what);
		return 0;
	}
	n = config_setting_length(s);
	for (int i = 0; i < n; i++) {
		const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));
		size_t vl;

		if (!v || !type_valid(v)) {
			fail(ld, line_of(s), "%s.types entries must be media types such as \"text/html\" or \"text/*\"",
			     what);
			return 0;
		}
		vl = strlen(v);
		if (len + vl + (len > 0) >= sizeof(c->types)) {
			fail(ld, line_of(s), "%s.types is too long (at most %zu bytes together)", what,
			     sizeof(c->types) - 1);
			return 0;
		}
		if (len)
			c->types[len++] = ' ';
		for (size_t k = 0; k < vl; k++)
			c->types[len++] = (char)tolower((unsigned char)v[k]);
	}
	c->types[len] = '\0';
	return 1;
}

void config_compress_load_top(struct loader *ld, const config_setting_t *root)
{
	struct config_compress *c = &ld->cfg->compress;
	config_setting_t *g = config_get_group(ld, root, "compress", "compress");

	/* the defaults are applied without a block too: a route's block
	 * starts from them, and the pool's limits are read from here */
	config_engine_read(ld, g, &config_keys_compress, c, NULL);
	strcpy(c->types, COMPRESS_DEFAULT_TYPES);
	if (!g)
		return;
	c->line = line_of(g);
	if (config_setting_get_member(g, "types") && !read_types(ld, g, "compress", c))
		return;
	c->on = c->types[0] != '\0';
}

int config_compress_read_route(struct loader *ld, const config_setting_t *e, struct config_route *r)
{
	const struct config_keyset *ks = &config_keys_route_compress;
	const struct config_compress *top = &ld->cfg->compress;
	config_setting_t *g = config_get_group(ld, e, "compress", "routes.compress");
	enum got got[CONFIG_KEYS_MAX];
	struct config_compress *c;

	if (!g)
		return 1;
	if (!(c = malloc(sizeof *c)))
		return -1;
	/* the keys it gives over the top level's (which are the defaults
	 * when there is no top-level block) */
	*c = *top;
	config_engine_read(ld, g, ks, c, got);
	if (config_engine_got(ks, got, "min_length") == GOT_NONE)
		c->min_length = top->min_length;
	if (config_engine_got(ks, got, "gzip_level") == GOT_NONE)
		c->gzip_level = top->gzip_level;
	if (config_engine_got(ks, got, "brotli_level") == GOT_NONE)
		c->brotli_level = top->brotli_level;
	r->compress = c;
	c->own = 1;
	c->line = line_of(g);
	if (config_setting_get_member(g, "types") && !read_types(ld, g, "routes.compress", c))
		return 0;
	c->on = c->types[0] != '\0';
	return 1;
}

void config_compress_dump(FILE *out, const struct config *cfg, const struct config_compress *c, int top)
{
	fputs(top ? "compress = {\n\t" : "compress = { ", out);
	fputs("types = [", out);
	for (const char *p = c->types; *p;) {
		size_t n = strcspn(p, " ");

		/* media types: nothing in them needs escaping */
		fprintf(out, "%s\"%.*s\"", p == c->types ? " " : ", ", (int)n, p);
		p += n + (p[n] == ' ');
	}
	fprintf(out, "%s];%s", c->types[0] ? " " : "", top ? "\n" : " ");
	config_dump_keys(out, cfg, top ? &config_keys_compress : &config_keys_route_compress, c, top ? "\t" : NULL);
	fputs(top ? "};\n" : "}; ", out);
}
