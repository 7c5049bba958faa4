/*
 * ref_main.c: the reference checker (ref_http1.c) as a command, for
 * check-ref-h11 to compare with Python's h11 outside libFuzzer. Prints one
 * line per file: "accept LEN", "reject WHY", "either WHY" or "incomplete".
 * Limits as in fuzz_request_diff.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/ref_http1.h"

int main(int argc, char **argv)
{
	static uint8_t buf[1 << 20];
	const struct ref_limits lim = {.head = 4096, .target = 1024, .headers = 32, .body = 1000000};

	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		struct ref_result r;
		size_t n;

		if (!f) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof buf, f);
		fclose(f);
		ref_http1_request(buf, n, &lim, &r);
		switch (r.verdict) {
		case REF_ACCEPT: printf("accept %zu %s\n", r.head_len, argv[i]); break;
		case REF_REJECT: printf("reject %s %s\n", argv[i], r.why); break;
		case REF_EITHER: printf("either %s %s\n", argv[i], r.why); break;
		case REF_INCOMPLETE: printf("incomplete %s\n", argv[i]); break;
		}
	}
	return 0;
}
