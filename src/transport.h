/*
 * transport.h: how a connection talks to the kernel. conn.c does every
 * read and write through its connection's transport, and only a transport
 * touches the socket (nginx's recv/send swapped after a TLS handshake,
 * Redis's ConnectionType, HAProxy's xprt_ops). Plain sockets are one
 * transport; TLS is another. Protocols never know which.
 *
 * Every operation runs on the connection's owning reactor.
 */
#ifndef ECHOROUTERD_TRANSPORT_H
#define ECHOROUTERD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct conn;

/* What a transport does; every operation gets the connection. */
struct transport_ops {
	const char *name;
	/*
	 * Reads up to n bytes: >0 how many, 0 the peer closed, -1 with errno
	 * (EAGAIN: nothing now; anything else: the connection is broken).
	 */
	ssize_t	(*read)(struct conn *c, void *p, size_t n);
	/* Writes from iov: bytes taken (maybe fewer), or -1 as read. */
	ssize_t	(*writev)(struct conn *c, const struct iovec *iov, int cnt);
	/* Ends our side of the stream (SHUT_WR). 0, or -1 with errno. */
	int	(*shutdown)(struct conn *c);
	/* Bytes written that the peer has not acknowledged yet. */
	size_t	(*unsent)(struct conn *c);
	/*
	 * The epoll events to wait for, given those the connection wants:
	 * the transport adds what it waits for itself (a TLS handshake that
	 * must write) and takes away what would only wake it for nothing
	 * (writable, while its write waits for input). May be NULL: as is.
	 */
	uint32_t (*events)(struct conn *c, uint32_t events);
	/*
	 * About once a second, for the transport's own deadline (a TLS
	 * handshake); it may close c. May be NULL.
	 */
	void	(*tick)(struct conn *c);
	/*
	 * Whether it holds input already read from the socket that the
	 * connection has not had (decrypted TLS records): the socket will
	 * not say so, so the reactor reads again before it sleeps. May be
	 * NULL: never.
	 */
	bool	(*has_pending)(struct conn *c);
	/*
	 * Whether a read or write may go in the reactor's io_uring batch,
	 * straight on the socket (plain bytes, or kTLS).
	 */
	bool	batchable;
	/*
	 * Frees what the transport holds for c (its instance, unless
	 * shared); the fd is conn.c's, still open: a close for a graceful
	 * c->close_reason says goodbye on it first (TLS: close_notify).
	 * May be NULL.
	 */
	void	(*close)(struct conn *c);
};

/*
 * A connection's transport: its operations, first in whatever holds its
 * state for that connection (a TLS session embeds it and finds itself
 * from c->xp). A transport without state is one instance for all.
 */
struct transport {
	const struct transport_ops *ops;
};

/* Plain bytes on the socket: one shared instance. */
extern struct transport transport_plain;

#endif
