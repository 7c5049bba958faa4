/*
 * auth.h: authentication per route (routes.auth), the worker's side.
 *
 * Principle: one check between routing and picking a server. It either
 * lets the request on, with what it learnt (the consumer, the headers to
 * pass upstream) kept in the request's state, or answers it itself: 401
 * with WWW-Authenticate, 403 for a consumer the policy does not allow,
 * 503 while the password-hash budget is spent. Every outcome is counted
 * per route (weir_auth_total{result, reason}); no secret is ever logged.
 *
 * The policy and its keys are the worker's own configuration's, inherited
 * from the master (common/auth_conf.h). The route table in the shared
 * segment only says that a route has auth: a worker finds the policy of
 * the same (host, path) in its own configuration, and answers 503 for a
 * route whose policy it does not know (a draining worker of an older
 * configuration, handed a newer table) rather than let it through.
 *
 * Costs are bounded per request: an API key is one SHA-256 and a binary
 * search; a JWT is verified once and then found in a per-worker cache
 * keyed by its SHA-256 until it expires; a Basic password is hashed once
 * and then found in a cache keyed by an HMAC under a key made when the
 * worker starts, and a worker hashes at most hash_rate passwords a second.
 */
#ifndef WEIR_WORKER_AUTH_H
#define WEIR_WORKER_AUTH_H

#include <stdint.h>

#include "common/auth_conf.h"
#include "common/config.h"

struct txn;

/* What a check left in the request (struct txn's auth). */
struct auth_state {
	const char *extra; /* header lines for the upstream ("Name: v\r\n"...),
	                    * valid until the next check in this worker:
	                    * head_write_request() copies them right after */
	uint32_t extra_len;
	uint8_t consumer_len;
	char consumer[AUTH_NAME_MAX]; /* who the credentials name ("" none): for
	                               * logs and rate-limit keys (`consumer`) */
};

/* Worker start: the answers, caches and keys of <cfg>'s policies. Returns
 * 0, or -1 when out of memory. */
int auth_init(const struct config *cfg);

/* Calls <vouch> with every header name a policy of <cfg> writes upstream
 * (consumer_header, claims_to_headers): a client's own is never passed. */
void auth_vouch_names(const struct config *cfg, void (*vouch)(const char *name));

/* For a request whose route has auth (t->route->auth): 0 to go on, or -1
 * when it has been answered (and <t> freed). */
int auth_check(struct txn *t);

/* ---- inside worker/auth*.c ---- */

struct auth_rt;

/* JWT (worker/auth_jwt.c): checks the token of <t> for <p>; returns an
 * enum auth_result, with st's consumer and extra set on AUTH_R_OK and
 * *<cached> set when it came from the cache. */
int auth_jwt_check(struct txn *t, const struct config_auth *p, struct auth_state *st, int *cached);
int auth_jwt_init(void);

/* The request header named <name> (any case): NULL if absent; *<dup> is
 * set when there is more than one. */
struct http_header;
const struct http_header *auth_header(const struct txn *t, const char *name, int *dup);

#endif
