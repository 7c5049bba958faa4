/* DOOR */
#ifndef WEIR_WORKER_MSG_H
#define WEIR_WORKER_MSG_H

/* ==== msg ==== */
/*
 * msg: the message model: a request or response as the stream core sees
 * it, whatever the wire.
 *
 * Principle: a codec translates wire bytes into a struct msg and back; the
 * core reads and rewrites messages, never protocol text. A message is its
 * start (method token or status, scheme, authority, path), its framing
 * (length, chunked, until close, none) and a structured header list. Each
 * header is {token, name, value, flags}: the name is looked up once, when
 * the codec parses it, in one table of well-known names (hdr_token()), so
 * the core compares tokens, not strings, and the flags of the name
 * (hop-by-hop, framing, weir's own) come with the token. Framing headers
 * (Content-Length, Transfer-Encoding) are not in the list: the framing is
 * a field, and the codec writes its own.
 *
 * Memory: the list lives in the stream's arena (struct arena), one block
 * of the stream's slab object sized by limits.headers: entries grow from
 * its bottom, bytes copied for rewritten values from its top. Names and
 * values point where the codec found them (HTTP/1: the pinned input
 * buffer), never copied; a value is copied into the arena only when
 * something rewrites it (hdr_set_value). An arena that runs out while a
 * head is parsed is a 431 (a response: 502), while a header is rewritten
 * a 500 (header_space), the limits of today's header array.
 */

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>

/* Flags on a header: those of its name (from the token table, or found
 * by the codec), and HOP for a name the message's Connection lists. */
#define HDR_HOP 0x01     /* hop-by-hop: Connection, Keep-Alive, TE, Trailer,
                          * Transfer-Encoding, Upgrade, Proxy-*, and every
                          * name listed in Connection: never forwarded */
#define HDR_LENGTH 0x02  /* Content-Length: framing, never in a list */
#define HDR_HOST 0x04    /* Host: the authority, written by the codec */
#define HDR_XFF 0x08     /* X-Forwarded-For: weir appends the client */
#define HDR_XFP 0x10     /* X-Forwarded-Proto: weir writes its own */
#define HDR_EXPECT 0x20  /* Expect: weir answers 100-continue itself */
#define HDR_VIA 0x40     /* Via: weir appends itself */
#define HDR_UPGRADE 0x80 /* Upgrade (also HOP): forwarded only by a tunnel */
#define HDR_LOOKALIKE 0x100 /* with '_' read as '-', one of the framing or
                             * hop-by-hop names above (Transfer_Encoding):
                             * never forwarded to an upstream */
#define HDR_UNDERSCORE 0x200 /* has a '_' in its name */
#define HDR_FRAMING 0x400    /* Transfer-Encoding or Content-Length: the
                              * codec takes it into the framing */

/*
 * The well-known names, lower case, with the flags of the name. Token 0
 * (HT_OTHER) is every other name. A feature that needs a header by name
 * adds it here once and compares h->tok. Only names weir acts on are
 * here: a name in the table costs a whole comparison when it is met,
 * one not in it usually one probe of an empty slot.
 */
#define HDR_TOKEN_TABLE(X)                                                  \
	X(OTHER, "", 0)                                                         \
	X(HOST, "host", HDR_HOST)                                               \
	X(CONTENT_LENGTH, "content-length", HDR_LENGTH | HDR_FRAMING)           \
	X(TRANSFER_ENCODING, "transfer-encoding", HDR_HOP | HDR_FRAMING)        \
	X(CONNECTION, "connection", HDR_HOP)                                    \
	X(KEEP_ALIVE, "keep-alive", HDR_HOP)                                    \
	X(TE, "te", HDR_HOP)                                                    \
	X(TRAILER, "trailer", HDR_HOP)                                          \
	X(UPGRADE, "upgrade", HDR_HOP | HDR_UPGRADE)                            \
	X(PROXY_CONNECTION, "proxy-connection", HDR_HOP)                        \
	X(PROXY_AUTHORIZATION, "proxy-authorization", HDR_HOP)                  \
	X(PROXY_AUTHENTICATE, "proxy-authenticate", HDR_HOP)                    \
	/* h2c's: weir never forwards that upgrade, so hop-by-hop always */   \
	X(HTTP2_SETTINGS, "http2-settings", HDR_HOP)                            \
	X(VIA, "via", HDR_VIA)                                                  \
	X(EXPECT, "expect", HDR_EXPECT)                                         \
	X(X_FORWARDED_FOR, "x-forwarded-for", HDR_XFF)                          \
	X(X_FORWARDED_PROTO, "x-forwarded-proto", HDR_XFP)                      \
	X(EARLY_DATA, "early-data", 0)                                          \
	X(AUTHORIZATION, "authorization", 0)
enum hdr_tok {
#define HDR_TOKEN_ENUM(name, text, flags) HT_##name,
	HDR_TOKEN_TABLE(HDR_TOKEN_ENUM)
#undef HDR_TOKEN_ENUM
	HT_COUNT
};

struct hdr_token {
	const char *name; /* lower case */
	uint8_t len;
	uint16_t flags;
};

extern const struct hdr_token hdr_tokens[HT_COUNT];

/* The token of header name <p>[0..len) (tchar only, as the parser
 * checked it), compared without case; HT_OTHER for a name not in the
 * table. A hash of the length and the first and last letters picks a
 * slot of an open-addressed table (HDR_TOK_SLOTS, 4 times the names, built
 * before main): inline up to the common miss, an empty slot. */
#define HDR_TOK_SLOTS 256
extern uint8_t hdr_tok_slot[HDR_TOK_SLOTS]; /* token + 1; 0: empty */

static inline unsigned hdr_tok_hash(const char *p, size_t len)
{
	/* | 0x20 lowers letters; other bytes only have to hash alike */
	return ((unsigned)len * 31u + ((unsigned char)p[0] | 0x20u) * 7u + ((unsigned char)p[len - 1] | 0x20u)) &
	       (HDR_TOK_SLOTS - 1);
}

enum hdr_tok hdr_token_probe(const char *p, size_t len, unsigned slot);

static inline enum hdr_tok hdr_token(const char *p, size_t len)
{
	unsigned i;

	if (len - 1 >= 32) /* 0, or longer than any well-known name */
		return HT_OTHER;
	i = hdr_tok_hash(p, len);
	return hdr_tok_slot[i] ? hdr_token_probe(p, len, i) : HT_OTHER;
}

/* One header: 32 bytes, as the array it replaces. */
struct hdr {
	const char *name;
	const char *value; /* OWS trimmed on both sides; never NULL */
	uint32_t name_len;
	uint32_t value_len;
	uint16_t tok;      /* enum hdr_tok */
	uint16_t flags;    /* HDR_* */
};

/*
 * The stream's arena: <cap> bytes at <base>; [0, lo) holds header lists,
 * [hi, cap) bytes copied for rewritten values. Reset when the stream's
 * next head begins (the response reuses the request's room, as the header
 * array did: a response filter that needs a request header keeps a copy).
 */
struct arena {
	char *base;
	uint32_t cap, lo, hi;
};

static inline void arena_init(struct arena *a, void *mem, uint32_t cap)
{
	a->base = mem;
	a->cap = cap;
	a->lo = 0;
	a->hi = cap;
}

static inline void arena_reset(struct arena *a)
{
	a->lo = 0;
	a->hi = a->cap;
}

/* <n> bytes from the top of <a> (no alignment: bytes only), or NULL when
 * it is full. */
char *arena_bytes(struct arena *a, uint32_t n);

/* A header list: entries contiguous at the bottom of an arena. */
struct hlist {
	struct hdr *v;
	uint32_t n;
};

/* Room for the entries of a new list at the bottom of <a>: how many fit
 * (at most <max>); the list starts at hlist_open()'s return. The codec
 * parses into it, then hlist_close() keeps the <n> it used. */
static inline struct hdr *hlist_open(struct arena *a, uint32_t max, uint32_t *room)
{
	/* entries stay aligned for struct hdr: lo only ever moves by whole
	 * entries, and the base is the slab object's tail (8-byte aligned) */
	uint32_t n = (a->hi - a->lo) / (uint32_t)sizeof(struct hdr);

	*room = n < max ? n : max;
	return (struct hdr *)(void *)(a->base + a->lo);
}

static inline void hlist_close(struct arena *a, struct hlist *l, struct hdr *v, uint32_t n)
{
	l->v = v;
	l->n = n;
	a->lo = (uint32_t)((char *)(v + n) - a->base);
}

/* The first header of <l> with token <tok> after <from> (NULL: from the
 * start), or NULL. */
const struct hdr *hlist_find(const struct hlist *l, enum hdr_tok tok, const struct hdr *from);

/* Appends a header to <l>, which must be the last list of <a> (the one
 * the codec just closed); <name> and <value> must outlive the stream
 * (literals, or bytes of the arena). Returns it, or NULL when full. */
struct hdr *hlist_add(struct arena *a, struct hlist *l, const char *name, uint32_t name_len,
                      const char *value, uint32_t value_len);

/* Rewrites the value of <h> to a copy of <p>[0..len) in <a>. Returns 0,
 * or WEIR_EHEADER_SPACE (500) when the arena is full. */
int hdr_set_value(struct arena *a, struct hdr *h, const char *p, uint32_t len);

/* Framing of a message body. */
enum http_body_kind {
	HTTP_BODY_NONE,    /* no body */
	HTTP_BODY_LENGTH,  /* Content-Length bytes (may be 0) */
	HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked */
	HTTP_BODY_CLOSE,   /* responses only: until the upstream closes (HTTP/2: the stream ends) */
};

/* A request or a response. Spans point into the codec's input (or are
 * literals); what the core rewrites goes through the arena. */
struct msg {
	/* request: the method token (http-parser's enum) and its name */
	enum http_method method_id;
	const char *method; /* a static string: "GET" */
	uint32_t method_len;
	/* response */
	int status;         /* 100..599 */
	const char *reason;
	uint32_t reason_len;

	int version_minor;  /* HTTP/1.x; the version the peer spoke */
	const char *scheme; /* "http" or "https" (absolute-form), or NULL */
	const char *target; /* path and query: "/a/b?c" */
	uint32_t target_len;
	const char *path_end; /* end of the path part of target (before '?') */
	const char *host;   /* the authority: Host, or the absolute-form's */
	uint32_t host_len;

	enum http_body_kind body; /* the framing */
	uint64_t content_length;  /* with HTTP_BODY_LENGTH; or, with
	                           * length_info, a bodyless response's */
	unsigned keep_alive : 1;  /* the peer allows another message after this */
	unsigned expect_continue : 1;
	unsigned conn_upgrade : 1; /* Connection lists "upgrade" */
	unsigned length_info : 1;  /* a HEAD response's or a 304's
	                            * Content-Length: information, passed on */
	const struct hdr *upgrade; /* the one Upgrade header, NULL if none or several */
	size_t head_len;           /* bytes the head took on the wire */

	struct hlist hl;
};

/* An answer weir makes itself (an error, a refusal, a return or a
 * redirect), as the core hands it to a server codec's answer op
 * (worker/h1/h1.h): a status, its fields in the order HTTP/1 writes them
 * (Content-Length among them, and Connection, which only HTTP/1 carries:
 * HTTP/2 drops connection-specific fields) and a body. Nothing in it is
 * wire text: HTTP/1 writes the text, HTTP/2 submits HEADERS and DATA.
 * The fields point at the caller's bytes, and at <f> room for <cap>;
 * they need to last only until the op returns. */
struct answer_field {
	const char *name, *value;
	uint32_t name_len, value_len;
};
struct answer {
	int status;
	const char *reason;       /* HTTP/1's reason phrase; NULL: head_reason() */
	struct answer_field *f;   /* <n> fields, room for <cap> */
	uint32_t n, cap;
	const char *body;         /* HTTP/1 writes it as given; HTTP/2 never to a HEAD */
	uint32_t body_len;
	char length[24];          /* the Content-Length value answer_length() wrote */
};

/* Adds field <name> (a NUL-ended literal) with value <v>[0..vlen) to <a>;
 * 0, or -1 when <a> has no room left (the field is not added). */
static inline int answer_add(struct answer *a, const char *name, const char *v, size_t vlen)
{
	if (a->n == a->cap)
		return -1;
	a->f[a->n++] = (struct answer_field){name, v, (uint32_t)__builtin_strlen(name), (uint32_t)vlen};
	return 0;
}

/* Adds "Content-Length: <len>" to <a> where it stands in the order;
 * 0 or -1 as answer_add(). */
int answer_length(struct answer *a, uint64_t len);

/* Adds the fields of <p>[0..n), whole "Name: value\r\n" lines weir wrote
 * itself (forward auth's picks of its service's answer, kept so for the
 * upstream's head too), to <a>; 0, or -1 when they do not all fit. */
int answer_lines(struct answer *a, const char *p, size_t n);

#endif
