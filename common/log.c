#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum log_level log_level_min = LOG_LEVEL_INFO;

static struct {
	int error_fd;
	int access_fd; /* -1 when off */
	char error_path[4096];
	char access_path[4096];
	char who[32];
	char abuf[64 * 1024]; /* pending access lines */
	size_t alen;
	time_t cached_sec;
	char cached_time[32];
} lg = {.error_fd = 2, .access_fd = -1, .who = "weir"};

static int log_open_path(const char *path, int *fd)
{
	int nfd;

	if (strcmp(path, "stderr") == 0) {
		nfd = 2;
	} else if (strcmp(path, "off") == 0) {
		nfd = -1;
	} else {
		nfd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
		if (nfd < 0)
			return -1;
	}
	*fd = nfd;
	return 0;
}

int log_open(const struct config_log *cfg)
{
	int efd = 2, afd = -1;

	/* open both before changing anything, so a failure leaves the old ones */
	if (log_open_path(cfg->error_path, &efd) < 0)
		return -1;
	if (log_open_path(cfg->access_path, &afd) < 0) {
		int saved = errno;
		if (efd > 2)
			close(efd);
		errno = saved;
		return -1;
	}
	log_flush();
	if (lg.error_fd > 2)
		close(lg.error_fd);
	if (lg.access_fd > 2)
		close(lg.access_fd);
	lg.error_fd = efd < 0 ? 2 : efd;
	lg.access_fd = afd;
	snprintf(lg.error_path, sizeof(lg.error_path), "%s", cfg->error_path);
	snprintf(lg.access_path, sizeof(lg.access_path), "%s", cfg->access_path);
	log_level_min = cfg->level;
	return 0;
}

int log_reopen(void)
{
	struct config_log cfg;

	snprintf(cfg.error_path, sizeof(cfg.error_path), "%s", lg.error_path[0] ? lg.error_path : "stderr");
	snprintf(cfg.access_path, sizeof(cfg.access_path), "%s", lg.access_path[0] ? lg.access_path : "off");
	cfg.level = log_level_min;
	return log_open(&cfg);
}

void log_set_who(const char *who)
{
	snprintf(lg.who, sizeof(lg.who), "%s", who);
}

const char *log_time_iso(void)
{
	struct timeval tv;
	struct tm tm;

	gettimeofday(&tv, NULL);
	if (tv.tv_sec != lg.cached_sec) {
		lg.cached_sec = tv.tv_sec;
		gmtime_r(&tv.tv_sec, &tm);
		strftime(lg.cached_time, sizeof(lg.cached_time), "%Y-%m-%dT%H:%M:%S", &tm);
	}
	/* milliseconds change every call; the rest is cached */
	snprintf(lg.cached_time + 19, sizeof(lg.cached_time) - 19, ".%03dZ", (int)(tv.tv_usec / 1000));
	return lg.cached_time;
}

static void log_write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return; /* a log that cannot be written must not stop traffic */
		}
		p += n;
		len -= (size_t)n;
	}
}

void log_write(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	int n, m;
	va_list ap;

	if (level < log_level_min)
		return;
	n = snprintf(line, sizeof(line), "%s [%s] %s: ", log_time_iso(), config_log_level_name(level), lg.who);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	log_write_all(lg.error_fd, line, (size_t)n);
}

int log_access_enabled(void)
{
	return lg.access_fd >= 0;
}

void log_flush(void)
{
	if (lg.alen && lg.access_fd >= 0)
		log_write_all(lg.access_fd, lg.abuf, lg.alen);
	lg.alen = 0;
}

void log_access(const char *line, size_t len)
{
	if (lg.access_fd < 0)
		return;
	if (len + 1 > sizeof(lg.abuf) - lg.alen)
		log_flush();
	if (len + 1 > sizeof(lg.abuf)) {
		log_write_all(lg.access_fd, line, len);
		log_write_all(lg.access_fd, "\n", 1);
		return;
	}
	memcpy(lg.abuf + lg.alen, line, len);
	lg.alen += len;
	lg.abuf[lg.alen++] = '\n';
}

void log_escape(char *dst, size_t cap, const char *src, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		unsigned char ch = (unsigned char)src[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
			dst[o++] = (char)ch;
			continue;
		}
		if (o + 5 > cap)
			break;
		dst[o++] = '\\';
		dst[o++] = 'x';
		dst[o++] = hex[ch >> 4];
		dst[o++] = hex[ch & 15];
	}
	dst[o] = 0;
}
