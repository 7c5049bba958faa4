/*
 * test_route_scale.c: shm/route's lookup index at scale, against a
 * brute-force reference: 10,000 routes over 5,000 hosts (exact hosts,
 * nested wildcards, any host; nested path prefixes), and random queries
 * (known hosts, their subdomains, bare wildcard domains, unknown hosts,
 * case, ports and trailing dots; paths on, under, beside and above the
 * configured prefixes). The reference is the rule itself, written the
 * plain way: the most specific host that matches (exact, then the longest
 * wildcard suffix, then any), then the longest prefix within that host,
 * never a less specific host.
 *
 * Also: the settings of a generation, global then group then route.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/config_dump.h"
#include "shm/route.h"
#include "shm/shm.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"

#define NHOSTS   5000
#define NROUTES  10000
#define NQUERIES 200000

static uint64_t rng = 88172645463325252ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* nested on purpose: "/a" "/a/" "/a/b/" and "/ab" side by side */
static const char *const paths[] = {
    "/",        "/a",       "/a/",          "/a/b/", "/a/b/c/", "/ab", "/api/", "/api/v1/", "/api/v1/users/",
    "/api/v2/", "/static/", "/static/img/", "/x",    "/x/y",    "/z/", "/%41/",
};
#define NPATHS (sizeof paths / sizeof paths[0])

static const char *const query_tails[] = {"", "x", "/", "/deeper/still", "?q", "b/", "1"};
#define NTAILS (sizeof query_tails / sizeof query_tails[0])

static struct config cfg;
static struct config_upstream ups[4];
static struct config_server servers[4];

/* Host i: 3,000 exact ("h<i>.example.test", "api<i>.corp"), 2,000
 * wildcards, among them nested pairs ("*.w<i>.example.test" and
 * "*.a.w<i>.example.test"), and the any host. */
static void host_of(int i, struct config_route *r)
{
	if (i == 0) {
		r->host_kind = CONFIG_HOST_ANY;
		r->host[0] = 0;
	} else if (i < 3000) {
		r->host_kind = CONFIG_HOST_EXACT;
		snprintf(r->host, sizeof r->host, i % 2 ? "h%d.example.test" : "api%d.corp", i);
	} else if (i == 3000) {
		r->host_kind = CONFIG_HOST_WILDCARD;
		snprintf(r->host, sizeof r->host, ".example.test");
	} else if (i % 2) {
		r->host_kind = CONFIG_HOST_WILDCARD;
		snprintf(r->host, sizeof r->host, ".w%d.example.test", i / 2);
	} else {
		r->host_kind = CONFIG_HOST_WILDCARD;
		snprintf(r->host, sizeof r->host, ".a.w%d.example.test", i / 2);
	}
}

static void build_config(void)
{
	int n = 0;

	memset(&cfg, 0, sizeof cfg);
	for (int u = 0; u < 4; u++) {
		snprintf(ups[u].name, sizeof ups[u].name, "g%d", u);
		ups[u].first_server = u;
		ups[u].nservers = 1;
		CU_ASSERT_FATAL(config_parse_addr("127.0.0.1:9000", &servers[u].addr) == 0);
		servers[u].weight = 1;
	}
	cfg.upstreams = ups;
	cfg.nupstreams = 4;
	cfg.servers = servers;
	cfg.nservers = 4;
	cfg.routes = calloc(NROUTES, sizeof *cfg.routes);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.routes);
	/* every host gets two distinct paths: 10,000 routes */
	for (int h = 0; h < NHOSTS; h++) {
		uint32_t p1 = rnd(NPATHS), p2 = (p1 + 1 + rnd(NPATHS - 1)) % NPATHS;

		for (int k = 0; k < 2; k++) {
			struct config_route *r = &cfg.routes[n++];

			host_of(h, r);
			snprintf(r->path, sizeof r->path, "%s", paths[k ? p2 : p1]);
			r->upstream = (int)rnd(4);
		}
	}
	cfg.nroutes = n;
	CU_ASSERT_EQUAL_FATAL(n, NROUTES);
}

/* ---- the reference --------------------------------------------------- */

static int ref_host_match(const struct config_route *r, const char *host, size_t len)
{
	size_t hl = strlen(r->host);

	switch (r->host_kind) {
	case CONFIG_HOST_EXACT: return len == hl && strncasecmp(host, r->host, len) == 0;
	case CONFIG_HOST_WILDCARD: return len > hl && strncasecmp(host + len - hl, r->host, hl) == 0;
	default: return 1;
	}
}

/* How specific a matching route's host is: exact above every wildcard,
 * longer wildcards above shorter, any below all. */
static long ref_rank(const struct config_route *r)
{
	return r->host_kind == CONFIG_HOST_EXACT      ? 100000
	       : r->host_kind == CONFIG_HOST_WILDCARD ? (long)strlen(r->host)
	                                              : -1;
}

static const struct config_route *ref_lookup(const char *host, size_t len, const char *path, size_t plen)
{
	const struct config_route *best = NULL, *pick = NULL;

	/* as route_lookup: no port, no trailing dot */
	if (len && host[0] != '[') {
		const char *colon = memchr(host, ':', len);
		if (colon)
			len = (size_t)(colon - host);
	}
	if (len && host[len - 1] == '.')
		len--;
	for (int i = 0; i < cfg.nroutes; i++)
		if (ref_host_match(&cfg.routes[i], host, len) && (!best || ref_rank(&cfg.routes[i]) > ref_rank(best)))
			best = &cfg.routes[i];
	if (!best)
		return NULL;
	for (int i = 0; i < cfg.nroutes; i++) {
		const struct config_route *r = &cfg.routes[i];
		size_t pl = strlen(r->path);

		if (r->host_kind == best->host_kind && strcmp(r->host, best->host) == 0 && pl <= plen &&
		    memcmp(r->path, path, pl) == 0 && (!pick || pl > strlen(pick->path)))
			pick = r;
	}
	return pick;
}

/* A random Host for the queries. */
static void query_host(char *out, size_t cap)
{
	struct config_route r;
	int h = (int)rnd(NHOSTS);
	const char *suffix[] = {"", "", "", ":8080", ".", ".:80"};

	host_of(h, &r);
	switch (rnd(6)) {
	case 0: snprintf(out, cap, "unknown%u.nowhere%s", rnd(100), suffix[rnd(6)]); break;
	case 1: /* a subdomain of a host, exact or wildcard */
		snprintf(out, cap, "%s%s%s%s", rnd(2) ? "x" : "a.b", r.host_kind == CONFIG_HOST_WILDCARD ? "" : ".",
		         r.host, suffix[rnd(6)]);
		break;
	case 2: /* a wildcard's bare domain: it does not match itself */
		snprintf(out, cap, "%s%s", r.host[0] == '.' ? r.host + 1 : r.host, suffix[rnd(6)]);
		break;
	default: /* the host itself, in some case */
		snprintf(out, cap, "%s%s%s", r.host_kind == CONFIG_HOST_WILDCARD ? "y" : "", r.host, suffix[rnd(6)]);
		if (rnd(3) == 0)
			for (char *p = out; *p; p++)
				if (rnd(2) && *p >= 'a' && *p <= 'z')
					*p = (char)(*p - 32);
	}
}

static void test_lookup_at_scale_agrees_with_the_brute_force_rule(void)
{
	size_t size;
	void *block;
	struct route_table t = {0};
	int found = 0, none = 0;

	build_config();
	size = route_size(&cfg);
	block = malloc(size);
	CU_ASSERT_PTR_NOT_NULL_FATAL(block);
	CU_ASSERT_EQUAL_FATAL(route_compile(&t, block, size, &cfg), 0);
	CU_ASSERT_EQUAL(t.nroutes, NROUTES);
	CU_ASSERT_EQUAL(t.nhosts, NHOSTS);
	/* 2 ms of a slow machine per 1,000 queries of the reference: a
	 * sample of them, every one of the fast lookups' answers checked */
	for (int q = 0; q < NQUERIES; q++) {
		char host[1024], path[300];
		const struct route_entry *got;
		const struct config_route *want;

		query_host(host, sizeof host);
		snprintf(path, sizeof path, "%s%s", paths[rnd(NPATHS)], query_tails[rnd(NTAILS)]);
		got = route_lookup(&t, host, strlen(host), path, strlen(path));
		if (q % 40)
			continue;
		want = ref_lookup(host, strlen(host), path, strlen(path));
		if (!want != !got ||
		    (got &&
		     (got->host_kind != want->host_kind || strcmp(route_host(&t, got), want->host) != 0 ||
		      strcmp(route_path(&t, got), want->path) != 0 || got->upstream != (uint32_t)want->upstream))) {
			fprintf(stderr, "\n%s %s: got %s %s, want %s %s\n", host, path, got ? route_host(&t, got) : "-",
			        got ? route_path(&t, got) : "404", want ? want->host : "-", want ? want->path : "404");
			CU_FAIL("the index and the rule disagree");
			break;
		}
		found += want != NULL;
		none += want == NULL;
	}
	/* the queries reach both answers plenty */
	CU_ASSERT(found > NQUERIES / 40 / 4);
	CU_ASSERT(none > NQUERIES / 40 / 20);
	free(block);
	free(cfg.routes);
}

/* ---- settings ---------------------------------------------------------- */

static void test_settings_are_global_then_group_then_route(void)
{
	struct config *c = unit_config_load(
	    "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	    "timeouts = { upstream_read = \"7s\"; upstream_connect = \"3s\"; };\n"
	    "limits = { body_size = \"1m\"; };\n"
	    "upstreams = (\n"
	    "  { name = \"plain\"; servers = ( { address = \"127.0.0.1:9001\"; } ); },\n"
	    "  { name = \"slow\"; servers = ( { address = \"127.0.0.1:9002\"; } );\n"
	    "    timeouts = { upstream_read = \"20s\"; }; request_limits = { body_size = \"2m\"; }; }\n"
	    ");\n"
	    "routes = (\n"
	    "  { path = \"/p/\"; upstream = \"plain\"; },\n"
	    "  { path = \"/s/\"; upstream = \"slow\"; },\n"
	    "  { path = \"/r/\"; upstream = \"slow\"; timeouts = { upstream_read = \"90s\"; request = \"5m\"; }; },\n"
	    "  { path = \"/q/\"; upstream = \"plain\"; limits = { client_body_rate = 0; }; }\n"
	    ");\n");
	size_t size = route_size(c);
	void *block = malloc(size);
	struct route_table t = {0};
	const struct route_settings *p, *s, *r, *q, *none;

	CU_ASSERT_PTR_NOT_NULL_FATAL(block);
	CU_ASSERT_EQUAL_FATAL(route_compile(&t, block, size, c), 0);
	/* the global one, a group's and two routes': four */
	CU_ASSERT_EQUAL(t.nsettings, 4);
	p = route_settings_of(&t, route_lookup(&t, "h", 1, "/p/x", 4));
	s = route_settings_of(&t, route_lookup(&t, "h", 1, "/s/x", 4));
	r = route_settings_of(&t, route_lookup(&t, "h", 1, "/r/x", 4));
	q = route_settings_of(&t, route_lookup(&t, "h", 1, "/q/x", 4));
	none = route_settings_global(&t);
	CU_ASSERT_PTR_EQUAL(p, none);
	CU_ASSERT_EQUAL(none->timeouts.upstream_read, 7000);
	CU_ASSERT_EQUAL(none->limits.body_size, 1 << 20);
	/* the group's over the global */
	CU_ASSERT_EQUAL(s->timeouts.upstream_read, 20000);
	CU_ASSERT_EQUAL(s->limits.body_size, 2 << 20);
	CU_ASSERT_EQUAL(s->timeouts.upstream_connect, 3000);
	/* the route's over its group's, the rest its group's */
	CU_ASSERT_EQUAL(r->timeouts.upstream_read, 90000);
	CU_ASSERT_EQUAL(r->timeouts.request, 300000);
	CU_ASSERT_EQUAL(r->limits.body_size, 2 << 20);
	CU_ASSERT_EQUAL(r->timeouts.upstream_connect, 3000);
	/* a key set to its "off" value is set all the same */
	CU_ASSERT_EQUAL(q->limits.client_body_rate, 0);
	CU_ASSERT_EQUAL(none->limits.client_body_rate, 512);
	CU_ASSERT_EQUAL(q->timeouts.upstream_read, 7000);
	free(block);
	unit_config_free(c);
}

/* The loader's messages for <text>, which must not load, joined. */
static char *errors_of(const char *text)
{
	static struct config_errors errs;
	static struct config c;
	char *out = calloc(1, sizeof errs.msg);

	CU_ASSERT_EQUAL(config_load(unit_config_write(text), &c, &errs), -1);
	for (int i = 0; i < errs.count && i < CONFIG_MAX_ERRORS; i++)
		strcat(strcat(out, errs.msg[i]), "\n");
	return out;
}

static void test_a_key_not_per_request_is_refused_in_a_route(void)
{
	char *why = errors_of("listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	                      "upstreams = ( { name = \"a\"; servers = ( { address = \"127.0.0.1:9001\"; } ); } );\n"
	                      "routes = ( { upstream = \"a\";\n"
	                      "  timeouts = { client_header = \"1s\"; }; } );\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(why);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, ":4: unknown key \"client_header\" in routes.timeouts"));
	free(why);
}

static void test_weir_T_writes_the_overrides_given_and_they_load_back(void)
{
	struct config *a =
	    unit_config_load("listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	                     "upstreams = ( { name = \"a\"; servers = ( { address = \"127.0.0.1:9001\"; } );\n"
	                     "  timeouts = { upstream_read = \"20s\"; }; request_limits = { body_size = \"2m\"; }; } );\n"
	                     "routes = ( { upstream = \"a\"; timeouts = { request = \"off\"; tunnel = \"90s\"; }; },\n"
	                     "  { path = \"/x/\"; upstream = \"a\"; limits = { client_send_rate = 0; }; } );\n");
	struct config *b;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	config_dump(f, a);
	fclose(f);
	b = unit_config_load(text);
	CU_ASSERT_EQUAL(memcmp(&a->upstreams[0].over, &b->upstreams[0].over, sizeof a->upstreams[0].over), 0);
	for (int i = 0; i < 2; i++)
		CU_ASSERT_EQUAL(memcmp(&a->routes[i].over, &b->routes[i].over, sizeof a->routes[i].over), 0);
	/* only the keys given are written: the rest is inherited */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "timeouts = { request = \"off\"; tunnel = \"90s\"; };"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "limits = { client_send_rate = \"0\"; };"));
	free(text);
	unit_config_free(a);
	unit_config_free(b);
}

/* Blocks of generation slots <a> and <b> overlap in the arena. */
static int overlap(const struct shm_segment *seg, int a, int b)
{
	const struct route_table *x = &seg->gens[a], *y = &seg->gens[b];

	return x->arena_off < y->arena_off + y->size && y->arena_off < x->arena_off + x->size;
}

static void test_generations_take_the_room_they_need_and_never_overlap_a_busy_one(void)
{
	int fd, slots[SHM_GENS];
	struct shm_segment *seg = shm_create(&fd);
	struct config one;
	uint64_t small, big;

	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	build_config();
	one = cfg;
	one.nroutes = 1;
	/* a live worker holds every generation from the first on (gen_min),
	 * so each new one must find room beside all the others */
	atomic_store(&seg->slots[0].pid, 42);
	for (int i = 0; i < SHM_GENS - 1; i++) {
		slots[i] = route_prepare(seg, i % 2 ? &one : &cfg);
		CU_ASSERT_FATAL(slots[i] >= 0);
		route_commit(seg, slots[i]);
		if (i == 0)
			atomic_store(&seg->slots[0].gen_min, seg->gens[slots[0]].id);
		for (int k = 0; k < i; k++)
			CU_ASSERT(!overlap(seg, slots[i], slots[k]));
		/* and what it holds reads back */
		if (i % 2 == 0) {
			const struct config_route *r = &cfg.routes[2];
			const struct route_entry *e =
			    route_lookup(&seg->gens[slots[i]], r->host, strlen(r->host), r->path, strlen(r->path));

			CU_ASSERT(e && strcmp(route_path(&seg->gens[slots[i]], e), r->path) == 0);
		}
	}
	small = seg->gens[slots[1]].size;
	big = seg->gens[slots[0]].size;
	CU_ASSERT(small * 50 < big); /* a few pages for one route, many for 10,000 */
	CU_ASSERT(big >= (uint64_t)NROUTES * sizeof(struct route_entry)); /* sized for 10,000 */
	/* the request ends: every generation but the current is free, and the
	 * next one goes to the start of the arena again */
	atomic_store(&seg->slots[0].gen_min, 0);
	atomic_store(&seg->slots[0].gen_seen, 0);
	slots[SHM_GENS - 1] = route_prepare(seg, &cfg);
	CU_ASSERT_FATAL(slots[SHM_GENS - 1] >= 0);
	CU_ASSERT_EQUAL(seg->gens[slots[SHM_GENS - 1]].arena_off, 0);
	CU_ASSERT(!overlap(seg, slots[SHM_GENS - 1], (int)atomic_load(&seg->gen_current)));
	free(cfg.routes);
	munmap(seg, SHM_SIZE);
	close(fd);
}

static void test_the_most_routes_load_in_linear_time(void)
{
	size_t cap = (size_t)CONFIG_MAX_ROUTES * 80 + 4096, len;
	char *text = malloc(cap);
	struct config *c;
	clock_t t0;
	double cpu;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	len = (size_t)snprintf(text, cap,
	                       "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	                       "upstreams = ( { name = \"a\"; servers = ( { address = \"127.0.0.1:9001\"; } ); } );\n"
	                       "routes = (\n");
	for (int i = 0; i < CONFIG_MAX_ROUTES; i++)
		len += (size_t)snprintf(text + len, cap - len,
		                        "{ host = \"h%d.test\"; path = \"/p%d/\"; upstream = \"a\"; }%s\n", i / 2, i,
		                        i + 1 < CONFIG_MAX_ROUTES ? "," : "");
	snprintf(text + len, cap - len, ");\n");
	t0 = clock();
	c = unit_config_load(text);
	cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
	CU_ASSERT_EQUAL(c->nroutes, CONFIG_MAX_ROUTES);
	/* the duplicate check compared each route with every one before it:
	 * two billion comparisons, many seconds; by hash it is a fraction of
	 * one, most of it libconfig's (generous for a loaded machine); ASan
	 * makes the load about 5 times dearer (0.8 s against 4.1 s) */
#ifdef __SANITIZE_ADDRESS__
	CU_ASSERT(cpu < 15.0);
#else
	CU_ASSERT(cpu < 4.0);
#endif
	fprintf(stderr, " [%d routes loaded in %.2f s of CPU] ", CONFIG_MAX_ROUTES, cpu);
	free(text);
	unit_config_free(c);
}

static const struct unit_test tests[] = {
    {"lookup over 10,000 routes and 5,000 hosts agrees with the brute-force rule",
     test_lookup_at_scale_agrees_with_the_brute_force_rule},
    {"settings are the global ones, then the group's, then the route's",
     test_settings_are_global_then_group_then_route},
    {"a key that is not per request is refused in a route's timeouts",
     test_a_key_not_per_request_is_refused_in_a_route},
    {"generations take the room they need and never overlap a busy one",
     test_generations_take_the_room_they_need_and_never_overlap_a_busy_one},
    {"the most routes a config may hold load in linear time", test_the_most_routes_load_in_linear_time},
    {"weir -T writes the overrides given, and they load back",
     test_weir_T_writes_the_overrides_given_and_they_load_back},
};

UNIT_MAIN_WITH("shm/route_scale", tests, unit_config_init, unit_config_clean)
