/*
 * respond.c: direct responses and redirects (worker/respond.h).
 */

#include "worker/core/core.h"
#include <stdio.h>
#include <string.h>

#include "common/log.h"

int respond_send(struct txn *t, int status, const char *pre, size_t pl, const char *post, size_t ql,
                 const char *body, size_t bl)
{
	size_t need = 64 + pl + 32 + ql + REALIP_ID_MAX + 64 + bl;
	struct buf *b;

	t->client_close = !t->req.keep_alive || wk.draining;
	if (need > wk.buf_size || !(b = buf_get_fit((uint32_t)need)))
		return -1;
	b->end = (uint32_t)sprintf(b->data, "HTTP/1.1 %d %s\r\n", status, head_reason(status));
	memcpy(b->data + b->end, pre, pl);
	b->end += (uint32_t)pl;
	b->end += (uint32_t)sprintf(b->data + b->end, "Content-Length: %zu\r\n", bl);
	memcpy(b->data + b->end, post, ql);
	b->end += (uint32_t)ql;
	if (t->ident.id_len)
		b->end += (uint32_t)sprintf(b->data + b->end, "X-Request-Id: %s\r\n", t->ident.id);
	if (t->client_close)
		b->end += (uint32_t)sprintf(b->data + b->end, "Connection: close\r\n");
	else if (t->req.version_minor == 0)
		b->end += (uint32_t)sprintf(b->data + b->end, "Connection: keep-alive\r\n");
	memcpy(b->data + b->end, "\r\n", 2);
	b->end += 2;
	if (t->req.method_id != HTTP_HEAD) {
		memcpy(b->data + b->end, body, bl);
		b->end += (uint32_t)bl;
	}
	t->down.head = b;
	t->status = status;
	t->resp_started = 1;
	t->resp_done = 1;
	outq_body(&t->down.q, NULL, 0, b->data, b->end, 0);
	txn_pump(t);
	return 0;
}

void respond_start(struct txn *t)
{
	const struct policy_return *ret = &route_returns(t->table)[t->route->ret];
	struct vars_ctx x = {.c = t->c, .t = t, .status = (int)ret->status};
	/* a worker is one thread: the expansions are copied into the answer
	 * buffer before anything else runs */
	static char loc[VARS_TEXT * 2 + 16], body[65536];
	size_t ll = 0, bl = 0;
	int full = 0, bad = 0, f2 = 0;
	char ctype[160];
	int cl = 0;

	memcpy(loc, "Location: ", 10);
	if (ret->has_location)
		ll = vars_expand(&ret->location, &x, VARS_ESC_NONE, loc + 10, VARS_TEXT * 2, &full, &bad);
	if (bad || full) {
		log_warn("%s: the location of route %s%s would %s; answering 500", t->c->peer, route_host(t->table, t->route),
		         route_path(t->table, t->route), bad ? "hold a control byte" : "pass 8 KiB");
		txn_fail(t, WEIR_ERR(BAD_HEADER_VALUE));
		return;
	}
	if (ret->has_location) {
		memcpy(loc + 10 + ll, "\r\n", 2);
		ll += 12;
	}
	if (ret->body.n)
		bl = vars_expand(&ret->body, &x, VARS_ESC_NONE, body, wk.buf_size < sizeof(body) ? wk.buf_size : sizeof(body),
		                 &f2, NULL);
	if (bl)
		cl = snprintf(ctype, sizeof(ctype), "Content-Type: %s\r\n", ret->content_type);
	if (f2 || respond_send(t, (int)ret->status, ctype, (size_t)cl, loc, ll, body, bl) < 0) {
		log_warn("%s: the answer of route %s%s does not fit a buffer; answering 503", t->c->peer, route_host(t->table, t->route),
		         route_path(t->table, t->route));
		txn_fail(t, WEIR_ERR(NOMEM));
	}
}
