/*
 * ratelimit.c: keys, decisions and answers of a route's rate limits
 * (worker/ratelimit.h; the shared state and GCRA are shm/limit.c).
 *
 * A key is the bytes of its parts, each a tag, a length and the value,
 * hashed once with the limit's seed (SipHash-1-3, shm/limit.h); a
 * value longer than RL_VALUE_MAX bytes counts by its first RL_VALUE_MAX
 * and its length (two such keys may share a state: they are limited more,
 * never less). Everything lives on the stack: no allocation but the
 * answer's head, from the worker's slab.
 */

#include "worker/core/core.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "shm/limit.h"
#include "worker/core/grpc.h"

#define RL_VALUE_MAX 256
#define RL_KEY_MAX   (CONFIG_LIMIT_PARTS * (3 + RL_VALUE_MAX))

/* A dotted quad as inet_ntop writes it (the peer's text), in network
 * order; 0 if <p> is not one. Cheaper than inet_pton on every request. */
static int rl_ipv4(const char *p, uint8_t out[4])
{
	for (int i = 0; i < 4; i++) {
		unsigned v = 0, n = 0;

		while (*p >= '0' && *p <= '9' && n < 3)
			v = v * 10 + (unsigned)(*p++ - '0'), n++;
		if (!n || v > 255 || *p != (i < 3 ? '.' : 0))
			return 0;
		out[i] = (uint8_t)v;
		p++;
	}
	return 1;
}

int ratelimit_client_addr(const struct txn *t, uint8_t out[16])
{
	size_t cl;
	/* the client after trusted_proxies (realip.h), NUL-ended */
	const char *client = realip_client(t->c, t, &cl);
	uint8_t a4[4];

	if (rl_ipv4(client, a4)) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, a4, 4);
		return 4;
	}
	if (inet_pton(AF_INET6, client, out) == 1) {
		/* a v4-mapped peer is the IPv4 client it maps */
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		return memcmp(out, mapped, 12) ? 6 : 4;
	}
	return 0;
}

/* The first header <name> of the request, or NULL. */
static const struct hdr *rl_header(const struct txn *t, const char *name, size_t len)
{
	for (uint32_t i = 0; i < t->req.hl.n; i++) {
		const struct hdr *h = &t->req.hl.v[i];

		if (h->name_len == len && !strncasecmp(h->name, name, len))
			return h;
	}
	return NULL;
}

/* The value of "name=value" pairs split by <sep> in [p, end): NULL if
 * none is named <name>. */
static const char *rl_pair(const char *p, const char *end, char sep, const char *name, size_t len, size_t *vlen)
{
	while (p < end) {
		const char *next = memchr(p, sep, (size_t)(end - p));
		const char *stop = next ? next : end;

		while (p < stop && (*p == ' ' || *p == '\t'))
			p++;
		if ((size_t)(stop - p) > len && p[len] == '=' && !memcmp(p, name, len)) {
			const char *v = p + len + 1, *ve = stop;

			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			*vlen = (size_t)(ve - v);
			return v;
		}
		p = stop + 1;
	}
	return NULL;
}

const char *ratelimit_part_value(const struct txn *t, int kind, const char *name, size_t nl, size_t *vl)
{
	const char *v = NULL;

	*vl = 0;
	switch (kind) {
	case CONFIG_RL_HEADER: {
		const struct hdr *h = rl_header(t, name, nl);

		if (h)
			v = h->value, *vl = h->value_len;
		break;
	}
	case CONFIG_RL_COOKIE:
		for (uint32_t j = 0; j < t->req.hl.n && !v; j++) {
			const struct hdr *h = &t->req.hl.v[j];

			if (h->name_len == 6 && !strncasecmp(h->name, "cookie", 6))
				v = rl_pair(h->value, h->value + h->value_len, ';', name, nl, vl);
		}
		break;
	case CONFIG_RL_QUERY: {
		const char *q = t->req.path_end, *end = t->req.target + t->req.target_len;

		if (q < end && *q == '?')
			v = rl_pair(q + 1, end, '&', name, nl, vl);
		break;
	}
	}
	return v;
}

/* Appends part <tag> of <len> bytes <v> to the key at <k> (room checked
 * by RL_KEY_MAX; a length past 65535 is kept as 65535: no request value is
 * that long); returns the new length. */
static size_t rl_put(uint8_t *k, size_t n, uint8_t tag, const void *v, size_t len)
{
	size_t take = len > RL_VALUE_MAX ? RL_VALUE_MAX : len;
	size_t l16 = len > 65535 ? 65535 : len;

	k[n++] = tag;
	k[n++] = (uint8_t)(l16 >> 8);
	k[n++] = (uint8_t)l16;
	memcpy(k + n, v, take);
	return n + take;
}

/* Makes the key of limit <l> for <t> into <k>. Returns its length, or 0
 * when a part is missing and the limit skips such requests. */
static size_t rl_key(const struct txn *t, const struct config_rate_limit *l, uint8_t *k)
{
	size_t n = 0;

	for (int i = 0; i < l->nparts; i++) {
		const char *name = l->parts[i].name, *v = NULL;
		size_t nl = l->parts[i].len, vl = 0;
		uint8_t tag = (uint8_t)(l->parts[i].kind << 1);

		switch (l->parts[i].kind) {
		case CONFIG_RL_CLIENT_IP: {
			uint8_t a[16];
			int fam = ratelimit_client_addr(t, a);
			int bits = fam == 4 ? 96 + l->ipv4_mask : l->ipv6_mask;

			if (!fam) {
				v = NULL;
				break;
			}
			/* the mask as two big-endian halves */
			uint64_t hi, lo, mh = bits >= 64 ? ~0ull : ~(~0ull >> bits),
			                 ml = bits >= 128  ? ~0ull
			                      : bits <= 64 ? 0
			                                   : ~(~0ull >> (bits - 64));
			memcpy(&hi, a, 8);
			memcpy(&lo, a + 8, 8);
			hi &= __builtin_bswap64(mh);
			lo &= __builtin_bswap64(ml);
			memcpy(a, &hi, 8);
			memcpy(a + 8, &lo, 8);
			/* an IPv4 client is its 4 bytes: a shorter hash */
			n = fam == 4 ? rl_put(k, n, tag, a + 12, 4) : rl_put(k, n, tag, a, 16);
			continue;
		}
		case CONFIG_RL_ROUTE: n = rl_put(k, n, tag, &t->route->stat, sizeof(t->route->stat)); continue;
		default: v = ratelimit_part_value(t, l->parts[i].kind, name, nl, &vl); break;
		}
		if (!v) {
			if (l->missing == CONFIG_RL_SKIP)
				return 0;
			tag |= 1; /* "missing": every such request shares this part */
			vl = 0;
			v = "";
		}
		n = rl_put(k, n, tag, v, vl);
	}
	return n;
}

/* One line a second at most of each kind (refused, dry run), with the
 * count of lines held back. */
static void rl_log(const struct txn *t, const struct config_rate_limit *l, const char *what, int status)
{
	static ev_tstamp last[2];
	static unsigned held_n[2];
	ev_tstamp now = ev_now(wk.loop);
	int k = status == 0;
	unsigned held = held_n[k];

	if (now - last[k] < 1.0) {
		held_n[k]++;
		return;
	}
	last[k] = now;
	held_n[k] = 0;
	if (held)
		log_notice("%s: rate limit \"%s\" (%s) %s%s%.0d (and %u more in the last second, not logged)",
		           t->c->peer, l->name, l->key, what, status ? ", answered " : "", status, held);
	else
		log_notice("%s: rate limit \"%s\" (%s) %s%s%.0d", t->c->peer, l->name, l->key, what,
		           status ? ", answered " : "", status);
}

static const char *rl_reason(int status)
{
	switch (status) {
	case 429: return "Too Many Requests";
	case 503: return "Service Unavailable";
	case 403: return "Forbidden";
	case 420: return "Enhance Your Calm";
	default: return "Refused";
	}
}

/* Answers the refusal of <t> through its client's codec: Retry-After
 * is the longest wait of the limits that refused (whole seconds, rounded
 * up: a client that waits that long is admitted, others permitting),
 * RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers)
 * name each of them. */
static void rl_answer(struct txn *t, const struct limit_ask *a, struct config_rate_limit *const *lim, int n)
{
	const struct config_rate_limit *first = NULL;
	uint64_t wait = 0;
	int close = !t->req.keep_alive || !t->req_body_done || wk.draining, len = 0, rated = 0, over = 0;
	/* the values, until the codec's answer op returns */
	static char p[1536], body[64];
	const int cap = (int)sizeof p;
	struct answer_field f[16];
	struct answer ans = {.f = f, .cap = 16};
	struct buf *b = NULL;

	for (int i = 0; i < n; i++)
		if (a[i].refused && !a[i].advisory) {
			if (!first)
				first = lim[i];
			if (a[i].interval) {
				rated = 1;
				if (a[i].wait > wait)
					wait = a[i].wait;
			}
		}
	const char *reason = rl_reason(first->status);
	int blen = (int)strlen(reason) + 5;

#define PUT(...) len += snprintf(p + len, len < cap ? (size_t)(cap - len) : 0, __VA_ARGS__)
	/* a field whose value is what PUT() wrote from <from> on */
#define FIELD(name, from) over |= len >= cap || answer_add(&ans, name, p + (from), (size_t)(len - (from)))
	int grpc = grpc_request(t), from;

	if (grpc) { /* RESOURCE_EXHAUSTED, trailers-only, with the limit's headers */
		over |= grpc_answer(&ans, GRPC_RESOURCE_EXHAUSTED, "rate limited");
	} else {
		ans.status = first->status;
		ans.reason = reason;
		over |= answer_add(&ans, "Content-Type", "text/plain", 10) | answer_length(&ans, (uint64_t)blen);
		if (t->req.method_id != HTTP_HEAD) {
			ans.body = body;
			ans.body_len = (uint32_t)snprintf(body, sizeof body, "%d %s\n", first->status, reason);
		}
	}
	if (rated) {
		from = len;
		PUT("%llu", (unsigned long long)((wait + 999999999u) / 1000000000u));
		FIELD("Retry-After", from);
	}
	for (int pass = 0; pass < 2; pass++) {
		int k = 0;

		from = len;
		for (int i = 0; i < n; i++) {
			if (!a[i].refused || a[i].advisory)
				continue;
			if (!pass && a[i].interval)
				PUT("%s\"%s\";q=%u;w=%u", k ? ", " : "", lim[i]->name, lim[i]->quota, lim[i]->window);
			else if (!pass)
				PUT("%s\"%s\";q=%d", k ? ", " : "", lim[i]->name, lim[i]->concurrent);
			else if (a[i].interval)
				PUT("%s\"%s\";r=0;t=%llu", k ? ", " : "", lim[i]->name,
				    (unsigned long long)((a[i].wait + 999999999u) / 1000000000u));
			else
				PUT("%s\"%s\";r=0", k ? ", " : "", lim[i]->name);
			k++;
		}
		FIELD(pass ? "RateLimit" : "RateLimit-Policy", from);
	}
	for (int i = 0; i < n; i++)
		if (a[i].refused && !a[i].advisory && lim[i]->legacy_headers) {
			from = len;
			PUT("%u", a[i].interval ? lim[i]->quota : (uint32_t)lim[i]->concurrent);
			FIELD("X-RateLimit-Limit", from);
			over |= answer_add(&ans, "X-RateLimit-Remaining", "0", 1);
			if (a[i].interval) {
				from = len;
				PUT("%llu", (unsigned long long)((a[i].wait + 999999999u) / 1000000000u));
				FIELD("X-RateLimit-Reset", from);
			}
			break;
		}
	if (close)
		over |= answer_add(&ans, "Connection", "close", 5);
#undef FIELD
#undef PUT
	if (over || t->c->codec->answer(t->c, &ans, &b) < 0) {
		txn_fail(t, WEIR_ERR(NOMEM));
		return;
	}
	t->down.head = b; /* HTTP/1's text; HTTP/2 framed it itself */
	if (!b)
		t->bytes_out += ans.body_len;
	if (close)
		t->client_close = 1;
	worker_count_error(WEIR_ERR(RATE_LIMITED));
	txn_answer_local(t, first->status); /* gRPC too: the log keeps the HTTP status */
}

static void rl_delay_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct txn *t = w->data;

	(void)loop;
	(void)revents;
	t->rl.waiting = 0;
	txn_continue(t);
}

int ratelimit_check(struct txn *t)
{
	const struct route_entry *e = t->route;
	struct limit_segment *s = limit_seg;
	struct limit_ask a[CONFIG_ROUTE_LIMITS];
	struct config_rate_limit *lim[CONFIG_ROUTE_LIMITS];
	uint64_t hash[CONFIG_ROUTE_LIMITS];
	uint8_t key[RL_KEY_MAX];
	uint64_t now = limit_now(), delay = 0;
	int n = 0, rc = -2, closed = 0;

	if (!s)
		return RATELIMIT_CONTINUE;
	for (int i = 0; i < e->nlimits; i++) {
		struct config_rate_limit *l = (struct config_rate_limit *)&route_limits(t->table)[e->limits[i]];
		size_t len = rl_key(t, l, key);
		uint64_t interval;

		if (!len)
			continue;
		hash[n] = l->scope == CONFIG_RL_CLUSTER ? limit_hash_cluster(l->seed, key, len)
		                                        : limit_hash(s, l->seed, l->concurrent > 0, key, len);
		lim[n] = l;
		interval = l->interval_ns;
		if (l->adaptive.on) /* the master's factor for it (shm/limit.h) */
			interval = limit_adaptive_interval(
			    interval, atomic_load_explicit(&s->adapt[l->id].factor, memory_order_relaxed),
			    l->adaptive.floor_ns);
		a[n] = (struct limit_ask){
		    .interval = l->concurrent ? 0 : interval,
		    .tolerance = l->concurrent ? (uint64_t)l->concurrent : (uint64_t)l->burst * interval,
		    .delay = l->mode == CONFIG_RL_DELAY,
		    .advisory = l->mode == CONFIG_RL_DRY_RUN,
		};
		closed |= l->fail_closed;
		n++;
	}
	if (!n)
		return RATELIMIT_CONTINUE;
	for (int i = 0; closed && i < n; i++)
		if (lim[i]->fail_closed && atomic_load_explicit(&s->redis_down, memory_order_relaxed)) {
			/* a cluster limit that must not guess: refused, nothing taken */
			for (int j = 0; j < n; j++) {
				a[j].e = NULL;
				a[j].refused = j == i;
				a[j].wait =
				    (uint64_t)wk.cfg->redis_interval * 1000000u; /* a hint: the next reconnect */
				a[j].advisory = a[j].advisory && j != i;
			}
			limit_count(s, wk.slot, lim[i]->id, LIMIT_REJECTED);
			rl_log(t, lim[i], "refused (redis unreachable, fail_closed)", lim[i]->status);
			rl_answer(t, a, lim, n);
			return RATELIMIT_ANSWERED;
		}
	/* -2: an entry changed hands between finding and taking (evicted by
	 * another worker's insert): find them all again */
	for (int tries = 0; rc == -2 && tries < 8; tries++) {
		for (int i = 0; i < n; i++)
			a[i].e = limit_find(s, hash[i], lim[i]->seed, lim[i]->id, now, &a[i].key);
		rc = limit_take(a, n, now);
	}
	for (int i = 0; i < n; i++) {
		int res;

		if (a[i].key != hash[i])
			limit_count(s, wk.slot, lim[i]->id, LIMIT_TABLE_FULL);
		if (a[i].refused && a[i].advisory) {
			res = LIMIT_DRY_RUN;
			rl_log(t, lim[i], "would refuse (dry run)", 0);
		} else if (rc != 1) {
			if (!a[i].refused && rc != -1 && rc != -2)
				continue; /* not this one's doing; nothing taken */
			res = LIMIT_REJECTED;
			rl_log(t, lim[i], "refused", lim[i]->status);
		} else if (a[i].delay && a[i].wait) {
			res = LIMIT_DELAYED;
			if (a[i].wait > delay)
				delay = a[i].wait;
		} else {
			res = LIMIT_ALLOWED;
		}
		limit_count(s, wk.slot, lim[i]->id, res);
	}
	if (rc != 1) {
		if (rc < 0)
			for (int i = 0; i < n; i++)
				a[i].refused = !a[i].advisory; /* contended past bound: refused by all */
		rl_answer(t, a, lim, n);
		return RATELIMIT_ANSWERED;
	}
	for (int i = 0; i < n; i++) {
		if (!a[i].interval && !a[i].refused)
			t->rl.held[t->rl.nheld++] = a[i].e;
		if (lim[i]->scope == CONFIG_RL_CLUSTER && !a[i].refused && a[i].key == hash[i])
			limit_mark(s, a[i].e, lim[i]->id);
	}
	if (!delay)
		return RATELIMIT_CONTINUE;
	/* queued: the request goes on when its turn comes; meanwhile only
	 * the client's close is watched for (txn_wait_arm) */
	ev_timer_init(&t->rl.delay, rl_delay_cb, (double)delay / 1e9, 0);
	t->rl.delay.data = t;
	ev_timer_start(wk.loop, &t->rl.delay);
	t->rl.waiting = 1;
	txn_wait_arm(t);
	return RATELIMIT_WAIT;
}

void ratelimit_release(struct txn *t)
{
	if (t->rl.waiting) {
		ev_timer_stop(wk.loop, &t->rl.delay);
		t->rl.waiting = 0;
	}
	for (int i = 0; i < t->rl.nheld; i++)
		limit_release(t->rl.held[i]);
	t->rl.nheld = 0;
}
