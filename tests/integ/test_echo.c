/* test_echo.c: the echo service end to end: load, memory, reactors, faults, config, signals. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

/* A config with one echo listener on 127.0.0.1, any port, and extra lines. */
static char *
echo_conf(unsigned dispatchers, const char *extra)
{
	char *s;

	ck_assert(asprintf(&s,
	    "# echorouterd integration test\n"
	    "dispatchers = %u;\n"
	    "log = { level = \"info\"; };\n"
	    "listeners = (\n"
	    "  { name = \"echo\"; address = \"127.0.0.1\"; port = 0; "
	    "protocol = \"echo\"; }\n"
	    ");\n"
	    "%s", dispatchers, extra ? extra : "") > 0);
	return s;
}

static struct daemon *
start_echo(unsigned dispatchers, const char *extra,
    const struct daemon_opts *o)
{
	char *conf = echo_conf(dispatchers, extra);
	struct daemon *d = daemon_start(conf, o);

	free(conf);
	return d;
}

static void
stop_ok(struct daemon *d)
{
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	daemon_free(d);
}

/*
 * Echo load: many non-blocking clients in one epoll loop, each sending a
 * message of random size, waiting for all of it to come back, checking every
 * byte, then sending the next.
 */
struct eclient {
	int	fd;
	bool	connected;
	bool	done;
	uint32_t interest;
	uint64_t rng;
	uint8_t	*msg;
	size_t	len;
	size_t	sent;
	size_t	rcvd;
	unsigned msgs;
};

struct eload {
	int	epfd;
	struct eclient *c;
	size_t	n;
	unsigned target;		/* messages per client; 0: no end */
	size_t	max_size;
	size_t	ndone;			/* finished or failed */
	unsigned errors;
	char	first_error[256];
	unsigned long long bytes;	/* echoed and verified */
	unsigned long long msgs;
	uint64_t last_progress;
	uint8_t	*scratch;
};

#define ELOAD_SCRATCH	65536
#define ELOAD_STALL_MS	20000

static void
eload_fail(struct eload *l, struct eclient *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
eload_fail(struct eload *l, struct eclient *c, const char *fmt, ...)
{
	va_list ap;

	if (l->errors++ == 0) {
		int n = snprintf(l->first_error, sizeof(l->first_error),
		    "client %zu (msg %u, %zu/%zu sent, %zu rcvd): ",
		    (size_t)(c - l->c), c->msgs, c->sent, c->len, c->rcvd);

		va_start(ap, fmt);
		vsnprintf(l->first_error + n, sizeof(l->first_error) - (size_t)n,
		    fmt, ap);
		va_end(ap);
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->done = true;
	l->ndone++;
}

static void
eclient_interest(struct eload *l, struct eclient *c, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = c };

	if (c->interest == ev)
		return;
	ck_assert(epoll_ctl(l->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0);
	c->interest = ev;
}

/* Starts the next message, or ends the client when it has sent them all. */
static void
eclient_next(struct eload *l, struct eclient *c)
{
	if (l->target > 0 && c->msgs == l->target) {
		close(c->fd);
		c->fd = -1;
		c->done = true;
		l->ndone++;
		return;
	}
	c->len = 1 + harness_rand(&c->rng) % l->max_size;
	harness_fill(&c->rng, c->msg, c->len);
	c->sent = c->rcvd = 0;
	eclient_interest(l, c, EPOLLIN | EPOLLOUT);
}

static void
eload_start(struct eload *l, int port, size_t n, unsigned target,
    size_t max_size, uint64_t seed)
{
	memset(l, 0, sizeof(*l));
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	ck_assert(l->epfd >= 0);
	l->c = calloc(n, sizeof(*l->c));
	l->scratch = malloc(ELOAD_SCRATCH);
	ck_assert(l->c != NULL && l->scratch != NULL);
	l->n = n;
	l->target = target;
	l->max_size = max_size;
	l->last_progress = harness_now_ms();
	for (size_t i = 0; i < n; i++) {
		struct eclient *c = &l->c[i];
		struct epoll_event e = { .events = EPOLLOUT, .data.ptr = c };

		c->rng = seed ^ (0x9e3779b97f4a7c15ULL * (i + 1));
		c->msg = malloc(max_size);
		ck_assert(c->msg != NULL);
		c->fd = client_connect_nb("127.0.0.1", port);
		ck_assert_msg(c->fd >= 0, "connect %zu: %s", i,
		    strerror(errno));
		c->interest = EPOLLOUT;
		ck_assert(epoll_ctl(l->epfd, EPOLL_CTL_ADD, c->fd, &e) == 0);
	}
}

static void
eclient_on_connect(struct eload *l, struct eclient *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err != 0) {
		eload_fail(l, c, "connect: %s", strerror(err));
		return;
	}
	c->connected = true;
	eclient_next(l, c);
}

/* Reads what has come back; false once the client is finished or failed. */
static bool
eclient_read(struct eload *l, struct eclient *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, l->scratch, ELOAD_SCRATCH,
		    MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n < 0) {
			eload_fail(l, c, "recv: %s", strerror(errno));
			return false;
		}
		if (n == 0) {
			eload_fail(l, c, "unexpected EOF");
			return false;
		}
		if (c->rcvd + (size_t)n > c->sent) {
			eload_fail(l, c, "%zd bytes back, more than sent", n);
			return false;
		}
		if (memcmp(c->msg + c->rcvd, l->scratch, (size_t)n) != 0) {
			eload_fail(l, c, "echoed bytes differ in [%zu, %zu)",
			    c->rcvd, c->rcvd + (size_t)n);
			return false;
		}
		c->rcvd += (size_t)n;
		l->bytes += (unsigned long long)n;
		l->last_progress = harness_now_ms();
		if (c->rcvd == c->len) {
			c->msgs++;
			l->msgs++;
			eclient_next(l, c);
			return !c->done;
		}
	}
}

static void
eclient_write(struct eload *l, struct eclient *c)
{
	while (c->sent < c->len) {
		ssize_t n = send(c->fd, c->msg + c->sent, c->len - c->sent,
		    MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			eload_fail(l, c, "send: %s", strerror(errno));
			return;
		}
		c->sent += (size_t)n;
	}
	eclient_interest(l, c, EPOLLIN);
}

static void
eclient_event(struct eload *l, struct eclient *c, uint32_t ev)
{
	if (c->done)
		return;
	if (!c->connected) {
		eclient_on_connect(l, c);
		return;
	}
	if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !eclient_read(l, c))
		return;
	if (!c->done && c->sent < c->len)
		eclient_write(l, c);
}

/*
 * Drives the load for up to ms, or until every client is done. A load that
 * makes no progress for ELOAD_STALL_MS counts as an error.
 */
static void
eload_run(struct eload *l, unsigned ms)
{
	uint64_t end = harness_now_ms() + ms;
	struct epoll_event evs[256];

	while (l->ndone < l->n) {
		uint64_t now = harness_now_ms();
		int n;

		if (now >= end)
			return;
		if (now - l->last_progress > ELOAD_STALL_MS) {
			if (l->errors++ == 0)
				snprintf(l->first_error, sizeof(l->first_error),
				    "no echo for %d ms (%zu/%zu clients done)",
				    ELOAD_STALL_MS, l->ndone, l->n);
			return;
		}
		n = epoll_wait(l->epfd, evs, 256, (int)(end - now < 100 ?
		    end - now : 100));
		for (int i = 0; i < n; i++)
			eclient_event(l, evs[i].data.ptr, evs[i].events);
	}
}

static void
eload_free(struct eload *l)
{
	for (size_t i = 0; i < l->n; i++) {
		if (l->c[i].fd >= 0)
			close(l->c[i].fd);
		free(l->c[i].msg);
	}
	free(l->c);
	free(l->scratch);
	close(l->epfd);
}

/* Each of 1,000 clients echoes 100 messages of 1-4096 random bytes. */
START_TEST(echo_1000_clients_100_random_messages)
{
	struct daemon *d = start_echo(2, NULL, NULL);
	uint64_t seed = harness_seed("echo_1000_clients"), t0;
	struct daemon_stats st;
	struct eload l;

	t0 = harness_now_ms();
	eload_start(&l, daemon_port(d, "echo"), 1000, 100, 4096, seed);
	eload_run(&l, 150000);
	fprintf(stderr, "echo_1000_clients: %llu messages, %llu bytes in "
	    "%.1f s\n", l.msgs, l.bytes,
	    (double)(harness_now_ms() - t0) / 1000);
	ck_assert_msg(l.errors == 0, "%u errors; first: %s", l.errors,
	    l.first_error);
	ck_assert_uint_eq(l.ndone, 1000);
	ck_assert_uint_eq(l.msgs, 100000);
	/* The daemon counted the same bytes both ways. */
	ck_assert_msg(daemon_stats_wait(d, "conns", 0, 10000, &st),
	    "connections left open: %s", st.line);
	ck_assert_uint_eq(st.accepted, 1000);
	ck_assert_uint_eq(st.bytes_in, l.bytes);
	ck_assert_uint_eq(st.bytes_out, l.bytes);
	eload_free(&l);
	stop_ok(d);
}
END_TEST

/* The scheduling policy of the daemon's thread named name, or -1. */
static int
thread_policy(struct daemon *d, const char *name)
{
	char path[64], p[400], comm[64], st[1024];
	int policy = -1;
	struct dirent *e;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)d->pid);
	ck_assert((dir = opendir(path)) != NULL);
	while (policy < 0 && (e = readdir(dir)) != NULL) {
		bool match = false;
		char *q;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s/comm", path, e->d_name);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) != NULL) {
			comm[strcspn(comm, "\n")] = '\0';
			match = strcmp(comm, name) == 0;
		}
		fclose(f);
		snprintf(p, sizeof(p), "%s/%s/stat", path, e->d_name);
		if (!match || (f = fopen(p, "re")) == NULL)
			continue;
		/* Field 41 of stat; the fields after comm's ")" start at 3. */
		if (fgets(st, sizeof(st), f) != NULL &&
		    (q = strrchr(st, ')')) != NULL) {
			int field = 2;

			for (q++; *q != '\0' && policy < 0; q++)
				if (*q == ' ' && ++field == 41)
					policy = atoi(q + 1);
		}
		fclose(f);
	}
	closedir(dir);
	return policy;
}

/*
 * 300 clients, 60 messages each of up to 20,000 bytes (more than one
 * batched read, several output chunks), with io_uring and sched_batch on
 * or off: every byte back, and the log and the threads show which I/O and
 * scheduling carried it.
 */
static void
echo_load_with(bool on)
{
	const char *v = on ? "true" : "false";
	uint64_t seed = harness_seed(on ? "echo_batched" : "echo_plain");
	struct daemon_stats st;
	struct daemon *d;
	struct eload l;
	char *conf;

	ck_assert(asprintf(&conf,
	    "dispatchers = 2;\n"
	    "io_uring = %s;\n"
	    "sched_batch = %s;\n"
	    "log = { level = \"debug\"; };\n"
	    "listeners = (\n"
	    "  { name = \"echo\"; address = \"127.0.0.1\"; port = 0; "
	    "protocol = \"echo\"; }\n"
	    ");\n", v, v) > 0);
	d = daemon_start(conf, NULL);
	free(conf);
	eload_start(&l, daemon_port(d, "echo"), 300, 60, 20000, seed);
	eload_run(&l, 120000);
	ck_assert_msg(l.errors == 0, "%u errors; first: %s", l.errors,
	    l.first_error);
	ck_assert_uint_eq(l.ndone, 300);
	ck_assert_uint_eq(l.msgs, 300 * 60);
	ck_assert_msg(daemon_stats_wait(d, "conns", 0, 10000, &st),
	    "connections left open: %s", st.line);
	ck_assert_uint_eq(st.bytes_in, l.bytes);
	ck_assert_uint_eq(st.bytes_out, l.bytes);
	if (!on) {
		/* The start-up line names the build's liburing: not that. */
		ck_assert(!daemon_log_contains(d, "with io_uring"));
		ck_assert(!daemon_log_contains(d, "io_uring unavailable"));
		ck_assert_int_eq(thread_policy(d, "reactor-0"), SCHED_OTHER);
	} else if (daemon_log_contains(d, "io_uring unavailable")) {
		fprintf(stderr, "echo_batched: this kernel refuses io_uring; "
		    "plain system calls were used\n");
	} else {
		ck_assert(daemon_log_contains(d,
		    "reactor=0 batches reads and writes with io_uring"));
		ck_assert(daemon_log_contains(d,
		    "reactor=1 batches reads and writes with io_uring"));
	}
	if (on && !daemon_log_contains(d, "SCHED_BATCH refused")) {
		ck_assert_int_eq(thread_policy(d, "reactor-0"), SCHED_BATCH);
		ck_assert_int_eq(thread_policy(d, "reactor-1"), SCHED_BATCH);
	}
	eload_free(&l);
	stop_ok(d);
}

START_TEST(echo_batched_io_and_sched_batch)
{
	echo_load_with(true);
}
END_TEST

START_TEST(echo_plain_io_default_scheduling)
{
	echo_load_with(false);
}
END_TEST

static void
set_nonblock(int fd)
{
	ck_assert(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
}

/* A client that writes a lot and reads slowly, checking every byte. */
struct slow_reader {
	struct daemon *d;
	int	fd;
	const uint8_t *data;
	size_t	total;
	size_t	sent;
	size_t	rcvd;
	long	peak_rss;
	unsigned samples;
	uint8_t	rb[32768];
};

#define SLOW_RSS_LIMIT_KIB	(64 * 1024)

static void
slow_send(struct slow_reader *s)
{
	ssize_t n;

	while (s->sent < s->total && (n = send(s->fd, s->data + s->sent,
	    s->total - s->sent < 262144 ? s->total - s->sent : 262144,
	    MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
		s->sent += (size_t)n;
}

static void
slow_recv(struct slow_reader *s)
{
	ssize_t n = recv(s->fd, s->rb, sizeof(s->rb), MSG_DONTWAIT);

	ck_assert_msg(n > 0 || (n < 0 && errno == EAGAIN),
	    "recv after %zu bytes: %s", s->rcvd,
	    n == 0 ? "EOF" : strerror(errno));
	if (n <= 0)
		return;
	ck_assert_msg(s->rcvd + (size_t)n <= s->sent &&
	    memcmp(s->rb, s->data + s->rcvd, (size_t)n) == 0,
	    "echo differs in [%zu, %zu)", s->rcvd, s->rcvd + (size_t)n);
	s->rcvd += (size_t)n;
}

static void
slow_sample_rss(struct slow_reader *s)
{
	long rss = daemon_rss_kib(s->d);

	ck_assert(rss > 0);
	s->samples++;
	if (rss > s->peak_rss)
		s->peak_rss = rss;
	ck_assert_msg(rss < SLOW_RSS_LIMIT_KIB, "daemon VmRSS %ld KiB after "
	    "%zu bytes echoed (limit %d KiB)", rss, s->rcvd,
	    SLOW_RSS_LIMIT_KIB);
}

/* One client writes 16 MiB and reads it back slowly; RSS stays bounded. */
START_TEST(echo_16mib_slow_reader_bounded_rss)
{
	const size_t total = 16u << 20;
	struct slow_reader *s = calloc(1, sizeof(*s));
	uint64_t seed = harness_seed("echo_16mib_slow_reader");
	uint64_t now, next_read = 0, next_sample = 0;
	uint64_t deadline = harness_now_ms() + 120000;
	uint8_t *data = malloc(total);
	long base;

	ck_assert(s != NULL && data != NULL);
	harness_fill(&seed, data, total);
	s->d = start_echo(2, NULL, NULL);
	s->fd = client_connect(daemon_port(s->d, "echo"));
	s->data = data;
	s->total = total;
	s->peak_rss = base = daemon_rss_kib(s->d);
	set_nonblock(s->fd);
	while (s->rcvd < total) {
		struct pollfd pfd = { s->fd, s->sent < total ? POLLOUT : 0, 0 };

		now = harness_now_ms();
		ck_assert_msg(now < deadline, "only %zu of %zu bytes back",
		    s->rcvd, total);
		slow_send(s);
		if (now >= next_read) {
			/* Slowly: 32 KiB at most every 5 ms. */
			slow_recv(s);
			next_read = now + 5;
		}
		if (now >= next_sample) {
			slow_sample_rss(s);
			next_sample = now + 20;
		}
		poll(&pfd, 1, 2);
	}
	fprintf(stderr, "echo_16mib_slow_reader: VmRSS start %ld KiB, peak "
	    "%ld KiB over %u samples (limit %d KiB)\n", base, s->peak_rss,
	    s->samples, SLOW_RSS_LIMIT_KIB);
	close(s->fd);
	stop_ok(s->d);
	free(data);
	free(s);
}
END_TEST

/*
 * A client that sends 2 MiB, up to 128 KiB ahead of what it has back (the
 * sockets hold that), and reads all it can, under an output_limit of
 * 8 KiB: a read of 64 KiB is answered at once, as far as the socket takes
 * it, never queued whole against the limit (which would close the client
 * as a slow consumer).
 */
START_TEST(echo_big_reads_under_small_output_limit)
{
	const size_t total = 2u << 20;
	struct slow_reader *s = calloc(1, sizeof(*s));
	uint64_t seed = harness_seed("echo_big_reads");
	uint64_t deadline = harness_now_ms() + 60000;
	uint8_t *data = malloc(total);

	ck_assert(s != NULL && data != NULL);
	harness_fill(&seed, data, total);
	s->d = start_echo(2, "limits = { output_high_watermark = 4096; "
	    "output_limit = 8192; };\n", NULL);
	s->fd = client_connect(daemon_port(s->d, "echo"));
	s->data = data;
	s->total = total;
	set_nonblock(s->fd);
	while (s->rcvd < total) {
		struct pollfd pfd = { s->fd, POLLIN |
		    (s->sent < total ? POLLOUT : 0), 0 };

		size_t before;

		ck_assert_msg(harness_now_ms() < deadline,
		    "only %zu of %zu bytes back", s->rcvd, total);
		if (s->sent < total && s->sent - s->rcvd < 65536) {
			ssize_t n = send(s->fd, data + s->sent,
			    total - s->sent < 65536 ? total - s->sent : 65536,
			    MSG_DONTWAIT | MSG_NOSIGNAL);

			ck_assert_msg(n > 0 || errno == EAGAIN, "send: %s",
			    strerror(errno));
			if (n > 0)
				s->sent += (size_t)n;
		}
		do {
			before = s->rcvd;
			slow_recv(s);
		} while (s->rcvd > before);
		poll(&pfd, 1, 10);
	}
	close(s->fd);
	stop_ok(s->d);
	free(data);
	free(s);
}
END_TEST

/*
 * Sends until the socket has taken nothing for 1 s: the daemon has stopped
 * reading. Returns the bytes sent; samples the daemon's RSS meanwhile.
 */
static size_t
send_until_blocked(struct slow_reader *s)
{
	uint64_t deadline = harness_now_ms() + 60000, quiet_since = 0;

	while (s->sent < s->total) {
		struct pollfd pfd = { s->fd, POLLOUT, 0 };
		size_t before = s->sent;

		ck_assert_msg(harness_now_ms() < deadline, "still taking input "
		    "after %zu bytes", s->sent);
		slow_send(s);
		slow_sample_rss(s);
		if (s->sent > before)
			quiet_since = harness_now_ms();
		else if (harness_now_ms() - quiet_since >= 1000)
			break;
		poll(&pfd, 1, 100);
	}
	return s->sent;
}

/*
 * A client writes without reading until the daemon stops taking its input
 * (output over the high watermark: bounded, however much the client has),
 * then reads everything while it sends the rest: it gets every byte back
 * and is never closed as a slow consumer.
 */
static void
echo_write_then_read_all(const char *extra)
{
	const size_t total = 48u << 20;
	struct slow_reader *s = calloc(1, sizeof(*s));
	uint64_t seed = harness_seed("echo_write_then_read_all");
	uint64_t deadline;
	uint8_t *data = malloc(total);
	struct daemon_stats st;
	size_t blocked;

	ck_assert(s != NULL && data != NULL);
	harness_fill(&seed, data, total);
	s->d = start_echo(2, extra, NULL);
	s->fd = client_connect(daemon_port(s->d, "echo"));
	s->data = data;
	s->total = total;
	set_nonblock(s->fd);
	blocked = send_until_blocked(s);
	/*
	 * Loopback socket buffers hold a few MiB each way; the daemon keeps
	 * output_high_watermark (1 MiB) and one read more.
	 */
	ck_assert_msg(blocked < total, "the daemon took all %zu bytes", total);
	ck_assert(daemon_is_running(s->d));
	deadline = harness_now_ms() + 120000;
	while (s->rcvd < total) {
		struct pollfd pfd = { s->fd, POLLIN |
		    (s->sent < total ? POLLOUT : 0), 0 };
		size_t before;

		ck_assert_msg(harness_now_ms() < deadline, "only %zu of %zu "
		    "bytes back", s->rcvd, total);
		slow_send(s);
		do {
			before = s->rcvd;
			slow_recv(s);
		} while (s->rcvd > before);
		poll(&pfd, 1, 10);
	}
	fprintf(stderr, "echo_write_then_read_all%s: blocked after %zu bytes, "
	    "VmRSS peak %ld KiB\n", extra != NULL ? " (plain I/O)" : "",
	    blocked, s->peak_rss);
	daemon_stats(s->d, &st);
	ck_assert_msg(daemon_stats_get(&st, "closed_slow-consumer") == 0,
	    "%s", st.line);
	ck_assert(!daemon_log_contains(s->d, "closed reason=slow-consumer"));
	close(s->fd);
	stop_ok(s->d);
	free(data);
	free(s);
}

START_TEST(echo_writes_without_reading_then_reads_all)
{
	echo_write_then_read_all(NULL);
	echo_write_then_read_all("io_uring = false;\n");
}
END_TEST

/*
 * A burst of output held for clients that do not read grows the reactors'
 * heaps by tens of MiB; the heaps keep freed memory while the daemon is
 * busy, but once the clients are gone and traffic is quiet, the daemon
 * gives most of it back to the system within a few seconds.
 */
START_TEST(memory_given_back_after_a_burst)
{
	enum { NCLIENTS = 32 };
	static uint8_t block[262144];
	struct daemon *d = start_echo(2, NULL, NULL);
	int port = daemon_port(d, "echo"), fds[NCLIENTS];
	long base, peak, rss = 0;
	uint64_t quiet_since, deadline;

	/* ASan and TSan keep freed memory in their own heaps, by design. */
	if (daemon_is_sanitized(d)) {
		fprintf(stderr, "memory_given_back_after_a_burst: skipped, the "
		    "daemon runs with a sanitizer's allocator\n");
		stop_ok(d);
		return;
	}
	memset(block, 'x', sizeof(block));
	for (int i = 0; i < NCLIENTS; i++) {
		fds[i] = client_connect(port);
		set_nonblock(fds[i]);
	}
	base = daemon_rss_kib(d);
	/* Write until no client's socket has taken a byte for 1.5 s. */
	quiet_since = harness_now_ms();
	deadline = quiet_since + 60000;
	while (harness_now_ms() - quiet_since < 1500) {
		ck_assert_msg(harness_now_ms() < deadline, "still taking input");
		for (int i = 0; i < NCLIENTS; i++)
			if (send(fds[i], block, sizeof(block),
			    MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
				quiet_since = harness_now_ms();
		usleep(10000);
	}
	peak = daemon_rss_kib(d);
	ck_assert_msg(peak - base >= 16 * 1024, "VmRSS grew only from %ld to "
	    "%ld KiB", base, peak);
	for (int i = 0; i < NCLIENTS; i++)
		close(fds[i]);
	/* Quiet now: within a few ticks at most, the burst's heap goes. */
	deadline = harness_now_ms() + 10000;
	while (harness_now_ms() < deadline) {
		rss = daemon_rss_kib(d);
		if (rss - base < (peak - base) / 2)
			break;
		usleep(100000);
	}
	fprintf(stderr, "memory_given_back_after_a_burst: VmRSS %ld KiB, "
	    "%ld KiB with output held, %ld KiB once quiet\n", base, peak, rss);
	ck_assert_msg(rss - base < (peak - base) / 2, "VmRSS still %ld KiB, "
	    "%ld KiB at its peak, %ld KiB before", rss, peak, base);
	ck_assert(daemon_is_running(d));
	stop_ok(d);
}
END_TEST

/* Whether /proc/PID/task/<tid>/comm of some thread reads name. */
static bool
has_thread(struct daemon *d, const char *name)
{
	return thread_policy(d, name) >= 0;
}

/* dispatchers = 3: three named reactors, 300 clients placed 100 each. */
START_TEST(dispatchers_3_round_robin_100_each)
{
	struct daemon *d = start_echo(3, NULL, NULL);
	int port = daemon_port(d, "echo"), fds[300];
	struct daemon_stats st;

	ck_assert(has_thread(d, "reactor-0"));
	ck_assert(has_thread(d, "reactor-1"));
	ck_assert(has_thread(d, "reactor-2"));
	ck_assert(!has_thread(d, "reactor-3"));
	for (int i = 0; i < 300; i++)
		fds[i] = client_connect(port);
	ck_assert_msg(daemon_stats_wait(d, "conns", 300, 10000, &st),
	    "not all 300 adopted: %s", st.line);
	ck_assert_uint_eq(st.nreactors, 3);
	ck_assert_msg(st.per_reactor[0] == 100 && st.per_reactor[1] == 100 &&
	    st.per_reactor[2] == 100, "placement: %s", st.line);
	ck_assert_uint_eq(st.accepted, 300);
	/* All of them are served, whichever reactor has them. */
	for (int i = 0; i < 300; i += 50)
		ck_assert(client_echo_ok(fds[i], 1000));
	for (int i = 0; i < 300; i++)
		close(fds[i]);
	stop_ok(d);
}
END_TEST

/* Sends until the socket is full; the bytes sent. */
static size_t
fill_socket(int fd, const uint8_t *p, size_t n)
{
	size_t sent = 0;
	ssize_t w;

	while (sent < n && (w = send(fd, p + sent, n - sent,
	    MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
		sent += (size_t)w;
	return sent;
}

/* A client resets (RST) while the daemon has its output in flight. */
static void
client_reset_mid_write(struct eload *l, int port, const uint8_t *junk,
    size_t n)
{
	struct linger lg = { 1, 0 };
	int fd = client_connect(port);

	set_nonblock(fd);
	ck_assert(fill_socket(fd, junk, n) > 0);
	eload_run(l, 100);
	fill_socket(fd, junk, n);
	ck_assert(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	close(fd);
}

/* A client half-closes: it still gets all its echo, then EOF. */
static void
client_half_close(int port, const uint8_t *data, size_t n)
{
	uint8_t *back = malloc(n), extra;
	int fd = client_connect(port);

	ck_assert(back != NULL);
	ck_assert(send_all(fd, data, n) == 0);
	ck_assert(shutdown(fd, SHUT_WR) == 0);
	ck_assert_uint_eq(recv_exact(fd, back, n, HARNESS_IO_MS), n);
	ck_assert(memcmp(back, data, n) == 0);
	ck_assert_int_eq(recv_exact(fd, &extra, 1, HARNESS_IO_MS), 0);
	ck_assert_int_eq(client_wait_closed(fd, HARNESS_IO_MS), 0);
	close(fd);
	free(back);
}

/* A client process sends and is killed without reading its echo. */
static void
client_vanish(struct eload *l, int port, const uint8_t *data, size_t n)
{
	uint64_t deadline = harness_now_ms() + 20000;
	int wstatus;
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		int fd = client_connect_addr("127.0.0.1", port);

		if (fd >= 0)
			send_all(fd, data, n);
		raise(SIGKILL);
		_exit(1);
	}
	while (waitpid(pid, &wstatus, WNOHANG) != pid) {
		if (harness_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &wstatus, 0);
			break;
		}
		eload_run(l, 20);
	}
	ck_assert(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
}

/* Clients that reset, half-close or vanish do not disturb the others. */
START_TEST(faulty_clients_do_not_disturb_others)
{
	const size_t big = 8u << 20, half = 200000;
	struct daemon *d = start_echo(2, NULL, NULL);
	int port = daemon_port(d, "echo");
	uint64_t seed = harness_seed("faulty_clients"), before;
	uint8_t *data = malloc(big);
	struct daemon_stats st;
	struct eload l;

	ck_assert(data != NULL);
	harness_fill(&seed, data, big);
	eload_start(&l, port, 20, 0, 4096, seed);
	eload_run(&l, 300);
	before = l.msgs;
	client_reset_mid_write(&l, port, data, big);
	eload_run(&l, 300);
	client_half_close(port, data, half);
	eload_run(&l, 300);
	client_vanish(&l, port, data, 100000);
	eload_run(&l, 500);
	ck_assert_msg(l.errors == 0, "%u errors; first: %s", l.errors,
	    l.first_error);
	ck_assert_msg(l.msgs > before, "the others made no progress");
	for (size_t i = 0; i < l.n; i++)
		ck_assert_msg(l.c[i].msgs > 0, "client %zu made no progress", i);
	/* The faulty connections are gone; the load's 20 are all left. */
	ck_assert_msg(daemon_stats_wait(d, "conns", 20, 10000, &st),
	    "faulty connections not freed: %s", st.line);
	ck_assert_msg(daemon_stats_get(&st, "closed_reset") >= 1 &&
	    daemon_stats_get(&st, "closed_peer") >= 1, "%s", st.line);
	eload_run(&l, 200);
	ck_assert_msg(l.errors == 0, "%u errors; first: %s", l.errors,
	    l.first_error);
	eload_free(&l);
	free(data);
	stop_ok(d);
}
END_TEST

/*
 * Bad configurations. The line the error must name holds the marker "#<".
 * Each must fail with -t and on a normal start, naming FILE:LINE.
 */
static const struct bad_conf {
	const char *what;
	const char *text;
} bad_confs[] = {
	{ "unknown key",
	  "dispatchers = 1;\n"
	  "colour = \"blue\"; #<\n"
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n" },
	{ "wrong type",
	  "dispatchers = 1;\n"
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n"
	  "idle_timeout = \"ten\"; #<\n" },
	{ "wrong type (bool)",
	  "cpu_affinity = 1; #<\n"
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n" },
	{ "out of range dispatchers",
	  "# comment\n"
	  "dispatchers = 0; #<\n"
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n" },
	{ "dispatchers neither auto nor number",
	  "dispatchers = \"many\"; #<\n"
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n" },
	{ "out of range max_connections",
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n"
	  "\n"
	  "max_connections = 0; #<\n" },
	{ "out of range port",
	  "listeners = (\n"
	  "  { name = \"e\"; address = \"127.0.0.1\";\n"
	  "    port = 70000; #<\n"
	  "    protocol = \"echo\"; }\n"
	  ");\n" },
	{ "duplicate listener name",
	  "listeners = (\n"
	  "  { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; },\n"
	  "  { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } #<\n"
	  ");\n" },
	{ "syntax error",
	  "dispatchers = 1;\n"
	  "idle_timeout = = 3; #<\n"
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n" },
	{ "unknown protocol",
	  "listeners = (\n"
	  "  { name = \"e\"; address = \"127.0.0.1\"; port = 0;\n"
	  "    protocol = \"gopher\"; } #<\n"
	  ");\n" },
	{ "address not a literal",
	  "listeners = (\n"
	  "  { name = \"e\"; port = 0; protocol = \"echo\";\n"
	  "    address = \"localhost\"; } #<\n"
	  ");\n" },
	{ "unknown listener key",
	  "listeners = (\n"
	  "  { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\";\n"
	  "    backlog = 5; } #<\n"
	  ");\n" },
	{ "bad log level",
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n"
	  "log = { level = \"loud\"; }; #<\n" },
	{ "unknown limits key",
	  "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "
	  "protocol = \"echo\"; } );\n"
	  "limits = {\n"
	  "  max_lines = 100; #<\n"
	  "};\n" },
	{ "no listeners",
	  "dispatchers = 1;\n"
	  "listeners = ( ); #<\n" },
};

/* The 1-based line holding "#<" in text. */
static int
marker_line(const char *text)
{
	int line = 1;
	size_t i;

	for (i = 0; text[i] != '\0' && strncmp(text + i, "#<", 2) != 0; i++)
		line += text[i] == '\n';
	ck_assert_msg(text[i] != '\0', "no #< marker in the case");
	return line;
}

/* Every bad config case exits 1 naming FILE:LINE, with -t and without. */
START_TEST(bad_config_exits_1_naming_file_line)
{
	for (size_t i = 0; i < sizeof(bad_confs) / sizeof(bad_confs[0]); i++) {
		const struct bad_conf *bc = &bad_confs[i];
		struct daemon *d = daemon_spawn(bc->text, NULL);
		const char *args[] = { "-t", "-c", d->conf_path, NULL };
		char where[400];
		struct cmd_result r;
		int code;

		snprintf(where, sizeof(where), "%s:%d: ", d->conf_path,
		    marker_line(bc->text));
		code = daemon_wait_exit(d, HARNESS_READY_MS);
		if (code != 1 || !daemon_log_contains(d, where))
			daemon_dump_log(d, 10);
		ck_assert_msg(code == 1, "%s: start exited %d, not 1", bc->what,
		    code);
		ck_assert_msg(daemon_log_contains(d, where), "%s: start does "
		    "not say \"%s\"", bc->what, where);
		ck_assert_msg(!daemon_notify_seen(d, "READY=1"),
		    "%s: READY=1 with a bad config", bc->what);
		harness_run(args, HARNESS_READY_MS, &r);
		ck_assert_msg(r.status == 1, "%s: -t exited %d, not 1",
		    bc->what, r.status);
		ck_assert_msg(strstr(r.err, where) != NULL, "%s: -t does not "
		    "say \"%s\": %s", bc->what, where, r.err);
		cmd_result_free(&r);
		daemon_free(d);
	}
}
END_TEST

/* A good config passes -t with exit 0 (and the sample config too). */
START_TEST(good_config_check_exits_0)
{
	char *dir = harness_mkdtemp(), path[400];
	char *conf = echo_conf(2, "cpu_affinity = true;\nmax_connections = 10;\n"
	    "idle_timeout = 0;\nshutdown_timeout = 3;\n"
	    "limits = { max_line = 100; output_high_watermark = 65536; "
	    "output_limit = 1048576; };\n");
	const char *args[] = { "-t", "-c", path, NULL };
	struct cmd_result r;
	FILE *f;

	snprintf(path, sizeof(path), "%s/good.conf", dir);
	ck_assert((f = fopen(path, "w")) != NULL);
	fputs(conf, f);
	fclose(f);
	harness_run(args, HARNESS_READY_MS, &r);
	ck_assert_msg(r.status == 0, "-t exited %d: %s", r.status, r.err);
	cmd_result_free(&r);
	if (access("conf/echorouterd.conf", R_OK) == 0) {
		args[2] = "conf/echorouterd.conf";
		harness_run(args, HARNESS_READY_MS, &r);
		ck_assert_msg(r.status == 0, "sample config: %s", r.err);
		cmd_result_free(&r);
	}
	unlink(path);
	rmdir(dir);
	free(dir);
	free(conf);
}
END_TEST

/* SIGTERM with 500 connections, some with output in flight: exit 0 in time. */
START_TEST(sigterm_500_connections_exits_0_in_time)
{
	const unsigned shutdown_timeout = 2, nflight = 20;
	const size_t big = 8u << 20;
	struct daemon *d = start_echo(2, "shutdown_timeout = 2;\n", NULL);
	int port = daemon_port(d, "echo"), fds[500];
	uint8_t *data = malloc(big);
	uint64_t seed = 42, t0;
	struct daemon_stats st;
	double secs;
	int code;

	ck_assert(data != NULL);
	harness_fill(&seed, data, big);
	for (int i = 0; i < 500; i++)
		fds[i] = client_connect(port);
	/* Readers get their echo; these never read, so output piles up. */
	for (int i = 100; i < 150; i++)
		ck_assert(client_echo_ok(fds[i], 2000));
	for (unsigned i = 0; i < nflight; i++)
		set_nonblock(fds[i]);
	for (int round = 0, more = 1; more && round < 40; round++) {
		more = 0;
		for (unsigned i = 0; i < nflight; i++)
			more |= fill_socket(fds[i], data, big) > 0;
		harness_sleep_ms(25);
	}
	ck_assert_msg(daemon_stats_wait(d, "conns", 500, 10000, &st), "%s",
	    st.line);
	t0 = harness_now_ms();
	code = daemon_stop(d, (int)(shutdown_timeout * 1000 + 10000));
	secs = (double)(harness_now_ms() - t0) / 1000;
	fprintf(stderr, "sigterm_500: exit %d after %.2f s (shutdown_timeout "
	    "%u)\n", code, secs, shutdown_timeout);
	ck_assert_int_eq(code, 0);
	ck_assert_msg(secs < shutdown_timeout + 5.0, "took %.2f s", secs);
	ck_assert(daemon_wait_notify(d, "STOPPING=1", 0));
	/* Every client is told: EOF or reset, none left hanging. */
	for (int i = 0; i < 500; i++) {
		int r = client_wait_closed(fds[i], HARNESS_IO_MS);

		ck_assert_msg(r != ETIMEDOUT, "client %d still open", i);
		close(fds[i]);
	}
	free(data);
	daemon_free(d);
}
END_TEST

/*
 * Regression: the drain deadline was counted in whole seconds from the
 * start of the current second, so shutdown_timeout = 1 drained for anything
 * between a few milliseconds and 1 s. Queued output gets the full timeout.
 */
START_TEST(sigterm_drains_for_full_shutdown_timeout)
{
	const size_t big = 8u << 20;
	struct daemon *d = start_echo(1, "shutdown_timeout = 1;\n", NULL);
	int fd = client_connect(daemon_port(d, "echo"));
	uint8_t *data = malloc(big);
	uint64_t seed = 7, t0;
	double secs;

	ck_assert(data != NULL);
	harness_fill(&seed, data, big);
	set_nonblock(fd);
	/*
	 * Never read: the daemon is left with output it cannot send. Wait
	 * (bounded) until it really holds some, however loaded the machine.
	 */
	for (int round = 0; round < 400; round++) {
		struct daemon_stats st;

		fill_socket(fd, data, big);
		daemon_stats(d, &st);
		if (st.bytes_in >= st.bytes_out + (512u << 10))
			break;
		harness_sleep_ms(25);
	}
	t0 = harness_now_ms();
	ck_assert_int_eq(daemon_stop(d, 15000), 0);
	secs = (double)(harness_now_ms() - t0) / 1000;
	fprintf(stderr, "sigterm_drain: exit after %.2f s (shutdown_timeout "
	    "1)\n", secs);
	ck_assert_msg(secs >= 1.0, "drained for %.2f s only", secs);
	ck_assert_msg(secs < 1.0 + 5.0, "took %.2f s", secs);
	close(fd);
	free(data);
	daemon_free(d);
}
END_TEST

/* Waits until every one of n clients has been adopted or shed. */
static void
wait_all_placed(struct daemon *d, unsigned long long n, struct daemon_stats *st)
{
	uint64_t deadline = harness_now_ms() + 15000;

	for (;;) {
		daemon_stats(d, st);
		if (st->accepted + st->refused_fd + st->refused_max >= n)
			return;
		ck_assert_msg(harness_now_ms() < deadline, "stuck: %s",
		    st->line);
		harness_sleep_ms(100);
	}
}

/* Echo works on a few of the clients still open; how many are open. */
static int
echo_on_open_clients(const int *fds, int n)
{
	int open_fds = 0;

	for (int i = 0; i < n; i++) {
		struct pollfd pfd = { fds[i], POLLIN, 0 };

		/* Shed clients were closed: they read EOF or a reset. */
		if (poll(&pfd, 1, 0) != 0 || open_fds++ >= 5)
			continue;
		ck_assert(fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) &
		    ~O_NONBLOCK) == 0);
		ck_assert_msg(client_echo_ok(fds[i], 100),
		    "adopted client %d not served", i);
	}
	return open_fds;
}

/* RLIMIT_NOFILE 64 and 200 clients: no spinning, no dying, then serves. */
START_TEST(nofile_64_no_spin_then_serves_again)
{
	const struct daemon_opts o = { .nofile = 64 };
	struct daemon *d = start_echo(2, NULL, &o);
	int port = daemon_port(d, "echo"), fds[200], fd;
	long hz = sysconf(_SC_CLK_TCK);
	long long t0, t1;
	struct daemon_stats st;

	for (int i = 0; i < 200; i++) {
		fds[i] = client_connect_nb("127.0.0.1", port);
		ck_assert_msg(fds[i] >= 0, "connect: %s", strerror(errno));
	}
	wait_all_placed(d, 200, &st);
	fprintf(stderr, "nofile_64: %s\n", st.line);
	ck_assert(st.refused_fd > 0);
	ck_assert(daemon_log_contains(d, "out of file descriptors"));
	t0 = daemon_cpu_ticks(d);
	harness_sleep_ms(2000);
	t1 = daemon_cpu_ticks(d);
	fprintf(stderr, "nofile_64: %lld ticks of CPU in 2 s (%ld/s)\n",
	    t1 - t0, hz);
	ck_assert(t0 >= 0 && t1 >= 0);
	ck_assert_msg(t1 - t0 < hz * 2 * 30 / 100, "daemon spins: %lld ticks "
	    "in 2 s", t1 - t0);
	ck_assert(daemon_is_running(d));
	ck_assert_msg(echo_on_open_clients(fds, 200) > 0, "none adopted");
	for (int i = 0; i < 200; i++)
		close(fds[i]);
	ck_assert_msg(daemon_stats_wait(d, "conns", 0, 10000, &st), "%s",
	    st.line);
	fd = client_connect(port);
	ck_assert_msg(client_echo_ok(fd, 5000), "not served once fds freed");
	close(fd);
	stop_ok(d);
}
END_TEST

/*
 * idle_timeout = 1: the idle client is closed within ~3 s; clients active
 * every 150 ms stay. Regression: the sweep closed clients whose last
 * activity merely fell in the previous second (idle for a few ms).
 */
START_TEST(idle_timeout_closes_idle_spares_active)
{
	struct daemon *d = start_echo(1, "idle_timeout = 1;\n", NULL);
	int port = daemon_port(d, "echo"), idle, active[3];
	uint64_t t0, idle_closed = 0, end;
	struct daemon_stats st;
	char buf[16] = "ping-0123456789", back[16];

	idle = client_connect(port);
	for (int i = 0; i < 3; i++)
		active[i] = client_connect(port);
	t0 = harness_now_ms();
	end = t0 + 4500;
	for (unsigned tick = 0; harness_now_ms() < end; tick++) {
		int a = active[tick % 3];
		struct pollfd pfd = { idle, POLLIN, 0 };

		ck_assert_msg(send_all(a, buf, sizeof(buf)) == 0 &&
		    recv_exact(a, back, sizeof(back), HARNESS_IO_MS) ==
		    sizeof(back), "active client %u closed after %.2f s",
		    tick % 3, (double)(harness_now_ms() - t0) / 1000);
		if (idle_closed == 0 && poll(&pfd, 1, 0) == 1) {
			ck_assert_int_eq(client_wait_closed(idle, 1000), 0);
			idle_closed = harness_now_ms();
		}
		harness_sleep_ms(50);
	}
	ck_assert_msg(idle_closed != 0, "idle client still open after 4.5 s");
	fprintf(stderr, "idle_timeout: idle client closed after %.2f s\n",
	    (double)(idle_closed - t0) / 1000);
	ck_assert_msg(idle_closed - t0 <= 4000, "closed after %.2f s",
	    (double)(idle_closed - t0) / 1000);
	ck_assert_msg(idle_closed - t0 >= 900, "closed after %.2f s",
	    (double)(idle_closed - t0) / 1000);
	daemon_stats(d, &st);
	ck_assert_msg(daemon_stats_get(&st, "closed_idle") == 1, "%s",
	    st.line);
	close(idle);
	for (int i = 0; i < 3; i++)
		close(active[i]);
	stop_ok(d);
}
END_TEST

/* max_connections = 5: the 6th client is closed at once and counted. */
START_TEST(max_connections_5_refuses_6th)
{
	struct daemon *d = start_echo(2, "max_connections = 5;\n", NULL);
	int port = daemon_port(d, "echo"), fds[5], sixth, r;
	struct daemon_stats st;

	for (int i = 0; i < 5; i++) {
		fds[i] = client_connect(port);
		ck_assert(client_echo_ok(fds[i], 100));
	}
	sixth = client_connect(port);
	r = client_wait_closed(sixth, HARNESS_IO_MS);
	ck_assert_msg(r == 0 || r == ECONNRESET, "6th client: %s",
	    strerror(r));
	close(sixth);
	daemon_stats(d, &st);
	ck_assert_msg(st.refused_max == 1 && st.conns == 5, "%s", st.line);
	ck_assert(daemon_wait_log(d, "max_connections reached", 5000));
	for (int i = 0; i < 5; i++)
		ck_assert(client_echo_ok(fds[i], 100));
	/* A freed place is taken again. */
	close(fds[0]);
	ck_assert(daemon_stats_wait(d, "conns", 4, 10000, &st));
	fds[0] = client_connect(port);
	ck_assert(client_echo_ok(fds[0], 100));
	for (int i = 0; i < 5; i++)
		close(fds[i]);
	stop_ok(d);
}
END_TEST

/* SIGHUP with a bad file keeps the running config; a good one is taken. */
START_TEST(sighup_bad_config_keeps_old)
{
	struct daemon *d = start_echo(2, NULL, NULL);
	int port = daemon_port(d, "echo"), fd = client_connect(port), fd2;
	char where[400], *bad, *good;

	ck_assert(client_echo_ok(fd, 1000));
	bad = echo_conf(2, "\nidle_timeout = -5; #<\n");
	good = echo_conf(2, "idle_timeout = 300;\n");
	daemon_rewrite_config(d, bad);
	snprintf(where, sizeof(where), "%s:%d: ", d->conf_path,
	    marker_line(bad));
	ck_assert_int_eq(daemon_signal(d, SIGHUP), 0);
	ck_assert_msg(daemon_wait_log(d, "reload failed", 10000),
	    "no reload failure logged");
	ck_assert_msg(daemon_log_contains(d, where), "reload error does not "
	    "name %s", where);
	ck_assert(daemon_is_running(d));
	ck_assert(client_echo_ok(fd, 1000));
	fd2 = client_connect(port);
	ck_assert(client_echo_ok(fd2, 1000));
	daemon_rewrite_config(d, good);
	ck_assert_int_eq(daemon_signal(d, SIGHUP), 0);
	ck_assert_msg(daemon_wait_log(d, "reloaded", 10000), "no reload");
	ck_assert(client_echo_ok(fd, 1000));
	ck_assert(client_echo_ok(fd2, 1000));
	close(fd);
	close(fd2);
	free(bad);
	free(good);
	stop_ok(d);
}
END_TEST

/* -V prints the version, -h the usage, both exit 0; a bad option exits 1. */
START_TEST(version_and_help)
{
	const char *v[] = { "-V", NULL }, *h[] = { "-h", NULL };
	const char *bad[] = { "-Z", NULL };
	struct cmd_result r;

	harness_run(v, HARNESS_READY_MS, &r);
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strncmp(r.out, "echorouterd ", 12) == 0 &&
	    strstr(r.out, VERSION) != NULL, "-V: %s", r.out);
	cmd_result_free(&r);
	harness_run(h, HARNESS_READY_MS, &r);
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strstr(r.out, "usage:") != NULL &&
	    strstr(r.out, "-c") != NULL && strstr(r.out, "-t") != NULL,
	    "-h: %s", r.out);
	cmd_result_free(&r);
	harness_run(bad, HARNESS_READY_MS, &r);
	ck_assert_int_eq(r.status, 1);
	ck_assert_msg(strstr(r.err, "usage:") != NULL, "-Z: %s", r.err);
	cmd_result_free(&r);
}
END_TEST

static bool
ipv6_loopback_works(void)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
	    .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 &&
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* echo over [::1], skipped when the host has no IPv6 loopback. */
START_TEST(echo_over_ipv6_loopback)
{
	struct daemon *d;
	int fd;

	if (!ipv6_loopback_works()) {
		fprintf(stderr, "echo_over_ipv6_loopback: no ::1 here, "
		    "skipped\n");
		return;
	}
	d = daemon_start("dispatchers = 1;\nlisteners = ( { name = \"six\"; "
	    "address = \"::1\"; port = 0; protocol = \"echo\"; } );\n", NULL);
	ck_assert(strncmp(d->ls[0].on, "[::1]:", 6) == 0);
	fd = client_connect_addr("::1", daemon_port(d, "six"));
	ck_assert_msg(fd >= 0, "connect [::1]: %s", strerror(errno));
	ck_assert(client_echo_ok(fd, 10000));
	close(fd);
	stop_ok(d);
}
END_TEST

/* The harness itself: abstract NOTIFY_SOCKET, notify history, log lines. */
START_TEST(harness_abstract_notify_and_stop)
{
	const struct daemon_opts o = { .abstract_notify = true };
	struct daemon *d = start_echo(1, NULL, &o);
	int fd = client_connect(daemon_port(d, "echo"));

	ck_assert(d->notify_path[0] == '@');
	ck_assert(daemon_notify_seen(d, "READY=1"));
	ck_assert(daemon_log_contains(d, "listening name=echo protocol=echo"));
	ck_assert(client_echo_ok(fd, 100));
	close(fd);
	ck_assert_int_eq(daemon_stop(d, HARNESS_STOP_MS), 0);
	ck_assert(daemon_wait_notify(d, "STOPPING=1", 1000));
	daemon_free(d);
}
END_TEST

/* Each test is its own TCase, named after it, with its own timeout. */
#define ADD_TEST(s, tf, timeout)					\
	do {								\
		TCase *tc_ = tcase_create(#tf);				\
		tcase_set_timeout(tc_, timeout);			\
		tcase_add_test(tc_, tf);				\
		suite_add_tcase(s, tc_);				\
	} while (0)

Suite *
echo_suite(void)
{
	Suite *s = suite_create("echo");

	ADD_TEST(s, echo_1000_clients_100_random_messages, 170);
	ADD_TEST(s, echo_16mib_slow_reader_bounded_rss, 150);
	ADD_TEST(s, echo_batched_io_and_sched_batch, 150);
	ADD_TEST(s, echo_big_reads_under_small_output_limit, 90);
	ADD_TEST(s, echo_writes_without_reading_then_reads_all, 300);
	ADD_TEST(s, memory_given_back_after_a_burst, 60);
	ADD_TEST(s, echo_plain_io_default_scheduling, 150);
	ADD_TEST(s, dispatchers_3_round_robin_100_each, 60);
	ADD_TEST(s, faulty_clients_do_not_disturb_others,
	    90);
	ADD_TEST(s, bad_config_exits_1_naming_file_line, 120);
	ADD_TEST(s, good_config_check_exits_0, 30);
	ADD_TEST(s, sigterm_500_connections_exits_0_in_time, 90);
	ADD_TEST(s, sigterm_drains_for_full_shutdown_timeout, 60);
	ADD_TEST(s, nofile_64_no_spin_then_serves_again, 90);
	ADD_TEST(s, idle_timeout_closes_idle_spares_active,
	    60);
	ADD_TEST(s, max_connections_5_refuses_6th, 60);
	ADD_TEST(s, sighup_bad_config_keeps_old, 60);
	ADD_TEST(s, version_and_help, 30);
	ADD_TEST(s, echo_over_ipv6_loopback, 30);
	ADD_TEST(s, harness_abstract_notify_and_stop, 30);
	return s;
}
