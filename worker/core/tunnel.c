#include "worker/core/core.h"

#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "common/log.h"
#include "worker/h1/h1.h"
#include "worker/h2/h2.h"
#include "worker/up/up.h"

void tunnel_offer(struct txn *t)
{
	const struct msg *r = &t->req;
	const struct hdr *h = r->upgrade;
	struct tunnel *tn = &t->tun;

	tn->proto_len = 0;
	if (!h || !r->conn_upgrade || r->version_minor != 1 || r->method_id != HTTP_GET)
		return;
	if (r->body == HTTP_BODY_CHUNKED || (r->body == HTTP_BODY_LENGTH && r->content_length > 0))
		return;
	/* h2c is refused by the config too; checked here so that no route
	 * table can ever let it through */
	if (h->value_len >= sizeof(tn->proto) || http_span_ieq(h->value, h->value_len, "h2c") ||
	    !route_upgrade_allowed(t->route, h->value, h->value_len))
		return;
	/* copied: the request's header spans do not outlive its head (the
	 * input buffer goes, and the header array is reused by the response) */
	memcpy(tn->proto, h->value, h->value_len);
	tn->proto_len = (uint8_t)h->value_len;
}

int tunnel_check_switch(const struct txn *t)
{
	const struct hdr *h = t->resp.upgrade;
	const struct tunnel *tn = &t->tun;

	if (!tn->proto_len || !h || h->value_len != tn->proto_len ||
	    strncasecmp(h->value, tn->proto, tn->proto_len) != 0)
		return WEIR_ERR(UPSTREAM_BAD_UPGRADE);
	/* an HTTP/2 WebSocket: weir made the key, so weir checks the Accept */
	return h2_ws_accept_check(t->c, &t->resp);
}

void tunnel_start(struct txn *t)
{
	struct tunnel *tn = &t->tun;

	memcpy(tn->server, route_servers(t->table)[t->server].text, sizeof(tn->server));
	SHM_ADD(wk.cnt, responses[1], 1);
	/* the request is answered: counted now, for its route and server,
	 * while the generation that names them is still held */
	txn_count_end(t, 101);
	tn->idle = TXN_SET(t)->timeouts.tunnel;
	t->route = NULL;
	t->server = -1;
	t->set = NULL;
	worker_table_release(t->table);
	t->table = NULL;
	/* nor the state of its server, which a reload may now free: the
	 * connection is never pooled again, and a TLS session ticket that
	 * arrives in the tunnel is not kept (the overflow state keeps none) */
	t->u->srv = &wk.servers[UPSTREAM_STATE_OVERFLOW];
	tn->on = 1;
	tn->cl_eof = t->c->eof;
	wk.ntunnels++;
	SHM_ADD(wk.cnt, tunnels_opened, 1);
	SHM_ADD(wk.cnt, tunnels_active, 1);
	/* one idle clock, on both sides' timers (moving a deadline later is
	 * a store) */
	upstream_set_deadline(t->u, worker_after(tn->idle));
	conn_set_deadline(t->c, worker_after(tn->idle));
}

void tunnel_free(struct txn *t)
{
	(void)t;
	wk.ntunnels--;
	SHM_ADD(wk.cnt, tunnels_active, -1);
}

int tunnel_is_open(const struct txn *t)
{
	return t->tun.on;
}

static void tunnel_end(struct txn *t, enum tunnel_end by)
{
	struct conn *c = t->c;

	SHM_ADD(wk.cnt, tunnels_closed[by], 1);
	txn_log_phase(t, 101, 101); /* counted when it started: no route left */
	txn_abort(t, by == TUNNEL_END_ERROR ? WEIR_ERR(TUNNEL_ERROR) : 0);
	conn_close(c);
}

void tunnel_end_stream(struct txn *t)
{
	tunnel_end(t, (enum tunnel_end)t->tun.first_eof); /* client unless the upstream closed first */
}

void tunnel_on_timeout(struct txn *t)
{
	log_info("%s: tunnel idle for timeouts.tunnel; closing it", t->c->peer);
	tunnel_end(t, TUNNEL_END_IDLE);
}

void tunnel_cut(struct txn *t)
{
	worker_count_error(WEIR_ERR(DRAIN_CUT));
	tunnel_end(t, TUNNEL_END_DRAIN);
}

/* Our write side to a peer: close_notify first on TLS, then the FIN; the
 * other direction stays open. */
static void tunnel_shut(int fd, SSL *ssl)
{
	if (ssl && SSL_is_init_finished(ssl))
		SSL_shutdown(ssl);
	shutdown(fd, SHUT_WR);
}

/* A side sent its EOF: the first one is who closed the tunnel. */
static void tunnel_eof(struct tunnel *tn, uint8_t *eof, enum tunnel_end side)
{
	if (!tn->cl_eof && !tn->up_eof)
		tn->first_eof = (uint8_t)side;
	*eof = 1;
}

/* A buffer holding nothing goes back: an idle tunnel holds none. */
static void tunnel_trim(struct buf **b)
{
	if (*b && buf_len(*b) == 0) {
		buf_put(*b);
		*b = NULL;
	}
}

void tunnel_pump(struct txn *t)
{
	struct conn *c = t->c;
	struct upconn *u = t->u;
	struct tunnel *tn = &t->tun;
	int progress = 1, io = 0, rc;
	ssize_t n;

	while (progress) {
		progress = 0;
		/* client -> upstream */
		if (t->up.q.count) {
			n = t->up.ops->flush(&t->up, 0);
			if (n < 0) {
				tunnel_end(t, TUNNEL_END_ERROR);
				return;
			}
			if (n > 0) {
				progress = io = 1;
				tn->bytes_up += (uint64_t)n;
				SHM_ADD(wk.cnt, tunnel_bytes_up, n);
			}
		}
		if (!t->up.q.count) {
			struct buf *in = c->in;

			if (in && buf_len(in)) {
				outq_body(&t->up.q, in, buf_len(in), in->data + in->start, buf_len(in), 0);
				progress = 1;
			} else if (!tn->cl_eof && c->readable) {
				if (in)
					in->start = in->end = 0;
				rc = t->down.ops->recv(&t->down);
				if (rc > 0) {
					progress = io = 1;
				} else if (rc == 0 || rc == WEIR_ERR(CLIENT_CLOSED)) {
					tunnel_eof(tn, &tn->cl_eof, TUNNEL_END_CLIENT);
					progress = 1;
				} else if (rc != WEIR_EAGAIN) {
					tunnel_end(t, TUNNEL_END_ERROR);
					return;
				}
			} else if (tn->cl_eof && !tn->up_shut) {
				tunnel_shut(u->io.fd, u->ssl);
				tn->up_shut = 1;
				progress = 1;
			}
		}
		/* upstream -> client */
		if (t->down.q.count) {
			n = t->down.ops->flush(&t->down, 0);
			if (n < 0) {
				tunnel_end(t, TUNNEL_END_ERROR);
				return;
			}
			if (n > 0) {
				progress = io = 1;
				tn->bytes_down += (uint64_t)n;
				t->bytes_out += (uint64_t)n;
				SHM_ADD(wk.cnt, bytes_out, n);
				SHM_ADD(wk.cnt, tunnel_bytes_down, n);
			}
		}
		if (!t->down.q.count) {
			struct buf *in = u->in;

			if (in && buf_len(in)) {
				outq_body(&t->down.q, in, buf_len(in), in->data + in->start, buf_len(in), 0);
				progress = 1;
			} else if (!tn->up_eof && u->readable) {
				if (in)
					in->start = in->end = 0;
				rc = txn_upstream_read(t);
				if (rc > 0) {
					progress = io = 1;
				} else if (rc == 0 || rc == WEIR_ERR(UPSTREAM_CLOSED)) {
					tunnel_eof(tn, &tn->up_eof, TUNNEL_END_UPSTREAM);
					progress = 1;
				} else if (rc != WEIR_EAGAIN) {
					tunnel_end(t, TUNNEL_END_ERROR);
					return;
				}
			} else if (tn->up_eof && !tn->cl_shut) {
				if (c->h2s) /* a stream's conn shares its session's socket */
					h2_stream_shutdown(c);
				else
					tunnel_shut(c->io.fd, c->ssl);
				tn->cl_shut = 1;
				progress = 1;
			}
		}
		if (tn->up_shut && tn->cl_shut) {
			tunnel_end(t, (enum tunnel_end)tn->first_eof);
			return;
		}
	}
	tunnel_trim(&c->in);
	tunnel_trim(&u->in);
	/* a side is read only once the other has taken what it sent before */
	conn_io_set(c, (!tn->cl_eof && !t->up.q.count ? EV_READ : 0) | (t->down.q.count ? EV_WRITE : 0));
	worker_io_set(&u->io, u->tls_wants | (t->up.q.count ? EV_WRITE : 0) |
	                          (!tn->up_eof && !t->down.q.count ? EV_READ : 0));
	if (io) {
		conn_set_deadline(c, worker_after(tn->idle));
		upstream_set_deadline(u, worker_after(tn->idle));
	}
}
