/*
 * test_tlscert.c: what common/tlscert.c promises beyond parsing: file
 * buffers kept out of core dumps, the shape and status checks of an OCSP
 * response, and a CA file with no certificate refused. Includes the .c to
 * reach its static read_file().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tlscert.c"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/weir-test-tlscert-XXXXXX";

static const char *put(const char *name, const void *data, size_t len)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return NULL;
	fwrite(data, 1, len, f);
	fclose(f);
	return path;
}

/* The VmFlags line of the mapping that holds <p>, from /proc/self/smaps. */
static int vmflags_of(const void *p, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, found = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(out, cap, "%s", line);
			found = 1;
			break;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

static void test_a_file_is_read_into_a_buffer_kept_out_of_core_dumps(void)
{
	static const char text[] = "-----BEGIN PRIVATE KEY-----\nsecret\n";
	const char *path = put("key.pem", text, sizeof(text) - 1);
	char flags[512] = "";
	size_t len = 0;
	char *buf;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	buf = read_file(path, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL(len, sizeof(text) - 1);
	CU_ASSERT(memcmp(buf, text, len) == 0);
	CU_ASSERT_EQUAL(vmflags_of(buf, flags, sizeof(flags)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(flags, " dd"));
	wipe_free(buf, len);
}

static void test_a_missing_file_says_so(void)
{
	char why[200] = "";
	struct tlscert tc = {0};
	char path[300];

	snprintf(path, sizeof(path), "%s/none.der", dir);
	CU_ASSERT_EQUAL(tlscert_load_ocsp(&tc, path, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "No such file"));
	CU_ASSERT_PTR_NULL(tlsca_load(path, why, sizeof(why)));
}

static void test_only_a_successful_ocsp_response_is_kept(void)
{
	/* SEQUENCE { ENUMERATED 0, [0] { SEQUENCE {} } }: the outer shape of
	 * a successful response, which is all the loader checks */
	static const uint8_t ok[] = {0x30, 0x07, 0x0a, 0x01, 0x00, 0xa0, 0x02, 0x30, 0x00};
	static const uint8_t later[] = {0x30, 0x03, 0x0a, 0x01, 0x03};
	static const uint8_t no_bytes[] = {0x30, 0x03, 0x0a, 0x01, 0x00};
	static const uint8_t trailing[] = {0x30, 0x03, 0x0a, 0x01, 0x00, 0x00};
	struct tlscert tc = {0};
	char why[200];

	CU_ASSERT_EQUAL(tlscert_load_ocsp(&tc, put("ok.der", ok, sizeof(ok)), why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(tc.ocsp_len, sizeof(ok));
	CU_ASSERT(tc.ocsp && memcmp(tc.ocsp, ok, sizeof(ok)) == 0);
	CU_ASSERT_EQUAL(tlscert_load_ocsp(&tc, put("later.der", later, sizeof(later)), why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "status is 3"));
	CU_ASSERT_EQUAL(tlscert_load_ocsp(&tc, put("nb.der", no_bytes, sizeof(no_bytes)), why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "without responseBytes"));
	CU_ASSERT_EQUAL(tlscert_load_ocsp(&tc, put("tr.der", trailing, sizeof(trailing)), why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "not a DER OCSP response"));
	/* a failed load leaves the previous response in place */
	CU_ASSERT_EQUAL(tc.ocsp_len, sizeof(ok));
	free(tc.ocsp);
}

static void test_a_ca_file_without_a_certificate_is_refused(void)
{
	static const char text[] = "just text\n";
	char why[200] = "";

	CU_ASSERT_PTR_NULL(tlsca_load(put("ca.pem", text, sizeof(text) - 1), why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "no PEM certificate"));
}

static int init(void)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int clean(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const struct unit_test tests[] = {
    {"a file is read into a buffer kept out of core dumps", test_a_file_is_read_into_a_buffer_kept_out_of_core_dumps},
    {"a missing file says so", test_a_missing_file_says_so},
    {"only a successful OCSP response is kept", test_only_a_successful_ocsp_response_is_kept},
    {"a CA file without a certificate is refused", test_a_ca_file_without_a_certificate_is_refused},
};

UNIT_MAIN_WITH("common/tlscert", tests, init, clean)
