/*
 * test_err.c: the error table of common/err.h: codes, indexes, and the
 * status, counter name and log sentence each code carries.
 */
#include <string.h>

#include "common/err.h"
#include "tests/unit/unit.h"

#define ROW_CODE(name, status, counter, text) WEIR_ERR(name),
static const int codes[] = {WEIR_ERR_TABLE(ROW_CODE)};
#define NCODES ((int)(sizeof codes / sizeof codes[0]))

static void test_codes_negative_distinct(void)
{
	for (int i = 0; i < NCODES; i++) {
		CU_ASSERT(codes[i] < 0);
		for (int j = 0; j < i; j++)
			CU_ASSERT(codes[i] != codes[j]);
	}
}

static void test_index_round_trip(void)
{
#define CHECK_ROW(name, status, counter, text)                                   \
	CU_ASSERT_EQUAL(weir_err_index(WEIR_ERR(name)), WEIR_E##name##_INDEX);    \
	CU_ASSERT(weir_err_index(WEIR_ERR(name)) < WEIR_ERR_COUNT);              \
	CU_ASSERT_STRING_EQUAL(weir_err_text(WEIR_ERR(name)), text);             \
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(name)), counter);       \
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(name)), status);
	WEIR_ERR_TABLE(CHECK_ROW)
#undef CHECK_ROW
}

static void test_few_entries(void)
{
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(NO_ROUTE)), 404);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(NO_ROUTE)), "no_route");
	CU_ASSERT_STRING_EQUAL(weir_err_text(WEIR_ERR(NO_ROUTE)), "no route for host and path");

	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(NOMEM)), 503);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(NOMEM)), "no_memory");

	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(UPSTREAM_TIMEOUT)), 504);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(UPSTREAM_TIMEOUT)), "upstream_timeout");

	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(HEADERS_TOO_LARGE)), 431);
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(URI_TOO_LONG)), 414);
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(CLIENT_CLOSED)), 0);
}

static void test_last_entry(void)
{
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(DRAIN_CUT)), "drain_cut");
	CU_ASSERT_STRING_EQUAL(weir_err_text(WEIR_ERR(DRAIN_CUT)), "connection cut by the drain timeout");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(DRAIN_CUT)), 0);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(TLS_HANDSHAKE)), "tls_handshake");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(TLS_HANDSHAKE)), 0);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(UPSTREAM_TLS)), "upstream_tls");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(UPSTREAM_TLS)), 502);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(TOO_EARLY)), "too_early");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(TOO_EARLY)), 425);
	/* whichever row comes last (rows are added at the end) */
	CU_ASSERT_EQUAL(weir_err_index(codes[NCODES - 1]), WEIR_ERR_COUNT - 1);
	CU_ASSERT_PTR_NOT_NULL(weir_err_counter(codes[NCODES - 1]));
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(ACCEPT_FAILED)), "accept_failed");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(ACCEPT_FAILED)), 0);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(LOCAL_CONNECT_ERROR)), "local_connect_error");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(LOCAL_CONNECT_ERROR)), 503);
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(BODY_TOO_SLOW)), 408);
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(SEND_TOO_SLOW)), 0);
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(REQUEST_TIMEOUT)), 408);
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_ERR(REQUEST_TIMEOUT_UPSTREAM)), "request_timeout_upstream");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_ERR(REQUEST_TIMEOUT_UPSTREAM)), 504);
}

static void test_eagain(void)
{
	CU_ASSERT(WEIR_EAGAIN < 0);
	CU_ASSERT_EQUAL(WEIR_EAGAIN, WEIR_ERR(AGAIN));
	CU_ASSERT_STRING_EQUAL(weir_err_text(WEIR_EAGAIN), "operation would block");
	CU_ASSERT_STRING_EQUAL(weir_err_counter(WEIR_EAGAIN), "again");
	CU_ASSERT_EQUAL(weir_err_status(WEIR_EAGAIN), 0);
}

static void test_not_codes(void)
{
	int past = codes[0] < codes[NCODES - 1] ? codes[0] - 1 : codes[NCODES - 1] - 1;

	CU_ASSERT_EQUAL(weir_err_index(0), -1);
	CU_ASSERT_EQUAL(weir_err_index(1), -1);
	CU_ASSERT_EQUAL(weir_err_index(past), -1);
	CU_ASSERT_STRING_EQUAL(weir_err_text(past), "unknown error");
	CU_ASSERT_STRING_EQUAL(weir_err_counter(-100000), "unknown");
	CU_ASSERT_EQUAL(weir_err_status(-100000), 500);
}

static const struct unit_test tests[] = {
	{"every code is negative and no two codes are equal", test_codes_negative_distinct},
	{"each code's index leads back to its own row of the table", test_index_round_trip},
	{"a few entries carry the status, counter and text of the table", test_few_entries},
	{"the last entry of the table is reachable", test_last_entry},
	{"WEIR_EAGAIN is the AGAIN entry and answers no status", test_eagain},
	{"zero, positive values and values past the table are not codes", test_not_codes},
};

UNIT_MAIN("common/err", tests)
