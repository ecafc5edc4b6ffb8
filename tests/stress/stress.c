/* stress.c: hostile-client and fault scenarios run against the real daemon. */
/*
 * Usage: stress -b BIN [-w "WRAPPER ARGS"] [-k] SCENARIO
 *
 * Each scenario starts its own echorouterd on loopback ports (port = 0,
 * read back from the daemon's "listening" log lines), drives it with
 * non-blocking clients from one epoll loop per thread, checks what the
 * clients saw and what the daemon reports, stops it with SIGTERM and expects
 * exit status 0. Every wait is bounded. Exit status: 0 pass, 1 fail, 2 usage.
 *
 * Scenarios: churn, slow, fdlimit, sighup, sigterm, valgrind (see README.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_NOTES	25		/* error lines printed, then counted */
#define ID_MIN		1024u		/* message ids are (seq << 10) | reactor */
#define ST_SENT		0		/* ok_id values below ID_MIN */
#define ST_404		404
#define ST_503		503
#define ST_OTHER	1
#define PAT_LEN		65521		/* echo pattern: a prime, so offsets vary */
#define IN_MAX		(1 << 20)

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */

static const char *opt_bin;
static const char *opt_wrap;
static bool opt_keep;
static unsigned long nerrors;		/* failed checks, scenario-wide */
static uint8_t pattern[PAT_LEN];

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A progress or measurement line. */
static void
say(const char *fmt, ...)
{
	va_list ap;

	fputs("  ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* A failed check: counted, and the first MAX_NOTES printed. */
static void
note(const char *fmt, ...)
{
	va_list ap;

	if (++nerrors > MAX_NOTES)
		return;
	fputs("  error: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	if (nerrors == MAX_NOTES)
		fputs("  (further errors counted, not printed)\n", stdout);
	fflush(stdout);
}

static void *
xrealloc(void *p, size_t n)
{
	if ((p = realloc(p, n)) == NULL) {
		fprintf(stderr, "stress: out of memory\n");
		exit(2);
	}
	return p;
}

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (p == NULL) {
		fprintf(stderr, "stress: out of memory\n");
		exit(2);
	}
	return p;
}

static uint32_t
rnd(uint32_t *s)
{
	uint32_t x = *s ? *s : 0x9e3779b9u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Growable byte buffer; data lives at p[off .. off+len). */
struct bytes {
	char	*p;
	size_t	off;
	size_t	len;
	size_t	cap;
};

static void
bytes_reserve(struct bytes *b, size_t more)
{
	if (b->off > 0 && b->off + b->len + more > b->cap) {
		memmove(b->p, b->p + b->off, b->len);
		b->off = 0;
	}
	if (b->len + more > b->cap) {
		b->cap = b->cap ? b->cap * 2 : 4096;
		while (b->cap < b->len + more)
			b->cap *= 2;
		b->p = xrealloc(b->p, b->cap);
	}
}

static void
bytes_add(struct bytes *b, const void *p, size_t n)
{
	bytes_reserve(b, n);
	memcpy(b->p + b->off + b->len, p, n);
	b->len += n;
}

static void
bytes_drop(struct bytes *b, size_t n)
{
	b->off += n;
	b->len -= n;
	if (b->len == 0)
		b->off = 0;
}

static void
bytes_free(struct bytes *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------------ */
/* Sockets                                                             */

static struct sockaddr_in
loopback(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sa;
}

/*
 * Non-blocking socket with connect started; -1 on a hard failure. A
 * rcvbuf > 0 sets SO_RCVBUF; a negative one also announces a small MSS, so
 * that the daemon's kernel keeps a small send buffer for this client (on
 * loopback it otherwise starts at about 1.3 MiB: 10 segments of 64 KiB,
 * doubled) and its own output queue fills sooner.
 */
static int
connect_start(int port, int rcvbuf)
{
	struct sockaddr_in sa = loopback(port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int mss = 536;

	if (fd < 0)
		return -1;
	if (rcvbuf < 0) {
		rcvbuf = -rcvbuf;
		setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof(mss));
	}
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Waits for fd to be ready for events; 1 ready, 0 timeout, -1 error. */
static int
wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return n;
}

/* Non-blocking connected socket, connect finished within ms; or -1. */
static int
connect_wait(int port, int rcvbuf, int ms)
{
	int fd = connect_start(port, rcvbuf), err = 0;
	socklen_t sl = sizeof(err);

	if (fd < 0)
		return -1;
	if (wait_fd(fd, POLLOUT, ms) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0 || err != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Closes with an RST instead of a FIN. */
static void
close_rst(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* Writes all of p within ms (fd non-blocking); 0 or -1. */
static int
send_all(int fd, const void *p, size_t n, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	const char *c = p;

	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w > 0) {
			c += w;
			n -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			return -1;
		} else if (now_ms() >= end ||
		    wait_fd(fd, POLLOUT, (int)(end - now_ms())) < 0) {
			return -1;
		}
	}
	return 0;
}

/*
 * Reads one line (without its LF) into buf within ms from a non-blocking
 * fd, byte by byte so that nothing after it is consumed. Returns its
 * length, or -1 on EOF, error or timeout.
 */
static int
recv_line(int fd, char *buf, size_t len, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = recv(fd, buf + n, 1, 0);

		if (r == 1) {
			if (buf[n] == '\n') {
				buf[n] = '\0';
				return (int)n;
			}
			n++;
		} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
			return -1;
		} else if (now_ms() >= end ||
		    wait_fd(fd, POLLIN, (int)(end - now_ms())) < 0) {
			return -1;
		}
	}
	return -1;
}

/* ------------------------------------------------------------------ */
/* The daemon under test                                               */

struct daemon {
	pid_t	pid;
	bool	reaped;
	int	status;			/* exit code, or 128 + signal */
	char	dir[256];
	char	conf[300];
	char	log[300];
	char	vglog[300];
	int	echo_port;
	int	router_port;
	char	stats[2048];		/* the last stats line */
};

static int
write_file(const char *path, const char *text)
{
	char tmp[400];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	if ((f = fopen(tmp, "w")) == NULL)
		return -1;
	fputs(text, f);
	if (fclose(f) != 0)
		return -1;
	/* Renamed into place: a reload never reads half a file. */
	return rename(tmp, path);
}

/* The whole log, NUL-terminated (caller frees); "" if unreadable. */
static char *
read_log(const struct daemon *d)
{
	FILE *f = fopen(d->log, "r");
	char *s = NULL;
	size_t n = 0, cap = 0, r;

	do {
		if (cap - n < 65536)
			s = xrealloc(s, cap = cap * 2 + 65536);
		r = f != NULL ? fread(s + n, 1, cap - n - 1, f) : 0;
		n += r;
	} while (r > 0);
	s[n] = '\0';
	if (f != NULL)
		fclose(f);
	return s;
}

static unsigned
count_in(const char *s, const char *needle)
{
	unsigned n = 0;

	while ((s = strstr(s, needle)) != NULL) {
		n++;
		s += strlen(needle);
	}
	return n;
}

static unsigned
log_count(const struct daemon *d, const char *needle)
{
	char *s = read_log(d);
	unsigned n = count_in(s, needle);

	free(s);
	return n;
}

/* Splits WRAP on spaces into argv, then BIN -c CONF. */
static void
exec_daemon(const struct daemon *d)
{
	char *argv[64], *w = opt_wrap ? strdup(opt_wrap) : NULL, *save = NULL;
	int n = 0;

	for (char *t = w ? strtok_r(w, " ", &save) : NULL; t != NULL && n < 56;
	    t = strtok_r(NULL, " ", &save)) {
		if (strncmp(t, "--log-file=", 11) == 0)
			continue;	/* we choose where valgrind writes */
		argv[n++] = t;
	}
	if (n > 0) {
		static char vl[340];

		snprintf(vl, sizeof(vl), "--log-file=%s", d->vglog);
		argv[n++] = vl;
	}
	argv[n++] = (char *)opt_bin;
	argv[n++] = "-c";
	argv[n++] = (char *)d->conf;
	argv[n] = NULL;
	execvp(argv[0], argv);
	fprintf(stderr, "stress: exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static void
child_setup(const struct daemon *d, rlim_t nofile)
{
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (nofile > 0) {
		struct rlimit rl = { nofile, nofile };

		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(126);
	}
	if ((fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0)
		_exit(126);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if ((fd = open("/dev/null", O_RDONLY)) >= 0)
		dup2(fd, STDIN_FILENO);
	closefrom(3);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	unsetenv("JOURNAL_STREAM");
}

/* Finds "listening name=NAME ... port=N" in the log; 0 if absent. */
static int
log_port(const char *log, const char *name)
{
	char key[64];
	const char *p, *q;

	snprintf(key, sizeof(key), "listening name=%s ", name);
	if ((p = strstr(log, key)) == NULL)
		return 0;
	q = strchr(p, '\n');
	p = strstr(p, " port=");
	if (p == NULL || (q != NULL && p > q))
		return 0;
	return atoi(p + 6);
}

static bool daemon_reap(struct daemon *d, int ms);

/* Starts the daemon on conf and waits (bounded) until it has started. */
static int
daemon_start(struct daemon *d, const char *name, const char *conf,
    rlim_t nofile)
{
	const char *tmp = getenv("TMPDIR");
	uint64_t end;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "%s/echorouterd-stress-%s-XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp", name);
	if (mkdtemp(d->dir) == NULL) {
		note("mkdtemp %s: %s", d->dir, strerror(errno));
		return -1;
	}
	snprintf(d->conf, sizeof(d->conf), "%s/echorouterd.conf", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	snprintf(d->vglog, sizeof(d->vglog), "%s/valgrind.log", d->dir);
	say("work dir %s", d->dir);
	if (write_file(d->conf, conf) < 0) {
		note("cannot write %s: %s", d->conf, strerror(errno));
		return -1;
	}
	fflush(NULL);
	if ((d->pid = fork()) < 0) {
		note("fork: %s", strerror(errno));
		return -1;
	}
	if (d->pid == 0) {
		child_setup(d, nofile);
		exec_daemon(d);
	}
	/* Valgrind takes its time to start: allow for it. */
	end = now_ms() + (opt_wrap != NULL ? 60000 : 15000);
	while (now_ms() < end) {
		char *log = read_log(d);
		bool started = strstr(log, " started: ") != NULL;

		d->echo_port = log_port(log, "echo");
		d->router_port = log_port(log, "router");
		free(log);
		if (started && d->echo_port > 0 && d->router_port > 0)
			return 0;
		if (daemon_reap(d, 0)) {
			note("daemon exited at start with status %d", d->status);
			return -1;
		}
		sleep_ms(20);
	}
	note("daemon did not log its start in time (see %s)", d->log);
	return -1;
}

/* Reaps the daemon if it exits within ms; true once reaped. */
static bool
daemon_reap(struct daemon *d, int ms)
{
	uint64_t end = now_ms() + (uint64_t)(ms > 0 ? ms : 0);
	int st;

	for (;;) {
		pid_t p;

		if (d->reaped || d->pid <= 0)
			return d->reaped;
		p = waitpid(d->pid, &st, WNOHANG);
		if (p == d->pid) {
			d->reaped = true;
			d->status = WIFEXITED(st) ? WEXITSTATUS(st) :
			    128 + WTERMSIG(st);
			return true;
		}
		if (now_ms() >= end)
			return false;
		sleep_ms(10);
	}
}

static void
daemon_signal(struct daemon *d, int sig)
{
	if (!d->reaped && d->pid > 0)
		kill(d->pid, sig);
}

/* SIGTERM, then the exit status within ms; -1 (and SIGKILL) if none. */
static int
daemon_stop(struct daemon *d, int ms)
{
	daemon_signal(d, SIGTERM);
	if (daemon_reap(d, ms))
		return d->status;
	note("daemon did not exit within %d ms of SIGTERM; killed", ms);
	daemon_signal(d, SIGKILL);
	daemon_reap(d, 5000);
	return -1;
}

/* Ends the daemon if a scenario left it running, and tidies up. */
static void
daemon_cleanup(struct daemon *d, bool pass)
{
	if (d->pid > 0 && !d->reaped) {
		daemon_signal(d, SIGKILL);
		daemon_reap(d, 5000);
	}
	if (pass && !opt_keep && d->dir[0] != '\0') {
		unlink(d->conf);
		unlink(d->log);
		unlink(d->vglog);
		rmdir(d->dir);
	} else if (d->dir[0] != '\0') {
		say("kept %s (daemon.log%s)", d->dir,
		    opt_wrap ? ", valgrind.log" : "");
	}
}

/* A "Key:   N kB" value from /proc/PID/status; -1 if unknown. */
static long
daemon_status_kb(const struct daemon *d, const char *key)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, kl) == 0 && line[kl] == ':')
			v = atol(line + kl + 1);
	fclose(f);
	return v;
}

/* utime + stime of the whole process, in clock ticks; -1 if unknown. */
static long
daemon_cpu_ticks(const struct daemon *d)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name: state is 3, utime 14, stime 15. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

/*
 * Asks for a stats line (SIGUSR1) and waits for it, bounded; the caller's
 * loop is not served meanwhile, so call it when load is quiet.
 */
static int
daemon_stats(struct daemon *d)
{
	unsigned before = log_count(d, "stats conns=");
	uint64_t end = now_ms() + (opt_wrap ? 20000 : 5000);

	daemon_signal(d, SIGUSR1);
	while (now_ms() < end) {
		char *log = read_log(d), *p = NULL, *q;

		if (count_in(log, "stats conns=") > before) {
			for (q = strstr(log, "stats conns="); q != NULL;
			    q = strstr(q + 1, "stats conns="))
				p = q;
			q = strchr(p, '\n');
			snprintf(d->stats, sizeof(d->stats), "%.*s",
			    (int)(q ? q - p : (long)strlen(p)), p);
			free(log);
			return 0;
		}
		free(log);
		sleep_ms(20);
	}
	note("no stats line within the time after SIGUSR1");
	return -1;
}

/* A numeric field of the last stats line; -1 if absent. */
static long long
stats_field(const struct daemon *d, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), " %s=", key);
	if ((p = strstr(d->stats, k)) == NULL)
		return -1;
	return atoll(p + strlen(k));
}

/* ------------------------------------------------------------------ */
/* Event loop                                                          */

struct ev;
typedef void ev_fn(struct ev *, uint32_t);

struct ev {
	ev_fn	*fn;
	int	fd;
	uint32_t events;		/* current interest */
	int	ep;
};

static int
ev_add(int ep, struct ev *e, int fd, ev_fn *fn, uint32_t events)
{
	struct epoll_event ee = { .events = events, .data.ptr = e };

	e->fn = fn;
	e->fd = fd;
	e->ep = ep;
	e->events = events;
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ee);
}

static void
ev_mod(struct ev *e, uint32_t events)
{
	struct epoll_event ee = { .events = events, .data.ptr = e };

	if (e->fd < 0 || e->events == events)
		return;
	e->events = events;
	epoll_ctl(e->ep, EPOLL_CTL_MOD, e->fd, &ee);
}

/* Closing the fd removes it from the epoll set. */
static void
ev_close(struct ev *e, bool rst)
{
	if (e->fd < 0)
		return;
	if (rst)
		close_rst(e->fd);
	else
		close(e->fd);
	e->fd = -1;
}

static void
loop_poll(int ep, int ms)
{
	struct epoll_event evs[256];
	int n = epoll_wait(ep, evs, 256, ms);

	for (int i = 0; i < n; i++) {
		struct ev *e = evs[i].data.ptr;

		if (e->fd >= 0)
			e->fn(e, evs[i].events);
	}
}

/* ------------------------------------------------------------------ */
/* Well-behaved clients ("peers") whose every byte is checked          */

/*
 * Router peer i logs in as s<i> and sends to peers i+off[k] (k < K), one
 * sequence per (sender, k) pair. A message's text is "<seq>:<src>.<k>:"
 * and a filler whose length and letters follow from seq, so the receiver
 * rebuilds and compares it. The sender keeps the id each SEND was answered
 * with, the receiver the id each MSG came with; at the end they must agree.
 */
#define K_MAX		4

enum cmd_kind { CMD_LOGIN, CMD_SEND, CMD_PING };

struct cmd {
	uint8_t	kind;
	uint8_t	k;
	uint32_t seq;
};

struct pair {
	uint32_t next_seq;		/* last seq sent */
	uint32_t rcv_last;		/* last seq received */
	uint32_t cap;
	uint64_t *ok_id;		/* [seq]: id, or ST_* below ID_MIN */
	uint64_t *rcv_id;		/* [seq]: id it came with, 0: not yet */
};

struct rpeer {
	struct ev ev;
	struct peers *ps;
	int	idx;
	bool	logged_in;
	bool	wdead;			/* a write failed: only read now */
	bool	gone;			/* EOF or error seen */
	bool	lazy;			/* reads in bursts, small receive buffer */
	bool	napping;		/* lazy and not reading just now */
	struct bytes in;
	struct bytes out;
	struct cmd *q;			/* commands awaiting replies, a ring */
	unsigned qcap, qhead, qn;
	unsigned rr;
	uint32_t pings;
	struct pair pairs[K_MAX];
};

struct epeer {
	struct ev ev;
	struct peers *ps;
	int	idx;
	bool	wdead;
	bool	gone;
	uint32_t rng;
	uint64_t sent;
	uint64_t rcvd;
	struct bytes out;
};

struct peers {
	int	ep;
	int	nr, ne, K;
	int	off[K_MAX];
	unsigned window;		/* commands in flight per router peer */
	size_t	echo_window;		/* bytes in flight per echo peer */
	bool	sending;
	bool	eof_ok;			/* shutting down: EOF is expected */
	/*
	 * A recipient that reads in bursts may have a full queue: "ERR 503
	 * <id> recipient busy" is then the daemon's back-pressure, not a
	 * failure (the check that such a SEND was not delivered still holds).
	 */
	bool	busy_ok;
	uint64_t nbusy;
	int	lazy_every;		/* every Nth router peer is lazy; 0 none */
	struct rpeer *r;
	struct epeer *e;
	uint64_t nsend, nok, nerr, nrcv, nforeign, npong;
};

static void
pair_grow(struct pair *p, uint32_t seq)
{
	uint32_t n = p->cap ? p->cap : 4096;

	while (n <= seq)
		n *= 2;
	p->ok_id = xrealloc(p->ok_id, n * sizeof(*p->ok_id));
	p->rcv_id = xrealloc(p->rcv_id, n * sizeof(*p->rcv_id));
	memset(p->ok_id + p->cap, 0, (n - p->cap) * sizeof(*p->ok_id));
	memset(p->rcv_id + p->cap, 0, (n - p->cap) * sizeof(*p->rcv_id));
	p->cap = n;
}

static int
msg_text(char *buf, size_t len, uint32_t seq, int src, int k)
{
	int n = snprintf(buf, len, "%u:%d.%d:", seq, src, k);
	int fill = (int)((seq * 13u + (unsigned)src) % 90);

	for (int i = 0; i < fill && (size_t)n + 1 < len; i++)
		buf[n++] = (char)('a' + (seq + (unsigned)i) % 26);
	buf[n] = '\0';
	return n;
}

static void
cmd_push(struct rpeer *p, enum cmd_kind kind, int k, uint32_t seq)
{
	if (p->qn == p->qcap) {
		unsigned n = p->qcap ? p->qcap * 2 : 64;
		struct cmd *q = xcalloc(n, sizeof(*q));

		for (unsigned i = 0; i < p->qn; i++)
			q[i] = p->q[(p->qhead + i) % p->qcap];
		free(p->q);
		p->q = q;
		p->qcap = n;
		p->qhead = 0;
	}
	p->q[(p->qhead + p->qn++) % p->qcap] = (struct cmd){
		.kind = (uint8_t)kind, .k = (uint8_t)k, .seq = seq };
}

static bool
cmd_pop(struct rpeer *p, struct cmd *c)
{
	if (p->qn == 0)
		return false;
	*c = p->q[p->qhead];
	p->qhead = (p->qhead + 1) % p->qcap;
	p->qn--;
	return true;
}

static void
rpeer_send_one(struct rpeer *p)
{
	struct peers *ps = p->ps;
	char text[160], line[256];
	int k = (int)(p->rr++ % (unsigned)ps->K), n;
	struct pair *pr = &p->pairs[k];
	uint32_t seq;

	if (p->rr % 64 == 0) {
		n = snprintf(line, sizeof(line), "PING t%u\n", ++p->pings);
		bytes_add(&p->out, line, (size_t)n);
		cmd_push(p, CMD_PING, 0, p->pings);
		return;
	}
	seq = ++pr->next_seq;
	if (seq >= pr->cap)
		pair_grow(pr, seq);
	msg_text(text, sizeof(text), seq, p->idx, k);
	n = snprintf(line, sizeof(line), "SEND s%d %s\n",
	    (p->idx + ps->off[k]) % ps->nr, text);
	bytes_add(&p->out, line, (size_t)n);
	cmd_push(p, CMD_SEND, k, seq);
	ps->nsend++;
}

/* Writes what is queued; false if the connection is gone. */
static bool
out_flush(struct ev *e, struct bytes *out)
{
	while (out->len > 0) {
		ssize_t w = send(e->fd, out->p + out->off, out->len,
		    MSG_NOSIGNAL);

		if (w > 0)
			bytes_drop(out, (size_t)w);
		else if (w < 0 && errno == EINTR)
			continue;
		else
			return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	}
	return true;
}

static void
rpeer_gone(struct rpeer *p, const char *why)
{
	if (!p->ps->eof_ok)
		note("router peer s%d: connection %s", p->idx, why);
	p->gone = true;
	ev_close(&p->ev, false);
}

static void
rpeer_pump(struct rpeer *p)
{
	struct peers *ps = p->ps;

	while (ps->sending && p->logged_in && !p->gone && !p->wdead &&
	    p->qn < ps->window && p->out.len < 32768)
		rpeer_send_one(p);
	if (p->gone)
		return;
	if (!p->wdead && !out_flush(&p->ev, &p->out)) {
		/* What the daemon already sent is still to be read. */
		if (!ps->eof_ok)
			note("s%d: write failed: %s", p->idx, strerror(errno));
		p->wdead = true;
		bytes_free(&p->out);
	}
	ev_mod(&p->ev, (p->napping ? 0 : EPOLLIN) |
	    (p->out.len > 0 && !p->wdead ? EPOLLOUT : 0));
}

/* "MSG <id> <from> <text>" pushed to peer p. */
static void
rpeer_msg(struct rpeer *p, char *s)
{
	struct peers *ps = p->ps;
	char *from, *text, want[160];
	unsigned long long id = strtoull(s, &from, 10);
	unsigned seq;
	int src, k, kk;

	if (*from++ != ' ' || (text = strchr(from, ' ')) == NULL) {
		note("s%d: malformed MSG line", p->idx);
		return;
	}
	*text++ = '\0';
	if (from[0] != 's') {
		ps->nforeign++;		/* from a hostile client: not ours */
		return;
	}
	src = atoi(from + 1);
	if (sscanf(text, "%u:%d.%d:", &seq, &kk, &k) != 3 || kk != src ||
	    src < 0 || src >= ps->nr || k < 0 || k >= ps->K ||
	    (src + ps->off[k]) % ps->nr != p->idx) {
		note("s%d: MSG from %s with unexpected text \"%.40s\"", p->idx,
		    from, text);
		return;
	}
	struct pair *pr = &ps->r[src].pairs[k];

	msg_text(want, sizeof(want), seq, src, k);
	if (strcmp(want, text) != 0)
		note("s%d: MSG %llu from %s: text corrupted", p->idx, id, from);
	else if (seq > pr->next_seq || seq == 0)
		note("s%d: MSG %llu from %s: seq %u never sent", p->idx, id,
		    from, seq);
	else if (seq <= pr->rcv_last)
		note("s%d: MSG %llu from %s: seq %u after %u (%s)", p->idx, id,
		    from, seq, pr->rcv_last, pr->rcv_id[seq] ? "duplicate" :
		    "out of order");
	else if (pr->ok_id[seq] >= ID_MIN && pr->ok_id[seq] != id)
		note("s%d: MSG id %llu but the SEND was answered OK %llu",
		    p->idx, id, (unsigned long long)pr->ok_id[seq]);
	else {
		pr->rcv_last = seq;
		pr->rcv_id[seq] = id;
		ps->nrcv++;
	}
}

/* The reply to a SEND: "OK <id>", "ERR 404 <id> ...", "ERR 503 <id> ...". */
static void
rpeer_verdict(struct rpeer *p, const struct cmd *c, const char *line)
{
	struct peers *ps = p->ps;
	struct pair *pr = &p->pairs[c->k];
	unsigned long long id;
	int code = 0;

	if (sscanf(line, "OK %llu", &id) == 1 && id >= ID_MIN) {
		if (pr->rcv_id[c->seq] != 0 && pr->rcv_id[c->seq] != id)
			note("s%d: SEND answered OK %llu, delivered as %llu",
			    p->idx, id,
			    (unsigned long long)pr->rcv_id[c->seq]);
		pr->ok_id[c->seq] = id;
		ps->nok++;
		return;
	}
	ps->nerr++;
	if (sscanf(line, "ERR %d %llu", &code, &id) == 2 &&
	    (code == 404 || code == 503))
		pr->ok_id[c->seq] = (uint64_t)code;
	else
		pr->ok_id[c->seq] = ST_OTHER;
	if (ps->busy_ok && code == 503 && strstr(line, " recipient busy")) {
		ps->nbusy++;
		return;
	}
	if (!ps->eof_ok)
		note("s%d: SEND to s%d answered \"%.60s\"", p->idx,
		    (p->idx + ps->off[c->k]) % ps->nr, line);
}

static void
rpeer_line(struct rpeer *p, char *line)
{
	char want[64];
	struct cmd c;

	if (strncmp(line, "MSG ", 4) == 0) {
		rpeer_msg(p, line + 4);
		return;
	}
	if (!cmd_pop(p, &c)) {
		note("s%d: reply with no command: \"%.60s\"", p->idx, line);
		return;
	}
	switch (c.kind) {
	case CMD_LOGIN:
		snprintf(want, sizeof(want), "OK LOGIN s%d", p->idx);
		if (strcmp(line, want) != 0)
			note("s%d: LOGIN answered \"%.60s\"", p->idx, line);
		p->logged_in = true;
		break;
	case CMD_PING:
		snprintf(want, sizeof(want), "PONG t%u", c.seq);
		if (strcmp(line, want) != 0)
			note("s%d: PING t%u answered \"%.60s\"", p->idx, c.seq,
			    line);
		p->ps->npong++;
		break;
	default:
		rpeer_verdict(p, &c, line);
	}
}

/* Reads what there is; returns false once the connection is gone. */
static bool
read_some(struct ev *e, struct bytes *in, const char **why)
{
	for (int budget = 8; budget > 0; budget--) {
		ssize_t n;

		bytes_reserve(in, 65536);
		n = recv(e->fd, in->p + in->off + in->len, 65536, 0);
		if (n > 0) {
			in->len += (size_t)n;
			if (n < 65536)
				return true;
		} else if (n == 0) {
			*why = "closed by the daemon (EOF)";
			return false;
		} else if (errno == EAGAIN || errno == EINTR) {
			return true;
		} else {
			*why = errno == ECONNRESET ? "reset by the daemon" :
			    "failed on read";
			return false;
		}
	}
	return true;
}

static void
rpeer_io(struct ev *e, uint32_t events)
{
	struct rpeer *p = (struct rpeer *)e;
	const char *why = NULL;
	bool alive = true;
	char *lf;

	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		alive = read_some(e, &p->in, &why);
	while ((lf = memchr(p->in.p + p->in.off, '\n', p->in.len)) != NULL) {
		size_t n = (size_t)(lf - (p->in.p + p->in.off));

		*lf = '\0';
		rpeer_line(p, p->in.p + p->in.off);
		bytes_drop(&p->in, n + 1);
	}
	if (p->in.len > IN_MAX)
		note("s%d: a line longer than %d bytes", p->idx, IN_MAX);
	if (!alive) {
		if (p->in.len > 0 && !p->ps->eof_ok)
			note("s%d: partial line at close", p->idx);
		rpeer_gone(p, why);
		return;
	}
	rpeer_pump(p);
}

static void
epeer_gone(struct epeer *p, const char *why)
{
	if (!p->ps->eof_ok)
		note("echo peer %d: connection %s", p->idx, why);
	p->gone = true;
	ev_close(&p->ev, false);
}

static void
epeer_pump(struct epeer *p)
{
	struct peers *ps = p->ps;

	while (ps->sending && !p->gone && !p->wdead &&
	    p->sent - p->rcvd < ps->echo_window) {
		size_t n = 1 + rnd(&p->rng) % 4096;
		size_t at = (size_t)((p->sent + (uint64_t)p->idx * 131) %
		    PAT_LEN);

		if (n > PAT_LEN - at)
			n = PAT_LEN - at;
		bytes_add(&p->out, pattern + at, n);
		p->sent += n;
	}
	if (p->gone)
		return;
	if (!p->wdead && !out_flush(&p->ev, &p->out)) {
		if (!ps->eof_ok)
			note("echo peer %d: write failed: %s", p->idx,
			    strerror(errno));
		p->wdead = true;
		/* Bytes never sent will not come back. */
		p->sent -= p->out.len;
		bytes_free(&p->out);
	}
	ev_mod(&p->ev, EPOLLIN | (p->out.len > 0 ? EPOLLOUT : 0));
}

/* Compares n echoed bytes with what was sent at the same offset. */
static void
epeer_check(struct epeer *p, const uint8_t *b, size_t n)
{
	if (p->rcvd + n > p->sent) {
		note("echo peer %d: %zu bytes more than sent", p->idx,
		    (size_t)(p->rcvd + n - p->sent));
		n = (size_t)(p->sent - p->rcvd);
	}
	while (n > 0) {
		size_t at = (size_t)((p->rcvd + (uint64_t)p->idx * 131) %
		    PAT_LEN);
		size_t m = n < PAT_LEN - at ? n : PAT_LEN - at;

		if (memcmp(b, pattern + at, m) != 0) {
			note("echo peer %d: wrong bytes near offset %llu",
			    p->idx, (unsigned long long)p->rcvd);
			p->rcvd = p->sent;	/* report once */
			return;
		}
		p->rcvd += m;
		b += m;
		n -= m;
	}
}

static void
epeer_io(struct ev *e, uint32_t events)
{
	struct epeer *p = (struct epeer *)e;
	uint8_t buf[65536];

	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (int budget = 8; budget > 0; budget--) {
			ssize_t n = recv(e->fd, buf, sizeof(buf), 0);

			if (n > 0) {
				epeer_check(p, buf, (size_t)n);
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			epeer_gone(p, n == 0 ? "closed by the daemon (EOF)" :
			    "reset or failed on read");
			return;
		}
	}
	epeer_pump(p);
}

static struct peers *
peers_new(int nr, int ne, int K)
{
	static const int offs[K_MAX] = { 1, 2, 5, 11 };
	struct peers *ps = xcalloc(1, sizeof(*ps));

	ps->ep = epoll_create1(EPOLL_CLOEXEC);
	ps->nr = nr;
	ps->ne = ne;
	ps->K = K < K_MAX ? K : K_MAX;
	for (int k = 0; k < ps->K; k++)
		ps->off[k] = offs[k] % (nr > 1 ? nr : 2);
	ps->window = 32;
	ps->echo_window = 65536;
	ps->r = xcalloc((size_t)nr + 1, sizeof(*ps->r));
	ps->e = xcalloc((size_t)ne + 1, sizeof(*ps->e));
	return ps;
}

/* Connects every peer and logs the router ones in; 0 when all are in. */
static int
peers_connect(struct peers *ps, const struct daemon *d)
{
	uint64_t end = now_ms() + (opt_wrap ? 60000 : 15000);
	int in = 0;

	for (int i = 0; i < ps->nr; i++) {
		struct rpeer *p = &ps->r[i];
		char line[64];
		bool lazy = ps->lazy_every > 0 && i % ps->lazy_every == 0;
		int fd = connect_wait(d->router_port, lazy ? 8192 : 0, 5000);

		p->ps = ps;
		p->idx = i;
		p->lazy = lazy;
		p->ev.fd = -1;
		if (fd < 0 || ev_add(ps->ep, &p->ev, fd, rpeer_io, EPOLLIN)) {
			note("router peer %d cannot connect", i);
			return -1;
		}
		snprintf(line, sizeof(line), "LOGIN s%d\n", i);
		bytes_add(&p->out, line, strlen(line));
		cmd_push(p, CMD_LOGIN, 0, 0);
		rpeer_pump(p);
	}
	for (int i = 0; i < ps->ne; i++) {
		struct epeer *p = &ps->e[i];
		int fd = connect_wait(d->echo_port, 0, 5000);

		p->ps = ps;
		p->idx = i;
		p->rng = 7919u * (uint32_t)(i + 1);
		p->ev.fd = -1;
		if (fd < 0 || ev_add(ps->ep, &p->ev, fd, epeer_io, EPOLLIN)) {
			note("echo peer %d cannot connect", i);
			return -1;
		}
	}
	while (now_ms() < end && in < ps->nr) {
		loop_poll(ps->ep, 20);
		in = 0;
		for (int i = 0; i < ps->nr; i++)
			in += ps->r[i].logged_in;
	}
	if (in < ps->nr)
		note("only %d of %d router peers logged in", in, ps->nr);
	return in == ps->nr ? 0 : -1;
}

/* Starts or restarts traffic on every peer. */
static void
peers_kick(struct peers *ps)
{
	for (int i = 0; i < ps->nr; i++)
		if (!ps->r[i].gone)
			rpeer_pump(&ps->r[i]);
	for (int i = 0; i < ps->ne; i++)
		if (!ps->e[i].gone)
			epeer_pump(&ps->e[i]);
}

static bool
peers_quiet(const struct peers *ps)
{
	for (int i = 0; i < ps->nr; i++)
		if (!ps->r[i].gone && (ps->r[i].qn > 0 || ps->r[i].out.len))
			return false;
	for (int i = 0; i < ps->ne; i++)
		if (!ps->e[i].gone && ps->e[i].rcvd < ps->e[i].sent)
			return false;
	return ps->nrcv >= ps->nok;
}

/* Lazy peers take turns: half of them read while the others nap. */
static void
peers_nap(struct peers *ps, unsigned turn)
{
	for (int i = 0; i < ps->nr; i++) {
		struct rpeer *p = &ps->r[i];

		if (!p->lazy || p->gone)
			continue;
		p->napping = (turn + (unsigned)i / (unsigned)ps->lazy_every) %
		    2 == 0;
		rpeer_pump(p);
	}
}

/* Stops new traffic and waits (bounded) for every answer and message. */
static void
peers_drain(struct peers *ps, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	ps->sending = false;
	for (int i = 0; i < ps->nr; i++)
		ps->r[i].napping = false;
	while (!peers_quiet(ps) && now_ms() < end)
		loop_poll(ps->ep, 20);
	if (!peers_quiet(ps))
		note("traffic did not drain within %d ms", ms);
}

/* True once every peer has seen its connection end. */
static bool
peers_all_gone(const struct peers *ps)
{
	for (int i = 0; i < ps->nr; i++)
		if (!ps->r[i].gone)
			return false;
	for (int i = 0; i < ps->ne; i++)
		if (!ps->e[i].gone)
			return false;
	return true;
}

struct tally {
	uint64_t sent, ok, err, unanswered, delivered, lost, bad;
};

/* Reports a run of bad seqs [from, to] of one pair, once. */
static void
pair_report(int src, int dst, const char *what, uint32_t n, uint32_t from,
    uint32_t to)
{
	if (n > 0)
		note("s%d -> s%d: %u SENDs %s (seq %u..%u)", src, dst, n, what,
		    from, to);
}

/* One pair's sequence: what was answered against what arrived. */
static void
pair_check(const struct peers *ps, int src, int k, bool strict,
    struct tally *t)
{
	const struct pair *pr = &ps->r[src].pairs[k];
	int dst = (src + ps->off[k]) % ps->nr;
	uint32_t nlost = 0, nbad = 0, nun = 0, f[3] = { 0 }, l[3] = { 0 };

	for (uint32_t s = 1; s <= pr->next_seq; s++) {
		uint64_t ok = pr->ok_id[s], got = pr->rcv_id[s];
		int bad = -1;

		t->sent++;
		t->delivered += got != 0;
		if (ok >= ID_MIN) {
			t->ok++;
			if (got != ok) {
				t->lost++;
				nlost++;
				bad = 0;
			}
		} else if (ok == ST_SENT) {
			t->unanswered++;
			if (strict) {
				nun++;
				bad = 1;
			}
		} else {
			t->err++;
			if (got != 0) {
				t->bad++;
				nbad++;
				bad = 2;
			}
		}
		if (bad >= 0) {
			f[bad] = f[bad] ? f[bad] : s;
			l[bad] = s;
		}
	}
	pair_report(src, dst, "answered OK but never delivered (with that "
	    "id)", nlost, f[0], l[0]);
	pair_report(src, dst, "never answered", nun, f[1], l[1]);
	pair_report(src, dst, "answered ERR but delivered", nbad, f[2], l[2]);
}

/*
 * Strict: every SEND answered OK and delivered once with its id, every echo
 * byte back. Otherwise (shutdown): OK implies delivered, ERR implies not.
 */
static void
peers_verify(struct peers *ps, bool strict, struct tally *t)
{
	uint64_t ebytes = 0, eback = 0;

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < ps->nr; i++)
		for (int k = 0; k < ps->K; k++)
			pair_check(ps, i, k, strict, t);
	for (int i = 0; i < ps->ne; i++) {
		ebytes += ps->e[i].sent;
		eback += ps->e[i].rcvd;
		if (strict && ps->e[i].rcvd != ps->e[i].sent)
			note("echo peer %d: %llu of %llu bytes came back", i,
			    (unsigned long long)ps->e[i].rcvd,
			    (unsigned long long)ps->e[i].sent);
	}
	say("router: %llu SENDs, %llu OK, %llu ERR, %llu unanswered, %llu "
	    "delivered, %llu lost; %llu PONGs; echo: %llu of %llu bytes back",
	    (unsigned long long)t->sent, (unsigned long long)t->ok,
	    (unsigned long long)t->err, (unsigned long long)t->unanswered,
	    (unsigned long long)t->delivered, (unsigned long long)t->lost,
	    (unsigned long long)ps->npong, (unsigned long long)eback,
	    (unsigned long long)ebytes);
	if (strict && t->err > 0)
		note("%llu SENDs answered with an error",
		    (unsigned long long)t->err);
}

static void
peers_free(struct peers *ps)
{
	for (int i = 0; i < ps->nr; i++) {
		struct rpeer *p = &ps->r[i];

		ev_close(&p->ev, false);
		bytes_free(&p->in);
		bytes_free(&p->out);
		free(p->q);
		for (int k = 0; k < K_MAX; k++) {
			free(p->pairs[k].ok_id);
			free(p->pairs[k].rcv_id);
		}
	}
	for (int i = 0; i < ps->ne; i++) {
		ev_close(&ps->e[i].ev, false);
		bytes_free(&ps->e[i].out);
	}
	close(ps->ep);
	free(ps->r);
	free(ps->e);
	free(ps);
}

/* ------------------------------------------------------------------ */
/* Hostile churn: connect, maybe talk, reset; in a thread of its own   */

enum churn_mode {
	CH_RST,			/* reset as soon as connected */
	CH_ECHO_RST,		/* send echo bytes, reset */
	CH_ECHO_WAIT,		/* send echo bytes, reset on the first reply */
	CH_ROUTER_RST,		/* log in, send to peers and churners, reset */
	CH_ROUTER_WAIT,		/* the same, reset on the first reply */
	CH_HALF_LINE,		/* half a line, reset */
	CH_MODES
};

struct churner {
	struct ev ev;
	struct churn *ch;
	int	mode;
	bool	waiting;		/* for a reply, after connecting */
	uint64_t deadline;
};

struct churn {
	int	ep;
	int	conc;
	int	echo_port, router_port, npeers;
	unsigned pace_ms;		/* 0: as fast as it goes */
	atomic_bool stop;		/* set by the main thread */
	uint32_t rng;
	unsigned next_id;
	struct churner *c;
	pthread_t thread;
	/* results */
	uint64_t cycles, connect_fail, dropped, stuck;
};

static void churner_io(struct ev *e, uint32_t events);

static void
churner_start(struct churner *c)
{
	struct churn *ch = c->ch;
	int mode = (int)(rnd(&ch->rng) % CH_MODES);
	bool router = mode >= CH_ROUTER_RST;
	int fd = connect_start(router ? ch->router_port : ch->echo_port, 0);

	c->mode = mode;
	c->waiting = false;
	c->deadline = now_ms() + 3000;
	c->ev.fd = -1;
	if (fd < 0) {
		ch->connect_fail++;
		return;
	}
	ev_add(ch->ep, &c->ev, fd, churner_io, EPOLLOUT);
}

/* What a churner says once connected. */
static void
churner_talk(struct churner *c)
{
	struct churn *ch = c->ch;
	char buf[4096];
	unsigned id = ++ch->next_id;
	int n = 0;

	switch (c->mode) {
	case CH_ECHO_RST:
	case CH_ECHO_WAIT:
		n = 1 + (int)(rnd(&ch->rng) % sizeof(buf));
		memset(buf, 'e', (size_t)n);
		break;
	case CH_ROUTER_RST:
	case CH_ROUTER_WAIT:
		n = snprintf(buf, sizeof(buf), "LOGIN c%u\nSEND c%u to a "
		    "churner\nSEND s%u churn\nSEND nobody x\nPING\n", id,
		    id - 1, rnd(&ch->rng) % (unsigned)ch->npeers);
		break;
	case CH_HALF_LINE:
		n = snprintf(buf, sizeof(buf), "SEND s1 never end");
		break;
	}
	if (n > 0 && send(c->ev.fd, buf, (size_t)n, MSG_NOSIGNAL) < 0)
		ch->dropped++;
}

static void
churner_done(struct churner *c)
{
	ev_close(&c->ev, true);
	c->ch->cycles++;
	if (!atomic_load(&c->ch->stop) && c->ch->pace_ms == 0)
		churner_start(c);
}

static void
churner_io(struct ev *e, uint32_t events)
{
	struct churner *c = (struct churner *)e;
	int err = 0;
	socklen_t sl = sizeof(err);
	char buf[4096];

	if (!c->waiting) {
		if (getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0 ||
		    err != 0) {
			c->ch->connect_fail++;
			ev_close(e, false);
			if (!atomic_load(&c->ch->stop) && c->ch->pace_ms == 0)
				churner_start(c);
			return;
		}
		churner_talk(c);
		if (c->mode == CH_ECHO_WAIT || c->mode == CH_ROUTER_WAIT) {
			c->waiting = true;
			ev_mod(e, EPOLLIN);
			return;
		}
	} else if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (recv(e->fd, buf, sizeof(buf), 0) <= 0)
			c->ch->dropped++;	/* the daemon hung up first */
	}
	churner_done(c);
}

/* Resets churners stuck beyond their deadline; paced: starts new ones. */
static void
churn_sweep(struct churn *ch)
{
	uint64_t now = now_ms();

	for (int i = 0; i < ch->conc; i++) {
		struct churner *c = &ch->c[i];

		if (c->ev.fd >= 0 && now > c->deadline) {
			ch->stuck++;
			churner_done(c);
		} else if (c->ev.fd < 0 && !atomic_load(&ch->stop)) {
			churner_start(c);
		}
	}
}

static void *
churn_main(void *arg)
{
	struct churn *ch = arg;
	uint64_t next = 0;

	for (int i = 0; i < ch->conc; i++) {
		ch->c[i].ch = ch;
		ch->c[i].ev.fd = -1;
	}
	while (!atomic_load(&ch->stop)) {
		uint64_t now = now_ms();

		loop_poll(ch->ep, ch->pace_ms ? (int)ch->pace_ms : 10);
		if (now >= next) {
			churn_sweep(ch);
			next = now + (ch->pace_ms ? ch->pace_ms : 100);
		}
	}
	for (int i = 0; i < ch->conc; i++)
		ev_close(&ch->c[i].ev, true);
	return NULL;
}

static struct churn *
churn_start(const struct daemon *d, int conc, int npeers, unsigned pace_ms)
{
	struct churn *ch = xcalloc(1, sizeof(*ch));

	ch->ep = epoll_create1(EPOLL_CLOEXEC);
	ch->conc = conc;
	ch->echo_port = d->echo_port;
	ch->router_port = d->router_port;
	ch->npeers = npeers > 0 ? npeers : 1;
	ch->pace_ms = pace_ms;
	ch->rng = 12345;
	ch->c = xcalloc((size_t)conc, sizeof(*ch->c));
	if (pthread_create(&ch->thread, NULL, churn_main, ch) != 0) {
		fprintf(stderr, "stress: pthread_create failed\n");
		exit(2);
	}
	return ch;
}

static void
churn_stop(struct churn *ch)
{
	atomic_store(&ch->stop, true);
	pthread_join(ch->thread, NULL);
	say("churn: %llu connect/reset cycles, %llu connect failures, %llu "
	    "hung up on by the daemon, %llu timed out",
	    (unsigned long long)ch->cycles,
	    (unsigned long long)ch->connect_fail,
	    (unsigned long long)ch->dropped, (unsigned long long)ch->stuck);
}

static void
churn_free(struct churn *ch)
{
	close(ch->ep);
	free(ch->c);
	free(ch);
}

/* ------------------------------------------------------------------ */
/* Scenarios                                                           */

#define CONF_HEAD							\
	"dispatchers = 2;\n"						\
	"cpu_affinity = false;\n"					\
	"idle_timeout = 0;\n"						\
	"log = { level = \"info\"; };\n"				\
	"listeners = (\n"						\
	"  { name = \"echo\"; address = \"127.0.0.1\"; port = 0; "	\
	"protocol = \"echo\"; },\n"					\
	"  { name = \"router\"; address = \"127.0.0.1\"; port = 0; "	\
	"protocol = \"router\"; }\n"					\
	");\n"

/* Expects exit status 0 within ms of SIGTERM. */
static void
expect_clean_exit(struct daemon *d, int ms)
{
	uint64_t t0 = now_ms();
	int st = daemon_stop(d, ms);

	if (st != 0)
		note("daemon exit status %d after SIGTERM (want 0)", st);
	else
		say("daemon exited 0, %llu ms after SIGTERM",
		    (unsigned long long)(now_ms() - t0));
}

/* The daemon's connection count settles at want within ms. */
static void
expect_conns(struct daemon *d, long long want, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	long long got = -1;

	do {
		if (daemon_stats(d) < 0)
			return;
		if ((got = stats_field(d, "conns")) == want)
			return;
		sleep_ms(200);
	} while (now_ms() < end);
	note("daemon counts %lld connections, want %lld: %s", got, want,
	    d->stats);
}

/*
 * 1. Churn: many clients connect and reset (some mid-command) while 100
 * others echo and route; the 100 see no error at all.
 */
static void
scenario_churn(struct daemon *d)
{
	const int secs = 20, nr = 50, ne = 50;
	struct peers *ps;
	struct churn *ch;
	struct tally t;
	uint64_t end;

	if (daemon_start(d, "churn", CONF_HEAD "shutdown_timeout = 10;\n",
	    0) < 0)
		return;
	ps = peers_new(nr, ne, 3);
	if (peers_connect(ps, d) < 0)
		goto out;
	ps->sending = true;
	peers_kick(ps);
	ch = churn_start(d, 256, nr, 0);
	for (end = now_ms() + (uint64_t)secs * 1000; now_ms() < end;)
		loop_poll(ps->ep, 20);
	churn_stop(ch);
	peers_drain(ps, 15000);
	peers_verify(ps, true, &t);
	say("survivors got %llu MSGs from churners (ignored)",
	    (unsigned long long)ps->nforeign);
	if (ch->cycles < 5000)
		note("only %llu churn cycles in %d s (want at least 5000)",
		    (unsigned long long)ch->cycles, secs);
	if (ch->connect_fail + ch->stuck > ch->cycles / 100)
		note("too many churn connects failed or hung");
	/* Every churner's connection must be gone: 100 peers remain. */
	expect_conns(d, nr + ne, 5000);
	say("%s", d->stats);
	churn_free(ch);
	expect_clean_exit(d, 15000);
out:
	peers_free(ps);
}

/*
 * 2. Slow consumers: 1,000 router clients that never read. Senders get
 * ERR 503 once one is over the high watermark, then ERR 404 once it has
 * been closed as a slow consumer; RSS stays under the bound meanwhile.
 */
#define NSINKS		1000
#define NSENDERS	16
#define SINK_TEXT	1900

struct sink {
	int	fd;
	uint32_t ok, busy, gone;
	uint64_t first_busy_ms, first_gone_ms;
	uint64_t rest_until_ms;		/* busy: left alone until then */
};

struct sender {
	struct ev ev;
	struct slow *sl;
	int	idx;
	struct bytes in, out;
	uint32_t *q;			/* sink of each SEND in flight, a ring */
	unsigned qhead, qn;
	unsigned next;			/* the sink to try next */
	uint8_t	*seen404;		/* [sink]: this sender got 404 */
	bool	gone;
};

struct slow {
	struct peers *ps;		/* the well-behaved, sharing the loop */
	struct sink *sinks;
	int	nsinks;
	struct sender *snd;
	int	nsnd;
	unsigned window;
	bool	sending;
	int	nclosed;		/* sinks with at least one 404 */
	uint64_t ok, busy, gone, order_bad;
	char	text[SINK_TEXT + 1];
};

static void sender_pump(struct sender *s);

static void
sender_verdict(struct sender *s, uint32_t k, const char *line)
{
	struct slow *sl = s->sl;
	struct sink *sk = &sl->sinks[k];
	unsigned long long id;
	int code = 0;

	if (sscanf(line, "OK %llu", &id) != 1 &&
	    (sscanf(line, "ERR %d %llu", &code, &id) != 2 ||
	    (code != 404 && code != 503))) {
		note("w%d: SEND to k%u answered \"%.60s\"", s->idx, k, line);
		return;
	}
	if (s->seen404[k] && code != 404) {
		sl->order_bad++;
		note("w%d: SEND to k%u answered \"%.40s\" after an ERR 404",
		    s->idx, k, line);
	}
	if (code == 0) {
		sk->ok++;
		sl->ok++;
	} else if (code == 503) {
		if (sk->busy++ == 0)
			sk->first_busy_ms = now_ms();
		/* It stays busy for a while: no need to flood it meanwhile. */
		sk->rest_until_ms = now_ms() + 100;
		sl->busy++;
	} else {
		s->seen404[k] = 1;
		if (sk->gone++ == 0) {
			sk->first_gone_ms = now_ms();
			sl->nclosed++;
		}
		sl->gone++;
	}
}

static void
sender_gone(struct sender *s, const char *why)
{
	note("sender w%d: connection %s", s->idx, why);
	s->gone = true;
	ev_close(&s->ev, false);
}

static void
sender_io(struct ev *e, uint32_t events)
{
	struct sender *s = (struct sender *)e;
	const char *why = NULL;
	bool alive = true;
	char *lf;

	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		alive = read_some(e, &s->in, &why);
	while ((lf = memchr(s->in.p + s->in.off, '\n', s->in.len)) != NULL) {
		size_t n = (size_t)(lf - (s->in.p + s->in.off));
		char *line = s->in.p + s->in.off;

		*lf = '\0';
		if (strncmp(line, "OK LOGIN ", 9) == 0)
			;
		else if (s->qn == 0)
			note("w%d: reply with no SEND: \"%.60s\"", s->idx,
			    line);
		else {
			uint32_t k = s->q[s->qhead];

			s->qhead = (s->qhead + 1) % s->sl->window;
			s->qn--;
			sender_verdict(s, k, line);
		}
		bytes_drop(&s->in, n + 1);
	}
	if (!alive) {
		sender_gone(s, why);
		return;
	}
	sender_pump(s);
}

/* The next sink not known to be closed nor resting, round-robin; or -1. */
static int
sender_pick(struct sender *s)
{
	struct slow *sl = s->sl;
	uint64_t now = now_ms();

	for (int tries = 0; tries < sl->nsinks; tries++) {
		int k = (int)(s->next++ % (unsigned)sl->nsinks);

		if (sl->sinks[k].gone == 0 &&
		    sl->sinks[k].rest_until_ms <= now)
			return k;
	}
	return -1;
}

static void
sender_pump(struct sender *s)
{
	struct slow *sl = s->sl;
	char head[64];
	int k;

	while (sl->sending && !s->gone && s->qn < sl->window &&
	    s->out.len < 65536 && (k = sender_pick(s)) >= 0) {
		int n = snprintf(head, sizeof(head), "SEND k%d ", k);

		bytes_add(&s->out, head, (size_t)n);
		bytes_add(&s->out, sl->text, SINK_TEXT);
		bytes_add(&s->out, "\n", 1);
		s->q[(s->qhead + s->qn++) % sl->window] = (uint32_t)k;
	}
	if (s->gone)
		return;
	if (!out_flush(&s->ev, &s->out)) {
		sender_gone(s, "failed on write");
		return;
	}
	ev_mod(&s->ev, EPOLLIN | (s->out.len > 0 ? EPOLLOUT : 0));
}

/* Connects and logs in one never-reading client; its fd or -1. */
static int
sink_open(const struct daemon *d, int k)
{
	char line[80], want[80];
	int fd = connect_wait(d->router_port, -4096, 5000);

	if (fd < 0)
		return -1;
	snprintf(line, sizeof(line), "LOGIN k%d\n", k);
	snprintf(want, sizeof(want), "OK LOGIN k%d", k);
	if (send_all(fd, line, strlen(line), 5000) < 0 ||
	    recv_line(fd, line, sizeof(line), 5000) < 0 ||
	    strcmp(line, want) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
slow_open(struct slow *sl, const struct daemon *d)
{
	for (int k = 0; k < sl->nsinks; k++)
		if ((sl->sinks[k].fd = sink_open(d, k)) < 0) {
			note("sink k%d cannot connect and log in", k);
			return -1;
		}
	for (int i = 0; i < sl->nsnd; i++) {
		struct sender *s = &sl->snd[i];
		char line[64];
		int fd = connect_wait(d->router_port, 0, 5000);

		s->sl = sl;
		s->idx = i;
		s->q = xcalloc(sl->window, sizeof(*s->q));
		s->seen404 = xcalloc((size_t)sl->nsinks, 1);
		s->next = (unsigned)(i * sl->nsinks / sl->nsnd);
		s->ev.fd = -1;
		if (fd < 0 || ev_add(sl->ps->ep, &s->ev, fd, sender_io,
		    EPOLLIN) < 0) {
			note("sender w%d cannot connect", i);
			return -1;
		}
		snprintf(line, sizeof(line), "LOGIN w%d\n", i);
		bytes_add(&s->out, line, strlen(line));
	}
	return 0;
}

static void
slow_free(struct slow *sl)
{
	for (int k = 0; k < sl->nsinks; k++)
		if (sl->sinks[k].fd >= 0)
			close(sl->sinks[k].fd);
	for (int i = 0; i < sl->nsnd; i++) {
		ev_close(&sl->snd[i].ev, false);
		bytes_free(&sl->snd[i].in);
		bytes_free(&sl->snd[i].out);
		free(sl->snd[i].q);
		free(sl->snd[i].seen404);
	}
	free(sl->sinks);
	free(sl->snd);
	free(sl);
}

static struct slow *
slow_new(struct peers *ps, int nsinks, int nsnd)
{
	struct slow *sl = xcalloc(1, sizeof(*sl));

	sl->ps = ps;
	sl->nsinks = nsinks;
	sl->nsnd = nsnd;
	sl->window = 64;
	sl->sinks = xcalloc((size_t)nsinks, sizeof(*sl->sinks));
	for (int k = 0; k < nsinks; k++)
		sl->sinks[k].fd = -1;
	sl->snd = xcalloc((size_t)nsnd, sizeof(*sl->snd));
	for (int i = 0; i < SINK_TEXT; i++)
		sl->text[i] = (char)('A' + i % 26);
	return sl;
}

static bool
slow_answered(const struct slow *sl)
{
	for (int i = 0; i < sl->nsnd; i++)
		if (!sl->snd[i].gone && (sl->snd[i].qn > 0 ||
		    sl->snd[i].out.len > 0))
			return false;
	return true;
}

/*
 * Sends to the sinks until every one has been answered ERR 404 (closed),
 * within ms, sampling RSS; then waits for the last answers.
 */
static void
slow_run(struct slow *sl, struct daemon *d, int ms, long *peak_kb)
{
	uint64_t end = now_ms() + (uint64_t)ms, next = 0;

	sl->sending = true;
	for (int i = 0; i < sl->nsnd; i++)
		sender_pump(&sl->snd[i]);
	while (sl->nclosed < sl->nsinks && now_ms() < end) {
		loop_poll(sl->ps->ep, 20);
		if (now_ms() >= next) {
			long rss = daemon_status_kb(d, "VmRSS");

			if (rss > *peak_kb)
				*peak_kb = rss;
			for (int i = 0; i < sl->nsnd; i++)
				sender_pump(&sl->snd[i]);
			next = now_ms() + 50;
		}
	}
	sl->sending = false;
	for (end = now_ms() + 10000; !slow_answered(sl) && now_ms() < end;)
		loop_poll(sl->ps->ep, 20);
	if (!slow_answered(sl))
		note("senders still wait for answers after 10 s");
}

/*
 * Every sink was closed (404), and nearly every one was first seen busy
 * (503). "Nearly": the daemon times a stall from the last output the
 * client took, not from when it went over the watermark, so on a slow
 * (sanitizer) build a client may be closed within a second of going over,
 * before any SEND reached it in between.
 */
static void
slow_verify(const struct slow *sl)
{
	int never_busy = 0, never_closed = 0;
	uint64_t dmin = UINT64_MAX, dmax = 0;

	for (int k = 0; k < sl->nsinks; k++) {
		const struct sink *sk = &sl->sinks[k];

		never_busy += sk->busy == 0 ||
		    sk->first_busy_ms > sk->first_gone_ms;
		never_closed += sk->gone == 0;
		if (sk->busy && sk->gone &&
		    sk->first_gone_ms >= sk->first_busy_ms) {
			uint64_t dt = sk->first_gone_ms - sk->first_busy_ms;

			dmin = dt < dmin ? dt : dmin;
			dmax = dt > dmax ? dt : dmax;
		}
	}
	say("sinks: %llu SENDs OK, %llu ERR 503, %llu ERR 404; %d of %d "
	    "answered 503 before 404, after %llu..%llu ms",
	    (unsigned long long)sl->ok, (unsigned long long)sl->busy,
	    (unsigned long long)sl->gone, sl->nsinks - never_busy,
	    sl->nsinks, (unsigned long long)(dmin == UINT64_MAX ? 0 : dmin),
	    (unsigned long long)dmax);
	if (never_busy > sl->nsinks / 10)
		note("%d of %d sinks were never answered ERR 503 before ERR "
		    "404", never_busy, sl->nsinks);
	if (never_closed > 0)
		note("%d of %d sinks never answered ERR 404 (not closed)",
		    never_closed, sl->nsinks);
}

#define SLOW_LIMITS							\
	"limits = { output_high_watermark = 65536; "			\
	"output_limit = 262144; output_stall_timeout = 4; };\n"

/*
 * The documented bound: 16 MiB for the daemon itself (threads, pools, the
 * route table) plus, per never-reading client, its output up to the high
 * watermark, one more message and the rounding to 16 KiB chunks: 96 KiB
 * with these limits. STRESS_RSS_LIMIT_MB overrides it (sanitizer builds).
 */
static long
rss_bound_kb(void)
{
	const char *e = getenv("STRESS_RSS_LIMIT_MB");

	if (e != NULL && atol(e) > 0)
		return atol(e) * 1024;
	return 16 * 1024 + NSINKS * (65536 + 32768) / 1024;
}

static void
scenario_slow(struct daemon *d)
{
	struct peers *ps;
	struct slow *sl = NULL;
	struct tally t;
	long peak = 0, hwm, base, bound = rss_bound_kb();
	long long slow_closed;

	if (daemon_start(d, "slow", CONF_HEAD "shutdown_timeout = 5;\n"
	    SLOW_LIMITS, 0) < 0)
		return;
	base = daemon_status_kb(d, "VmRSS");
	ps = peers_new(8, 2, 2);
	ps->echo_window = 16384;
	if (peers_connect(ps, d) < 0)
		goto out;
	sl = slow_new(ps, NSINKS, NSENDERS);
	if (slow_open(sl, d) < 0)
		goto out;
	say("%d never-reading clients logged in; RSS %ld kB at start", NSINKS,
	    base);
	ps->sending = true;
	peers_kick(ps);
	slow_run(sl, d, 60000, &peak);
	peers_drain(ps, 10000);
	slow_verify(sl);
	peers_verify(ps, true, &t);
	hwm = daemon_status_kb(d, "VmHWM");
	say("daemon RSS: start %ld kB, peak sampled %ld kB, VmHWM %ld kB, "
	    "bound %ld kB", base, peak, hwm, bound);
	if (hwm > bound || peak > bound)
		note("daemon RSS above the bound of %ld kB", bound);
	if (daemon_stats(d) == 0) {
		slow_closed = stats_field(d, "closed_slow-consumer");
		say("%s", d->stats);
		if (slow_closed < NSINKS)
			note("closed_slow-consumer=%lld, want >= %d",
			    slow_closed, NSINKS);
	}
	say("log lines \"reason=slow-consumer\": %u",
	    log_count(d, "reason=slow-consumer"));
	expect_clean_exit(d, 15000);
out:
	if (sl != NULL)
		slow_free(sl);
	peers_free(ps);
}

/*
 * 3. Out of descriptors: a daemon limited to 256 fds is filled up, then
 * clients keep coming. It must refuse without spinning, keep serving the
 * clients it has, and serve new ones again once the load is gone.
 */
#define FD_LIMIT	256
#define FD_HELD		320

/* Sends a probe on each fd and counts the ones echoed back within ms. */
static int
probe_echo(int *fds, int n, int ms)
{
	const char probe[] = "probe\n";
	uint64_t end = now_ms() + (uint64_t)ms;
	char buf[64];
	int alive = 0;

	for (int i = 0; i < n; i++)
		if (fds[i] >= 0 && send(fds[i], probe, 6, MSG_NOSIGNAL) != 6) {
			close_rst(fds[i]);
			fds[i] = -1;
		}
	for (int i = 0; i < n; i++) {
		uint64_t now = now_ms();
		int left = now < end ? (int)(end - now) : 0;
		ssize_t r;

		if (fds[i] < 0)
			continue;
		if (wait_fd(fds[i], POLLIN, left) == 1 &&
		    (r = recv(fds[i], buf, sizeof(buf), 0)) == 6 &&
		    memcmp(buf, probe, 6) == 0) {
			alive++;
			continue;
		}
		close_rst(fds[i]);
		fds[i] = -1;
	}
	return alive;
}

/* One client tries its luck: 1 served, 0 refused (closed), -1 hung. */
static int
try_client(int port)
{
	char buf[16];
	int fd = connect_wait(port, 0, 2000), rc = -1;
	ssize_t r;

	if (fd < 0)
		return 0;
	if (send(fd, "x\n", 2, MSG_NOSIGNAL) != 2) {
		close_rst(fd);
		return 0;
	}
	if (wait_fd(fd, POLLIN, 2000) == 1) {
		r = recv(fd, buf, sizeof(buf), 0);
		rc = r == 2 ? 1 : 0;
	}
	close_rst(fd);
	return rc;
}

/* CPU ticks the daemon burns over ms while clients try every gap_ms. */
static long
ticks_while(struct daemon *d, int ms, int gap_ms, int *served,
    int *refused, int *hung)
{
	long t0 = daemon_cpu_ticks(d);
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end) {
		if (gap_ms > 0) {
			int r = try_client(d->echo_port);

			*served += r == 1;
			*refused += r == 0;
			*hung += r < 0;
		}
		sleep_ms(gap_ms > 0 ? (unsigned)gap_ms : 50);
	}
	return daemon_cpu_ticks(d) - t0;
}

/* After the load: new echo and router clients are served within ms. */
static void
expect_service(struct daemon *d, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	int ok = 0;

	while (ok < 50 && now_ms() < end) {
		if (try_client(d->echo_port) == 1)
			ok++;
		else
			sleep_ms(50);
	}
	if (ok < 50)
		note("service did not resume: %d of 50 echo clients served", ok);
	else
		say("service resumed: 50 new echo clients served");
}

static void
scenario_fdlimit(struct daemon *d)
{
	static int held[FD_HELD];
	long hz = sysconf(_SC_CLK_TCK), idle, busy;
	int alive, served = 0, refused = 0, hung = 0;
	struct peers *ps = NULL;
	struct tally t;

	if (daemon_start(d, "fdlimit", CONF_HEAD "shutdown_timeout = 5;\n",
	    FD_LIMIT) < 0)
		return;
	for (int i = 0; i < FD_HELD; i++) {
		held[i] = connect_wait(d->echo_port, 0, 2000);
		if (i % 32 == 31)
			sleep_ms(20);
	}
	sleep_ms(500);
	alive = probe_echo(held, FD_HELD, 3000);
	say("RLIMIT_NOFILE=%d: %d of %d held clients served, the rest refused",
	    FD_LIMIT, alive, FD_HELD);
	if (alive >= FD_HELD || alive < FD_LIMIT / 2)
		note("expected the limit to refuse some but not most clients");
	idle = ticks_while(d, 2000, 0, &served, &refused, &hung);
	busy = ticks_while(d, 3000, 5, &served, &refused, &hung);
	say("while out of fds: %ld ticks idle over 2 s, %ld ticks over 3 s "
	    "of churn (%d refused, %d served, %d hung; %ld ticks/s)", idle,
	    busy, refused, served, hung, hz);
	if (idle > hz / 5 || busy > 3 * hz / 4)
		note("the daemon spins while out of descriptors");
	if (refused == 0)
		note("no client was refused while out of descriptors");
	if (hung > 0)
		note("%d clients were left hanging (neither served nor closed)",
		    hung);
	if (!daemon_reap(d, 0) && probe_echo(held, FD_HELD, 3000) < alive)
		note("clients held through the exhaustion were dropped");
	for (int i = 0; i < FD_HELD; i++)
		if (held[i] >= 0)
			close_rst(held[i]);
	if (daemon_reap(d, 0)) {
		note("daemon died with status %d", d->status);
		return;
	}
	expect_service(d, 5000);
	ps = peers_new(6, 2, 2);
	if (peers_connect(ps, d) == 0) {
		ps->sending = true;
		peers_kick(ps);
		for (uint64_t end = now_ms() + 1000; now_ms() < end;)
			loop_poll(ps->ep, 20);
		peers_drain(ps, 10000);
		peers_verify(ps, true, &t);
	}
	if (daemon_stats(d) == 0) {
		say("%s", d->stats);
		if (stats_field(d, "refused_fd") <= 0)
			note("refused_fd not counted");
	}
	expect_clean_exit(d, 15000);
	peers_free(ps);
}

/* Two configurations the reloads alternate between. */
static const char *
reload_conf(unsigned i)
{
	return i % 2 == 0 ?
	    CONF_HEAD "shutdown_timeout = 10;\n"
	    "limits = { output_high_watermark = 1048576; };\n"
	    "routes = ( { prefix = \"+351\"; to = \"s0\"; } );\n" :
	    CONF_HEAD "shutdown_timeout = 9;\n"
	    "limits = { output_high_watermark = 2097152; max_line = 2048; };\n"
	    "routes = ( { prefix = \"+44\"; to = \"s1\"; } );\n";
}

/*
 * 4. SIGHUP every 100 ms while messages flow (the file alternating between
 * two valid configurations): nothing lost or duplicated, every SEND
 * answered, and a clean exit (an ASan build exits non-zero on a leak).
 */
static void
scenario_sighup(struct daemon *d)
{
	const int secs = 12;
	unsigned nhup = 0, nrel;
	struct peers *ps;
	struct tally t;
	uint64_t end, next;

	if (daemon_start(d, "sighup", reload_conf(0), 0) < 0)
		return;
	ps = peers_new(40, 10, 3);
	if (peers_connect(ps, d) < 0)
		goto out;
	ps->sending = true;
	peers_kick(ps);
	end = now_ms() + (uint64_t)secs * 1000;
	for (next = now_ms() + 100; now_ms() < end;) {
		loop_poll(ps->ep, 10);
		if (now_ms() < next)
			continue;
		write_file(d->conf, reload_conf(++nhup));
		daemon_signal(d, SIGHUP);
		next += 100;
	}
	peers_drain(ps, 15000);
	peers_verify(ps, true, &t);
	nrel = log_count(d, "reloaded ");
	say("%u SIGHUPs sent, %u reloads logged", nhup, nrel);
	if (nrel < nhup / 2)
		note("fewer than half of the SIGHUPs were reloads");
	if (log_count(d, "reload failed") > 0)
		note("a reload failed (see the log)");
	expect_conns(d, 50, 5000);
	expect_clean_exit(d, 15000);
out:
	peers_free(ps);
}

/*
 * 5. SIGTERM while messages flow: the peers keep sending and reading until
 * the daemon closes them; every SEND answered OK must have reached its
 * recipient, and the daemon exits 0.
 */
static void
scenario_sigterm(struct daemon *d)
{
	struct peers *ps;
	struct tally t;
	uint64_t end, t0, next;
	unsigned turn = 0;

	if (daemon_start(d, "sigterm", CONF_HEAD "shutdown_timeout = 5;\n",
	    0) < 0)
		return;
	ps = peers_new(40, 10, 3);
	ps->window = 64;
	ps->lazy_every = 4;
	/*
	 * An OK means queued on the recipient's connection, so a lazy one's
	 * queue can pass output_high_watermark in a 100 ms nap on a fast
	 * machine: its senders then hear "recipient busy", as they should.
	 */
	ps->busy_ok = true;
	if (peers_connect(ps, d) < 0)
		goto out;
	ps->sending = true;
	peers_kick(ps);
	for (end = now_ms() + 4000, next = 0; now_ms() < end;) {
		loop_poll(ps->ep, 10);
		if (now_ms() >= next) {
			peers_nap(ps, ++turn);
			next = now_ms() + 100;
		}
	}
	say("before SIGTERM: %llu SENDs, %llu OK, %llu ERR (%llu recipient "
	    "busy), %llu MSGs received", (unsigned long long)ps->nsend,
	    (unsigned long long)ps->nok, (unsigned long long)ps->nerr,
	    (unsigned long long)ps->nbusy, (unsigned long long)ps->nrcv);
	ps->eof_ok = true;
	t0 = now_ms();
	daemon_signal(d, SIGTERM);
	for (end = now_ms() + 20000; !peers_all_gone(ps) && now_ms() < end;) {
		loop_poll(ps->ep, 10);
		if (now_ms() >= next) {
			peers_nap(ps, ++turn);
			next = now_ms() + 100;
		}
	}
	if (!peers_all_gone(ps))
		note("clients still connected 20 s after SIGTERM");
	else
		say("every client saw its connection end %llu ms after "
		    "SIGTERM", (unsigned long long)(now_ms() - t0));
	if (!daemon_reap(d, 15000))
		note("daemon still running 35 s after SIGTERM");
	else if (d->status != 0)
		note("daemon exit status %d after SIGTERM (want 0)", d->status);
	else
		say("daemon exited 0");
	peers_verify(ps, false, &t);
	if (t.ok == 0)
		note("no SEND was answered OK: the load did not run");
out:
	peers_free(ps);
}

/*
 * The valgrind workload: echo and router peers, a little churn, slow
 * consumers, a SIGHUP every 500 ms, SIGUSR1, then SIGTERM under load. The
 * caller runs the daemon under valgrind (-w) and expects exit status 0.
 */
static void
scenario_valgrind(struct daemon *d)
{
	struct peers *ps;
	struct slow *sl = NULL;
	struct churn *ch;
	struct tally t;
	long peak = 0;
	unsigned nhup = 0;
	uint64_t end, next;

	/*
	 * Memcheck does not see what the kernel writes through an io_uring
	 * (every batched read would look uninitialised): plain calls here.
	 */
	if (daemon_start(d, "valgrind", CONF_HEAD "shutdown_timeout = 10;\n"
	    "io_uring = false;\n" SLOW_LIMITS, 0) < 0)
		return;
	ps = peers_new(10, 4, 2);
	ps->window = 8;
	if (peers_connect(ps, d) < 0)
		goto out;
	ps->sending = true;
	peers_kick(ps);
	ch = churn_start(d, 4, ps->nr, 50);
	end = now_ms() + 6000;
	for (next = now_ms() + 500; now_ms() < end;) {
		loop_poll(ps->ep, 20);
		if (now_ms() >= next) {
			daemon_signal(d, SIGHUP);
			nhup++;
			next += 500;
		}
	}
	churn_stop(ch);
	churn_free(ch);
	sl = slow_new(ps, 20, 2);
	sl->window = 16;
	if (slow_open(sl, d) == 0) {
		slow_run(sl, d, 60000, &peak);
		slow_verify(sl);
	}
	slow_free(sl);
	sl = NULL;
	peers_drain(ps, 30000);
	peers_verify(ps, true, &t);
	say("%u SIGHUPs sent, %u reloads logged", nhup,
	    log_count(d, "reloaded "));
	if (daemon_stats(d) == 0)
		say("%s", d->stats);
	/* Then SIGTERM with traffic flowing. */
	ps->sending = true;
	peers_kick(ps);
	for (end = now_ms() + 1000; now_ms() < end;)
		loop_poll(ps->ep, 20);
	ps->eof_ok = true;
	daemon_signal(d, SIGTERM);
	for (end = now_ms() + 60000; !peers_all_gone(ps) && now_ms() < end;)
		loop_poll(ps->ep, 20);
	if (!daemon_reap(d, 60000))
		note("daemon (under valgrind) still running 60 s after "
		    "SIGTERM");
	else if (d->status != 0)
		note("exit status %d: valgrind found errors or leaks (see %s)",
		    d->status, d->vglog);
	else
		say("exit status 0: valgrind found no errors and no definite "
		    "leaks");
out:
	if (sl != NULL)
		slow_free(sl);
	peers_free(ps);
}

/* Prints valgrind's summary lines, if there is a valgrind log. */
static void
show_valgrind_summary(const struct daemon *d)
{
	char line[512];
	FILE *f = fopen(d->vglog, "r");

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "ERROR SUMMARY") != NULL ||
		    strstr(line, "in use at exit") != NULL ||
		    strstr(line, "heap blocks were freed") != NULL ||
		    strstr(line, "definitely lost:") != NULL ||
		    strstr(line, "indirectly lost:") != NULL)
			printf("  valgrind:%s", strchr(line, ' ') ?
			    strchr(line, ' ') : line);
	fclose(f);
}

/*
 * 6. Kernel memory of never-reading clients: SOCKMEM_N echo clients (with
 * 4 KiB socket buffers of their own) each send SOCKMEM_BYTES and read
 * nothing back. What the kernel then holds for TCP (the "mem" pages of
 * /proc/net/sockstat) is measured with the daemon's socket buffers left
 * to the kernel and with limits.socket_send_buffer and
 * socket_receive_buffer at 16 KiB: with them it must stay under
 * SOCKMEM_BOUND per client, and under half of what the kernel's own
 * buffers take. (The kernel doubles a buffer's size for its bookkeeping:
 * 2 x (16 + 16) KiB on our side, 2 x (4 + 4) on the client's, and the
 * queued segments' overhead comes on top: about 108 KiB measured here,
 * against about 355 KiB without the limits.)
 */
#define SOCKMEM_N	1000
#define SOCKMEM_BYTES	(256 * 1024)
#define SOCKMEM_BOUND	(128 * 1024)
#define SOCKMEM_LIMITS							\
	"limits = { output_high_watermark = 65536; output_limit = 262144; "\
	"output_stall_timeout = 60; max_connections_per_ip = 0;%s };\n"

/* TCP's memory in pages, from /proc/net/sockstat; -1 if unreadable. */
static long
sockstat_tcp_pages(void)
{
	FILE *f = fopen("/proc/net/sockstat", "re");
	char line[256];
	long mem = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *m = strstr(line, " mem ");

		if (strncmp(line, "TCP:", 4) == 0 && m != NULL)
			mem = atol(m + 5);
	}
	fclose(f);
	return mem;
}

/* One run: bytes of kernel TCP memory per never-reading client, or -1. */
static long
sockmem_run(struct daemon *d, const char *name, const char *extra)
{
	static uint8_t chunk[SOCKMEM_BYTES];
	char conf[1024];
	int fds[SOCKMEM_N], small = 4096, open = 0;
	size_t sent[SOCKMEM_N] = { 0 };
	long base, mem, per = -1;
	uint64_t end;

	snprintf(conf, sizeof(conf), CONF_HEAD SOCKMEM_LIMITS, extra);
	if (daemon_start(d, name, conf, 0) < 0)
		return -1;
	base = sockstat_tcp_pages();
	for (int i = 0; i < SOCKMEM_N; i++) {
		fds[i] = connect_wait(d->echo_port, small, 5000);
		if (fds[i] >= 0) {
			setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &small,
			    sizeof(small));
			open++;
		}
	}
	if (open < SOCKMEM_N)
		note("%s: %d of %d clients connected", name, open, SOCKMEM_N);
	/* Push until nothing more goes anywhere (or 3 s). */
	end = now_ms() + 3000;
	for (bool moved = true; moved && now_ms() < end;) {
		moved = false;
		for (int i = 0; i < SOCKMEM_N; i++) {
			ssize_t w;

			if (fds[i] < 0 || sent[i] == SOCKMEM_BYTES)
				continue;
			w = send(fds[i], chunk, SOCKMEM_BYTES - sent[i],
			    MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0) {
				sent[i] += (size_t)w;
				moved = true;
			}
		}
		if (!moved) {
			sleep_ms(300);	/* let the daemon drain into the queues */
			moved = now_ms() + 300 < end;
		}
	}
	sleep_ms(500);
	mem = sockstat_tcp_pages();
	if (base >= 0 && mem >= 0) {
		per = (mem - base) * sysconf(_SC_PAGESIZE) / (open > 0 ? open : 1);
		say("%s: TCP memory %ld -> %ld pages: %ld bytes per "
		    "never-reading client (%d clients)", name, base, mem, per,
		    open);
	} else {
		note("/proc/net/sockstat has no TCP mem line");
	}
	for (int i = 0; i < SOCKMEM_N; i++)
		if (fds[i] >= 0)
			close_rst(fds[i]);
	expect_clean_exit(d, 15000);
	return per;
}

static void
scenario_sockmem(struct daemon *d)
{
	long dflt = sockmem_run(d, "sockmem-default", "");
	long lim = sockmem_run(d, "sockmem-limited",
	    " socket_send_buffer = 16384; socket_receive_buffer = 16384;");

	if (lim < 0 || dflt < 0)
		return;
	say("kernel memory per never-reading client: %ld bytes with the "
	    "kernel's buffers, %ld with 16 KiB limits (bound %d)", dflt, lim,
	    SOCKMEM_BOUND);
	if (lim > SOCKMEM_BOUND)
		note("socket buffer limits: %ld bytes per client, over %d",
		    lim, SOCKMEM_BOUND);
	if (lim * 2 > dflt)
		note("socket buffer limits: %ld bytes per client, not under "
		    "half of the %ld without them", lim, dflt);
}

static const struct {
	const char *name;
	void	(*fn)(struct daemon *);
} scenarios[] = {
	{ "churn", scenario_churn },
	{ "slow", scenario_slow },
	{ "fdlimit", scenario_fdlimit },
	{ "sighup", scenario_sighup },
	{ "sigterm", scenario_sigterm },
	{ "sockmem", scenario_sockmem },
	{ "valgrind", scenario_valgrind },
};

static _Noreturn void
usage(void)
{
	fprintf(stderr, "usage: stress -b BIN [-w WRAPPER] [-k] SCENARIO\n"
	    "scenarios:");
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		fprintf(stderr, " %s", scenarios[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct daemon d = { .pid = -1 };
	int ch;

	while ((ch = getopt(argc, argv, "b:kw:")) != -1) {
		switch (ch) {
		case 'b':
			opt_bin = optarg;
			break;
		case 'k':
			opt_keep = true;
			break;
		case 'w':
			opt_wrap = *optarg ? optarg : NULL;
			break;
		default:
			usage();
		}
	}
	if (opt_bin == NULL || optind + 1 != argc)
		usage();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	raise_nofile();
	for (uint32_t i = 0, s = 1; i < PAT_LEN; i++)
		pattern[i] = (uint8_t)rnd(&s);
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		if (strcmp(argv[optind], scenarios[i].name) != 0)
			continue;
		scenarios[i].fn(&d);
		if (opt_wrap != NULL)
			show_valgrind_summary(&d);
		daemon_cleanup(&d, nerrors == 0);
		if (nerrors > 0)
			printf("  %lu check%s failed\n", nerrors,
			    nerrors == 1 ? "" : "s");
		return nerrors == 0 ? 0 : 1;
	}
	usage();
}
