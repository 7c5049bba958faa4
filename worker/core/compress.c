/*
 * compress.c: gzip and brotli compression of responses (core.h: ==== compress ====).
 */
#include "worker/core/core.h"

#include <brotli/encode.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "common/log.h"
#include "worker/core/compress_pool.h"
#include "worker/h1/h1.h"

/* One response being encoded. */
struct cz_stream {
	uint8_t enc;  /* enum compress_enc */
	uint8_t op;   /* CZ_PROCESS, CZ_FLUSH or CZ_FINISH for the span */
	uint8_t full; /* the output buffer filled: more may follow */
	uint8_t done; /* the end is queued */
	uint8_t fresh; /* bytes went in since the last flush */
	size_t reserve;   /* bytes of the pool counted for it */
	struct buf *out;  /* what the encoder made, queued to the client */
	/* the rest of the span being encoded, as body_next() handed it up:
	 * its source is consumed as the encoder takes it */
	uint8_t held; /* the span is handed up and not wholly consumed */
	const char *data;
	size_t len;
	union {
		z_stream z;
		BrotliEncoderState *br;
	} u;
};

enum { CZ_PROCESS, CZ_FLUSH, CZ_FINISH };

/* zlib's window and memLevel: 32 KiB of history, 256 KiB of state, less
 * for a body known to be shorter (cz_gzip_params) */
#define CZ_GZIP_WBITS 15
#define CZ_GZIP_MEMLEVEL 8
#define CZ_BROTLI_LGWIN 18

/* The most brotli's state reached with a 256 KiB window, measured for
 * each quality over text, random and constant bodies of 4 MiB fed in
 * 16 KiB spans (peak bytes held at once), and a quarter more for the
 * pool's splits: KiB. */
static const uint32_t cz_brotli_reserve_kib[12] = {
	256, 256, 1664, 1664, 2816, 3520, 4864, 12800, 23296, 45568, 10240, 16384,
};

static struct {
	struct czpool pool;
	size_t reserved;  /* the reservations of the streams under way */
	uint32_t streams; /* under way */
	uint32_t max_streams;
	/* the route blocks of the table last seen, by route index */
	const struct config_compress **by_route;
	uint32_t nby_route;
	int *own;   /* the indices of our config's routes with a block */
	int nown;
	uint64_t table_id;
	const struct config *cfg;
	ev_tstamp log_next;
	uint32_t unlogged;
} cz;

/* ---- the pool ------------------------------------------------------------ */

static void cz_gauges(void)
{
	SHM_SET(wk.cnt, compress_streams, cz.streams);
	SHM_SET(wk.cnt, compress_mem_in_use, cz.pool.in_use);
}

static voidpf cz_zalloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	if (size && items > SIZE_MAX / size)
		return NULL;
	return czpool_alloc(&cz.pool, (size_t)items * size);
}

static void cz_zfree(voidpf opaque, voidpf p)
{
	(void)opaque;
	czpool_free(&cz.pool, p);
}

static void *cz_balloc(void *opaque, size_t n)
{
	(void)opaque;
	return czpool_alloc(&cz.pool, n);
}

static void cz_bfree(void *opaque, void *p)
{
	(void)opaque;
	czpool_free(&cz.pool, p);
}

static int cz_any_on(const struct config *cfg)
{
	if (cfg->compress.on)
		return 1;
	for (int i = 0; i < cfg->nroutes; i++)
		if (cfg->routes[i].compress && cfg->routes[i].compress->on)
			return 1;
	return 0;
}

int compress_init(const struct config *cfg)
{
	void *mem;

	cz.cfg = cfg;
	cz.max_streams = cfg->compress.max_streams;
	if (!cz_any_on(cfg))
		return 0;
	/* the sync walks these, not every route of the config */
	if (!(cz.own = malloc(sizeof(*cz.own) * (size_t)(cfg->nroutes ? cfg->nroutes : 1)))) {
		log_error("compress: out of memory");
		return -1;
	}
	for (int i = 0; i < cfg->nroutes; i++)
		if (cfg->routes[i].compress)
			cz.own[cz.nown++] = i;
	/* mapped once; pages are only made as encoders touch them */
	mem = mmap(NULL, cfg->compress.memory, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
	           -1, 0);
	if (mem == MAP_FAILED) {
		log_error("compress: cannot map %llu bytes for the encoders", (unsigned long long)cfg->compress.memory);
		return -1;
	}
	czpool_init(&cz.pool, mem, cfg->compress.memory);
	return 0;
}

/* ---- the route's block ------------------------------------------------------ */

/* The blocks of the routes of <tab>, found by (host, path) among our
 * config's routes that have one (O(routes x blocks): blocks are few):
 * a route with no block of its own, or one our config does not know (a
 * draining worker's older config under a newer table), takes the top
 * level's. Once per table; the array grows with the tables, never per
 * request. */
static int cz_sync(const struct route_table *tab)
{
	const struct config *cfg = cz.cfg;

	if (tab->nroutes > cz.nby_route) {
		const struct config_compress **n = realloc(cz.by_route, tab->nroutes * sizeof(*n));

		if (!n)
			return -1;
		cz.by_route = n;
		cz.nby_route = tab->nroutes;
	}
	for (uint32_t i = 0; i < tab->nroutes; i++) {
		const struct route_entry *e = &route_entries(tab)[i];

		cz.by_route[i] = &cfg->compress;
		for (int k = 0; k < cz.nown; k++) {
			const struct config_route *r = &cfg->routes[cz.own[k]];

			if (r->host_kind == e->host_kind && strcmp(r->host, route_host(tab, e)) == 0 &&
			    strcmp(r->path, route_path(tab, e)) == 0) {
				cz.by_route[i] = r->compress;
				break;
			}
		}
	}
	cz.table_id = tab->id;
	return 0;
}

static const struct config_compress *cz_policy(const struct txn *t)
{
	const struct config_compress *p;

	if (!cz.pool.base || !t->route)
		return NULL;
	if (cz.table_id != t->table->id && cz_sync(t->table) < 0)
		return NULL;
	p = cz.by_route[t->route - route_entries(t->table)];
	return p->on ? p : NULL;
}

/* ---- the request: Accept-Encoding ---------------------------------------------- */

/* "q=0.5" and the like after a coding, in thousandths; -1 if malformed. */
static int cz_qvalue(const char *p, const char *end)
{
	int v = 0, scale = 100;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (end - p < 3 || (p[0] != 'q' && p[0] != 'Q'))
		return -1;
	p++;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p >= end || *p++ != '=')
		return -1;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p >= end || (*p != '0' && *p != '1'))
		return -1;
	v = (*p++ - '0') * 1000;
	if (p < end && *p == '.') {
		for (p++; p < end && *p >= '0' && *p <= '9' && scale; p++, scale /= 10)
			v += (*p - '0') * scale;
	}
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p == end && v <= 1000 ? v : -1;
}

void compress_accept_parse(const char *v, size_t len, int16_t q[COMPRESS_ENC_COUNT], int16_t *star)
{
	const char *p = v, *end = v + len;

	while (p < end) {
		const char *item = p, *item_end, *semi, *name_end;
		int val = 1000;

		while (p < end && *p != ',')
			p++;
		item_end = p;
		if (p < end)
			p++;
		while (item < item_end && (*item == ' ' || *item == '\t'))
			item++;
		for (semi = item; semi < item_end && *semi != ';'; semi++)
			;
		name_end = semi;
		while (name_end > item && (name_end[-1] == ' ' || name_end[-1] == '\t'))
			name_end--;
		if (name_end == item)
			continue;
		if (semi < item_end && (val = cz_qvalue(semi + 1, item_end)) < 0)
			continue; /* a parameter we do not read: the coding is not taken */
		if (http_span_ieq(item, (size_t)(name_end - item), "br"))
			q[COMPRESS_BR] = (int16_t)val;
		else if (http_span_ieq(item, (size_t)(name_end - item), "gzip") ||
		         http_span_ieq(item, (size_t)(name_end - item), "x-gzip"))
			q[COMPRESS_GZIP] = (int16_t)val;
		else if (name_end - item == 1 && *item == '*')
			*star = (int16_t)val;
	}
}

enum ph_rc compress_ph_request(struct txn *t, const void *conf)
{
	int16_t q[COMPRESS_ENC_COUNT], star = -1;

	(void)conf;
	t->cz.pol = cz_policy(t);
	if (!t->cz.pol)
		return PH_CONTINUE;
	for (int e = 0; e < COMPRESS_ENC_COUNT; e++)
		q[e] = -1;
	for (uint32_t i = 0; i < t->req.hl.n; i++) {
		const struct hdr *h = &t->req.hl.v[i];

		if (http_span_ieq(h->name, h->name_len, "accept-encoding"))
			compress_accept_parse(h->value, h->value_len, q, &star);
	}
	for (int e = 0; e < COMPRESS_ENC_COUNT; e++)
		t->cz.q[e] = (uint16_t)(q[e] >= 0 ? q[e] : star > 0 ? star : 0);
	return PH_CONTINUE;
}

/* ---- the response: the decision ------------------------------------------------ */

/* The response's headers as they will be written: one marked HDR_HOP
 * (hop-by-hop, or removed by a header rule) is not. */
static struct hdr *cz_find(struct txn *t, const char *lower)
{
	size_t n = strlen(lower);

	for (uint32_t i = 0; i < t->resp.hl.n; i++) {
		struct hdr *h = &t->resp.hl.v[i];

		if (!(h->flags & HDR_HOP) && h->name_len == n && http_span_ieq(h->name, n, lower))
			return h;
	}
	return NULL;
}

/* Whether the list value <v> holds the token <lower> (any case). */
static int cz_list_has(const char *v, size_t len, const char *lower)
{
	const char *p = v, *end = v + len;

	while (p < end) {
		const char *s = p, *e;

		while (p < end && *p != ',')
			p++;
		e = p;
		if (p < end)
			p++;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		/* a directive's argument ("no-transform" has none) ends it */
		for (const char *x = s; x < e; x++)
			if (*x == '=' || *x == ';') {
				e = x;
				break;
			}
		if (http_span_ieq(s, (size_t)(e - s), lower))
			return 1;
	}
	return 0;
}

/* Whether the Content-Type <h> is one of <types>: a type, a type/ and a
 * star, or a star alone. */
static int cz_type_listed(const struct hdr *h, const char *types)
{
	const char *v = h->value, *end = h->value + h->value_len, *p;
	size_t n, slash;

	for (p = v; p < end && *p != ';' && *p != ' ' && *p != '\t'; p++)
		;
	n = (size_t)(p - v);
	for (slash = 0; slash < n && v[slash] != '/'; slash++)
		;
	for (const char *t = types; *t;) {
		const char *e = strchr(t, ' ');
		size_t tl = e ? (size_t)(e - t) : strlen(t);

		if (tl == 1 && t[0] == '*')
			return 1;
		if (tl == slash + 2 && t[tl - 1] == '*' && t[tl - 2] == '/' && slash < n &&
		    strncasecmp(t, v, slash + 1) == 0)
			return 1;
		if (tl == n && strncasecmp(t, v, n) == 0)
			return 1;
		t += tl;
		while (*t == ' ')
			t++;
	}
	return 0;
}

static enum compress_skip cz_judge(struct txn *t, const struct config_compress *p)
{
	const struct msg *r = &t->resp;
	const struct hdr *h;

	if (r->body == HTTP_BODY_NONE || r->status < 200 || r->status == 204 || r->status == 304 ||
	    (r->body == HTTP_BODY_LENGTH && r->content_length == 0))
		return COMPRESS_SKIP_NO_BODY;
	if ((h = cz_find(t, "content-encoding")) && !http_span_ieq(h->value, h->value_len, "identity"))
		return COMPRESS_SKIP_ENCODED;
	if (r->status == 206 || cz_find(t, "content-range"))
		return COMPRESS_SKIP_RANGE;
	for (uint32_t i = 0; i < r->hl.n; i++) {
		h = &r->hl.v[i];
		if (!(h->flags & HDR_HOP) && http_span_ieq(h->name, h->name_len, "cache-control") &&
		    cz_list_has(h->value, h->value_len, "no-transform"))
			return COMPRESS_SKIP_NO_TRANSFORM;
	}
	if (!(h = cz_find(t, "content-type")) || !cz_type_listed(h, p->types))
		return COMPRESS_SKIP_TYPE;
	if (r->body == HTTP_BODY_LENGTH && r->content_length < p->min_length)
		return COMPRESS_SKIP_TOO_SMALL;
	return COMPRESS_SKIP_COUNT;
}

/* Vary: Accept-Encoding, unless the upstream's Vary says it (or "*"). */
static void cz_vary(struct txn *t)
{
	for (uint32_t i = 0; i < t->resp.hl.n; i++) {
		const struct hdr *h = &t->resp.hl.v[i];

		if (!(h->flags & HDR_HOP) && http_span_ieq(h->name, h->name_len, "vary") &&
		    (cz_list_has(h->value, h->value_len, "accept-encoding") || cz_list_has(h->value, h->value_len, "*")))
			return;
	}
	/* a second Vary line is the same as one list (RFC 9110 5.3) */
	if (!hlist_add(&t->arena, &t->resp.hl, "Vary", 4, "Accept-Encoding", 15))
		worker_count_error(WEIR_ERR(HEADER_SPACE));
}

/* The head of an encoded body: its encoding, no Accept-Ranges (ranges of
 * the encoded bytes are not the upstream's), a weak ETag (or none, when
 * the arena has no room for it). Returns 0, or -1 with the head as it was
 * when the arena has no room for the encoding. */
static int cz_rewrite_head(struct txn *t, enum compress_enc enc)
{
	static const char *const names[] = {
#define COMPRESS_ENC_TEXT(name, text) text,
	    COMPRESS_ENC_TABLE(COMPRESS_ENC_TEXT)
#undef COMPRESS_ENC_TEXT
	};
	uint32_t n = t->resp.hl.n;
	struct hdr *h;

	if (!hlist_add(&t->arena, &t->resp.hl, "Content-Encoding", 16, names[enc], (uint32_t)strlen(names[enc])))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		h = &t->resp.hl.v[i];
		if (h->flags & HDR_HOP)
			continue;
		if (http_span_ieq(h->name, h->name_len, "content-encoding") ||
		    http_span_ieq(h->name, h->name_len, "accept-ranges"))
			h->flags |= HDR_HOP; /* not written (identity, or ranges) */
		else if (http_span_ieq(h->name, h->name_len, "etag") && h->value_len && h->value[0] == '"') {
			char w[512];

			if (h->value_len + 2 > sizeof w) {
				h->flags |= HDR_HOP; /* too long to weaken here: dropped */
				continue;
			}
			memcpy(w, "W/", 2);
			memcpy(w + 2, h->value, h->value_len);
			if (hdr_set_value(&t->arena, h, w, h->value_len + 2) < 0)
				h->flags |= HDR_HOP; /* no room: dropped, never left strong */
		}
	}
	return 0;
}

/* zlib's window bits and memLevel for a body of <len> bytes (0: not
 * known), as nginx chooses them: halved while the body still fits the
 * smaller window, so a 2 KiB answer takes 40 KiB of state, not 262 KiB. */
static void cz_gzip_params(uint64_t len, int *wbits, int *mem)
{
	*wbits = CZ_GZIP_WBITS;
	*mem = CZ_GZIP_MEMLEVEL;
	while (len && *wbits > 9 && len < (1u << (*wbits - 1)) - 262) {
		(*wbits)--;
		if (*mem > 1)
			(*mem)--;
	}
}

/* What an encoder may take of the pool: zlib's is exact (its window and
 * prev, 2^(wbits+2); head and pending, 2^(memLevel+9); its state, 6 KiB),
 * brotli's the table above; with the pool's block headers. */
static size_t cz_reserve(struct txn *t, enum compress_enc enc, const struct config_compress *p)
{
	size_t base = sizeof(struct cz_stream) + 64 + 8 * 32;
	int wbits, mem;

	if (enc == COMPRESS_GZIP) {
		cz_gzip_params(t->resp.body == HTTP_BODY_LENGTH ? t->resp.content_length : 0, &wbits, &mem);
		return base + ((size_t)1 << (wbits + 2)) + ((size_t)1 << (mem + 9)) + (8u << 10);
	}
	return base + ((size_t)cz_brotli_reserve_kib[p->brotli_level] << 10);
}

/* A new encoder for <enc>, or NULL (no pool room, no buffer). */
static struct cz_stream *cz_stream_new(struct txn *t, enum compress_enc enc, const struct config_compress *p)
{
	size_t need = cz_reserve(t, enc, p);
	struct cz_stream *s;
	int wbits, mem;

	if (cz.reserved + need > cz.pool.size)
		return NULL;
	if (!(s = czpool_alloc(&cz.pool, sizeof(*s))))
		return NULL;
	memset(s, 0, sizeof(*s));
	s->enc = (uint8_t)enc;
	s->reserve = need;
	if (!(s->out = buf_get())) {
		czpool_free(&cz.pool, s);
		return NULL;
	}
	if (enc == COMPRESS_GZIP) {
		s->u.z.zalloc = cz_zalloc;
		s->u.z.zfree = cz_zfree;
		cz_gzip_params(t->resp.body == HTTP_BODY_LENGTH ? t->resp.content_length : 0, &wbits, &mem);
		if (deflateInit2(&s->u.z, (int)p->gzip_level, Z_DEFLATED, wbits + 16, mem, Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail;
	} else {
		if (!(s->u.br = BrotliEncoderCreateInstance(cz_balloc, cz_bfree, NULL)))
			goto fail;
		BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_QUALITY, p->brotli_level);
		BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_LGWIN, CZ_BROTLI_LGWIN);
		if (t->resp.body == HTTP_BODY_LENGTH && t->resp.content_length < (1u << 30))
			BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_SIZE_HINT, (uint32_t)t->resp.content_length);
	}
	cz.reserved += need;
	cz.streams++;
	return s;
fail:
	buf_put(s->out);
	czpool_free(&cz.pool, s);
	return NULL;
}

static void cz_skip(enum compress_skip why)
{
	SHM_ADD(wk.cnt, compress_skipped[why], 1);
}

enum ph_rc compress_ph_response(struct txn *t, const void *conf)
{
	const struct config_compress *p = t->cz.pol;
	enum compress_skip why;
	enum compress_enc order[COMPRESS_ENC_COUNT] = {COMPRESS_BR, COMPRESS_GZIP};

	(void)conf;
	if (!p || t->resp.status == 101)
		return PH_CONTINUE;
	why = cz_judge(t, p);
	if (why != COMPRESS_SKIP_COUNT) {
		cz_skip(why);
		return PH_CONTINUE;
	}
	/* compressible: its form depends on Accept-Encoding from here on */
	cz_vary(t);
	if (!t->cz.q[COMPRESS_BR] && !t->cz.q[COMPRESS_GZIP]) {
		cz_skip(COMPRESS_SKIP_NOT_ACCEPTED);
		return PH_CONTINUE;
	}
	if (cz.streams >= cz.max_streams) {
		cz_skip(COMPRESS_SKIP_BUSY);
		return PH_CONTINUE;
	}
	/* the client's preference; br on a tie; the other when the pool
	 * has no room for the first */
	if (t->cz.q[COMPRESS_GZIP] > t->cz.q[COMPRESS_BR]) {
		order[0] = COMPRESS_GZIP;
		order[1] = COMPRESS_BR;
	}
	for (int i = 0; i < COMPRESS_ENC_COUNT && !t->cz.s; i++)
		if (t->cz.q[order[i]])
			t->cz.s = cz_stream_new(t, order[i], p);
	if (!t->cz.s || cz_rewrite_head(t, (enum compress_enc)t->cz.s->enc) < 0) {
		compress_end(t);
		cz_skip(COMPRESS_SKIP_NO_MEMORY);
		return PH_CONTINUE;
	}
	SHM_ADD(wk.cnt, compress_responses[t->cz.s->enc], 1);
	cz_gauges();
	return PH_CONTINUE;
}

/* ---- the body ---------------------------------------------------------------- */

/* Runs zlib on the span into the output buffer: bytes made in *<n>. */
static int cz_gzip(struct cz_stream *s, size_t cap, size_t *n)
{
	static const int flush[] = {[CZ_PROCESS] = Z_NO_FLUSH, [CZ_FLUSH] = Z_SYNC_FLUSH, [CZ_FINISH] = Z_FINISH};
	z_stream *z = &s->u.z;
	int rc;

	z->next_in = (Bytef *)(uintptr_t)s->data;
	z->avail_in = (uInt)s->len;
	z->next_out = (Bytef *)s->out->data;
	z->avail_out = (uInt)cap;
	rc = deflate(z, flush[s->op]);
	if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
		return -1;
	*n = cap - z->avail_out;
	s->data += s->len - z->avail_in;
	s->len = z->avail_in;
	/* zlib asks to be called again while it fills the buffer; a call
	 * with nothing left to give makes nothing (Z_BUF_ERROR) */
	s->full = z->avail_out == 0 && rc != Z_STREAM_END;
	if (s->op == CZ_FINISH && !s->full && rc != Z_STREAM_END)
		return -1;
	return 0;
}

/* The same with brotli, which may need several calls for one span. */
static int cz_brotli(struct cz_stream *s, size_t cap, size_t *n)
{
	static const BrotliEncoderOperation op[] = {
	    [CZ_PROCESS] = BROTLI_OPERATION_PROCESS, [CZ_FLUSH] = BROTLI_OPERATION_FLUSH,
	    [CZ_FINISH] = BROTLI_OPERATION_FINISH};
	size_t in = s->len, out = cap;
	const uint8_t *next_in = (const uint8_t *)s->data;
	uint8_t *next_out = (uint8_t *)s->out->data;
	int complete = 0;

	for (int i = 0; i < 64 && out > 0 && !complete; i++) {
		if (!BrotliEncoderCompressStream(s->u.br, op[s->op], &in, &next_in, &out, &next_out, NULL))
			return -1; /* out of pool memory, the one way it fails here */
		complete = in == 0 && !BrotliEncoderHasMoreOutput(s->u.br) &&
		           (s->op != CZ_FINISH || BrotliEncoderIsFinished(s->u.br));
	}
	*n = cap - out;
	s->data = (const char *)next_in;
	s->len = in;
	s->full = !complete;
	if (s->full && out > 0)
		return -1; /* no progress in 64 calls: never spin */
	return 0;
}

/* Encodes what the span holds, queues one buffer of output. What the
 * encoder took is its own (zlib's window, brotli's ring buffer): that
 * much of the source is consumed at once, the span's end with its last
 * bytes. The body's end queued sets t->resp_done. */
static int cz_step(struct txn *t)
{
	struct cz_stream *s = t->cz.s;
	size_t before = s->len, n = 0;
	int rc = s->enc == COMPRESS_GZIP ? cz_gzip(s, wk.buf_size, &n) : cz_brotli(s, wk.buf_size, &n);

	if (rc < 0 || (s->full && n == 0)) {
		if (worker_log_gate(&cz.log_next, &cz.unlogged)) {
			log_warn("compress: the %s encoder failed (pool of %zu bytes, %zu in use); cutting the response",
			         s->enc == COMPRESS_GZIP ? "gzip" : "br", cz.pool.size, cz.pool.in_use);
			cz.unlogged = 0;
		}
		return WEIR_ERR(COMPRESS_FAILED);
	}
	SHM_ADD(wk.cnt, compress_bytes_in, before - s->len);
	SHM_ADD(wk.cnt, compress_bytes_out, n);
	cz_gauges();
	if (before != s->len)
		s->fresh = 1;
	if (s->held && (before != s->len || s->len == 0)) {
		s->held = s->len != 0; /* an empty span (the end) is consumed too */
		t->up.dry = !t->up.ops->consumed(&t->up, before - s->len);
	}
	if (!s->len && !s->full) {
		if (s->op != CZ_PROCESS)
			s->fresh = 0;
		s->done = s->op == CZ_FINISH;
	}
	/* the output buffer is written over only once the queue is empty:
	 * the core asks for the next span only then */
	t->down.ops->send_body(&t->down, s->out->data, n, s->done);
	t->resp_done = s->done;
	return 1;
}

int compress_body(struct txn *t, const struct body_span *sp)
{
	struct cz_stream *s = t->cz.s;

	s->held = 1;
	s->data = sp->data;
	s->len = sp->len;
	/* a stream is flushed when the upstream has nothing more at once
	 * (nothing more ready, nothing left readable), and only when
	 * something went in since the last flush */
	s->op = sp->eos ? CZ_FINISH
	        : (t->resp.body != HTTP_BODY_LENGTH && !sp->more && t->u && !t->u->readable && (sp->len || s->fresh))
	            ? CZ_FLUSH
	            : CZ_PROCESS;
	return cz_step(t);
}

int compress_pending(const struct txn *t)
{
	return t->cz.s && (t->cz.s->len || t->cz.s->full);
}

int compress_resume(struct txn *t)
{
	return cz_step(t);
}

void compress_end(struct txn *t)
{
	struct cz_stream *s = t->cz.s;

	if (!s)
		return;
	t->cz.s = NULL;
	if (s->enc == COMPRESS_GZIP)
		deflateEnd(&s->u.z);
	else if (s->u.br)
		BrotliEncoderDestroyInstance(s->u.br);
	if (s->out)
		buf_put(s->out);
	cz.reserved -= s->reserve;
	cz.streams--;
	czpool_free(&cz.pool, s);
	cz_gauges();
}
