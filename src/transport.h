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

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct conn;
struct iplimit_entry;
struct listener_conf;
struct msghdr;
struct reactor;
struct tls_conf;
struct uring;

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
	 * The connection's bytes that a unit partly acknowledged may hide:
	 * while unsent is not 0, the peer has surely had all but unsent +
	 * ack_slack of those written (a TLS record's plaintext; plain: 0).
	 */
	size_t	ack_slack;
	/*
	 * The epoll events to wait for, given those the connection wants:
	 * the transport adds what it waits for itself (a TLS handshake that
	 * must write) and takes away what would only wake it for nothing
	 * (writable, while its write waits for input). May be NULL: as is.
	 */
	uint32_t (*events)(struct conn *c, uint32_t events);
	/*
	 * About once a second, for the transport's own deadline (a TLS
	 * handshake); past it, it sets its fail (below). May be NULL.
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
	 * A batchable transport's part in the batch: prepares c's read of up
	 * to n bytes into p, or its write of m, in u under tag (uring.h: the
	 * caller has checked its room; p and m stay valid until it runs).
	 * The completion is the read's or writev's result as -errno. NULL:
	 * c does not join the batch even if batchable.
	 */
	void	(*batch_read)(struct conn *c, struct uring *u, void *p,
		    size_t n, uint64_t tag);
	void	(*batch_write)(struct conn *c, struct uring *u,
		    const struct msghdr *m, uint64_t tag);
	/*
	 * Frees what the transport holds for c (its instance, unless
	 * shared); the fd is conn.c's, still open: a close for a graceful
	 * c->close_reason says goodbye on it first (TLS: close_notify).
	 * May be NULL.
	 */
	void	(*close)(struct conn *c);
};

/*
 * Why a transport wants its connection closed. A transport never closes
 * a connection itself: it sets its fail, and conn.c, which owns the
 * connection, closes it for that reason (protocol, timeout) after the
 * operation that failed or after tick.
 */
enum transport_fail {
	TRANSPORT_OK,
	TRANSPORT_FAIL_PROTOCOL,	/* the peer broke its rules */
	TRANSPORT_FAIL_TIMEOUT,		/* its handshake took too long */
};

/*
 * A connection's transport: its operations, first in whatever holds its
 * state for that connection (a TLS session embeds it and finds itself
 * from c->xp). A transport without state is one instance for all, and
 * never fails.
 */
struct transport {
	const struct transport_ops *ops;
	uint8_t	fail;			/* enum transport_fail */
};

/* Plain bytes on the socket: one shared instance. */
extern struct transport transport_plain;

/*
 * The socket's part of every transport over one, whatever it sends on it:
 * SHUT_WR, and the bytes written that the peer has not acknowledged yet
 * (SIOCOUTQ; 0 if the kernel will not say).
 */
int	transport_socket_shutdown(struct conn *c);
size_t	transport_socket_unsent(struct conn *c);

/* ---- transport types: one per listener ---------------------------------- */

struct transport_type;

/*
 * What a type prepares for its listener (or for outbound connections)
 * when the configuration is loaded, shared by every connection made from
 * it, and counted: each holder takes a reference. A type's own context
 * embeds it first.
 */
struct transport_ctx {
	const struct transport_type *type;
	atomic_uint refs;
};

/*
 * A kind of transport, looked up by name ("plain", "tls"): it prepares a
 * context, and makes each connection's transport from one (HAProxy's
 * xprt_ops, Redis's ConnectionType). Only a type touches what it needs
 * (OpenSSL for "tls"): conn.c, config.c and the acceptor go through this.
 */
struct transport_type {
	const char *name;
	const char *label;	/* as log lines say it ("TLS"); NULL: name */
	/*
	 * A server side context for listener lc: NULL and why in err (len
	 * bytes) if it cannot be made (a bad certificate fails the load, -t
	 * included). Any thread.
	 */
	struct transport_ctx *(*prepare)(const struct listener_conf *lc,
		    char *err, size_t len);
	/*
	 * A client side context: trust tc->ca (required: the peer is
	 * verified, unless tc->no_verify),
	 * present tc->certificate and key if set. As prepare;
	 * NULL without the client side.
	 */
	struct transport_ctx *(*prepare_client)(const struct tls_conf *tc,
		    char *err, size_t len);
	/* Frees what prepare made: the last reference went. Any thread. */
	void	(*release)(struct transport_ctx *ctx);
	/*
	 * Takes a place for one more handshake from ip (NULL: untracked)
	 * under max in all and max_per_ip from one address (0: no limit),
	 * given back by unadmit or by the transport accept makes with ip.
	 * TRANSPORT_ADMIT_OK or why not (none taken). NULL: always OK, and
	 * no unadmit. Acceptor thread (admit), any thread (unadmit).
	 */
	int	(*admit)(struct iplimit_entry *ip, unsigned max,
		    unsigned max_per_ip);
	void	(*unadmit)(struct iplimit_entry *ip);
	/*
	 * The server side transport for accepted socket fd on reactor r, its
	 * handshake (if any) due within timeout seconds, holding ip's place
	 * (admit); NULL if it cannot be made (the place still the caller's).
	 * Its ops->close frees it. The owning reactor.
	 */
	struct transport *(*accept)(struct transport_ctx *ctx,
		    struct reactor *r, int fd, unsigned timeout,
		    struct iplimit_entry *ip);
	/*
	 * The client side transport for fd, a connection to host that
	 * net_connect started and that has settled (net_connect_result):
	 * host is sent as the server's name (SNI) and the peer's
	 * certificate must name it. As accept; NULL without a client side.
	 */
	struct transport *(*connect)(struct transport_ctx *ctx,
		    struct reactor *r, int fd, const char *host,
		    unsigned timeout);
};

enum {
	TRANSPORT_ADMIT_OK,
	TRANSPORT_ADMIT_TOO_MANY,	/* limits.max_handshakes */
	TRANSPORT_ADMIT_TOO_MANY_IP,	/* limits.max_handshakes_per_ip */
};

/* The built-in types; "tls" only in a build WITH_TLS. */
extern const struct transport_type transport_type_plain;
extern const struct transport_type transport_type_tls;

/*
 * Registers type under its name; the built-in types are there from the
 * start. 0, or -1 with errno EEXIST (the name is taken) or ENOSPC. Main
 * thread, before any lookup from another.
 */
int	transport_register(const struct transport_type *type);

/* The type registered as name, or NULL. Any thread. */
const struct transport_type *transport_find(const char *name);

/* The name of listener lc's type: "tls" with a tls group, else "plain". */
const char *transport_name(const struct listener_conf *lc);

/*
 * Listener lc's context from its type: NULL and why in err (len bytes)
 * if the type is missing or cannot prepare. Any thread.
 */
struct transport_ctx *transport_prepare(const struct listener_conf *lc,
	    char *err, size_t len);

/*
 * References; the last unref releases it through its type. NULL is a
 * no-op for both. Any thread.
 */
struct transport_ctx *transport_ctx_ref(struct transport_ctx *ctx);
void	transport_ctx_unref(struct transport_ctx *ctx);

/* Sets what transport_ctx embeds: type, one reference (the caller's). */
void	transport_ctx_init(struct transport_ctx *ctx,
	    const struct transport_type *type);

#endif
