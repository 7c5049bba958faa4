/*
 * h2_session.c: an HTTP/2 connection (h2.h): nghttp2's callbacks, the
 * defences on top of them, the read batch and the gathered write.
 */
#include "worker/h2/h2_internal.h"

#include <errno.h>
#include <string.h>

#include "common/heap.h"
#include "common/log.h"
#include "worker/base/base.h"
#include "worker/core/core.h"
#include "worker/h2/h2_trailers.h"

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN 24

static int cls_h2;             /* sessions and streams share one class */
static int cls_out;            /* the gathered write, h2_out_size bytes */
uint32_t h2_out_size;
static nghttp2_session_callbacks *h2_cbs;
static nghttp2_option *h2_opt;
static ev_tstamp log_next;
static uint32_t log_unlogged;

static void h2_session_flush_cb(struct ev_loop *loop, ev_prepare *w, int revents);
static ev_idle nudge;

static void h2_nudge_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)revents;
	ev_idle_stop(loop, w);
}

/* ---- counters -------------------------------------------------------- */

void h2_count_rst(int sent, uint32_t code)
{
	if (code >= H2_CODES)
		code = H2_CODES - 1;
	if (sent)
		SHM_ADD(wk.cnt, h2_rst_sent[code], 1);
	else
		SHM_ADD(wk.cnt, h2_rst_recv[code], 1);
}

void h2_gauges(int dstreams)
{
	static uint64_t open;

	open += (uint64_t)(int64_t)dstreams;
	SHM_SET(wk.cnt, h2_streams_active, open);
}

/* A defence tripped: counted, logged at a rate, GOAWAY with <code>. */
static void h2_session_refuse(struct h2_session *s, int rc, uint32_t code)
{
	if (s->refused) /* the rest of the batch that tripped it */
		return;
	s->refused = 1;
	worker_count_error(rc);
	if (worker_log_gate(&log_next, &log_unlogged)) {
		log_warn("%s: HTTP/2 %s: GOAWAY (%u more not logged)", s->c->peer, weir_err_text(rc), log_unlogged);
		log_unlogged = 0;
	}
	if (!s->goaway || code != NGHTTP2_NO_ERROR)
		nghttp2_session_terminate_session(s->ng, code);
	s->goaway = 1;
}

/* The per-second windows of the rate defences. */
static void h2_window_roll(struct h2_session *s)
{
	ev_tstamp now = ev_now(wk.loop);

	if (now - s->win_start >= 1.0) {
		s->win_start = now;
		s->win_resets = 0;
		s->win_control = 0;
	}
}

/* ---- nghttp2 callbacks ------------------------------------------------ */

/*
 * A client's HEADERS for stream <id>: whether it names a stream the client
 * skipped. RFC 9113 5.1.1 makes that a connection error (a new stream's id
 * must be above every one the client opened, and opening one closes the
 * idle streams below it), but libnghttp2 ignores a HEADERS below the
 * highest id it saw when it knows no such stream: it cannot tell a stream
 * never opened from one closed and forgotten, whose late trailers are no
 * error. weir remembers the ranges skipped, so the first kind is told.
 */
static int h2_stream_skipped(struct h2_session *s, int32_t id)
{
	if (!(id & 1))
		return 0; /* an even id is libnghttp2's to refuse */
	if (id > s->max_id) {
		if (id > s->max_id + 2) {
			int32_t *g = s->gap[s->ngaps++ % H2_GAPS];

			g[0] = s->max_id + 2;
			g[1] = id - 2;
		}
		s->max_id = id;
		return 0;
	}
	for (unsigned i = 0; i < H2_GAPS && i < s->ngaps; i++)
		if (id >= s->gap[i][0] && id <= s->gap[i][1])
			return 1;
	return 0;
}

static int h2_on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud)
{
	struct h2_session *s = ud;

	if (s->dead)
		return 0;
	if (hd->type == NGHTTP2_HEADERS) {
		if (h2_stream_skipped(s, hd->stream_id)) {
			worker_count_error(WEIR_ERR(H2_PROTOCOL));
			if (worker_log_gate(&log_next, &log_unlogged)) {
				log_info("%s: HTTP/2: HEADERS for stream %d, which the client skipped (it opened %d): "
				         "GOAWAY (%u more not logged)",
				         s->c->peer, hd->stream_id, s->max_id, log_unlogged);
				log_unlogged = 0;
			}
			nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
			s->goaway = 1;
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		}
		s->continuations = 0;
		s->in_headers = !(hd->flags & NGHTTP2_FLAG_END_HEADERS);
	} else if (hd->type == NGHTTP2_CONTINUATION) {
		s->in_headers = !(hd->flags & NGHTTP2_FLAG_END_HEADERS);
		if (++s->continuations > wk.cfg->http2.max_continuations) {
			h2_session_refuse(s, WEIR_ERR(H2_CONTINUATION), NGHTTP2_ENHANCE_YOUR_CALM);
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		}
	}
	return 0;
}

static int h2_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct h2_session *s = ud;
	struct h2_stream *st;

	if (s->dead || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if (s->goaway) { /* past GOAWAY: refused, the client retries elsewhere */
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	if (s->nstreams >= wk.cfg->http2.max_concurrent_streams) {
		/* streams still tearing down count: a reset frees no place
		 * before its upstream work is gone */
		worker_count_error(WEIR_ERR(H2_STREAMS));
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	st = h2_stream_new(s, f->hd.stream_id);
	if (!st) {
		worker_count_error(WEIR_ERR(NOMEM));
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
	s->streams_seen++;
	return 0;
}

static int h2_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                        const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
	struct h2_session *s = ud;
	struct h2_stream *st;
	(void)flags;

	if (s->dead || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	s->rx_payload += nlen + vlen;
	st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	if (!st)
		return 0;
	if (st->head_done) /* the trailing HEADERS (h2_trailers.h) */
		return st->core_done ? 0 : h2_trailers_field(st, name, nlen, value, vlen);
	return h2_stream_header(st, name, nlen, value, vlen);
}

/* A frame that did no work (nginx's flood rule, by count): PING,
 * SETTINGS, PRIORITY, a WINDOW_UPDATE while nothing waits for window,
 * an empty DATA that does not end its stream. */
static int h2_no_work(const struct h2_session *s, const nghttp2_frame *f)
{
	switch (f->hd.type) {
	case NGHTTP2_PING:
	case NGHTTP2_SETTINGS:
		return !(f->hd.flags & NGHTTP2_FLAG_ACK);
	case NGHTTP2_PRIORITY:
		return 1;
	case NGHTTP2_WINDOW_UPDATE:
		for (const struct h2_stream *st = s->streams; st; st = st->next)
			if (h2_stream_has_data(st))
				return 0;
		return 1;
	case NGHTTP2_DATA:
		return f->hd.length == 0 && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM);
	default:
		return 0;
	}
}

static int h2_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct h2_session *s = ud;
	struct h2_stream *st;

	if (s->dead)
		return 0;
	h2_window_roll(s);
	/* frames nghttp2 shows are payload to http2.overhead_ratio: those
	 * that do no work have a budget of their own (control_frames), and a
	 * long download's WINDOW_UPDATEs are most of what its client sends */
	if (f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS)
		s->rx_payload += 9u + f->hd.length; /* a frame's header is 9 bytes */
	if (h2_no_work(s, f) && ++s->win_control > wk.cfg->http2.control_frames) {
		h2_session_refuse(s, WEIR_ERR(H2_FLOOD), NGHTTP2_ENHANCE_YOUR_CALM);
		return 0;
	}
	if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK))
		s->settings_by = 0;
	if (f->hd.stream_id == 0)
		return 0;
	st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	if (!st)
		return 0;
	switch (f->hd.type) {
	case NGHTTP2_RST_STREAM:
		st->rst_recv = 1;
		h2_count_rst(0, f->rst_stream.error_code);
		break;
	case NGHTTP2_HEADERS:
		if (!st->head_done && (f->hd.flags & NGHTTP2_FLAG_END_HEADERS)) {
			s->in_headers = 0;
			if (h2_stream_head_end(st, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) == 0 &&
			    !st->in_start_list) {
				/* started after the whole read batch: a reset later in
				 * the same batch never reaches an upstream */
				st->in_start_list = 1;
				st->start_next = s->start;
				s->start = st;
			}
		} else if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
			h2_stream_eos(st); /* trailers end the body */
		}
		break;
	case NGHTTP2_DATA:
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			h2_stream_eos(st);
		break;
	}
	return 0;
}

static int h2_on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *p, size_t len, void *ud)
{
	struct h2_session *s = ud;
	struct h2_stream *st = s->dead ? NULL : nghttp2_session_get_stream_user_data(ng, id);
	(void)flags;

	s->rx_payload += len;
	if (!st || st->core_done || h2_stream_data(st, p, len) < 0) {
		/* thrown away: given back to the window at once */
		nghttp2_session_consume(ng, id, len);
	}
	return 0;
}

static int h2_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
	struct h2_session *s = ud;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);

	if (!st || s->dead)
		return 0;
	nghttp2_session_set_stream_user_data(ng, id, NULL);
	if (st->rst_recv && !st->submitted) {
		/* reset before its answer: Rapid Reset when most are */
		h2_window_roll(s);
		if (++s->win_resets > wk.cfg->http2.max_resets)
			h2_session_refuse(s, WEIR_ERR(H2_RAPID_RESET), NGHTTP2_ENHANCE_YOUR_CALM);
	}
	h2_stream_ng_closed(st, code);
	return 0;
}

static int h2_on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
	struct h2_session *s = ud;
	struct h2_stream *st;

	if (f->hd.type == NGHTTP2_RST_STREAM)
		h2_count_rst(1, f->rst_stream.error_code);
	else if (f->hd.type == NGHTTP2_GOAWAY)
		SHM_ADD(wk.cnt, h2_goaway_sent[f->goaway.error_code < H2_CODES ? f->goaway.error_code : H2_CODES - 1], 1);
	else if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK))
		s->settings_by = ev_now(wk.loop) + wk.cfg->http2.settings_timeout / 1000.0;
	if (s->dead || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM) || f->hd.stream_id == 0)
		return 0;
	st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	if (st && !st->in_eos && st->ws != H2_WS_OPEN) {
		/* answered before the request ended: the rest is not wanted
		 * (RFC 9113 8.1); a tunnel's END_STREAM is only its half close */
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
	}
	return 0;
}

/* A DATA frame of a direct response (NGHTTP2_DATA_FLAG_NO_COPY): its
 * header and payload go straight into the session's gathered write, from
 * the core's queue, which points into the upstream's input: on a plain
 * connection no copy of a long payload between the upstream's socket and
 * the client's (h2_out_place), one otherwise, not three.
 * The data source sized the frame to fit an empty <out>: until it fits
 * here nghttp2 asks again after the write; no padding is ever asked for
 * (no padding callback). */
static int h2_on_send_data(nghttp2_session *ng, nghttp2_frame *f, const uint8_t *hd, size_t length,
                           nghttp2_data_source *src, void *ud)
{
	struct h2_session *s = ud;
	struct buf *out = s->out;
	(void)ng;
	(void)f;

	if (!out || h2_out_size - out->end < length + 9)
		return NGHTTP2_ERR_WOULDBLOCK; /* asked again with the same frame */
	memcpy(out->data + out->end, hd, 9);
	h2_stream_take(src->ptr, out->data + out->end + 9, length);
	out->end += (uint32_t)(length + 9);
	return 0;
}

/*
 * Payload left in place. A DATA frame's payload already lies in memory
 * that stays put until the core consumes it, which is only after the
 * gathered write (h2_stream_pump_framed; a stream nghttp2 closes in
 * between waits for that too). So a long payload is not copied into
 * <out>: its room there is kept (<out> reads as if it were copied) and
 * the write sends it from where it lies, the frames between it from
 * <out>, in one sendmsg. Whatever the socket does not take is copied into
 * its room before the write returns (h2_out_settle), so nothing points
 * outside <out> past one write: a full socket costs the copy it always
 * did, a client that keeps up costs none. On a 64 KiB answer that copy was
 * two thirds of weir's user-space instructions per request (callgrind,
 * docs/design.md). TLS seals each record from one span anyway, so its
 * connections copy as before. One gathered write is under way at a time
 * in a worker, so the places are the worker's, not each session's.
 */
#define H2_PLACES 32
#define H2_PLACE_MIN 1024 /* a shorter payload is cheaper copied than sent apart */

static struct h2_place {
	uint32_t off, len; /* its room in <out> */
	const char *src;   /* where it lies */
} places[H2_PLACES];
static unsigned nplaces;
static const struct buf *places_out; /* the buffer they are rooms of */

void h2_out_place(struct h2_session *s, char *dst, const char *src, size_t n)
{
	/* another session's places pending cannot happen (each gather is
	 * written and settled before the next), but would cost only a copy */
	if (n >= H2_PLACE_MIN && nplaces < H2_PLACES && !s->c->ssl && (!nplaces || places_out == s->out)) {
		places_out = s->out;
		places[nplaces++] = (struct h2_place){(uint32_t)(dst - s->out->data), (uint32_t)n, src};
		return;
	}
	memcpy(dst, src, n);
	SHM_ADD(wk.cnt, h2_data_bytes[1], n);
}

/* <out> from its start as iovecs, each place's bytes from where they lie;
 * returns how many (at most 2 * H2_PLACES + 1). */
static int h2_out_iov(struct buf *out, struct iovec *v)
{
	uint32_t at = out->start;
	int n = 0;

	for (unsigned i = 0; i < nplaces; i++) {
		const struct h2_place *p = &places[i];
		uint32_t from = p->off > at ? p->off : at;

		if (p->off + p->len <= at)
			continue; /* written */
		if (from > at)
			v[n++] = (struct iovec){out->data + at, from - at};
		v[n++] = (struct iovec){(char *)p->src + (from - p->off), p->off + p->len - from};
		at = p->off + p->len;
	}
	if (out->end > at)
		v[n++] = (struct iovec){out->data + at, out->end - at};
	return n;
}

/* After a write: the places it sent are done, the rest of each is copied
 * into its room, and none is left. */
static void h2_out_settle(struct buf *out)
{
	for (unsigned i = 0; i < nplaces; i++) {
		const struct h2_place *p = &places[i];
		uint32_t from = p->off > out->start ? p->off : out->start;

		if (p->off + p->len <= out->start) {
			SHM_ADD(wk.cnt, h2_data_bytes[0], p->len);
			continue;
		}
		SHM_ADD(wk.cnt, h2_data_bytes[0], from - p->off);
		SHM_ADD(wk.cnt, h2_data_bytes[1], p->off + p->len - from);
		memcpy(out->data + from, p->src + (from - p->off), p->off + p->len - from);
	}
	nplaces = 0;
	places_out = NULL;
}

/* ---- the session -------------------------------------------------------- */

void h2_init(const struct config *cfg)
{
	size_t a = sizeof(struct h2_session), b = sizeof(struct h2_stream);

	cls_h2 = slab_add_class(&wk.slab, a > b ? a : b);
	h2_out_size = wk.buf_size > H2_OUT_MIN ? wk.buf_size : H2_OUT_MIN;
	cls_out = slab_add_class(&wk.slab, sizeof(struct buf) + h2_out_size);
	ev_idle_init(&nudge, h2_nudge_cb);
	h2_stream_init_classes();
	if (h2_cbs)
		return;
	nghttp2_session_callbacks_new(&h2_cbs);
	nghttp2_session_callbacks_set_on_begin_frame_callback(h2_cbs, h2_on_begin_frame);
	nghttp2_session_callbacks_set_on_begin_headers_callback(h2_cbs, h2_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(h2_cbs, h2_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(h2_cbs, h2_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(h2_cbs, h2_on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(h2_cbs, h2_on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(h2_cbs, h2_on_frame_send);
	nghttp2_session_callbacks_set_send_data_callback(h2_cbs, h2_on_send_data);
	nghttp2_option_new(&h2_opt);
	/* WINDOW_UPDATE only for what the core has taken (consume) */
	nghttp2_option_set_no_auto_window_update(h2_opt, 1);
	nghttp2_option_set_max_deflate_dynamic_table_size(h2_opt, cfg->http2.header_table_size);
	nghttp2_option_set_max_continuations(h2_opt, cfg->http2.max_continuations + 1);
	/* nghttp2 does not enforce it; h2_stream_header() does */
	nghttp2_option_set_max_send_header_block_length(h2_opt, 65536);
}

/* nghttp2's memory: a heap of the worker's own (common/heap.h), so a
 * session's and a stream's state come from free lists, not from malloc,
 * after warm-up without a system call */
static struct heap h2_heap = HEAP_INIT(0);

static void *h2_mem_malloc(size_t n, void *ud)
{
	return heap_alloc(ud, n);
}

static void h2_mem_free(void *p, void *ud)
{
	heap_free(ud, p);
}

static void *h2_mem_calloc(size_t n, size_t size, void *ud)
{
	return heap_calloc(ud, n, size);
}

static void *h2_mem_realloc(void *p, size_t n, void *ud)
{
	return heap_realloc(ud, p, n);
}

static nghttp2_mem h2_mem = {&h2_heap, h2_mem_malloc, h2_mem_free, h2_mem_calloc, h2_mem_realloc};

void *h2_nghttp2_mem(void)
{
	return &h2_mem;
}

void h2_memory(size_t *in_use, size_t *held)
{
	*in_use = h2_heap.st.in_use;
	*held = h2_heap.st.held;
}

void *h2_alloc(void)
{
	return slab_alloc(&wk.slab, cls_h2);
}

void h2_release(void *p)
{
	slab_free(&wk.slab, cls_h2, p);
}

struct conn *h2_conn_parent(const struct conn *c)
{
	return c->h2s->s->c;
}

int h2_preface_check(const char *p, size_t len)
{
	size_t n = len < PREFACE_LEN ? len : PREFACE_LEN;

	if (memcmp(p, preface, n) != 0)
		return -1;
	return len >= PREFACE_LEN ? 1 : 0;
}

/* The session's deadline: the SETTINGS ACK, a header block under way,
 * or idleness with no stream open. */
static void h2_session_deadline(struct h2_session *s)
{
	ev_tstamp at = 0;

	if (s->in_headers)
		at = worker_after(wk.cfg->timeouts.client_header);
	else if (!s->nstreams)
		at = worker_after(wk.cfg->timeouts.client_keepalive);
	if (s->settings_by && (!at || s->settings_by < at))
		at = s->settings_by;
	if (at)
		conn_set_deadline(s->c, at);
}

void h2_session_start(struct conn *c)
{
	struct h2_session *s = h2_alloc();
	nghttp2_settings_entry iv[6];
	int niv = 0;

	if (!s) {
		worker_count_error(WEIR_ERR(NOMEM));
		conn_close(c);
		return;
	}
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->max_id = -1; /* stream 1 is no gap */
	if (nghttp2_session_server_new3(&s->ng, h2_cbs, s, h2_opt, &h2_mem) != 0) {
		h2_release(s);
		worker_count_error(WEIR_ERR(NOMEM));
		conn_close(c);
		return;
	}
	c->h2 = s;
	c->state = CONN_H2;
	ev_prepare_init(&s->flush, h2_session_flush_cb);
	s->flush.data = s;
	s->win_start = ev_now(wk.loop);
	SHM_ADD(wk.cnt, h2_sessions_total, 1);
	iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
	                                     wk.cfg->http2.max_concurrent_streams};
	/* a stream's window is the one buffer its body waits in */
	iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW};
	iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, wk.cfg->http2.header_table_size};
	iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, wk.cfg->limits.header_size};
	iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
	/* RFC 8441: nghttp2 takes :protocol only once this is sent (h2_ws.c) */
	if (wk.cfg->http2.websocket)
		iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1};
	nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, (size_t)niv);
	/* the connection's window: every stream's buffer may be full */
	nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0,
	                                      (int32_t)((int64_t)H2_WINDOW * wk.cfg->http2.max_concurrent_streams > 0x7fffffff
	                                                ? 0x7fffffff
	                                                : H2_WINDOW * wk.cfg->http2.max_concurrent_streams));
	h2_session_deadline(s);
	if (conn_unread(c)) {
		/* the preface (and more) read while telling HTTP/1 from HTTP/2 */
		ssize_t n;

		s->in_ng = 1;
		n = nghttp2_session_mem_recv(s->ng, (const uint8_t *)c->in->data + c->in->start, buf_len(c->in));
		s->in_ng = 0;
		buf_put(c->in);
		c->in = NULL;
		if (n < 0) {
			worker_count_error(WEIR_ERR(H2_PROTOCOL));
			s->goaway = s->fatal = 1;
		}
	} else if (c->in) {
		buf_put(c->in);
		c->in = NULL;
	}
	/* accepted before the drain, its preface read after: conn_drain()
	 * saw no session, so the GOAWAY is sent now, or the client would go
	 * on opening streams here until timeouts.drain cut them */
	if (wk.draining)
		h2_session_drain(c);
	conn_io_set(c, EV_READ);
	h2_session_io(c, 0);
}

void h2_kick(ev_prepare *flush)
{
	if (!ev_is_active(flush))
		ev_prepare_start(wk.loop, flush);
	/* a kick from a callback after this pass's prepare watchers ran:
	 * an idle watcher keeps the next poll from blocking, so the write
	 * goes out in the next pass, not after the next event */
	if (!ev_is_active(&nudge))
		ev_idle_start(wk.loop, &nudge);
}

void h2_session_kick(struct h2_session *s)
{
	h2_kick(&s->flush);
}

/* The streams whose heads came complete in this batch go to the core. */
static void h2_session_start_streams(struct h2_session *s)
{
	/* a connection error in the batch: no upstream work for any of it */
	int dead = s->fatal || s->refused || !nghttp2_session_want_read(s->ng);

	while (s->start) {
		struct h2_stream *st = s->start;

		s->start = st->start_next;
		st->in_start_list = 0;
		if (!st->ng_closed && !st->core_done && !dead)
			h2_stream_start(st);
	}
}

/* http2.overhead_ratio: bytes far past their payload (nginx's rule:
 * frames no budget counts, padding, extension frames nghttp2 skips). */
static int h2_overhead_past(const struct h2_session *s)
{
	uint32_t r = wk.cfg->http2.overhead_ratio;

	return r && !s->refused && s->rx_bytes / r > s->rx_payload + (1u << 20);
}

/* Reads what the socket has and hands it to nghttp2, whole batch first. */
static int h2_session_read(struct h2_session *s)
{
	char in[16384];
	struct conn *c = s->c;

	for (int i = 0; i < 8 && c->readable; i++) {
		ssize_t n = conn_recv(c, in, sizeof(in));

		if (n > 0) {
			SHM_ADD(wk.cnt, bytes_in, n);
			s->rx_bytes += (uint64_t)n;
			if ((size_t)n < sizeof(in) && !(c->ssl && tls_bio_pending(c->ssl)))
				c->readable = 0;
			s->in_ng = 1;
			n = nghttp2_session_mem_recv(s->ng, (const uint8_t *)in, (size_t)n);
			s->in_ng = 0;
			if (n < 0) {
				if (n != NGHTTP2_ERR_CALLBACK_FAILURE && worker_log_gate(&log_next, &log_unlogged)) {
					log_info("%s: HTTP/2: %s (%u more not logged)", c->peer, nghttp2_strerror((int)n),
					         log_unlogged);
					log_unlogged = 0;
				}
				if (n != NGHTTP2_ERR_CALLBACK_FAILURE)
					worker_count_error(WEIR_ERR(H2_PROTOCOL));
				s->goaway = s->fatal = 1;
				return -1;
			}
			if (h2_overhead_past(s)) {
				h2_session_refuse(s, WEIR_ERR(H2_OVERHEAD), NGHTTP2_ENHANCE_YOUR_CALM);
				return 0;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			c->readable = 0;
			break;
		}
		c->eof = 1;
		return -2; /* closed, or a socket error */
	}
	if (c->readable) /* more to read: after the others had their turn */
		ev_feed_event(wk.loop, &c->io, EV_READ);
	return 0;
}

/* Writes what <out> holds; 1 when it is all out, 0 when the socket is
 * full, -1 on an error. */
static int h2_session_write_out(struct h2_session *s)
{
	int rc = 1;

	while (s->out && buf_len(s->out)) {
		struct iovec v[2 * H2_PLACES + 1];
		ssize_t n = conn_sendv(s->c, v, h2_out_iov(s->out, v), 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = errno == EAGAIN ? 0 : -1;
			break;
		}
		SHM_ADD(wk.cnt, bytes_out, n);
		s->out->start += (uint32_t)n;
	}
	if (s->out) {
		h2_out_settle(s->out);
		if (rc == 1)
			s->out->start = s->out->end = 0;
	}
	return rc;
}

void h2_gather(nghttp2_session *ng, struct buf *out, uint32_t cap, const uint8_t **pend, size_t *pend_len,
               uint8_t *in_ng)
{
	while (out->end < cap) {
		size_t k;

		if (!*pend_len) {
			ssize_t n;

			*in_ng = 1;
			n = nghttp2_session_mem_send(ng, pend);
			*in_ng = 0;
			if (n <= 0)
				break;
			*pend_len = (size_t)n;
		}
		k = cap - out->end;
		if (k > *pend_len)
			k = *pend_len;
		memcpy(out->data + out->end, *pend, k);
		out->end += (uint32_t)k;
		*pend += k;
		*pend_len -= k;
	}
}

static void h2_session_gather(struct h2_session *s)
{
	if (!s->out) {
		if (!(s->out = buf_get_class(cls_out, h2_out_size)))
			return;
	}
	h2_gather(s->ng, s->out, h2_out_size, &s->pend, &s->pend_len, &s->in_ng);
}

/* Once per loop pass: the frames of every stream in one write (or a few,
 * when there are more than a buffer's worth and the socket takes them). */
static void h2_session_flush(struct h2_session *s)
{
	struct conn *c = s->c;
	int rc = 1;

	for (int i = 0; i < 4 && rc == 1; i++) {
		h2_session_gather(s);
		if (!s->out || !buf_len(s->out))
			break;
		rc = h2_session_write_out(s);
	}
	if (rc < 0) {
		conn_close(c);
		return;
	}
	h2_stream_pump_framed(s);
	h2_session_start_streams(s);
	if ((s->fatal || c->eof || (!nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng))) &&
	    (!s->out || !buf_len(s->out)) && !s->pend_len) {
		/* GOAWAY out and no stream left: a lingering close, as after an
		 * HTTP/1 answer, so that frames the client still sends do not
		 * make the kernel reset what it has not read yet */
		h2_session_free(c);
		conn_linger(c);
		return;
	}
	if (s->out && buf_len(s->out) == 0 && !s->pend_len) {
		buf_put(s->out); /* an idle session holds no buffer */
		s->out = NULL;
	}
	conn_io_set(c, (c->eof ? 0 : EV_READ) | ((s->out && buf_len(s->out)) || s->pend_len ? EV_WRITE : 0));
	if (rc == 1 && nghttp2_session_want_write(s->ng) && (!s->out || !buf_len(s->out)))
		h2_session_kick(s); /* more than was gathered: next pass */
	h2_session_deadline(s);
}

static void h2_session_flush_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct h2_session *s = w->data;
	(void)revents;

	ev_prepare_stop(loop, w);
	h2_session_flush(s);
}

void h2_session_io(struct conn *c, int revents)
{
	struct h2_session *s = c->h2;
	int rc = 0;
	(void)revents;

	if (c->readable && !c->eof && !s->fatal)
		rc = h2_session_read(s);
	if (rc == -2) {
		conn_close(c);
		return;
	}
	/* a GOAWAY for an error goes out in the flush, then the close */
	h2_session_start_streams(s);
	h2_session_kick(s);
}

void h2_session_timeout(struct conn *c)
{
	struct h2_session *s = c->h2;
	ev_tstamp now = ev_now(wk.loop);

	if (s->settings_by && now >= s->settings_by) {
		s->settings_by = 0;
		h2_session_refuse(s, WEIR_ERR(H2_SETTINGS_TIMEOUT), NGHTTP2_SETTINGS_TIMEOUT);
	} else if (s->in_headers) {
		h2_session_refuse(s, WEIR_ERR(HEADER_TIMEOUT), NGHTTP2_PROTOCOL_ERROR);
	} else if (!s->nstreams) {
		/* idle: a GOAWAY says so, then the close */
		if (s->goaway) {
			conn_close(c);
			return;
		}
		nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
		                      NGHTTP2_NO_ERROR, NULL, 0);
		s->goaway = 1;
		conn_set_deadline(c, ev_now(wk.loop) + 1.0);
	} else {
		return;
	}
	h2_session_flush(s);
}

void h2_session_drain(struct conn *c)
{
	struct h2_session *s = c->h2;

	if (s->goaway)
		return;
	/* graceful: the streams open finish, new ones go to another worker */
	nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
	                      NGHTTP2_NO_ERROR, NULL, 0);
	s->goaway = 1;
	h2_session_kick(s);
}

/* weir_h2_streams_per_connection: one connection's streams, at its end. */
static void h2_count_streams_per_conn(uint32_t n)
{
	static const uint32_t bound[H2_SPC_BUCKETS - 1] = H2_SPC_BOUNDS;
	unsigned b = 0;

	while (b < H2_SPC_BUCKETS - 1 && n > bound[b])
		b++;
	SHM_ADD(wk.cnt, h2_spc[b], 1);
	SHM_ADD(wk.cnt, h2_spc_sum, n);
}

void h2_session_free(struct conn *c)
{
	struct h2_session *s = c->h2;

	s->dead = 1;
	h2_count_streams_per_conn(s->streams_seen);
	while (s->streams) {
		struct h2_stream *st = s->streams;

		st->ng_closed = 1;
		if (!st->core_done)
			h2_stream_close(&st->sc); /* frees it */
		else
			h2_stream_free(st);
	}
	ev_prepare_stop(wk.loop, &s->flush);
	nghttp2_session_del(s->ng);
	if (s->out)
		buf_put(s->out);
	c->h2 = NULL;
	h2_release(s);
}
