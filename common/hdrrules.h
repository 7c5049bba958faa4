/*
 * hdrrules.h: header rules (routes.headers, upstreams.headers): set, add
 * and remove request headers (towards the upstream) and response headers
 * (towards the client), values as templates of variables (common/vars.h).
 *
 * Principle: rules are compiled once, when the configuration is read, into
 * three flat, pointer-free arrays (the rules, the pieces of their value
 * templates, and one text pool of names and literals), so they mean the
 * same in the master, in every worker and in the route generation, where
 * route.c copies them whole (route_hdr_rules() and friends). A route's
 * rules are one contiguous run: its group's request rules, its own request
 * rules, then its group's response rules and its own (group first, then
 * route, as nginx's inheritance reads). A route with none has an empty run
 * and pays one test per direction.
 *
 * Never an invalid header: a name is a token (RFC 9110 tchar); a literal
 * with CR, LF, NUL or another control byte is refused when the file is
 * read (FILE:LINE), and so is a name weir owns: the hop-by-hop and framing
 * names, Host, Via, X-Forwarded-For/-Proto, Expect, X-Request-Id, and
 * their '_' lookalikes. A value a variable fills is checked when the
 * request expands it (worker/core/hdrrules.c).
 */
#ifndef WEIR_COMMON_HDRRULES_H
#define WEIR_COMMON_HDRRULES_H

#include <stdint.h>

#include "common/vars.h"

#define HDRRULES_SET_MAX 32      /* rules of one direction of one route or group */
#define HDRRULES_NAME_MAX 128    /* bytes of a header name */
#define HDRRULES_VALUE_MAX 4096  /* bytes of an expanded value */

enum hdrrule_op {
	HDRRULE_SET = 1, /* replace every header of the name with one (empty: remove) */
	HDRRULE_ADD,     /* one more header of the name (empty: nothing) */
	HDRRULE_REMOVE,  /* drop every header of the name */
};

/* One rule: 16 bytes, in the generation as in the config. */
struct hdrrule {
	uint8_t op;        /* enum hdrrule_op */
	uint8_t literal;   /* the value has no variable: written as it is */
	uint16_t name_len;
	uint32_t name_off; /* in the text pool, NUL-terminated */
	uint32_t first;    /* its value's pieces: pieces[first .. first + n) */
	uint16_t n;
	uint16_t value_len; /* literal: its bytes, at name_off + name_len + 1 */
};

/* A route's (or a group's) run of rules in the rules array. */
struct hdrrules_ref {
	uint32_t first;
	uint16_t nreq;  /* request rules at [first, first + nreq) */
	uint16_t nresp; /* response rules after them */
};

/* What a configuration holds of header rules (struct config.hdr),
 * malloc'd; NULL when no route or group has any. */
struct hdrrules_conf {
	struct hdrrule *rules;
	uint32_t nrules, caprules;
	struct vars_piece *pieces;
	uint32_t npieces, cappieces;
	char *text;
	uint32_t ntext, captext;
};

void hdrrules_conf_free(struct hdrrules_conf *h);

/* The text of a template piece or rule name in pool <text>. */
static inline const char *hdrrule_name(const char *text, const struct hdrrule *r)
{
	return text + r->name_off;
}

#endif
