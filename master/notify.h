/*
 * notify.h: telling the service manager what the master is doing.
 *
 * systemd's readiness protocol (sd_notify(3)): one datagram of
 * "KEY=value" lines to the unix socket named by $NOTIFY_SOCKET (a path, or
 * an abstract name written "@name"). Spoken directly rather than through
 * libsystemd: it is a sendto(2), and weir then runs the same with or
 * without systemd. Without the variable every call does nothing.
 *
 * What weir says: READY=1 once the workers are started; RELOADING=1 when a
 * HUP begins and READY=1 when it has ended (well or not); STOPPING=1 on
 * QUIT or TERM; and after a binary upgrade the new master says
 * MAINPID=<its pid> before the old one exits, so that systemd follows the
 * upgrade instead of thinking the service died (the unit then needs
 * NotifyAccess=all: the new master is not the main process yet).
 */
#ifndef WEIR_MASTER_NOTIFY_H
#define WEIR_MASTER_NOTIFY_H

/* Sends the lines of <fmt> (printf-style; "\n" between them) in one
 * datagram. Never blocks; a failure is logged once at info level and
 * otherwise ignored. */
void notify_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
