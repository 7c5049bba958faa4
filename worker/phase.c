/*
 * phase.c: the walk over the fixed phases (phase.h).
 */
#include "worker/phase.h"

#include <stddef.h>

const char *const ph_names[PH_COUNT] = {
	"route", "access", "request_filters", "pick", "connect", "response_filters", "log",
};

enum ph_rc ph_walk(const struct ph_handler *const phases[PH_COUNT], struct ph_cursor *cur, enum ph stop,
                   struct txn *t)
{
	while (cur->phase < stop) {
		const struct ph_handler *h = &phases[cur->phase][cur->step];
		enum ph_rc rc;

		if (!h->fn) {
			ph_goto(cur, (enum ph)(cur->phase + 1));
			continue;
		}
		/* the cursor is written before the call: a handler may free
		 * the stream and return PH_WAIT */
		rc = h->fn(t, h->conf);
		if (rc != PH_CONTINUE)
			return rc;
		cur->step++;
	}
	return PH_CONTINUE;
}
