/*
 * h2_ws.c: WebSocket over HTTP/2 (RFC 8441), on the core's HTTP/1.1
 * Upgrade path.
 *
 * Principle: the core already makes tunnels of upgrades, and checks the
 * switch (worker/core/tunnel.c); the stream only translates. An extended
 * CONNECT (:method CONNECT, :protocol websocket, :scheme, :path,
 * :authority, Sec-WebSocket-Version 13) is written for the core as `GET
 * <path> HTTP/1.1` with Upgrade: websocket, Connection: Upgrade and a
 * Sec-WebSocket-Key weir makes (RFC 8441 has none, and a client's is never
 * taken: the Accept check would then prove nothing). The upstream's 101 is
 * a switch only when its Sec-WebSocket-Accept answers that key; the core
 * asks here (h2_ws_accept_check) before it makes the tunnel, so a wrong one
 * is the core's ordinary 502. The checked 101 goes to the client as
 * :status 200, and from there the response body is the tunnel: upstream
 * bytes become DATA through the stream's one buffer (a client whose window
 * is shut stops the upstream being read, as for any body), the client's
 * DATA is handed to the tunnel and consumed (WINDOW_UPDATE) only once the
 * tunnel wrote it upstream. END_STREAM is the half close both ways; a
 * RST_STREAM, or the connection going, ends the tunnel; a tunnel that ends
 * otherwise (error, idle, drain) is reset.
 */
#include "worker/h2/h2_internal.h"

#include <string.h>

#include <openssl/base64.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/log.h"
#include "worker/base/base.h"
#include "worker/core/core.h"

/* RFC 6455 1.3: what the key is hashed with */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static int h2_ws_name(const struct hrec *r, const char *lit)
{
	return r->nlen == strlen(lit) && memcmp(r->name, lit, r->nlen) == 0;
}

int h2_ws_is_protocol(const struct hrec *r)
{
	return h2_ws_name(r, ":protocol");
}

/* Counted by reason; the caller answers <rc> (and logs it). */
static int h2_ws_refuse(enum h2_ws_refuse why, int rc)
{
	SHM_ADD(wk.cnt, h2_ws_refused[why], 1);
	return rc;
}

int h2_ws_connect(struct h2_stream *st)
{
	struct hrec r, proto = {0}, version = {0};
	int scheme = 0, path = 0, auth = 0;

	for (size_t off = 0; off < st->hb->end;) {
		off = h2_rec(st->hb, off, &r);
		if (h2_ws_is_protocol(&r))
			proto = r;
		else if (h2_ws_name(&r, ":scheme"))
			scheme = 1;
		else if (h2_ws_name(&r, ":path"))
			path = 1;
		else if (h2_ws_name(&r, ":authority"))
			auth = 1;
		else if (h2_ws_name(&r, "sec-websocket-version"))
			version = r;
	}
	/* RFC 9113 8.5: a plain CONNECT asks for a TCP tunnel, which a
	 * reverse proxy does not make; a :protocol other than websocket is
	 * one weir does not speak (RFC 9110 15.6.2) */
	if (!proto.name)
		return h2_ws_refuse(H2_WS_REFUSE_CONNECT, WEIR_ERR(H2_CONNECT));
	if (!wk.cfg->http2.websocket || proto.vlen != 9 || memcmp(proto.value, "websocket", 9) != 0)
		return h2_ws_refuse(H2_WS_REFUSE_PROTOCOL, WEIR_ERR(H2_CONNECT));
	/* RFC 8441 4 and RFC 6455 4.1: the target whole, and version 13 */
	if (!scheme || !path || !auth || version.vlen != 2 || memcmp(version.value, "13", 2) != 0)
		return h2_ws_refuse(H2_WS_REFUSE_REQUEST, WEIR_ERR(H2_WS_REQUEST));
	st->ws = H2_WS_ASKED;
	return 0;
}

int h2_ws_skip_field(const struct h2_stream *st, const struct hrec *r)
{
	/* the key is weir's, and the version written with it */
	return st->ws && (h2_ws_name(r, "sec-websocket-key") || h2_ws_name(r, "sec-websocket-version"));
}

int h2_ws_head_fields(struct h2_stream *st, struct http_request *r)
{
	/* what an HTTP/1.1 client's upgrade says (RFC 6455 4.1), the key
	 * kept in the stream: the fields point at it for the request's life */
	static const char *const names[] = {"Upgrade", "Connection", "Sec-WebSocket-Version", "Sec-WebSocket-Key"};
	const char *values[] = {"websocket", "Upgrade", "13", st->ws_key};
	uint8_t raw[16], md[SHA_DIGEST_LENGTH];
	SHA_CTX sha;
	size_t klen;
	int rc = 0;

	RAND_bytes(raw, sizeof(raw));
	klen = EVP_EncodeBlock((uint8_t *)st->ws_key, raw, sizeof(raw));
	SHA1_Init(&sha);
	SHA1_Update(&sha, st->ws_key, klen);
	SHA1_Update(&sha, ws_guid, sizeof(ws_guid) - 1);
	SHA1_Final(md, &sha);
	EVP_EncodeBlock((uint8_t *)st->ws_accept, md, sizeof(md));
	for (size_t i = 0; i < 4 && !rc; i++)
		rc = http_request_add_field(r, names[i], strlen(names[i]), values[i], strlen(values[i]));
	return rc;
}

static const struct hdr *h2_ws_find(const struct msg *m, const char *name)
{
	const struct hdr *found = NULL;

	for (uint32_t i = 0; i < m->hl.n; i++)
		if (http_span_ieq(m->hl.v[i].name, m->hl.v[i].name_len, name)) {
			if (found)
				return NULL; /* two: neither is believed */
			found = &m->hl.v[i];
		}
	return found;
}

int h2_ws_accept_check(const struct conn *c, const struct msg *resp)
{
	struct h2_stream *st = c->h2s;
	const struct hdr *h;
	size_t want;

	if (!st || st->ws != H2_WS_ASKED)
		return 0;
	h = h2_ws_find(resp, "sec-websocket-accept");
	want = strlen(st->ws_accept);
	if (h && h->value_len == want && memcmp(h->value, st->ws_accept, want) == 0)
		return 0;
	SHM_ADD(wk.cnt, h2_ws_refused[H2_WS_REFUSE_BAD_ACCEPT], 1);
	log_warn("%s: upstream's 101 to an HTTP/2 WebSocket has %s Sec-WebSocket-Accept; answering 502", c->peer,
	         h ? "a wrong" : "no (or two)");
	return WEIR_ERR(H2_WS_BAD_ACCEPT);
}

int h2_ws_no_switch(const struct conn *c, int status)
{
	const struct h2_stream *st = c->h2s;

	if (!st || st->ws != H2_WS_ASKED || status < 200 || status >= 300)
		return 0;
	SHM_ADD(wk.cnt, h2_ws_refused[H2_WS_REFUSE_NO_SWITCH], 1);
	log_warn("%s: upstream answered an HTTP/2 WebSocket with %d, not a switch; answering 502", c->peer, status);
	return WEIR_ERR(H2_WS_NO_SWITCH);
}

int h2_ws_skip_resp(const struct h2_stream *st, const struct hdr *h)
{
	/* the Accept answered weir's key, not the client's: it stays here */
	return st->ws && http_span_ieq(h->name, h->name_len, "sec-websocket-accept");
}

void h2_ws_open(struct h2_stream *st)
{
	/* the tunnel's bytes: as an until-close body, ended by the upstream's
	 * EOF (h2_stream_shutdown) */
	st->resp_state = H2_RESP_BODY;
	st->resp_eof = 0;
	st->ws = H2_WS_OPEN;
	/* DATA the client sent before the 200 waits in <body>: the tunnel's
	 * first read (h2_stream_io_set) must see it, whatever the core made
	 * of it meanwhile */
	if (st->body && buf_len(st->body))
		st->unreported = 1;
	SHM_ADD(wk.cnt, h2_ws_opened, 1);
	SHM_ADD(wk.cnt, h2_ws_active, 1);
}

int h2_ws_recv(struct side *s)
{
	struct conn *c = s->c;
	struct h2_stream *st = c->h2s;
	struct buf *b = st->body;
	size_t n = b ? buf_len(b) : 0;

	/* the tunnel asks again only once what it was given is written
	 * upstream (its input and queue empty): now the client may send more */
	if (st->ws_handed) {
		if (!st->ng_closed) {
			nghttp2_session_consume(st->s->ng, st->id, st->ws_handed);
			h2_session_kick(st->s);
		}
		st->ws_handed = 0;
	}
	st->unreported = 0;
	if (n) {
		size_t room;

		if (!c->in && !(c->in = buf_get()))
			return WEIR_ERR(NOMEM);
		room = c->in->cap - c->in->end;
		if (n > room)
			n = room;
		memcpy(c->in->data + c->in->end, b->data + b->start, n);
		c->in->end += (uint32_t)n;
		b->start += (uint32_t)n;
		if (b->start == b->end) {
			buf_put(b);
			st->body = NULL;
		}
		st->ws_handed = (uint32_t)n;
		SHM_ADD(wk.cnt, bytes_in, n);
		c->readable = 1; /* asked again once written: the consume above */
		return (int)n;
	}
	c->readable = 0;
	if (st->in_eos)
		return 0; /* END_STREAM: the half close */
	if (st->ng_closed)
		return WEIR_ERR(CLIENT_CLOSED);
	return WEIR_EAGAIN;
}

void h2_stream_shutdown(struct conn *c)
{
	struct h2_stream *st = c->h2s;

	if (st->resp_state == H2_RESP_BODY) {
		st->resp_eof = 1;
		st->resp_state = H2_RESP_DONE;
		h2_stream_more(st);
	}
}

int h2_ws_closed_clean(struct h2_stream *st, uint32_t code)
{
	/* both END_STREAMs: the DATA before the client's may still wait in
	 * <body>, and a close now would drop it */
	if (st->ws != H2_WS_OPEN || code != NGHTTP2_NO_ERROR || st->rst_recv || !st->in_eos)
		return 0;
	h2_stream_wake(st, EV_READ);
	return 1;
}

int h2_ws_close(struct h2_stream *st)
{
	struct txn *t = st->sc.txn;

	if (st->ws != H2_WS_OPEN || !t || !tunnel_is_open(t))
		return 0;
	tunnel_end_stream(t);
	return 1;
}

static int h2_ws_is_tunnel(const struct h2_stream *st)
{
	return st->ws == H2_WS_OPEN && !st->core_done && st->sc.txn && tunnel_is_open(st->sc.txn);
}

int h2_session_drain_cut(struct conn *c, int tunnels)
{
	struct h2_session *s = c->h2;
	struct h2_stream *st, *next;
	int left = 0;

	for (st = s->streams; st; st = st->next)
		left += h2_ws_is_tunnel(st);
	if (!left)
		return 0;
	/* a tunnel lives until timeouts.tunnel_drain as on HTTP/1 (a
	 * WebSocket may be open for hours), the rest of the session not */
	for (st = s->streams; st; st = next) {
		next = st->next; /* a closed stream nghttp2 is done with is freed */
		if (st->core_done)
			continue;
		if (h2_ws_is_tunnel(st)) {
			if (tunnels)
				tunnel_cut(st->sc.txn);
			continue;
		}
		worker_count_error(WEIR_ERR(DRAIN_CUT));
		h2_stream_close(&st->sc);
	}
	if (!tunnels)
		return 1;
	conn_close(c);
	return 0;
}

void h2_ws_free(struct h2_stream *st)
{
	if (st->ws == H2_WS_OPEN)
		SHM_ADD(wk.cnt, h2_ws_active, -1);
}
