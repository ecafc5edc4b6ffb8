/* harness.c: runs the real echorouterd under test: private dirs, NOTIFY_SOCKET, log, clients. */
#include "harness.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char run_dir[200];

/* Removes a directory tree (a daemon's or the run's); errors are ignored. */
static void
rm_tree(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *e;
	char sub[PATH_MAX];
	struct stat st;

	if (dir == NULL) {
		unlink(path);
		return;
	}
	while ((e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			rm_tree(sub);
		else
			unlink(sub);
	}
	closedir(dir);
	rmdir(path);
}

void
harness_init(void)
{
	const char *tmp = getenv("TMPDIR");
	struct rlimit rl;

	/* Socket paths must fit in sun_path: fall back to /tmp. */
	if (tmp == NULL || *tmp == '\0' || strlen(tmp) > 60)
		tmp = "/tmp";
	snprintf(run_dir, sizeof(run_dir), "%s/erd-integ.XXXXXX", tmp);
	if (mkdtemp(run_dir) == NULL) {
		perror("harness: mkdtemp");
		exit(2);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
}

void
harness_fini(bool keep)
{
	if (run_dir[0] == '\0')
		return;
	if (keep)
		fprintf(stderr, "harness: kept %s (daemon configs and logs)\n",
		    run_dir);
	else
		rm_tree(run_dir);
}

const char *
harness_bin(void)
{
	const char *bin = getenv("ECHOROUTERD_BIN");

	ck_assert_msg(bin != NULL && *bin != '\0',
	    "ECHOROUTERD_BIN is not set (run through `make check-integ`)");
	ck_assert_msg(access(bin, X_OK) == 0, "ECHOROUTERD_BIN=%s: %s", bin,
	    strerror(errno));
	return bin;
}

char *
harness_mkdtemp(void)
{
	char path[300];
	char *p;

	/* Run directly (not from main.c)? Use /tmp. */
	snprintf(path, sizeof(path), "%s/d.XXXXXX",
	    run_dir[0] ? run_dir : "/tmp");
	ck_assert_msg(mkdtemp(path) != NULL, "mkdtemp %s: %s", path,
	    strerror(errno));
	p = strdup(path);
	ck_assert(p != NULL);
	return p;
}

uint64_t
harness_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
harness_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

uint64_t
harness_seed(const char *what)
{
	const char *env = getenv("ECHOROUTERD_TEST_SEED");
	struct timespec ts;
	uint64_t seed;

	if (env != NULL && *env != '\0') {
		seed = strtoull(env, NULL, 0);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000007ULL ^
		    (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
	}
	fprintf(stderr, "%s: seed=%" PRIu64 " (ECHOROUTERD_TEST_SEED=%" PRIu64
	    " replays it)\n", what, seed, seed);
	return seed;
}

uint64_t
harness_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void
harness_fill(uint64_t *state, uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t v = harness_rand(state);

		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n > 0) {
		uint64_t v = harness_rand(state);

		memcpy(p, &v, n);
	}
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert(fputs(text, f) >= 0);
	ck_assert(fclose(f) == 0);
}

/* Reads a whole file, NUL-terminated; an empty string if it is missing. */
static char *
read_file(const char *path, size_t *lenp)
{
	size_t len = 0, cap = 4096;
	char *s = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	ck_assert(s != NULL);
	while (fd >= 0) {
		if (cap - len < 4096) {
			cap *= 2;
			s = realloc(s, cap);
			ck_assert(s != NULL);
		}
		n = read(fd, s + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	s[len] = '\0';
	if (lenp != NULL)
		*lenp = len;
	return s;
}

/* In a child about to exec: only 0, 1 and 2 stay open. */
static void
close_other_fds(void)
{
	struct rlimit rl;
	long max = 65536;

#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
		return;
#endif
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		max = (long)rl.rlim_cur;
	for (long fd = 3; fd < max; fd++)
		close((int)fd);
}

/* Child side of a spawn: stdio, limits, environment; never returns. */
static _Noreturn void
exec_child(const char *const *argv, int out_fd, int err_fd,
    const char *notify, const struct daemon_opts *o, pid_t parent)
{
	int devnull = open("/dev/null", O_RDONLY);

	/* The daemon must not outlive a test that failed or timed out. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 ||
	    dup2(err_fd, 2) < 0)
		_exit(127);
	close_other_fds();
	signal(SIGPIPE, SIG_DFL);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	unsetenv("JOURNAL_STREAM");
	if (notify != NULL)
		setenv("NOTIFY_SOCKET", notify, 1);
	for (const char *const *e = o && o->env ? o->env : NULL; e && *e;
	    e++)
		putenv((char *)*e);
	if (o != NULL && o->nofile > 0) {
		struct rlimit rl = { o->nofile, o->nofile };

		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(127);
	}
	execve(argv[0], (char *const *)argv, environ);
	dprintf(2, "harness: exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static int
status_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return -1;
}

void
harness_run(const char *const *args, int timeout_ms, struct cmd_result *r)
{
	const char *argv[32];
	char *dir = harness_mkdtemp(), out[400], err[400];
	size_t n = 0;
	int ofd, efd, wstatus;
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;
	pid_t pid, parent = getpid();

	argv[n++] = harness_bin();
	for (; args != NULL && *args != NULL && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/stdout", dir);
	snprintf(err, sizeof(err), "%s/stderr", dir);
	ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert(ofd >= 0 && efd >= 0);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		exec_child(argv, ofd, efd, NULL, NULL, parent);
	close(ofd);
	close(efd);
	r->status = -1;
	for (;;) {
		pid_t w = waitpid(pid, &wstatus, WNOHANG);

		if (w == pid) {
			r->status = status_code(wstatus);
			break;
		}
		if (harness_now_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &wstatus, 0);
			break;
		}
		harness_sleep_ms(5);
	}
	r->out = read_file(out, NULL);
	r->err = read_file(err, NULL);
	rm_tree(dir);
	free(dir);
}

void
cmd_result_free(struct cmd_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* Our end of the daemon's NOTIFY_SOCKET: a datagram socket we bind. */
static void
notify_open(struct daemon *d, bool abstract)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd, big = 1 << 20;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_msg(fd >= 0, "socket(AF_UNIX): %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (abstract) {
		/* Unique enough: the directory name is. */
		snprintf(d->notify_path, sizeof(d->notify_path),
		    "@echorouterd-test%s", strrchr(d->dir, '/'));
		memcpy(sa.sun_path + 1, d->notify_path + 1,
		    strlen(d->notify_path) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
		    strlen(d->notify_path));
	} else {
		snprintf(d->notify_path, sizeof(d->notify_path), "%s/notify",
		    d->dir);
		ck_assert(strlen(d->notify_path) < sizeof(sa.sun_path));
		strcpy(sa.sun_path, d->notify_path);
		len = sizeof(sa);
	}
	ck_assert_msg(bind(fd, (struct sockaddr *)&sa, len) == 0,
	    "bind %s: %s", d->notify_path, strerror(errno));
	d->notify_fd = fd;
}

/* Reads every datagram waiting on the notify socket into d->notes. */
static void
notify_pump(struct daemon *d)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(d->notify_fd, buf, sizeof(buf) - 1, 0)) >= 0 ||
	    errno == EINTR) {
		if (n < 0)
			continue;
		buf[n] = '\0';
		if (d->nnotes == d->notes_cap) {
			d->notes_cap = d->notes_cap ? d->notes_cap * 2 : 16;
			d->notes = realloc(d->notes,
			    d->notes_cap * sizeof(*d->notes));
			ck_assert(d->notes != NULL);
		}
		d->notes[d->nnotes] = strdup(buf);
		ck_assert(d->notes[d->nnotes] != NULL);
		d->nnotes++;
	}
}

/* Whether one of the lines of note starts with what. */
static bool
note_has(const char *note, const char *what)
{
	size_t wl = strlen(what);

	for (const char *p = note; p != NULL && *p != '\0';) {
		if (strncmp(p, what, wl) == 0)
			return true;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return false;
}

struct daemon *
daemon_spawn(const char *conf, const struct daemon_opts *o)
{
	struct daemon *d = calloc(1, sizeof(*d));
	const char *argv[32];
	char *dir = harness_mkdtemp();
	size_t n = 0;
	int logfd;
	pid_t parent = getpid();

	ck_assert(d != NULL);
	d->notify_fd = -1;
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	free(dir);
	snprintf(d->conf_path, sizeof(d->conf_path), "%s/echorouterd.conf",
	    d->dir);
	snprintf(d->log_path, sizeof(d->log_path), "%s/daemon.log", d->dir);
	write_file(d->conf_path, conf);
	if (o == NULL || !o->no_notify)
		notify_open(d, o != NULL && o->abstract_notify);
	argv[n++] = harness_bin();
	for (const char *const *a = o && o->args ? o->args : NULL; a && *a &&
	    n < 28; a++)
		argv[n++] = *a;
	argv[n++] = "-c";
	argv[n++] = d->conf_path;
	argv[n] = NULL;
	logfd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0600);
	ck_assert_msg(logfd >= 0, "%s: %s", d->log_path, strerror(errno));
	d->pid = fork();
	ck_assert_msg(d->pid >= 0, "fork: %s", strerror(errno));
	if (d->pid == 0)
		exec_child(argv, logfd, logfd, d->notify_fd >= 0 ?
		    d->notify_path : NULL, o, parent);
	close(logfd);
	return d;
}

/* Parses `listening name=N protocol=P on=A port=N` lines from the log. */
static void
parse_listeners(struct daemon *d)
{
	char *log = daemon_log(d), *save = NULL;

	d->nls = 0;
	for (char *line = strtok_r(log, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		struct daemon_listener *l = &d->ls[d->nls];
		char *p = line;

		if (*p == '<' && (p = strchr(p, '>')) != NULL)
			p++;
		else
			p = line;
		if (d->nls == HARNESS_MAX_LISTENERS ||
		    sscanf(p, "listening name=%63s protocol=%31s on=%95s "
		    "port=%d", l->name, l->proto, l->on, &l->port) != 4)
			continue;
		d->nls++;
	}
	free(log);
}

bool
daemon_is_running(struct daemon *d)
{
	int wstatus;

	if (d->reaped)
		return false;
	if (waitpid(d->pid, &wstatus, WNOHANG) == d->pid) {
		d->reaped = true;
		d->wstatus = wstatus;
		return false;
	}
	return true;
}

bool
daemon_wait_notify(struct daemon *d, const char *what, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;

	if (d->notify_fd < 0)
		return false;
	for (;;) {
		struct pollfd pfd = { d->notify_fd, POLLIN, 0 };
		bool running;

		notify_pump(d);
		for (; d->note_cursor < d->nnotes; d->note_cursor++) {
			if (note_has(d->notes[d->note_cursor], what)) {
				d->note_cursor++;
				return true;
			}
		}
		running = daemon_is_running(d);
		if (!running) {
			/* Whatever it sent before dying is queued already. */
			notify_pump(d);
			if (d->note_cursor == d->nnotes)
				return false;
			continue;
		}
		if (harness_now_ms() >= deadline)
			return false;
		poll(&pfd, 1, 20);
	}
}

bool
daemon_notify_seen(struct daemon *d, const char *what)
{
	if (d->notify_fd >= 0)
		notify_pump(d);
	for (size_t i = 0; i < d->nnotes; i++)
		if (note_has(d->notes[i], what))
			return true;
	return false;
}

/* Whether note has a STATUS= line with text in it. */
static bool
status_has(const char *note, const char *text)
{
	for (const char *p = note; p != NULL && *p != '\0';) {
		const char *end = strchr(p, '\n');
		size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
		char *line = strndup(p, n);
		bool hit;

		ck_assert(line != NULL);
		hit = strncmp(line, "STATUS=", 7) == 0 &&
		    strstr(line, text) != NULL;
		free(line);
		if (hit)
			return true;
		p = end != NULL ? end + 1 : NULL;
	}
	return false;
}

bool
daemon_wait_status(struct daemon *d, const char *text, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;

	if (d->notify_fd < 0)
		return false;
	for (;;) {
		notify_pump(d);
		for (size_t i = 0; i < d->nnotes; i++)
			if (status_has(d->notes[i], text))
				return true;
		if (harness_now_ms() >= deadline || !daemon_is_running(d))
			return false;
		harness_sleep_ms(50);
	}
}

int
daemon_wait_ready(struct daemon *d, int timeout_ms)
{
	if (!daemon_wait_notify(d, "READY=1", timeout_ms))
		return -1;
	parse_listeners(d);
	return 0;
}

struct daemon *
daemon_start(const char *conf, const struct daemon_opts *o)
{
	struct daemon *d = daemon_spawn(conf, o);

	if (daemon_wait_ready(d, HARNESS_READY_MS) < 0) {
		daemon_dump_log(d, 40);
		ck_abort_msg("daemon pid %d: no READY=1 within %d ms (%s)",
		    (int)d->pid, HARNESS_READY_MS, daemon_is_running(d) ?
		    "still running" : "it exited");
	}
	if (d->nls == 0) {
		daemon_dump_log(d, 40);
		ck_abort_msg("daemon ready but no `listening` line in its log");
	}
	return d;
}

int
daemon_port(struct daemon *d, const char *name)
{
	for (size_t i = 0; i < d->nls; i++)
		if (strcmp(d->ls[i].name, name) == 0)
			return d->ls[i].port;
	ck_abort_msg("no listener named %s", name);
	return -1;
}

char *
daemon_log(struct daemon *d)
{
	return read_file(d->log_path, NULL);
}

bool
daemon_log_contains(struct daemon *d, const char *s)
{
	char *log = daemon_log(d);
	bool found = strstr(log, s) != NULL;

	free(log);
	return found;
}

bool
daemon_wait_log(struct daemon *d, const char *s, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		bool running = daemon_is_running(d);

		if (daemon_log_contains(d, s))
			return true;
		if (!running || harness_now_ms() >= deadline)
			return false;
		harness_sleep_ms(10);
	}
}

void
daemon_dump_log(struct daemon *d, int lines)
{
	size_t len;
	char *log = read_file(d->log_path, &len), *p = log + len;

	/* Back up over the last `lines` LFs. */
	if (p > log && p[-1] == '\n')
		p--;
	while (p > log && lines > 0)
		if (*--p == '\n')
			lines--;
	if (*p == '\n')
		p++;
	fprintf(stderr, "---- %s (tail) ----\n%s%s---- end of log ----\n",
	    d->log_path, p, len && log[len - 1] != '\n' ? "\n" : "");
	free(log);
}

void
daemon_rewrite_config(struct daemon *d, const char *conf)
{
	char tmp[320];

	snprintf(tmp, sizeof(tmp), "%s.new", d->conf_path);
	write_file(tmp, conf);
	ck_assert_msg(rename(tmp, d->conf_path) == 0, "rename: %s",
	    strerror(errno));
}

/* Parses a stats line (after "stats "); false if it is not one. */
static bool
parse_stats(const char *line, struct daemon_stats *st)
{
	char copy[2048], *save = NULL;

	memset(st, 0, sizeof(*st));
	if (strncmp(line, "stats ", 6) != 0)
		return false;
	snprintf(st->line, sizeof(st->line), "%s", line);
	snprintf(copy, sizeof(copy), "%s", line + 6);
	for (char *tok = strtok_r(copy, " ", &save); tok != NULL;
	    tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '='), *end;
		unsigned long long v;

		if (eq == NULL)
			continue;
		*eq++ = '\0';
		if (strcmp(tok, "per_reactor") == 0) {
			for (char *p = eq; *p && st->nreactors <
			    HARNESS_MAX_REACTORS; p = *end ? end + 1 : end) {
				st->per_reactor[st->nreactors++] =
				    strtoull(p, &end, 10);
				if (end == p)
					break;
			}
			continue;
		}
		v = strtoull(eq, &end, 10);
		if (end == eq || *end != '\0' ||
		    st->nfields == HARNESS_MAX_FIELDS)
			continue;
		snprintf(st->fields[st->nfields].key,
		    sizeof(st->fields[0].key), "%s", tok);
		st->fields[st->nfields++].value = v;
	}
	st->conns = (unsigned long long)daemon_stats_get(st, "conns");
	st->accepted = (unsigned long long)daemon_stats_get(st, "accepted");
	st->refused_max = (unsigned long long)daemon_stats_get(st,
	    "refused_max");
	st->refused_fd = (unsigned long long)daemon_stats_get(st, "refused_fd");
	st->messages = (unsigned long long)daemon_stats_get(st, "messages");
	st->bytes_in = (unsigned long long)daemon_stats_get(st, "bytes_in");
	st->bytes_out = (unsigned long long)daemon_stats_get(st, "bytes_out");
	return true;
}

long long
daemon_stats_get(const struct daemon_stats *st, const char *key)
{
	for (unsigned i = 0; i < st->nfields; i++)
		if (strcmp(st->fields[i].key, key) == 0)
			return (long long)st->fields[i].value;
	return -1;
}

/* The first whole stats line in log[from..], parsed into st. */
static bool
find_stats(const char *log, size_t from, struct daemon_stats *st)
{
	const char *p = log + from;

	while (*p != '\0') {
		const char *eol = strchr(p, '\n'), *s = p;
		char line[2048];
		size_t n;

		if (eol == NULL)
			return false;	/* half a line: not yet */
		if (*s == '<' && strchr(s, '>') != NULL &&
		    strchr(s, '>') < eol)
			s = strchr(s, '>') + 1;
		n = (size_t)(eol - s);
		if (n < sizeof(line)) {
			memcpy(line, s, n);
			line[n] = '\0';
			if (parse_stats(line, st))
				return true;
		}
		p = eol + 1;
	}
	return false;
}

void
daemon_stats(struct daemon *d, struct daemon_stats *st)
{
	uint64_t deadline = harness_now_ms() + HARNESS_STATS_MS;
	size_t from;
	char *log = read_file(d->log_path, &from);

	free(log);
	ck_assert_msg(daemon_signal(d, SIGUSR1) == 0, "kill SIGUSR1: %s",
	    strerror(errno));
	for (;;) {
		log = daemon_log(d);
		if (strlen(log) >= from && find_stats(log, from, st)) {
			free(log);
			return;
		}
		free(log);
		if (harness_now_ms() >= deadline || !daemon_is_running(d)) {
			daemon_dump_log(d, 20);
			ck_abort_msg("no stats line within %d ms of SIGUSR1",
			    HARNESS_STATS_MS);
		}
		harness_sleep_ms(10);
	}
}

bool
daemon_stats_wait(struct daemon *d, const char *key, unsigned long long value,
    int timeout_ms, struct daemon_stats *st)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		daemon_stats(d, st);
		if (daemon_stats_get(st, key) == (long long)value)
			return true;
		if (harness_now_ms() >= deadline)
			return false;
		harness_sleep_ms(50);
	}
}

long
daemon_rss_kib(struct daemon *d)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

bool
daemon_is_sanitized(struct daemon *d)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	/* The tests are built as the daemon is; a static runtime shows here. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return true;
#endif
#ifdef __has_feature
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
	return true;
#endif
#endif
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)d->pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, "/libasan.so") != NULL ||
		    strstr(line, "/libtsan.so") != NULL;
	fclose(f);
	return found;
}

long long
daemon_cpu_ticks(struct daemon *d)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: start after the last ')'. */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
	    "%llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

int
daemon_signal(struct daemon *d, int sig)
{
	if (!daemon_is_running(d)) {
		errno = ESRCH;
		return -1;
	}
	return kill(d->pid, sig);
}

int
daemon_wait_exit(struct daemon *d, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;

	while (daemon_is_running(d)) {
		if (harness_now_ms() >= deadline)
			return -1;
		harness_sleep_ms(5);
	}
	return status_code(d->wstatus);
}

int
daemon_stop(struct daemon *d, int timeout_ms)
{
	int code;

	if (daemon_is_running(d))
		kill(d->pid, SIGTERM);
	code = daemon_wait_exit(d, timeout_ms);
	if (code < 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &d->wstatus, 0);
		d->reaped = true;
		daemon_dump_log(d, 40);
		ck_abort_msg("daemon pid %d did not exit within %d ms of "
		    "SIGTERM: killed", (int)d->pid, timeout_ms);
	}
	if (code != 0) {
		fprintf(stderr, "harness: daemon pid %d exited with status "
		    "%d\n", (int)d->pid, code);
		daemon_dump_log(d, 60);
	}
	return code;
}

void
daemon_free(struct daemon *d)
{
	if (d == NULL)
		return;
	if (daemon_is_running(d)) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &d->wstatus, 0);
	}
	if (d->notify_fd >= 0)
		close(d->notify_fd);
	for (size_t i = 0; i < d->nnotes; i++)
		free(d->notes[i]);
	free(d->notes);
	rm_tree(d->dir);
	free(d);
}

static void
set_timeouts(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int
make_sockaddr(const char *addr, int port, struct sockaddr_storage *ss,
    socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return 0;
	}
	errno = EINVAL;
	return -1;
}

int
client_connect_addr(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, saved;

	if (make_sockaddr(addr, port, &ss, &len) < 0)
		return -1;
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	set_timeouts(fd, HARNESS_IO_MS);
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

int
client_connect(int port)
{
	int fd = client_connect_addr("127.0.0.1", port);

	ck_assert_msg(fd >= 0, "connect 127.0.0.1:%d: %s", port,
	    strerror(errno));
	return fd;
}

int
client_connect_nb(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, saved;

	if (make_sockaddr(addr, port, &ss, &len) < 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 &&
	    errno != EINPROGRESS) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

int
send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Waits up to the deadline for fd to be readable; false on timeout. */
static bool
wait_readable(int fd, uint64_t deadline)
{
	for (;;) {
		uint64_t now = harness_now_ms();
		struct pollfd pfd = { fd, POLLIN, 0 };
		int r;

		if (now >= deadline)
			return false;
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r > 0)
			return true;
		if (r < 0 && errno != EINTR)
			return true;	/* let the read report it */
	}
}

size_t
recv_exact(int fd, void *p, size_t n, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;
	uint8_t *b = p;
	size_t got = 0;

	while (got < n) {
		ssize_t r;

		if (!wait_readable(fd, deadline))
			break;
		r = recv(fd, b + got, n - got, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

ssize_t
recv_line(int fd, char *buf, size_t cap, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;
	size_t have = 0;

	for (;;) {
		ssize_t n;
		size_t take;
		char *lf;

		if (!wait_readable(fd, deadline))
			return -1;
		/* Peek, so that nothing after the LF is taken from the socket. */
		n = recv(fd, buf + have, cap - 1 - have,
		    MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n == 0 ? 0 : -1;
		/*
		 * Take what was peeked up to the LF, or all of it if there is
		 * none yet. Peeking again at an unfinished line without taking
		 * it once returned the same 17 bytes for 10 s while more was
		 * queued behind them.
		 */
		lf = memchr(buf + have, '\n', (size_t)n);
		take = lf != NULL ? (size_t)(lf - (buf + have)) + 1 : (size_t)n;
		if (recv_exact(fd, buf + have, take, timeout_ms) != take)
			return -1;
		have += take;
		if (lf != NULL) {
			buf[have] = '\0';
			return (ssize_t)have;
		}
		if (have == cap - 1)
			return -1;
	}
}

int
client_wait_closed(int fd, int timeout_ms)
{
	uint64_t deadline = harness_now_ms() + (uint64_t)timeout_ms;
	char buf[65536];

	for (;;) {
		ssize_t r;

		if (!wait_readable(fd, deadline))
			return ETIMEDOUT;
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			return 0;
		if (r < 0 && errno != EINTR && errno != EAGAIN)
			return errno;
	}
}

bool
client_echo_ok(int fd, size_t n)
{
	static uint64_t state = 0x1234;
	uint8_t *out = malloc(n), *in = malloc(n);
	bool ok;

	ck_assert(out != NULL && in != NULL);
	harness_fill(&state, out, n);
	ok = send_all(fd, out, n) == 0 &&
	    recv_exact(fd, in, n, HARNESS_IO_MS) == n &&
	    memcmp(in, out, n) == 0;
	free(out);
	free(in);
	return ok;
}
