/*
 * phase: the fixed phases of a stream, in request order (part of the
 * core, included by its door core.h; alone, for the walk's unit test).
 *
 * Principle: what happens to a request, and in which order, is one
 * compile-time list, as nginx's phase engine: route, access, request
 * filters, pick a server, connect, then (when the response head comes)
 * response filters, and log, which always runs. Each phase is an array of
 * handlers ended by {NULL}; a feature hangs itself on a phase by adding
 * one line to that array (worker/txn_phases.c), nothing else decides the
 * order. A handler returns one of a small closed set:
 *
 *   PH_CONTINUE  go on with the next handler (the next phase after the
 *                last one)
 *   PH_WAIT      stop here; the handler has armed what will resume the
 *                walk (ph_resume(): the walk goes on after it)
 *   PH_ANSWER    weir answers the request itself: the error code of the
 *                answer (its status from common/err.h) is in the stream
 *   PH_ABORT     the stream is reset: no answer, the connection closed
 *
 * The walk writes its cursor before it calls a handler and reads nothing
 * of the stream after one returned anything but PH_CONTINUE, so a handler
 * may end the stream (free it) and return PH_WAIT.
 *
 * Request filters run before a server is picked, not after connecting:
 * the upstream head is written from the filtered message before a body is
 * read whole (which frees the client's input buffer for the body) and
 * before a server is picked, so a slow body never holds a connection.
 */
#ifndef WEIR_WORKER_CORE_PHASE_H
#define WEIR_WORKER_CORE_PHASE_H

#include <stdint.h>

struct txn;

enum ph_rc {
	PH_CONTINUE,
	PH_WAIT,
	PH_ANSWER,
	PH_ABORT,
};

enum ph {
	PH_ROUTE,            /* normalise the path, find the route */
	PH_ACCESS,           /* authentication, rate limits (later issues) */
	PH_REQUEST_FILTERS,  /* header rules, then the upstream head is written */
	PH_PICK,             /* the body read whole if it fits, a server picked */
	PH_CONNECT,          /* a pooled connection or a new one */
	PH_RESPONSE_FILTERS, /* on the response head, before it is written */
	PH_LOG,              /* counters and the access log: always, once */
	PH_COUNT
};

typedef enum ph_rc (*ph_fn)(struct txn *t, const void *conf);

struct ph_handler {
	ph_fn fn;         /* NULL ends a phase's array */
	const void *conf; /* the handler's own settings, or NULL */
};

/* Where a stream stands in the walk. */
struct ph_cursor {
	uint8_t phase; /* enum ph */
	uint8_t step;  /* handler index within it */
};

/* The phase names, for logs and tests. */
extern const char *const ph_names[PH_COUNT];

/*
 * Runs the handlers of <phases> (PH_COUNT arrays) from <cur> on, phase by
 * phase, until phase <stop> (not run) or a handler returns anything but
 * PH_CONTINUE. Returns PH_CONTINUE when <stop> was reached (the cursor
 * then at its first handler), else what the handler returned (the cursor
 * then at that handler).
 */
static inline enum ph_rc ph_walk(const struct ph_handler *const phases[PH_COUNT], struct ph_cursor *cur,
                                 enum ph stop, struct txn *t)
{
	/* inline, so that with the core's tables constant the walk costs
	 * little more than its calls; the cursor is kept in locals, which a
	 * handler's stores to the stream cannot change */
	unsigned p = cur->phase, i = cur->step;

	while (p < (unsigned)stop) {
		const struct ph_handler *h = &phases[p][i];
		enum ph_rc rc;

		if (!h->fn) {
			p++;
			i = 0;
			continue;
		}
		/* written before the call: a handler may free the stream and
		 * return PH_WAIT, and nothing of it is touched after that */
		cur->phase = (uint8_t)p;
		cur->step = (uint8_t)i;
		rc = h->fn(t, h->conf);
		if (rc != PH_CONTINUE)
			return rc;
		i++;
	}
	cur->phase = (uint8_t)p;
	cur->step = 0;
	return PH_CONTINUE;
}

/* The handler at <cur> waited and is done: the walk goes on after it. */
static inline void ph_resume_after(struct ph_cursor *cur)
{
	cur->step++;
}

/* The handler at <cur> waits and is to run again when resumed, not the
 * one after it: ph_resume_after() adds the step back (a uint8_t, so this
 * holds for step 0 too, by wrapping). */
static inline void ph_wait_again(struct ph_cursor *cur)
{
	cur->step--;
}

/* Puts <cur> at the start of phase <p>. */
static inline void ph_goto(struct ph_cursor *cur, enum ph p)
{
	cur->phase = (uint8_t)p;
	cur->step = 0;
}

#endif
