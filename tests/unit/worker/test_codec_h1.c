/*
 * Unit tests for worker/h1/codec_h1.c: the input framing contract of the
 * codec ops (body_start, body_next, consumed) as the stream core drives
 * it, whatever the wire framing: payload spans where they lie in the
 * input buffer, the same span handed again until consumed, the buffer
 * consumed only for what was written, framing refused, the whole body in
 * place or CODEC_SPLIT, until close ended by the peer's close; attach
 * and discard.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/err.h"
#include "worker/base/base.h"
#include "worker/h1/h1.h"
#include "worker/net/net.h"
#include "worker/up/up.h"
#include "tests/unit/unit.h"

#define BUFSZ 64

static struct buf *inbuf;
static uint32_t budget = 1 << 20; /* the pipe budget sides start with */
static struct conn conn;
static struct upconn up;

static int suite_init(void)
{
	wk.buf_size = BUFSZ;
	wk.cls_stream = -1; /* no slab here: every body reads into inbuf */
	inbuf = malloc(sizeof(struct buf) + BUFSZ);
	if (!inbuf)
		return -1;
	inbuf->cap = BUFSZ;
	return 0;
}

static int suite_clean(void)
{
	free(inbuf);
	return 0;
}

/* A client side whose input buffer holds <bytes> from offset <at>. */
static struct side *server_side(const struct msg *m, unsigned at, const char *bytes)
{
	static struct side s;

	memset(&s, 0, sizeof(s));
	memset(&conn, 0, sizeof(conn));
	conn.in = inbuf;
	inbuf->start = at;
	inbuf->end = at + (uint32_t)strlen(bytes);
	memcpy(inbuf->data + at, bytes, strlen(bytes));
	s.c = &conn;
	s.ops = &h1_server_codec;
	s.ops->body_start(&s, m, budget);
	return &s;
}

static void feed(const char *bytes)
{
	memcpy(inbuf->data + inbuf->end, bytes, strlen(bytes));
	inbuf->end += (uint32_t)strlen(bytes);
}

static void test_a_length_body_comes_as_spans_of_the_buffer_consumed_once_written(void)
{
	struct msg m = {.body = HTTP_BODY_LENGTH, .content_length = 10};
	struct side *s = server_side(&m, 8, "abcdef");
	struct body_span sp, again;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_PTR_EQUAL(sp.data, inbuf->data + 8); /* where it lies: no copy */
	CU_ASSERT_EQUAL(sp.len, 6);
	CU_ASSERT_FALSE(sp.eos);
	/* handed again, not consumed, until the core says it was written */
	CU_ASSERT_EQUAL(s->ops->body_next(s, &again, 0), 1);
	CU_ASSERT_PTR_EQUAL(again.data, sp.data);
	CU_ASSERT_EQUAL(again.len, 6);
	CU_ASSERT_EQUAL(inbuf->start, 8);
	CU_ASSERT_EQUAL(s->ops->consumed(s, 6), 0); /* nothing more ready: recv first */
	CU_ASSERT_EQUAL(inbuf->start, 14);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 0); /* more input needed */
	feed("ghijGET /");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 4);
	CU_ASSERT(sp.eos);
	CU_ASSERT_EQUAL(memcmp(sp.data, "ghij", 4), 0);
	CU_ASSERT_EQUAL(s->in.total, 10);
	CU_ASSERT_EQUAL(s->ops->consumed(s, 4), 1); /* bytes past it are there */
	/* what follows the body (a pipelined request) stays */
	CU_ASSERT_EQUAL(inbuf->start, 18);
	CU_ASSERT_EQUAL(memcmp(inbuf->data + inbuf->start, "GET /", 5), 0);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 0);
}

static void test_a_span_written_in_part_keeps_its_input_until_all_of_it_is(void)
{
	struct msg m = {.body = HTTP_BODY_LENGTH, .content_length = 6};
	struct side *s = server_side(&m, 0, "abcdef");
	struct body_span sp;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(s->ops->consumed(s, 2), 1); /* the rest of the span */
	CU_ASSERT_EQUAL(inbuf->start, 0);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 4);
	CU_ASSERT_EQUAL(memcmp(sp.data, "cdef", 4), 0);
	s->ops->consumed(s, 4);
	CU_ASSERT_EQUAL(inbuf->start, 6);
}

static void test_chunked_data_is_gathered_into_one_span_without_framing(void)
{
	struct msg m = {.body = HTTP_BODY_CHUNKED};
	struct side *s = server_side(&m, 0, "3\r\nabc\r\n2\r\nde\r\n");
	struct body_span sp;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 5);
	CU_ASSERT_EQUAL(memcmp(sp.data, "abcde", 5), 0);
	CU_ASSERT_FALSE(sp.eos);
	CU_ASSERT(s->in.moved); /* the second chunk's data moved: no replay */
	s->ops->consumed(s, 5);
	CU_ASSERT_EQUAL(inbuf->start, 15); /* the framing went with it */
	feed("0\r\n\r\nGET");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 0);
	CU_ASSERT(sp.eos);
	s->ops->consumed(s, 0);
	CU_ASSERT_EQUAL(inbuf->start, 20);
	CU_ASSERT_EQUAL(s->in.total, 5);
}

static void test_chunked_framing_alone_is_consumed_at_once(void)
{
	struct msg m = {.body = HTTP_BODY_CHUNKED};
	struct side *s = server_side(&m, 0, "3\r\n");
	struct body_span sp;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 0);
	CU_ASSERT_EQUAL(inbuf->start, 3);
	feed("abc");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 3);
	CU_ASSERT_PTR_EQUAL(sp.data, inbuf->data + 3);
	CU_ASSERT_FALSE(s->in.moved);
}

static void test_bad_chunked_framing_is_refused(void)
{
	struct msg m = {.body = HTTP_BODY_CHUNKED};
	struct side *s = server_side(&m, 0, "3\r\nabc\r\nz\r\n");
	struct body_span sp;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), WEIR_ERR(SMUGGLING));
	s = server_side(&m, 0, "3\nabc\r\n"); /* bare LF */
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), WEIR_ERR(SMUGGLING));
}

static void test_a_whole_body_comes_in_place_or_split(void)
{
	struct msg m = {.body = HTTP_BODY_LENGTH, .content_length = 8};
	struct side *s = server_side(&m, 40, "abcd");
	struct body_span sp;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 1), 0); /* fits: wait for all */
	feed("efgh");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 1), 1);
	CU_ASSERT_EQUAL(sp.len, 8);
	CU_ASSERT(sp.eos);
	/* the streaming path finds the same span */
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_PTR_EQUAL(sp.data, inbuf->data + 40);
	/* past the buffer's end from where it starts: in pieces */
	m.content_length = 30;
	s = server_side(&m, 40, "abcd");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 1), CODEC_SPLIT);
	m.body = HTTP_BODY_CHUNKED;
	s = server_side(&m, 0, "3\r\nabc\r\n0\r\n\r\n");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 1), CODEC_SPLIT);
}

/* An upstream side on one end of a socket pair (fds[1] is the upstream),
 * its input buffer holding <len> bytes from offset <at>. */
static struct side *client_side(const struct msg *m, int fds[2], unsigned at, unsigned len)
{
	static struct side s;

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
	memset(&s, 0, sizeof(s));
	memset(&up, 0, sizeof(up));
	up.io.fd = fds[0];
	up.in = inbuf;
	inbuf->start = at;
	inbuf->end = at + len;
	memset(inbuf->data, 'x', BUFSZ);
	s.u = &up;
	s.ops = &h1_client_codec;
	s.ops->body_start(&s, m, budget);
	return &s;
}

static void test_a_body_until_close_ends_with_the_peers_close(void)
{
	struct msg m = {.body = HTTP_BODY_CLOSE};
	struct body_span sp;
	int fds[2];
	struct side *s = client_side(&m, fds, 0, 0);
	CU_ASSERT_EQUAL(write(fds[1], "hello", 5), 5);
	CU_ASSERT_EQUAL(s->ops->recv(s), 5);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 5);
	CU_ASSERT_FALSE(sp.eos);
	s->ops->consumed(s, 5);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 0);
	close(fds[1]);
	CU_ASSERT_EQUAL(s->ops->recv(s), 0);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 0);
	CU_ASSERT(sp.eos);
	close(fds[0]);
}

static void test_a_full_buffer_moves_down_only_when_nothing_is_handed_up(void)
{
	struct msg m = {.body = HTTP_BODY_LENGTH, .content_length = 100};
	struct body_span sp;
	int fds[2];
	struct side *s = client_side(&m, fds, 8, BUFSZ - 8); /* behind a head */
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(write(fds[1], "y", 1), 1);
	/* the span is still queued: the buffer may not move, nor take more */
	CU_ASSERT_EQUAL(s->ops->recv(s), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(inbuf->start, 8);
	CU_ASSERT_EQUAL(inbuf->end, BUFSZ);
	CU_ASSERT_FALSE(s->in.moved);
	s->ops->consumed(s, BUFSZ - 8 - 4); /* in part: kept */
	CU_ASSERT_EQUAL(s->ops->recv(s), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(inbuf->start, 8);
	s->ops->consumed(s, 4);
	CU_ASSERT_EQUAL(inbuf->start, BUFSZ);
	CU_ASSERT_EQUAL(s->ops->recv(s), 1);
	CU_ASSERT_EQUAL(inbuf->start, 0);
	CU_ASSERT_EQUAL(inbuf->end, 1);
	CU_ASSERT(s->in.moved);
	close(fds[0]);
	close(fds[1]);
}

static void test_a_chunked_peer_gets_each_span_framed_and_the_last_chunk(void)
{
	static struct side s;

	memset(&s, 0, sizeof(s));
	s.ops = &h1_client_codec;
	s.chunked = 1;
	s.ops->send_body(&s, "abc", 3, 0);
	CU_ASSERT_EQUAL(s.q.count, 3);
	CU_ASSERT_EQUAL(s.q.iov[0].iov_len, 3);
	CU_ASSERT_EQUAL(memcmp(s.q.iov[0].iov_base, "3\r\n", 3), 0);
	CU_ASSERT_EQUAL(memcmp(s.q.iov[2].iov_base, "\r\n", 2), 0);
	outq_reset(&s.q);
	s.ops->send_body(&s, NULL, 0, 1);
	CU_ASSERT_EQUAL(s.q.count, 1);
	CU_ASSERT_EQUAL(memcmp(s.q.iov[0].iov_base, "0\r\n\r\n", 5), 0);
	/* not chunked: an empty end queues nothing */
	outq_reset(&s.q);
	s.chunked = 0;
	s.ops->send_body(&s, NULL, 0, 1);
	CU_ASSERT_EQUAL(s.q.count, 0);
}

static void test_attach_binds_the_stream_and_a_new_connection_takes_the_codec(void)
{
	static struct side s;
	struct txn *t = (struct txn *)&s; /* any address: only stored */

	memset(&s, 0, sizeof(s));
	memset(&conn, 0, sizeof(conn));
	h1_server_codec.attach(&s, &conn, NULL, t);
	CU_ASSERT_PTR_EQUAL(s.c, &conn);
	CU_ASSERT_PTR_EQUAL(conn.txn, t);
	memset(&s, 0, sizeof(s));
	memset(&up, 0, sizeof(up));
	s.ops = &h1_client_codec;
	s.q.sent = 1; /* left from a connection before */
	s.ops->attach(&s, NULL, &up, t);
	CU_ASSERT_PTR_EQUAL(s.u, &up);
	CU_ASSERT_PTR_EQUAL(up.txn, t);
	CU_ASSERT_PTR_EQUAL(up.codec, &h1_client_codec);
	CU_ASSERT_EQUAL(s.q.sent, 0);
	CU_ASSERT_EQUAL(h1_client_codec.avail_streams(&up), 0);
	up.txn = NULL;
	CU_ASSERT_EQUAL(h1_client_codec.avail_streams(&up), 1);
}

static void test_a_discarded_body_hands_nothing_more_up(void)
{
	struct msg m = {.body = HTTP_BODY_LENGTH, .content_length = 100};
	struct side *s = server_side(&m, 4, "abcdef");
	struct body_span sp;

	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	s->ops->discard(s);
	CU_ASSERT_EQUAL(inbuf->start, inbuf->end);
	feed("ghij");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 0);
	CU_ASSERT_EQUAL(inbuf->start, 10); /* consumed by nobody */
}

static void test_a_span_is_at_most_the_pipe_budget_whatever_the_framing(void)
{
	struct msg m = {.body = HTTP_BODY_LENGTH, .content_length = 10};
	struct side *s;
	struct body_span sp;

	budget = 4;
	s = server_side(&m, 0, "abcdefghij");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 4);
	CU_ASSERT(sp.more); /* held back: the core counts the stall */
	CU_ASSERT_EQUAL(s->ops->consumed(s, 4), 1); /* and asks again at once */
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(memcmp(sp.data, "efgh", 4), 0);
	s->ops->consumed(s, 4);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 2);
	CU_ASSERT(sp.eos);
	CU_ASSERT_FALSE(sp.more);
	/* a buffered body is bounded by body_buffer, not by the budget */
	s = server_side(&m, 0, "abcdefghij");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 1), 1);
	CU_ASSERT_EQUAL(sp.len, 10);
	/* chunked: the rest of a chunk waits, decoded once */
	m.body = HTTP_BODY_CHUNKED;
	s = server_side(&m, 0, "6\r\nabcdef\r\n3\r\nghi\r\n0\r\n\r\n");
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 4);
	CU_ASSERT_EQUAL(memcmp(sp.data, "abcd", 4), 0);
	CU_ASSERT(sp.more);
	s->ops->consumed(s, 4);
	CU_ASSERT_EQUAL(inbuf->start, 7);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 4);
	CU_ASSERT_EQUAL(memcmp(sp.data, "efgh", 4), 0); /* "ef" and "gh" gathered */
	s->ops->consumed(s, 4);
	CU_ASSERT_EQUAL(s->ops->body_next(s, &sp, 0), 1);
	CU_ASSERT_EQUAL(sp.len, 1);
	CU_ASSERT_EQUAL(memcmp(sp.data, "i", 1), 0);
	CU_ASSERT(sp.eos);
	CU_ASSERT_EQUAL(s->in.total, 9);
	budget = 1 << 20;
}

static const struct unit_test tests[] = {
	{"a length body comes as spans of the buffer, consumed once written",
	 test_a_length_body_comes_as_spans_of_the_buffer_consumed_once_written},
	{"a span written in part keeps its input until all of it is",
	 test_a_span_written_in_part_keeps_its_input_until_all_of_it_is},
	{"chunked data is gathered into one span without framing",
	 test_chunked_data_is_gathered_into_one_span_without_framing},
	{"chunked framing alone is consumed at once", test_chunked_framing_alone_is_consumed_at_once},
	{"bad chunked framing is refused", test_bad_chunked_framing_is_refused},
	{"a whole body comes in place or split", test_a_whole_body_comes_in_place_or_split},
	{"a body until close ends with the peer's close", test_a_body_until_close_ends_with_the_peers_close},
	{"a full buffer moves down only when nothing is handed up",
	 test_a_full_buffer_moves_down_only_when_nothing_is_handed_up},
	{"a chunked peer gets each span framed, and the last chunk",
	 test_a_chunked_peer_gets_each_span_framed_and_the_last_chunk},
	{"attach binds the stream, and a new connection takes the codec",
	 test_attach_binds_the_stream_and_a_new_connection_takes_the_codec},
	{"a discarded body hands nothing more up", test_a_discarded_body_hands_nothing_more_up},
	{"a span is at most the pipe budget, whatever the framing",
	 test_a_span_is_at_most_the_pipe_budget_whatever_the_framing},
};

int main(void)
{
	return unit_run("worker/codec_h1", tests, sizeof(tests) / sizeof(tests[0]), suite_init, suite_clean);
}
