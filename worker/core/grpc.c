/*
 * grpc.c: weir's own answers as gRPC status (worker/core/grpc.h).
 */
#include "worker/core/grpc.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "worker/core/core.h"

int grpc_request(const struct txn *t)
{
	static const char ct[] = "application/grpc";

	if (!t || !t->req.head_len) /* the head not read whole: its headers are not known */
		return 0;
	if (t->grpc) /* noted when routed: the list below is gone once the response head begins */
		return 1;
	for (uint32_t i = 0; i < t->req.hl.n; i++) {
		const struct hdr *h = &t->req.hl.v[i];

		if (h->name_len != 12 || strncasecmp(h->name, "content-type", 12))
			continue;
		/* application/grpc, or a subtype: +proto, +json; ";" parameters */
		return h->value_len >= sizeof ct - 1 && !strncasecmp(h->value, ct, sizeof ct - 1) &&
		       (h->value_len == sizeof ct - 1 || h->value[sizeof ct - 1] == '+' || h->value[sizeof ct - 1] == ';');
	}
	return 0;
}

uint32_t grpc_deadline(const struct txn *t)
{
	for (uint32_t i = 0; i < t->req.hl.n; i++) {
		const struct hdr *h = &t->req.hl.v[i];
		uint64_t v = 0, ms;
		uint32_t k;

		if (h->name_len != 12 || strncasecmp(h->name, "grpc-timeout", 12))
			continue;
		if (h->value_len < 2 || h->value_len > 9)
			return 0;
		for (k = 0; k + 1 < h->value_len; k++) {
			if (h->value[k] < '0' || h->value[k] > '9')
				return 0;
			v = v * 10 + (uint64_t)(h->value[k] - '0');
		}
		switch (h->value[k]) {
		case 'H': ms = v * 3600000; break;
		case 'M': ms = v * 60000; break;
		case 'S': ms = v * 1000; break;
		case 'm': ms = v; break;
		case 'u': ms = (v + 999) / 1000; break;
		case 'n': ms = (v + 999999) / 1000000; break;
		default: return 0;
		}
		if (!ms) /* a deadline shorter than a millisecond: one */
			ms = 1;
		return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
	}
	return 0;
}

int grpc_code(int rc, int status)
{
	/* the kinds the HTTP status alone would map otherwise */
	if (rc == WEIR_ERR(UPSTREAM_LIMIT) || rc == WEIR_ERR(QUEUE_TIMEOUT) || rc == WEIR_ERR(ADAPTIVE_CONCURRENCY) ||
	    rc == WEIR_ERR(AUTH_BUSY) || rc == WEIR_ERR(RATE_LIMITED))
		return GRPC_RESOURCE_EXHAUSTED;
	if (rc == WEIR_ERR(REQUEST_TIMEOUT) || rc == WEIR_ERR(BODY_TIMEOUT) || rc == WEIR_ERR(HEADER_TIMEOUT) ||
	    rc == WEIR_ERR(GRPC_DEADLINE))
		return GRPC_DEADLINE_EXCEEDED;
	switch (status) {
	case 400: return GRPC_INTERNAL;
	case 401: return GRPC_UNAUTHENTICATED;
	case 403: return GRPC_PERMISSION_DENIED;
	case 404: return GRPC_UNIMPLEMENTED;
	case 408:
	case 504: return GRPC_DEADLINE_EXCEEDED;
	case 413:
	case 414:
	case 429:
	case 431: return GRPC_RESOURCE_EXHAUSTED;
	case 500: return GRPC_INTERNAL;
	case 502:
	case 503: return GRPC_UNAVAILABLE;
	default: return GRPC_UNKNOWN;
	}
}

int grpc_answer(struct answer *a, int code, const char *msg)
{
	/* the values need to last only until the codec's answer op returns:
	 * one answer at a time in a worker */
	static char enc[256], num[12];
	size_t n = 0;

	/* grpc-message is percent-encoded: printable ASCII but '%' as it is */
	for (const unsigned char *p = (const unsigned char *)msg; *p && n + 4 < sizeof enc; p++)
		if (*p >= 0x20 && *p <= 0x7e && *p != '%')
			enc[n++] = (char)*p;
		else
			n += (size_t)snprintf(enc + n, sizeof enc - n, "%%%02X", *p);
	enc[n] = '\0';
	a->status = 200;
	a->reason = NULL;
	a->body = NULL;
	a->body_len = 0;
	return answer_add(a, "Content-Type", "application/grpc", 16) |
	       answer_add(a, "grpc-status", num, (size_t)snprintf(num, sizeof num, "%d", code)) |
	       answer_add(a, "grpc-message", enc, n) | answer_length(a, 0);
}
