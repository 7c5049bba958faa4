/*
 * test_route.c: shm/route: which route a request's host and path pick (the
 * most specific host, then the longest prefix within it, never a fallback
 * to a less specific host), and the generation rule: route_prepare() never
 * writes a table a live worker reports in use.
 *
 * Configs are real files loaded with config_load(), so hosts arrive here
 * normalised exactly as in weir.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/config.h"
#include "shm/route.h"
#include "shm/shm.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"

#define UPSTREAMS                                                                                                      \
	"upstreams = (\n"                                                                                              \
	"  { name = \"a\"; servers = ( { address = \"127.0.0.1:9001\"; } ); },\n"                                      \
	"  { name = \"b\"; servers = ( { address = \"127.0.0.1:9002\"; } ); },\n"                                      \
	"  { name = \"c\"; servers = ( { address = \"127.0.0.1:9003\"; } ); },\n"                                      \
	"  { name = \"d\"; servers = ( { address = \"127.0.0.1:9004\"; } ); },\n"                                      \
	"  { name = \"e\"; servers = ( { address = \"127.0.0.1:9005\"; } ); },\n"                                      \
	"  { name = \"f\"; servers = ( { address = \"127.0.0.1:9006\"; }, { address = \"127.0.0.1:9007\"; } ); },\n"   \
	"  { name = \"g\"; servers = ( { address = \"127.0.0.1:9008\"; } ); },\n"                                      \
	"  { name = \"h\"; servers = ( { address = \"127.0.0.1:9009\"; } ); }\n"                                       \
	");\n"

/* The routes of the matching tests, one per line so they can be reversed. */
static const char *const routes_lines[] = {
    "{ host = \"api.example.com\"; path = \"/v1/\"; upstream = \"a\"; }",
    "{ host = \"api.example.com\"; path = \"/\"; upstream = \"b\"; }",
    "{ host = \"*.example.com\"; upstream = \"c\"; }",
    "{ host = \"*.eu.example.com\"; path = \"/\"; upstream = \"d\"; }",
    "{ host = \"*.eu.example.com\"; path = \"/long/path/\"; upstream = \"e\"; }",
    "{ host = \"Exact.Only\"; path = \"/x/\"; upstream = \"f\"; }",
    "{ host = \"*.nofallback.test\"; path = \"/only/\"; upstream = \"f\"; }",
    "{ path = \"/\"; upstream = \"g\"; }",
    "{ host = \"*\"; path = \"/static/\"; upstream = \"h\"; }",
};
#define NROUTES (sizeof(routes_lines) / sizeof(routes_lines[0]))

/* Loads a config whose routes list is <routes>; fails the test if invalid. */
/* A config with the suite's upstreams and <routes>. */
static struct config *load(const char *routes)
{
	size_t cap = strlen(routes) + 4096;
	char *text = malloc(cap);
	struct config *cfg;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	snprintf(text, cap, "listeners = ( { address = \"127.0.0.1:8080\"; } );\n" UPSTREAMS "routes = (\n%s\n);\n",
	         routes);
	cfg = unit_config_load(text);
	free(text);
	return cfg;
}

/* The routes joined, in file order or reversed. */
static char *joined(int reversed)
{
	static char buf[4096];

	buf[0] = 0;
	for (size_t i = 0; i < NROUTES; i++) {
		strcat(buf, routes_lines[reversed ? NROUTES - 1 - i : i]);
		strcat(buf, i + 1 < NROUTES ? ",\n" : "\n");
	}
	return buf;
}

static struct route_table *table; /* compiled by the test in progress */
static void *block;               /* and its block */

/* "upstream path" of the route picked for <host> and <path>, or "404". */
static const char *pick(const char *host, const char *path)
{
	static char out[512];
	const struct route_entry *e = route_lookup(table, host, strlen(host), path, strlen(path));

	if (!e)
		return "404";
	snprintf(out, sizeof out, "%s %s", route_upstreams(table)[e->upstream].name, route_path(table, e));
	return out;
}

static void compile(int reversed)
{
	struct config *cfg = load(joined(reversed));

	if (!table)
		table = calloc(1, sizeof(*table));
	CU_ASSERT_PTR_NOT_NULL_FATAL(table);
	free(block);
	block = malloc(route_size(cfg));
	CU_ASSERT_PTR_NOT_NULL_FATAL(block);
	CU_ASSERT_EQUAL_FATAL(route_compile(table, block, route_size(cfg), cfg), 0);
	unit_config_free(cfg);
}

static void check_order(int reversed)
{
	compile(reversed);
	/* an exact host beats a wildcard, which beats any host */
	CU_ASSERT_STRING_EQUAL(pick("api.example.com", "/index"), "b /");
	CU_ASSERT_STRING_EQUAL(pick("www.example.com", "/index"), "c /");
	CU_ASSERT_STRING_EQUAL(pick("other.org", "/index"), "g /");
	/* the longest wildcard suffix wins */
	CU_ASSERT_STRING_EQUAL(pick("a.eu.example.com", "/index"), "d /");
	CU_ASSERT_STRING_EQUAL(pick("a.b.eu.example.com", "/index"), "d /");
	/* a wildcard does not match its bare domain */
	CU_ASSERT_STRING_EQUAL(pick("example.com", "/"), "g /");
	CU_ASSERT_STRING_EQUAL(pick("eu.example.com", "/"), "c /");
	/* the longest prefix within the chosen host */
	CU_ASSERT_STRING_EQUAL(pick("api.example.com", "/v1/users"), "a /v1/");
	CU_ASSERT_STRING_EQUAL(pick("api.example.com", "/v1"), "b /");
	CU_ASSERT_STRING_EQUAL(pick("a.eu.example.com", "/long/path/x"), "e /long/path/");
	CU_ASSERT_STRING_EQUAL(pick("a.eu.example.com", "/long/pat"), "d /");
	CU_ASSERT_STRING_EQUAL(pick("anything", "/static/app.js"), "h /static/");
	CU_ASSERT_STRING_EQUAL(pick("", "/static"), "g /");
}

static void test_most_specific_host_then_longest_prefix(void)
{
	check_order(0);
}

static void test_the_order_of_routes_in_the_file_does_not_matter(void)
{
	check_order(1);
}

static void test_no_fallback_to_a_less_specific_host(void)
{
	compile(0);
	/* exact.only has only /x/: anything else there is 404, not "g" */
	CU_ASSERT_STRING_EQUAL(pick("exact.only", "/x/1"), "f /x/");
	CU_ASSERT_STRING_EQUAL(pick("exact.only", "/y"), "404");
	CU_ASSERT_STRING_EQUAL(pick("exact.only", "/"), "404");
	CU_ASSERT_STRING_EQUAL(pick("a.nofallback.test", "/only/1"), "f /only/");
	CU_ASSERT_STRING_EQUAL(pick("a.nofallback.test", "/other"), "404");
}

static void test_ports_trailing_dots_and_case_in_host_are_ignored(void)
{
	compile(0);
	CU_ASSERT_STRING_EQUAL(pick("api.example.com:8443", "/v1/x"), "a /v1/");
	CU_ASSERT_STRING_EQUAL(pick("api.example.com.", "/v1/x"), "a /v1/");
	CU_ASSERT_STRING_EQUAL(pick("api.example.com.:80", "/v1/x"), "a /v1/");
	CU_ASSERT_STRING_EQUAL(pick("API.Example.COM", "/v1/x"), "a /v1/");
	CU_ASSERT_STRING_EQUAL(pick("WWW.EXAMPLE.COM:80", "/"), "c /");
	CU_ASSERT_STRING_EQUAL(pick("EXACT.ONLY", "/x/"), "f /x/");
	/* an IPv6 literal keeps its colons; only the port goes */
	CU_ASSERT_STRING_EQUAL(pick("[::1]:8080", "/"), "g /");
	/* the path is compared with case */
	CU_ASSERT_STRING_EQUAL(pick("api.example.com", "/V1/x"), "b /");
}

/* ---- generations ---------------------------------------------------------- */

static struct shm_segment *seg;
static int seg_fd = -1;

static int slot_of(uint64_t id)
{
	for (int g = 0; g < SHM_GENS; g++)
		if (seg->gens[g].id == id)
			return g;
	return -1;
}

/* A live worker in slot <w> that has taken the current table. */
static uint64_t worker_takes_current(int w)
{
	atomic_store(&seg->slots[w].pid, 1000 + w);
	atomic_store(&seg->slots[w].state, SHM_SLOT_RUNNING);
	return route_acquire(seg, w)->id;
}

static void test_a_generation_a_live_worker_reports_is_never_rewritten(void)
{
	struct config *cfg = load(joined(0));
	uint64_t first, id;
	int busy;

	seg = shm_create(&seg_fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	first = route_publish(seg, cfg);
	CU_ASSERT_EQUAL_FATAL(first, 1);
	CU_ASSERT_EQUAL(worker_takes_current(0), first);
	CU_ASSERT_EQUAL(atomic_load(&seg->slots[0].gen_seen), first);
	busy = slot_of(first);

	/* many reloads later, worker 0 still reports the first table: its slot
	 * is never written again, and ids keep growing */
	for (int i = 0; i < 20; i++) {
		int g = route_prepare(seg, cfg);

		CU_ASSERT_FATAL(g >= 0);
		CU_ASSERT_NOT_EQUAL(g, busy);
		id = route_commit(seg, g);
		CU_ASSERT_EQUAL(id, first + 1 + (uint64_t)i);
		CU_ASSERT_EQUAL(seg->gens[busy].id, first);
	}

	/* one more worker on each further table: with the current one that is
	 * every slot, so there is nowhere to write */
	for (int w = 1; w <= SHM_GENS - 2; w++) {
		worker_takes_current(w);
		route_commit(seg, route_prepare(seg, cfg));
	}
	{
		uint32_t cur = atomic_load(&seg->gen_current);

		for (int w = 0; w <= SHM_GENS - 2; w++) {
			CU_ASSERT_NOT_EQUAL(slot_of(atomic_load(&seg->slots[w].gen_seen)), (int)cur);
			for (int v = 0; v < w; v++)
				CU_ASSERT_NOT_EQUAL(atomic_load(&seg->slots[w].gen_seen),
				                    atomic_load(&seg->slots[v].gen_seen));
		}
	}
	CU_ASSERT_EQUAL(route_prepare(seg, cfg), -1);
	CU_ASSERT_EQUAL(route_publish(seg, cfg), 0);

	/* a worker that has exited reports nothing: its table is free again */
	{
		int freed = slot_of(atomic_load(&seg->slots[1].gen_seen));

		atomic_store(&seg->slots[1].pid, 0);
		CU_ASSERT_EQUAL(route_prepare(seg, cfg), freed);
	}
	unit_config_free(cfg);
	munmap(seg, SHM_SIZE);
	close(seg_fd);
}

static void test_a_request_in_flight_protects_its_table_and_every_later_one(void)
{
	struct config *cfg = load(joined(0));
	uint64_t first;

	seg = shm_create(&seg_fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	first = route_publish(seg, cfg);
	atomic_store(&seg->slots[0].pid, 42);
	/* the worker moved on (gen_seen is newer) but a request still holds the
	 * first table: it and all later ones are kept */
	atomic_store(&seg->slots[0].gen_min, first);
	for (int i = 0; i < SHM_GENS - 1; i++) {
		int g = route_prepare(seg, cfg);
		CU_ASSERT_FATAL(g >= 0);
		route_commit(seg, g);
		atomic_store(&seg->slots[0].gen_seen, seg->gens[g].id);
	}
	CU_ASSERT_EQUAL(route_prepare(seg, cfg), -1);
	/* the request ends: the oldest tables are free again */
	{
		int oldest = slot_of(first);

		atomic_store(&seg->slots[0].gen_min, 0);
		CU_ASSERT_EQUAL(route_prepare(seg, cfg), oldest);
	}
	unit_config_free(cfg);
	munmap(seg, SHM_SIZE);
	close(seg_fd);
}

static const struct unit_test tests[] = {
    {"the most specific host wins, then the longest path prefix within it",
     test_most_specific_host_then_longest_prefix},
    {"the order of routes in the file does not matter", test_the_order_of_routes_in_the_file_does_not_matter},
    {"a host with no matching prefix is 404, never a less specific host", test_no_fallback_to_a_less_specific_host},
    {"ports, trailing dots and case in Host are ignored; case in the path is not",
     test_ports_trailing_dots_and_case_in_host_are_ignored},
    {"a request in flight protects its table and every later one",
     test_a_request_in_flight_protects_its_table_and_every_later_one},
    {"route_prepare never writes a generation a live worker reports in use",
     test_a_generation_a_live_worker_reports_is_never_rewritten},
};

/* the table the last test compiled goes with the suite's files */
static int route_clean(void)
{
	free(table);
	free(block);
	return unit_config_clean();
}

UNIT_MAIN_WITH("shm/route", tests, unit_config_init, route_clean)
