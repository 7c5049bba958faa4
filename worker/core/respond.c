/*
 * respond.c: direct responses and redirects (worker/respond.h).
 */

#include "worker/core/core.h"
#include <stdio.h>
#include <string.h>

#include "common/log.h"

void respond_start(struct txn *t)
{
	const struct policy_return *ret = &route_returns(t->table)[t->route->ret];
	struct vars_ctx x = {.c = t->c, .t = t, .status = (int)ret->status};
	/* a worker is one thread: the expansions are copied into the answer
	 * buffer before anything else runs */
	static char loc[VARS_TEXT * 2], body[65536];
	size_t ll = 0, bl = 0, hl;
	int full = 0, bad = 0, f2 = 0;
	char head[512];
	struct buf *b;

	if (ret->has_location)
		ll = vars_expand(&ret->location, &x, VARS_ESC_NONE, loc, sizeof(loc), &full, &bad);
	if (bad || full) {
		log_warn("%s: the location of route %s%s would %s; answering 500", t->c->peer, route_host(t->table, t->route),
		         route_path(t->table, t->route), bad ? "hold a control byte" : "pass 8 KiB");
		txn_fail(t, WEIR_ERR(BAD_HEADER_VALUE));
		return;
	}
	if (ret->body.n)
		bl = vars_expand(&ret->body, &x, VARS_ESC_NONE, body, wk.buf_size < sizeof(body) ? wk.buf_size : sizeof(body),
		                 &f2, NULL);
	t->client_close = !t->req.keep_alive || wk.draining;
	hl = (size_t)snprintf(head, sizeof(head), "HTTP/1.1 %u %s\r\n%s%s%sContent-Length: %zu\r\n", ret->status,
	                      head_reason((int)ret->status), bl ? "Content-Type: " : "", bl ? ret->content_type : "",
	                      bl ? "\r\n" : "", bl);
	if (f2 || hl + ll + bl + 128 + REALIP_ID_MAX > wk.buf_size || !(b = buf_get_fit((uint32_t)(hl + ll + bl + 128 + REALIP_ID_MAX)))) {
		log_warn("%s: the answer of route %s%s does not fit a buffer; answering 503", t->c->peer, route_host(t->table, t->route),
		         route_path(t->table, t->route));
		txn_fail(t, WEIR_ERR(NOMEM));
		return;
	}
	memcpy(b->data, head, hl);
	b->end = (uint32_t)hl;
	if (ret->has_location) {
		memcpy(b->data + b->end, "Location: ", 10);
		memcpy(b->data + b->end + 10, loc, ll);
		memcpy(b->data + b->end + 10 + ll, "\r\n", 2);
		b->end += (uint32_t)(ll + 12);
	}
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
	t->status = (int)ret->status;
	t->resp_started = 1;
	t->resp_done = 1;
	outq_body(&t->down.q, NULL, 0, b->data, b->end, 0);
	txn_pump(t);
}
