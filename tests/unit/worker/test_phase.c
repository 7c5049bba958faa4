/*
 * Unit tests for worker/core/phase.c: the walk over the fixed phases and the
 * meaning of each return code.
 */
#include <CUnit/CUnit.h>
#include <string.h>

#include "worker/core/phase.h"
#include "tests/unit/unit.h"

/* The walk knows a stream only by its pointer: a stand-in will do. */
struct txn {
	char trace[64];
	int n;
	int freed;
};

static void mark(struct txn *t, char c)
{
	CU_ASSERT_FALSE(t->freed); /* nothing runs on a stream that is gone */
	t->trace[t->n++] = c;
}

#define H(name, ch, rc)                                                 \
	static enum ph_rc name(struct txn *t, const void *conf)             \
	{                                                                   \
		(void)conf;                                                 \
		mark(t, ch);                                                \
		return rc;                                                  \
	}

H(route, 'r', PH_CONTINUE)
H(access, 'a', PH_CONTINUE)
H(filter, 'f', PH_CONTINUE)
H(pick, 'p', PH_CONTINUE)
H(connect, 'c', PH_CONTINUE)
H(resp, 's', PH_CONTINUE)
H(log_a, 'l', PH_CONTINUE)
H(log_b, 'm', PH_CONTINUE)
H(deny, 'D', PH_ANSWER)
H(reset, 'X', PH_ABORT)

static enum ph_rc wait_once(struct txn *t, const void *conf)
{
	(void)conf;
	mark(t, 'W');
	return PH_WAIT;
}

static enum ph_rc wait_and_free(struct txn *t, const void *conf)
{
	(void)conf;
	mark(t, 'F');
	t->freed = 1; /* the walk must not touch it any more */
	return PH_WAIT;
}

static const void *seen_conf;
static enum ph_rc with_conf(struct txn *t, const void *conf)
{
	mark(t, 'k');
	seen_conf = conf;
	return PH_CONTINUE;
}

static const struct ph_handler none[] = {{NULL, NULL}};
static const struct ph_handler r_[] = {{route, NULL}, {NULL, NULL}};
static const struct ph_handler a_[] = {{access, NULL}, {NULL, NULL}};
static const struct ph_handler f_[] = {{filter, NULL}, {filter, NULL}, {NULL, NULL}};
static const struct ph_handler p_[] = {{wait_once, NULL}, {pick, NULL}, {NULL, NULL}};
static const struct ph_handler c_[] = {{connect, NULL}, {NULL, NULL}};
static const struct ph_handler s_[] = {{resp, NULL}, {NULL, NULL}};
static const struct ph_handler l_[] = {{log_a, NULL}, {log_b, NULL}, {NULL, NULL}};

static const struct ph_handler *const phases[PH_COUNT] = {r_, a_, f_, p_, c_, s_, l_};

static void test_phases_run_in_request_order_and_stop_where_asked(void)
{
	struct txn t = {0};
	struct ph_cursor cur;

	ph_goto(&cur, PH_ROUTE);
	CU_ASSERT_EQUAL(ph_walk(phases, &cur, PH_RESPONSE_FILTERS, &t), PH_WAIT);
	CU_ASSERT_STRING_EQUAL(t.trace, "raffW");
	CU_ASSERT(cur.phase == PH_PICK && cur.step == 0);
	/* resumed: the handler that waited is not run again */
	ph_resume_after(&cur);
	CU_ASSERT_EQUAL(ph_walk(phases, &cur, PH_RESPONSE_FILTERS, &t), PH_CONTINUE);
	CU_ASSERT_STRING_EQUAL(t.trace, "raffWpc");
	CU_ASSERT(cur.phase == PH_RESPONSE_FILTERS && cur.step == 0);
	CU_ASSERT_EQUAL(ph_walk(phases, &cur, PH_LOG, &t), PH_CONTINUE);
	CU_ASSERT_EQUAL(ph_walk(phases, &cur, PH_COUNT, &t), PH_CONTINUE);
	CU_ASSERT_STRING_EQUAL(t.trace, "raffWpcslm");
}

static void test_an_answer_stops_the_walk_at_its_handler(void)
{
	static const struct ph_handler deny_[] = {{deny, NULL}, {access, NULL}, {NULL, NULL}};
	static const struct ph_handler *const ph[PH_COUNT] = {r_, deny_, f_, p_, c_, s_, l_};
	struct txn t = {0};
	struct ph_cursor cur;

	ph_goto(&cur, PH_ROUTE);
	CU_ASSERT_EQUAL(ph_walk(ph, &cur, PH_RESPONSE_FILTERS, &t), PH_ANSWER);
	CU_ASSERT_STRING_EQUAL(t.trace, "rD");
	CU_ASSERT(cur.phase == PH_ACCESS && cur.step == 0);
	/* the log phase still runs on its own */
	ph_goto(&cur, PH_LOG);
	CU_ASSERT_EQUAL(ph_walk(ph, &cur, PH_COUNT, &t), PH_CONTINUE);
	CU_ASSERT_STRING_EQUAL(t.trace, "rDlm");
}

static void test_an_abort_stops_the_walk(void)
{
	static const struct ph_handler x_[] = {{filter, NULL}, {reset, NULL}, {filter, NULL}, {NULL, NULL}};
	static const struct ph_handler *const ph[PH_COUNT] = {r_, a_, x_, p_, c_, s_, l_};
	struct txn t = {0};
	struct ph_cursor cur;

	ph_goto(&cur, PH_ROUTE);
	CU_ASSERT_EQUAL(ph_walk(ph, &cur, PH_RESPONSE_FILTERS, &t), PH_ABORT);
	CU_ASSERT_STRING_EQUAL(t.trace, "rafX");
	CU_ASSERT(cur.phase == PH_REQUEST_FILTERS && cur.step == 1);
}

static void test_empty_phases_are_passed_and_a_wait_may_end_the_stream(void)
{
	static const struct ph_handler fr_[] = {{wait_and_free, NULL}, {pick, NULL}, {NULL, NULL}};
	static const struct ph_handler *const ph[PH_COUNT] = {none, none, none, fr_, c_, none, none};
	struct txn t = {0};
	struct ph_cursor cur;

	ph_goto(&cur, PH_ROUTE);
	CU_ASSERT_EQUAL(ph_walk(ph, &cur, PH_RESPONSE_FILTERS, &t), PH_WAIT);
	CU_ASSERT_STRING_EQUAL(t.trace, "F");
	CU_ASSERT_EQUAL(t.n, 1);
}

static void test_a_handler_gets_its_own_settings(void)
{
	static const int setting = 7;
	static const struct ph_handler k_[] = {{with_conf, &setting}, {NULL, NULL}};
	static const struct ph_handler *const ph[PH_COUNT] = {none, k_, none, none, none, none, none};
	struct txn t = {0};
	struct ph_cursor cur;

	ph_goto(&cur, PH_ROUTE);
	CU_ASSERT_EQUAL(ph_walk(ph, &cur, PH_COUNT, &t), PH_CONTINUE);
	CU_ASSERT_PTR_EQUAL(seen_conf, &setting);
	CU_ASSERT_STRING_EQUAL(ph_names[PH_ACCESS], "access");
	CU_ASSERT_STRING_EQUAL(ph_names[PH_LOG], "log");
}

static const struct unit_test tests[] = {
	{"phases run in request order and stop where asked",
	 test_phases_run_in_request_order_and_stop_where_asked},
	{"an answer stops the walk at its handler", test_an_answer_stops_the_walk_at_its_handler},
	{"an abort stops the walk", test_an_abort_stops_the_walk},
	{"empty phases are passed and a wait may end the stream",
	 test_empty_phases_are_passed_and_a_wait_may_end_the_stream},
	{"a handler gets its own settings", test_a_handler_gets_its_own_settings},
};

UNIT_MAIN("worker/phase", tests)
