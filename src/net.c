/* net.c: socket helpers: listening and connecting sockets, local addresses. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int
net_sockaddr(const char *address, uint16_t port, struct sockaddr_storage *ss,
    socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, address, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, address, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*len = sizeof(*s6);
		return 0;
	}
	errno = EINVAL;
	return -1;
}

/* A non-blocking TCP socket for address and port, in *ss; -1 + errno. */
static int
net_socket(const char *address, uint16_t port, struct sockaddr_storage *ss,
    socklen_t *len)
{
	if (net_sockaddr(address, port, ss, len) < 0)
		return -1;
	return socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
}

/* Closes fd keeping the errno that failed it; -1. */
static int
net_fail(int fd)
{
	int saved = errno;

	close(fd);
	errno = saved;
	return -1;
}

int
net_listen(const char *address, uint16_t port, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if ((fd = net_socket(address, port, &ss, &len)) < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto fail;
	if (ss.ss_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		goto fail;
	if (listen(fd, backlog) < 0)
		goto fail;
	return fd;
fail:
	return net_fail(fd);
}

int
net_connect(const char *address, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if ((fd = net_socket(address, port, &ss, &len)) < 0)
		return -1;
	/* Like accepted clients: what is written is already batched. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		goto fail;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 &&
	    errno != EINPROGRESS)
		goto fail;
	return fd;
fail:
	return net_fail(fd);
}

int
net_connect_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -1;
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

int
net_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	errno = EAFNOSUPPORT;
	return -1;
}

int
net_local_name(int fd, char *buf, unsigned len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -1;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		errno = EAFNOSUPPORT;
		return -1;
	}
	return 0;
}

int
net_set_nonblock_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	fl = fcntl(fd, F_GETFD);
	if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -1;
	return 0;
}
