#include "master/logfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

static int logfiles_for_user(const struct config *cfg)
{
	return cfg->user[0] && geteuid() == 0;
}

/* Opens and creates files as <cfg>'s user from here on (this process's
 * other rights are untouched); logfiles_as_master() switches back. */
static void logfiles_as_user(const struct config *cfg)
{
	setfsgid((gid_t)cfg->gid);
	setfsuid((uid_t)cfg->uid);
}

static void logfiles_as_master(void)
{
	int saved = errno;

	setfsuid(geteuid());
	setfsgid(getegid());
	errno = saved;
}

static int logfiles_open_path(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

/* Makes <path> a file of <cfg>'s user, creating it if it is missing. A
 * failure here is not the caller's: log_open() then reports it. */
static void logfiles_give(const struct config *cfg, const char *path)
{
	struct stat st;
	int fd;

	if (strcmp(path, "stderr") == 0 || strcmp(path, "off") == 0)
		return;
	logfiles_as_user(cfg);
	fd = logfiles_open_path(path);
	logfiles_as_master();
	if (fd >= 0) {
		close(fd);
		return;
	}
	/* the user may not write the directory, or the file is someone
	 * else's: open it as the master, and hand it over (the group stays) */
	fd = logfiles_open_path(path);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_uid != (uid_t)cfg->uid && fchown(fd, (uid_t)cfg->uid, (gid_t)-1) < 0)
		log_warn("log file %s belongs to uid %d and cannot be given to user %s (%s): the workers will not be "
		         "able to reopen it on USR1",
		         path, (int)st.st_uid, cfg->user, strerror(errno));
	close(fd);
}

/* Runs <op> with the user's rights, and again with the master's if that
 * fails (a directory the user cannot search: the master's own files). */
static int logfiles_run(const struct config *cfg, int (*op)(const struct config *))
{
	int rc;

	if (!logfiles_for_user(cfg))
		return op(cfg);
	logfiles_give(cfg, cfg->log.error_path);
	logfiles_give(cfg, cfg->log.access_path);
	logfiles_as_user(cfg);
	rc = op(cfg);
	logfiles_as_master();
	return rc < 0 ? op(cfg) : rc;
}

static int logfiles_do_open(const struct config *cfg)
{
	return log_open(&cfg->log);
}

static int logfiles_do_reopen(const struct config *cfg)
{
	(void)cfg;
	return log_reopen();
}

int logfiles_open(const struct config *cfg)
{
	return logfiles_run(cfg, logfiles_do_open);
}

int logfiles_reopen(const struct config *cfg)
{
	return logfiles_run(cfg, logfiles_do_reopen);
}
