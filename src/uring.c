/* uring.c: a reactor's io_uring over liburing, for one turn's socket I/O. */
#include "uring.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* From Linux 6.0 and 6.1; liburing 2.3's own copy of the header has them. */
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER	(1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN	(1U << 13)
#endif

/*
 * Only kernels that know SINGLE_ISSUER (6.0) are used: they have every
 * request used here and complete MSG_DONTWAIT requests inline. Older ones
 * refuse the flag (EINVAL), and the reactor uses plain system calls.
 * 0, or -errno as liburing returns it.
 */
static int
ring_setup(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
	/* DEFER_TASKRUN (6.1) first: no task work run behind our back. */
	static const unsigned flags[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SINGLE_ISSUER,
	};
	int ret = -EINVAL;

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		memset(p, 0, sizeof(*p));
		p->flags = flags[i];
		ret = io_uring_queue_init_params(entries, ring, p);
		if (ret != -EINVAL)
			break;
	}
	return ret;
}

int
uring_init(struct uring *u, unsigned entries)
{
	struct io_uring_params p;
	int ret;

	memset(u, 0, sizeof(*u));
	u->fd = -1;
	if ((ret = ring_setup(entries, &u->ring, &p)) < 0) {
		errno = -ret;
		return -1;
	}
	u->fd = u->ring.ring_fd;
	u->entries = p.sq_entries;
	return 0;
}

void
uring_fini(struct uring *u)
{
	int saved = errno;

	if (u->fd >= 0)
		io_uring_queue_exit(&u->ring);
	memset(u, 0, sizeof(*u));
	u->fd = -1;
	errno = saved;
}

/* The caller checked uring_room, so the ring has a free entry. */
static struct io_uring_sqe *
next_sqe(struct uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	assert(sqe != NULL);
	u->queued++;
	return sqe;
}

void
uring_prep_recv(struct uring *u, int fd, void *p, size_t n, uint64_t tag)
{
	struct io_uring_sqe *sqe = next_sqe(u);

	/* Never parked waiting for data: -EAGAIN instead (REQ_F_NOWAIT). */
	io_uring_prep_recv(sqe, fd, p, n, MSG_DONTWAIT);
	io_uring_sqe_set_data64(sqe, tag);
}

void
uring_prep_sendmsg(struct uring *u, int fd, const struct msghdr *m,
    uint64_t tag)
{
	struct io_uring_sqe *sqe = next_sqe(u);

	io_uring_prep_sendmsg(sqe, fd, m, MSG_DONTWAIT | MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, tag);
}

/*
 * What the kernel did not take must never reach it later, with buffers
 * long gone: the last `left` entries are taken back off the ring.
 * liburing has no call for this, so it moves the tails itself, as its
 * own flush does: the kernel reads the tail only inside io_uring_enter,
 * on this thread (no SQPOLL), and slot i always names entry i.
 */
static void
take_back(struct io_uring *ring, unsigned left)
{
	ring->sq.sqe_tail -= left;
	ring->sq.sqe_head = ring->sq.sqe_tail;
	io_uring_smp_store_release(ring->sq.ktail, ring->sq.sqe_tail);
}

int
uring_run(struct uring *u)
{
	unsigned want = u->queued, left;
	int n;

	if (want == 0)
		return 0;
	u->queued = 0;
	/*
	 * The completion queue is drained before each run and holds nothing
	 * else, so `want` ready completions are exactly this batch's. The
	 * kernel waits only when it took every request: after a partial
	 * submission it returns at once, and the rest is submitted again.
	 */
	while ((left = io_uring_sq_ready(&u->ring)) > 0 ||
	    io_uring_cq_ready(&u->ring) < want) {
		n = io_uring_submit_and_wait(&u->ring, want);
		if (n > 0 || (n == 0 && left == 0))
			continue;
		if (n == -EINTR)
			continue;
		take_back(&u->ring, left);
		/* Took none of what is left: give up. */
		errno = n == 0 ? EAGAIN : -n;
		return -1;
	}
	return 0;
}

bool
uring_next(struct uring *u, uint64_t *tag, int32_t *res)
{
	struct io_uring_cqe *cqe;

	if (io_uring_peek_cqe(&u->ring, &cqe) != 0)
		return false;
	*tag = io_uring_cqe_get_data64(cqe);
	*res = cqe->res;
	io_uring_cqe_seen(&u->ring, cqe);
	return true;
}
