/*
 * fuzz_config.c: the config loader (common/config_file.c, through libconfig),
 * as `weir -t` runs it on a file. A config is trusted, but a broken one
 * must give errors with FILE:LINE, never a crash.
 *
 * The input is written to a memfd and loaded by its /proc/self/fd path, so
 * config_load() runs unchanged. Files the config names (certificates, CA
 * files, includes) are looked up relative to the working directory, where
 * none exist: the loader's error paths for them run too.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/err.h>

#include "common/config.h"
#include "tests/fuzz/fuzz.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg;
	static struct config_errors errs;
	int rc;

	if (fd < 0) {
		fd = memfd_create("weir-fuzz.conf", 0);
		FUZZ_CHECK(fd >= 0);
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	FUZZ_CHECK(ftruncate(fd, 0) == 0);
	FUZZ_CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
	rc = config_load(path, &cfg, &errs);
	if (rc == 0) {
		FUZZ_CHECK(errs.count == 0 && cfg.file);
		config_free(&cfg);
	} else {
		FUZZ_CHECK(rc == -1 && errs.count > 0);
		/* every kept message names the file */
		for (int i = 0; i < errs.count && i < CONFIG_MAX_ERRORS; i++)
			FUZZ_CHECK(strncmp(errs.msg[i], path, strlen(path)) == 0);
	}
	/* a certificate that failed to load leaves BoringSSL's error queue
	 * allocated; emptied here, as weir -t exits, so that libFuzzer's leak
	 * check sees each input's own allocations balance */
	ERR_clear_error();
	return 0;
}
