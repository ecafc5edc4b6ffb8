/* suites.h: every unit suite the runner in main.c runs. */
#ifndef ECHOROUTERD_TESTS_SUITES_H
#define ECHOROUTERD_TESTS_SUITES_H

#include <check.h>

/*
 * One X(name) per suite, in the order they run; a suite is
 * `Suite *<module>_suite(void)` defined in tests/unit/test_<module>.c,
 * named after the module it tests. Add yours here.
 */
#define UNIT_SUITES(X)		\
	X(buf_suite)		\
	X(config_suite)		\
	X(config_table_suite)	\
	X(mailbox_suite)	\
	X(service_suite)	\
	X(reactor_suite)	\
	X(conn_suite)		\
	X(proto_echo_suite)	\
	X(proto_metrics_suite)	\
	X(http_suite)		\
	X(http_send_suite)	\
	X(http_cb_suite)	\
	X(http_out_suite)	\
	X(acceptor_suite)	\
	X(route_suite)		\
	X(proto_router_suite)	\
	X(proto_smpp_suite)	\
	X(deliver_suite)	\
	X(util_suite)		\
	X(smpp_pdu_suite)	\
	X(smpp_time_suite)	\
	X(smpp_msg_suite)	\
	X(cluster_wire_suite)	\
	X(cluster_seen_suite)	\
	X(nats_link_suite)	\
	X(iplimit_suite)	\
	X(log_suite)		\
	X(uring_suite)		\
	X(counter_suite)	\
	X(store_suite)		\
	X(store_ids_suite)	\
	X(text_suite)		\
	X(text_join_suite)	\
	X(smpp_long_suite)	\
	X(transport_suite)	\
	X(upstream_suite)	\
	X(receipt_map_suite)	\
	X(esme_in_suite)

#define UNIT_DECLARE(name) Suite *name(void);
UNIT_SUITES(UNIT_DECLARE)
#undef UNIT_DECLARE

#endif
