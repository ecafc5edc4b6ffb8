/* test_uring.c: the reactor's io_uring: batches that never wait, and tags. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "suites.h"
#include "uring.h"

/*
 * A ring, or false when this kernel or sandbox refuses io_uring (the
 * daemon then uses plain system calls; the integration tests cover that).
 */
static bool
ring_or_skip(struct uring *u, unsigned entries)
{
	if (uring_init(u, entries) == 0)
		return true;
	ck_assert_msg(errno == ENOSYS || errno == EPERM,
	    "io_uring_setup: %s", strerror(errno));
	fprintf(stderr, "test_uring: io_uring refused here (%s): "
	    "skipped\n", strerror(errno));
	return false;
}

static void
pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    sv), 0);
}

static void
unpair(int sv[2])
{
	close(sv[0]);
	close(sv[1]);
}

/*
 * Runs what is prepared and puts the result of the request tagged
 * base + i in got[i], i < n; every tag must come back exactly once.
 */
static void
run_and_collect(struct uring *u, uint64_t base, int32_t *got, unsigned n)
{
	bool seen[16] = { false };
	unsigned count = 0;
	uint64_t tag;
	int32_t res;

	ck_assert_uint_le(n, 16);
	ck_assert_int_eq(uring_run(u), 0);
	ck_assert_uint_eq(uring_room(u), u->entries);
	while (uring_next(u, &tag, &res)) {
		ck_assert(tag >= base && tag < base + n);
		ck_assert(!seen[tag - base]);
		seen[tag - base] = true;
		got[tag - base] = res;
		count++;
	}
	ck_assert_uint_eq(count, n);
}

/* Sends and receives on 8 sockets in two runs; every tag comes back once. */
START_TEST(test_batch_send_then_recv)
{
	struct uring u;
	int sv[8][2];
	struct iovec iov[8][2];
	struct msghdr m[8];
	char out[8][2][16], in[8][32];
	int32_t got[8];

	if (!ring_or_skip(&u, 8))
		return;
	ck_assert(uring_ready(&u));
	ck_assert_uint_ge(uring_room(&u), 8);
	for (int i = 0; i < 8; i++) {
		pair(sv[i]);
		snprintf(out[i][0], sizeof(out[i][0]), "head%d", i);
		snprintf(out[i][1], sizeof(out[i][1]), "tail%d", i);
		iov[i][0] = (struct iovec){ out[i][0], 5 };
		iov[i][1] = (struct iovec){ out[i][1], 5 };
		memset(&m[i], 0, sizeof(m[i]));
		m[i].msg_iov = iov[i];
		m[i].msg_iovlen = 2;
		uring_prep_sendmsg(&u, sv[i][0], &m[i], 100 + (uint64_t)i);
	}
	ck_assert_uint_eq(uring_room(&u), u.entries - 8);
	run_and_collect(&u, 100, got, 8);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(got[i], 10);
		uring_prep_recv(&u, sv[i][1], in[i], sizeof(in[i]),
		    (uint64_t)i);
	}
	run_and_collect(&u, 0, got, 8);
	for (int i = 0; i < 8; i++) {
		char want[32];

		snprintf(want, sizeof(want), "head%dtail%d", i, i);
		ck_assert_int_eq(got[i], 10);
		ck_assert(memcmp(in[i], want, 10) == 0);
		unpair(sv[i]);
	}
	uring_fini(&u);
	ck_assert(!uring_ready(&u));
	uring_fini(&u);		/* twice is harmless */
}
END_TEST

/*
 * A read with nothing to read, a write to a full socket and a read of a
 * closed peer complete at once (-EAGAIN, -EAGAIN, 0): the run must not
 * wait for data that is not coming (the Check timeout would fail it).
 */
START_TEST(test_batch_never_waits)
{
	struct uring u;
	int empty[2], full[2], gone[2];
	char in[16], big[65536];
	struct iovec iov = { big, sizeof(big) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int32_t got[3];

	if (!ring_or_skip(&u, 4))
		return;
	pair(empty);
	pair(full);
	pair(gone);
	memset(big, 'x', sizeof(big));
	while (send(full[0], big, sizeof(big), MSG_DONTWAIT) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
	close(gone[0]);
	uring_prep_recv(&u, empty[1], in, sizeof(in), 0);
	uring_prep_sendmsg(&u, full[0], &m, 1);
	uring_prep_recv(&u, gone[1], in, sizeof(in), 2);
	run_and_collect(&u, 0, got, 3);
	ck_assert_int_eq(got[0], -EAGAIN);
	ck_assert_int_eq(got[1], -EAGAIN);
	ck_assert_int_eq(got[2], 0);
	unpair(empty);
	unpair(full);
	close(gone[1]);
	uring_fini(&u);
}
END_TEST

/* A bad fd fails its own request only; the others in the run complete. */
START_TEST(test_bad_fd_fails_alone)
{
	struct uring u;
	int sv[2];
	char in[8];
	int32_t got[2];

	if (!ring_or_skip(&u, 2))
		return;
	pair(sv);
	ck_assert_int_eq(write(sv[0], "ok", 2), 2);
	uring_prep_recv(&u, 1000000, in, sizeof(in), 0);
	uring_prep_recv(&u, sv[1], in, sizeof(in), 1);
	run_and_collect(&u, 0, got, 2);
	ck_assert_int_eq(got[0], -EBADF);
	ck_assert_int_eq(got[1], 2);
	unpair(sv);
	uring_fini(&u);
}
END_TEST

/* An empty run is no system call and no completion. */
START_TEST(test_empty_run)
{
	struct uring u;
	uint64_t tag;
	int32_t res;

	if (!ring_or_skip(&u, 2))
		return;
	ck_assert_int_eq(uring_run(&u), 0);
	ck_assert(!uring_next(&u, &tag, &res));
	uring_fini(&u);
}
END_TEST

Suite *
uring_suite(void)
{
	Suite *s = suite_create("uring");
	TCase *tc = tcase_create("batches");

	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_batch_send_then_recv);
	tcase_add_test(tc, test_batch_never_waits);
	tcase_add_test(tc, test_bad_fd_fails_alone);
	tcase_add_test(tc, test_empty_run);
	suite_add_tcase(s, tc);
	return s;
}
