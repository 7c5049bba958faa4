/*
 * hdrrules.c: header rules applied to a request before its upstream head
 * is written, and to a response before its client head is (core.h:
 * hdrrules; common/hdrrules.h for the rules).
 *
 * The rules are the route generation's (the request holds its table), so
 * a draining worker applies the rules of the table a request took, never
 * its own older config's. They act on the message's header list
 * (msg/msg.h), which the head writers then write: a removed header is
 * marked hop-by-hop, which every head writer skips, rather than moved
 * (msg.upgrade and the codec's spans point at entries); a header set or
 * added is one more entry whose name and literal value stay in the
 * generation and whose expanded value is copied into the stream's arena.
 *
 * Names are matched as a CGI backend reads them (case aside, '-' and '_'
 * alike), so `remove = [ "X-User" ]` also drops a client's X_User, which
 * such a backend would read as the same variable.
 */
#include "worker/core/core.h"

#include <string.h>

#include "common/log.h"

/* Room for one expanded value; a worker is one thread. */
static char hr_value[HDRRULES_VALUE_MAX];

/* A value a variable filled with a byte no header may hold, or too long:
 * the header is not written, counted always. Logged through log.c, which
 * sums a call site past 10 lines a second into one ("N more like this"),
 * so a client that picks the bytes cannot flood the log; the value is
 * never logged, the name is the configuration's token. */
static void hdrrules_drop_value(const struct txn *t, const char *name, int full)
{
	size_t len;
	const char *client;

	worker_count_error(WEIR_ERR(HEADER_RULE_DROPPED));
	if (log_level_min > LOG_LEVEL_WARN)
		return;
	client = realip_client(t->c, t, &len);
	log_warn("%.*s: header rule %s not applied: its value %s", (int)len, client, name,
	         full ? "passed 4 KiB" : "held a control byte from a variable");
}

/* Marks every header of <m> named <name> as removed. */
static void hdrrules_remove(struct msg *m, const char *name, uint32_t len)
{
	for (uint32_t i = 0; i < m->hl.n; i++) {
		struct hdr *h = &m->hl.v[i];

		if (h->name_len == len && http_name_same_var(h->name, name, len))
			h->flags |= HDR_HOP; /* never written: the head writers skip it */
	}
}

/* Applies rules [first, first + n) of t->table to <m>. Returns 0 or
 * WEIR_ERR(HEADER_SPACE). */
static int hdrrules_apply(struct txn *t, struct msg *m, uint32_t first, uint32_t n, int status)
{
	const struct hdrrule *rules = route_hdr_rules(t->table);
	const struct vars_piece *pieces = route_hdr_pieces(t->table);
	const char *text = route_hdr_text(t->table);
	struct vars_ctx x = {.c = t->c, .t = t, .status = status};

	for (uint32_t k = first; k < first + n; k++) {
		const struct hdrrule *r = &rules[k];
		const char *name = text + r->name_off, *vtext = name + r->name_len + 1, *v = vtext;
		size_t len = r->value_len;

		if (r->op != HDRRULE_ADD)
			hdrrules_remove(m, name, r->name_len);
		if (r->op == HDRRULE_REMOVE)
			continue;
		if (!r->literal) {
			int full = 0, bad = 0;
			char *q;

			len = vars_expand_pieces(pieces + r->first, r->n, vtext, &x, VARS_ESC_NONE, hr_value,
			                         sizeof(hr_value), &full, &bad);
			if (full || bad) {
				hdrrules_drop_value(t, name, full);
				continue;
			}
			if (len && !(q = arena_bytes(&t->arena, (uint32_t)len)))
				return WEIR_ERR(HEADER_SPACE);
			if (len)
				v = memcpy(q, hr_value, len);
		}
		if (len == 0)
			continue; /* as nginx's proxy_set_header "": no header */
		if (!hlist_add(&t->arena, &m->hl, name, r->name_len, v, (uint32_t)len))
			return WEIR_ERR(HEADER_SPACE);
	}
	return 0;
}

enum ph_rc hdrrules_request(struct txn *t, const void *conf)
{
	int rc;

	(void)conf;
	if (!t->route->hdr.nreq)
		return PH_CONTINUE;
	rc = hdrrules_apply(t, &t->req, t->route->hdr.first, t->route->hdr.nreq, 0);
	if (rc < 0) {
		t->answer = rc;
		return PH_ANSWER;
	}
	return PH_CONTINUE;
}

enum ph_rc hdrrules_response(struct txn *t, const void *conf)
{
	int rc;

	(void)conf;
	if (!t->route || !t->route->hdr.nresp)
		return PH_CONTINUE;
	rc = hdrrules_apply(t, &t->resp, t->route->hdr.first + t->route->hdr.nreq, t->route->hdr.nresp,
	                    t->resp.status);
	if (rc < 0) {
		t->answer = rc;
		return PH_ANSWER;
	}
	return PH_CONTINUE;
}
