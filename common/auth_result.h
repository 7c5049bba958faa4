/*
 * auth_result.h: the outcomes of an authentication check, one X-macro
 * table for the worker that counts them (worker/auth.c) and the master
 * that shows them as weir_auth_total{result, reason} (master/metrics.c).
 *
 * X(NAME, result, reason): result is "ok", "denied" (401), "forbidden"
 * (403), "busy" (503, the password hash budget is spent) or "error" (503;
 * forward auth's: 502 for an answer other than 2xx, 401 and 403);
 * reason says which check said no, "" for ok.
 */
#ifndef WEIR_COMMON_AUTH_RESULT_H
#define WEIR_COMMON_AUTH_RESULT_H

#define AUTH_RESULTS(X)                                                                                                \
	X(OK, "ok", "")                                                                                                \
	X(MISSING, "denied", "missing")                                                                                \
	X(MALFORMED, "denied", "malformed")                                                                            \
	X(UNKNOWN_KEY, "denied", "unknown_key")                                                                        \
	X(UNKNOWN_USER, "denied", "unknown_user")                                                                      \
	X(BAD_PASSWORD, "denied", "bad_password")                                                                      \
	X(ALG, "denied", "algorithm")                                                                                  \
	X(KID, "denied", "unknown_kid")                                                                                \
	X(BAD_SIGNATURE, "denied", "bad_signature")                                                                    \
	X(EXPIRED, "denied", "expired")                                                                                \
	X(NOT_YET_VALID, "denied", "not_yet_valid")                                                                    \
	X(ISSUER, "denied", "issuer")                                                                                  \
	X(AUDIENCE, "denied", "audience")                                                                              \
	X(FORBIDDEN, "forbidden", "not_allowed")                                                                       \
	X(BUSY, "busy", "hash_budget")                                                                                 \
	X(STALE, "error", "stale_worker")                                                                              \
	X(FWD_DENIED, "denied", "forward_401")                                                                         \
	X(FWD_FORBIDDEN, "forbidden", "forward_403")                                                                   \
	X(FWD_STATUS, "error", "forward_status")                                                                       \
	X(FWD_UNREACHABLE, "error", "forward_unreachable")                                                             \
	X(FWD_TIMEOUT, "error", "forward_timeout")

enum auth_result {
#define AUTH_R_ENUM(n, r, why) AUTH_R_##n,
	AUTH_RESULTS(AUTH_R_ENUM)
#undef AUTH_R_ENUM
	    AUTH_R_COUNT
};

#endif
