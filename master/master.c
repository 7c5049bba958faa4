#include "master/master.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/process.h"
#include "master/adaptive.h"
#include "master/health.h"
#include "master/listen.h"
#include "master/metrics.h"
#include "master/logfiles.h"
#include "master/notify.h"
#include "master/stats.h"
#include "master/upgrade.h"
#include "shm/limit.h"
#include "shm/route.h"
#include "shm/shm.h"
#include "shm/ticket.h"

/* A worker that dies younger than this counts as failing to start; the
 * master waits before replacing it, doubling the wait each time. */
#define RESPAWN_YOUNG 2.0
#define RESPAWN_MIN_DELAY 0.1
#define RESPAWN_MAX_DELAY 10.0
/* Old workers get their own drain timeout plus this before SIGKILL. */
#define DRAIN_GRACE 2.0
#define MAX_OLD_WORKERS SHM_SLOTS

struct master_worker {
	pid_t pid;       /* 0 when not running */
	int slot;        /* counter slot in the segment */
	ev_tstamp started;
	double delay;    /* next respawn delay after a young death */
	ev_timer respawn;
};

/* How long a draining worker may take: its drain, or its tunnels' drain
 * if longer (worker.c keeps tunnels past timeouts.drain), plus the grace. */
static double master_drain_bound(const struct config *cfg)
{
	uint32_t ms = cfg->timeouts.drain > cfg->timeouts.tunnel_drain ? cfg->timeouts.drain : cfg->timeouts.tunnel_drain;

	return ms / 1000.0 + DRAIN_GRACE;
}

/* A worker of an earlier configuration, draining after a reload. */
struct old_worker {
	pid_t pid;
	int slot;
	ev_tstamp kill_at;
};

static struct {
	struct ev_loop *loop;
	struct config *cfg;
	struct shm_segment *seg;
	int shm_fd;
	struct listen_set ls;
	struct master_worker workers[CONFIG_MAX_WORKERS];
	struct old_worker old[MAX_OLD_WORKERS];
	ev_signal sig_quit, sig_term, sig_int, sig_hup, sig_usr1, sig_usr2;
	ev_child child;
	ev_timer stop_timer;
	ev_timer tick;
	int stopping; /* 0 running, 1 graceful, 2 fast */
	int reload_waiting; /* a reload waits for a route generation a draining
	                     * worker still holds (master_reload_deferred) */
	int exit_code;

	pid_t pid;          /* ours, for workers to notice an early death */
	char exe[4096];     /* the binary we were started from, for USR2 */
	char *const *argv;
	pid_t upgrade_pid;  /* new master being started, 0 if none */
	int upgraded;       /* a new master took over: leave its pid file */
	ev_io upgrade_io;   /* its "ready" */
	ev_timer upgrade_timer;
} m;

static void master_upgrade_failed(const char *why);
static void master_upgrade_end(void);
static void master_stop(int how);
static int master_reload(void);
static void master_raise_nofile(const struct config *cfg);

/* A worker serves clients as the configured user, never as root; the
 * master keeps root for binding and reloads. Failing to drop is fatal for
 * the worker: better no worker than a root one. */
static void master_drop_privileges(void)
{
	const struct config *cfg = m.cfg;

	if (!cfg->user[0] || geteuid() != 0)
		return;
	if (setgroups(0, NULL) < 0 || initgroups(cfg->user, (gid_t)cfg->gid) < 0 || setgid((gid_t)cfg->gid) < 0 ||
	    setuid((uid_t)cfg->uid) < 0) {
		log_error("cannot switch to user %s: %s", cfg->user, strerror(errno));
		_exit(WORKER_EXIT_STARTUP);
	}
}

/* In a new child: stop the master's watchers and sockets on the loop. */
static void master_forget_loop(void)
{
	ev_signal_stop(m.loop, &m.sig_quit);
	ev_signal_stop(m.loop, &m.sig_term);
	ev_signal_stop(m.loop, &m.sig_int);
	ev_signal_stop(m.loop, &m.sig_hup);
	ev_signal_stop(m.loop, &m.sig_usr1);
	ev_signal_stop(m.loop, &m.sig_usr2);
	ev_child_stop(m.loop, &m.child);
	ev_timer_stop(m.loop, &m.stop_timer);
	ev_timer_stop(m.loop, &m.tick);
	for (int i = 0; i < CONFIG_MAX_WORKERS; i++)
		ev_timer_stop(m.loop, &m.workers[i].respawn);
	master_upgrade_end();
	redis_sync_forget();
	adaptive_forget();
	stats_close(m.loop, 0); /* the socket file is the master's, not ours to remove */
	health_in_child();
	ev_loop_fork(m.loop);
}

/* In the health prober just forked (master/health.h): what a worker gives
 * up, and the listeners too; it dies with the master. */
static void master_in_prober(void)
{
	master_forget_loop();
	listen_close(&m.ls);
	close(m.shm_fd);
	master_drop_privileges();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != m.pid)
		_exit(0);
}

/* In a new worker process: drop everything that is the master's. */
static void master_in_child(int index, struct worker_start *ws)
{
	master_forget_loop();

	memset(ws, 0, sizeof(*ws));
	ws->cfg = m.cfg;
	ws->seg = m.seg;
	ws->slot = m.workers[index].slot;
	ws->index = index;
	ws->nlisten = m.ls.nlisteners;
	for (int l = 0; l < m.ls.nlisteners; l++) {
		ws->listen_fds[l] = m.ls.fds[l][index];
		m.ls.fds[l][index] = -1; /* keep ours out of the close below */
	}
	listen_close(&m.ls);
	close(m.shm_fd);
	close(limit_seg_fd); /* the mapping is inherited; the fd is for upgrades */
	master_drop_privileges();
	/* a worker whose master is gone has nobody to reload or replace it:
	 * it drains and exits rather than serve an old config forever */
	prctl(PR_SET_PDEATHSIG, SIGQUIT);
	if (getppid() != m.pid)
		_exit(0);
}

static void master_respawn_later(struct master_worker *w)
{
	ev_timer_set(&w->respawn, w->delay, 0);
	ev_timer_start(m.loop, &w->respawn);
}

static void master_spawn(int index)
{
	struct master_worker *w = &m.workers[index];
	struct worker_start ws;
	int slot = shm_slot_claim(m.seg);
	pid_t pid;

	if (slot < 0) {
		/* every slot is held by draining workers: try again soon */
		log_error("no free worker slot in the shared segment for worker %d; retrying", index);
		w->delay = RESPAWN_MIN_DELAY * 10;
		master_respawn_later(w);
		return;
	}
	w->slot = slot;
	log_flush();
	pid = fork();
	if (pid < 0) {
		log_error("cannot fork worker %d: %s", index, strerror(errno));
		atomic_store(&m.seg->slots[slot].state, SHM_SLOT_FREE);
		w->delay = w->delay ? w->delay : RESPAWN_MIN_DELAY;
		master_respawn_later(w);
		return;
	}
	if (pid == 0) {
		master_in_child(index, &ws);
		_exit(worker_main(&ws));
	}
	atomic_store(&m.seg->slots[slot].pid, (int32_t)pid);
	w->pid = pid;
	w->started = ev_now(m.loop);
	log_info("worker %d started, pid %d", index, (int)pid);
}

static void master_respawn_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	if (!m.stopping)
		master_spawn((int)(intptr_t)t->data);
}

static int master_workers_running(void)
{
	int n = 0;
	for (int i = 0; i < CONFIG_MAX_WORKERS; i++)
		n += m.workers[i].pid != 0;
	for (int i = 0; i < MAX_OLD_WORKERS; i++)
		n += m.old[i].pid != 0;
	return n;
}

static void master_signal_workers(int sig)
{
	for (int i = 0; i < CONFIG_MAX_WORKERS; i++)
		if (m.workers[i].pid)
			kill(m.workers[i].pid, sig);
	for (int i = 0; i < MAX_OLD_WORKERS; i++)
		if (m.old[i].pid)
			kill(m.old[i].pid, sig);
}

/* An old worker exited: nothing to replace, its counters are folded in. */
static int master_old_exited(pid_t pid)
{
	for (int i = 0; i < MAX_OLD_WORKERS; i++) {
		if (m.old[i].pid != pid)
			continue;
		shm_slot_retire(m.seg, m.old[i].slot);
		m.old[i].pid = 0;
		log_info("old worker (pid %d) finished draining", (int)pid);
		return 1;
	}
	return 0;
}

static void master_child_cb(struct ev_loop *loop, ev_child *c, int revents)
{
	int index = -1, status = c->rstatus;
	(void)revents;

	if (health_child_exited(c->rpid, status))
		return;
	if (m.upgrade_pid && c->rpid == m.upgrade_pid) {
		char why[96];

		if (WIFSIGNALED(status))
			snprintf(why, sizeof(why), "the new binary was killed by signal %d before it was ready",
			         WTERMSIG(status));
		else
			snprintf(why, sizeof(why), "the new binary exited with code %d before it was ready%s",
			         WEXITSTATUS(status), WEXITSTATUS(status) == 1 ? " (its configuration check failed?)" : "");
		master_upgrade_failed(why);
		return;
	}
	if (master_old_exited(c->rpid)) {
		if (m.stopping && master_workers_running() == 0)
			ev_break(loop, EVBREAK_ALL);
		else if (m.reload_waiting && !m.stopping && !m.upgrade_pid)
			master_reload(); /* its generation may be free now */
		return;
	}
	for (int i = 0; i < CONFIG_MAX_WORKERS; i++)
		if (m.workers[i].pid == c->rpid)
			index = i;
	if (index < 0)
		return;

	struct master_worker *w = &m.workers[index];
	ev_tstamp lived = ev_now(loop) - w->started;

	w->pid = 0;
	shm_slot_retire(m.seg, w->slot);
	if (m.stopping) {
		log_info("worker %d (pid %d) exited", index, (int)c->rpid);
		if (master_workers_running() == 0)
			ev_break(loop, EVBREAK_ALL);
		return;
	}
	if (index >= m.cfg->workers)
		return; /* a reload lowered the worker count meanwhile */
	if (WIFSIGNALED(status))
		log_error("worker %d (pid %d) was killed by signal %d (%s)%s; replacing it", index, (int)c->rpid,
		          WTERMSIG(status), strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
	else
		log_error("worker %d (pid %d) exited with code %d; replacing it", index, (int)c->rpid,
		          WEXITSTATUS(status));
	atomic_fetch_add(&m.seg->worker_restarts, 1);

	if (lived < RESPAWN_YOUNG) {
		w->delay = w->delay ? w->delay * 2 : RESPAWN_MIN_DELAY;
		if (w->delay > RESPAWN_MAX_DELAY)
			w->delay = RESPAWN_MAX_DELAY;
		log_warn("worker %d died %.1f s after start; waiting %.1f s before the next one", index, lived,
		         w->delay);
		master_respawn_later(w);
		return;
	}
	w->delay = 0;
	master_spawn(index);
}

/* Makes the first session ticket key, or the next one when
 * tls_ticket_rotate has passed since the last (the schedule lives in the
 * segment, so it carries over a binary upgrade). Workers pick it up at
 * their next handshake; the previous key still opens older tickets. */
static int master_rotate_ticket_key(void)
{
	int rc = ticket_keys_maybe_rotate(&m.seg->ticket, m.cfg->tls_ticket_rotate, (uint64_t)time(NULL));

	if (rc < 0)
		log_error("cannot make a session ticket key: RAND_bytes failed");
	else if (rc > 0)
		log_info("new session ticket key made (rotation every %u s)", m.cfg->tls_ticket_rotate / 1000);
	return rc;
}

/* Once a second: old workers past their drain bound are killed, and the
 * ticket key is rotated when due. */
static void master_tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)t;
	(void)revents;
	for (int i = 0; i < MAX_OLD_WORKERS; i++)
		if (m.old[i].pid && ev_now(loop) >= m.old[i].kill_at) {
			log_warn("old worker (pid %d) still running after its drain timeout; killing it", (int)m.old[i].pid);
			kill(m.old[i].pid, SIGKILL);
			m.old[i].kill_at = ev_now(loop) + 60;
		}
	master_rotate_ticket_key();
	log_flush(); /* what a slow log reader left pending, and held-back repeats */
}

static void master_stop_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	log_warn("workers still running after the drain timeout; killing them");
	master_signal_workers(SIGKILL);
}

static void master_stop(int how)
{
	double bound;

	if (m.stopping >= how)
		return;
	/* after an upgrade the new master is the service: it says nothing */
	if (!m.stopping && !m.upgraded)
		notify_send("STOPPING=1");
	m.stopping = how;
	health_stop();
	for (int i = 0; i < CONFIG_MAX_WORKERS; i++)
		ev_timer_stop(m.loop, &m.workers[i].respawn);
	/* after an upgrade the new master serves the same unix socket file */
	stats_close(m.loop, !m.upgraded);
	master_signal_workers(how == 1 ? SIGQUIT : SIGTERM);
	/* the workers bound their own drain; this is the backstop */
	bound = how == 1 ? master_drain_bound(m.cfg) : 5.0;
	ev_timer_stop(m.loop, &m.stop_timer);
	ev_timer_set(&m.stop_timer, bound, 0);
	ev_timer_start(m.loop, &m.stop_timer);
	if (master_workers_running() == 0)
		ev_break(m.loop, EVBREAK_ALL);
}

/* ---- reload ------------------------------------------------------------ */

static int master_reload_failed(const char *why)
{
	atomic_fetch_add(&m.seg->reloads_failed, 1);
	log_error("reload failed: %s; still serving with the previous configuration", why);
	return -1;
}

/*
 * Reloads faster than old workers drain can use up the route generations
 * (SHM_GENS) or the arena: each draining worker holds the one it serves.
 * That is no reason to refuse the reload: every draining worker is gone
 * within the drain bound, so the reload waits, and runs again (reading the
 * file as it is then) each time an old worker exits, until it fits. The
 * first wait is counted and logged; HUPs meanwhile join it. Returns 1.
 */
static int master_reload_deferred(const char *why)
{
	if (!m.reload_waiting) {
		atomic_fetch_add(&m.seg->reloads_deferred, 1);
		log_warn("reload waits: %s; it runs as an old worker exits (within timeouts.drain)", why);
	}
	m.reload_waiting = 1;
	return 1;
}

/* Moves the running workers to the old list and tells them to drain. */
static void master_retire_workers(const struct config *oldcfg)
{
	ev_tstamp kill_at = ev_now(m.loop) + master_drain_bound(oldcfg);

	for (int i = 0; i < CONFIG_MAX_WORKERS; i++) {
		struct master_worker *w = &m.workers[i];
		int k = 0;

		ev_timer_stop(m.loop, &w->respawn);
		w->delay = 0;
		if (!w->pid)
			continue;
		while (k < MAX_OLD_WORKERS && m.old[k].pid)
			k++;
		if (k == MAX_OLD_WORKERS) { /* cannot happen: slots bound it */
			kill(w->pid, SIGKILL);
		} else {
			m.old[k] = (struct old_worker){.pid = w->pid, .slot = w->slot, .kill_at = kill_at};
			atomic_store(&m.seg->slots[w->slot].state, SHM_SLOT_DRAINING);
			kill(w->pid, SIGQUIT);
		}
		w->pid = 0;
	}
}

/* Fewer workers: the sockets of the slots that go away are closed, and the
 * kernel resets what waits in their accept queues unless tcp_migrate_req
 * moves it to the sockets that stay. Say so when it would not. */
static void master_warn_shrink(int from, int to)
{
	char v = '0';
	int fd = open("/proc/sys/net/ipv4/tcp_migrate_req", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &v, 1) != 1)
			v = '0';
		close(fd);
	}
	if (v != '1')
		log_warn("workers %d -> %d: connections queued on the %d listening socket(s) closed now and not yet "
		         "accepted will be reset; set net.ipv4.tcp_migrate_req = 1 to have the kernel move them",
		         from, to, from - to);
}

static int master_reload_once(void);

/* A reload, as HUP asks, and again at each old worker's exit while one
 * waits: 0 done, -1 failed (the old configuration goes on), 1 waiting for
 * a draining worker to exit (master_reload_deferred). The service manager
 * hears READY here, once the reload has run, whichever way it went. */
static int master_reload(void)
{
	int rc = master_reload_once();

	if (rc <= 0) {
		notify_send(rc < 0 ? "READY=1\nSTATUS=serving; the last reload failed, see the error log"
		                   : "READY=1\nSTATUS=serving");
		m.reload_waiting = 0;
	}
	return rc;
}

/*
 * HUP: all or nothing. The new configuration is read and checked, its
 * sockets opened (reusing every socket whose address and slot stay, so no
 * accept queue is closed) and its routes published; only then do new
 * workers start, on those same sockets, and the old ones drain. Any
 * failure before that point leaves everything as it was.
 */
static int master_reload_once(void)
{
	struct config *ncfg = calloc(1, sizeof(*ncfg));
	struct config_errors *errs = calloc(1, sizeof(*errs));
	struct config *ocfg = m.cfg;
	struct listen_set nls;
	uint64_t gen;
	int gslot;

	if (!ncfg || !errs) {
		free(ncfg);
		free(errs);
		return master_reload_failed("out of memory");
	}
	if (config_load(ocfg->file, ncfg, errs) < 0) {
		int kept = errs->count < CONFIG_MAX_ERRORS ? errs->count : CONFIG_MAX_ERRORS;
		for (int i = 0; i < kept; i++)
			log_error("%s", errs->msg[i]);
		free(errs);
		free(ncfg);
		return master_reload_failed("the configuration is invalid");
	}
	free(errs);
	if (!ncfg->master_process) {
		config_free(ncfg);
		free(ncfg);
		return master_reload_failed("master_process cannot be turned off by a reload");
	}
	limit_reload(ncfg);
	gslot = route_prepare(m.seg, ncfg);
	if (gslot < 0) {
		config_free(ncfg);
		free(ncfg);
		return master_reload_deferred(gslot == -1 ? "every route generation is still in use by draining workers"
		                                          : "the route generation does not fit in the arena beside "
		                                            "those draining workers still use");
	}
	if (listen_reopen(&nls, ncfg, &m.ls, ocfg) < 0) {
		config_free(ncfg);
		free(ncfg);
		return master_reload_failed("a listener could not be opened");
	}
	gen = route_commit(m.seg, gslot);
	if (ncfg->workers < ocfg->workers)
		master_warn_shrink(ocfg->workers, ncfg->workers);

	/* committed: from here on nothing fails back */
	/* sockets whose address or path stay are kept (a scrape in progress
	 * goes on); a new one that cannot be opened is logged, not fatal */
	stats_configure(m.loop, ncfg, m.seg);
	redis_sync_configure(m.loop, ncfg);
	adaptive_configure(m.loop, ncfg, m.seg);
	metrics_set_certs(ncfg);
	if (logfiles_open(ncfg) < 0)
		log_error("reload: cannot open the new log files (%s); keeping the old ones", strerror(errno));
	master_retire_workers(ocfg);
	listen_close(&m.ls); /* what the new configuration did not take */
	m.ls = nls;
	listen_apply(&m.ls, ncfg); /* after the close: the groups are final */
	m.cfg = ncfg;
	master_raise_nofile(ncfg); /* more servers or connections: the new workers inherit it */
	/* once m.ls is the new set: the prober closes every listener it inherits */
	health_configure(m.seg, ncfg);
	health_start(m.loop, m.seg, ncfg, master_in_prober);
	for (int i = 0; i < ncfg->workers; i++)
		master_spawn(i);
	atomic_fetch_add(&m.seg->reloads_ok, 1);
	atomic_fetch_add(&m.seg->config_generation, 1);
	log_notice("reloaded %s: %d worker(s), %d listener(s), %d route(s), routes generation %llu", ncfg->file,
	           ncfg->workers, ncfg->nlisteners, ncfg->nroutes, (unsigned long long)gen);
	config_free(ocfg);
	free(ocfg);
	return 0;
}

/* ---- binary upgrade --------------------------------------------------- */

static void master_pid_path(char *buf, size_t len, const char *suffix)
{
	snprintf(buf, len, "%s%s", m.cfg->pid_file, suffix);
}

static void master_upgrade_end(void)
{
	ev_io_stop(m.loop, &m.upgrade_io);
	ev_timer_stop(m.loop, &m.upgrade_timer);
	if (m.upgrade_io.fd >= 0)
		close(m.upgrade_io.fd);
	m.upgrade_io.fd = -1;
}

static void master_upgrade_failed(const char *why)
{
	char old[4200];

	log_error("binary upgrade failed: %s; this master keeps serving", why);
	if (m.upgrade_pid && !m.upgraded)
		kill(m.upgrade_pid, SIGKILL);
	m.upgrade_pid = 0;
	master_upgrade_end();
	if (m.cfg->pid_file[0]) {
		master_pid_path(old, sizeof(old), ".oldbin");
		rename(old, m.cfg->pid_file);
	}
}

static void master_upgrade_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	char buf[8];
	ssize_t n = read(w->fd, buf, sizeof(buf));
	(void)loop;
	(void)revents;

	if (n < 0 && errno == EAGAIN)
		return;
	if (n == 0) {
		/* it is going away: its exit status will say why (the timer
		 * stays as the backstop) */
		ev_io_stop(loop, w);
		return;
	}
	if (n != 5 || memcmp(buf, "ready", 5) != 0) {
		master_upgrade_failed("the new master closed the channel without saying it was ready");
		return;
	}
	log_notice("new master (pid %d) is serving; draining our workers and exiting", (int)m.upgrade_pid);
	m.upgraded = 1;
	m.upgrade_pid = 0; /* its exit is no longer ours to watch */
	master_upgrade_end();
	master_stop(1);
}

static void master_upgrade_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	master_upgrade_failed("the new master did not say it was ready in time");
}

static void master_upgrade(void)
{
	char old[4200];
	pid_t pid = 0;
	int fd;

	if (m.upgrade_pid) {
		log_warn("USR2 received while an upgrade is under way; ignored");
		return;
	}
	log_notice("USR2 received: starting %s as the new master", m.exe);
	log_flush();
	fd = upgrade_start(m.exe, m.argv, &m.ls, m.cfg, stats_fd(STATS_TCP), stats_fd(STATS_UNIX), m.shm_fd, &pid);
	if (fd < 0) {
		/* a new binary that exits at once (one that cannot run) closes the
		 * channel before the hand-over: it failed like any other */
		int e = errno;

		if (pid > 0)
			kill(pid, SIGKILL); /* without its sockets it cannot serve */
		if (pid > 0 && (e == EPIPE || e == ECONNRESET))
			log_error("binary upgrade failed: the new master closed the channel before taking the sockets (it "
			          "exited at once); this master keeps serving");
		else
			log_error("binary upgrade failed: the new master could not be started or given the sockets; this "
			          "master keeps serving");
		return;
	}
	m.upgrade_pid = pid;
	if (m.cfg->pid_file[0]) {
		master_pid_path(old, sizeof(old), ".oldbin");
		rename(m.cfg->pid_file, old);
	}
	ev_io_init(&m.upgrade_io, master_upgrade_io_cb, fd, EV_READ);
	ev_io_start(m.loop, &m.upgrade_io);
	ev_timer_init(&m.upgrade_timer, master_upgrade_timeout_cb, UPGRADE_READY_TIMEOUT, 0);
	ev_timer_start(m.loop, &m.upgrade_timer);
}

static void master_signal_cb(struct ev_loop *loop, ev_signal *s, int revents)
{
	(void)loop;
	(void)revents;
	switch (s->signum) {
	case SIGQUIT:
		log_notice("QUIT received: stopping gracefully (drain bound %u ms)", m.cfg->timeouts.drain);
		master_stop(1);
		break;
	case SIGTERM:
	case SIGINT:
		log_notice("%s received: stopping now", s->signum == SIGTERM ? "TERM" : "INT");
		master_stop(2);
		break;
	case SIGUSR1:
		if (logfiles_reopen(m.cfg) < 0)
			log_error("cannot reopen the log files: %s", strerror(errno));
		else
			log_notice("USR1 received: log files reopened");
		master_signal_workers(SIGUSR1);
		health_signal(SIGUSR1);
		break;
	case SIGHUP:
		if (m.stopping || m.upgrade_pid) {
			log_warn("HUP received while %s; ignored", m.stopping ? "stopping" : "upgrading");
			break;
		}
		if (m.reload_waiting) {
			log_notice("HUP received: a reload already waits for a draining worker; it reads %s when it runs",
			           m.cfg->file);
			break;
		}
		log_notice("HUP received: reloading %s", m.cfg->file);
		{
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			notify_send("RELOADING=1\nMONOTONIC_USEC=%llu",
			            (unsigned long long)now.tv_sec * 1000000ull + (unsigned long long)now.tv_nsec / 1000);
		}
		if (master_reload() > 0) /* READY when it has run */
			notify_send("STATUS=serving; a reload waits for a draining worker to exit");
		break;
	case SIGUSR2:
		if (!m.stopping)
			master_upgrade();
		break;
	}
}

static int master_write_pid(const char *path)
{
	char buf[32];
	int fd, n;

	if (!path[0])
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	return close(fd);
}
/*
 * Descriptors a worker may hold at once, and so the open files limit we
 * ask for (workers inherit the master's):
 *  - each client connection, and one upstream connection in flight for it;
 *  - the idle upstream pools: keepalive connections per server of each
 *    group (per worker), which outlive the clients that made them;
 *  - the listening sockets (the master holds one per listener and worker
 *    slot, twice during a reload) and a fixed reserve for stdio, the two
 *    logs (and their reopened copies for a moment on USR1), the shared
 *    segment, the event loop's own descriptors, the stats sockets and
 *    their connections, and the certificate and CA files read at load.
 */
#define NOFILE_RESERVE 128

static rlim_t master_nofile_want(const struct config *cfg, rlim_t *pools, rlim_t *fixed)
{
	*pools = 0;
	for (int u = 0; u < cfg->nupstreams; u++)
		*pools += (rlim_t)cfg->upstreams[u].nservers * (rlim_t)(cfg->upstreams[u].keepalive > 0
		                                                             ? cfg->upstreams[u].keepalive
		                                                             : 0);
	*fixed = NOFILE_RESERVE + (rlim_t)cfg->nlisteners * (rlim_t)cfg->workers * 2;
	return (rlim_t)cfg->limits.connections * 2 + *pools + *fixed;
}

static void master_raise_nofile(const struct config *cfg)
{
	struct rlimit rl;
	rlim_t pools, fixed, want = master_nofile_want(cfg, &pools, &fixed), room;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur >= want) {
		log_info("open files limit raised to %llu: 2 x %u client connections and their upstreams, "
		         "%llu pooled upstream connections, %llu for listeners, logs and the rest",
		         (unsigned long long)rl.rlim_cur, cfg->limits.connections, (unsigned long long)pools,
		         (unsigned long long)fixed);
		return;
	}
	room = rl.rlim_cur > pools + fixed ? (rl.rlim_cur - pools - fixed) / 2 : 0;
	log_notice("open files limit is %llu (hard limit %llu), %llu wanted: with %llu for pooled upstream "
	           "connections and %llu for listeners, logs and the rest, a worker holds about %llu client "
	           "connections at most, not limits.connections = %u; past that it pauses accepting",
	           (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, (unsigned long long)want,
	           (unsigned long long)pools, (unsigned long long)fixed, (unsigned long long)room,
	           cfg->limits.connections);
}

/* master_process = false: the one worker runs here, on the same default
 * loop that also serves the stats socket; no supervision, no reload. */
static int master_run_single(void)
{
	struct worker_start ws = {.cfg = m.cfg, .seg = m.seg, .slot = 0, .index = 0};
	int rc;

	log_notice("master_process is off: serving from this process (pid %d), without supervision",
	           (int)getpid());
	atomic_store(&m.seg->slots[0].state, SHM_SLOT_RUNNING);
	atomic_store(&m.seg->slots[0].pid, (int32_t)getpid());
	ws.nlisten = m.ls.nlisteners;
	for (int l = 0; l < m.ls.nlisteners; l++) {
		ws.listen_fds[l] = m.ls.fds[l][0];
		m.ls.fds[l][0] = -1; /* the worker closes it when it stops accepting */
	}
	if (health_wanted(m.cfg))
		log_warn("master_process is off: no health checks are run (the prober is a child of the master)");
	notify_send("READY=1\nSTATUS=serving (master_process off)");
	rc = worker_main(&ws);
	ticket_keys_wipe(&m.seg->ticket);
	stats_close(m.loop, 1);
	if (m.cfg->pid_file[0])
		unlink(m.cfg->pid_file);
	listen_close(&m.ls);
	return rc;
}

int master_run(struct config *cfg, char *const argv[])
{
	struct upgrade_inherit *inh = calloc(1, sizeof(*inh));
	int upgrade_fd = inh ? upgrade_receive(inh) : -1;
	ssize_t n;

	m.cfg = cfg;
	m.argv = argv;
	m.pid = getpid();
	m.upgrade_io.fd = -1;
	n = readlink("/proc/self/exe", m.exe, sizeof(m.exe) - 1);
	if (n > 0)
		m.exe[n] = 0;
	m.loop = ev_default_loop(EVBACKEND_EPOLL | EVFLAG_NOENV);
	if (!m.loop) {
		log_error("cannot create the event loop");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	master_raise_nofile(cfg);
	if (cfg->user[0] && geteuid() != 0)
		log_warn("not started as root: user \"%s\" is ignored, workers run as uid %d", cfg->user,
		         (int)geteuid());

	if (upgrade_fd >= 0 && inh->shm_fd >= 0) {
		/* counters and route generations carry over from the old master */
		const char *why = NULL;

		m.shm_fd = inh->shm_fd;
		m.seg = shm_attach(inh->shm_fd, &why);
		if (!m.seg) {
			log_warn("upgrade: %s; starting a new segment (counters restart)", why);
			close(inh->shm_fd);
		} else {
			atomic_fetch_add(&m.seg->config_generation, 1);
		}
	}
	if (!m.seg) {
		m.seg = shm_create(&m.shm_fd);
		if (!m.seg) {
			log_error("cannot create the shared segment: %s", strerror(errno));
			return 1;
		}
		atomic_store(&m.seg->config_generation, 1);
	}
	if (master_rotate_ticket_key() < 0)
		return 1;
	if (limit_start(cfg, inh ? inh->limit_fd : -1) < 0)
		return 1;
	if (route_publish(m.seg, cfg) == 0) {
		log_error("cannot publish the routing table");
		return 1;
	}
	health_configure(m.seg, cfg);
	if (upgrade_fd >= 0 ? upgrade_adopt_listeners(&m.ls, cfg, inh) < 0 : listen_open(&m.ls, cfg) < 0)
		return 1;
	listen_apply(&m.ls, cfg);
	/* inherited stats sockets are served as they are; stats_configure()
	 * then keeps those this configuration still names and opens the rest */
	if (inh && inh->stats_fd >= 0)
		stats_adopt(m.loop, STATS_TCP, inh->stats_fd, inh->stats_addr.text, m.seg);
	if (inh && inh->stats_unix_fd >= 0)
		stats_adopt(m.loop, STATS_UNIX, inh->stats_unix_fd, inh->stats_unix_path, m.seg);
	free(inh);
	redis_sync_configure(m.loop, cfg);
	adaptive_configure(m.loop, cfg, m.seg);
	metrics_set_certs(cfg);
	if (stats_configure(m.loop, cfg, m.seg) < 0)
		return 1;
	if (master_write_pid(cfg->pid_file) < 0) {
		log_error("cannot write the pid file %s: %s", cfg->pid_file, strerror(errno));
		return 1;
	}
	if (!cfg->master_process)
		return master_run_single();

	ev_signal_init(&m.sig_quit, master_signal_cb, SIGQUIT);
	ev_signal_init(&m.sig_term, master_signal_cb, SIGTERM);
	ev_signal_init(&m.sig_int, master_signal_cb, SIGINT);
	ev_signal_init(&m.sig_hup, master_signal_cb, SIGHUP);
	ev_signal_init(&m.sig_usr1, master_signal_cb, SIGUSR1);
	ev_signal_init(&m.sig_usr2, master_signal_cb, SIGUSR2);
	ev_signal_start(m.loop, &m.sig_quit);
	ev_signal_start(m.loop, &m.sig_term);
	ev_signal_start(m.loop, &m.sig_int);
	ev_signal_start(m.loop, &m.sig_hup);
	ev_signal_start(m.loop, &m.sig_usr1);
	ev_signal_start(m.loop, &m.sig_usr2);
	ev_child_init(&m.child, master_child_cb, 0, 0);
	ev_child_start(m.loop, &m.child);
	ev_init(&m.stop_timer, master_stop_timeout_cb);
	ev_timer_init(&m.tick, master_tick_cb, 1.0, 1.0);
	ev_timer_start(m.loop, &m.tick);
	for (int i = 0; i < CONFIG_MAX_WORKERS; i++) {
		ev_init(&m.workers[i].respawn, master_respawn_cb);
		m.workers[i].respawn.data = (void *)(intptr_t)i;
	}

	for (int l = 0; l < cfg->nlisteners; l++)
		log_notice("listening on %s (%d sockets, one per worker)", cfg->listeners[l].addr.text, cfg->workers);
	if (cfg->has_stats)
		log_notice("stats on http://%s/metrics", cfg->stats.text);
	if (cfg->stats_unix[0])
		log_notice("stats on unix socket %s (mode %04o)", cfg->stats_unix, cfg->stats_mode);
	for (int i = 0; i < cfg->workers; i++)
		master_spawn(i);
	health_start(m.loop, m.seg, cfg, master_in_prober);
	if (upgrade_fd >= 0) {
		log_notice("binary upgrade: took over the sockets; telling the old master");
		/* before "ready": once told, the old master exits, and systemd
		 * must already know the service goes on in this process */
		notify_send("MAINPID=%d\nREADY=1\nSTATUS=serving (binary upgrade)", (int)getpid());
		upgrade_ready(upgrade_fd);
	} else {
		notify_send("READY=1\nSTATUS=serving");
	}

	ev_run(m.loop, 0);

	log_notice("stopped");
	log_flush();
	if (!m.upgraded)
		ticket_keys_wipe(&m.seg->ticket); /* the new master would still need them */
	if (m.cfg->pid_file[0]) {
		char old[4200];

		master_pid_path(old, sizeof(old), ".oldbin");
		unlink(m.upgraded ? old : m.cfg->pid_file);
	}
	listen_close(&m.ls);
	return m.exit_code;
}
