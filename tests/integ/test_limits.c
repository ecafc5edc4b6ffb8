/* test_limits.c: per-address connection limits and rates, against the real daemon. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "log.h"
#include "suites.h"

#define LIMITS_CONF(lim)						\
	"dispatchers = 2;\n"						\
	"idle_timeout = 0;\n"						\
	"listeners = ( { name = \"echo\"; address = \"0.0.0.0\";"	\
	" port = 0; protocol = \"echo\"; } );\n"			\
	"limits = { " lim " };\n"

/* A blocking client from source address src (127.0.0.x), or -1. */
static int
connect_from(const char *src, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	inet_pton(AF_INET, src, &sa.sin_addr);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	sa.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* true if the daemon echoes on fd; false if it closed it. */
static bool
served(int fd)
{
	char buf[4];

	if (send_all(fd, "ping", 4) < 0)
		return false;
	return recv_exact(fd, buf, 4, HARNESS_IO_MS) == 4 &&
	    memcmp(buf, "ping", 4) == 0;
}

START_TEST(test_max_connections_per_ip)
{
	struct daemon *d = daemon_start(LIMITS_CONF(
	    "max_connections_per_ip = 3;"), NULL);
	int port = daemon_port(d, "echo"), a[4], b;
	struct daemon_stats st;

	for (int i = 0; i < 4; i++)
		a[i] = connect_from("127.0.0.1", port);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(served(a[i]), "client %d not served", i);
	/* The fourth from the same address is accepted and closed. */
	ck_assert_int_ne(client_wait_closed(a[3], HARNESS_IO_MS), ETIMEDOUT);
	/* Another address is not affected. */
	b = connect_from("127.0.0.2", port);
	ck_assert(served(b));
	daemon_stats(d, &st);
	ck_assert_int_eq(daemon_stats_get(&st, "refused_ip"), 1);
	ck_assert(daemon_log_contains(d, "max_connections_per_ip"));
	/* One leaves: its place is free again. */
	close(a[0]);
	close(a[3]);
	for (int i = 0; i < 100; i++) {
		a[0] = connect_from("127.0.0.1", port);
		if (served(a[0]))
			break;
		close(a[0]);
		a[0] = -1;
		harness_sleep_ms(20);
	}
	ck_assert_int_ge(a[0], 0);
	for (int i = 0; i < 3; i++)
		close(a[i]);
	close(b);
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	daemon_free(d);
}
END_TEST

START_TEST(test_connection_rate_per_ip)
{
	struct daemon *d = daemon_start(LIMITS_CONF(
	    "connection_rate_per_ip = 5;"), NULL);
	int port = daemon_port(d, "echo"), fds[20], ok = 0;
	struct daemon_stats st;

	uint64_t t0 = harness_now_ms(), secs;

	for (int i = 0; i < 20; i++)
		fds[i] = connect_from("127.0.0.3", port);
	secs = (harness_now_ms() - t0 + 999) / 1000;
	for (int i = 0; i < 20; i++) {
		if (served(fds[i]))
			ok++;
		close(fds[i]);
	}
	/* A burst of one second's worth, plus what refilled meanwhile. */
	ck_assert_msg(ok >= 5 && (uint64_t)ok <= 5 + 5 * secs + 1,
	    "served %d of 20 in %llu s", ok, (unsigned long long)secs);
	daemon_stats(d, &st);
	ck_assert_int_eq(daemon_stats_get(&st, "refused_rate"), 20 - ok);
	/* Another address has its own bucket. */
	fds[0] = connect_from("127.0.0.4", port);
	ck_assert(served(fds[0]));
	close(fds[0]);
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	daemon_free(d);
}
END_TEST

#define SMPP_CONF(level)						\
	"dispatchers = 1;\n"						\
	"idle_timeout = 0;\n"						\
	"log = { level = \"" level "\"; };\n"				\
	"listeners = ( { name = \"smpp\"; address = \"127.0.0.1\";"	\
	" port = 0; protocol = \"smpp\"; } );\n"

/* Lines of the daemon's log that contain s. */
static unsigned
log_count(struct daemon *d, const char *s)
{
	char *log = daemon_log(d), *p = log;
	unsigned n = 0;

	while ((p = strstr(p, s)) != NULL) {
		n++;
		p += strlen(s);
	}
	free(log);
	return n;
}

/* The records the daemon says it did not log. */
static unsigned
log_dropped(struct daemon *d)
{
	const char *what = "client records not logged: ";
	char *log = daemon_log(d), *p = log;
	unsigned total = 0;

	while ((p = strstr(p, what)) != NULL) {
		unsigned n;

		p += strlen(what);
		ck_assert_int_eq(sscanf(p, "%u", &n), 1);
		total += n;
	}
	free(log);
	return total;
}

/* Each client sends an absurd SMPP header and is closed; fails the test if
 * one is not. */
static void
offend(int port, int clients)
{
	/* command_length 5: answered generic_nack, then closed. */
	static const uint8_t bad[16] = { 0, 0, 0, 5, 0, 0, 0, 4 };

	for (int i = 0; i < clients; i++) {
		int fd = client_connect(port);

		ck_assert_int_eq(send_all(fd, bad, sizeof(bad)), 0);
		ck_assert_int_ne(client_wait_closed(fd, HARNESS_IO_MS),
		    ETIMEDOUT);
		close(fd);
	}
}

/*
 * Every client closed for an offence is worth a log record, but a flood of
 * them must not flood the log (nor hold up the reactor writing it): past
 * LOG_LIMIT_PER_SECOND a second, records are counted and the count is
 * logged instead.
 */
START_TEST(test_client_records_rate_limited)
{
	enum { CLIENTS = 300 };
	struct daemon *d = daemon_start(SMPP_CONF("info"), NULL);
	int port = daemon_port(d, "smpp");
	uint64_t t0 = harness_now_ms(), secs;
	unsigned logged, dropped = 0;
	struct daemon_stats st;

	offend(port, CLIENTS);
	/* One record each: "closed reason=protocol". */
	for (int i = 0; i < 100; i++) {
		logged = log_count(d, "closed reason=protocol");
		dropped = log_dropped(d);
		if (logged + dropped >= CLIENTS)
			break;
		harness_sleep_ms(50);
	}
	/* Seconds in which records could have been written, at most. */
	secs = (harness_now_ms() - t0) / 1000 + 2;
	ck_assert_msg(logged + dropped == CLIENTS,
	    "%u logged + %u dropped", logged, dropped);
	ck_assert_msg(logged >= LOG_LIMIT_PER_SECOND &&
	    logged <= LOG_LIMIT_PER_SECOND * secs,
	    "%u logged in %llu s", logged, (unsigned long long)secs);
	ck_assert_uint_gt(dropped, 0);
	/* Counted as what they were: protocol offences. */
	/* (The last close may still be lingering on the client's FIN.) */
	ck_assert_msg(daemon_stats_wait(d, "closed_protocol", CLIENTS,
	    HARNESS_STATS_MS, &st), "%s", st.line);
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	daemon_free(d);
}
END_TEST

/* At notice level those records are not written, so none is "dropped". */
START_TEST(test_client_records_quiet_level)
{
	struct daemon *d = daemon_start(SMPP_CONF("info"), NULL);
	struct daemon_stats st;

	/* Started at info (the harness reads the port from the log). */
	daemon_rewrite_config(d, SMPP_CONF("notice"));
	ck_assert_int_eq(daemon_signal(d, SIGHUP), 0);
	ck_assert(daemon_wait_log(d, "reloaded", HARNESS_IO_MS));
	offend(daemon_port(d, "smpp"), 100);
	ck_assert_msg(daemon_stats_wait(d, "closed_protocol", 100,
	    HARNESS_STATS_MS, &st), "%s", st.line);
	/* A report would come within a second of the burst. */
	harness_sleep_ms(1500);
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	ck_assert(!daemon_log_contains(d, "closed reason=protocol"));
	ck_assert(!daemon_log_contains(d, "not logged"));
	daemon_free(d);
}
END_TEST

Suite *
limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("per_ip");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_max_connections_per_ip);
	tcase_add_test(tc, test_connection_rate_per_ip);
	suite_add_tcase(s, tc);
	tc = tcase_create("log");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_client_records_rate_limited);
	tcase_add_test(tc, test_client_records_quiet_level);
	suite_add_tcase(s, tc);
	return s;
}
