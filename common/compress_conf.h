/*
 * compress_conf.h: response compression as configured (compress = { ... }
 * at the top level and on routes), and the closed sets its counters are
 * kept by: the encodings and the reasons a response goes out as it came.
 * The worker's side is worker/core/compress.h.
 */
#ifndef WEIR_COMMON_COMPRESS_CONF_H
#define WEIR_COMMON_COMPRESS_CONF_H

#include <stdint.h>

#define COMPRESS_TYPES_MAX 1024 /* the types of one block, space-separated, with the NUL */

/* The encodings weir writes, in the order it prefers them. */
#define COMPRESS_ENC_TABLE(X) \
	X(BR, "br")           \
	X(GZIP, "gzip")
enum compress_enc {
#define COMPRESS_ENC_ENUM(name, text) COMPRESS_##name,
	COMPRESS_ENC_TABLE(COMPRESS_ENC_ENUM)
#undef COMPRESS_ENC_ENUM
	COMPRESS_ENC_COUNT
};

/* Why a response on a route with compression went out uncompressed
 * (weir_compress_skipped_total{reason}), in the order they are judged. */
#define COMPRESS_SKIP_TABLE(X)                                                  \
	X(NO_BODY, "no_body")           /* HEAD, 1xx, 204, 304, an empty body */ \
	X(ENCODED, "encoded")           /* the upstream sent Content-Encoding */ \
	X(RANGE, "range")               /* 206 or a Content-Range */             \
	X(NO_TRANSFORM, "no_transform") /* Cache-Control: no-transform */        \
	X(TYPE, "type")                 /* Content-Type not listed */            \
	X(TOO_SMALL, "too_small")       /* Content-Length under min_length */    \
	X(NOT_ACCEPTED, "not_accepted") /* the client accepts neither encoding */ \
	X(BUSY, "busy")                 /* compress.max_streams under way */     \
	X(NO_MEMORY, "no_memory")       /* compress.memory or buffers spent */
enum compress_skip {
#define COMPRESS_SKIP_ENUM(name, text) COMPRESS_SKIP_##name,
	COMPRESS_SKIP_TABLE(COMPRESS_SKIP_ENUM)
#undef COMPRESS_SKIP_ENUM
	COMPRESS_SKIP_COUNT
};

/* One compress block, resolved: a route's keys over the global block's,
 * over the defaults. */
struct config_compress {
	int on;             /* a block applies and lists at least one type */
	int own;            /* a route's: it has a block of its own */
	char types[COMPRESS_TYPES_MAX]; /* lower case, space-separated: "text/html image/svg+xml" */
	uint64_t min_length; /* bytes: a known length under it is sent as it is */
	uint32_t gzip_level;   /* 1..9 */
	uint32_t brotli_level; /* 0..11 */
	/* the top level's only: per worker */
	uint32_t max_streams; /* responses compressed at once */
	uint64_t memory;      /* bytes of encoder state, over all of them */
	int line;
};

#endif
