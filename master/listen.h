/*
 * listen.h: the master's listening sockets.
 *
 * Principle: with SO_REUSEPORT the master opens one socket per listener per
 * worker slot and keeps them all for its whole life. Worker i accepts only
 * on its socket i of each listener; when a worker is replaced (crash,
 * reload) the replacement gets the same socket, so the kernel's accept
 * queue for it is never closed and no connection is lost.
 */
#ifndef WEIR_MASTER_LISTEN_H
#define WEIR_MASTER_LISTEN_H

#include <string.h>

#include "common/config.h"

struct listen_set {
	int fds[CONFIG_MAX_LISTENERS][CONFIG_MAX_WORKERS]; /* -1 when not open */
	int nlisteners;
	int nworkers;
};

/* An empty set (every socket -1) shaped for <cfg>: open, reopen and the
 * binary upgrade fill it. */
void listen_set_init(struct listen_set *ls, const struct config *cfg);

/* Whether two listener addresses are the same socket address. */
static inline int listen_same_addr(const struct config_addr *a, const struct config_addr *b)
{
	return a->len == b->len && memcmp(&a->sa, &b->sa, a->len) == 0;
}

/* Binds cfg->nlisteners x cfg->workers sockets. Returns 0, or -1 after
 * logging which address failed and why (everything opened is closed). */
int listen_open(struct listen_set *ls, const struct config *cfg);

/*
 * For a reload: fills <ls> for <cfg>, taking from <old> (the sockets of
 * <oldcfg>) every socket whose address and worker slot are still wanted,
 * so their accept queues carry over, and binding only what is new. Taken
 * sockets are set to -1 in <old>; what is left there is no longer wanted.
 * Returns 0, or -1 (logged) with <old> restored as it was.
 */
int listen_reopen(struct listen_set *ls, const struct config *cfg, struct listen_set *old,
                  const struct config *oldcfg);

void listen_close(struct listen_set *ls);

/* Applies <cfg>'s socket options to every socket of <ls> (tcp_fastopen,
 * defer_accept) and attaches or detaches each group's CPU steering
 * program; run after open, reload and upgrade. What the kernel refuses is
 * logged and served without. */
void listen_apply(struct listen_set *ls, const struct config *cfg);

/* Opens one non-blocking TCP listening socket on <addr>; -1 with errno.
 * <reuseport> sets SO_REUSEPORT. Also used by the stats socket. */
int listen_socket(const struct config_addr *addr, int backlog, int reuseport);

#endif
