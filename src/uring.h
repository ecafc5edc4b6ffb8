/*
 * uring.h: a reactor's io_uring (through liburing), used only to batch the
 * socket reads and writes of one loop turn into one system call.
 *
 * Readiness still comes from epoll. Every request carries MSG_DONTWAIT, so
 * the kernel runs it at once and completes it with a result or -EAGAIN,
 * never parks it: uring_run returns with every request of the batch
 * complete, and no buffer is in the kernel's hands after it. One ring per
 * reactor, used only on that reactor's thread (IORING_SETUP_SINGLE_ISSUER:
 * the thread that makes it).
 */
#ifndef URING_H
#define URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msghdr;

struct uring {
	int	fd;			/* the ring's fd; -1: none */
	unsigned entries;		/* submission queue size */
	unsigned queued;		/* prepared, not yet submitted */
	struct io_uring ring;		/* liburing's; valid while fd >= 0 */
};

/*
 * Makes a ring of at least `entries` requests on the calling thread, the
 * only one that may then use it. 0, or -1 with errno: EINVAL before Linux
 * 6.0, ENOSYS, EPERM when io_uring is disabled or filtered out. The caller
 * then uses plain system calls.
 */
int	uring_init(struct uring *u, unsigned entries);

/* Frees the ring; a zeroed or failed struct is a no-op. */
void	uring_fini(struct uring *u);

/* Whether u holds a working ring. */
static inline bool
uring_ready(const struct uring *u)
{
	return u->fd >= 0;
}

/* Requests that still fit before uring_run. */
static inline unsigned
uring_room(const struct uring *u)
{
	return u->entries - u->queued;
}

/*
 * Prepares recv(fd, p, n, MSG_DONTWAIT) and sendmsg(fd, m, MSG_DONTWAIT |
 * MSG_NOSIGNAL), tagged with `tag`. The caller checks uring_room first;
 * p and m must stay valid until uring_run returns.
 */
void	uring_prep_recv(struct uring *u, int fd, void *p, size_t n,
	    uint64_t tag);
void	uring_prep_sendmsg(struct uring *u, int fd, const struct msghdr *m,
	    uint64_t tag);

/*
 * Submits what is prepared and waits until all of it is complete. 0, or
 * -1 with errno if the kernel refused some of it (that part is taken back
 * and never runs) or the wait failed. Either way the caller drains every
 * completion with uring_next and does each request that has none with
 * plain system calls.
 */
int	uring_run(struct uring *u);

/*
 * The next completion: its tag and result (bytes, or -errno), or false
 * when none is left. Only after uring_run.
 */
bool	uring_next(struct uring *u, uint64_t *tag, int32_t *res);

#endif
