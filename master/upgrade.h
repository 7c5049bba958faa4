/*
 * upgrade.h: binary upgrade (USR2) without closing a listening socket.
 *
 * Principle: the old master starts the new binary (the path it was started
 * from, so a package that replaced the file is what runs) with one end of a
 * unix socketpair, and sends it every listening socket, the stats socket
 * and the shared segment's memfd with SCM_RIGHTS, each socket labelled
 * with its address and worker slot. The new master adopts what its own
 * configuration still wants, starts its workers on those sockets, and only
 * then writes "ready" back. Only on "ready" does the old master drain its
 * workers and exit; if the new binary exits or stays silent, the old master
 * carries on as if nothing happened.
 */
#ifndef WEIR_MASTER_UPGRADE_H
#define WEIR_MASTER_UPGRADE_H

#include <sys/types.h>

#include "common/config.h"
#include "master/listen.h"

#define UPGRADE_ENV "WEIR_UPGRADE_FD"
#define UPGRADE_READY_TIMEOUT 30.0

/* What the new master inherits. */
struct upgrade_inherit {
	int shm_fd; /* -1 if none */
	int limit_fd; /* the rate-limit segment (shm/limit.h), -1 if none */
	int stats_fd;
	struct config_addr stats_addr;
	int stats_unix_fd; /* -1 if none */
	char stats_unix_path[108];
	int n;
	struct {
		struct config_addr addr;
		int index; /* worker slot */
		int fd;
	} socks[CONFIG_MAX_LISTENERS * CONFIG_MAX_WORKERS];
};

/* Old master: starts <exe> with <argv> and sends it the sockets of <ls>
 * (for <cfg>), the stats sockets <stats_fd> (TCP) and <stats_unix_fd>
 * (-1 if none) and <shm_fd>. Returns the socket on which "ready" will
 * arrive and sets *pid, or -1 (logged). */
int upgrade_start(const char *exe, char *const argv[], const struct listen_set *ls, const struct config *cfg,
                  int stats_fd, int stats_unix_fd, int shm_fd, pid_t *pid);

/* New master: receives what the old one sent on the fd named by
 * $WEIR_UPGRADE_FD. Returns the channel fd (for upgrade_ready) or -1. */
int upgrade_receive(struct upgrade_inherit *inh);

/* New master: says it serves; closes <fd>. */
void upgrade_ready(int fd);

/* New master: builds <ls> for <cfg> from the inherited sockets, binding
 * only what is new; inherited sockets nobody wants are closed. */
int upgrade_adopt_listeners(struct listen_set *ls, const struct config *cfg, struct upgrade_inherit *inh);

#endif
