/*
 * head.c: request and response heads written anew.
 *
 * weir never copies a head through: it writes the start line itself, then
 * each validated header that is not hop-by-hop, then the headers it owns
 * (Host, X-Forwarded-*, Via, a TLS listener's client certificate subject
 * header, and the framing it will actually use). A request head is
 * written as HTTP/1 text or, for a codec that carries fields (HTTP/2), as
 * fields with the same choices (head_write_fields()): one place decides
 * what an upstream is told, whatever the protocol.
 *
 * A header weir vouches for (a listener's client_header, X-Forwarded-Proto)
 * never comes from a client: on any listener, in any spelling a CGI, WSGI
 * or PHP backend reads as the same variable (x_client_subject is
 * HTTP_X_CLIENT_SUBJECT), a client's is dropped and counted as
 * forged_header. X-Forwarded-For is appended to, as nginx's
 * $proxy_add_x_forwarded_for does: the exact name passes into weir's list,
 * any other spelling would reach the backend as a second XFF and is
 * dropped. Early-Data stays: RFC 8470 5.1 says an intermediary keeps it.
 *
 * So is a lookalike of a framing or hop-by-hop header (Transfer_Encoding,
 * Content_Length, Keep_Alive, Proxy_*: the same variable to such a
 * backend, and some frameworks act on it), counted as forged_header too.
 * Every other name with a '_' passes, unless underscores_in_headers is
 * false (nginx's default): names such as X_Api_Key are common enough
 * behind existing proxies that dropping them by default would break
 * backends silently, while the names that matter are dropped always.
 * Responses keep their lookalikes: weir frames a response itself and no
 * HTTP client reads Transfer_Encoding as framing.
 */
#include <string.h>

#include "common/log.h"
#include "worker/h1/h1.h"
#include "worker/net/net.h"

struct out {
	char *p;
	uint32_t len, cap;
	int overflow;
};

static void out_put(struct out *o, const char *s, size_t n)
{
	if (o->len + n > o->cap) {
		o->overflow = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += (uint32_t)n;
}

#define OUT_LIT(o, lit) out_put(o, lit, sizeof(lit) - 1)

/* Decimal without printf: heads are written on every request. */
static void out_u64(struct out *o, uint64_t v)
{
	char tmp[20];

	out_put(o, tmp, worker_u64_text(tmp, v));
}

static void out_header(struct out *o, const struct hdr *h)
{
	out_put(o, h->name, h->name_len);
	OUT_LIT(o, ": ");
	out_put(o, h->value, h->value_len);
	OUT_LIT(o, "\r\n");
}

/* A header that the request id weir resolved replaces. */
static int head_is_request_id(const struct hdr *h)
{
	return h->name_len == 12 && http_name_same_var(h->name, "X-Request-Id", 12);
}

/* The names weir vouches for, from every listener of the configuration
 * this worker serves: a few dozen at most, fixed when the worker starts
 * (a reload starts new workers). <lens> has bit n set when some name is n
 * bytes long, so most headers are passed by one test. */
static struct {
	uint64_t lens;
	uint32_t n;
	struct {
		const char *name;
		uint32_t len;
	} v[CONFIG_MAX_LISTENERS + 2 + 256]; /* + routes.auth's header names */
} vouched;

void head_vouch(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len >= 64) /* config names are shorter than CONFIG_NAME_MAX */
		return;
	for (uint32_t i = 0; i < vouched.n; i++)
		if (vouched.v[i].len == len && http_name_same_var(vouched.v[i].name, name, len))
			return;
	if (vouched.n == sizeof vouched.v / sizeof vouched.v[0]) {
		log_error("more than %u header names for weir to vouch for: a client's %s is passed on", vouched.n, name);
		return;
	}
	vouched.v[vouched.n].name = name;
	vouched.v[vouched.n].len = (uint32_t)len;
	vouched.n++;
	vouched.lens |= 1ull << len;
}

void head_init(const struct config *cfg)
{
	memset(&vouched, 0, sizeof(vouched));
	head_vouch("X-Forwarded-Proto");
	/* reached only by spellings other than the one weir appends to */
	head_vouch("X-Forwarded-For");
	for (int i = 0; i < cfg->nlisteners; i++)
		if (cfg->listeners[i].client_header[0])
			head_vouch(cfg->listeners[i].client_header);
}

static int head_is_vouched(const struct hdr *h)
{
	if (h->name_len >= 64 || !(vouched.lens >> h->name_len & 1))
		return 0;
	for (uint32_t i = 0; i < vouched.n; i++)
		if (vouched.v[i].len == h->name_len && http_name_same_var(h->name, vouched.v[i].name, h->name_len))
			return 1;
	return 0;
}

/* A client's header that only weir may set, or a lookalike of one:
 * counted always, logged at most once a second (with how many went
 * unlogged), since a client can send thousands. */
static void head_drop_forged(const struct conn *c, const struct hdr *h)
{
	static ev_tstamp next;
	static uint32_t unlogged;
	ev_tstamp now;
	const char *why = h->flags & HDR_LOOKALIKE ? "which reads as a header weir owns" : "which only weir sets";

	worker_count_error(WEIR_ERR(FORGED_HEADER));
	if (log_level_min > LOG_LEVEL_INFO)
		return;
	now = ev_now(wk.loop);
	if (now < next) {
		unlogged++;
		return;
	}
	next = now + 1.0;
	/* a name is tchar only: nothing in it needs escaping */
	if (unlogged)
		log_info("%s: dropped the client's %.*s header, %s (and %u more since the last line)", c->peer,
		         (int)h->name_len, h->name, why, unlogged);
	else
		log_info("%s: dropped the client's %.*s header, %s", c->peer, (int)h->name_len, h->name, why);
	unlogged = 0;
}

/* Writes "v1, v2, ..., <add>" from every header carrying <flag>. */
static void out_join(struct out *o, const struct hdr *hs, uint32_t n, uint32_t flag, const char *add, size_t add_len)
{
	int first = 1;

	for (uint32_t i = 0; i < n; i++) {
		if (!(hs[i].flags & flag) || hs[i].value_len == 0)
			continue;
		if (!first)
			OUT_LIT(o, ", ");
		out_put(o, hs[i].value, hs[i].value_len);
		first = 0;
	}
	if (!first)
		OUT_LIT(o, ", ");
	out_put(o, add, add_len);
}

/*
 * A head is kept for the whole request, so it is kept in a buffer of its
 * size, not a 16 KiB one. A head that will likely fit the smallest buffer
 * (its source is short) is written there at once; a larger one, or one
 * that did not fit after all, is written into one scratch area of the
 * worker and copied into the smallest buffer it fits. The area is static,
 * outside the slab (a worker is one thread), sized for the largest
 * limits.header_size and response_header_size allow; only the pages heads
 * touch become resident.
 */
static char head_scratch[65536 + WORKER_HEAD_GROWTH(1000)]; /* the 64 KiB and 1,000 headers limits allow */

/* What weir adds to a head it writes anew beyond the bytes it read: its
 * own Via, framing, Connection and X-Forwarded-* lines, a reason phrase,
 * ": " for fields sent as "name:value". A guess: a wrong one costs one
 * more pass through the scratch area, never a truncated head. */
#define HEAD_GROWTH 192u

/* A head written as fields (head_write_fields()): a record's head, the
 * name's length (2 bytes) and the value's (4). */
#define HEAD_REC 6

/* 1 when a head read as <len> bytes is written straight into the
 * scratch area. */
static int out_whole(size_t len)
{
	return len + HEAD_GROWTH > WORKER_SMALL_MIN - sizeof(struct buf);
}

static int out_begin(struct out *o, struct buf **b, int whole)
{
	if (*b) {
		buf_put(*b);
		*b = NULL;
	}
	if (!whole) {
		if (!(*b = buf_get_fit(0)))
			return WEIR_ERR(NOMEM);
		o->p = (*b)->data;
		o->cap = WORKER_SMALL_MIN - sizeof(struct buf);
	} else {
		o->p = head_scratch;
		o->cap = wk.buf_size < sizeof(head_scratch) ? wk.buf_size : (uint32_t)sizeof(head_scratch);
	}
	o->len = 0;
	o->overflow = 0;
	return 0;
}

/* Keeps the head written in <o> in *<b>, copied to a buffer of its size
 * if it was written in the scratch area. */
static int out_keep(struct out *o, struct buf **b)
{
	if (o->p == head_scratch) {
		if (!(*b = buf_get_fit(o->len)))
			return WEIR_ERR(NOMEM);
		memcpy((*b)->data, o->p, o->len);
	}
	(*b)->start = 0;
	(*b)->end = o->len;
	return 0;
}

/* 1 when the client's field <h> goes on to the upstream as it came,
 * whatever the protocol; 0 when weir drops it (counted if forged) or
 * writes it itself. A TE listing "trailers" sets *<te_trailers>. */
static inline int head_field_passes(const struct hdr *h, const struct head_req *hr, int *te_trailers)
{
	/* X-Forwarded-Proto is not skipped here: as a vouched name it is
	 * dropped and counted below; framing headers are not in the list */
	const uint32_t skip = HDR_HOP | HDR_HOST | HDR_XFF | HDR_EXPECT | HDR_VIA;

	if (h->flags & skip) {
		/* looked at here, among the few skipped: no walk of its own */
		*te_trailers |= h->tok == HT_TE && trailers_te_listed(h->value, h->value_len);
		return 0;
	}
	if ((h->flags & HDR_LOOKALIKE) || head_is_vouched(h)) {
		if (!hr->again)
			head_drop_forged(hr->c, h);
		return 0;
	}
	if (hr->request_id_len && head_is_request_id(h))
		return 0; /* replaced by the id weir resolved (realip) */
	/* underscores_in_headers = false: every client header with a '_' in
	 * its name is dropped, as nginx does by default */
	if ((h->flags & HDR_UNDERSCORE) && hr->drop_underscores) {
		/* the operator's choice, not an attack: counted, not logged */
		if (!hr->again)
			worker_count_error(WEIR_ERR(UNDERSCORE_HEADER));
		return 0;
	}
	return 1;
}

/* A record's head at <p>: the lengths, big-endian. */
static void out_rec_head(char *p, size_t nlen, size_t vlen)
{
	for (int i = 0; i < 2; i++)
		p[i] = (char)(nlen >> (8 * (1 - i)));
	for (int i = 0; i < 4; i++)
		p[2 + i] = (char)(vlen >> (8 * (3 - i)));
}

/* One field of a head written as fields: its name in lower case (the
 * client's spelling is not kept: HTTP/2 wants it so, and a name may be a
 * literal of weir's, never written to: lowered as it is copied), its
 * value as it is. */
static void out_field(struct out *o, const char *name, size_t nlen, const char *value, size_t vlen)
{
	char *p;

	if (o->len + HEAD_REC + nlen + vlen > o->cap) {
		o->overflow = 1;
		return;
	}
	p = o->p + o->len;
	out_rec_head(p, nlen, vlen);
	for (size_t k = 0; k < nlen; k++)
		p[HEAD_REC + k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] | 0x20 : name[k]);
	memcpy(p + HEAD_REC + nlen, value, vlen);
	o->len += (uint32_t)(HEAD_REC + nlen + vlen);
}

#define OUT_FIELD(o, lit, v, vlen) out_field(o, lit, sizeof(lit) - 1, v, vlen)

/*
 * The fields weir adds are written by one set of functions for both forms
 * of a head: <fields> 0 is text ("Name: value" and CRLF), 1 records (the
 * name lowered as it is copied). Each is always inlined and every caller
 * passes <fields> as a constant, so each form gets its own code with the
 * literal names' lengths folded in: the text form runs on every HTTP/1
 * request, and written out of line (calls, a strlen per list) it cost
 * some 250 more instructions a request (peers.sh --mode instr).
 */
#define OUT_INLINE static inline __attribute__((always_inline))

OUT_INLINE void out_add(struct out *o, int fields, const char *name, size_t nlen, const char *value, size_t vlen)
{
	char *p;

	if (fields) {
		out_field(o, name, nlen, value, vlen);
		return;
	}
	if (o->len + nlen + vlen + 4 > o->cap) {
		o->overflow = 1;
		return;
	}
	p = o->p + o->len;
	memcpy(p, name, nlen);
	memcpy(p + nlen, ": ", 2);
	memcpy(p + nlen + 2, value, vlen);
	memcpy(p + nlen + 2 + vlen, "\r\n", 2);
	o->len += (uint32_t)(nlen + vlen + 4);
}

#define OUT_ADD(o, fields, lit, v, vlen) out_add(o, fields, lit, sizeof(lit) - 1, v, vlen)

/* A field whose value is a list joined from the client's fields carrying
 * <flag> and weir's own element <add> (out_join): as a record, the value
 * is written behind the record's head, then its length put in. */
OUT_INLINE void out_add_list(struct out *o, int fields, const struct hdr *hs, uint32_t n, uint32_t flag,
                             const char *name, const char *add, size_t add_len)
{
	size_t nlen = strlen(name);
	uint32_t at = o->len;

	if (!fields) {
		out_put(o, name, nlen);
		OUT_LIT(o, ": ");
		out_join(o, hs, n, flag, add, add_len);
		OUT_LIT(o, "\r\n");
		return;
	}
	out_field(o, name, nlen, "", 0);
	if (o->overflow)
		return;
	out_join(o, hs, n, flag, add, add_len);
	if (!o->overflow)
		out_rec_head(o->p + at, nlen, o->len - at - HEAD_REC - (uint32_t)nlen);
}

/* routes.auth's lines ("Name: value\r\n"...), weir's own writing: as they
 * are into a text head, one record each into a head of fields. */
OUT_INLINE void out_add_lines(struct out *o, int fields, const char *p, size_t len)
{
	const char *end = p + len;

	if (!fields) {
		out_put(o, p, len);
		return;
	}
	while (p < end) {
		const char *eol = memchr(p, '\r', (size_t)(end - p)), *colon;

		if (!eol)
			eol = end;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon) {
			const char *v = colon + 1;

			while (v < eol && *v == ' ')
				v++;
			out_field(o, p, (size_t)(colon - p), v, (size_t)(eol - v));
		}
		p = eol + 2;
	}
}

/*
 * The fields weir adds behind the client's, the same in both forms: the
 * verified client certificate's subject, routes.auth's consumer and claims,
 * X-Forwarded-For, X-Request-Id, X-Forwarded-Proto, Early-Data, Via, and
 * TE: trailers when <te> (hop-by-hop, but gRPC needs it: that value alone).
 */
OUT_INLINE void out_added(struct out *o, int fields, const struct msg *r, const struct head_req *hr,
                          const char *cert_hdr, size_t cert_hdr_len, const char *subj, size_t subj_len, int te)
{
	if (subj)
		out_add(o, fields, cert_hdr, cert_hdr_len, subj, subj_len);
	if (hr->extra_len)
		out_add_lines(o, fields, hr->extra, hr->extra_len);
	if (hr->xff)
		OUT_ADD(o, fields, "X-Forwarded-For", hr->xff, hr->xff_len);
	else
		out_add_list(o, fields, r->hl.v, r->hl.n, HDR_XFF, "X-Forwarded-For", hr->c->peer, hr->c->peer_len);
	if (hr->request_id_len)
		OUT_ADD(o, fields, "X-Request-Id", hr->request_id, hr->request_id_len);
	if (hr->c->tls)
		OUT_ADD(o, fields, "X-Forwarded-Proto", "https", 5);
	else
		OUT_ADD(o, fields, "X-Forwarded-Proto", "http", 4);
	if (hr->early)
		OUT_ADD(o, fields, "Early-Data", "1", 1);
	out_add_list(o, fields, r->hl.v, r->hl.n, HDR_VIA, "Via", r->version_minor ? "1.1 weir" : "1.0 weir", 8);
	if (te)
		OUT_ADD(o, fields, "TE", "trailers", 8);
}

int head_write_request(const struct msg *r, struct head_req *hr, struct buf **out)
{
	struct out o;
	/* a TLS listener's client_header: weir writes it with the verified
	 * subject; a client's own is among the vouched names */
	size_t cert_hdr_len = 0, subj_len = 0;
	const char *subj = NULL;
	const char *cert_hdr = tls_client_header(hr->c, &cert_hdr_len, &subj, &subj_len);
	int whole = out_whole(r->head_len + subj_len + hr->extra_len + hr->target_len);
	int te_trailers;

again:
	te_trailers = 0;
	if (out_begin(&o, out, whole) < 0)
		return WEIR_ERR(NOMEM);
	out_put(&o, r->method, r->method_len);
	OUT_LIT(&o, " ");
	hr->target_at = o.len;
	if (hr->target)
		out_put(&o, hr->target, hr->target_len);
	else
		out_put(&o, r->target, r->target_len);
	OUT_LIT(&o, " HTTP/1.1\r\nHost: ");
	if (r->host_len) {
		out_put(&o, r->host, r->host_len);
	} else {
		/* HTTP/1.0 without Host: name the server we talk to */
		out_put(&o, hr->host, strlen(hr->host));
	}
	OUT_LIT(&o, "\r\n");
	for (uint32_t i = 0; i < r->hl.n; i++) {
		const struct hdr *h = &r->hl.v[i];

		if (head_field_passes(h, hr, &te_trailers))
			out_header(&o, h);
	}
	out_added(&o, 0, r, hr, cert_hdr, cert_hdr_len, subj, subj_len, te_trailers);
	if (hr->upgrade_len) {
		/* an upgrade the route allows (tunnel.h): the one hop-by-hop
		 * pair weir passes on, as the client sent its token */
		OUT_LIT(&o, "Connection: upgrade\r\nUpgrade: ");
		out_put(&o, hr->upgrade, hr->upgrade_len);
		OUT_LIT(&o, "\r\n");
	}
	if (r->body == HTTP_BODY_LENGTH) {
		OUT_LIT(&o, "Content-Length: ");
		out_u64(&o, r->content_length);
		OUT_LIT(&o, "\r\n");
	} else if (r->body == HTTP_BODY_CHUNKED) {
		OUT_LIT(&o, "Transfer-Encoding: chunked\r\n");
	}
	OUT_LIT(&o, "\r\n");
	if (o.overflow) {
		if (!whole++)
			goto again;
		return WEIR_ERR(HEADERS_TOO_LARGE);
	}
	return out_keep(&o, out);
}

int head_write_fields(const struct msg *r, struct head_req *hr, struct buf **out)
{
	struct out o;
	size_t cert_hdr_len = 0, subj_len = 0;
	const char *subj = NULL;
	const char *cert_hdr = tls_client_header(hr->c, &cert_hdr_len, &subj, &subj_len);
	int whole = out_whole(r->head_len + subj_len + hr->extra_len + hr->target_len + 2u * r->hl.n);
	int te_trailers, grpc;
	char clen[24];

again:
	te_trailers = grpc = 0;
	if (out_begin(&o, out, whole) < 0)
		return WEIR_ERR(NOMEM);
	o.p[o.len++] = (char)(r->body != HTTP_BODY_NONE && !(r->body == HTTP_BODY_LENGTH && !r->content_length)
	                          ? HEAD_FIELDS_BODY
	                          : 0);
	OUT_FIELD(&o, ":method", r->method, r->method_len);
	if (r->host_len)
		OUT_FIELD(&o, ":authority", r->host, r->host_len);
	else
		OUT_FIELD(&o, ":authority", hr->host, strlen(hr->host));
	hr->target_at = o.len + HEAD_REC + 5;
	if (hr->target)
		OUT_FIELD(&o, ":path", hr->target, hr->target_len);
	else
		OUT_FIELD(&o, ":path", r->target, r->target_len);
	for (uint32_t i = 0; i < r->hl.n; i++) {
		const struct hdr *h = &r->hl.v[i];

		/* a rule's Content-Length is no framing of the stream's */
		if (!head_field_passes(h, hr, &te_trailers) || (h->flags & HDR_FRAMING))
			continue;
		/* gRPC over HTTP/2 requires "te: trailers" (its protocol) */
		grpc |= h->name_len == 12 && http_span_ieq(h->name, 12, "content-type") && h->value_len >= 16 &&
		        http_span_ieq(h->value, 16, "application/grpc");
		out_field(&o, h->name, h->name_len, h->value, h->value_len);
	}
	/* no upgrade: a connection-specific pair HTTP/2 does not carry */
	out_added(&o, 1, r, hr, cert_hdr, cert_hdr_len, subj, subj_len, te_trailers || grpc);
	if (r->body == HTTP_BODY_LENGTH) {
		struct out d = {.p = clen, .cap = sizeof(clen)};

		out_u64(&d, r->content_length);
		OUT_FIELD(&o, "content-length", clen, d.len);
	}
	if (o.overflow) {
		if (!whole++)
			goto again;
		return WEIR_ERR(HEADERS_TOO_LARGE);
	}
	return out_keep(&o, out);
}

int head_fields_add(struct buf *b, uint32_t cap, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct out o = {.p = b->data, .len = b->end, .cap = cap};

	if (!o.len)
		o.p[o.len++] = 0; /* the flags byte: none */
	out_field(&o, name, nlen, value, vlen);
	if (o.overflow)
		return -1;
	b->end = o.len;
	return 0;
}

int head_fields_rec(const struct buf *b, size_t *pos, const char **name, size_t *nlen, const char **value,
                    size_t *vlen)
{
	const unsigned char *p;
	size_t off = *pos ? *pos : 1; /* past the flags byte */

	if (!b || off + HEAD_REC > b->end)
		return 0;
	p = (const unsigned char *)b->data + off;
	*nlen = (size_t)p[0] << 8 | p[1];
	*vlen = (size_t)p[2] << 24 | (size_t)p[3] << 16 | (size_t)p[4] << 8 | p[5];
	*name = (const char *)p + HEAD_REC;
	*value = *name + *nlen;
	if (*nlen + *vlen > b->end - off - HEAD_REC)
		return 0; /* not a head written as fields */
	*pos = off + HEAD_REC + *nlen + *vlen;
	return 1;
}

int head_text_field(const struct buf *b, size_t *pos, const char **name, size_t *nlen, const char **value,
                    size_t *vlen)
{
	const char *h, *end, *p, *eol, *colon;

	if (!b)
		return 0;
	h = b->data;
	end = h + b->end;
	/* past the request line first; each line "Name: value\r\n", weir's
	 * own writing, up to the empty one */
	p = *pos ? h + *pos : memchr(h, '\n', (size_t)(end - h));
	if (!p || ++p >= end || !(eol = memchr(p, '\n', (size_t)(end - p))) || eol - p < 2 ||
	    !(colon = memchr(p, ':', (size_t)(eol - p))))
		return 0;
	*name = p;
	*nlen = (size_t)(colon - p);
	*value = colon + 2 <= eol - 1 ? colon + 2 : eol - 1;
	*vlen = (size_t)(eol - 1 - *value);
	*pos = (size_t)(eol - h);
	return 1;
}

const char *head_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "";
	}
}

int head_write_response(const struct msg *r, struct head_resp *hr, struct buf **out)
{
	const struct msg *q = hr->req;
	struct out o;
	uint32_t skip = HDR_HOP | HDR_VIA;
	char line[13] = "HTTP/1.1 000 ";
	int whole = out_whole(r->head_len);

again:
	if (out_begin(&o, out, whole) < 0)
		return WEIR_ERR(NOMEM);
	line[9] = (char)('0' + r->status / 100);
	line[10] = (char)('0' + r->status / 10 % 10);
	line[11] = (char)('0' + r->status % 10);
	out_put(&o, line, sizeof(line));
	if (r->reason_len)
		out_put(&o, r->reason, r->reason_len);
	else
		out_put(&o, head_reason(r->status), strlen(head_reason(r->status)));
	OUT_LIT(&o, "\r\n");

	for (uint32_t i = 0; i < r->hl.n; i++)
		if (!(r->hl.v[i].flags & skip) && !(hr->request_id_len && head_is_request_id(&r->hl.v[i])))
			out_header(&o, &r->hl.v[i]);
	out_add_list(&o, 0, r->hl.v, r->hl.n, HDR_VIA, "Via", r->version_minor ? "1.1 weir" : "1.0 weir", 8);
	if (hr->request_id_len)
		OUT_ADD(&o, 0, "X-Request-Id", hr->request_id, hr->request_id_len);

	/* an upgrade declined: what the client sent after its head may be
	 * the new protocol, never to be read as the next request */
	hr->client_close = !q->keep_alive || wk.draining || (hr->upgrade_len && r->status != 101);
	/* a body weir re-encodes (compression) has no length known ahead */
	switch (hr->recoded ? HTTP_BODY_CHUNKED : r->body) {
	case HTTP_BODY_NONE:
		/* a response to HEAD and a 304 describe the body they do not
		 * carry: their Content-Length is information, passed on */
		if (r->length_info) {
			OUT_LIT(&o, "Content-Length: ");
			out_u64(&o, r->content_length);
			OUT_LIT(&o, "\r\n");
		}
		break;
	case HTTP_BODY_LENGTH:
		OUT_LIT(&o, "Content-Length: ");
		out_u64(&o, r->content_length);
		OUT_LIT(&o, "\r\n");
		break;
	case HTTP_BODY_CHUNKED:
	case HTTP_BODY_CLOSE:
		if (q->version_minor >= 1) {
			OUT_LIT(&o, "Transfer-Encoding: chunked\r\n");
			hr->chunked = 1;
		} else {
			/* an HTTP/1.0 client knows no chunks: the close ends it */
			hr->client_close = 1;
		}
		break;
	default:
		break;
	}
	if (r->status == 101) {
		OUT_LIT(&o, "Connection: upgrade\r\nUpgrade: ");
		out_put(&o, hr->upgrade, hr->upgrade_len);
		OUT_LIT(&o, "\r\n");
	} else if (hr->client_close)
		OUT_LIT(&o, "Connection: close\r\n");
	else if (q->version_minor == 0)
		OUT_LIT(&o, "Connection: keep-alive\r\n");
	OUT_LIT(&o, "\r\n");
	if (o.overflow) {
		if (!whole++)
			goto again;
		return WEIR_ERR(UPSTREAM_BAD_RESPONSE);
	}
	return out_keep(&o, out);
}
