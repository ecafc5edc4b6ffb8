/* test_systemd.c: the systemd contract: notify, watchdog, reload, socket activation. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

/*
 * This suite spawns the daemon itself rather than through daemon_spawn:
 * socket activation needs the sockets on fd 3 onwards and LISTEN_PID equal
 * to the daemon's pid, and the watchdog tests need the arrival time of
 * every notification.
 */

#define SVC_MAX_NOTES	1024
#define SVC_MAX_SOCKS	4
#define SVC_READY_MS	10000
#define SVC_EXIT_MS	15000

struct svc_note {
	uint64_t ms;			/* harness_now_ms() at arrival */
	char	text[512];
};

struct svc_sock {
	int	fd;
	const char *name;
};

struct svc_opts {
	struct svc_sock socks[SVC_MAX_SOCKS];	/* passed on fd 3... */
	int	nsocks;
	uint64_t watchdog_usec;		/* 0: no WATCHDOG_USEC */
	const char *stall;		/* ECHOROUTERD_TEST_STALL, or NULL */
	int	activate_port;		/* >0: via systemd-socket-activate */
};

struct svc {
	pid_t	pid;
	bool	reaped;
	int	wstatus;
	char	*dir;
	char	conf[320];
	char	log[320];
	char	notify[320];
	int	nfd;
	struct svc_note notes[SVC_MAX_NOTES];
	size_t	nnotes;
	size_t	cursor;
};

static void
write_text(const char *path, const char *text)
{
	char tmp[400];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	ck_assert_msg(f != NULL, "%s: %s", tmp, strerror(errno));
	ck_assert(fputs(text, f) >= 0);
	ck_assert(fclose(f) == 0);
	ck_assert(rename(tmp, path) == 0);
}

/* The whole log (caller frees). */
static char *
svc_log(struct svc *s)
{
	FILE *f = fopen(s->log, "r");
	char *text = calloc(1, 1 << 20);
	size_t n = 0;

	ck_assert(text != NULL);
	if (f != NULL) {
		n = fread(text, 1, (1 << 20) - 1, f);
		fclose(f);
	}
	text[n] = '\0';
	return text;
}

static bool
svc_log_has(struct svc *s, const char *what)
{
	char *log = svc_log(s);
	bool found = strstr(log, what) != NULL;

	free(log);
	return found;
}

static void
svc_dump_log(struct svc *s)
{
	char *log = svc_log(s);

	fprintf(stderr, "---- daemon log (%s) ----\n%s----\n", s->log, log);
	free(log);
}

static void
notify_bind(struct svc *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int big = 1 << 20;

	snprintf(s->notify, sizeof(s->notify), "%s/notify", s->dir);
	ck_assert(strlen(s->notify) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, s->notify);
	s->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	ck_assert(s->nfd >= 0);
	setsockopt(s->nfd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	ck_assert_msg(bind(s->nfd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	    "bind %s: %s", s->notify, strerror(errno));
}

/* A listening socket on 127.0.0.1, port 0 or port; its port in *port. */
static int
listen_loopback(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		.sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	ck_assert(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	    "bind: %s", strerror(errno));
	ck_assert(listen(fd, 128) == 0);
	ck_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void
setenv_num(const char *name, unsigned long long v)
{
	char num[32];

	snprintf(num, sizeof(num), "%llu", v);
	setenv(name, num, 1);
}

/* Moves the passed sockets to 3, 4, ... without clobbering one another. */
static void
child_place_sockets(const struct svc_opts *o)
{
	int high[SVC_MAX_SOCKS];
	char names[256] = "";

	for (int i = 0; i < o->nsocks; i++)
		if ((high[i] = fcntl(o->socks[i].fd, F_DUPFD, 100)) < 0)
			_exit(127);
	for (int i = 0; i < o->nsocks; i++) {
		if (dup2(high[i], 3 + i) < 0)
			_exit(127);
		if (i > 0)
			strcat(names, ":");
		strcat(names, o->socks[i].name);
	}
	syscall(SYS_close_range, 3U + (unsigned)o->nsocks, ~0U, 0U);
	if (o->nsocks == 0)
		return;
	setenv_num("LISTEN_FDS", (unsigned long long)o->nsocks);
	setenv_num("LISTEN_PID", (unsigned long long)getpid());
	setenv("LISTEN_FDNAMES", names, 1);
}

/* Runs the binary through systemd-socket-activate, which clears the env. */
static _Noreturn void
child_exec_activate(struct svc *s, const struct svc_opts *o)
{
	char listen[64], notify[400], wd[64], wdpid[64], stall[80];
	const char *argv[20];
	int n = 0;

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", o->activate_port);
	snprintf(notify, sizeof(notify), "NOTIFY_SOCKET=%s", s->notify);
	argv[n++] = "systemd-socket-activate";
	argv[n++] = "-l";
	argv[n++] = listen;
	argv[n++] = "--fdname=echo";
	argv[n++] = "-E";
	argv[n++] = notify;
	if (o->watchdog_usec > 0) {
		snprintf(wd, sizeof(wd), "WATCHDOG_USEC=%llu",
		    (unsigned long long)o->watchdog_usec);
		snprintf(wdpid, sizeof(wdpid), "WATCHDOG_PID=%d",
		    (int)getpid());
		argv[n++] = "-E";
		argv[n++] = wd;
		argv[n++] = "-E";
		argv[n++] = wdpid;
	}
	if (o->stall != NULL) {
		snprintf(stall, sizeof(stall), "ECHOROUTERD_TEST_STALL=%s",
		    o->stall);
		argv[n++] = "-E";
		argv[n++] = stall;
	}
	argv[n++] = harness_bin();
	argv[n++] = "-c";
	argv[n++] = s->conf;
	argv[n] = NULL;
	syscall(SYS_close_range, 3U, ~0U, 0U);
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

static _Noreturn void
child_exec(struct svc *s, const struct svc_opts *o, pid_t parent)
{
	const char *argv[] = { harness_bin(), "-c", s->conf, NULL };
	int logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	int devnull = open("/dev/null", O_RDONLY);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent || logfd < 0 || devnull < 0 ||
	    dup2(devnull, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(127);
	signal(SIGPIPE, SIG_DFL);
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	unsetenv("JOURNAL_STREAM");
	unsetenv("ECHOROUTERD_TEST_STALL");
	if (o->activate_port > 0)
		child_exec_activate(s, o);
	setenv("NOTIFY_SOCKET", s->notify, 1);
	if (o->watchdog_usec > 0) {
		setenv_num("WATCHDOG_USEC", o->watchdog_usec);
		setenv_num("WATCHDOG_PID", (unsigned long long)getpid());
	}
	if (o->stall != NULL)
		setenv("ECHOROUTERD_TEST_STALL", o->stall, 1);
	child_place_sockets(o);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

static struct svc *
svc_spawn(const char *conf, const struct svc_opts *o)
{
	struct svc *s = calloc(1, sizeof(*s));
	pid_t parent = getpid();

	ck_assert(s != NULL);
	s->dir = harness_mkdtemp();
	snprintf(s->conf, sizeof(s->conf), "%s/echorouterd.conf", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/daemon.log", s->dir);
	write_text(s->conf, conf);
	notify_bind(s);
	s->pid = fork();
	ck_assert(s->pid >= 0);
	if (s->pid == 0)
		child_exec(s, o, parent);
	return s;
}

static bool
svc_running(struct svc *s)
{
	if (!s->reaped && waitpid(s->pid, &s->wstatus, WNOHANG) == s->pid)
		s->reaped = true;
	return !s->reaped;
}

/* Takes every notification already queued, stamped with the time now. */
static void
svc_drain(struct svc *s)
{
	for (;;) {
		struct svc_note *note = &s->notes[s->nnotes];
		ssize_t n;

		ck_assert(s->nnotes < SVC_MAX_NOTES);
		n = recv(s->nfd, note->text, sizeof(note->text) - 1,
		    MSG_TRUNC);
		if (n <= 0)
			return;
		note->text[(size_t)n < sizeof(note->text) ? (size_t)n :
		    sizeof(note->text) - 1] = '\0';
		note->ms = harness_now_ms();
		s->nnotes++;
	}
}

/*
 * Receives notifications for up to ms, or until one arrives (until_one),
 * or until the daemon has exited and nothing is left to read.
 */
static void
svc_pump(struct svc *s, int ms, bool until_one)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)ms;

	for (;;) {
		uint64_t now = harness_now_ms();
		struct pollfd p = { .fd = s->nfd, .events = POLLIN };

		if (now >= deadline)
			return;
		if (poll(&p, 1, (int)(deadline - now > 100 ?
		    100 : deadline - now)) <= 0) {
			if (!svc_running(s))
				return;
			continue;
		}
		svc_drain(s);
		if (until_one)
			return;
	}
}

static bool
note_has(const struct svc_note *n, const char *what)
{
	size_t wl = strlen(what);

	for (const char *p = n->text; p != NULL && *p != '\0';) {
		if (strncmp(p, what, wl) == 0)
			return true;
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
	return false;
}

/*
 * The first notification after the cursor with a line starting with what
 * (and containing also, when not NULL), waiting up to ms; NULL if none.
 */
static const struct svc_note *
svc_wait(struct svc *s, const char *what, const char *also, int ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)ms;

	for (;;) {
		bool running = svc_running(s);

		/* Read what an exited daemon left before giving up on it. */
		svc_drain(s);
		for (; s->cursor < s->nnotes; s->cursor++) {
			const struct svc_note *n = &s->notes[s->cursor];

			if (note_has(n, what) &&
			    (also == NULL || strstr(n->text, also) != NULL)) {
				s->cursor++;
				return n;
			}
		}
		if (harness_now_ms() >= deadline || !running)
			return NULL;
		svc_pump(s, (int)(deadline - harness_now_ms()), true);
	}
}

static void
svc_expect(struct svc *s, const char *what, const char *also, int ms)
{
	if (svc_wait(s, what, also, ms) != NULL)
		return;
	svc_dump_log(s);
	ck_abort_msg("no %s%s%s notification within %d ms", what,
	    also ? " with " : "", also ? also : "", ms);
}

/* Waits for exit; the exit code, 128+signal, or -1 still running. */
static int
svc_wait_exit(struct svc *s, int ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)ms;

	while (svc_running(s) && harness_now_ms() < deadline)
		svc_pump(s, 50, false);
	if (!s->reaped)
		return -1;
	if (WIFEXITED(s->wstatus))
		return WEXITSTATUS(s->wstatus);
	return 128 + WTERMSIG(s->wstatus);
}

/* SIGTERM: expects STOPPING=1 and exit 0. */
static void
svc_stop(struct svc *s)
{
	int code;

	ck_assert(kill(s->pid, SIGTERM) == 0);
	svc_expect(s, "STOPPING=1", NULL, SVC_EXIT_MS);
	code = svc_wait_exit(s, SVC_EXIT_MS);
	if (code != 0)
		svc_dump_log(s);
	ck_assert_int_eq(code, 0);
}

static void
svc_free(struct svc *s)
{
	if (svc_running(s)) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
	}
	close(s->nfd);
	free(s->dir);
	free(s);
}

/* The port a listener named name logged ("listening name=NAME ..."). */
static int
svc_port(struct svc *s, const char *name)
{
	char *log = svc_log(s), key[96];
	const char *p, *q;
	int port = -1;

	snprintf(key, sizeof(key), "listening name=%s ", name);
	if ((p = strstr(log, key)) != NULL && (q = strstr(p, " port=")))
		port = atoi(q + 6);
	free(log);
	ck_assert_msg(port > 0, "no port logged for listener %s", name);
	return port;
}

/* WATCHDOG=1 notifications received in [from, to), and the longest gap. */
static int
count_pings(struct svc *s, uint64_t from, uint64_t to, uint64_t *max_gap,
    uint64_t *min_gap)
{
	uint64_t last = 0;
	int n = 0;

	*max_gap = 0;
	*min_gap = UINT64_MAX;
	for (size_t i = 0; i < s->nnotes; i++) {
		const struct svc_note *note = &s->notes[i];

		if (note->ms < from || note->ms >= to ||
		    !note_has(note, "WATCHDOG=1"))
			continue;
		if (last != 0 && note->ms - last > *max_gap)
			*max_gap = note->ms - last;
		if (last != 0 && note->ms - last < *min_gap)
			*min_gap = note->ms - last;
		last = note->ms;
		n++;
	}
	return n;
}

#define LISTENER(name, proto)						\
	"{ name = \"" name "\"; address = \"127.0.0.1\"; port = 0;"	\
	" protocol = \"" proto "\"; }"

#define CONF(dispatchers, listeners, extra)				\
	"dispatchers = " dispatchers ";\n"				\
	"idle_timeout = 0;\n"						\
	"shutdown_timeout = 5;\n"					\
	"listeners = ( " listeners " );\n" extra

/*
 * A socket passed on fd 3 is served by the listener of its name; a listener
 * that was not passed is bound as usual. READY=1 comes with a first STATUS=;
 * STATUS= is refreshed with the connection counts; WATCHDOG=1 comes every
 * half interval.
 */
START_TEST(test_activation_status_watchdog)
{
	struct svc_opts o = { .nsocks = 1, .watchdog_usec = 1000000 };
	const struct svc_note *ready, *st;
	uint64_t max_gap, min_gap, t_end;
	int port = 0, fds[3], pings;
	struct svc *s;

	o.socks[0].fd = listen_loopback(&port);
	o.socks[0].name = "echo";
	s = svc_spawn(CONF("2", LISTENER("echo", "echo") ", "
	    LISTENER("plain", "echo"), ""), &o);
	close(o.socks[0].fd);
	if ((ready = svc_wait(s, "READY=1", NULL, SVC_READY_MS)) == NULL)
		svc_dump_log(s);
	ck_assert_msg(ready != NULL, "no READY=1");
	ck_assert(svc_log_has(s, "listening name=echo"));
	ck_assert(svc_log_has(s, "(socket activation)"));
	s->cursor = 0;
	st = svc_wait(s, "STATUS=", NULL, 2000);
	ck_assert_msg(st != NULL, "no STATUS= with READY=1");
	ck_assert_msg(strstr(st->text, "0 connections (per reactor: 0,0), 0 "
	    "messages/s") != NULL, "first status: %s", st->text);

	fds[0] = client_connect(port);
	fds[1] = client_connect(port);
	fds[2] = client_connect(svc_port(s, "plain"));
	for (int i = 0; i < 3; i++)
		ck_assert_msg(client_echo_ok(fds[i], 1000), "echo %d", i);
	st = svc_wait(s, "STATUS=3 connections (per reactor: ", NULL, 8000);
	ck_assert_msg(st != NULL, "no STATUS= counting 3 connections");
	ck_assert_msg(strstr(st->text, "(per reactor: 2,1)") != NULL ||
	    strstr(st->text, "(per reactor: 1,2)") != NULL, "%s", st->text);
	ck_assert_msg(strstr(st->text, " messages/s") != NULL, "%s",
	    st->text);

	/* Every half second while every reactor turns. */
	t_end = harness_now_ms();
	pings = count_pings(s, ready->ms, t_end, &max_gap, &min_gap);
	ck_assert_msg(pings >= (int)((t_end - ready->ms) / 500) / 2,
	    "%d pings in %" PRIu64 " ms", pings, t_end - ready->ms);
	ck_assert_msg(max_gap < 1000, "pings %" PRIu64 " ms apart", max_gap);
	ck_assert_msg(min_gap >= 350, "pings %" PRIu64 " ms apart", min_gap);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	svc_stop(s);
	svc_free(s);
}
END_TEST

/*
 * A manager that reads nothing for a while (its queue holds ten
 * datagrams; pings come every 100 ms) holds up neither new clients nor
 * SIGTERM: the pings that find no room are dropped, not waited for.
 */
START_TEST(test_notify_queue_full_blocks_nothing)
{
	struct svc_opts o = { .watchdog_usec = 200000 };
	uint64_t deadline;
	struct svc *s;
	int fd;

	s = svc_spawn(CONF("2", LISTENER("echo", "echo"), ""), &o);
	if (svc_wait(s, "READY=1", NULL, SVC_READY_MS) == NULL)
		svc_dump_log(s);
	harness_sleep_ms(2500);
	fd = client_connect(svc_port(s, "echo"));
	ck_assert_msg(client_echo_ok(fd, 3000), "a new client was not served "
	    "while the notify queue was full");
	close(fd);
	ck_assert(kill(s->pid, SIGTERM) == 0);
	deadline = harness_now_ms() + SVC_EXIT_MS;
	while (svc_running(s) && harness_now_ms() < deadline)
		harness_sleep_ms(20);
	ck_assert_msg(!svc_running(s), "SIGTERM not handled while the notify "
	    "queue was full");
	svc_free(s);
}
END_TEST

/* A reactor stuck longer than the interval stops WATCHDOG=1 until it turns. */
START_TEST(test_watchdog_stops_when_reactor_stalls)
{
	struct svc_opts o = { .watchdog_usec = 1000000, .stall = "3" };
	uint64_t t0, max_gap, min_gap;
	int fd, during, after;
	struct svc *s;

	s = svc_spawn(CONF("2", LISTENER("echo", "echo"), ""), &o);
	svc_expect(s, "READY=1", NULL, SVC_READY_MS);
	svc_expect(s, "WATCHDOG=1", NULL, 3000);
	svc_expect(s, "WATCHDOG=1", NULL, 3000);
	ck_assert(svc_log_has(s, "TEST ONLY"));
	fd = client_connect(svc_port(s, "echo"));
	ck_assert(client_echo_ok(fd, 100));

	t0 = harness_now_ms();
	ck_assert(kill(s->pid, SIGUSR2) == 0);
	svc_pump(s, 5000, false);
	/* One ping may already be on its way; then none during the stall. */
	during = count_pings(s, t0 + 700, t0 + 2800, &max_gap, &min_gap);
	after = count_pings(s, t0 + 2800, t0 + 5000, &max_gap, &min_gap);
	if (during != 0 || after == 0)
		svc_dump_log(s);
	ck_assert_msg(during == 0, "%d pings while reactor 0 stalled", during);
	ck_assert_msg(after > 0, "pings did not resume after the stall");
	ck_assert(svc_log_has(s, "withholding WATCHDOG=1"));
	ck_assert(svc_log_has(s, "WATCHDOG=1 resumes"));
	/* Whichever reactor it is on, the client is still served. */
	ck_assert(client_echo_ok(fd, 100));
	close(fd);
	svc_stop(s);
	svc_free(s);
}
END_TEST

/* SIGHUP: RELOADING=1 with MONOTONIC_USEC=, then READY=1; a bad file keeps
 * the running configuration. */
START_TEST(test_reload_good_and_bad)
{
	struct svc_opts o = { 0 };
	const struct svc_note *n;
	struct timespec ts;
	unsigned long long mono, now;
	int fd, fd2, port;
	struct svc *s;
	const char *p;

	s = svc_spawn(CONF("2", LISTENER("echo", "echo"), ""), &o);
	svc_expect(s, "READY=1", NULL, SVC_READY_MS);
	port = svc_port(s, "echo");
	fd = client_connect(port);
	ck_assert(client_echo_ok(fd, 100));

	write_text(s->conf, CONF("2", LISTENER("echo", "echo"),
	    "log = { level = \"debug\"; };\n"));
	ck_assert(kill(s->pid, SIGHUP) == 0);
	n = svc_wait(s, "RELOADING=1", NULL, 5000);
	ck_assert_msg(n != NULL, "no RELOADING=1");
	ck_assert_msg((p = strstr(n->text, "MONOTONIC_USEC=")) != NULL, "%s",
	    n->text);
	mono = strtoull(p + strlen("MONOTONIC_USEC="), NULL, 10);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (unsigned long long)ts.tv_sec * 1000000ULL +
	    (unsigned long long)ts.tv_nsec / 1000;
	ck_assert_msg(mono <= now && now - mono < 10000000ULL,
	    "MONOTONIC_USEC=%llu, now %llu", mono, now);
	svc_expect(s, "READY=1", NULL, 5000);
	ck_assert(svc_log_has(s, "reloaded "));

	/* Line 2 is bad: the old configuration stays and still serves. */
	write_text(s->conf, "dispatchers = 2;\nno_such_key = 1;\n");
	ck_assert(kill(s->pid, SIGHUP) == 0);
	svc_expect(s, "RELOADING=1", "MONOTONIC_USEC=", 5000);
	svc_expect(s, "READY=1", NULL, 5000);
	ck_assert(svc_log_has(s, "echorouterd.conf:2:"));
	ck_assert(svc_log_has(s, "running configuration stays"));
	ck_assert(client_echo_ok(fd, 100));
	fd2 = client_connect(port);
	ck_assert(client_echo_ok(fd2, 100));
	close(fd);
	close(fd2);
	svc_stop(s);
	svc_free(s);
}
END_TEST

/* A passed socket that no listener claims stops the start-up, named. */
START_TEST(test_unclaimed_socket_is_an_error)
{
	struct svc_opts o = { .nsocks = 2 };
	int port = 0, port2 = 0, code;
	struct svc *s;

	o.socks[0].fd = listen_loopback(&port);
	o.socks[0].name = "echo";
	o.socks[1].fd = listen_loopback(&port2);
	o.socks[1].name = "nosuch";
	s = svc_spawn(CONF("1", LISTENER("echo", "echo"), ""), &o);
	close(o.socks[0].fd);
	close(o.socks[1].fd);
	code = svc_wait_exit(s, SVC_EXIT_MS);
	if (code != 1)
		svc_dump_log(s);
	ck_assert_int_eq(code, 1);
	ck_assert(svc_log_has(s, "passed socket \"nosuch\" matches no "
	    "listener"));
	s->cursor = 0;
	ck_assert(svc_wait(s, "READY=1", NULL, 0) == NULL);
	svc_free(s);
}
END_TEST

/*
 * The same through systemd-socket-activate, which passes the socket and
 * clears the environment (NOTIFY_SOCKET goes through -E).
 */
START_TEST(test_systemd_socket_activate)
{
	struct svc_opts o = { .watchdog_usec = 2000000 };
	int port = 0, probe, fd, code;
	struct svc *s;

	if (system("command -v systemd-socket-activate >/dev/null") != 0) {
		fprintf(stderr, "SKIP systemd-socket-activate: not installed "
		    "(apt-get install systemd)\n");
		return;
	}
	/* A free port: systemd-socket-activate binds it itself. */
	probe = listen_loopback(&port);
	close(probe);
	o.activate_port = port;
	s = svc_spawn(CONF("2", LISTENER("echo", "echo"), ""), &o);
	/* Connect before READY: the passed socket queues the client. */
	for (int i = 0; i < 100; i++) {
		if ((fd = client_connect_addr("127.0.0.1", port)) >= 0)
			break;
		harness_sleep_ms(50);
	}
	ck_assert_msg(fd >= 0, "connect to port %d: %s", port,
	    strerror(errno));
	svc_expect(s, "READY=1", NULL, SVC_READY_MS);
	ck_assert(client_echo_ok(fd, 4096));
	ck_assert(svc_log_has(s, "(socket activation)"));
	svc_expect(s, "WATCHDOG=1", NULL, 3000);
	close(fd);
	ck_assert(kill(s->pid, SIGTERM) == 0);
	svc_expect(s, "STOPPING=1", NULL, SVC_EXIT_MS);
	code = svc_wait_exit(s, SVC_EXIT_MS);
	ck_assert_int_eq(code, 0);
	svc_free(s);
}
END_TEST

Suite *
systemd_suite(void)
{
	Suite *s = suite_create("systemd");
	TCase *tc = tcase_create("systemd");

	tcase_set_timeout(tc, 40);
	tcase_add_test(tc, test_activation_status_watchdog);
	tcase_add_test(tc, test_watchdog_stops_when_reactor_stalls);
	tcase_add_test(tc, test_notify_queue_full_blocks_nothing);
	tcase_add_test(tc, test_reload_good_and_bad);
	tcase_add_test(tc, test_unclaimed_socket_is_an_error);
	tcase_add_test(tc, test_systemd_socket_activate);
	suite_add_tcase(s, tc);
	return s;
}
