/*
 * unit_config.h: for suites that load configurations from real files.
 * Each text goes to its own file in a temporary folder made by the suite's
 * init and removed by its clean; a config that does not load fails the
 * test with the loader's messages.
 */
#ifndef WEIR_TESTS_UNIT_CONFIG_H
#define WEIR_TESTS_UNIT_CONFIG_H

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/config.h"

static char unit_config_dir[] = "/tmp/weir-unit-config-XXXXXX";
static int unit_config_files;

static int unit_config_init(void)
{
	return mkdtemp(unit_config_dir) ? 0 : -1;
}

static int unit_config_clean(void)
{
	char p[300];

	for (int i = 0; i < unit_config_files; i++) {
		snprintf(p, sizeof p, "%s/%d.conf", unit_config_dir, i);
		unlink(p);
	}
	return rmdir(unit_config_dir);
}

/* Writes <text> to a new file of the suite's folder; returns its path
 * (valid until the next call). */
static const char *unit_config_write(const char *text)
{
	static char path[300];
	FILE *f;

	snprintf(path, sizeof path, "%s/%d.conf", unit_config_dir, unit_config_files++);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static struct config *unit_config_load(const char *text)
{
	static struct config_errors errs;
	struct config *cfg = calloc(1, sizeof(*cfg));

	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	if (config_load(unit_config_write(text), cfg, &errs) != 0) {
		for (int i = 0; i < errs.count && i < CONFIG_MAX_ERRORS; i++)
			fprintf(stderr, "\n    %s", errs.msg[i]);
		CU_FAIL_FATAL("config did not load");
	}
	return cfg;
}

static void unit_config_free(struct config *cfg)
{
	config_free(cfg);
	free(cfg);
}

#endif
