/*
 * test_config_keys.c: the descriptors of common/config_keys.c are sound,
 * their defaults are what the loader applies, and the key tables of
 * docs/config.md are the ones they make.
 *
 * Run from the top of the tree (as `make unit` does): it reads
 * docs/config.md. With `--write FILE` it rewrites the tables of FILE
 * instead of testing (`make docs-keys`).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_dump.h"
#include "common/config_keys.h"
#include "common/config_load.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"

#define DOCS "docs/config.md"

/* Each table of docs/config.md: between "<!-- keys:NAME -->" and
 * "<!-- /keys -->". A NULL prefix: no rows for sub-groups. */
static const struct {
	const char *name;
	const struct config_keyset *ks;
	const char *prefix;
} sections[] = {
    {"top", &config_keys_top, NULL},           {"log", &config_keys_log, ""},
    {"stats", &config_keys_stats, ""},         {"listeners", &config_keys_listener, ""},
    {"upstreams", &config_keys_upstream, ""},  {"routes", &config_keys_route, ""},
    {"timeouts", &config_keys_timeouts, ""},   {"limits", &config_keys_limits, ""},
    {"rate_limits", &config_keys_rate_limit, ""}, {"redis", &config_keys_redis, ""},
    {"compress", &config_keys_compress, ""},
    {"http2", &config_keys_http2, ""},
};
#define NSECTIONS (sizeof sections / sizeof sections[0])

static const struct config_keyset *const all[] = {
    &config_keys_top,      &config_keys_log,          &config_keys_stats,      &config_keys_listener,
    &config_keys_listener_tls, &config_keys_cert,     &config_keys_upstream,   &config_keys_upstream_tls,
    &config_keys_server,   &config_keys_route,        &config_keys_timeouts,   &config_keys_limits,
    &config_keys_rate_limit, &config_keys_redis,      &config_keys_http2,
    &config_keys_upstream_timeouts, &config_keys_upstream_request_limits, &config_keys_route_timeouts,
    &config_keys_route_limits,
    &config_keys_upstream_outlier, &config_keys_upstream_limits, &config_keys_upstream_breaker,
    &config_keys_upstream_retry, &config_keys_upstream_adaptive_conc, &config_keys_compress,
    &config_keys_route_compress,
};

static char *section_table(size_t i)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fprintf(f, "<!-- keys:%s -->\n", sections[i].name);
	config_keys_doc_header(f);
	config_keys_doc_rows(f, sections[i].ks, sections[i].prefix);
	fputs("<!-- /keys -->\n", f);
	fclose(f);
	return buf;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *m;
	int c;

	if (!f)
		return NULL;
	m = open_memstream(&buf, &len);
	while ((c = getc(f)) != EOF)
		putc(c, m);
	fclose(m);
	fclose(f);
	return buf;
}

/* Where table <i> is in <doc>: [*start, *end), the end line included. */
static int section_find(const char *doc, size_t i, size_t *start, size_t *end)
{
	char mark[64];
	const char *s, *e;

	snprintf(mark, sizeof mark, "<!-- keys:%s -->\n", sections[i].name);
	s = strstr(doc, mark);
	if (!s || !(e = strstr(s, "<!-- /keys -->\n")))
		return -1;
	*start = (size_t)(s - doc);
	*end = (size_t)(e - doc) + strlen("<!-- /keys -->\n");
	return 0;
}

static void test_docs_tables_are_the_descriptors(void)
{
	char *doc = read_file(DOCS);
	int marks = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	for (const char *p = doc; (p = strstr(p, "<!-- keys:")) != NULL; p++)
		marks++;
	CU_ASSERT_EQUAL(marks, (int)NSECTIONS);
	for (size_t i = 0; i < NSECTIONS; i++) {
		char *want = section_table(i);
		size_t s, e;

		if (section_find(doc, i, &s, &e) < 0) {
			fprintf(stderr, "\n%s has no table \"<!-- keys:%s -->\" ... \"<!-- /keys -->\"\n", DOCS,
			        sections[i].name);
			CU_FAIL("a table is missing from " DOCS);
		} else if (e - s != strlen(want) || memcmp(doc + s, want, e - s) != 0) {
			fprintf(stderr, "\n%s: the %s table is not what common/config_keys.c says; run `make docs-keys`. "
			        "It should be:\n%s", DOCS, sections[i].name, want);
			CU_FAIL("a table of " DOCS " disagrees with the descriptors");
		}
		free(want);
	}
	free(doc);
}

static void test_descriptors_are_sound(void)
{
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		const struct config_keyset *ks = all[i];

		CU_ASSERT(ks->nkeys <= CONFIG_KEYS_MAX);
		for (int j = 0; j < ks->nkeys; j++) {
			const struct config_key *k = &ks->keys[j];

			CU_ASSERT_PTR_EQUAL(config_keys_find(ks, k->name), k); /* unique */
			CU_ASSERT(k->doc && k->doc[0] && !strchr(k->doc, '|'));
			switch (k->type) {
			case CONFIG_KEY_GROUP:
			case CONFIG_KEY_LIST:
				CU_ASSERT_PTR_NOT_NULL(k->sub);
				break;
			case CONFIG_KEY_STRINGS: /* read by hand, stored nowhere by the engine */
				CU_ASSERT(k->size == 0 && !k->sub);
				break;
			case CONFIG_KEY_STRING:
				/* what the engine copies fits the field (or its check,
				 * as upstreams.name's, bounds it tighter, for a message
				 * that says what a name is) */
				if (k->size && !k->store)
					CU_ASSERT(k->max > 0 && (k->max < k->size || k->check));
				CU_ASSERT(k->size || k->store || !k->def);
				break;
			case CONFIG_KEY_ENUM:
				CU_ASSERT_EQUAL(k->size, sizeof(int));
				CU_ASSERT(k->nnames > 0 && k->names);
				break;
			case CONFIG_KEY_INT:
				CU_ASSERT_EQUAL(k->size, sizeof(int));
				CU_ASSERT(k->min <= k->max && k->max <= INT_MAX);
				break;
			case CONFIG_KEY_SIZE:
				CU_ASSERT(k->size == 4 || k->size == 8);
				CU_ASSERT(k->min <= k->max && (k->size == 8 || k->max <= UINT32_MAX));
				break;
			case CONFIG_KEY_DURATION:
			case CONFIG_KEY_DURATION_OFF:
			case CONFIG_KEY_BOOL:
				CU_ASSERT_EQUAL(k->size, 4);
				break;
			case CONFIG_KEY_ADDR:
				CU_ASSERT_EQUAL(k->size, sizeof(struct config_addr));
				break;
			}
		}
	}
}

/* "k = default; " for every scalar key of <ks> that has a default. */
static void defaults_text(FILE *f, const struct config_keyset *ks)
{
	for (int i = 0; i < ks->nkeys; i++) {
		const struct config_key *k = &ks->keys[i];
		int bare = (k->type == CONFIG_KEY_INT && strcmp(k->def ? k->def : "", "auto") != 0) ||
		           k->type == CONFIG_KEY_BOOL;

		if (k->type == CONFIG_KEY_GROUP || k->type == CONFIG_KEY_LIST || k->type == CONFIG_KEY_STRINGS || !k->def)
			continue;
		if (k->flags & CONFIG_KEY_INHERIT)
			continue; /* another key's value: no literal */
		fprintf(f, bare ? "%s = %s; " : "%s = \"%s\"; ", k->name, k->def);
	}
}

static char *dump_of(const struct config *cfg)
{
	char *buf = NULL, *body;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	config_dump(f, cfg);
	fclose(f);
	body = strdup(strchr(buf, '\n')); /* past the line that names the file */
	free(buf);
	return body;
}

static void test_every_default_written_out_changes_nothing(void)
{
	static const char bare[] =
	    "stats = { listen = \"127.0.0.1:9901\"; };\n"
	    "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	    "upstreams = ( { name = \"a\"; servers = ( { address = \"127.0.0.1:9000\"; } ); } );\n"
	    "routes = ( { upstream = \"a\"; } );\n";
	/* the same, with every default written out */
	static const struct {
		const char *before;
		const struct config_keyset *ks;
	} parts[] = {
	    {"", &config_keys_top},
	    {"\nlog = { ", &config_keys_log},
	    {"};\nstats = { listen = \"127.0.0.1:9901\"; ", &config_keys_stats},
	    {"};\nlisteners = ( { address = \"127.0.0.1:8080\"; ", &config_keys_listener},
	    {"} );\nupstreams = ( { name = \"a\"; ", &config_keys_upstream},
	    {"servers = ( { address = \"127.0.0.1:9000\"; ", &config_keys_server},
	    {"} ); } );\nroutes = ( { upstream = \"a\"; ", &config_keys_route},
	    {"} );\ntimeouts = { ", &config_keys_timeouts},
	    {"};\nlimits = { ", &config_keys_limits},
	};
	struct config *a, *b;
	char *text = NULL, *da, *db;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		fputs(parts[i].before, f);
		defaults_text(f, parts[i].ks);
	}
	fputs("};\n", f);
	fclose(f);

	a = unit_config_load(bare);
	b = unit_config_load(text);
	da = dump_of(a);
	db = dump_of(b);
	CU_ASSERT_STRING_EQUAL(da, db);
	CU_ASSERT_EQUAL(memcmp(&a->timeouts, &b->timeouts, sizeof a->timeouts), 0);
	CU_ASSERT_EQUAL(memcmp(&a->limits, &b->limits, sizeof a->limits), 0);
	free(da);
	free(db);
	free(text);
	unit_config_free(a);
	unit_config_free(b);
}

/* --write FILE: the tables of FILE made anew; 0 when written. */
static int write_tables(const char *path)
{
	char *doc = read_file(path);
	FILE *f;

	if (!doc) {
		perror(path);
		return 1;
	}
	for (size_t i = 0; i < NSECTIONS; i++) {
		char *want = section_table(i), *next;
		size_t s, e;

		if (section_find(doc, i, &s, &e) < 0) {
			fprintf(stderr, "%s: no \"<!-- keys:%s -->\" ... \"<!-- /keys -->\": add one where the table "
			        "goes\n", path, sections[i].name);
			return 1;
		}
		if (asprintf(&next, "%.*s%s%s", (int)s, doc, want, doc + e) < 0)
			return 1;
		free(doc);
		free(want);
		doc = next;
	}
	f = fopen(path, "w");
	if (!f || fputs(doc, f) < 0 || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	free(doc);
	return 0;
}

static const struct unit_test tests[] = {
    {"every descriptor is sound: unique, documented, fitting its field", test_descriptors_are_sound},
    {"every default written out loads to the same configuration", test_every_default_written_out_changes_nothing},
    {"the key tables of docs/config.md are the descriptors' (make docs-keys)", test_docs_tables_are_the_descriptors},
};

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_tables(argv[2]);
	return unit_run("common/config_keys", tests, sizeof tests / sizeof tests[0], unit_config_init,
	                unit_config_clean);
}
