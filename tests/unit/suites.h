/* suites.h: every unit suite the runner in main.c runs. */
#ifndef ECHOROUTERD_TESTS_SUITES_H
#define ECHOROUTERD_TESTS_SUITES_H

#include <check.h>

Suite	*buf_suite(void);
Suite	*config_suite(void);
Suite	*reactor_suite(void);
Suite	*echo_suite(void);
Suite	*placement_suite(void);
Suite	*route_suite(void);
Suite	*smpp_pdu_suite(void);
Suite	*iplimit_suite(void);
Suite	*log_suite(void);
Suite	*stage_suite(void);
Suite	*uring_suite(void);

#endif
