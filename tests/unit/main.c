/* main.c: the unit test runner: every suite of suites.h in one SRunner, fork mode. */
#include <stdlib.h>

#include "proto.h"
#include "suites.h"

int
main(void)
{
	SRunner *sr;
	int failed;

	/* As the daemon does at start: configurations name protocols. */
	proto_builtin_register();
	sr = srunner_create(NULL);
#define UNIT_ADD(name) srunner_add_suite(sr, name());
	UNIT_SUITES(UNIT_ADD)
#undef UNIT_ADD
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed;
}
