/* net.h: socket helpers. They return -1 with errno set and never log. */
#ifndef ECHOROUTERD_NET_H
#define ECHOROUTERD_NET_H

#include <stdint.h>

/*
 * A non-blocking, close-on-exec TCP socket listening on address (an IPv4
 * or IPv6 literal) and port (0: the kernel picks). IPv6 sockets are
 * IPv6-only so that "::" and "0.0.0.0" can both be listeners.
 */
int	net_listen(const char *address, uint16_t port, int backlog);

/* The local port of a bound socket, or -1. */
int	net_local_port(int fd);

/* Formats fd's local address as "address:port" (or "[v6]:port"). */
int	net_local_name(int fd, char *buf, unsigned len);

/*
 * Starts a TCP connection to address (an IPv4 or IPv6 literal) and port
 * from a non-blocking, close-on-exec socket, with TCP_NODELAY: its fd,
 * the connection under way (EINPROGRESS is not an error here: the socket
 * turns writable once it is settled, and net_connect_result says how).
 */
int	net_connect(const char *address, uint16_t port);

/*
 * How the connection net_connect started has settled: 0 connected, or -1
 * with errno the connect's error (ECONNREFUSED, ETIMEDOUT, ...). Once fd
 * is writable.
 */
int	net_connect_result(int fd);

/* Makes fd non-blocking and close-on-exec. */
int	net_set_nonblock_cloexec(int fd);

#endif
