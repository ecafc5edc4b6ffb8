/* test_conn.c: connections over a scripted fake transport, and handles. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "helpers.h"
#include "proto.h"
#include "reactor.h"
#include "suites.h"
#include "transport.h"

/*
 * The fake transport. Readiness is real: the connection's fd is an
 * eventfd that the test makes readable (and that is always writable);
 * what read returns and what writev takes are scripted.
 */
#define FAKE_STEPS	64
#define FAKE_OUT	65536

/* One read's result: bytes, the peer's EOF (n 0) or an error (n -1). */
struct fake_step {
	const char *p;
	ssize_t	n;
	int	err;
};

/* The fake transport's state; its struct transport first (c->xp). */
struct fake {
	struct transport xp;
	struct fake_step steps[FAKE_STEPS];
	unsigned nsteps;
	unsigned next;		/* the step the next read returns */
	size_t	off;		/* bytes of it already returned */
	bool	drain_fd;	/* a read takes the fd's readiness too */
	bool	pending;	/* has_pending: while steps are left */
	size_t	budget;		/* bytes one writev takes; 0: EAGAIN */
	int	write_err;	/* writev fails with this, if not 0 */
	uint32_t wants;
	size_t	unsent;
	char	out[FAKE_OUT];
	size_t	nout;
	unsigned reads;
	unsigned writevs;
	unsigned closes;
	unsigned shutdowns;
};

static ssize_t
fake_read(struct conn *c, void *p, size_t n)
{
	struct fake *f = (struct fake *)c->xp;
	struct fake_step *s;
	uint64_t v;

	f->reads++;
	if (f->drain_fd && read(c->io.fd, &v, sizeof(v)) < 0)
		ck_assert_int_eq(errno, EAGAIN);
	if (f->next == f->nsteps) {
		errno = EAGAIN;
		return -1;
	}
	s = &f->steps[f->next];
	if (s->n < 0) {
		f->next++;
		errno = s->err;
		return -1;
	}
	if (s->n == 0)
		return 0;	/* EOF stays EOF */
	if (n > (size_t)s->n - f->off)
		n = (size_t)s->n - f->off;
	memcpy(p, s->p + f->off, n);
	f->off += n;
	if (f->off == (size_t)s->n) {
		f->next++;
		f->off = 0;
	}
	return (ssize_t)n;
}

static ssize_t
fake_writev(struct conn *c, const struct iovec *iov, int cnt)
{
	struct fake *f = (struct fake *)c->xp;
	size_t took = 0;

	f->writevs++;
	if (f->write_err != 0 || f->budget == 0) {
		errno = f->write_err != 0 ? f->write_err : EAGAIN;
		return -1;
	}
	for (int i = 0; i < cnt && took < f->budget; i++) {
		size_t k = iov[i].iov_len;

		if (k > f->budget - took)
			k = f->budget - took;
		ck_assert_uint_le(f->nout + k, FAKE_OUT);
		memcpy(f->out + f->nout, iov[i].iov_base, k);
		f->nout += k;
		took += k;
	}
	return (ssize_t)took;
}

static int
fake_shutdown(struct conn *c)
{
	((struct fake *)c->xp)->shutdowns++;
	return 0;
}

static size_t
fake_unsent(struct conn *c)
{
	return ((struct fake *)c->xp)->unsent;
}

/* Adds what it waits for itself (wants), like TLS mid-handshake. */
static uint32_t
fake_events(struct conn *c, uint32_t events)
{
	return events | ((struct fake *)c->xp)->wants;
}

static bool
fake_has_pending(struct conn *c)
{
	struct fake *f = (struct fake *)c->xp;

	return f->pending && f->next < f->nsteps && f->steps[f->next].n > 0;
}

static void
fake_close(struct conn *c)
{
	((struct fake *)c->xp)->closes++;
}

/* Batchable: with io_uring = false it must still see every call. */
static const struct transport_ops fake_xp = {
	.name = "fake",
	.read = fake_read,
	.writev = fake_writev,
	.shutdown = fake_shutdown,
	.unsent = fake_unsent,
	.events = fake_events,
	.has_pending = fake_has_pending,
	.batchable = true,
	.close = fake_close,
};

/* Like TLS in user space: never in the ring's batch. */
static const struct transport_ops fake_xp_unbatchable = {
	.name = "fake-unbatchable",
	.read = fake_read,
	.writev = fake_writev,
	.shutdown = fake_shutdown,
	.unsent = fake_unsent,
	.events = fake_events,
	.has_pending = fake_has_pending,
	.batchable = false,
	.close = fake_close,
};

static void
fake_script(struct fake *f, const char *p)
{
	ck_assert_uint_lt(f->nsteps, FAKE_STEPS);
	f->steps[f->nsteps++] = (struct fake_step){ p, (ssize_t)strlen(p), 0 };
}

static void
fake_script_eof(struct fake *f)
{
	f->steps[f->nsteps++] = (struct fake_step){ NULL, 0, 0 };
}

static void
fake_script_err(struct fake *f, int err)
{
	f->steps[f->nsteps++] = (struct fake_step){ NULL, -1, err };
}

/*
 * The test protocol: LF-terminated lines, recorded; echoed back when
 * lp.echo is set.
 */
#define LINES_MAX	128

static struct {
	char	line[LINES_MAX][128];
	unsigned n;
	bool	echo;
	bool	hold;		/* hold input after each line */
	size_t	reply;		/* answer each line with this many bytes */
	unsigned closed;
	enum conn_close_reason reason;
} lp;

static ssize_t
line_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	const uint8_t *lf = memchr(p, '\n', n);

	(void)lim;
	return lf != NULL ? lf - p + 1 : 0;
}

static int
line_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	ck_assert_uint_lt(lp.n, LINES_MAX);
	ck_assert_uint_lt(len, sizeof(lp.line[0]));
	memcpy(lp.line[lp.n], msg, len - 1);
	lp.line[lp.n][len - 1] = '\0';
	lp.n++;
	if (lp.echo)
		ck_assert(conn_write(c, msg, len));
	if (lp.reply > 0) {
		char big[1024];

		ck_assert_uint_le(lp.reply, sizeof(big));
		memset(big, '.', lp.reply);
		memcpy(big, msg, len);
		conn_write(c, big, lp.reply);
	}
	if (lp.hold)
		conn_hold(c);
	return 0;
}

static void
line_on_close(struct conn *c)
{
	lp.closed++;
	lp.reason = (enum conn_close_reason)c->close_reason;
}

static const struct proto line_proto = {
	.name = "test-lines",
	.frame_len = line_frame_len,
	.on_message = line_on_message,
	.on_close = line_on_close,
};

static const char *const conf_plain =
    "io_uring = false;\n"
    "listeners = ( { name = \"t\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"echo\"; } );\n";

static const char *const conf_uring =
    "io_uring = true;\n"
    "listeners = ( { name = \"t\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"echo\"; } );\n";

/* One reactor, never started: the test's thread drives it. */
static struct config *cf;
static struct reactor *r;
static struct fake fk;

static void
setup(const char *conf)
{
	memset(&lp, 0, sizeof(lp));
	memset(&fk, 0, sizeof(fk));
	fk.budget = SIZE_MAX;
	cf = unit_config(conf);
	r = reactor_new(0, cf);
	ck_assert_ptr_nonnull(r);
}

static void
teardown(void)
{
	reactor_free(r);
	config_unref(cf);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
}

/* A connection over ops and f on a fresh eventfd (readable if ready). */
static struct conn *
open_conn(const struct transport_ops *ops, struct fake *f, bool ready)
{
	int fd = eventfd(ready ? 1 : 0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct conn *c;

	ck_assert_int_ge(fd, 0);
	atomic_fetch_add(&conn_live, 1);
	f->xp.ops = ops;
	c = conn_new_with(r, fd, &line_proto, &f->xp);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* Makes the eventfd readable once more. */
static void
kick(struct conn *c)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(c->io.fd, &one, sizeof(one)), sizeof(one));
}

static void
turns(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		reactor_run_once(r, 0);
}

/* A line split over three reads is handed over once, whole. */
START_TEST(conn_partial_reads)
{
	setup(conf_plain);
	fake_script(&fk, "hel");
	fake_script(&fk, "lo\nwor");
	fake_script(&fk, "ld\n");
	open_conn(&fake_xp, &fk, true);
	turns(1);
	ck_assert_uint_eq(lp.n, 0);
	turns(1);
	ck_assert_uint_eq(lp.n, 1);
	ck_assert_str_eq(lp.line[0], "hello");
	turns(3);
	ck_assert_uint_eq(lp.n, 2);
	ck_assert_str_eq(lp.line[1], "world");
	ck_assert_uint_eq(lp.closed, 0);
	teardown();
}
END_TEST

/* Several lines in one read, and a tail kept for the next. */
START_TEST(conn_several_lines_one_read)
{
	setup(conf_plain);
	fake_script(&fk, "a\nbb\nccc\ndd");
	fake_script(&fk, "d\n");
	open_conn(&fake_xp, &fk, true);
	turns(1);
	ck_assert_uint_eq(lp.n, 3);
	ck_assert_str_eq(lp.line[0], "a");
	ck_assert_str_eq(lp.line[1], "bb");
	ck_assert_str_eq(lp.line[2], "ccc");
	turns(1);
	ck_assert_uint_eq(lp.n, 4);
	ck_assert_str_eq(lp.line[3], "ddd");
	teardown();
}
END_TEST

/*
 * writev takes 7 bytes a call: the echo arrives whole and in order, with
 * EPOLLOUT asked while output waits and dropped once it is out.
 */
START_TEST(conn_partial_writes)
{
	static char in[2048];
	size_t len = 0;
	struct conn *c;
	unsigned n;

	setup(conf_plain);
	for (unsigned i = 0; i < 40; i++)
		len += (size_t)snprintf(in + len, sizeof(in) - len,
		    "line-%02u-%.*s\n", i, (int)(i % 23),
		    "abcdefghijklmnopqrstuvw");
	fake_script(&fk, in);
	fk.budget = 7;
	lp.echo = true;
	c = open_conn(&fake_xp, &fk, true);
	turns(1);
	ck_assert_uint_eq(lp.n, 40);
	ck_assert_uint_eq(fk.nout, 7);
	ck_assert(c->io.events & EPOLLOUT);
	for (n = 0; n < 1000 && fk.nout < len; n++)
		turns(1);
	ck_assert_msg(fk.nout == len, "%zu of %zu bytes out after %u turns",
	    fk.nout, len, n);
	ck_assert_mem_eq(fk.out, in, len);
	ck_assert_uint_ge(fk.writevs, (len + 6) / 7);
	ck_assert(!(c->io.events & EPOLLOUT));
	ck_assert(c->io.events & EPOLLIN);
	ck_assert_uint_eq(conn_pending(c), 0);
	ck_assert_uint_eq(lp.closed, 0);
	teardown();
}
END_TEST

/*
 * EAGAIN from read, with the fd still readable: one read a turn, no
 * spinning, no close.
 */
START_TEST(conn_read_eagain)
{
	struct conn *c;
	struct conn_handle h;

	setup(conf_plain);
	fake_script(&fk, "x\n");
	c = open_conn(&fake_xp, &fk, true);
	h = conn_handle(c);
	turns(1);
	ck_assert_uint_eq(lp.n, 1);
	ck_assert_uint_eq(fk.reads, 1);
	turns(10);
	ck_assert_uint_eq(fk.reads, 11);
	ck_assert_uint_eq(lp.closed, 0);
	ck_assert_ptr_eq(conn_resolve(r, &h), c);
	ck_assert(c->io.events & EPOLLIN);
	teardown();
}
END_TEST

/*
 * EAGAIN from writev: the output waits with EPOLLOUT asked, one try a
 * turn, no close; once the transport takes bytes again it all goes.
 */
START_TEST(conn_write_eagain)
{
	struct conn *c;

	setup(conf_plain);
	fake_script(&fk, "hi\nthere\n");
	fk.budget = 0;
	lp.echo = true;
	c = open_conn(&fake_xp, &fk, true);
	turns(1);
	ck_assert_uint_eq(lp.n, 2);
	ck_assert_uint_eq(fk.nout, 0);
	ck_assert_uint_eq(conn_pending(c), 9);
	ck_assert(c->io.events & EPOLLOUT);
	fk.writevs = 0;
	turns(10);
	ck_assert_uint_le(fk.writevs, 20);
	ck_assert_uint_eq(lp.closed, 0);
	ck_assert_uint_eq(conn_pending(c), 9);
	fk.budget = SIZE_MAX;
	turns(1);
	ck_assert_uint_eq(fk.nout, 9);
	ck_assert_mem_eq(fk.out, "hi\nthere\n", 9);
	ck_assert(!(c->io.events & EPOLLOUT));
	ck_assert_uint_eq(lp.closed, 0);
	teardown();
}
END_TEST

/*
 * 100 lines in one read, each answered with 512 bytes, to a client that
 * takes 1,000 bytes a turn, under output_high_watermark 4096 and
 * output_limit 8192: the lines are handled as the output drains, never
 * all at once (51,200 bytes, a slow consumer). Each is answered, in order,
 * and the EOF behind them closes the connection only after.
 */
START_TEST(conn_input_waits_while_output_high)
{
	static char in[100 * 5 + 1];
	size_t peak = 0;
	struct conn *c;
	unsigned n;

	setup("io_uring = false;\nlimits = { output_high_watermark = 4096; "
	    "output_limit = 8192; };\n"
	    "listeners = ( { name = \"t\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"echo\"; } );\n");
	for (unsigned i = 0; i < 100; i++)
		snprintf(in + i * 5, 6, "l%03u\n", i);
	fake_script(&fk, in);
	fake_script_eof(&fk);
	fk.budget = 1000;
	lp.reply = 512;
	c = open_conn(&fake_xp, &fk, true);
	for (n = 0; n < 2000 && lp.closed == 0; n++) {
		turns(1);
		if (lp.closed == 0 && conn_pending(c) > peak)
			peak = conn_pending(c);
	}
	ck_assert_uint_eq(lp.n, 100);
	ck_assert_uint_eq(lp.closed, 1);
	ck_assert_msg(lp.reason == CONN_CLOSE_PEER, "closed as %s",
	    conn_close_reason_name(lp.reason));
	ck_assert_uint_eq(fk.nout, 100 * 512);
	for (unsigned i = 0; i < 100; i++)
		ck_assert_mem_eq(fk.out + i * 512, in + i * 5, 5);
	ck_assert_msg(peak <= 4096 + 512, "%zu bytes queued", peak);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CLOSED_SLOW), 0);
	teardown();
}
END_TEST

/* The peer's EOF closes the connection once its answer is all out. */
START_TEST(conn_eof_closes_after_flush)
{
	setup(conf_plain);
	fake_script(&fk, "bye\n");
	fake_script_eof(&fk);
	fk.budget = 1;
	lp.echo = true;
	open_conn(&fake_xp, &fk, true);
	for (unsigned n = 0; n < 100 && lp.closed == 0; n++)
		turns(1);
	ck_assert_uint_eq(lp.closed, 1);
	ck_assert_uint_eq(fk.nout, 4);
	ck_assert_mem_eq(fk.out, "bye\n", 4);
	ck_assert_int_eq(lp.reason, CONN_CLOSE_PEER);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CLOSED_PEER),
	    1);
	ck_assert_uint_eq(fk.closes, 1);
	ck_assert_uint_eq(conn_count(r), 0);
	teardown();
	ck_assert_uint_eq(fk.closes, 1);
}
END_TEST

/* A transport error closes at once, reason reset; close runs once. */
START_TEST(conn_transport_error_resets)
{
	setup(conf_plain);
	fake_script(&fk, "ok\n");
	fake_script_err(&fk, ECONNRESET);
	open_conn(&fake_xp, &fk, true);
	turns(2);
	ck_assert_uint_eq(lp.n, 1);
	ck_assert_uint_eq(lp.closed, 1);
	ck_assert_int_eq(lp.reason, CONN_CLOSE_RESET);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CLOSED_RESET),
	    1);
	ck_assert_uint_eq(fk.closes, 1);
	ck_assert_uint_eq(conn_count(r), 0);
	teardown();
	ck_assert_uint_eq(fk.closes, 1);
}
END_TEST

/*
 * Input the transport holds (has_pending) is read before the reactor
 * sleeps, though the fd does not say so; and a turn with a long timeout
 * does not block while some is held.
 */
START_TEST(conn_pending_read_before_sleep)
{
	uint64_t t0, took;

	setup(conf_plain);
	fake_script(&fk, "one\n");
	fake_script(&fk, "two\n");
	fake_script(&fk, "three\n");
	fk.drain_fd = true;
	fk.pending = true;
	open_conn(&fake_xp, &fk, true);
	turns(1);
	/* The event read "one"; before sleeping, "two" from what is held. */
	ck_assert_uint_eq(lp.n, 2);
	ck_assert_str_eq(lp.line[1], "two");
	t0 = unit_now_ms();
	reactor_run_once(r, 5000);
	took = unit_now_ms() - t0;
	ck_assert_msg(took < 4000, "a turn blocked %llu ms with input held",
	    (unsigned long long)took);
	ck_assert_uint_eq(lp.n, 3);
	ck_assert_str_eq(lp.line[2], "three");
	ck_assert_uint_eq(lp.closed, 0);
	teardown();
}
END_TEST

static void
release_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	if (st == MAILBOX_RUN)
		conn_release(arg);
}

/*
 * Input the transport held while the protocol held the connection is read
 * once the protocol releases it, in that turn: the socket will not say so
 * (review of the seams change: only conn_read looked for it).
 */
START_TEST(conn_pending_read_after_release)
{
	struct conn *c;

	setup(conf_plain);
	fake_script(&fk, "one\n");
	fake_script(&fk, "two\n");
	fk.drain_fd = true;
	fk.pending = true;
	lp.hold = true;
	c = open_conn(&fake_xp, &fk, true);
	turns(1);
	ck_assert_uint_eq(lp.n, 1);
	/* Released by a task, as a verdict from another reactor would. */
	lp.hold = false;
	reactor_post(r, release_task, c);
	reactor_run_once(r, 2000);
	ck_assert_uint_eq(lp.n, 2);
	ck_assert_str_eq(lp.line[1], "two");
	teardown();
}
END_TEST

/* What the transport wants (a handshake that must write) is asked of epoll. */
START_TEST(conn_transport_wants)
{
	struct conn *c;

	setup(conf_plain);
	c = open_conn(&fake_xp, &fk, true);
	fk.wants = EPOLLOUT;
	turns(1);
	ck_assert(c->io.events & EPOLLOUT);
	ck_assert(c->io.events & EPOLLIN);
	ck_assert_uint_eq(conn_pending(c), 0);
	fk.wants = 0;
	kick(c);
	turns(1);
	ck_assert(!(c->io.events & EPOLLOUT));
	ck_assert_uint_eq(lp.closed, 0);
	teardown();
}
END_TEST

/* However it closes, the transport's close runs exactly once. */
START_TEST(conn_transport_close_once)
{
	static struct fake f[3];
	struct conn *c[3];

	setup(conf_plain);
	for (unsigned i = 0; i < 3; i++) {
		memset(&f[i], 0, sizeof(f[i]));
		f[i].budget = SIZE_MAX;
		c[i] = open_conn(&fake_xp, &f[i], false);
	}
	conn_close(c[0], CONN_CLOSE_IDLE);
	conn_close(c[0], CONN_CLOSE_RESET);	/* the second does nothing */
	conn_close_after_flush(c[1], CONN_CLOSE_QUIT);
	turns(2);
	ck_assert_uint_eq(f[0].closes, 1);
	ck_assert_uint_eq(f[1].closes, 1);
	ck_assert_uint_eq(f[2].closes, 0);
	ck_assert_uint_eq(lp.closed, 2);
	ck_assert_uint_eq(conn_count(r), 1);
	/* Still open when the reactor goes: closed then, once. */
	teardown();
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_eq(f[i].closes, 1);
	ck_assert_uint_eq(lp.closed, 3);
}
END_TEST

/*
 * A handle resolves to its connection while it is open; not once it is
 * closing or gone, nor after its slot went to another connection.
 */
START_TEST(conn_handles_generations)
{
	static struct fake f[3];
	struct conn *c1, *c2, *c3;
	struct conn_handle h1, h2, h3, other;

	setup(conf_plain);
	for (unsigned i = 0; i < 3; i++)
		f[i].budget = SIZE_MAX;
	c1 = open_conn(&fake_xp, &f[0], false);
	c2 = open_conn(&fake_xp, &f[1], false);
	h1 = conn_handle(c1);
	h2 = conn_handle(c2);
	ck_assert_uint_eq(h1.reactor, r->id);
	ck_assert_uint_ne(h1.slot, h2.slot);
	ck_assert_ptr_eq(conn_resolve(r, &h1), c1);
	ck_assert_ptr_eq(conn_resolve(r, &h2), c2);
	other = h1;
	other.reactor = r->id + 1;
	ck_assert_ptr_null(conn_resolve(r, &other));
	other = h1;
	other.slot = UINT32_MAX;
	ck_assert_ptr_null(conn_resolve(r, &other));
	conn_close(c1, CONN_CLOSE_QUIT);
	ck_assert_ptr_null(conn_resolve(r, &h1));
	turns(1);
	ck_assert_ptr_null(conn_resolve(r, &h1));
	/* The freed slot is reused, under a new generation. */
	c3 = open_conn(&fake_xp, &f[2], false);
	h3 = conn_handle(c3);
	ck_assert_uint_eq(h3.slot, h1.slot);
	ck_assert_uint_ne(h3.gen, h1.gen);
	ck_assert_ptr_null(conn_resolve(r, &h1));
	ck_assert_ptr_eq(conn_resolve(r, &h3), c3);
	ck_assert_ptr_eq(conn_resolve(r, &h2), c2);
	ck_assert(!conn_handle_eq(&h1, &h3));
	teardown();
}
END_TEST

#define MANY_CONNS	5000

/*
 * Many connections get distinct slots, the lowest first; slots freed are
 * reused under new generations and old handles stay dead.
 */
START_TEST(conn_slots_many)
{
	static struct fake f;
	static struct conn *c[MANY_CONNS];
	static struct conn_handle h[MANY_CONNS];
	static unsigned char used[MANY_CONNS];
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < MANY_CONNS + 100) {
		rl.rlim_cur = rl.rlim_max;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
		ck_assert_uint_ge(rl.rlim_cur, MANY_CONNS + 100);
	}
	setup(conf_plain);
	f.budget = SIZE_MAX;
	for (unsigned i = 0; i < MANY_CONNS; i++) {
		c[i] = open_conn(&fake_xp, &f, false);
		h[i] = conn_handle(c[i]);
		ck_assert_uint_lt(h[i].slot, MANY_CONNS);
		ck_assert_msg(!used[h[i].slot], "slot %u handed out twice",
		    h[i].slot);
		used[h[i].slot] = 1;
	}
	ck_assert_uint_eq(conn_count(r), MANY_CONNS);
	for (unsigned i = 0; i < MANY_CONNS; i++)
		if (conn_resolve(r, &h[i]) != c[i])
			ck_abort_msg("handle %u does not resolve", i);
	/* Close every other, and open as many again. */
	for (unsigned i = 0; i < MANY_CONNS; i += 2)
		conn_close(c[i], CONN_CLOSE_QUIT);
	turns(1);
	ck_assert_uint_eq(conn_count(r), MANY_CONNS / 2);
	for (unsigned i = 0; i < MANY_CONNS; i += 2) {
		struct conn *n = open_conn(&fake_xp, &f, false);
		struct conn_handle nh = conn_handle(n);

		ck_assert_uint_lt(nh.slot, MANY_CONNS);
		if (conn_resolve(r, &nh) != n)
			ck_abort_msg("new handle %u does not resolve", i);
	}
	for (unsigned i = 0; i < MANY_CONNS; i++) {
		struct conn *got = conn_resolve(r, &h[i]);

		if (i % 2 == 0 && got != NULL)
			ck_abort_msg("stale handle %u resolves", i);
		if (i % 2 == 1 && got != c[i])
			ck_abort_msg("handle %u lost", i);
	}
	ck_assert_uint_eq(conn_count(r), MANY_CONNS);
	ck_assert_uint_eq(f.closes, MANY_CONNS / 2);
	teardown();
	ck_assert_uint_eq(f.closes, MANY_CONNS + MANY_CONNS / 2);
}
END_TEST

/*
 * With io_uring on, a transport that cannot join the batch still does
 * every read and write itself, queued writes included.
 */
START_TEST(conn_unbatchable_with_uring)
{
	struct conn *c;

	setup(conf_uring);
	fake_script(&fk, "ping\n");
	lp.echo = true;
	c = open_conn(&fake_xp_unbatchable, &fk, true);
	turns(2);
	ck_assert_uint_eq(lp.n, 1);
	ck_assert_str_eq(lp.line[0], "ping");
	ck_assert_uint_ge(fk.reads, 2);
	ck_assert_uint_eq(fk.nout, 5);
	/* Written outside input handling: on the turn's flush list. */
	ck_assert(conn_write(c, "late\n", 5));
	turns(1);
	ck_assert_uint_eq(fk.nout, 10);
	ck_assert_mem_eq(fk.out, "ping\nlate\n", 10);
	ck_assert_uint_eq(lp.closed, 0);
	teardown();
}
END_TEST

Suite *
conn_suite(void)
{
	Suite *s = suite_create("conn");
	TCase *io = tcase_create("io");
	TCase *hd = tcase_create("handles");

	tcase_set_timeout(io, 30);
	tcase_add_test(io, conn_partial_reads);
	tcase_add_test(io, conn_several_lines_one_read);
	tcase_add_test(io, conn_partial_writes);
	tcase_add_test(io, conn_read_eagain);
	tcase_add_test(io, conn_write_eagain);
	tcase_add_test(io, conn_eof_closes_after_flush);
	tcase_add_test(io, conn_input_waits_while_output_high);
	tcase_add_test(io, conn_transport_error_resets);
	tcase_add_test(io, conn_pending_read_before_sleep);
	tcase_add_test(io, conn_pending_read_after_release);
	tcase_add_test(io, conn_transport_wants);
	tcase_add_test(io, conn_transport_close_once);
	tcase_add_test(io, conn_unbatchable_with_uring);
	suite_add_tcase(s, io);
	tcase_set_timeout(hd, 60);
	tcase_add_test(hd, conn_handles_generations);
	tcase_add_test(hd, conn_slots_many);
	suite_add_tcase(s, hd);
	return s;
}
