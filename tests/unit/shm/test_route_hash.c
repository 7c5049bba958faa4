/*
 * test_route_hash.c: the tables of ring_hash and maglev groups the master
 * builds into a generation (shm/route_hash.c): sizes, weights, and that a
 * server's place follows its address, not its position in the list.
 */
#include <stdlib.h>
#include <string.h>

#include "shm/balance.h"
#include "shm/route.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"

static struct route_table table;
static void *block;

/* Compiles a config of groups "r" (ring_hash), "m" (maglev) and "p" (rr),
 * each of the servers <servers> (a libconfig list body). */
static void compile(const char *servers)
{
	char text[2048];
	struct config *cfg;

	snprintf(text, sizeof text,
	         "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"
	         "upstreams = ( { name = \"r\"; balance = \"ring_hash\"; servers = ( %s ); },\n"
	         "  { name = \"m\"; balance = \"maglev\"; servers = ( %s ); },\n"
	         "  { name = \"p\"; servers = ( %s ); } );\n"
	         "routes = ( { upstream = \"r\"; } );\n",
	         servers, servers, servers);
	cfg = unit_config_load(text);
	free(block);
	block = malloc(route_size(cfg));
	CU_ASSERT_PTR_NOT_NULL_FATAL(block);
	CU_ASSERT_EQUAL_FATAL(route_compile(&table, block, route_size(cfg), cfg), 0);
	unit_config_free(cfg);
}

static const struct route_upstream *group(int i)
{
	return &route_upstreams(&table)[i];
}

/* The server entry <e> of group <g> names, by the last digit of its
 * address ("127.0.0.1:1003": '3'). */
static char entry_addr(const struct route_upstream *g, uint64_t e)
{
	const char *text = route_servers(&table)[g->first_server + (uint32_t)(e & 0xff)].text;

	return text[strlen(text) - 1];
}

#define WEIGHTED                                                                                                       \
	"{ address = \"127.0.0.1:1001\"; }, { address = \"127.0.0.1:1002\"; }, "                                      \
	"{ address = \"127.0.0.1:1003\"; weight = 2; }"

static void test_the_ring_holds_points_by_weight_sorted(void)
{
	const struct route_upstream *r;
	const uint64_t *tab;
	uint32_t count[3] = {0};

	compile(WEIGHTED);
	r = group(0);
	tab = route_hash_entries(&table) + r->hash_first;
	/* 256 points for the least weight, in proportion above it */
	CU_ASSERT_EQUAL(r->hash_n, 256 + 256 + 512);
	for (uint32_t i = 0; i < r->hash_n; i++) {
		CU_ASSERT((tab[i] & 0xff) < 3);
		count[tab[i] & 0xff]++;
		if (i)
			CU_ASSERT(tab[i - 1] <= tab[i]);
	}
	CU_ASSERT(count[0] == 256 && count[1] == 256 && count[2] == 512);
	/* a group on rr has no table */
	CU_ASSERT_EQUAL(group(2)->hash_n, 0);
}

static void test_maglev_fills_a_prime_table_by_weight(void)
{
	const struct route_upstream *m;
	const uint64_t *tab;
	uint32_t count[3] = {0};

	compile(WEIGHTED);
	m = group(1);
	tab = route_hash_entries(&table) + m->hash_first;
	CU_ASSERT_EQUAL(m->hash_n, 4099); /* the first prime from 4096 */
	for (uint32_t i = 0; i < m->hash_n; i++) {
		CU_ASSERT_FATAL(tab[i] < 3);
		count[tab[i]]++;
	}
	/* 1:1:2 to within 1 % of the table */
	CU_ASSERT(abs((int)count[0] - 1025) < 41 && abs((int)count[1] - 1025) < 41 && abs((int)count[2] - 2049) < 41);
}

static void test_a_servers_place_follows_its_address_not_its_position(void)
{
	uint64_t ring[1024], mag[4099];
	const struct route_upstream *r, *m;

	compile(WEIGHTED);
	memcpy(ring, route_hash_entries(&table) + group(0)->hash_first, sizeof ring);
	memcpy(mag, route_hash_entries(&table) + group(1)->hash_first, sizeof mag);
	char before_r[1024], before_m[4099];

	for (int i = 0; i < 1024; i++)
		before_r[i] = entry_addr(group(0), ring[i]);
	for (int i = 0; i < 4099; i++)
		before_m[i] = entry_addr(group(1), mag[i]);
	/* the same servers in another order: the same points and entries,
	 * each naming the same address */
	compile("{ address = \"127.0.0.1:1003\"; weight = 2; }, { address = \"127.0.0.1:1001\"; }, "
	        "{ address = \"127.0.0.1:1002\"; }");
	r = group(0);
	m = group(1);
	for (int i = 0; i < 1024; i++) {
		uint64_t e = route_hash_entries(&table)[r->hash_first + (uint32_t)i];

		CU_ASSERT_EQUAL(e >> 32, ring[i] >> 32);
		CU_ASSERT_EQUAL(entry_addr(r, e), before_r[i]);
	}
	for (int i = 0; i < 4099; i++)
		CU_ASSERT_EQUAL(entry_addr(m, route_hash_entries(&table)[m->hash_first + (uint32_t)i]), before_m[i]);
}

static int clean(void)
{
	free(block);
	return unit_config_clean();
}

static const struct unit_test tests[] = {
    {"the ring holds points by weight, sorted; rr groups have no table", test_the_ring_holds_points_by_weight_sorted},
    {"maglev fills a table of a prime size by weight", test_maglev_fills_a_prime_table_by_weight},
    {"a server's place follows its address, not its position", test_a_servers_place_follows_its_address_not_its_position},
};

UNIT_MAIN_WITH("shm/route_hash", tests, unit_config_init, clean)
