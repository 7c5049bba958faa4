/*
 * realip.c: the client's address and the request id (worker/realip.h).
 */

#include "worker/core/core.h"
#include <arpa/inet.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>


static uint64_t realip_state;

void realip_init(void)
{
	uint64_t seed = 0;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
		/* early boot without entropy: ids need only be unlikely to repeat */
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^ (uint64_t)getpid() << 40;
	}
	realip_state = seed;
}

/* splitmix64: one add and three multiply-xorshifts per 64 bits */
uint64_t realip_random(void)
{
	uint64_t z = (realip_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Parses an X-Forwarded-For entry or a peer's text into <addr>; the
 * family (4 or 6) or 0 when it is no address. "[v6]" is taken. */
static int realip_parse(const char *s, size_t len, uint8_t *addr)
{
	char tmp[INET6_ADDRSTRLEN];

	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		s++;
		len -= 2;
	}
	if (len == 0 || len >= sizeof(tmp))
		return 0;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	if (inet_pton(AF_INET, tmp, addr) == 1)
		return 4;
	if (inet_pton(AF_INET6, tmp, addr) == 1) {
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		if (memcmp(addr, mapped, 12) == 0) {
			/* ::ffff:10.1.2.3 is 10.1.2.3 to trusted_proxies */
			memmove(addr, addr + 12, 4);
			return 4;
		}
		return 6;
	}
	return 0;
}

static int realip_trusted(const uint8_t *addr, int family)
{
	const struct config *cfg = wk.cfg;

	return family && policy_cidr_match(cfg->trusted, cfg->ntrusted, family == 6, addr);
}

/* A reverse walk over the X-Forwarded-For entries of a request, across
 * its headers: the rightmost entry first. */
struct xff_walk {
	const struct msg *r;
	int hi;     /* header being read, -1 before the first */
	size_t end; /* bytes of its value still to read */
};

static int xff_prev(struct xff_walk *w, const char **s, size_t *len)
{
	for (;;) {
		const struct hdr *h;
		size_t e, b;

		while (w->hi >= 0 && w->end == 0) {
			/* the next header of the name, to the left */
			do
				w->hi--;
			while (w->hi >= 0 && !(w->r->hl.v[w->hi].flags & HDR_XFF));
			if (w->hi >= 0)
				w->end = w->r->hl.v[w->hi].value_len;
		}
		if (w->hi < 0)
			return 0;
		h = &w->r->hl.v[w->hi];
		e = w->end;
		b = e;
		while (b > 0 && h->value[b - 1] != ',')
			b--;
		w->end = b > 0 ? b - 1 : 0;
		if (b == 0 && e == 0)
			continue;
		while (b < e && (h->value[b] == ' ' || h->value[b] == '\t'))
			b++;
		while (e > b && (h->value[e - 1] == ' ' || h->value[e - 1] == '\t'))
			e--;
		if (e == b)
			continue; /* "a, , b": an empty list element (RFC 9110 5.6.1) */
		*s = h->value + b;
		*len = e - b;
		return 1;
	}
}

static void xff_start(struct xff_walk *w, const struct msg *r)
{
	w->r = r;
	w->hi = (int)r->hl.n;
	w->end = 0;
}

static void realip_resolve(struct txn *t)
{
	const struct conn *c = t->c;
	struct realip *ri = &t->ident;
	uint8_t addr[16];
	int fam = realip_parse(c->peer, c->peer_len, addr);
	const char *best = c->peer, *s;
	size_t best_len = c->peer_len, len;
	struct xff_walk w;

	ri->believed = 0;
	if (realip_trusted(addr, fam)) {
		xff_start(&w, &t->req);
		while (ri->believed < wk.cfg->real_ip_depth && xff_prev(&w, &s, &len)) {
			fam = realip_parse(s, len, addr);
			if (!fam) {
				worker_count_error(WEIR_ERR(BAD_FORWARDED_FOR));
				break;
			}
			ri->believed++;
			best = s;
			best_len = len;
			if (!realip_trusted(addr, fam))
				break;
		}
	}
	if (best_len && best[0] == '[') {
		best++;
		best_len -= 2;
	}
	memcpy(ri->client, best, best_len);
	ri->client[best_len] = '\0';
	ri->client_len = (uint8_t)best_len;
}

static int realip_id_char(int ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("._:+/=-", ch));
}

static void realip_request_id(struct txn *t, int trusted)
{
	static const char hex[] = "0123456789abcdef";
	struct realip *ri = &t->ident;

	if (trusted) {
		for (uint32_t i = 0; i < t->req.hl.n; i++) {
			const struct hdr *h = &t->req.hl.v[i];
			uint32_t k = 0;

			if (!realip_is_request_id(h) || h->value_len == 0 || h->value_len > REALIP_ID_MAX)
				continue;
			while (k < h->value_len && realip_id_char((unsigned char)h->value[k]))
				k++;
			if (k != h->value_len)
				continue;
			memcpy(ri->id, h->value, k);
			ri->id[k] = '\0';
			ri->id_len = (uint8_t)k;
			return;
		}
	}
	for (int half = 0; half < 2; half++) {
		uint64_t v = realip_random();

		for (int k = 0; k < 16; k++)
			ri->id[half * 16 + k] = hex[(v >> (60 - 4 * k)) & 15];
	}
	ri->id[32] = '\0';
	ri->id_len = 32;
}

void realip_begin(struct txn *t)
{
	uint8_t addr[16];
	int trusted;

	if (!wk.cfg->ntrusted) {
		memcpy(t->ident.client, t->c->peer, t->c->peer_len);
		t->ident.client[t->c->peer_len] = '\0';
		t->ident.client_len = t->c->peer_len;
		trusted = 0;
	} else {
		realip_resolve(t);
		trusted = realip_trusted(addr, realip_parse(t->c->peer, t->c->peer_len, addr));
	}
	if (wk.cfg->request_id)
		realip_request_id(t, trusted);
}

const char *realip_client(const struct conn *c, const struct txn *t, size_t *len)
{
	if (t && t->ident.client_len) {
		*len = t->ident.client_len;
		return t->ident.client;
	}
	*len = c->peer_len;
	return c->peer;
}

const char *realip_xff(const struct txn *t, char *dst, size_t cap, size_t *len)
{
	const char *ent[POLICY_DEPTH_MAX], *s;
	size_t lens[POLICY_DEPTH_MAX], o = 0, l;
	struct xff_walk w;
	int n = 0;

	if (!wk.cfg->ntrusted)
		return NULL;
	xff_start(&w, &t->req);
	while (n < t->ident.believed && xff_prev(&w, &s, &l)) {
		ent[n] = s;
		lens[n++] = l;
	}
	/* left to right: the client, the hops believed, then our peer */
	while (n-- > 0) {
		if (o + lens[n] + 2 > cap)
			break;
		memcpy(dst + o, ent[n], lens[n]);
		o += lens[n];
		dst[o++] = ',';
		dst[o++] = ' ';
	}
	if (o + t->c->peer_len <= cap) {
		memcpy(dst + o, t->c->peer, t->c->peer_len);
		o += t->c->peer_len;
	}
	*len = o;
	return dst;
}
