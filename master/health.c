/*
 * health.c: the master's side of the health prober (master/health.h):
 * the words a configuration starts with, and the prober's process.
 */
#include "master/health.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "shm/route.h"
#include "shm/shm.h"

#define HEALTH_RESPAWN_YOUNG 2.0
#define HEALTH_RESPAWN_MIN   0.1
#define HEALTH_RESPAWN_MAX   10.0

static struct {
	struct ev_loop *loop;
	struct shm_segment *seg;
	const struct config *cfg;
	void (*in_child)(void);
	pid_t pid;
	ev_tstamp started;
	double delay;
	int stopping;
	ev_timer respawn;
} hm;

int health_wanted(const struct config *cfg)
{
	for (int i = 0; i < cfg->nupstreams; i++)
		if (cfg->upstreams[i].health.type)
			return 1;
	return 0;
}

static const struct config_upstream *health_group(const struct config *cfg, const char *name)
{
	for (int i = 0; i < cfg->nupstreams; i++)
		if (strcmp(cfg->upstreams[i].name, name) == 0)
			return &cfg->upstreams[i];
	return NULL;
}

void health_configure(struct shm_segment *seg, const struct config *cfg)
{
	const struct route_table *t = &seg->gens[atomic_load_explicit(&seg->gen_current, memory_order_acquire)];
	uint8_t checked[STAT_SERVERS] = {0};

	for (uint32_t i = 0; i < t->nservers; i++) {
		const struct route_server *rs = &route_servers(t)[i];
		const struct config_upstream *cu = health_group(cfg, route_upstreams(t)[rs->upstream].name);
		uint32_t fresh;

		if (!cu || !cu->health.type || rs->stat == STAT_SERVER_OTHER)
			continue;
		checked[rs->stat] = 1;
		/* up, with a run one short of fall: the first failure takes it out */
		fresh = HEALTH_WORD(HEALTH_UP, HEALTH_RESULT_NONE, cu->health.fall - 1, 0);
		if (!atomic_load_explicit(&seg->health.word[rs->stat], memory_order_relaxed))
			atomic_store_explicit(&seg->health.word[rs->stat], fresh, memory_order_relaxed);
	}
	for (int k = 0; k < STAT_SERVERS; k++)
		if (!checked[k] && atomic_load_explicit(&seg->health.word[k], memory_order_relaxed))
			atomic_store_explicit(&seg->health.word[k], 0, memory_order_relaxed);
}

static void health_spawn(void)
{
	pid_t pid;

	log_flush();
	pid = fork();
	if (pid < 0) {
		log_error("cannot fork the health prober: %s; trying again", strerror(errno));
		hm.delay = hm.delay ? hm.delay : HEALTH_RESPAWN_MIN;
		ev_timer_set(&hm.respawn, hm.delay, 0);
		ev_timer_start(hm.loop, &hm.respawn);
		return;
	}
	if (pid == 0) {
		hm.in_child(); /* health_in_child() included */
		_exit(health_probe_main(hm.loop, hm.seg, hm.cfg));
	}
	hm.pid = pid;
	hm.started = ev_now(hm.loop);
}

static void health_respawn_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	if (!hm.stopping && !hm.pid && hm.cfg && health_wanted(hm.cfg))
		health_spawn();
}

void health_start(struct ev_loop *loop, struct shm_segment *seg, const struct config *cfg, void (*in_child)(void))
{
	if (!hm.loop)
		ev_init(&hm.respawn, health_respawn_cb);
	hm.loop = loop;
	hm.seg = seg;
	hm.cfg = cfg;
	hm.in_child = in_child;
	ev_timer_stop(loop, &hm.respawn);
	hm.delay = 0;
	if (hm.pid) {
		/* its exit is no longer ours to watch: health_child_exited()
		 * does not know its pid any more */
		kill(hm.pid, SIGTERM);
		hm.pid = 0;
	}
	if (health_wanted(cfg))
		health_spawn();
}

int health_child_exited(pid_t pid, int status)
{
	ev_tstamp lived;

	if (!pid || pid != hm.pid)
		return 0;
	hm.pid = 0;
	if (hm.stopping)
		return 1;
	lived = ev_now(hm.loop) - hm.started;
	if (WIFSIGNALED(status))
		log_error("health prober (pid %d) was killed by signal %d; replacing it", (int)pid, WTERMSIG(status));
	else
		log_error("health prober (pid %d) exited with code %d; replacing it", (int)pid, WEXITSTATUS(status));
	if (lived < HEALTH_RESPAWN_YOUNG) {
		hm.delay = hm.delay ? hm.delay * 2 : HEALTH_RESPAWN_MIN;
		if (hm.delay > HEALTH_RESPAWN_MAX)
			hm.delay = HEALTH_RESPAWN_MAX;
	} else {
		hm.delay = 0;
	}
	ev_timer_set(&hm.respawn, hm.delay, 0);
	ev_timer_start(hm.loop, &hm.respawn);
	return 1;
}

void health_signal(int sig)
{
	if (hm.pid)
		kill(hm.pid, sig);
}

void health_stop(void)
{
	hm.stopping = 1;
	if (hm.loop)
		ev_timer_stop(hm.loop, &hm.respawn);
	if (hm.pid)
		kill(hm.pid, SIGTERM);
}

void health_in_child(void)
{
	if (hm.loop)
		ev_timer_stop(hm.loop, &hm.respawn);
	hm.pid = 0;
}
