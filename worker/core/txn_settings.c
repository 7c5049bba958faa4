
#include "worker/core/core.h"
#include <string.h>


const struct route_settings *txn_settings_own(void)
{
	static struct route_settings own;
	static const struct config *from;

	/* filled once per config the worker runs with (a worker keeps one) */
	if (from != wk.cfg) {
		memset(&own, 0, sizeof(own));
		own.timeouts = wk.cfg->timeouts;
		own.limits = wk.cfg->limits;
		own.merge_slashes = (uint8_t)wk.cfg->merge_slashes;
		own.underscores_in_headers = (uint8_t)wk.cfg->underscores_in_headers;
		from = wk.cfg;
	}
	return &own;
}
