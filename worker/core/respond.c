/*
 * respond.c: direct responses and redirects (worker/respond.h).
 */

#include "worker/core/core.h"
#include <stdio.h>
#include <string.h>

#include "common/log.h"

int respond_send(struct txn *t, struct answer *a)
{
	struct buf *b = NULL;
	int over = 0;

	t->client_close = !t->req.keep_alive || wk.draining;
	if (t->ident.id_len)
		over |= answer_add(a, "X-Request-Id", t->ident.id, t->ident.id_len);
	if (t->client_close)
		over |= answer_add(a, "Connection", "close", 5);
	else if (t->req.version_minor == 0)
		over |= answer_add(a, "Connection", "keep-alive", 10);
	if (t->req.method_id == HTTP_HEAD)
		a->body_len = 0; /* its Content-Length stays */
	if (over || t->c->codec->answer(t->c, a, &b) < 0)
		return -1; /* a field did not fit, or the answer */
	t->status = a->status;
	t->resp_started = 1;
	t->resp_done = 1;
	if (b) {
		/* HTTP/1's text, head and body, written as a head */
		t->down.head = b;
		outq_body(&t->down.q, NULL, 0, b->data, b->end, 0);
	} else {
		t->bytes_out += a->body_len; /* framed by the codec (HTTP/2) */
	}
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
	struct answer_field f[8];
	struct answer a = {.status = (int)ret->status, .f = f, .cap = 8, .body = body};

	if (ret->has_location)
		ll = vars_expand(&ret->location, &x, VARS_ESC_NONE, loc, VARS_TEXT * 2, &full, &bad);
	if (bad || full) {
		log_warn("%s: the location of route %s%s would %s; answering 500", t->c->peer, route_host(t->table, t->route),
		         route_path(t->table, t->route), bad ? "hold a control byte" : "pass 8 KiB");
		txn_fail(t, WEIR_ERR(BAD_HEADER_VALUE));
		return;
	}
	if (ret->body.n)
		bl = vars_expand(&ret->body, &x, VARS_ESC_NONE, body, wk.buf_size < sizeof(body) ? wk.buf_size : sizeof(body),
		                 &f2, NULL);
	if (bl)
		answer_add(&a, "Content-Type", ret->content_type, strlen(ret->content_type));
	answer_length(&a, bl);
	if (ret->has_location)
		answer_add(&a, "Location", loc, ll);
	a.body_len = (uint32_t)bl;
	if (f2 || respond_send(t, &a) < 0) {
		log_warn("%s: the answer of route %s%s does not fit a buffer; answering 503", t->c->peer, route_host(t->table, t->route),
		         route_path(t->table, t->route));
		txn_fail(t, WEIR_ERR(NOMEM));
	}
}
