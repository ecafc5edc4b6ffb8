/* main.c: the integration test runner: every suite of suites.h in one SRunner. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "suites.h"

int
main(void)
{
	SRunner *sr;
	int failed;

	harness_init();
	sr = srunner_create(NULL);
#define INTEG_ADD(name) srunner_add_suite(sr, name());
	INTEG_SUITES(INTEG_ADD)
#undef INTEG_ADD
	/* CK_VERBOSITY and CK_RUN_SUITE / CK_RUN_CASE narrow or quieten. */
	srunner_run_all(sr, getenv("CK_VERBOSITY") ? CK_ENV : CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	harness_fini(failed > 0);
	return failed;
}
