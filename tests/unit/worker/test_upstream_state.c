/*
 * test_upstream_state.c: a worker's per-server state by identity
 * (worker/up/upstream_state.c): a table generation's servers map to states
 * keyed by group name and address, so a reload that reorders, adds or
 * removes servers keeps the state of those that stay and never hands one
 * server's state to another, even at the same index; states of servers
 * that left live while a held table maps them; a full hash falls back to
 * the shared overflow state. And which connect errors are our own.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm/route.h"
#include "shm/shm.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_config.h"
#include "worker/up/up.h"

static int fd;

static int suite_init(void)
{
	if (unit_config_init() < 0)
		return -1;
	wk.loop = ev_default_loop(0);
	wk.seg = shm_create(&fd);
	return wk.loop && wk.seg ? 0 : -1;
}

static int suite_clean(void)
{
	upstream_free_states();
	munmap(wk.seg, SHM_SIZE);
	close(fd);
	return unit_config_clean();
}

/* Publishes <text> and syncs the worker to it, as txn_start() does. */
static const struct route_table *publish(const char *text, int hold)
{
	struct config *cfg = unit_config_load(text);
	const struct route_table *t;

	CU_ASSERT_FATAL(route_publish(wk.seg, cfg) != 0);
	unit_config_free(cfg);
	t = &wk.seg->gens[atomic_load(&wk.seg->gen_current)];
	if (hold)
		worker_table_hold(t);
	upstream_sync_table(t);
	return t;
}

/* Server <addr> of group <group> in <t>: its index. */
static uint32_t index_of(const struct route_table *t, const char *group, const char *addr)
{
	for (uint32_t i = 0; i < t->nservers; i++)
		if (strcmp(route_upstreams(t)[route_servers(t)[i].upstream].name, group) == 0 &&
		    strcmp(route_servers(t)[i].text, addr) == 0)
			return i;
	CU_FAIL_FATAL("server not in the table");
	return 0;
}

#define HEAD "listeners = ( { address = \"127.0.0.1:8080\"; } );\n"

static void test_a_reload_keeps_the_state_of_servers_that_stay_and_never_shares_one(void)
{
	const struct route_table *t1 =
	    publish(HEAD "upstreams = ( { name = \"a\"; servers = ( { address = \"10.0.0.1:80\"; }, { address = "
	                 "\"10.0.0.2:80\"; } ); },\n"
	                 "  { name = \"b\"; servers = ( { address = \"10.0.0.3:80\"; } ); } );\n"
	                 "routes = ( { path = \"/\"; upstream = \"a\"; } );\n",
	            1);
	struct up_server *a1 = upstream_state(t1, index_of(t1, "a", "10.0.0.1:80"));
	struct up_server *a2 = upstream_state(t1, index_of(t1, "a", "10.0.0.2:80"));
	struct up_server *b3 = upstream_state(t1, index_of(t1, "b", "10.0.0.3:80"));

	CU_ASSERT(a1 != a2 && a2 != b3 && a1 != b3);
	CU_ASSERT_STRING_EQUAL(a1->group, "a");
	CU_ASSERT_STRING_EQUAL(b3->addr, "10.0.0.3:80");
	a2->fails = 2;
	a2->cw = 7;
	b3->fails = 1;

	/* b first, a new server in b at a2's old index, 10.0.0.1 gone, and
	 * b's address also in a: another server, another state */
	const struct route_table *t2 = publish(
	    HEAD
	    "upstreams = ( { name = \"b\"; servers = ( { address = \"10.0.0.3:80\"; }, { address = \"10.0.0.9:80\"; } "
	    "); },\n"
	    "  { name = \"a\"; servers = ( { address = \"10.0.0.2:80\"; }, { address = \"10.0.0.3:80\"; } ); } );\n"
	    "routes = ( { path = \"/\"; upstream = \"a\"; } );\n",
	    0);
	CU_ASSERT_EQUAL(index_of(t2, "b", "10.0.0.9:80"), index_of(t1, "a", "10.0.0.2:80"));
	CU_ASSERT_PTR_EQUAL(upstream_state(t2, index_of(t2, "a", "10.0.0.2:80")), a2);
	CU_ASSERT_EQUAL(a2->fails, 2);
	CU_ASSERT_EQUAL(a2->cw, 7);
	CU_ASSERT_PTR_EQUAL(upstream_state(t2, index_of(t2, "b", "10.0.0.3:80")), b3);
	CU_ASSERT_EQUAL(b3->fails, 1);
	struct up_server *b9 = upstream_state(t2, index_of(t2, "b", "10.0.0.9:80"));
	struct up_server *a3 = upstream_state(t2, index_of(t2, "a", "10.0.0.3:80"));
	CU_ASSERT(b9 != a2 && b9 != a1 && a3 != b3 && a3 != a1);
	CU_ASSERT_EQUAL(b9->fails, 0);
	CU_ASSERT_EQUAL(b9->cw, 0);
	CU_ASSERT_EQUAL(a2->gen, t2->id);
	/* T1 is still held: its map still leads to the states it had */
	CU_ASSERT_PTR_EQUAL(upstream_state(t1, index_of(t1, "a", "10.0.0.1:80")), a1);
	CU_ASSERT_STRING_EQUAL(a1->addr, "10.0.0.1:80");
	CU_ASSERT_EQUAL(a1->gen, t1->id);

	/* once T1 is let go, the next sync frees the state only it mapped */
	worker_table_release(t1);
	const struct route_table *t3 =
	    publish(HEAD "upstreams = ( { name = \"a\"; servers = ( { address = \"10.0.0.2:80\"; } ); } );\n"
	                 "routes = ( { path = \"/\"; upstream = \"a\"; } );\n",
	            0);
	CU_ASSERT_EQUAL(a1->gen, 0);
	CU_ASSERT_EQUAL(a1->tomb, 1);
	CU_ASSERT_PTR_EQUAL(upstream_state(t3, 0), a2);
	/* a freed slot is found again past its tombstone, and reused */
	const struct route_table *t4 = publish(HEAD "upstreams = ( { name = \"a\"; servers = ( { address = "
	                                            "\"10.0.0.2:80\"; }, { address = \"10.0.0.1:80\"; } ); } );\n"
	                                            "routes = ( { path = \"/\"; upstream = \"a\"; } );\n",
	                                       0);
	CU_ASSERT_PTR_EQUAL(upstream_state(t4, 0), a2);
	CU_ASSERT_STRING_EQUAL(upstream_state(t4, 1)->addr, "10.0.0.1:80");
	CU_ASSERT_EQUAL(upstream_state(t4, 1)->fails, 0);
}

/* A config of group "g<n>" with 1024 servers 10.<n>.x.y:80. */
static const struct route_table *publish_full(int n)
{
	static char text[80000];
	int len = snprintf(text, sizeof text, HEAD "upstreams = ( { name = \"g%d\"; servers = (", n);

	for (int i = 0; i < CONFIG_MAX_SERVERS; i++)
		len += snprintf(text + len, sizeof text - (size_t)len, "%s { address = \"10.%d.%d.%d:80\"; }",
		                i ? "," : "", n, i / 250, i % 250);
	snprintf(text + len, sizeof text - (size_t)len,
	         " ); } );\nroutes = ( { path = \"/\"; upstream = \"g%d\"; } );\n", n);
	return publish(text, 1);
}

static void test_a_full_hash_maps_the_rest_to_the_overflow_state(void)
{
	const struct route_table *t[5];
	int overflow = 0;

	/* five full tables held at once: 5,120 identities, 4,096 slots */
	for (int n = 0; n < 5; n++)
		t[n] = publish_full(n + 1);
	for (int n = 0; n < 5; n++)
		for (uint32_t i = 0; i < t[n]->nservers; i++) {
			struct up_server *s = upstream_state(t[n], i);

			if (s == &wk.servers[UPSTREAM_STATE_OVERFLOW]) {
				overflow++;
				continue;
			}
			CU_ASSERT_STRING_EQUAL(s->addr, route_servers(t[n])[i].text);
		}
	CU_ASSERT(overflow >= 5 * CONFIG_MAX_SERVERS - UPSTREAM_STATES);
	CU_ASSERT_EQUAL(wk.servers[UPSTREAM_STATE_OVERFLOW].keepalive, 0); /* never pools */
	for (int n = 0; n < 5; n++)
		worker_table_release(t[n]);
}

static void test_shortages_of_our_own_are_told_from_the_servers_faults(void)
{
	CU_ASSERT_TRUE(upstream_errno_local(EADDRNOTAVAIL));
	CU_ASSERT_TRUE(upstream_errno_local(EMFILE));
	CU_ASSERT_TRUE(upstream_errno_local(ENFILE));
	CU_ASSERT_TRUE(upstream_errno_local(ENOBUFS));
	CU_ASSERT_TRUE(upstream_errno_local(ENOMEM));
	CU_ASSERT_TRUE(upstream_errno_local(EAGAIN));
	CU_ASSERT_FALSE(upstream_errno_local(ECONNREFUSED));
	CU_ASSERT_FALSE(upstream_errno_local(ETIMEDOUT));
	CU_ASSERT_FALSE(upstream_errno_local(EHOSTUNREACH));
	CU_ASSERT_FALSE(upstream_errno_local(ENETUNREACH));
	CU_ASSERT_FALSE(upstream_errno_local(ECONNRESET));
}

static const struct unit_test tests[] = {
    {"a reload keeps the state of servers that stay and never shares one between servers",
     test_a_reload_keeps_the_state_of_servers_that_stay_and_never_shares_one},
    {"a full hash maps the servers past it to the overflow state, which never pools",
     test_a_full_hash_maps_the_rest_to_the_overflow_state},
    {"shortages of our own are told from the server's faults",
     test_shortages_of_our_own_are_told_from_the_servers_faults},
};

UNIT_MAIN_WITH("worker/upstream_state", tests, suite_init, suite_clean)
