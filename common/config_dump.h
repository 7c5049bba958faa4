/*
 * config_dump.h: `weir -T`, the effective configuration as a libconfig file.
 *
 * Principle: print what the loader made, not what the file said. Every key
 * is written with its value in force (defaults filled in, "auto" workers
 * resolved, durations and sizes in their largest exact unit), in the order
 * and shape of etc/weir.conf, so that the output is a file `weir -t`
 * accepts and that loads to the same configuration again. Secrets are not
 * printed: stats.admin_token is replaced by a comment (a re-read copy then
 * has no token, which refuses remote admin commands rather than accept a
 * guessable one). Key files are named by path; no file's contents are ever
 * printed.
 *
 * It reads struct config only, and prints every scalar from its
 * descriptor (common/config_keys.c): a new key needs no line here. The
 * shape (which groups, which lists, in what order) is written out here;
 * tests/integration/test_config_dump.py fails for a key of etc/weir.conf
 * that -T omits.
 */
#ifndef WEIR_COMMON_CONFIG_DUMP_H
#define WEIR_COMMON_CONFIG_DUMP_H

#include <stdio.h>

#include "common/config.h"

/* Writes <cfg> to <out>. Returns 0, or -1 if a write failed. */
int config_dump(FILE *out, const struct config *cfg);

/* "90s", "2m", "250ms", "1h": <ms> in the largest unit that divides it. */
const char *config_dump_duration(uint32_t ms, char *buf, size_t cap);

/* "16k", "100m", "1g", "1000": <bytes> in the largest power of 1024 that
 * divides it. */
const char *config_dump_size(uint64_t bytes, char *buf, size_t cap);

/* For the dumps of groups kept in other files (common/config_auth.c):
 * <s> as a quoted libconfig string, and the scalar keys of <ks> in the
 * struct at <base>, one a line after <indent>, or all on the current line
 * when <indent> is NULL. */
void config_dump_string(FILE *out, const char *s);
struct config_keyset;
void config_dump_keys(FILE *out, const struct config *cfg, const struct config_keyset *ks, const void *base,
                      const char *indent);

/* common/config_compress.c: "compress = { ... };", the top level's on
 * lines of its own (<top>), a route's on its line. */
struct config_compress;
void config_compress_dump(FILE *out, const struct config *cfg, const struct config_compress *c, int top);

/* common/config_auth.c: "auth = { ... }; " of a route. */
struct config_auth;
void config_auth_dump(FILE *out, const struct config *cfg, const struct config_auth *a);

/* common/config_hdrrules.c: "headers = { ... }; " of a group or a route,
 * the rules of <own> less those it has from <inherit> (its group's). */
struct hdrrules_ref;
void config_hdrrules_dump(FILE *out, const struct config *cfg, const struct hdrrules_ref *own,
                          const struct hdrrules_ref *inherit);

#endif
