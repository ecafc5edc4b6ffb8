/* suites.h: every integration suite the runner in main.c runs. */
#ifndef ECHOROUTERD_TESTS_INTEG_SUITES_H
#define ECHOROUTERD_TESTS_INTEG_SUITES_H

#include <check.h>

/*
 * One X(name) per suite, in the order they run; a suite is
 * `Suite *name(void)` defined in tests/integ/test_<what>.c. Add yours here.
 */
#define INTEG_SUITES(X)	\
	X(echo_suite)	\
	X(router_suite)	\
	X(systemd_suite)	\
	X(limits_suite)	\
	X(store_suite)	\
	X(cluster_suite)

#define INTEG_DECLARE(name) Suite *name(void);
INTEG_SUITES(INTEG_DECLARE)
#undef INTEG_DECLARE

#endif
