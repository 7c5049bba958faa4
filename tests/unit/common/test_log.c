/*
 * test_log.c: common/log: what an access log line may contain, and that a
 * log whose reader stalls never blocks the writer.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/unit/unit.h"

static void test_plain_text_is_copied(void)
{
	char out[64];

	log_escape(out, sizeof(out), "/a/b?c=d&e=%20", 14);
	CU_ASSERT_STRING_EQUAL(out, "/a/b?c=d&e=%20");
}

static void test_quotes_backslashes_and_controls_are_escaped(void)
{
	char out[64];

	log_escape(out, sizeof(out), "/\"x\\\n\x7f\xe9", 7);
	CU_ASSERT_STRING_EQUAL(out, "/\\x22x\\x5C\\x0A\\x7F\\xE9");
}

static void test_output_is_cut_at_an_escape_boundary(void)
{
	char out[8];

	/* "ab" fits, the escape of '"' (4 bytes) would not with the NUL */
	log_escape(out, 6, "ab\"cd", 5);
	CU_ASSERT_STRING_EQUAL(out, "ab");
	log_escape(out, sizeof(out), "abcdefghij", 10);
	CU_ASSERT_STRING_EQUAL(out, "abcdefg");
}

/* Points the error log at a pipe on fd 2 (the caller's stderr saved in
 * *saved); returns the pipe's read end, non-blocking. */
static int log_to_pipe(int *saved)
{
	struct config_log cfg = {.level = LOG_LEVEL_INFO};
	int p[2];

	CU_ASSERT_FATAL(pipe(p) == 0);
	*saved = dup(2);
	CU_ASSERT_FATAL(dup2(p[1], 2) == 2);
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	strcpy(cfg.error_path, "stderr");
	strcpy(cfg.access_path, "off");
	CU_ASSERT_FATAL(log_open(&cfg) == 0);
	return p[0];
}

static void log_unpipe(int rfd, int saved)
{
	struct config_log cfg = {.level = LOG_LEVEL_INFO};

	strcpy(cfg.error_path, "stderr");
	strcpy(cfg.access_path, "off");
	dup2(saved, 2);
	close(saved);
	log_open(&cfg); /* drops the descriptor it made of the pipe */
	close(rfd);
}

/* Reads what the pipe holds into <out> (NUL-ended); returns its length. */
static size_t drain(int rfd, char *out, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n + 1 < cap && (r = read(rfd, out + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = 0;
	return n;
}

static char got[512 * 1024];

static void test_a_stalled_reader_never_blocks_and_lines_stay_whole(void)
{
	static char fmts[200][1100];
	uint64_t dropped0 = log_dropped(LOG_DROP_ERROR);
	int saved, rfd = log_to_pipe(&saved);
	size_t n, total = 0;
	char *line;

	/* 200 call sites of 1 KiB lines: more than the pipe and the buffer */
	for (int i = 0; i < 200; i++) {
		snprintf(fmts[i], sizeof(fmts[i]), "site %d %%s ", i);
		memset(fmts[i] + strlen(fmts[i]), 'y', 1000);
		log_write(LOG_LEVEL_ERROR, fmts[i], "x"); /* returns: the pipe is full, nobody reads */
	}
	CU_ASSERT(log_dropped(LOG_DROP_ERROR) > dropped0);
	/* the reader comes back: what was kept arrives, in whole lines */
	for (int k = 0; k < 4; k++) {
		total += drain(rfd, got + total, sizeof(got) - total);
		log_flush();
	}
	log_error("after the stall");
	log_flush();
	n = drain(rfd, got + total, sizeof(got) - total);
	total += n;
	CU_ASSERT(total > 64 * 1024);
	CU_ASSERT(got[total - 1] == '\n');
	for (line = got; *line; line = strchr(line, '\n') + 1) {
		CU_ASSERT(strncmp(line, "20", 2) == 0 && line[10] == 'T'); /* each line starts with its time */
		if (strncmp(line, "20", 2) != 0)
			break;
	}
	CU_ASSERT(strstr(got, "log line(s) dropped: the error log is not read fast enough") != NULL);
	CU_ASSERT(strstr(got, "after the stall") != NULL);
	log_unpipe(rfd, saved);
}

static int count(const char *hay, const char *needle)
{
	int c = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		c++;
	return c;
}

static void test_repeats_from_one_call_site_are_summed_up(void)
{
	uint64_t held0 = log_dropped(LOG_DROP_THROTTLED);
	int saved, rfd = log_to_pipe(&saved);
	struct timespec pause = {1, 200 * 1000 * 1000};

	log_set_deferred(); /* as a worker: the master is not throttled */
	for (int i = 0; i < 100; i++)
		log_error("upstream %d refused", i);
	log_flush_errors(); /* what the worker's loop does after each pass */
	drain(rfd, got, sizeof(got));
	CU_ASSERT_EQUAL(count(got, " refused\n"), 10);
	CU_ASSERT_EQUAL(log_dropped(LOG_DROP_THROTTLED) - held0, 90);
	nanosleep(&pause, NULL);
	log_flush(); /* a second later: the count of what was held back */
	drain(rfd, got, sizeof(got));
	CU_ASSERT(strstr(got, "... 90 more like this in the last second: \"upstream %d refused\"") != NULL);
	log_unpipe(rfd, saved);
}

static const struct unit_test tests[] = {
	{"plain printable text is copied as it is", test_plain_text_is_copied},
	{"quotes, backslashes, controls and high bytes become \\xHH", test_quotes_backslashes_and_controls_are_escaped},
	{"the output is cut whole, never in the middle of an escape", test_output_is_cut_at_an_escape_boundary},
	{"a stalled reader never blocks the writer; what is kept arrives in whole lines",
	 test_a_stalled_reader_never_blocks_and_lines_stay_whole},
	{"more than 10 lines a second from one call site are summed up", test_repeats_from_one_call_site_are_summed_up},
};

UNIT_MAIN("common/log", tests)
