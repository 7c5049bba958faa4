/*
 * test_route_match.c: shm/route_match: the order routes of one path are
 * tried in (route_match_order: exact path, then more conditions, then
 * file order), and lookup's walk with conditions: every candidate asked
 * in that order, longest prefix first, falling back to a shorter prefix
 * when none of a path's routes takes the request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_match.h"
#include "shm/route.h"
#include "shm/route_match.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"

static struct config *load(const char *routes)
{
	char text[8192];

	snprintf(text, sizeof text,
	         "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	         "upstreams = ( { name = \"a\"; servers = ( { address = \"127.0.0.1:9001\"; } ); } );\n"
	         "routes = (\n%s\n);\n",
	         routes);
	return unit_config_load(text);
}

static void test_exact_then_more_conditions_then_file_order(void)
{
	struct config *cfg = load("{ path = \"/o\"; methods = [ \"GET\" ]; upstream = \"a\"; },\n"         /* 0: 1 */
	                          "{ path = \"/o\"; upstream = \"a\"; },\n"                                    /* 1: 0 */
	                          "{ path = \"/o\"; methods = [ \"PUT\" ]; match_query = ( { name = \"v\"; "
	                          "present = true; } ); upstream = \"a\"; },\n"                                /* 2: 2 */
	                          "{ path_exact = \"/o\"; upstream = \"a\"; },\n"                              /* 3: exact */
	                          "{ path = \"/o\"; methods = [ \"POST\" ]; upstream = \"a\"; }");             /* 4: 1 */
	const struct config_route *r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	r = cfg->routes;
	/* exact before anything */
	CU_ASSERT(route_match_order(&r[3], &r[2]) < 0);
	CU_ASSERT(route_match_order(&r[3], &r[1]) < 0);
	CU_ASSERT(route_match_order(&r[2], &r[3]) > 0);
	/* more conditions first */
	CU_ASSERT(route_match_order(&r[2], &r[0]) < 0);
	CU_ASSERT(route_match_order(&r[0], &r[1]) < 0);
	CU_ASSERT(route_match_order(&r[1], &r[4]) > 0);
	/* as many: file order */
	CU_ASSERT(route_match_order(&r[0], &r[4]) < 0);
	CU_ASSERT(route_match_order(&r[4], &r[0]) > 0);
	CU_ASSERT_EQUAL(route_match_order(&r[4], &r[4]), 0);
	/* the labels name the conditions, and tell the routes apart */
	CU_ASSERT_STRING_EQUAL(config_route_label(&r[1]), "/o");
	CU_ASSERT_STRING_EQUAL(config_route_label(&r[3]), "=/o");
	CU_ASSERT_STRING_EQUAL(config_route_label(&r[0]), "/o GET");
	CU_ASSERT_STRING_EQUAL(config_route_label(&r[2]), "/o PUT ?v");
	unit_config_free(cfg);
}

/* <cfg>'s table into <t>; its block, to free. */
static void *compile(const struct config *cfg, struct route_table *t)
{
	void *block;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	block = malloc(route_size(cfg));
	CU_ASSERT_PTR_NOT_NULL_FATAL(block);
	memset(t, 0, sizeof *t);
	CU_ASSERT_EQUAL_FATAL(route_compile(t, block, route_size(cfg), cfg), 0);
	return block;
}

/* What the walk asked, in order. */
static char asked[1024];
static const char *yes; /* the label that takes the request; NULL: none does */

static int record(void *ctx, const struct route_table *t, const struct route_entry *e)
{
	(void)ctx;
	strcat(asked, route_label(t, e));
	strcat(asked, "|");
	return yes && strcmp(route_label(t, e), yes) == 0;
}

static const char *walk(const struct route_table *t, const char *path, const char *take)
{
	const struct route_entry *e;

	asked[0] = 0;
	yes = take;
	e = route_lookup_cond(t, "h", 1, path, strlen(path), record, NULL);
	return e ? route_label(t, e) : "404";
}

static void test_the_walk_asks_in_order_and_falls_back(void)
{
	/* in reverse of the order they are tried in, so the file order alone
	 * cannot pass the test */
	struct config *cfg = load("{ path = \"/\"; upstream = \"a\"; },\n"
	                          "{ path = \"/\"; path_regex = \"^/o\"; upstream = \"a\"; },\n"
	                          "{ path = \"/o\"; upstream = \"a\"; },\n"
	                          "{ path = \"/o\"; methods = [ \"GET\" ]; upstream = \"a\"; },\n"
	                          "{ path = \"/o\"; methods = [ \"GET\" ]; match_headers = ( { name = \"X-A\"; "
	                          "present = true; } ); upstream = \"a\"; },\n"
	                          "{ path_exact = \"/o\"; upstream = \"a\"; },\n"
	                          "{ path = \"/o/\"; methods = [ \"GET\" ]; upstream = \"a\"; }");
	struct route_table t;
	void *block = compile(cfg, &t);

	CU_ASSERT_EQUAL(t.ncond_routes, 5);
	CU_ASSERT_EQUAL(t.nregexes, 1);

	/* the exact path is checked by the table itself, without asking */
	CU_ASSERT_STRING_EQUAL(walk(&t, "/o", NULL), "=/o");
	CU_ASSERT_STRING_EQUAL(asked, "");
	/* not exact: the conditional routes of /o, most conditions first,
	 * then the plain /o */
	CU_ASSERT_STRING_EQUAL(walk(&t, "/ox", NULL), "/o");
	CU_ASSERT_STRING_EQUAL(asked, "/o GET x-a|/o GET|");
	CU_ASSERT_STRING_EQUAL(walk(&t, "/ox", "/o GET"), "/o GET");
	CU_ASSERT_STRING_EQUAL(asked, "/o GET x-a|/o GET|");
	/* a longer prefix first; its refusal falls back to /o's */
	CU_ASSERT_STRING_EQUAL(walk(&t, "/o/z", "/o GET x-a"), "/o GET x-a");
	CU_ASSERT_STRING_EQUAL(asked, "/o/ GET|/o GET x-a|");
	/* outside /o: the regex route of /, before the plain / */
	CU_ASSERT_STRING_EQUAL(walk(&t, "/p", NULL), "/");
	CU_ASSERT_STRING_EQUAL(asked, "/ ~^/o|");
	/* without a callback a route with conditions never matches */
	CU_ASSERT_STRING_EQUAL(route_label(&t, route_lookup(&t, "h", 1, "/ox", 3)), "/o");
	free(block);
	unit_config_free(cfg);
}

static void test_a_table_without_conditions_never_asks(void)
{
	struct config *cfg = load("{ path = \"/\"; upstream = \"a\"; },\n"
	                          "{ path = \"/o\"; strip_prefix = true; upstream = \"a\"; }");
	struct route_table t;
	void *block = compile(cfg, &t);

	/* a rewrite is no condition */
	CU_ASSERT_EQUAL(t.ncond_routes, 0);
	CU_ASSERT_EQUAL(t.nmatches, 1);
	CU_ASSERT_STRING_EQUAL(walk(&t, "/o/x", NULL), "/o");
	CU_ASSERT_STRING_EQUAL(asked, "");
	CU_ASSERT_EQUAL(route_match_of(&t, route_lookup(&t, "h", 1, "/o/x", 4))->strip_len, 2);
	free(block);
	unit_config_free(cfg);
}

static const struct unit_test tests[] = {
    {"routes of one path: exact, then more conditions, then file order",
     test_exact_then_more_conditions_then_file_order},
    {"the walk asks each candidate in order and falls back to a shorter prefix",
     test_the_walk_asks_in_order_and_falls_back},
    {"a table without conditions never asks", test_a_table_without_conditions_never_asks},
};

UNIT_MAIN_WITH("shm/route_match", tests, unit_config_init, unit_config_clean)
