/*
 * vars.h: expanding a compiled template (common/vars.h) for one request.
 *
 * Principle: a variable's value is read where the request already keeps
 * it, never copied in advance: the head weir wrote upstream (head_up, kept
 * for the whole request) once there is one, else the parsed request head,
 * whose spans are still valid then (the response head reuses the header
 * array only after head_up exists). So $http_NAME is the header as
 * forwarded (hop-by-hop headers are not), and costs a scan of the head
 * only when a template uses it. Values are written into the caller's
 * buffer, escaped as the caller's output needs; nothing is allocated.
 */
#ifndef WEIR_WORKER_VARS_H
#define WEIR_WORKER_VARS_H

#include <stddef.h>

#include "common/vars.h"

struct conn;
struct txn;

enum vars_esc {
	VARS_ESC_NONE, /* raw: a header value or a body (see <bad> below) */
	VARS_ESC_LOG,  /* '"', '\\' and bytes outside printable ASCII as \xHH,
	                * an absent value as "-", as nginx's access log */
	VARS_ESC_JSON, /* a JSON string's content: \" \\ and \u00XX for control
	                * bytes and bytes that are not UTF-8; absent as "" */
};

/* What a template is expanded for. <t> may be NULL (no request parsed). */
struct vars_ctx {
	struct conn *c;
	struct txn *t;
	int status;
	size_t value_max; /* bytes of one value taken at most (0: no cap) */
};

/*
 * Expands <tpl> into <dst> (<cap> bytes, not NUL-ended). Returns the bytes
 * written; *<full> is set when something did not fit. With VARS_ESC_NONE,
 * *<bad> is set when a variable's value held a byte no header value may
 * (CR, LF, NUL or another control byte but HTAB); literals were checked
 * when the configuration was read.
 */
size_t vars_expand(const struct vars_tpl *tpl, const struct vars_ctx *x, enum vars_esc esc, char *dst, size_t cap,
                   int *full, int *bad);

#endif
