/*
 * test_grpc.c: worker/core/grpc: weir's errors map to the gRPC codes the
 * brief names, and grpc-message is percent-encoded.
 */
#include <string.h>

#include "common/err.h"
#include "worker/core/grpc.h"
#include "tests/unit/unit.h"

static void test_codes(void)
{
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(NO_ROUTE), 404), GRPC_UNIMPLEMENTED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(UPSTREAM_REFUSED), 502), GRPC_UNAVAILABLE);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(NO_SERVER), 503), GRPC_UNAVAILABLE);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(BREAKER_OPEN), 503), GRPC_UNAVAILABLE);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(UPSTREAM_TIMEOUT), 504), GRPC_DEADLINE_EXCEEDED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(REQUEST_TIMEOUT), 408), GRPC_DEADLINE_EXCEEDED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(RATE_LIMITED), 429), GRPC_RESOURCE_EXHAUSTED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(RATE_LIMITED), 503), GRPC_RESOURCE_EXHAUSTED); /* its own status */
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(UPSTREAM_LIMIT), 503), GRPC_RESOURCE_EXHAUSTED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(QUEUE_TIMEOUT), 503), GRPC_RESOURCE_EXHAUSTED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(ADAPTIVE_CONCURRENCY), 503), GRPC_RESOURCE_EXHAUSTED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(AUTH_REQUIRED), 401), GRPC_UNAUTHENTICATED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(AUTH_FORBIDDEN), 403), GRPC_PERMISSION_DENIED);
	CU_ASSERT_EQUAL(grpc_code(WEIR_ERR(BAD_REQUEST), 400), GRPC_INTERNAL);
	CU_ASSERT_EQUAL(grpc_code(-1000, 418), GRPC_UNKNOWN);
}

static void test_fields(void)
{
	struct answer_field f[4];
	struct answer a = {.f = f, .cap = 4};

	CU_ASSERT_EQUAL(grpc_answer(&a, 8, "50% over\r\nX-Injected: 1"), 0);
	CU_ASSERT_EQUAL(a.status, 200);
	CU_ASSERT_EQUAL(a.body_len, 0);
	CU_ASSERT_EQUAL(a.n, 4);
	CU_ASSERT_STRING_EQUAL(f[0].name, "Content-Type");
	CU_ASSERT(f[0].value_len == 16 && memcmp(f[0].value, "application/grpc", 16) == 0);
	CU_ASSERT_STRING_EQUAL(f[1].name, "grpc-status");
	CU_ASSERT(f[1].value_len == 1 && f[1].value[0] == '8');
	CU_ASSERT_STRING_EQUAL(f[2].name, "grpc-message");
	CU_ASSERT_EQUAL(f[2].value_len, strlen("50%25 over%0D%0AX-Injected: 1"));
	CU_ASSERT(memcmp(f[2].value, "50%25 over%0D%0AX-Injected: 1", f[2].value_len) == 0);
	CU_ASSERT_STRING_EQUAL(f[3].name, "Content-Length");
	CU_ASSERT(f[3].value_len == 1 && f[3].value[0] == '0');
	/* too little room: the fields that fit, and -1 */
	a.n = 0;
	a.cap = 2;
	CU_ASSERT_EQUAL(grpc_answer(&a, 8, "x"), -1);
	CU_ASSERT_EQUAL(a.n, 2);
}

static const struct unit_test tests[] = {
    {"weir's errors map to the gRPC codes", test_codes},
    {"grpc-message is percent-encoded, control bytes and '%'", test_fields},
};

UNIT_MAIN("worker/grpc", tests)
