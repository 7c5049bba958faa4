/*
 * logfiles.h: the master opens the log files on behalf of `user`.
 *
 * Principle (nginx's): the workers reopen the logs by name on USR1, as
 * `user`, so the files must be that user's; the master, which is root,
 * makes sure they are before anyone opens them. It does so without
 * CAP_DAC_OVERRIDE (which weir.service does not grant): it opens and
 * creates the files with its filesystem uid and gid switched to the
 * user's (setfsuid(2), which needs only CAP_SETUID), so an existing file
 * of the user's opens with the user's rights and a missing one is created
 * as the user's. Only where the user cannot create the file (a directory
 * only root may write) does the master open it as itself and give it to
 * the user with fchown(2), as nginx does; that needs CAP_CHOWN, and
 * without it a warning says the workers will not be able to reopen it.
 *
 * Without `user`, or when weir was not started as root, these are
 * log_open() and log_reopen().
 */
#ifndef WEIR_MASTER_LOGFILES_H
#define WEIR_MASTER_LOGFILES_H

#include "common/config.h"

/* log_open(&cfg->log), with the files made <cfg>'s user's first. Returns
 * 0, or -1 with errno set and the old log files kept. */
int logfiles_open(const struct config *cfg);

/* log_reopen() (USR1), with the files of <cfg> made its user's first. */
int logfiles_reopen(const struct config *cfg);

#endif
