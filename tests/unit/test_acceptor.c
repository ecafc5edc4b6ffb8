/* test_acceptor.c: the acceptor hands clients to reactors round-robin. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "acceptor.h"
#include "config.h"
#include "conn.h"
#include "helpers.h"
#include "log.h"
#include "reactor.h"
#include "suites.h"

#define MAX_REACTORS	4
#define MAX_CLIENTS	64

/* Reactors, an acceptor on its own thread, and its stop signal. */
struct rig {
	struct config *cf;
	struct reactor *rs[MAX_REACTORS];
	unsigned nrs;
	struct acceptor *a;
	struct acceptor_hooks hooks;
	pthread_t thread;
	int	sigfd;
	int	port;
	int	signals;		/* seen by on_signal; acceptor thread */
	int	clients[MAX_CLIENTS];
	unsigned nclients;
};

static void
rig_on_signal(int signo, void *arg)
{
	struct rig *rig = arg;

	if (signo == SIGUSR2) {
		rig->signals++;
		acceptor_stop(rig->a);
	}
}

static void *
rig_acceptor_main(void *arg)
{
	struct rig *rig = arg;

	acceptor_run(rig->a, rig->sigfd, &rig->hooks);
	return NULL;
}

/*
 * The port of the one listening IPv4 loopback socket in this process (each
 * test runs in a forked child, so it is the acceptor's), or -1.
 */
static int
find_listening_port(void)
{
	int found = -1, count = 0;

	for (int fd = 0; fd < 1024; fd++) {
		struct sockaddr_in sin;
		socklen_t len = sizeof(sin);
		int on = 0;
		socklen_t olen = sizeof(on);

		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) < 0 ||
		    !on)
			continue;
		if (getsockname(fd, (struct sockaddr *)&sin, &len) < 0 ||
		    sin.sin_family != AF_INET ||
		    sin.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			continue;
		found = ntohs(sin.sin_port);
		count++;
	}
	return count == 1 ? found : -1;
}

static void
rig_start(struct rig *rig, unsigned nrs, const char *extra)
{
	char text[1024];
	sigset_t mask;

	memset(rig, 0, sizeof(*rig));
	ck_assert_uint_le(nrs, MAX_REACTORS);
	/* Blocked before any thread starts: every thread inherits the mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR2);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &mask, NULL), 0);
	rig->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	ck_assert_int_ge(rig->sigfd, 0);
	snprintf(text, sizeof(text), "dispatchers = %u;\n"
	    "shutdown_timeout = 1;\n%s"
	    "listeners = ( { name = \"rr\"; address = \"127.0.0.1\";"
	    " port = 0; protocol = \"echo\"; } );\n", nrs, extra);
	rig->cf = unit_config(text);
	/* Only trouble: the "listening" lines would drown the results. */
	log_set_level(LOG_LEVEL_WARNING);
	rig->nrs = nrs;
	for (unsigned i = 0; i < nrs; i++) {
		rig->rs[i] = reactor_new(i, rig->cf);
		ck_assert_ptr_nonnull(rig->rs[i]);
		ck_assert_int_eq(reactor_start(rig->rs[i]), 0);
	}
	rig->a = acceptor_new(rig->cf, rig->rs, nrs);
	ck_assert_int_eq(acceptor_listen(rig->a), 0);
	rig->port = find_listening_port();
	ck_assert_int_gt(rig->port, 0);
	rig->hooks.on_signal = rig_on_signal;
	rig->hooks.arg = rig;
	ck_assert_int_eq(pthread_create(&rig->thread, NULL, rig_acceptor_main,
	    rig), 0);
}

/* Stops the acceptor with its signal; waits at most 5 seconds for it. */
static void
rig_stop_acceptor(struct rig *rig)
{
	struct timespec ts;

	ck_assert_int_eq(pthread_kill(rig->thread, SIGUSR2), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	ck_assert_msg(pthread_timedjoin_np(rig->thread, NULL, &ts) == 0,
	    "the acceptor did not stop on SIGUSR2");
	ck_assert_int_eq(rig->signals, 1);
}

static void
rig_finish(struct rig *rig)
{
	for (unsigned i = 0; i < rig->nclients; i++)
		close(rig->clients[i]);
	for (unsigned i = 0; i < rig->nrs; i++)
		reactor_stop(rig->rs[i]);
	for (unsigned i = 0; i < rig->nrs; i++)
		reactor_join(rig->rs[i]);
	for (unsigned i = 0; i < rig->nrs; i++)
		reactor_free(rig->rs[i]);
	acceptor_free(rig->a);
	close(rig->sigfd);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	config_unref(rig->cf);
}

static int
rig_connect(struct rig *rig)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)rig->port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0,
	    "connect to port %d: %s", rig->port, strerror(errno));
	ck_assert_uint_lt(rig->nclients, MAX_CLIENTS);
	rig->clients[rig->nclients++] = fd;
	return fd;
}

static uint64_t
acceptor_count(struct rig *rig, enum counter_id id)
{
	return counter_get(acceptor_counters(rig->a), id);
}

static uint64_t
conns_of(struct rig *rig, unsigned i)
{
	return counter_get(&rig->rs[i]->counters, COUNTER_CONNS);
}

/* Waits up to ms until reactor i holds want connections; true if so. */
static bool
wait_conns(struct rig *rig, const uint64_t *want, unsigned ms)
{
	uint64_t deadline = unit_now_ms() + ms;

	for (;;) {
		unsigned ok = 0;

		for (unsigned i = 0; i < rig->nrs; i++)
			ok += conns_of(rig, i) == want[i];
		if (ok == rig->nrs)
			return true;
		if (unit_now_ms() >= deadline)
			return false;
		unit_sleep_ms(5);
	}
}

START_TEST(placement_round_robin_30)
{
	static const uint64_t want[3] = { 10, 10, 10 };
	struct rig rig;

	rig_start(&rig, 3, "");
	for (int i = 0; i < 30; i++)
		rig_connect(&rig);
	ck_assert_msg(wait_conns(&rig, want, 5000),
	    "per reactor: %llu,%llu,%llu, want 10,10,10",
	    (unsigned long long)conns_of(&rig, 0),
	    (unsigned long long)conns_of(&rig, 1),
	    (unsigned long long)conns_of(&rig, 2));
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_eq(counter_get(&rig.rs[i]->counters,
		    COUNTER_ACCEPTED), 10);
	ck_assert_uint_eq(atomic_load(&conn_live), 30);
	rig_stop_acceptor(&rig);
	ck_assert_uint_eq(acceptor_count(&rig, COUNTER_ACCEPTOR_ACCEPTED), 30);
	ck_assert_uint_eq(acceptor_count(&rig, COUNTER_REFUSED_MAX), 0);
	ck_assert_uint_eq(acceptor_count(&rig, COUNTER_REFUSED_FD), 0);
	rig_finish(&rig);
}
END_TEST

/* One client at a time: reactor 0, 1, 2, 0, 1, ... in turn. */
START_TEST(placement_order)
{
	uint64_t want[3] = { 0, 0, 0 };
	struct rig rig;

	rig_start(&rig, 3, "");
	for (unsigned i = 0; i < 7; i++) {
		rig_connect(&rig);
		want[i % 3]++;
		ck_assert_msg(wait_conns(&rig, want, 5000),
		    "client %u: per reactor %llu,%llu,%llu", i,
		    (unsigned long long)conns_of(&rig, 0),
		    (unsigned long long)conns_of(&rig, 1),
		    (unsigned long long)conns_of(&rig, 2));
	}
	rig_stop_acceptor(&rig);
	ck_assert_uint_eq(acceptor_count(&rig, COUNTER_ACCEPTOR_ACCEPTED), 7);
	rig_finish(&rig);
}
END_TEST

/* A placed client is live: its reactor echoes what it sends. */
START_TEST(placement_clients_are_served)
{
	static const uint64_t want[2] = { 2, 2 };
	struct rig rig;

	rig_start(&rig, 2, "");
	for (int i = 0; i < 4; i++)
		rig_connect(&rig);
	ck_assert(wait_conns(&rig, want, 5000));
	for (unsigned i = 0; i < rig.nclients; i++) {
		char msg[32], back[32];
		struct pollfd pfd = { .fd = rig.clients[i], .events = POLLIN };
		int len = snprintf(msg, sizeof(msg), "client %u\n", i);

		ck_assert_int_eq(write(rig.clients[i], msg, (size_t)len), len);
		ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
		ck_assert_int_eq(read(rig.clients[i], back, sizeof(back)), len);
		ck_assert_mem_eq(back, msg, (size_t)len);
	}
	rig_stop_acceptor(&rig);
	rig_finish(&rig);
}
END_TEST

/* Beyond max_connections a client is accepted and closed at once. */
START_TEST(placement_max_connections)
{
	static const uint64_t want[3] = { 2, 2, 1 };
	struct rig rig;
	unsigned eofs = 0;
	uint64_t deadline;

	rig_start(&rig, 3, "max_connections = 5;\n");
	for (int i = 0; i < 8; i++)
		rig_connect(&rig);
	ck_assert(wait_conns(&rig, want, 5000));
	deadline = unit_now_ms() + 5000;
	while (eofs < 3 && unit_now_ms() < deadline) {
		struct pollfd pfd[MAX_CLIENTS];

		for (unsigned i = 0; i < rig.nclients; i++)
			pfd[i] = (struct pollfd){ rig.clients[i], POLLIN, 0 };
		eofs = 0;
		if (poll(pfd, rig.nclients, 100) < 0)
			continue;
		for (unsigned i = 0; i < rig.nclients; i++)
			eofs += (pfd[i].revents & (POLLIN | POLLHUP)) != 0;
	}
	/* Exactly the refused ones were closed; nothing was sent. */
	ck_assert_uint_eq(eofs, 3);
	ck_assert_uint_eq(atomic_load(&conn_live), 5);
	rig_stop_acceptor(&rig);
	ck_assert_uint_eq(acceptor_count(&rig, COUNTER_ACCEPTOR_ACCEPTED), 5);
	ck_assert_uint_eq(acceptor_count(&rig, COUNTER_REFUSED_MAX), 3);
	rig_finish(&rig);
}
END_TEST

Suite *
acceptor_suite(void)
{
	Suite *s = suite_create("acceptor");
	TCase *tc = tcase_create("round-robin");

	tcase_add_test(tc, placement_round_robin_30);
	tcase_add_test(tc, placement_order);
	tcase_add_test(tc, placement_clients_are_served);
	tcase_add_test(tc, placement_max_connections);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}
