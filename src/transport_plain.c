/* transport_plain.c: the plain transport: bytes straight on the socket. */
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "conn.h"
#include "transport.h"

static ssize_t
plain_read(struct conn *c, void *p, size_t n)
{
	ssize_t r;

	while ((r = read(c->io.fd, p, n)) < 0 && errno == EINTR)
		;
	return r;
}

static ssize_t
plain_writev(struct conn *c, const struct iovec *iov, int cnt)
{
	ssize_t r;

	while ((r = writev(c->io.fd, iov, cnt)) < 0 && errno == EINTR)
		;
	return r;
}

static int
plain_shutdown(struct conn *c)
{
	return shutdown(c->io.fd, SHUT_WR);
}

static size_t
plain_unsent(struct conn *c)
{
	int n = 0;

	if (ioctl(c->io.fd, SIOCOUTQ, &n) < 0 || n < 0)
		return 0;
	return (size_t)n;
}

static const struct transport_ops plain_ops = {
	.name = "plain",
	.read = plain_read,
	.writev = plain_writev,
	.shutdown = plain_shutdown,
	.unsent = plain_unsent,
	.batchable = true,
};

struct transport transport_plain = { .ops = &plain_ops };
