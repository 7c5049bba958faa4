/*
 * phase.c: the walk over the fixed phases (phase.h).
 */
#include "worker/core/phase.h"

#include <stddef.h>

const char *const ph_names[PH_COUNT] = {
	"route", "access", "request_filters", "pick", "connect", "response_filters", "log",
};
