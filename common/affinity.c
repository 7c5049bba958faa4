#include "common/affinity.h"

#include <errno.h>
#include <sched.h>
#include <unistd.h>

int affinity_on(const struct config *cfg)
{
	if (cfg->worker_cpu_affinity == CONFIG_AFFINITY_AUTO)
		return cfg->workers == (int)sysconf(_SC_NPROCESSORS_ONLN);
	return cfg->worker_cpu_affinity == CONFIG_AFFINITY_ON;
}

int affinity_cpu_of(int index)
{
	cpu_set_t set;
	int n, k = 0;

	if (sched_getaffinity(0, sizeof set, &set) < 0 || (n = CPU_COUNT(&set)) == 0)
		return -1;
	index %= n;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set) && k++ == index)
			return cpu;
	return -1;
}

int affinity_pin(int index, int *cpu)
{
	cpu_set_t set;

	if ((*cpu = affinity_cpu_of(index)) < 0) {
		errno = errno ? errno : EINVAL;
		return -1;
	}
	CPU_ZERO(&set);
	CPU_SET(*cpu, &set);
	return sched_setaffinity(0, sizeof set, &set);
}
