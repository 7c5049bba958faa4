#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum log_level log_level_min = LOG_LEVEL_INFO;

#define LOG_EBUF_FLUSH (16 * 1024) /* pending error bytes that make a worker write at once */
#define LOG_SITE_RATE 10           /* lines per second and call site before "N more like this" */
#define LOG_SITES 64               /* call sites followed at once (a hash of the format's address) */

/* One format string's lines in the current second. */
struct log_site {
	const char *fmt;
	enum log_level level;
	struct timespec start;
	uint32_t lines;
	uint32_t suppressed;
};

static struct {
	int error_fd;
	int access_fd;    /* -1 when off */
	int error_sock;   /* the fds are sockets: send(MSG_DONTWAIT) */
	int access_sock;
	int deferred;     /* a worker: error lines are written from the loop */
	char error_path[4096];
	char access_path[4096];
	char who[32];
	char ebuf[64 * 1024]; /* pending error lines */
	size_t elen;
	char abuf[64 * 1024]; /* pending access lines */
	size_t alen;
	uint64_t dropped[LOG_DROP_COUNT];
	uint64_t lost_note; /* error lines dropped since the last note saying so */
	struct log_site sites[LOG_SITES];
	time_t cached_sec;
	char cached_time[32];
} lg = {.error_fd = 2, .access_fd = -1, .who = "weir"};

/*
 * A worker must never wait for its log's reader (a pipe, journald's
 * socket, a terminal). The open file description of stderr is shared with
 * whoever started us (a shell's terminal), so O_NONBLOCK is not set on it:
 * a pipe or terminal is opened anew through /proc/self/fd, which makes a
 * description of our own, and a socket is written with MSG_DONTWAIT. A
 * regular file cannot be made non-blocking: its writes are batched, one
 * per loop pass at most. Returns the fd to write to (<fd> itself, or a new
 * one, <fd> then untouched) and sets *sock.
 */
static int log_nonblocking(int fd, int *sock)
{
	struct stat sb;
	char path[64];
	int nfd;

	*sock = 0;
	if (fd < 0 || fstat(fd, &sb) < 0)
		return fd;
	if (S_ISSOCK(sb.st_mode)) {
		*sock = 1;
		return fd;
	}
	if (!S_ISFIFO(sb.st_mode) && !S_ISCHR(sb.st_mode))
		return fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	return nfd >= 0 ? nfd : fd;
}

static int log_open_path(const char *path, int *fd)
{
	int nfd;

	if (strcmp(path, "stderr") == 0) {
		nfd = 2;
	} else if (strcmp(path, "off") == 0 || strncmp(path, "syslog:", 7) == 0) {
		nfd = -1; /* a syslog socket is the worker's own (worker/accesslog.h) */
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
	log_flush_errors();
	if (lg.error_fd > 2)
		close(lg.error_fd);
	if (lg.access_fd > 2 && lg.access_fd != lg.error_fd)
		close(lg.access_fd);
	efd = efd < 0 ? 2 : efd;
	{
		int ne = log_nonblocking(efd, &lg.error_sock);
		int na = afd == efd ? ne : log_nonblocking(afd, &lg.access_sock);

		if (afd == efd)
			lg.access_sock = lg.error_sock;
		if (ne != efd && efd > 2)
			close(efd);
		if (na != afd && afd > 2)
			close(afd);
		lg.error_fd = ne;
		lg.access_fd = na;
	}
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

/* Writes what the descriptor takes now of [p, p+len): the bytes written.
 * A broken log (EPIPE, ENOSPC, EBADF) counts as written: a log that
 * cannot be written must not stop traffic. */
static size_t log_write_some(int fd, int sock, const char *p, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = sock ? send(fd, p + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL)
		                 : write(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return len;
		}
		done += (size_t)n;
	}
	return done;
}

/* Writes what it can of buffer <buf> holding *<len> bytes, keeping the rest
 * (lines stay whole and in order: the next write resumes mid-line). */
static void log_buf_write(int fd, int sock, char *buf, size_t *len)
{
	size_t n;

	if (!*len || fd < 0)
		return;
	n = log_write_some(fd, sock, buf, *len);
	if (n < *len)
		memmove(buf, buf + n, *len - n);
	*len -= n;
}

static void log_append_error(const char *line, size_t n);

/* The start of a line: "2026-11-30T05:40:00.123Z [warn] worker 1: ". */
static int log_prefix(char *line, size_t cap, enum log_level level)
{
	return snprintf(line, cap, "%s [%s] %s: ", log_time_iso(), config_log_level_name(level), lg.who);
}

static void log_note(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_note(enum log_level level, const char *fmt, ...)
{
	char line[512];
	int n = log_prefix(line, sizeof(line), level), m;
	va_list ap;

	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n += m < 0 ? 0 : m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	log_append_error(line, (size_t)n);
}

/* Appends one whole line to the pending error lines, or drops it (counted)
 * when they are full because the reader is not keeping up. */
static void log_append_error(const char *line, size_t n)
{
	if (n > sizeof(lg.ebuf) - lg.elen)
		log_buf_write(lg.error_fd, lg.error_sock, lg.ebuf, &lg.elen);
	if (n > sizeof(lg.ebuf) - lg.elen) {
		lg.dropped[LOG_DROP_ERROR]++;
		lg.lost_note++;
		return;
	}
	memcpy(lg.ebuf + lg.elen, line, n);
	lg.elen += n;
	if (!lg.deferred || lg.elen >= LOG_EBUF_FLUSH)
		log_flush_errors();
}

static double log_since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* Says how many lines of <site> were held back, and forgets them. */
static void log_site_report(struct log_site *site)
{
	char fmt[160];

	if (!site->suppressed)
		return;
	log_escape(fmt, sizeof(fmt), site->fmt, strlen(site->fmt));
	log_note(site->level, "... %u more like this in the last second: \"%s\"", site->suppressed, fmt);
	site->suppressed = 0;
}

/* Whether a line from format <fmt> may be written now: LOG_SITE_RATE lines
 * per second per call site, the rest counted and reported in one line. A
 * storm of 502s then costs a few lines a second, not one per request. */
static int log_site_admit(const char *fmt, enum log_level level)
{
	struct log_site *site = &lg.sites[((uintptr_t)fmt >> 3) % LOG_SITES];
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	if (site->fmt != fmt || log_since(&site->start, &now) >= 1.0) {
		log_site_report(site);
		site->fmt = fmt;
		site->level = level;
		site->start = now;
		site->lines = 0;
	}
	if (site->lines >= LOG_SITE_RATE) {
		site->suppressed++;
		lg.dropped[LOG_DROP_THROTTLED]++;
		return 0;
	}
	site->lines++;
	return 1;
}

void log_write(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	int n, m;
	va_list ap;

	if (level < log_level_min)
		return;
	/* only workers log per request; the master's lines (a reload's list
	 * of config errors, all "%s") are events an operator reads whole */
	if (lg.deferred && !log_site_admit(fmt, level))
		return;
	if (lg.lost_note && lg.elen + 256 < sizeof(lg.ebuf)) {
		uint64_t lost = lg.lost_note;

		lg.lost_note = 0;
		log_note(LOG_LEVEL_WARN, "%llu log line(s) dropped: the error log is not read fast enough",
		         (unsigned long long)lost);
	}
	n = log_prefix(line, sizeof(line), level);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	log_append_error(line, (size_t)n);
}

void log_flush_errors(void)
{
	log_buf_write(lg.error_fd, lg.error_sock, lg.ebuf, &lg.elen);
}

void log_set_deferred(void)
{
	/* what the master had not written yet is the master's to write */
	lg.deferred = 1;
	lg.elen = 0;
	lg.alen = 0;
	lg.lost_note = 0;
	memset(lg.dropped, 0, sizeof(lg.dropped));
	memset(lg.sites, 0, sizeof(lg.sites));
}

uint64_t log_dropped(enum log_drop kind)
{
	return lg.dropped[kind];
}

int log_access_enabled(void)
{
	return lg.access_fd >= 0;
}

void log_flush_held(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	for (int i = 0; i < LOG_SITES; i++)
		if (lg.sites[i].suppressed && log_since(&lg.sites[i].start, &now) >= 1.0)
			log_site_report(&lg.sites[i]);
	log_flush_errors();
}

void log_flush_access(void)
{
	log_buf_write(lg.access_fd, lg.access_sock, lg.abuf, &lg.alen);
}

void log_flush(void)
{
	log_flush_held();
	log_flush_access();
}

void log_access(const char *line, size_t len)
{
	if (lg.access_fd < 0)
		return;
	if (len + 1 > sizeof(lg.abuf) - lg.alen)
		log_buf_write(lg.access_fd, lg.access_sock, lg.abuf, &lg.alen);
	if (len + 1 > sizeof(lg.abuf) - lg.alen) {
		/* the reader is not keeping up (or the line is huge): drop it
		 * rather than wait; lines already buffered stay whole */
		lg.dropped[LOG_DROP_ACCESS]++;
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
