/*
 * log.h: the error log and the access log.
 *
 * Principle: one error log with levels and one access log, each a file path
 * or "stderr", opened in the master and inherited by the workers, reopened
 * by everyone on USR1 (logrotate moves the file, we open the path anew).
 * A process never blocks on its logs: a pipe, socket or terminal is
 * written without blocking (log_open makes a non-blocking descriptor of
 * its own), and lines wait in a per-process buffer (64 KiB for each log)
 * for the reader; what does not fit is dropped and counted (log_dropped,
 * weir_log_dropped_total). Error lines are written at once in the master;
 * a worker calls log_set_deferred() and writes them from its loop, once
 * per pass (log_flush_errors) or when 16 KiB are pending. In a worker,
 * more than 10 lines a second from one call site (one format string) are
 * held back and summed up as "... N more like this". Access lines are gathered and
 * written when the buffer fills or when log_flush_access() is called (a
 * worker does so every log.access_flush, or at the end of each loop pass
 * when that is off, and on exit), so a busy worker spends one system call
 * on many requests.
 *
 * Line shape: "2026-11-30T05:40:00.123Z [warn] worker 1: message".
 */
#ifndef WEIR_COMMON_LOG_H
#define WEIR_COMMON_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

/* Opens the logs named in <cfg>. <who> names this process in every line
 * ("master", "worker 3"). Returns 0, or -1 with errno if a file cannot be
 * opened (the previous files, if any, stay open). */
int log_open(const struct config_log *cfg);

/* Sets the name this process writes in front of its messages. */
void log_set_who(const char *who);

/* Reopens the same paths (USR1). */
int log_reopen(void);

extern enum log_level log_level_min;

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) do { if (log_level_min <= LOG_LEVEL_DEBUG) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...) do { if (log_level_min <= LOG_LEVEL_INFO) log_write(LOG_LEVEL_INFO, __VA_ARGS__); } while (0)
#define log_notice(...) do { if (log_level_min <= LOG_LEVEL_NOTICE) log_write(LOG_LEVEL_NOTICE, __VA_ARGS__); } while (0)
#define log_warn(...) do { if (log_level_min <= LOG_LEVEL_WARN) log_write(LOG_LEVEL_WARN, __VA_ARGS__); } while (0)
#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)

/* Copies <len> bytes of <src> into <dst> (at most <cap> - 1, NUL-ended)
 * with '"', '\\' and bytes outside printable ASCII written as \xHH, as
 * nginx does, so a logged request target cannot forge fields or lines. */
void log_escape(char *dst, size_t cap, const char *src, size_t len);

/* Access log: is it on, and append one line (without the newline). */
int log_access_enabled(void);
void log_access(const char *line, size_t len);

/* Writes what the logs' readers take now of the pending lines (both logs),
 * and reports call sites held back in the last second. */
void log_flush(void);

/* log_flush() but for the access lines, which a worker writes on a clock
 * of their own (log.access_flush). */
void log_flush_held(void);

/* Writes what the access log's reader takes now of the pending lines:
 * cheap when none are pending. */
void log_flush_access(void);

/* Writes what the error log's reader takes now of the pending error lines:
 * cheap when none are pending (a worker calls it on every loop pass). */
void log_flush_errors(void);

/* In a worker: error lines wait for log_flush_errors() (or 16 KiB), and
 * what the master had pending at fork is forgotten. */
void log_set_deferred(void);

/* Lines not written since this process started (or log_set_deferred). */
enum log_drop {
	LOG_DROP_THROTTLED, /* error lines held back by the per-call-site rate */
	LOG_DROP_ERROR,     /* error lines the reader did not take in time */
	LOG_DROP_ACCESS,    /* access lines the reader did not take in time */
	LOG_DROP_COUNT
};
uint64_t log_dropped(enum log_drop kind);

/* The current time as "2026-11-30T05:40:00.123Z" (24 bytes plus NUL),
 * from a per-second cache. */
const char *log_time_iso(void);

#endif
