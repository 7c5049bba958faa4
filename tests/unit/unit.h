/*
 * unit.h: the one main() every CUnit suite shares. A suite file defines its
 * tests as a table of {sentence, function} and ends with
 * UNIT_MAIN("folder/module", tests).
 */
#ifndef WEIR_TESTS_UNIT_H
#define WEIR_TESTS_UNIT_H

#include <CUnit/Basic.h>
#include <stddef.h>
#include <stdio.h>

struct unit_test {
	const char *name;
	void (*fn)(void);
};

/* <init> and <clean> (may be NULL) run before and after the suite. */
static inline int unit_run(const char *suite, const struct unit_test *tests, size_t n, int (*init)(void),
                           int (*clean)(void))
{
	CU_pSuite s;
	unsigned fails;

	/* a suite or test that fails to register must fail the run: otherwise
	 * it reports zero failures for tests that never ran */
	if (CU_initialize_registry() != CUE_SUCCESS) {
		fprintf(stderr, "%s: cannot initialise the CUnit registry: %s\n", suite, CU_get_error_msg());
		return 1;
	}
	s = CU_add_suite(suite, init, clean);
	if (!s) {
		fprintf(stderr, "%s: cannot add the suite: %s\n", suite, CU_get_error_msg());
		CU_cleanup_registry();
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		if (!CU_add_test(s, tests[i].name, tests[i].fn)) {
			fprintf(stderr, "%s: cannot add test \"%s\": %s\n", suite, tests[i].name ? tests[i].name : "(null)",
			        CU_get_error_msg());
			CU_cleanup_registry();
			return 1;
		}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}

#define UNIT_MAIN_WITH(suite, tests, init, clean)                                        \
	int main(void)                                                                   \
	{                                                                                \
		return unit_run(suite, tests, sizeof(tests) / sizeof((tests)[0]), init, clean); \
	}
#define UNIT_MAIN(suite, tests) UNIT_MAIN_WITH(suite, tests, NULL, NULL)

#endif
