/*
 * config_hash.h: the keys of an upstream group balanced by a hash
 * (`balance = "ring_hash"` or `"maglev"`): what a request is hashed by,
 * what a request without it gets, and the bounded-load factor. Read by
 * common/config_file_hash.c, tables built by shm/route_hash.c, picks made
 * by worker/up/balance_hash.c.
 */
#ifndef WEIR_COMMON_CONFIG_HASH_H
#define WEIR_COMMON_CONFIG_HASH_H

#include <stddef.h>
#include <stdint.h>

struct config;

/* hash_key's kinds: the rate limits' part kinds (enum config_rl_part,
 * config.h) where they share one, so that one helper reads both
 * (worker/core/core.h: ratelimit_part_value), and the path */
#define CONFIG_HASH_CLIENT_IP 0 /* CONFIG_RL_CLIENT_IP */
#define CONFIG_HASH_HEADER    1 /* CONFIG_RL_HEADER */
#define CONFIG_HASH_COOKIE    2 /* CONFIG_RL_COOKIE */
#define CONFIG_HASH_QUERY     3 /* CONFIG_RL_QUERY */
#define CONFIG_HASH_PATH      16

/* hash_fallback, for a request without its key; config_keys.c names them
 * in this order */
enum config_hash_fallback {
	CONFIG_HASH_FALLBACK_RANDOM = 0, /* a random point of the table */
	CONFIG_HASH_FALLBACK_RR,         /* the group's smooth weighted round robin */
	CONFIG_HASH_FALLBACK_CLIENT_IP,  /* the client address's point */
};

struct config_hash {
	int kind;         /* CONFIG_HASH_* */
	uint8_t name_len; /* of name */
	char name[64];    /* the header, cookie or query parameter; CONFIG_NAME_MAX */
	int fallback;     /* enum config_hash_fallback */
	/* bounded_load, in hundredths (125 for 1.25): no server takes more
	 * than that share of the mean in flight; 0: off */
	uint32_t bounded_load;
};

/* common/config_file_hash.c: hash_key, hash_fallback and bounded_load of
 * an upstreams entry (config_keys.c's store() and show() for them; show()
 * gives NULL, so weir -T leaves them out, in a group on another balance) */
const char *config_store_hash_key(const char *text, void *upstream);
const char *config_show_hash_key(const struct config *cfg, const void *upstream, char *buf, size_t cap);
const char *config_store_hash_fallback(const char *text, void *upstream);
const char *config_show_hash_fallback(const struct config *cfg, const void *upstream, char *buf, size_t cap);
const char *config_store_bounded_load(const char *text, void *upstream);
const char *config_show_bounded_load(const struct config *cfg, const void *upstream, char *buf, size_t cap);

/* The rules across these keys and `balance`, with FILE:LINE, for upstreams
 * entry <e> read into <u> (common/config_file.c: load_upstreams). */
struct loader;
struct config_setting_t;
struct config_upstream;
void config_hash_check(struct loader *ld, const struct config_setting_t *e, const struct config_upstream *u);

#endif
