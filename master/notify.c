/*
 * notify.c: the sd_notify protocol without libsystemd (see notify.h).
 */
#include "master/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"

void notify_send(const char *fmt, ...)
{
	static int warned;
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t plen;
	socklen_t alen;
	char msg[512];
	va_list ap;
	int fd, n;

	if (!path || !path[0])
		return;
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sa.sun_path)) {
		if (!warned++)
			log_info("NOTIFY_SOCKET is not a unix socket path (%s); not notifying", path);
		return;
	}
	memcpy(sa.sun_path, path, plen);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract: the name has no terminating 0 */
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + (path[0] == '/'));

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(msg))
		return;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	/* MSG_DONTWAIT: the master's loop never waits on the service manager */
	if (sendto(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sa, alen) < 0 && !warned++)
		log_info("cannot notify the service manager at %s: %s", path, strerror(errno));
	close(fd);
}
