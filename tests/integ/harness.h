/* harness.h: starts the real echorouterd binary for integration tests and talks to it. */
#ifndef ECHOROUTERD_TESTS_HARNESS_H
#define ECHOROUTERD_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Every wait in the harness is bounded. These are the defaults, generous
 * because the tests run on loaded machines and under sanitizers.
 */
#define HARNESS_READY_MS	10000	/* spawn -> READY=1 */
#define HARNESS_IO_MS		10000	/* one blocking client send/recv */
#define HARNESS_STATS_MS	10000	/* SIGUSR1 -> stats line */
#define HARNESS_STOP_MS		15000	/* SIGTERM -> exit, by default */

#define HARNESS_MAX_LISTENERS	16
#define HARNESS_MAX_REACTORS	64
#define HARNESS_MAX_FIELDS	48

/* How to start the daemon; a zeroed struct (or NULL) means the defaults. */
struct daemon_opts {
	const char *const *env;		/* extra "NAME=value", NULL-ended */
	const char *const *args;	/* extra arguments before -c FILE */
	unsigned long nofile;		/* RLIMIT_NOFILE of the child; 0: ours */
	bool	abstract_notify;	/* NOTIFY_SOCKET=@...; default: a path */
	bool	no_notify;		/* no NOTIFY_SOCKET in the environment */
};

struct daemon_listener {
	char	name[64];
	char	proto[32];
	char	on[96];			/* address:port as the daemon logs it */
	int	port;
};

/*
 * One running daemon with its private directory (config, log, notify
 * socket). Fields are read-only for tests.
 */
struct daemon {
	pid_t	pid;
	bool	reaped;
	int	wstatus;		/* waitpid status once reaped */
	char	dir[256];
	char	conf_path[300];
	char	log_path[300];
	char	notify_path[300];	/* "@..." when abstract */
	int	notify_fd;
	struct daemon_listener ls[HARNESS_MAX_LISTENERS];
	size_t	nls;
	/* Every notify datagram received, oldest first. */
	char	**notes;
	size_t	nnotes;
	size_t	notes_cap;
	size_t	note_cursor;		/* daemon_wait_notify looks from here */
};

/* A parsed `stats ...` log line. */
struct daemon_stats {
	char	line[2048];
	unsigned long long conns, accepted, refused_max, refused_fd;
	unsigned long long messages, bytes_in, bytes_out;
	unsigned long long per_reactor[HARNESS_MAX_REACTORS];
	unsigned nreactors;
	/* Every key=value with a numeric value, closed_<reason> included. */
	struct {
		char	key[48];
		unsigned long long value;
	} fields[HARNESS_MAX_FIELDS];
	unsigned nfields;
};

/* Result of running the binary to completion (-t, -V, -h). */
struct cmd_result {
	int	status;			/* exit code, 128+signal, -1 timeout */
	char	*out;			/* stdout, NUL-terminated */
	char	*err;			/* stderr, NUL-terminated */
};

/*
 * Runner set-up and tear-down: one private run directory under $TMPDIR (or
 * /tmp) holds every daemon's directory; it is removed at the end unless
 * keep (tests failed), when its path is printed. Raises our soft
 * RLIMIT_NOFILE to the hard one (a thousand clients need it).
 */
void	harness_init(void);
void	harness_fini(bool keep);

/* ECHOROUTERD_BIN, checked to be executable (the test fails if not). */
const char *harness_bin(void);

/* A new private directory inside the run directory; caller frees. */
char	*harness_mkdtemp(void);

/* Milliseconds on the monotonic clock; sleep for ms. */
uint64_t harness_now_ms(void);
void	harness_sleep_ms(unsigned ms);

/*
 * A seed for the PRNG: $ECHOROUTERD_TEST_SEED when set, else from the clock.
 * It is printed with what so a failure can be replayed.
 */
uint64_t harness_seed(const char *what);

/* splitmix64: a small, fast PRNG good enough for test data. */
uint64_t harness_rand(uint64_t *state);

/* Fills p with n bytes from the PRNG. */
void	harness_fill(uint64_t *state, uint8_t *p, size_t n);

/*
 * Runs ECHOROUTERD_BIN with args (NULL-ended), no NOTIFY_SOCKET, stdout and
 * stderr captured, for at most timeout_ms (then SIGKILL and status -1).
 * Free r with cmd_result_free.
 */
void	harness_run(const char *const *args, int timeout_ms,
	    struct cmd_result *r);
void	cmd_result_free(struct cmd_result *r);

/*
 * Writes conf to a private directory and starts the daemon on it with its
 * own NOTIFY_SOCKET; does not wait. The daemon dies with the test process
 * (PR_SET_PDEATHSIG), so a failing test leaves nothing running.
 */
struct daemon *daemon_spawn(const char *conf, const struct daemon_opts *o);

/*
 * Waits up to timeout_ms for READY=1, then learns the listeners' ports from
 * the log. 0 when ready; -1 if the daemon exited or the time ran out.
 */
int	daemon_wait_ready(struct daemon *d, int timeout_ms);

/* daemon_spawn + daemon_wait_ready; the test fails (log shown) if not ready. */
struct daemon *daemon_start(const char *conf, const struct daemon_opts *o);

/* The port of the listener called name; the test fails if there is none. */
int	daemon_port(struct daemon *d, const char *name);

/*
 * Waits up to timeout_ms for a notify datagram with a line starting with
 * what ("READY=1", "STATUS=", "STOPPING=1"), looking at datagrams after the
 * last one matched. true when found; false on timeout, or when the daemon
 * has exited and nothing left matches.
 */
bool	daemon_wait_notify(struct daemon *d, const char *what, int timeout_ms);

/* Whether any datagram received so far has such a line (no waiting). */
bool	daemon_notify_seen(struct daemon *d, const char *what);

/* Waits up to timeout_ms for a STATUS= line (any so far) holding text. */
bool	daemon_wait_status(struct daemon *d, const char *text,
	    int timeout_ms);

/*
 * Sends SIGUSR1 and parses the next `stats ` line the daemon logs (bounded
 * by HARNESS_STATS_MS; the test fails without one).
 */
void	daemon_stats(struct daemon *d, struct daemon_stats *st);

/* A numeric field of a stats line by name ("closed_idle"), or -1. */
long long daemon_stats_get(const struct daemon_stats *st, const char *key);

/*
 * Polls daemon_stats until key == value or timeout_ms passes; returns true
 * if it got there. st holds the last line read.
 */
bool	daemon_stats_wait(struct daemon *d, const char *key,
	    unsigned long long value, int timeout_ms, struct daemon_stats *st);

/* VmRSS in KiB from /proc/PID/status, or -1. */
long	daemon_rss_kib(struct daemon *d);
/* Whether the daemon runs with ASan's or TSan's allocator (its own heap). */
bool	daemon_is_sanitized(struct daemon *d);

/* utime + stime in clock ticks from /proc/PID/stat, or -1. */
long long daemon_cpu_ticks(struct daemon *d);

/* The whole log so far (caller frees), and substring tests on it. */
char	*daemon_log(struct daemon *d);
bool	daemon_log_contains(struct daemon *d, const char *s);
bool	daemon_wait_log(struct daemon *d, const char *s, int timeout_ms);

/* Prints the last lines of the log to stderr (for failure reports). */
void	daemon_dump_log(struct daemon *d, int lines);

/* Replaces the config file atomically (for SIGHUP tests). */
void	daemon_rewrite_config(struct daemon *d, const char *conf);

/* kill(2) on the daemon; 0 or -1. */
int	daemon_signal(struct daemon *d, int sig);

/* Whether the daemon still runs (reaps it if it has exited). */
bool	daemon_is_running(struct daemon *d);

/*
 * Waits up to timeout_ms for the daemon to exit: its exit code, 128+signal
 * when killed, or -1 if it still runs.
 */
int	daemon_wait_exit(struct daemon *d, int timeout_ms);

/*
 * SIGTERM, then waits up to timeout_ms. Returns the exit code (128+signal if
 * killed by one). If it does not exit in time it is SIGKILLed and the test
 * fails. A non-zero status prints the log tail (sanitizer reports land there).
 */
int	daemon_stop(struct daemon *d, int timeout_ms);

/* Kills the daemon if it still runs, removes its directory, frees d. */
void	daemon_free(struct daemon *d);

/*
 * Clients. All sockets are close-on-exec. client_connect* return a blocking
 * socket with SO_RCVTIMEO/SO_SNDTIMEO of HARNESS_IO_MS, so nothing hangs.
 */
int	client_connect(int port);			/* 127.0.0.1; fails the test */
int	client_connect_addr(const char *addr, int port); /* -1 + errno */
/* A non-blocking socket with connect() started (or done); -1 + errno. */
int	client_connect_nb(const char *addr, int port);

/* Sends all n bytes; 0, or -1 + errno. */
int	send_all(int fd, const void *p, size_t n);

/*
 * Receives exactly n bytes unless EOF, an error or timeout_ms comes first;
 * returns the bytes received (n when complete).
 */
size_t	recv_exact(int fd, void *p, size_t n, int timeout_ms);

/*
 * Reads one line (through its LF) into buf, NUL-terminated, LF kept, without
 * reading past it. Returns its length; 0 on EOF (also in the middle of a
 * line); -1 on error, timeout, or a line longer than cap - 1. After 0 or -1
 * the part of the line read so far is gone from the socket.
 */
ssize_t	recv_line(int fd, char *buf, size_t cap, int timeout_ms);

/*
 * Waits up to timeout_ms for the peer to close, discarding data: 0 on EOF,
 * the errno on a reset or error (ECONNRESET...), ETIMEDOUT if still open.
 */
int	client_wait_closed(int fd, int timeout_ms);

/* Sends n random bytes and checks they come back intact. */
bool	client_echo_ok(int fd, size_t n);

#endif
