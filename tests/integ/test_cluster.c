/* test_cluster.c: what a cluster node shows of its NATS link in STATUS= (systemctl status). */
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#if ER_WITH_NATS

#define PASSWORD	"s3cret-pw"

struct nats {
	pid_t	pid;
	int	port;
	char	*dir;
	char	log[400];
};

/* A loopback port nobody listens on now. */
static int
free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static bool
file_has(const char *path, const char *what)
{
	char buf[16384];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, what) != NULL;
}

/*
 * A nats-server on a free loopback port whose only user is erd with
 * PASSWORD; false (and nothing started) if there is no nats-server.
 */
static bool
nats_start(struct nats *n)
{
	char conf[400], text[256];
	uint64_t end;
	FILE *f;

	if (system("nats-server --version >/dev/null 2>&1") != 0)
		return false;
	n->dir = harness_mkdtemp();
	n->port = free_port();
	snprintf(conf, sizeof(conf), "%s/nats.conf", n->dir);
	snprintf(n->log, sizeof(n->log), "%s/nats.log", n->dir);
	snprintf(text, sizeof(text), "listen: 127.0.0.1:%d\nauthorization {"
	    " users: [ { user: erd, password: \"%s\" } ] }\n", n->port,
	    PASSWORD);
	ck_assert_ptr_nonnull(f = fopen(conf, "w"));
	fputs(text, f);
	fclose(f);
	if ((n->pid = fork()) == 0) {
		int fd = open(n->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 2);
		execlp("nats-server", "nats-server", "-c", conf, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_gt(n->pid, 0);
	end = harness_now_ms() + HARNESS_READY_MS;
	while (!file_has(n->log, "Server is ready")) {
		ck_assert_msg(harness_now_ms() < end, "nats-server not ready");
		harness_sleep_ms(50);
	}
	return true;
}

static void
nats_stop(struct nats *n)
{
	kill(n->pid, SIGKILL);
	waitpid(n->pid, NULL, 0);
	free(n->dir);
}

static struct daemon *
node_start(const struct nats *n, const char *node, const char *password)
{
	char conf[1024];

	snprintf(conf, sizeof(conf), "listeners = ( { name = \"router\"; "
	    "address = \"127.0.0.1\"; port = 0; protocol = \"router\"; } );\n"
	    "cluster = { node = \"%s\"; servers = ( "
	    "\"nats://erd:%s@127.0.0.1:%d\" ); };\n", node, password, n->port);
	return daemon_start(conf, NULL);
}

/* Waits for a STATUS= that has want; fails if any so far has bad. */
static void
expect_status(struct daemon *d, const char *want, const char *bad)
{
	uint64_t end = harness_now_ms() + 20000;
	bool found = false;

	while (!found && harness_now_ms() < end) {
		daemon_wait_notify(d, "STATUS=", 500);
		for (size_t i = 0; i < d->nnotes; i++) {
			ck_assert_msg(strstr(d->notes[i], bad) == NULL,
			    "\"%s\" in %s", bad, d->notes[i]);
			found = found || (strstr(d->notes[i], "STATUS=") &&
			    strstr(d->notes[i], want));
		}
	}
	ck_assert_msg(found, "no STATUS= with \"%s\"", want);
}

/*
 * A password in servers never reaches STATUS= (what any local user sees
 * in systemctl status), nor the log; refused, STATUS= says why.
 */
START_TEST(test_status_hides_the_password_and_says_why_down)
{
	struct nats n;
	struct daemon *d;
	char want[64];

	if (!nats_start(&n))
		return;		/* no nats-server: nothing to talk to */
	d = node_start(&n, "a", PASSWORD);
	snprintf(want, sizeof(want), "cluster nats://127.0.0.1:%d,", n.port);
	expect_status(d, want, PASSWORD);
	ck_assert(!daemon_log_contains(d, PASSWORD));
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	daemon_free(d);

	d = node_start(&n, "b", "wrong-pw");
	expect_status(d, "cluster down (Authorization Violation)", "wrong-pw");
	ck_assert(!daemon_log_contains(d, "wrong-pw"));
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	daemon_free(d);
	nats_stop(&n);
}
END_TEST
#endif

Suite *
cluster_suite(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("status");

	tcase_set_timeout(tc, 90);
#if ER_WITH_NATS
	tcase_add_test(tc, test_status_hides_the_password_and_says_why_down);
#endif
	suite_add_tcase(s, tc);
	return s;
}
