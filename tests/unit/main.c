/* main.c: the unit test runner: every suite in one SRunner, fork mode. */
#include <stdlib.h>

#include "suites.h"

int
main(void)
{
	Suite *(*const suites[])(void) = {
		buf_suite,
		config_suite,
		reactor_suite,
		echo_suite,
		placement_suite,
		route_suite,
		smpp_pdu_suite,
		iplimit_suite,
		log_suite,
		stage_suite,
		uring_suite,
	};
	SRunner *sr;
	int failed;

	sr = srunner_create(suites[0]());
	for (size_t i = 1; i < sizeof(suites) / sizeof(suites[0]); i++)
		srunner_add_suite(sr, suites[i]());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed;
}
