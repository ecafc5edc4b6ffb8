/* transport_plain.c: the plain transport: bytes straight on the socket. */
#include <errno.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "conn.h"
#include "transport.h"
#include "uring.h"
#include "util.h"

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

int
transport_socket_shutdown(struct conn *c)
{
	return shutdown(c->io.fd, SHUT_WR);
}

size_t
transport_socket_unsent(struct conn *c)
{
	int n = 0;

	if (ioctl(c->io.fd, SIOCOUTQ, &n) < 0 || n < 0)
		return 0;
	return (size_t)n;
}

static void
plain_batch_read(struct conn *c, struct uring *u, void *p, size_t n,
    uint64_t tag)
{
	uring_prep_recv(u, c->io.fd, p, n, tag);
}

static void
plain_batch_write(struct conn *c, struct uring *u, const struct msghdr *m,
    uint64_t tag)
{
	uring_prep_sendmsg(u, c->io.fd, m, tag);
}

static const struct transport_ops plain_ops = {
	.name = "plain",
	.read = plain_read,
	.writev = plain_writev,
	.shutdown = transport_socket_shutdown,
	.unsent = transport_socket_unsent,
	.batchable = true,
	.batch_read = plain_batch_read,
	.batch_write = plain_batch_write,
};

struct transport transport_plain = { .ops = &plain_ops };

/* ---- the type: nothing to prepare, one transport for all ---------------- */

static struct transport_ctx *
plain_prepare(const struct listener_conf *lc, char *err, size_t len)
{
	struct transport_ctx *ctx = xmalloc(sizeof(*ctx));

	(void)lc;
	(void)err;
	(void)len;
	transport_ctx_init(ctx, &transport_type_plain);
	return ctx;
}

static struct transport_ctx *
plain_prepare_client(const struct tls_conf *tc, char *err, size_t len)
{
	(void)tc;
	return plain_prepare(NULL, err, len);
}

static void
plain_release(struct transport_ctx *ctx)
{
	free(ctx);
}

static struct transport *
plain_accept(struct transport_ctx *ctx, struct reactor *r, int fd,
    unsigned timeout, struct iplimit_entry *ip)
{
	(void)ctx;
	(void)r;
	(void)fd;
	(void)timeout;
	(void)ip;
	return &transport_plain;
}

static struct transport *
plain_connect(struct transport_ctx *ctx, struct reactor *r, int fd,
    const char *host, unsigned timeout)
{
	(void)ctx;
	(void)r;
	(void)fd;
	(void)host;
	(void)timeout;
	return &transport_plain;
}

const struct transport_type transport_type_plain = {
	.name = "plain",
	.prepare = plain_prepare,
	.prepare_client = plain_prepare_client,
	.release = plain_release,
	.accept = plain_accept,
	.connect = plain_connect,
};
