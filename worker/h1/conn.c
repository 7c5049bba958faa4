#include "worker/h1/h1.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "worker/core/grpc.h"
#include "worker/h2/h2.h"
#include "worker/net/net.h"
#include "worker/up/up.h"

/* After a closing answer, how long and how much the client may still send
 * before we close: closing a socket with unread input makes the kernel
 * send a reset, which drops what is still queued of our answer. Past
 * LINGER_BYTES we stop reading and only wait, polling every LINGER_POLL,
 * for the client to acknowledge the answer; LINGER_TIME bounds it all. */
#define LINGER_TIME 5.0
#define LINGER_POLL 0.1
#define DRAIN_IDLE_GRACE 1.0

static void conn_on_head(struct conn *c);
static void conn_write_answer(struct conn *c);

/* An idle client costs the worker 512 bytes in all (test_many_conns holds
 * it to that); this struct is half of it. */
_Static_assert(sizeof(struct conn) <= 256, "struct conn outgrew its 256 bytes");

void conn_set_deadline(struct conn *c, ev_tstamp at)
{
	worker_deadline_set(&c->timer, &c->deadline, &c->graced, at);
}

void conn_io_set(struct conn *c, int events)
{
	if (c->h2s) {
		h2_stream_io_set(c, events);
		return;
	}
	worker_io_set(&c->io, events ? events | c->tls_read_wants | c->tls_write_wants : 0);
}

/* The outcome of an SSL_read (<reading>) or SSL_write that returned
 * <rc> <= 0, as read(2) or write(2) would tell it. When the call needs the
 * other direction of the socket, that event goes into *<wants>. */
static ssize_t conn_tls_error(struct conn *c, int rc, int reading, uint8_t *wants)
{
	switch (SSL_get_error(c->ssl, rc)) {
	case SSL_ERROR_ZERO_RETURN: /* close_notify */
		if (reading)
			return 0;
		errno = EPIPE;
		return -1;
	case SSL_ERROR_WANT_READ:
		if (!reading)
			*wants = EV_READ;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		if (reading)
			*wants = EV_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_SYSCALL:
		if (errno != 0)
			return -1;
		/* end of stream without close_notify: most clients close so */
		if (reading)
			return 0;
		errno = EPIPE;
		return -1;
	default:
		ERR_clear_error();
		errno = EPROTO;
		return -1;
	}
}

ssize_t conn_recv(struct conn *c, void *p, size_t n)
{
	int rc;

	if (c->h2s)
		return h2_stream_recv(c, p, n);
	if (!c->ssl)
		return recv(c->io.fd, p, n, 0);
	c->tls_read_wants = 0;
	errno = 0;
	rc = SSL_read(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
	if (rc > 0)
		return rc;
	return conn_tls_error(c, rc, 1, &c->tls_read_wants);
}

/*
 * TLS: tls_write() seals more than a record (a long body, HTTP/2's
 * gathered write) into up to five records that leave in one write(2), and
 * gathers several iovecs of less into one record. A retry after EAGAIN or
 * WANT_WRITE sees the same iovecs (the queues only move on success), so it
 * passes the same bytes again, as BoringSSL and the seal buffer require.
 */
static ssize_t conn_tls_sendv(struct conn *c, const struct iovec *iov, int cnt)
{
	int rc;
	ssize_t n;

	c->tls_write_wants = 0;
	if ((n = tls_write(c->ssl, iov, cnt, &rc)) != 0)
		return n;
	return conn_tls_error(c, rc, 0, &c->tls_write_wants);
}

ssize_t conn_sendv(struct conn *c, const struct iovec *iov, int cnt, int more)
{
	if (c->h2s)
		return h2_stream_sendv(c, iov, cnt);
	if (c->ssl)
		return conn_tls_sendv(c, iov, cnt);
	return worker_sendv(c->io.fd, iov, cnt, more ? MSG_MORE : 0);
}

int conn_read(struct conn *c)
{
	ssize_t n;
	size_t room;

	if (!c->in && !(c->in = buf_get()))
		return WEIR_ERR(NOMEM);
	room = c->in->cap - c->in->end;
	if (room == 0)
		return WEIR_EAGAIN;
	for (;;) {
		n = conn_recv(c, c->in->data + c->in->end, room);
		if (n > 0) {
			c->in->end += (uint32_t)n;
			c->read_long = (uint32_t)n >= c->in->cap / 2;
			SHM_ADD(wk.cnt, bytes_in, n);
			/* a short read drained the socket: the next readiness
			 * event tells us when there is more, no need to ask;
			 * with TLS a short read ends a record, and what is left
			 * of it, or of the bytes read ahead, raises no event */
			if ((size_t)n < room && !(c->ssl && tls_bio_pending(c->ssl)))
				c->readable = 0;
			return (int)n;
		}
		if (n == 0) {
			c->eof = 1;
			c->readable = 0;
			return 0;
		}
		if (errno == EINTR)
			continue;
		c->readable = 0;
		if (errno == EAGAIN)
			return WEIR_EAGAIN;
		c->eof = 1;
		return WEIR_ERR(CLIENT_CLOSED);
	}
}

static void conn_release_input(struct conn *c)
{
	if (c->in && buf_len(c->in) == 0) {
		buf_put(c->in);
		c->in = NULL;
	}
}

void conn_close(struct conn *c)
{
	if (c->h2s) {
		h2_stream_close(c);
		return;
	}
	if (c->h2)
		h2_session_free(c);
	if (c->txn)
		txn_abort(c->txn, 0);
	ev_io_stop(wk.loop, &c->io);
	ev_timer_stop(wk.loop, &c->timer);
	tls_close(c);
	close(c->io.fd);
	if (c->in)
		buf_put(c->in);
	if (c->answer_buf)
		buf_put(c->answer_buf);
	if (c->prev)
		c->prev->next = c->next;
	else
		wk.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	wk.nconns--;
	SHM_SET(wk.cnt, conn_active, wk.nconns);
	slab_free(&wk.slab, wk.cls_conn, c);
	worker_check_drained();
}

/* Waits for the next request on a kept-alive connection, or parses it at
 * once if it is already buffered (pipelining). */
static void conn_next_request(struct conn *c)
{
	c->state = CONN_IDLE;
	c->close_after = 0;
	conn_release_input(c);
	/* draining: the answer just sent promised keep-alive (it was begun
	 * before the drain), so the client may already be sending its next
	 * request; it gets the same grace as conn_drain() gives */
	conn_set_deadline(c, wk.draining && !c->in ? ev_now(wk.loop) + DRAIN_IDLE_GRACE
	                     : worker_after(c->in ? wk.cfg->timeouts.client_header : wk.cfg->timeouts.client_keepalive));
	conn_io_set(c, EV_READ);
	if (conn_unread(c) || c->readable) {
		/* answers weir makes itself finish within this call, so a buffer
		 * of pipelined requests for no route would recurse once per
		 * request: past a few, continue from the loop instead */
		static int depth;

		if (depth >= 8) {
			ev_feed_event(wk.loop, &c->io, EV_READ);
			return;
		}
		depth++;
		conn_on_head(c);
		depth--;
	}
}

void conn_linger(struct conn *c)
{
	if (c->eof || c->h2s) { /* a stream's end is its codec's */
		conn_close(c);
		return;
	}
	/* TLS: close_notify first; from here on the input is discarded
	 * unread, so it is read raw */
	tls_close(c);
	shutdown(c->io.fd, SHUT_WR);
	c->state = CONN_LINGER;
	c->answer_len = 0; /* reused: bytes discarded */
	if (c->in) {
		buf_put(c->in);
		c->in = NULL;
	}
	c->linger_until = ev_now(wk.loop) + LINGER_TIME;
	conn_io_set(c, EV_READ);
	conn_set_deadline(c, c->linger_until);
}

/* Whether everything we wrote has been acknowledged by the client: then a
 * reset can no longer take anything from it. */
static int conn_output_acked(struct conn *c)
{
	int n = 0;

	return ioctl(c->io.fd, SIOCOUTQ, &n) == 0 && n == 0;
}

/* Past the byte bound: stop reading (the client's window closes, its
 * sends stop) and close once the answer is acknowledged or time is up. */
static void conn_linger_wait(struct conn *c)
{
	ev_tstamp now = ev_now(wk.loop);

	if (now >= c->linger_until || conn_output_acked(c)) {
		conn_close(c);
		return;
	}
	conn_io_set(c, 0);
	conn_set_deadline(c, now + LINGER_POLL < c->linger_until ? now + LINGER_POLL : c->linger_until);
}

static void conn_on_linger(struct conn *c)
{
	char sink[4096];

	for (;;) {
		ssize_t n = conn_recv(c, sink, sizeof(sink));
		if (n > 0) {
			c->answer_len += (uint32_t)n;
			if (c->answer_len > CONN_LINGER_BYTES) {
				conn_linger_wait(c);
				return;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		break;
	}
	conn_close(c);
}

void conn_txn_done(struct conn *c, int keep)
{
	if (c->h2s) /* one request per stream */
		conn_close(c);
	else if (keep && (!c->eof || conn_unread(c)))
		/* after a close, what was pipelined before it is still served */
		conn_next_request(c);
	else if (c->eof || (!c->in || buf_len(c->in) == 0))
		conn_close(c);
	else
		conn_linger(c);
}

/*
 * Closing an idle keep-alive connection races with the client's next
 * request: if it is already on the wire, the client sees the close and
 * loses it. So a draining worker closes an idle connection only after it
 * has stayed idle for DRAIN_IDLE_GRACE; a request arriving before that is
 * served, answered with "Connection: close", and the connection closed
 * after the answer, which no client can misread.
 */
void conn_drain(struct conn *c)
{
	if (c->state == CONN_H2)
		h2_session_drain(c);
	else if (c->state == CONN_IDLE && (!c->in || buf_len(c->in) == 0))
		conn_set_deadline(c, ev_now(wk.loop) + DRAIN_IDLE_GRACE);
}

/* ---- answers weir makes itself ------------------------------------- */

static const char *conn_reason(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 500: return "Internal Server Error";
	case 504: return "Gateway Timeout";
	case 425: return "Too Early";
	default: return "Error";
	}
}

/* The body of a canned answer: "503 Service Unavailable\n". */
static int conn_canned_body(char *out, size_t cap, int status)
{
	return snprintf(out, cap, "%d %s\n", status, conn_reason(status));
}

/* Canned answers, formatted once per status and closing flavour: the
 * HTTP/1 codec's own texts of the answers conn_answer_fields() describes
 * (an open breaker's 503, <retry> >= 0, with its Retry-After). */
static const char *conn_canned(int status, int retry, int close, uint32_t *len)
{
	static struct {
		int status;
		uint32_t len[2];
		char text[2][192];
	} cache[16];
	static uint32_t blen[2][61];
	static char btext[2][61][224];
	char body[64];
	int i, n;

	if (retry >= 0) {
		retry = retry > 60 ? 60 : retry;
		if (!blen[close][retry]) {
			n = conn_canned_body(body, sizeof(body), 503);
			blen[close][retry] = (uint32_t)snprintf(btext[close][retry], sizeof(btext[close][retry]),
			                                        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
			                                        "Content-Length: %d\r\nRetry-After: %d\r\n%s\r\n%s",
			                                        n, retry, close ? "Connection: close\r\n" : "", body);
		}
		*len = blen[close][retry];
		return btext[close][retry];
	}
	for (i = 0; i < 16 && cache[i].status && cache[i].status != status; i++)
		;
	if (i == 16)
		i = 15; /* cannot happen with the statuses in err.h */
	if (cache[i].status != status) {
		const char *r = conn_reason(status);

		n = conn_canned_body(body, sizeof(body), status);
		for (int k = 0; k < 2; k++)
			cache[i].len[k] = (uint32_t)snprintf(cache[i].text[k], sizeof(cache[i].text[k]),
			                                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
			                                     "Content-Length: %d\r\n%s\r\n%s",
			                                     status, r, n, k ? "Connection: close\r\n" : "", body);
		cache[i].status = status;
	}
	*len = cache[i].len[close];
	return cache[i].text[close];
}

/* With request_id on, the canned answer copied with the request's
 * X-Request-Id before its blank line (the core's realip); without memory,
 * the canned one goes out as it is. */
static void conn_answer_id(struct conn *c, const struct txn *t)
{
	uint32_t id_len;
	const char *id = txn_request_id(t, &id_len);
	const char *end = id_len ? memmem(c->answer, c->answer_len, "\r\n\r\n", 4) : NULL;
	size_t head = end ? (size_t)(end - c->answer) + 2 : 0;
	uint32_t len = c->answer_len + 16 + id_len;
	struct buf *b;

	if (!end || !(b = buf_get_fit(len)))
		return;
	memcpy(b->data, c->answer, head);
	memcpy(b->data + head, "X-Request-Id: ", 14);
	memcpy(b->data + head + 14, id, id_len);
	memcpy(b->data + head + 14 + id_len, "\r\n", 2);
	memcpy(b->data + head + 16 + id_len, c->answer + head, c->answer_len - head);
	c->answer_buf = b;
	c->answer = b->data;
	c->answer_len = len;
}

/* The answer for error <rc> (status <status>) as fields into <a>, which
 * has room for 16: <given>'s (auth's), a gRPC trailers-only one, the
 * breaker's 503 or the canned one; then "Connection: close" with <close>
 * and the request's X-Request-Id, as the canned texts have them. */
static void conn_answer_fields(struct answer *a, const struct answer *given, const struct txn *t, int rc,
                               int status, int close, char *body, size_t cap)
{
	uint32_t id_len = 0;
	const char *id = t ? txn_request_id(t, &id_len) : NULL;

	a->status = status;
	if (t && grpc_request(t)) { /* a gRPC client reads grpc-status, not a text body */
		grpc_answer(a, grpc_code(rc, status), weir_err_index(rc) >= 0 ? weir_err_text(rc) : "error");
	} else if (given) {
		a->status = given->status;
		a->reason = given->reason;
		for (uint32_t i = 0; i < given->n && a->n < a->cap; i++)
			a->f[a->n++] = given->f[i];
		a->body = given->body;
		a->body_len = given->body_len;
	} else {
		int n = conn_canned_body(body, cap, status);

		a->reason = conn_reason(status);
		answer_add(a, "Content-Type", "text/plain", 10);
		answer_length(a, (uint64_t)n);
		if (rc == WEIR_ERR(BREAKER_OPEN) || rc == WEIR_ERR(ADAPTIVE_CONCURRENCY)) {
			static char ra[20]; /* copied by the codec before the next answer */

			answer_add(a, "Retry-After", ra, worker_u64_text(ra, breaker_retry_secs()));
		}
		a->body = body;
		a->body_len = (uint32_t)n;
	}
	if (close)
		answer_add(a, "Connection", "close", 5);
	if (id_len)
		answer_add(a, "X-Request-Id", id, id_len);
}

void conn_answer_canned(struct conn *c, int rc, int status, int close)
{
	int breaker = rc == WEIR_ERR(BREAKER_OPEN) || rc == WEIR_ERR(ADAPTIVE_CONCURRENCY);

	/* HTTP/1's own texts, formatted once */
	c->answer = conn_canned(status, breaker ? (int)breaker_retry_secs() : -1, close, &c->answer_len);
	if (c->txn)
		conn_answer_id(c, c->txn);
}

void conn_answer_error(struct conn *c, int rc, int close)
{
	conn_answer_with(c, rc, close, NULL);
}

void conn_answer_with(struct conn *c, int rc, int close, const struct answer *a)
{
	int status = weir_err_status(rc);
	struct txn *t = c->txn;

	worker_count_error(rc);
	if (!a) { /* else the caller logs, rate-limited */
		if (status >= 500)
			log_warn("%s: %s -> %d", c->peer, weir_err_text(rc), status);
		else if (status)
			log_info("%s: %s -> %d", c->peer, weir_err_text(rc), status);
		else
			log_info("%s: %s, closing", c->peer, weir_err_text(rc));
	}
	if (status == 0) {
		conn_close(c);
		return;
	}
	/* after these the request framing cannot be trusted or the request
	 * was not read: the only safe next step is to close */
	if (status == 400 || status == 408 || status == 413 || status == 414 || status == 431)
		close = 1;
	close |= txn_answered(c, status);
	if (wk.draining)
		close = 1;
	SHM_ADD(wk.cnt, responses[status / 100], 1);
	if (!c->codec->canned || a || grpc_request(t)) {
		struct answer_field f[16];
		struct answer x = {.f = f, .cap = 16};
		char body[64];
		struct buf *b = NULL;

		conn_answer_fields(&x, a, t, rc, status, close, body, sizeof(body));
		if (c->codec->answer(c, &x, &b) == 0) {
			c->answer_buf = b;
			c->answer = b ? b->data : NULL;
			c->answer_len = b ? b->end : 0;
		} else if (!c->codec->canned) {
			conn_close(c); /* nothing could be sent: the stream is reset */
			return;
		}
	}
	/* the codec's fast path, and its answer without memory */
	if (!c->answer_buf && c->codec->canned)
		c->codec->canned(c, rc, status, close);
	if (t)
		txn_free(t);
	c->close_after = (uint8_t)close;
	c->state = CONN_ANSWER;
	conn_write_answer(c);
}

static void conn_write_answer(struct conn *c)
{
	while (c->answer_len) {
		struct iovec v = {.iov_base = (void *)c->answer, .iov_len = c->answer_len};
		ssize_t n = conn_sendv(c, &v, 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				conn_io_set(c, EV_WRITE);
				conn_set_deadline(c, worker_after(wk.cfg->timeouts.client_send));
				return;
			}
			conn_close(c);
			return;
		}
		SHM_ADD(wk.cnt, bytes_out, n);
		c->answer += n;
		c->answer_len -= (uint32_t)n;
	}
	if (c->answer_buf) {
		buf_put(c->answer_buf);
		c->answer_buf = NULL;
	}
	if (c->close_after)
		conn_linger(c);
	else
		conn_txn_done(c, 1);
}

/* ---- reading request heads ------------------------------------------ */

static void conn_on_head(struct conn *c)
{
	for (;;) {
		if (conn_unread(c)) {
			struct txn *t = c->txn;
			int rc;

			if (!t && c->h2c && !c->tls) {
				/* HTTP/2 with prior knowledge: the preface, never a request */
				int h2 = h2_preface_check(c->in->data + c->in->start, buf_len(c->in));

				if (h2 > 0) {
					h2_session_start(c);
					return;
				}
				if (h2 == 0 && !c->readable)
					break;
				if (h2 == 0)
					goto read;
			}
			if (!t) {
				t = txn_new(c);
				if (!t) {
					conn_answer_error(c, WEIR_ERR(NOMEM), 1);
					return;
				}
				/* a head must start at the front: it may need the whole buffer */
				buf_compact(c->in);
				c->state = CONN_HEAD;
				conn_set_deadline(c, worker_after(wk.cfg->timeouts.client_header));
			}
			rc = http_request_parse(txn_head_parser(t), c->in->data, c->in->end);
			if (rc == 0) {
				c->state = CONN_TXN;
				txn_start(t);
				return;
			}
			if (rc != WEIR_EAGAIN) {
				conn_answer_error(c, rc, 1);
				return;
			}
			if (c->in->end == c->in->cap) {
				conn_answer_error(c, WEIR_ERR(HEADERS_TOO_LARGE), 1);
				return;
			}
		}
	read:
		if (!c->readable)
			break;
		int n = conn_read(c);
		if (n > 0)
			continue;
		if (n == WEIR_EAGAIN)
			break;
		if (n == WEIR_ERR(NOMEM)) {
			conn_answer_error(c, n, 1);
			return;
		}
		/* end of stream or error: quietly if between requests */
		if (c->txn)
			worker_count_error(WEIR_ERR(CLIENT_CLOSED));
		conn_close(c);
		return;
	}
	if (!c->txn)
		conn_release_input(c);
}

/* TLS listener: drives the handshake; once done, the connection waits
 * for its first request like a new plain one. */
static void conn_on_handshake(struct conn *c)
{
	const char *why = NULL;
	int events = 0, reason;
	int rc = tls_handshake(c, &events, &why, &reason);

	if (rc == WEIR_EAGAIN) {
		worker_io_set(&c->io, events);
		return;
	}
	if (rc < 0) {
		if (why)
			tls_handshake_failed(c, reason, why);
		conn_close(c);
		return;
	}
	{
		const uint8_t *proto;
		unsigned plen;

		SSL_get0_alpn_selected(c->ssl, &proto, &plen);
		if (plen == 2 && memcmp(proto, "h2", 2) == 0) {
			c->readable = 1;
			h2_session_start(c);
			return;
		}
	}
	c->state = CONN_IDLE;
	c->readable = 1; /* the request often follows the Finished message at once */
	conn_set_deadline(c, worker_after(wk.cfg->timeouts.client_header));
	conn_io_set(c, EV_READ);
	conn_on_head(c);
}

/* proxy_protocol listener: reads the PROXY header; once done, the
 * connection goes on as one accepted from its source would. */
static void conn_on_proxy(struct conn *c)
{
	int rc = conn_proxy_read(c);

	if (rc == WEIR_EAGAIN)
		return;
	if (rc < 0) {
		conn_close(c);
		return;
	}
	conn_set_deadline(c, worker_after(wk.cfg->timeouts.client_header));
	if (c->ssl) {
		c->state = CONN_HANDSHAKE;
		conn_on_handshake(c);
		return;
	}
	c->state = CONN_IDLE;
	conn_on_head(c);
}

static void conn_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	(void)loop;

	/* an SSL_read that waited for the socket to drain is a read to retry
	 * (an SSL_write that waited for input is retried by whoever has bytes
	 * queued); each wish is cleared once its event came, so a call that is
	 * not retried cannot leave the watcher firing */
	if ((revents & EV_WRITE) && c->tls_read_wants) {
		c->tls_read_wants = 0;
		c->readable = 1;
	}
	if (revents & EV_READ) {
		c->tls_write_wants = 0;
		c->readable = 1;
	}
	switch (c->state) {
	case CONN_PROXY:
		conn_on_proxy(c);
		break;
	case CONN_HANDSHAKE:
		conn_on_handshake(c);
		break;
	case CONN_IDLE:
	case CONN_HEAD:
		conn_on_head(c);
		break;
	case CONN_TXN:
		txn_pump(c->txn);
		break;
	case CONN_ANSWER:
		conn_write_answer(c);
		break;
	case CONN_LINGER:
		conn_on_linger(c);
		break;
	case CONN_H2:
		h2_session_io(c, revents);
		break;
	case CONN_STREAM:
		h2_stream_begin(c);
		break;
	}
}

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data, *io_owner;
	int ready;
	(void)revents;

	if (worker_deadline_early(&c->timer, c->deadline))
		return;
	/* an HTTP/2 stream's conn has no socket: its session's is asked */
	io_owner = c->h2s ? h2_conn_parent(c) : c;
	if ((ready = worker_deadline_grace(&c->timer, &io_owner->io, &c->graced))) {
		conn_io_cb(loop, &io_owner->io, ready);
		return;
	}
	switch (c->state) {
	case CONN_PROXY:
		conn_proxy_timeout(c);
		conn_close(c);
		break;
	case CONN_HANDSHAKE:
		/* bounded by timeouts.client_header; a client that never sent a
		 * byte is closed quietly, as an idle plain connection is */
		if (tls_got_bytes(c))
			tls_handshake_failed(c, TLS_FAIL_TIMEOUT, "timed out");
		conn_close(c);
		break;
	case CONN_IDLE:
		conn_close(c); /* keep-alive idle timeout: nothing to say */
		break;
	case CONN_HEAD:
		conn_answer_error(c, WEIR_ERR(HEADER_TIMEOUT), 1);
		break;
	case CONN_TXN:
		txn_on_client_timeout(c->txn);
		break;
	case CONN_ANSWER:
		worker_count_error(WEIR_ERR(CLIENT_TIMEOUT));
		conn_close(c);
		break;
	case CONN_LINGER:
		if (c->answer_len > CONN_LINGER_BYTES)
			conn_linger_wait(c);
		else
			conn_close(c);
		break;
	case CONN_H2:
		h2_session_timeout(c);
		break;
	case CONN_STREAM: /* no timer runs before its transaction */
		conn_close(c);
		break;
	}
}

void conn_accept(int fd, const struct sockaddr *sa, int l)
{
	struct conn *c = slab_alloc(&wk.slab, wk.cls_conn);
	const void *a;

	if (!c) {
		worker_count_error(WEIR_ERR(NOMEM));
		close(fd);
		return;
	}
	memset(c, 0, sizeof(*c));
	/* answers go out in a few writes; do not let Nagle hold the last one */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	a = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
	                              : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	if (!inet_ntop(sa->sa_family, a, c->peer, sizeof(c->peer)))
		strcpy(c->peer, "unknown");
	c->peer_len = (uint8_t)strlen(c->peer);

	ev_io_init(&c->io, conn_io_cb, fd, EV_READ);
	c->io.data = c;
	ev_init(&c->timer, conn_timer_cb);
	c->timer.data = c;
	c->next = wk.conns;
	if (wk.conns)
		wk.conns->prev = c;
	wk.conns = c;
	wk.nconns++;
	SHM_ADD(wk.cnt, conn_total, 1);
	SHM_SET(wk.cnt, conn_active, wk.nconns);

	c->state = CONN_IDLE;
	c->codec = &h1_server_codec;
	c->h2c = (uint8_t)wk.cfg->listeners[l].h2c;
	if (tls_listener(l)) {
		c->tls = 1;
		c->state = CONN_HANDSHAKE;
		c->ssl = tls_new(l, fd);
		if (!c->ssl) {
			worker_count_error(WEIR_ERR(NOMEM));
			conn_close(c);
			return;
		}
	}
	ev_io_start(wk.loop, &c->io);
	if (wk.cfg->listeners[l].proxy_protocol) {
		/* the header comes first, before TLS or HTTP */
		c->state = CONN_PROXY;
		conn_set_deadline(c, worker_after(wk.cfg->timeouts.proxy_protocol));
		return;
	}
	conn_set_deadline(c, worker_after(wk.cfg->timeouts.client_header));
}

void conn_init_stream(struct conn *sc, const struct conn *parent)
{
	memset(sc, 0, sizeof(*sc));
	/* never started: the session feeds its events (ev_feed_event); the
	 * fd is the session's, for what asks the socket its addresses */
	ev_io_init(&sc->io, conn_io_cb, parent->io.fd, EV_READ);
	sc->io.data = sc;
	ev_init(&sc->timer, conn_timer_cb);
	sc->timer.data = sc;
	memcpy(sc->peer, parent->peer, sizeof(sc->peer));
	sc->peer_len = parent->peer_len;
	sc->tls = parent->tls;
	sc->state = CONN_STREAM;
	sc->codec = &h1_server_codec;
}
