#include "common/err.h"

#define ROW_TEXT(name, status, counter, text) text,
#define ROW_COUNTER(name, status, counter, text) counter,
#define ROW_STATUS(name, status, counter, text) status,

static const char *const err_text[] = {WEIR_ERR_TABLE(ROW_TEXT)};
static const char *const err_counter[] = {WEIR_ERR_TABLE(ROW_COUNTER)};
static const short err_status[] = {WEIR_ERR_TABLE(ROW_STATUS)};

_Static_assert(sizeof err_text / sizeof err_text[0] == WEIR_ERR_COUNT, "one row per code");

const char *weir_err_text(int rc)
{
	int i = weir_err_index(rc);
	return i < 0 ? "unknown error" : err_text[i];
}

const char *weir_err_counter(int rc)
{
	int i = weir_err_index(rc);
	return i < 0 ? "unknown" : err_counter[i];
}

int weir_err_status(int rc)
{
	int i = weir_err_index(rc);
	return i < 0 ? 500 : err_status[i];
}
