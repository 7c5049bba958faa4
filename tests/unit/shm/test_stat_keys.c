/*
 * test_stat_keys.c: shm/stat and the per-key counters of shm/shm: stable
 * stat indices for route and server keys (kept while there is room, bounded,
 * unchanged by a reload that reorders the config, reclaimed from keys no
 * live generation holds once the table is full, "other" past that),
 * histogram bucket selection, the fold of a dead worker's per-key counters,
 * and the admin words a reload keeps or drops.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/config.h"
#include "shm/route.h"
#include "shm/shm.h"
#include "shm/stat.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"

/* ---- the key table -------------------------------------------------------- */

/* The index of a key with no reclaim (live NULL). */
static uint16_t route_idx(struct stat_keys *k, int host_kind, const char *host, const char *path)
{
	int reclaimed;
	uint16_t i = stat_route_index(k, host_kind, host, path, NULL, &reclaimed);

	CU_ASSERT_FALSE(reclaimed);
	return i;
}

static uint16_t server_idx(struct stat_keys *k, const char *upstream, const char *addr)
{
	int reclaimed;
	uint16_t i = stat_server_index(k, upstream, addr, NULL, &reclaimed);

	CU_ASSERT_FALSE(reclaimed);
	return i;
}

static void test_a_route_key_keeps_its_index(void)
{
	struct stat_keys *k = calloc(1, sizeof(*k));

	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", "/"), 0);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_EXACT, "api.example.com", "/v1/"), 1);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_WILDCARD, ".example.com", "/"), 2);
	/* the same key again: the same index, nothing appended */
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_EXACT, "api.example.com", "/v1/"), 1);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", "/"), 0);
	CU_ASSERT_EQUAL(atomic_load(&k->nroutes), 3);
	/* the host kind, the host and the path all make the key */
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_EXACT, "api.example.com", "/"), 3);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_EXACT, ".example.com", "/"), 4);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_EXACT, "api.example.org", "/v1/"), 5);
	CU_ASSERT_STRING_EQUAL(k->routes[1].host, "api.example.com");
	CU_ASSERT_STRING_EQUAL(k->routes[1].path, "/v1/");
	CU_ASSERT_EQUAL(k->routes[2].host_kind, CONFIG_HOST_WILDCARD);
	free(k);
}

static void test_keys_past_the_bound_share_the_other_index(void)
{
	struct stat_keys *k = calloc(1, sizeof(*k));
	char path[32], addr[32];

	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	for (int i = 0; i < STAT_ROUTE_OTHER; i++) {
		snprintf(path, sizeof path, "/r%d/", i);
		CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", path), i);
	}
	CU_ASSERT_EQUAL(atomic_load(&k->nroutes), STAT_ROUTE_OTHER);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", "/one-too-many/"), STAT_ROUTE_OTHER);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", "/two-too-many/"), STAT_ROUTE_OTHER);
	CU_ASSERT_EQUAL(atomic_load(&k->nroutes), STAT_ROUTE_OTHER);
	/* the keys already there keep their own */
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", "/r7/"), 7);
	CU_ASSERT_EQUAL(route_idx(k, CONFIG_HOST_ANY, "", "/r254/"), 254);

	for (int i = 0; i < STAT_SERVER_OTHER; i++) {
		snprintf(addr, sizeof addr, "10.0.%d.%d:80", i / 250, i % 250);
		CU_ASSERT_EQUAL(server_idx(k, "api", addr), i);
	}
	CU_ASSERT_EQUAL(server_idx(k, "api", "10.9.9.9:80"), STAT_SERVER_OTHER);
	CU_ASSERT_EQUAL(server_idx(k, "api", "10.0.0.3:80"), 3);
	free(k);
}

static void test_a_server_key_is_its_upstream_and_address(void)
{
	struct stat_keys *k = calloc(1, sizeof(*k));

	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_EQUAL(server_idx(k, "api", "10.0.0.1:80"), 0);
	CU_ASSERT_EQUAL(server_idx(k, "web", "10.0.0.1:80"), 1);
	CU_ASSERT_EQUAL(server_idx(k, "api", "10.0.0.2:80"), 2);
	CU_ASSERT_EQUAL(server_idx(k, "api", "10.0.0.1:80"), 0);
	CU_ASSERT_EQUAL(server_idx(k, "web", "10.0.0.1:80"), 1);
	CU_ASSERT_STRING_EQUAL(k->servers[1].upstream, "web");
	CU_ASSERT_STRING_EQUAL(k->servers[1].addr, "10.0.0.1:80");
	free(k);
}

/* ---- buckets -------------------------------------------------------------- */

static void test_a_duration_lands_in_the_first_bucket_whose_bound_holds_it(void)
{
	CU_ASSERT_EQUAL(stat_bucket(0), 0);
	CU_ASSERT_EQUAL(stat_bucket(4999), 0);
	CU_ASSERT_EQUAL(stat_bucket(5000), 0); /* le: the bound itself is inside */
	CU_ASSERT_EQUAL(stat_bucket(5001), 1);
	CU_ASSERT_EQUAL(stat_bucket(100000), 4);
	CU_ASSERT_EQUAL(stat_bucket(999999), 7);
	CU_ASSERT_EQUAL(stat_bucket(1000000), 7);
	CU_ASSERT_EQUAL(stat_bucket(10000000), 10);
	CU_ASSERT_EQUAL(stat_bucket(10000001), STAT_BUCKETS - 1);
	CU_ASSERT_EQUAL(stat_bucket(UINT64_MAX), STAT_BUCKETS - 1);
	/* every bound agrees with the labels the master renders */
	for (unsigned b = 0; b + 1 < STAT_BUCKETS; b++) {
		uint64_t bound = stat_bucket_bound_us(b);
		char le[32];

		CU_ASSERT_EQUAL(stat_bucket(bound), b);
		CU_ASSERT_EQUAL(stat_bucket(bound + 1), b + 1);
		snprintf(le, sizeof le, "%g", (double)bound / 1e6);
		CU_ASSERT_STRING_EQUAL(stat_bucket_le(b), le);
	}
	CU_ASSERT_STRING_EQUAL(stat_bucket_le(STAT_BUCKETS - 1), "+Inf");
	CU_ASSERT_EQUAL(stat_bucket_bound_us(STAT_BUCKETS - 1), UINT64_MAX);
}

static void test_durations_turn_into_whole_microseconds(void)
{
	CU_ASSERT_EQUAL(stat_us(0.0015), 1500);
	CU_ASSERT_EQUAL(stat_us(2.0), 2000000);
	CU_ASSERT_EQUAL(stat_us(0.0), 0);
	CU_ASSERT_EQUAL(stat_us(-0.25), 0); /* a clock step never underflows */
}

/* ---- through route generations --------------------------------------------- */

#define CFG_HEAD                                                                                                       \
	"listeners = ( { address = \"127.0.0.1:8080\"; } );\n"                                                         \
	"upstreams = (\n"                                                                                              \
	"  { name = \"api\"; servers = ( { address = \"10.0.0.1:80\"; }, { address = \"10.0.0.2:80\"; } ); },\n"       \
	"  { name = \"web\"; servers = ( { address = \"10.0.0.3:80\"; } ); }\n"                                        \
	");\n"

/* The stat index of the route (host as compiled, path) in the current table. */
static int route_stat(struct shm_segment *seg, const char *host, const char *path)
{
	const struct route_table *t = &seg->gens[atomic_load(&seg->gen_current)];

	for (uint32_t i = 0; i < t->nroutes; i++)
		if (strcmp(route_host(t, &route_entries(t)[i]), host) == 0 && strcmp(route_path(t, &route_entries(t)[i]), path) == 0)
			return route_entries(t)[i].stat;
	return -1;
}

static int server_stat(struct shm_segment *seg, const char *upstream, const char *addr)
{
	const struct route_table *t = &seg->gens[atomic_load(&seg->gen_current)];

	for (uint32_t u = 0; u < t->nupstreams; u++)
		for (uint32_t k = 0; k < route_upstreams(t)[u].nservers; k++) {
			const struct route_server *s = &route_servers(t)[route_upstreams(t)[u].first_server + k];
			if (strcmp(route_upstreams(t)[u].name, upstream) == 0 && strcmp(s->text, addr) == 0)
				return s->stat;
		}
	return -1;
}

static void test_a_reload_that_reorders_the_config_keeps_every_index(void)
{
	struct config *one =
	    unit_config_load(CFG_HEAD "routes = ( { host = \"api.example.com\"; path = \"/v1/\"; upstream = \"api\"; },\n"
	                  "  { path = \"/\"; upstream = \"web\"; } );\n");
	struct config *two =
	    unit_config_load("listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	         "upstreams = (\n"
	         "  { name = \"web\"; servers = ( { address = \"10.0.0.3:80\"; } ); },\n"
	         "  { name = \"api\"; servers = ( { address = \"10.0.0.9:80\"; }, { address = \"10.0.0.2:80\"; },\n"
	         "                              { address = \"10.0.0.1:80\"; } ); }\n"
	         ");\n"
	         "routes = ( { host = \"*.example.com\"; upstream = \"web\"; },\n"
	         "  { path = \"/\"; upstream = \"web\"; },\n"
	         "  { host = \"API.example.com\"; path = \"/v1/\"; upstream = \"api\"; } );\n");
	int fd;
	struct shm_segment *seg = shm_create(&fd);
	int r_api, r_any, s1, s2, s3;

	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	CU_ASSERT_FATAL(route_publish(seg, one) != 0);
	r_api = route_stat(seg, "api.example.com", "/v1/");
	r_any = route_stat(seg, "", "/");
	s1 = server_stat(seg, "api", "10.0.0.1:80");
	s2 = server_stat(seg, "api", "10.0.0.2:80");
	s3 = server_stat(seg, "web", "10.0.0.3:80");
	CU_ASSERT(r_api >= 0 && r_any >= 0 && r_api != r_any);
	CU_ASSERT(s1 >= 0 && s2 >= 0 && s3 >= 0 && s1 != s2 && s2 != s3 && s1 != s3);

	/* another order of routes, upstreams and servers, one route and one
	 * server more: the old keys keep their indices, the new get new ones */
	CU_ASSERT_FATAL(route_publish(seg, two) != 0);
	CU_ASSERT_EQUAL(route_stat(seg, "api.example.com", "/v1/"), r_api);
	CU_ASSERT_EQUAL(route_stat(seg, "", "/"), r_any);
	CU_ASSERT_EQUAL(route_stat(seg, ".example.com", "/"), 2);
	CU_ASSERT_EQUAL(server_stat(seg, "api", "10.0.0.1:80"), s1);
	CU_ASSERT_EQUAL(server_stat(seg, "api", "10.0.0.2:80"), s2);
	CU_ASSERT_EQUAL(server_stat(seg, "web", "10.0.0.3:80"), s3);
	CU_ASSERT_EQUAL(server_stat(seg, "api", "10.0.0.9:80"), 3);
	/* and back: nothing new is appended */
	CU_ASSERT_FATAL(route_publish(seg, one) != 0);
	CU_ASSERT_EQUAL(route_stat(seg, "api.example.com", "/v1/"), r_api);
	CU_ASSERT_EQUAL(atomic_load(&seg->keys.nroutes), 3);
	CU_ASSERT_EQUAL(atomic_load(&seg->keys.nservers), 4);

	unit_config_free(one);
	unit_config_free(two);
	munmap(seg, SHM_SIZE);
	close(fd);
}

static void test_a_dead_workers_per_key_counters_are_folded_not_lost(void)
{
	struct config *cfg = unit_config_load(CFG_HEAD "routes = ( { path = \"/\"; upstream = \"api\"; } );\n");
	struct shm_route_counters *r = calloc(STAT_ROUTES, sizeof(*r));
	struct shm_server_counters *s = calloc(STAT_SERVERS, sizeof(*s));
	int fd, w;
	struct shm_segment *seg = shm_create(&fd);

	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_FATAL(route_publish(seg, cfg) != 0);
	w = shm_slot_claim(seg);
	CU_ASSERT_FATAL(w >= 0);
	SHM_ADD(&seg->slots[w].routes[0], requests, 7);
	SHM_ADD(&seg->slots[w].routes[0], duration[stat_bucket(1234)], 7);
	SHM_ADD(&seg->slots[w].routes[STAT_ROUTE_OTHER], requests, 2);
	SHM_ADD(&seg->slots[w].servers[1], responses[1], 5);
	SHM_ADD(&seg->retired_routes[0], requests, 100);

	shm_sum_keys(seg, r, s);
	CU_ASSERT_EQUAL(r[0].requests, 107);
	CU_ASSERT_EQUAL(r[0].duration[0], 7);
	CU_ASSERT_EQUAL(r[STAT_ROUTE_OTHER].requests, 2);
	CU_ASSERT_EQUAL(s[1].responses[1], 5);

	shm_slot_retire(seg, w);
	CU_ASSERT_EQUAL(atomic_load(&seg->slots[w].state), SHM_SLOT_FREE);
	CU_ASSERT_EQUAL(seg->slots[w].routes[0].requests, 0);
	CU_ASSERT_EQUAL(seg->slots[w].servers[1].responses[1], 0);
	shm_sum_keys(seg, r, s);
	CU_ASSERT_EQUAL(r[0].requests, 107);
	CU_ASSERT_EQUAL(r[0].duration[0], 7);
	CU_ASSERT_EQUAL(r[STAT_ROUTE_OTHER].requests, 2);
	CU_ASSERT_EQUAL(s[1].responses[1], 5);

	free(r);
	free(s);
	unit_config_free(cfg);
	munmap(seg, SHM_SIZE);
	close(fd);
}

static void test_a_reload_keeps_admin_overrides_of_servers_that_stay(void)
{
	struct config *both = unit_config_load(CFG_HEAD "routes = ( { path = \"/\"; upstream = \"api\"; } );\n");
	struct config *fewer =
	    unit_config_load("listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	         "upstreams = ( { name = \"api\"; servers = ( { address = \"10.0.0.1:80\"; } ); } );\n"
	         "routes = ( { path = \"/\"; upstream = \"api\"; } );\n");
	int fd, s1, s2;
	struct shm_segment *seg = shm_create(&fd);

	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	CU_ASSERT_FATAL(route_publish(seg, both) != 0);
	s1 = server_stat(seg, "api", "10.0.0.1:80");
	s2 = server_stat(seg, "api", "10.0.0.2:80");
	atomic_store(&seg->admin[s1], SHM_ADMIN_WORD(SHM_ADMIN_DOWN, 0));
	atomic_store(&seg->admin[s2], SHM_ADMIN_WORD(SHM_ADMIN_UP, 3));

	/* the same servers: both overrides stay */
	CU_ASSERT_FATAL(route_publish(seg, both) != 0);
	CU_ASSERT_EQUAL(shm_admin(seg, (uint16_t)s1), SHM_ADMIN_WORD(SHM_ADMIN_DOWN, 0));
	CU_ASSERT_EQUAL(shm_admin(seg, (uint16_t)s2), SHM_ADMIN_WORD(SHM_ADMIN_UP, 3));
	/* 10.0.0.2 leaves the config: its override goes; 10.0.0.1 keeps its */
	CU_ASSERT_FATAL(route_publish(seg, fewer) != 0);
	CU_ASSERT_EQUAL(SHM_ADMIN_STATE(shm_admin(seg, (uint16_t)s1)), SHM_ADMIN_DOWN);
	CU_ASSERT_EQUAL(shm_admin(seg, (uint16_t)s2), 0);
	/* and it comes back without one, under its old index */
	CU_ASSERT_FATAL(route_publish(seg, both) != 0);
	CU_ASSERT_EQUAL(server_stat(seg, "api", "10.0.0.2:80"), s2);
	CU_ASSERT_EQUAL(shm_admin(seg, (uint16_t)s2), 0);

	unit_config_free(both);
	unit_config_free(fewer);
	munmap(seg, SHM_SIZE);
	close(fd);
}


static void test_a_full_table_reuses_an_index_no_live_key_holds(void)
{
	struct stat_keys *k = calloc(1, sizeof(*k));
	uint8_t *live = calloc(STAT_SERVERS, 1);
	char addr[32];
	int reclaimed;

	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_PTR_NOT_NULL_FATAL(live);
	for (int i = 0; i < STAT_SERVER_OTHER; i++) {
		snprintf(addr, sizeof addr, "10.0.%d.%d:80", i / 250, i % 250);
		CU_ASSERT_EQUAL(stat_server_index(k, "api", addr, live, &reclaimed), i);
		CU_ASSERT_FALSE(reclaimed);
	}
	/* every key live: a new one can only share "other" */
	CU_ASSERT_EQUAL(stat_server_index(k, "api", "10.9.9.9:80", live, &reclaimed), STAT_SERVER_OTHER);
	CU_ASSERT_FALSE(reclaimed);
	/* 7 and 300 left every live generation: the lowest is taken, rewritten */
	live[300] = live[7] = 0;
	CU_ASSERT_EQUAL(stat_server_index(k, "web", "10.9.9.9:80", live, &reclaimed), 7);
	CU_ASSERT_TRUE(reclaimed);
	CU_ASSERT_STRING_EQUAL(k->servers[7].upstream, "web");
	CU_ASSERT_STRING_EQUAL(k->servers[7].addr, "10.9.9.9:80");
	CU_ASSERT_EQUAL(live[7], 1);
	CU_ASSERT_EQUAL(atomic_load(&k->nservers), STAT_SERVER_OTHER);
	/* a key not live but still in the table keeps its own index, unzeroed */
	CU_ASSERT_EQUAL(stat_server_index(k, "api", "10.0.1.50:80", live, &reclaimed), 300);
	CU_ASSERT_FALSE(reclaimed);
	CU_ASSERT_EQUAL(stat_server_index(k, "api", "10.9.9.8:80", live, &reclaimed), STAT_SERVER_OTHER);
	/* the same for routes */
	memset(live, 0, STAT_SERVERS);
	for (int i = 0; i < STAT_ROUTE_OTHER; i++) {
		snprintf(addr, sizeof addr, "/r%d/", i);
		CU_ASSERT_EQUAL(stat_route_index(k, CONFIG_HOST_ANY, "", addr, live, &reclaimed), i);
	}
	live[200] = 0;
	CU_ASSERT_EQUAL(stat_route_index(k, CONFIG_HOST_EXACT, "a.example", "/", live, &reclaimed), 200);
	CU_ASSERT_TRUE(reclaimed);
	CU_ASSERT_STRING_EQUAL(k->routes[200].host, "a.example");
	CU_ASSERT_EQUAL(stat_route_index(k, CONFIG_HOST_EXACT, "b.example", "/", live, &reclaimed), STAT_ROUTE_OTHER);
	free(live);
	free(k);
}

/* A config with one route "/rN/" to upstream "churn" of <per> servers
 * 10.N/250.N%250.0..per-1:80, new at every N. */
static struct config *churn_config(int n, int per)
{
	char text[4096];
	int len = snprintf(text, sizeof text,
	                   "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	                   "upstreams = ( { name = \"stay\"; servers = ( { address = \"10.255.0.1:80\"; } ); },\n"
	                   "  { name = \"churn\"; servers = (");

	for (int i = 0; i < per; i++)
		len += snprintf(text + len, sizeof text - (size_t)len, "%s { address = \"10.%d.%d.%d:80\"; }",
		                i ? "," : "", 1 + n / 250, n % 250, i);
	snprintf(text + len, sizeof text - (size_t)len,
	         " ); } );\nroutes = ( { path = \"/r%d/\"; upstream = \"churn\"; }, { path = \"/\"; upstream = \"stay\"; } );\n",
	         n);
	return unit_config_load(text);
}

static void test_reload_churn_reclaims_the_keys_of_routes_and_servers_that_left(void)
{
	int fd, w;
	struct shm_segment *seg = shm_create(&fd);
	int stay_route = -1, stay_server = -1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	w = shm_slot_claim(seg);
	CU_ASSERT_FATAL(w >= 0);
	atomic_store(&seg->slots[w].pid, 4242);
	/* 300 reloads of 8 new servers and one new route each: 2,400 server
	 * keys and 300 route keys over time, 9 and 2 live at once */
	for (int n = 0; n < 300; n++) {
		struct config *cfg = churn_config(n, 8);
		const struct route_table *t;
		char path[32];
		int r;

		CU_ASSERT_FATAL(route_publish(seg, cfg) != 0);
		t = &seg->gens[atomic_load(&seg->gen_current)];
		/* the worker moves on to it at once, as an idle one does */
		atomic_store(&seg->slots[w].gen_seen, t->id);
		snprintf(path, sizeof path, "/r%d/", n);
		r = route_stat(seg, "", path);
		CU_ASSERT_FATAL(r >= 0);
		CU_ASSERT_NOT_EQUAL(r, STAT_ROUTE_OTHER);
		/* a new series starts at zero, whatever the index held before */
		CU_ASSERT_EQUAL(seg->slots[w].routes[r].requests, 0);
		CU_ASSERT_EQUAL(seg->retired_routes[r].requests, 0);
		SHM_ADD(&seg->slots[w].routes[r], requests, 1);
		SHM_ADD(&seg->retired_routes[r], requests, 1);
		for (int i = 0; i < 8; i++) {
			char addr[32];
			int s;

			snprintf(addr, sizeof addr, "10.%d.%d.%d:80", 1 + n / 250, n % 250, i);
			s = server_stat(seg, "churn", addr);
			CU_ASSERT_FATAL(s >= 0);
			CU_ASSERT_NOT_EQUAL(s, STAT_SERVER_OTHER);
			CU_ASSERT_EQUAL(seg->slots[w].servers[s].requests, 0);
			CU_ASSERT_EQUAL(seg->retired_servers[s].requests, 0);
			CU_ASSERT_EQUAL(shm_admin(seg, (uint16_t)s), 0);
			SHM_ADD(&seg->slots[w].servers[s], requests, 1);
			SHM_ADD(&seg->retired_servers[s], responses[4], 1);
			atomic_store(&seg->admin[s], SHM_ADMIN_WORD(SHM_ADMIN_DRAIN, 0));
		}
		/* the keys that stay keep their index and their counts */
		if (n == 0) {
			stay_route = route_stat(seg, "", "/");
			stay_server = server_stat(seg, "stay", "10.255.0.1:80");
		}
		CU_ASSERT_EQUAL(route_stat(seg, "", "/"), stay_route);
		CU_ASSERT_EQUAL(server_stat(seg, "stay", "10.255.0.1:80"), stay_server);
		SHM_ADD(&seg->slots[w].servers[stay_server], requests, 1);
		CU_ASSERT_EQUAL(seg->slots[w].servers[stay_server].requests, (uint64_t)n + 1);
		unit_config_free(cfg);
	}
	munmap(seg, SHM_SIZE);
	close(fd);
}

static void test_a_key_a_live_worker_may_count_into_is_not_reclaimed(void)
{
	int fd, w, n;
	struct shm_segment *seg = shm_create(&fd);
	struct config *cfg;
	int held_route, held_server, first;

	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	w = shm_slot_claim(seg);
	CU_ASSERT_FATAL(w >= 0);
	atomic_store(&seg->slots[w].pid, 4242);
	cfg = churn_config(0, 8);
	CU_ASSERT_FATAL(route_publish(seg, cfg) != 0);
	unit_config_free(cfg);
	held_route = route_stat(seg, "", "/r0/");
	held_server = server_stat(seg, "churn", "10.1.0.0:80");
	/* a worker still on generation 1 (it took no request since) */
	atomic_store(&seg->slots[w].gen_seen, seg->gens[atomic_load(&seg->gen_current)].id);
	SHM_ADD(&seg->slots[w].servers[held_server], requests, 5);
	SHM_ADD(&seg->slots[w].routes[held_route], requests, 5);
	/* far past both bounds: every index of generation 1 stays its own */
	for (n = 1; n < 300; n++) {
		cfg = churn_config(n, 8);
		CU_ASSERT_FATAL(route_publish(seg, cfg) != 0);
		unit_config_free(cfg);
		const struct route_table *t = &seg->gens[atomic_load(&seg->gen_current)];
		for (uint32_t i = 0; i < t->nroutes; i++) {
			CU_ASSERT_NOT_EQUAL(route_entries(t)[i].stat, held_route);
			CU_ASSERT_NOT_EQUAL(route_entries(t)[i].stat, STAT_ROUTE_OTHER);
		}
		for (uint32_t i = 0; i < t->nservers; i++) {
			CU_ASSERT_NOT_EQUAL(route_servers(t)[i].stat, held_server);
			CU_ASSERT_NOT_EQUAL(route_servers(t)[i].stat, STAT_SERVER_OTHER);
		}
	}
	CU_ASSERT_EQUAL(atomic_load(&seg->keys.nservers), STAT_SERVER_OTHER); /* it was full */
	CU_ASSERT_EQUAL(atomic_load(&seg->keys.nroutes), STAT_ROUTE_OTHER);
	CU_ASSERT_EQUAL(seg->slots[w].servers[held_server].requests, 5);
	CU_ASSERT_EQUAL(seg->slots[w].routes[held_route].requests, 5);
	/* the worker moves on: the lowest free indices, generation 1's, go to
	 * the next new keys, counted from zero */
	atomic_store(&seg->slots[w].gen_seen, seg->gens[atomic_load(&seg->gen_current)].id);
	first = n;
	cfg = churn_config(first, 8);
	CU_ASSERT_FATAL(route_publish(seg, cfg) != 0);
	unit_config_free(cfg);
	{
		char addr[32], path[32];

		snprintf(addr, sizeof addr, "10.%d.%d.0:80", 1 + first / 250, first % 250);
		snprintf(path, sizeof path, "/r%d/", first);
		CU_ASSERT_EQUAL(server_stat(seg, "churn", addr), held_server);
		CU_ASSERT_EQUAL(route_stat(seg, "", path), held_route);
	}
	CU_ASSERT_EQUAL(seg->slots[w].servers[held_server].requests, 0);
	CU_ASSERT_EQUAL(seg->slots[w].routes[held_route].requests, 0);
	munmap(seg, SHM_SIZE);
	close(fd);
}

static void test_the_admin_word_packs_state_and_weight(void)
{
	uint32_t w = SHM_ADMIN_WORD(SHM_ADMIN_DRAIN, 1000);

	CU_ASSERT_EQUAL(SHM_ADMIN_STATE(w), SHM_ADMIN_DRAIN);
	CU_ASSERT_EQUAL(SHM_ADMIN_WEIGHT(w), 1000);
	CU_ASSERT_EQUAL(SHM_ADMIN_WORD(SHM_ADMIN_UP, 0), 0); /* no override at all */
	CU_ASSERT_EQUAL(SHM_ADMIN_STATE(SHM_ADMIN_WORD(SHM_ADMIN_DOWN, 7)), SHM_ADMIN_DOWN);
}

static const struct unit_test tests[] = {
    {"a route key gets the next index once and the same index ever after", test_a_route_key_keeps_its_index},
    {"keys past the bound share the \"other\" index and the others keep theirs",
     test_keys_past_the_bound_share_the_other_index},
    {"a server key is its upstream name and its address", test_a_server_key_is_its_upstream_and_address},
    {"a duration lands in the first bucket whose bound holds it",
     test_a_duration_lands_in_the_first_bucket_whose_bound_holds_it},
    {"durations turn into whole microseconds, never negative", test_durations_turn_into_whole_microseconds},
    {"a reload that reorders routes, upstreams and servers keeps every stat index",
     test_a_reload_that_reorders_the_config_keeps_every_index},
    {"a dead worker's per-key counters are folded into the retired block, not lost",
     test_a_dead_workers_per_key_counters_are_folded_not_lost},
    {"a reload keeps the admin overrides of servers that stay and drops the others",
     test_a_reload_keeps_admin_overrides_of_servers_that_stay},
    {"the admin word packs a state and a weight; zero means no override", test_the_admin_word_packs_state_and_weight},
    {"a full key table reuses an index no live key holds, then shares \"other\"",
     test_a_full_table_reuses_an_index_no_live_key_holds},
    {"300 reloads of new routes and servers reclaim the keys that left; new series start at zero",
     test_reload_churn_reclaims_the_keys_of_routes_and_servers_that_left},
    {"a key a live worker may still count into is never reclaimed",
     test_a_key_a_live_worker_may_count_into_is_not_reclaimed},
};

UNIT_MAIN_WITH("shm/stat", tests, unit_config_init, unit_config_clean)
