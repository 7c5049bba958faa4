/*
 * accesslog.h: the access log line of a request, in the format log.format
 * names, to the output log.access names.
 *
 * Principle: one line per request, written once it ends (or is cut),
 * never blocking. Formats: "weir" (the default, the line weir has always
 * written, so existing parsers keep working), "combined" (nginx's, byte
 * for byte: $remote_addr - $remote_user [$time_local] "$request" $status
 * $body_bytes_sent "$http_referer" "$http_user_agent", values escaped as
 * nginx's default escape), "json" (one object a line, every string escaped
 * as JSON, control bytes and bytes of no UTF-8 sequence as \u00XX), or a
 * format of variables (common/vars.h) escaped as nginx does. A value is
 * cut at 2 KiB; a line that would pass 16 KiB is written with values cut
 * at 128 bytes, so a hostile header cannot make a JSON line invalid.
 *
 * Outputs: the buffered log of common/log.h (a file or stderr), or
 * "syslog:/path", a unix datagram socket (such as /dev/log): one datagram
 * per line, "<190>Mmm dd hh:mm:ss weir[pid]: line" (local7.info, as
 * nginx's default), sent with MSG_DONTWAIT to the path each time (a
 * restarted syslog daemon is found again); a datagram the socket does not
 * take at once is dropped and counted as
 * weir_errors_total{kind="syslog_dropped"}.
 *
 * Per route, log = false writes no line and log_sample = "0.1" one for
 * about that share of requests (drawn from the worker's generator).
 * Answers to requests without a route (404, a malformed head) are always
 * written.
 */
#ifndef WEIR_WORKER_ACCESSLOG_H
#define WEIR_WORKER_ACCESSLOG_H

#include "common/config.h"

struct conn;
struct txn;

/* Worker start: compiles log.format, opens the syslog socket. Returns 0
 * or -1 (logged). */
int accesslog_init(const struct config *cfg);

/* Writes the line of <t> (NULL: no request parsed) on <c>, answered
 * <status>. */
void accesslog_write(struct conn *c, struct txn *t, int status);

#endif
