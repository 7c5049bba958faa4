#include "master/listen.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

int listen_socket(const struct config_addr *addr, int backlog, int reuseport)
{
	int one = 1;
	int fd = socket(addr->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto fail;
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	if (addr->sa.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, (const struct sockaddr *)&addr->sa, addr->len) < 0)
		goto fail;
	if (listen(fd, backlog) < 0)
		goto fail;
	return fd;
fail: {
	int saved = errno;
	close(fd);
	errno = saved;
	return -1;
}
}

void listen_set_init(struct listen_set *ls, const struct config *cfg)
{
	memset(ls->fds, -1, sizeof(ls->fds));
	ls->nlisteners = cfg->nlisteners;
	ls->nworkers = cfg->workers;
}

int listen_open(struct listen_set *ls, const struct config *cfg)
{
	listen_set_init(ls, cfg);
	for (int l = 0; l < cfg->nlisteners; l++) {
		const struct config_listener *cl = &cfg->listeners[l];

		for (int w = 0; w < cfg->workers; w++) {
			ls->fds[l][w] = listen_socket(&cl->addr, cl->backlog, 1);
			if (ls->fds[l][w] < 0) {
				log_error("cannot listen on %s: %s", cl->addr.text, strerror(errno));
				listen_close(ls);
				return -1;
			}
		}
	}
	return 0;
}

/* Index of the listener of <cfg> on <addr>, or -1. */
static int listen_find(const struct config *cfg, const struct config_addr *addr)
{
	for (int k = 0; k < cfg->nlisteners; k++)
		if (listen_same_addr(&cfg->listeners[k].addr, addr))
			return k;
	return -1;
}

int listen_reopen(struct listen_set *ls, const struct config *cfg, struct listen_set *old,
                  const struct config *oldcfg)
{
	listen_set_init(ls, cfg);
	for (int l = 0; l < cfg->nlisteners; l++) {
		const struct config_listener *cl = &cfg->listeners[l];
		int ol = listen_find(oldcfg, &cl->addr);
		for (int w = 0; w < cfg->workers; w++) {
			if (ol >= 0 && w < CONFIG_MAX_WORKERS && old->fds[ol][w] >= 0) {
				ls->fds[l][w] = old->fds[ol][w];
				old->fds[ol][w] = -1;
				/* a new backlog applies to a listening socket at once */
				if (cl->backlog != oldcfg->listeners[ol].backlog)
					listen(ls->fds[l][w], cl->backlog);
				continue;
			}
			ls->fds[l][w] = listen_socket(&cl->addr, cl->backlog, 1);
			if (ls->fds[l][w] < 0) {
				log_error("reload: cannot listen on %s: %s", cl->addr.text, strerror(errno));
				goto undo;
			}
		}
	}
	return 0;
undo:
	/* give back what was taken, close what was opened */
	for (int l = 0; l < cfg->nlisteners; l++) {
		const struct config_listener *cl = &cfg->listeners[l];
		int ol = listen_find(oldcfg, &cl->addr);
		for (int w = 0; w < cfg->workers; w++) {
			if (ls->fds[l][w] < 0)
				continue;
			if (ol >= 0 && old->fds[ol][w] < 0 && w < oldcfg->workers)
				old->fds[ol][w] = ls->fds[l][w];
			else
				close(ls->fds[l][w]);
			ls->fds[l][w] = -1;
		}
	}
	return -1;
}

void listen_close(struct listen_set *ls)
{
	for (int l = 0; l < CONFIG_MAX_LISTENERS; l++)
		for (int w = 0; w < CONFIG_MAX_WORKERS; w++)
			if (ls->fds[l][w] >= 0) {
				close(ls->fds[l][w]);
				ls->fds[l][w] = -1;
			}
}
