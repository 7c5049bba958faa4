/*
 * loop.c: the bottom layer of a worker (worker/base/base.h): the one
 * struct worker, deadlines on the loop, I/O buffers from the slab, the
 * routing tables held by requests in flight, and the watcher helper
 * every layer above uses.
 */
#include "worker/base/base.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>

struct worker wk;

/* Arms <tm> to fire at <at>. */
static void deadline_arm(ev_timer *tm, ev_tstamp at)
{
	ev_timer_set(tm, at - ev_now(wk.loop), 0);
	ev_timer_start(wk.loop, tm);
}

void worker_deadline_set(ev_timer *tm, ev_tstamp *dl, uint8_t *graced, ev_tstamp at)
{
	/* a deadline moved later is only a store, so the timer may be armed
	 * before the deadline it serves: re-arm only when the new deadline
	 * comes before the timer fires (a request's "no deadline" followed by
	 * the keep-alive one then costs nothing) */
	if (!ev_is_active(tm) || at < ev_now(wk.loop) + ev_timer_remaining(wk.loop, tm)) {
		ev_timer_stop(wk.loop, tm);
		deadline_arm(tm, at);
	}
	if (at != *dl)
		*graced = 0;
	*dl = at;
}

int worker_deadline_early(ev_timer *tm, ev_tstamp dl)
{
	if (dl <= ev_now(wk.loop) + 0.001)
		return 0;
	deadline_arm(tm, dl);
	return 1;
}

int worker_deadline_grace(ev_timer *tm, const ev_io *io, uint8_t *graced)
{
	struct pollfd p = {.fd = io->fd};
	int ready = 0;

	if (!ev_is_active(io) || *graced)
		return 0;
	p.events = (short)((io->events & EV_READ ? POLLIN : 0) | (io->events & EV_WRITE ? POLLOUT : 0));
	/* one poll(2), only when a deadline passed: never on the hot path */
	if (poll(&p, 1, 0) <= 0)
		return 0;
	/* an error or hang-up is I/O too: the callback finds and names it */
	if (p.revents & (POLLIN | POLLHUP | POLLERR))
		ready |= io->events & EV_READ;
	if (p.revents & (POLLOUT | POLLHUP | POLLERR))
		ready |= io->events & EV_WRITE;
	if (!ready)
		return 0;
	*graced = 1;
	deadline_arm(tm, ev_now(wk.loop));
	return ready;
}

/* Gathers of at most this many bytes are copied into one and sent with
 * send(2): a response head and a short body, say. sendmsg(2) copies in
 * the msghdr and the iovec array and walks it; a loopback loop of 250 +
 * 18 bytes measured about 300 ns a write more for it (six runs of 400,000
 * writes, alternating) than for copying the bytes and sending them, about
 * 1% of a proxied small request. Above this size the copy would cost more
 * than it saves. */
#define WORKER_SEND_GATHER 1024

ssize_t worker_sendv(int fd, const struct iovec *iov, int cnt, int flags)
{
	struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
	char small[WORKER_SEND_GATHER];
	size_t n = 0;

	if (cnt == 1)
		return send(fd, iov[0].iov_base, iov[0].iov_len, flags);
	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	if (n > sizeof(small))
		return sendmsg(fd, &mh, flags);
	n = 0;
	for (int i = 0; i < cnt; i++) {
		memcpy(small + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	return send(fd, small, n, flags);
}

struct buf *buf_get_class(int cls, uint32_t cap)
{
	struct buf *b = slab_alloc(&wk.slab, cls);
	if (b) {
		b->start = b->end = 0;
		b->cls = (uint32_t)cls;
		b->cap = cap;
	}
	return b;
}

struct buf *buf_get(void)
{
	return buf_get_class(wk.cls_buf, wk.buf_size);
}

struct buf *buf_take_stream(uint64_t left, int kind)
{
	struct buf *b;

	/* held only while a long body streams, as the I/O buffer would be
	 * (the core gives an empty one back between reads); none past
	 * limits.stream_buffers (slow clients each holding one, say) or when
	 * the slab is out. The counters are plain stores to this worker's
	 * own slot: no atomic read-modify-write */
	if (left <= wk.buf_size || wk.cls_stream < 0)
		return NULL;
	if (wk.slab.classes[wk.cls_stream].in_use < wk.stream_max &&
	    (b = buf_get_class(wk.cls_stream, wk.stream_cap))) {
		SHM_ADD(wk.cnt, stream_buffers[kind][0], 1);
		return b;
	}
	SHM_ADD(wk.cnt, stream_buffers[kind][1], 1);
	return NULL;
}

struct buf *buf_get_stream(uint64_t left, int kind)
{
	struct buf *b = buf_take_stream(left, kind);

	return b ? b : buf_get();
}

struct buf *buf_get_fit(uint32_t len)
{
	for (int i = 0; i < WORKER_SMALL_CLASSES; i++)
		if (len <= (WORKER_SMALL_MIN << i) - sizeof(struct buf))
			return buf_get_class(wk.cls_small[i], (WORKER_SMALL_MIN << i) - (uint32_t)sizeof(struct buf));
	return len <= wk.buf_size ? buf_get() : NULL;
}

void buf_put(struct buf *b)
{
	slab_free(&wk.slab, (int)b->cls, b);
}

static void worker_table_publish_min(void)
{
	uint64_t min = 0;

	for (int i = 0; i < SHM_GENS; i++)
		if (wk.held[i].refs && (min == 0 || wk.held[i].id < min))
			min = wk.held[i].id;
	if (atomic_load_explicit(&wk.seg->slots[wk.slot].gen_min, memory_order_relaxed) != min)
		atomic_store_explicit(&wk.seg->slots[wk.slot].gen_min, min, memory_order_seq_cst);
}

void worker_table_hold(const struct route_table *t)
{
	int free_i = -1;

	for (int i = 0; i < SHM_GENS; i++) {
		if (wk.held[i].refs && wk.held[i].id == t->id) {
			wk.held[i].refs++; /* the common case: no store to the segment */
			return;
		}
		if (!wk.held[i].refs && free_i < 0)
			free_i = i;
	}
	/* a table we do not hold yet: at most SHM_GENS can exist at once */
	wk.held[free_i].id = t->id;
	wk.held[free_i].refs = 1;
	worker_table_publish_min();
}

void worker_table_release(const struct route_table *t)
{
	for (int i = 0; i < SHM_GENS; i++)
		if (wk.held[i].refs && wk.held[i].id == t->id) {
			if (--wk.held[i].refs == 0)
				worker_table_publish_min();
			return;
		}
}

void buf_compact(struct buf *b)
{
	if (b->start == 0)
		return;
	memmove(b->data, b->data + b->start, b->end - b->start);
	b->end -= b->start;
	b->start = 0;
}

void worker_io_set(ev_io *w, int events)
{
	if (ev_is_active(w) && (w->events & (EV_READ | EV_WRITE)) == events)
		return;
	if (!ev_is_active(w) && events == 0)
		return;
	ev_io_stop(wk.loop, w);
	if (events) {
		/* Same fd, so ev_io_modify, not ev_io_set: the latter marks the
		 * fd as new, and libev then re-registers it with the kernel
		 * (an epoll_ctl that fails with EEXIST) even when a stop and a
		 * start in one loop pass leave its events as they were, as an
		 * upstream connection going back to its pool does. */
		ev_io_modify(w, events);
		ev_io_start(wk.loop, w);
	}
}

void worker_check_drained(void)
{
	if (wk.draining && wk.nconns == 0)
		ev_break(wk.loop, EVBREAK_ALL);
}
