/*
 * grpc.h: weir's own answers to a gRPC request, as gRPC status.
 *
 * Principle: a gRPC client reads the outcome of a call from grpc-status,
 * not from the HTTP status, and cannot parse a text/plain body. So when
 * the request's content-type is application/grpc (or application/grpc+
 * proto, +json, ...), an answer weir makes itself (an error, a refusal by
 * a limit or by auth) goes out "trailers-only": HTTP 200, content-type
 * application/grpc, grpc-status and grpc-message in the head, no body.
 * The code comes from the error kind, then its HTTP status, as the gRPC
 * spec's HTTP-to-gRPC table has it, with weir's refusals for load as
 * RESOURCE_EXHAUSTED. The access log and the status counters keep the
 * HTTP status the error has (a 503 stays a 503 on dashboards), so an
 * operator sees refusals the same for gRPC and plain clients. Codec-free:
 * grpc_answer() fills a struct answer (msg.h), which each server codec
 * sends its way (HTTP/2: one HEADERS that ends the stream). No
 * allocation.
 */
#ifndef WEIR_WORKER_CORE_GRPC_H
#define WEIR_WORKER_CORE_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include "worker/msg/msg.h"

struct txn;

enum grpc_code {
	GRPC_OK = 0,
	GRPC_UNKNOWN = 2,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_UNAUTHENTICATED = 16,
};

/* Is <t>'s request (its head read whole) a gRPC call? */
int grpc_request(const struct txn *t);

/* The grpc-timeout of gRPC call <t> in ms (rounded up, at least 1), or
 * 0 when it has none or an invalid one: 1 to 8 digits and a unit, H M S
 * m u n (the gRPC over HTTP/2 spec). The call's deadline is the least of
 * it and timeouts.request (txn_client.c), answered DEADLINE_EXCEEDED. */
uint32_t grpc_deadline(const struct txn *t);

/* The gRPC status for weir's error <rc> (WEIR_ERR), whose HTTP answer
 * would be <status>. Pure. */
int grpc_code(int rc, int status);

/* Makes <a> the trailers-only answer with gRPC status <code>: status
 * 200, content-type application/grpc, grpc-status, grpc-message <msg>
 * (percent-encoded as the spec asks, at most about 250 bytes) and
 * Content-Length 0, no body; the codec adds nothing of its own. The
 * values live until the next call. 0, or -1 when <a> had no room for
 * them all. */
int grpc_answer(struct answer *a, int code, const char *msg);

#endif
