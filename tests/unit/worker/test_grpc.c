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
	char out[512];
	int n = grpc_fields(out, sizeof out, 8, "50% over\r\nX-Injected: 1");

	CU_ASSERT_EQUAL((size_t)n, strlen(out));
	CU_ASSERT_STRING_EQUAL(out, "Content-Type: application/grpc\r\ngrpc-status: 8\r\n"
	                            "grpc-message: 50%25 over%0D%0AX-Injected: 1\r\nContent-Length: 0\r\n");
	/* too little room: cut, and the length wanted returned */
	CU_ASSERT(grpc_fields(out, 10, 8, "x") > 10);
	CU_ASSERT_EQUAL(strlen(out), 9);
}

static const struct unit_test tests[] = {
    {"weir's errors map to the gRPC codes", test_codes},
    {"grpc-message is percent-encoded, control bytes and '%'", test_fields},
};

UNIT_MAIN("worker/grpc", tests)
