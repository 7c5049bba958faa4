#include "master/listen.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/affinity.h"
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

/*
 * The reuseport program of a listener's group: the CPU that received the
 * SYN picks the socket of the worker pinned there. The group's sockets are
 * indexed in the order they joined it, which is the worker order: opened
 * 0..n-1, a slot added by a reload appended, and a shrink closes from the
 * end. A CPU no worker runs on returns an index past the group, for which
 * the kernel falls back to its hash.
 */
static int listen_steer_group(int fd, int nworkers)
{
	struct sock_filter code[2 + 2 * CONFIG_MAX_WORKERS];
	int n = 0, seen[CONFIG_MAX_WORKERS];
	struct sock_fprog prog;

	code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_CPU));
	for (int w = 0; w < nworkers; w++) {
		int cpu = affinity_cpu_of(w), dup = 0;

		seen[w] = cpu;
		for (int k = 0; k < w; k++)
			dup |= seen[k] == cpu;
		if (cpu < 0 || dup) /* more workers than CPUs: the first on a CPU takes it */
			continue;
		code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)cpu, 0, 1);
		code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (uint32_t)w);
	}
	code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, UINT32_MAX);
	prog.len = (unsigned short)n;
	prog.filter = code;
	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog);
}

void listen_apply(struct listen_set *ls, const struct config *cfg)
{
	int steer = affinity_on(cfg) && cfg->reuseport_steering == CONFIG_STEER_CPU;

	for (int l = 0; l < ls->nlisteners; l++) {
		const struct config_listener *cl = &cfg->listeners[l];
		/* TCP_DEFER_ACCEPT counts seconds: round up */
		int tfo = cl->tcp_fastopen, defer = (int)((cl->defer_accept + 999) / 1000), zero = 0;

		for (int w = 0; w < ls->nworkers; w++) {
			int fd = ls->fds[l][w];

			if (fd < 0)
				continue;
			/* a kernel without TFO or a value it refuses: say so once a
			 * listener, and serve without */
			if (setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &tfo, sizeof tfo) < 0 && tfo && w == 0)
				log_error("%s: cannot set tcp_fastopen: %s", cl->addr.text, strerror(errno));
			if (setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer) < 0 && defer && w == 0)
				log_error("%s: cannot set defer_accept: %s", cl->addr.text, strerror(errno));
		}
		if (ls->fds[l][0] < 0)
			continue;
		/* once per group, after all its sockets exist; again after a
		 * reload, whose group or CPUs may differ */
		if (steer && listen_steer_group(ls->fds[l][0], ls->nworkers) < 0) {
			log_error("%s: cannot steer connections by CPU: %s", cl->addr.text, strerror(errno));
			steer = 0;
		}
		if (!steer && setsockopt(ls->fds[l][0], SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof zero) < 0 &&
		    errno != ENOENT)
			log_error("%s: cannot detach the reuseport program: %s", cl->addr.text, strerror(errno));
	}
	if (steer)
		log_info("listeners steer connections to the worker on the receiving CPU");
}
