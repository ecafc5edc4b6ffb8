/* uring.c: a reactor's io_uring, for batching one turn's socket I/O. */
#include "uring.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The ring's head and tail words are shared with the kernel. */
static unsigned
load_acquire(const unsigned *p)
{
	return atomic_load_explicit((const _Atomic unsigned *)p,
	    memory_order_acquire);
}

static void
store_release(unsigned *p, unsigned v)
{
	atomic_store_explicit((_Atomic unsigned *)p, v, memory_order_release);
}

/* From Linux 6.0 and 6.1; older headers lack them. */
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
 */
static int
ring_setup(unsigned entries, struct io_uring_params *p)
{
	/* DEFER_TASKRUN (6.1) first: no task work run behind our back. */
	static const unsigned flags[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SINGLE_ISSUER,
	};
	int fd = -1;

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		memset(p, 0, sizeof(*p));
		p->flags = flags[i];
		fd = (int)syscall(__NR_io_uring_setup, entries, p);
		if (fd >= 0 || errno != EINVAL)
			break;
	}
	return fd;
}

int
uring_init(struct uring *u, unsigned entries)
{
	struct io_uring_params p;
	size_t sq_len, cq_len;
	char *ring;
	void *sqes;

	memset(u, 0, sizeof(*u));
	u->fd = -1;
	if ((u->fd = ring_setup(entries, &p)) < 0)
		return -1;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {	/* 5.4; be sure */
		uring_fini(u);
		errno = ENOSYS;
		return -1;
	}
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	u->ring_len = sq_len > cq_len ? sq_len : cq_len;
	ring = mmap(NULL, u->ring_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQ_RING);
	if (ring == MAP_FAILED) {
		u->ring_map = NULL;
		uring_fini(u);
		return -1;
	}
	u->ring_map = ring;
	u->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	sqes = mmap(NULL, u->sqes_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQES);
	if (sqes == MAP_FAILED) {
		uring_fini(u);
		return -1;
	}
	u->sqes = sqes;
	u->entries = p.sq_entries;
	u->sq_ktail = (unsigned *)(ring + p.sq_off.tail);
	u->sq_kmask = (unsigned *)(ring + p.sq_off.ring_mask);
	u->sq_array = (unsigned *)(ring + p.sq_off.array);
	u->cq_khead = (unsigned *)(ring + p.cq_off.head);
	u->cq_ktail = (unsigned *)(ring + p.cq_off.tail);
	u->cq_kmask = (unsigned *)(ring + p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(ring + p.cq_off.cqes);
	u->sq_tail = *u->sq_ktail;
	return 0;
}

void
uring_fini(struct uring *u)
{
	int saved = errno;

	if (u->sqes != NULL)
		munmap(u->sqes, u->sqes_len);
	if (u->ring_map != NULL)
		munmap(u->ring_map, u->ring_len);
	if (u->fd >= 0)
		close(u->fd);
	memset(u, 0, sizeof(*u));
	u->fd = -1;
	errno = saved;
}

static struct io_uring_sqe *
next_sqe(struct uring *u)
{
	unsigned i = u->sq_tail & *u->sq_kmask;
	struct io_uring_sqe *sqe = &u->sqes[i];

	memset(sqe, 0, sizeof(*sqe));
	u->sq_array[i] = i;
	u->sq_tail++;
	u->queued++;
	return sqe;
}

void
uring_prep_recv(struct uring *u, int fd, void *p, size_t n, uint64_t tag)
{
	struct io_uring_sqe *sqe = next_sqe(u);

	sqe->opcode = IORING_OP_RECV;
	sqe->fd = fd;
	sqe->addr = (uint64_t)(uintptr_t)p;
	sqe->len = (uint32_t)n;
	/* Never parked waiting for data: -EAGAIN instead (REQ_F_NOWAIT). */
	sqe->msg_flags = MSG_DONTWAIT;
	sqe->user_data = tag;
}

void
uring_prep_sendmsg(struct uring *u, int fd, const struct msghdr *m,
    uint64_t tag)
{
	struct io_uring_sqe *sqe = next_sqe(u);

	sqe->opcode = IORING_OP_SENDMSG;
	sqe->fd = fd;
	sqe->addr = (uint64_t)(uintptr_t)m;
	sqe->len = 1;
	sqe->msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
	sqe->user_data = tag;
}

int
uring_run(struct uring *u)
{
	unsigned want = u->queued, left = u->queued;
	long n;

	if (want == 0)
		return 0;
	store_release(u->sq_ktail, u->sq_tail);
	while (left > 0 ||
	    load_acquire(u->cq_ktail) - *u->cq_khead < want) {
		n = syscall(__NR_io_uring_enter, u->fd, left, want,
		    IORING_ENTER_GETEVENTS, NULL, 0);
		if (n > 0 || (n == 0 && left == 0)) {
			left -= (unsigned)n < left ? (unsigned)n : left;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)		/* took none of what is left: give up */
			errno = EAGAIN;
		/*
		 * What the kernel did not take must never reach it later,
		 * with buffers long gone: take it back. The kernel reads the
		 * tail only inside io_uring_enter, on this thread.
		 */
		u->sq_tail -= left;
		store_release(u->sq_ktail, u->sq_tail);
		u->queued = 0;
		return -1;
	}
	u->queued = 0;
	return 0;
}

bool
uring_next(struct uring *u, uint64_t *tag, int32_t *res)
{
	unsigned head = *u->cq_khead;
	struct io_uring_cqe *cqe;

	if (head == load_acquire(u->cq_ktail))
		return false;
	cqe = &u->cqes[head & *u->cq_kmask];
	*tag = cqe->user_data;
	*res = cqe->res;
	store_release(u->cq_khead, head + 1);
	return true;
}
