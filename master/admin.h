/*
 * admin.h: what the stats socket answers, request by request.
 *
 * Principle: one plain-text command set, typable with curl, on the same
 * socket as the metrics:
 *
 *   GET  /metrics       Prometheus text (metrics.h)
 *   GET  /info          version, uptime, workers alive, generations
 *   GET  /routes        the current route table, in matching order
 *   GET  /upstreams     groups and servers: admin state, weight, counters
 *   POST /upstreams/GROUP/ADDRESS?state=up|drain|down&weight=N|default
 *
 * A POST changes a server's admin word in the shared segment (shm.h), which
 * workers read when they pick a server: no reload, no message to a worker.
 * The word is keyed by the server's stable stat index, so it applies to
 * every generation that holds the server, and it outlives a reload for as
 * long as the server stays in the configuration (route_commit()).
 *
 * Unknown paths get 404 with the command list, a known path with another
 * method 405 (with Allow), bad arguments 400. Nothing here comes from the
 * workers or blocks: it reads and writes the segment and returns.
 */
#ifndef WEIR_MASTER_ADMIN_H
#define WEIR_MASTER_ADMIN_H

#include <stddef.h>

#include "master/textbuf.h"

struct shm_segment;

struct stats_reply {
	int status;        /* 200, 400, 401, 403, 404, 405, 409 */
	const char *allow; /* the Allow header of a 405, else NULL */
	const char *type;  /* Content-Type */
	struct textbuf body;
};

/* Whether the sender of a request may change things (POST), as the stats
 * socket decided from where it came and what it presented. */
enum admin_access {
	ADMIN_ALLOWED,      /* unix socket, or TCP with the right token */
	ADMIN_NEED_TOKEN,   /* a token is configured and was not presented: 401 */
	ADMIN_NO_TOKEN,     /* TCP without a token configured: no admin there (403) */
};

/* Answers <method> <target> (NUL-terminated; the target as sent, with its
 * query) with <body> (form arguments of a POST, may be empty) into <r>;
 * commands that change routing only when <access> is ADMIN_ALLOWED. */
void admin_dispatch(struct shm_segment *seg, const char *method, const char *target, const char *body, size_t body_len,
                    enum admin_access access, struct stats_reply *r);

#endif
