#include "master/upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "shm/limit.h"

#define UPGRADE_MAGIC 0x55505752u /* "UPWR" */
#define UPGRADE_BATCH 200         /* fds per message, under SCM_MAX_FD (253) */

/* One message: a header and up to UPGRADE_BATCH labels, with their fds. */
struct upgrade_label {
	struct config_addr addr;
	int32_t index; /* worker slot; -1 stats, -2 shared segment, -3 unix stats
	                * socket (addr.sa holds its sockaddr_un: the message
	                * format is the same as before that kind existed) */
};

struct upgrade_msg {
	uint32_t magic;
	uint32_t count; /* labels in this message */
	uint32_t last;  /* 1 on the final message */
	struct upgrade_label labels[UPGRADE_BATCH];
};

static int upgrade_send_batch(int sock, struct upgrade_msg *msg, const int *fds, int last)
{
	char cbuf[CMSG_SPACE(sizeof(int) * UPGRADE_BATCH)];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	msg->magic = UPGRADE_MAGIC;
	msg->last = (uint32_t)last;
	memset(cbuf, 0, sizeof(cbuf));
	if (msg->count) {
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * msg->count);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * msg->count);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * msg->count);
	}
	return sendmsg(sock, &mh, 0) == (ssize_t)sizeof(*msg) ? 0 : -1;
}

struct upgrade_out {
	int sock;
	int rc;
	struct upgrade_msg *msg;
	int fds[UPGRADE_BATCH];
};

static void upgrade_add(struct upgrade_out *o, const struct config_addr *addr, int index, int fd)
{
	if (o->msg->count == UPGRADE_BATCH) {
		o->rc |= upgrade_send_batch(o->sock, o->msg, o->fds, 0);
		o->msg->count = 0;
	}
	o->msg->labels[o->msg->count].addr = *addr;
	o->msg->labels[o->msg->count].index = index;
	o->fds[o->msg->count++] = fd;
}

static int upgrade_send_all(int sock, const struct listen_set *ls, const struct config *cfg, int stats_fd,
                            int stats_unix_fd, int shm_fd)
{
	struct upgrade_out o = {.sock = sock, .msg = calloc(1, sizeof(struct upgrade_msg))};
	static const struct config_addr none;

	if (!o.msg)
		return -1;
	upgrade_add(&o, &none, -2, shm_fd);
	if (limit_seg_fd >= 0)
		upgrade_add(&o, &none, -4, limit_seg_fd);
	if (stats_fd >= 0)
		upgrade_add(&o, &cfg->stats, -1, stats_fd);
	if (stats_unix_fd >= 0) {
		struct config_addr ua = {0};

		ua.len = sizeof(ua.sa);
		if (getsockname(stats_unix_fd, (struct sockaddr *)&ua.sa, &ua.len) == 0 && ua.sa.ss_family == AF_UNIX)
			upgrade_add(&o, &ua, -3, stats_unix_fd);
	}
	for (int l = 0; l < ls->nlisteners; l++)
		for (int w = 0; w < ls->nworkers; w++)
			if (ls->fds[l][w] >= 0)
				upgrade_add(&o, &cfg->listeners[l].addr, w, ls->fds[l][w]);
	o.rc |= upgrade_send_batch(sock, o.msg, o.fds, 1);
	free(o.msg);
	return o.rc;
}

int upgrade_start(const char *exe, char *const argv[], const struct listen_set *ls, const struct config *cfg,
                  int stats_fd, int stats_unix_fd, int shm_fd, pid_t *pid)
{
	int sv[2];
	char env[32];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_error("upgrade: socketpair: %s", strerror(errno));
		return -1;
	}
	*pid = fork();
	if (*pid < 0) {
		log_error("upgrade: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (*pid == 0) {
		/* only the channel crosses exec; the sockets come through it */
		int fd = fcntl(sv[1], F_DUPFD, 3);
		snprintf(env, sizeof(env), "%d", fd);
		setenv(UPGRADE_ENV, env, 1);
		execv(exe, argv);
		fprintf(stderr, "weir: upgrade: cannot execute %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	if (upgrade_send_all(sv[0], ls, cfg, stats_fd, stats_unix_fd, shm_fd) < 0) {
		int e = errno;

		log_error("upgrade: cannot hand the sockets to the new master: %s", strerror(e));
		close(sv[0]);
		errno = e; /* the caller tells an early exit from the rest */
		return -1;
	}
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	return sv[0];
}

int upgrade_receive(struct upgrade_inherit *inh)
{
	const char *env = getenv(UPGRADE_ENV);
	struct upgrade_msg *msg;
	int sock, last = 0;

	memset(inh, 0, sizeof(*inh));
	inh->shm_fd = inh->stats_fd = inh->stats_unix_fd = inh->limit_fd = -1;
	if (!env)
		return -1;
	sock = atoi(env);
	unsetenv(UPGRADE_ENV);
	fcntl(sock, F_SETFD, FD_CLOEXEC);
	msg = malloc(sizeof(*msg));
	if (!msg)
		return -1;
	while (!last) {
		char cbuf[CMSG_SPACE(sizeof(int) * UPGRADE_BATCH)];
		struct iovec iov = {.iov_base = msg, .iov_len = sizeof(*msg)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm;
		int *fds = NULL;

		/* one message per datagram (SEQPACKET keeps each with its fds); the old
		 * master wrote them all before we ran: this never waits */
		if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*msg) ||
		    msg->magic != UPGRADE_MAGIC || msg->count > UPGRADE_BATCH) {
			log_error("upgrade: bad hand-over message from the old master");
			free(msg);
			close(sock);
			return -1;
		}
		cm = CMSG_FIRSTHDR(&mh);
		if (msg->count) {
			if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int) * msg->count)) {
				log_error("upgrade: hand-over message without its sockets");
				free(msg);
				close(sock);
				return -1;
			}
			fds = (int *)CMSG_DATA(cm);
		}
		for (uint32_t i = 0; i < msg->count; i++) {
			const struct upgrade_label *lb = &msg->labels[i];

			if (lb->index == -2) {
				inh->shm_fd = fds[i];
			} else if (lb->index == -4) {
				inh->limit_fd = fds[i];
			} else if (lb->index == -1) {
				inh->stats_fd = fds[i];
				inh->stats_addr = lb->addr;
			} else if (lb->index == -3) {
				const struct sockaddr_un *sun = (const struct sockaddr_un *)&lb->addr.sa;

				inh->stats_unix_fd = fds[i];
				snprintf(inh->stats_unix_path, sizeof(inh->stats_unix_path), "%.*s",
				         (int)strnlen(sun->sun_path, sizeof(sun->sun_path)), sun->sun_path);
			} else if (inh->n < (int)(sizeof(inh->socks) / sizeof(inh->socks[0]))) {
				inh->socks[inh->n].addr = lb->addr;
				inh->socks[inh->n].index = lb->index;
				inh->socks[inh->n].fd = fds[i];
				inh->n++;
			} else {
				close(fds[i]);
			}
		}
		last = (int)msg->last;
	}
	free(msg);
	return sock;
}

void upgrade_ready(int fd)
{
	if (write(fd, "ready", 5) != 5)
		log_error("upgrade: cannot tell the old master we are ready: %s", strerror(errno));
	close(fd);
}

int upgrade_adopt_listeners(struct listen_set *ls, const struct config *cfg, struct upgrade_inherit *inh)
{
	listen_set_init(ls, cfg);
	for (int l = 0; l < cfg->nlisteners; l++) {
		const struct config_addr *a = &cfg->listeners[l].addr;

		for (int w = 0; w < cfg->workers; w++) {
			for (int k = 0; k < inh->n && ls->fds[l][w] < 0; k++) {
				if (inh->socks[k].fd >= 0 && inh->socks[k].index == w && listen_same_addr(&inh->socks[k].addr, a)) {
					ls->fds[l][w] = inh->socks[k].fd;
					inh->socks[k].fd = -1;
				}
			}
			if (ls->fds[l][w] >= 0)
				continue;
			ls->fds[l][w] = listen_socket(a, cfg->listeners[l].backlog, 1);
			if (ls->fds[l][w] < 0) {
				log_error("cannot listen on %s: %s", a->text, strerror(errno));
				listen_close(ls);
				return -1;
			}
		}
	}
	for (int k = 0; k < inh->n; k++)
		if (inh->socks[k].fd >= 0) {
			close(inh->socks[k].fd);
			inh->socks[k].fd = -1;
		}
	return 0;
}
