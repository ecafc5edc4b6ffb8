/*
 * tls.h: TLS on a listener: the context made from its tls group (OpenSSL
 * 3), and the transport that runs a connection's TLS inside its reactor,
 * non-blocking, under conn.c (transport.h). Protocols never know.
 *
 * A context belongs to a configuration snapshot and is made when the
 * configuration is loaded, so that a bad certificate or key fails the
 * load (at start, for echorouterd -t, on SIGHUP: the old snapshot, and its
 * context, stay). Each connection's TLS session holds its own reference:
 * a reload gives new connections the new pair and leaves old ones theirs.
 */
#ifndef ECHOROUTERD_TLS_H
#define ECHOROUTERD_TLS_H

#include <stddef.h>

#include "version.h"

struct conn;
struct tls_conf;
struct tls_ctx;
struct transport;

#if ER_WITH_TLS

/*
 * A context from tc, its files read now. NULL and a message naming the
 * file and why in err (len bytes) if it cannot be made. Any thread.
 */
struct tls_ctx *tls_ctx_new(const struct tls_conf *tc, char *err,
	    size_t len);

/* Logs whether the kernel offers kernel TLS (at start). Main thread. */
void	tls_log_kernel(void);

/* References; the last unref frees it. Any thread. */
struct tls_ctx *tls_ctx_ref(struct tls_ctx *ctx);
void	tls_ctx_unref(struct tls_ctx *ctx);

/*
 * A server-side TLS transport for the accepted socket fd, handshaking
 * within timeout seconds of now (the reactor's clock), or NULL. Its
 * close frees it. The owning reactor.
 */
struct transport *tls_transport_new(struct tls_ctx *ctx, int fd,
	    unsigned now, unsigned timeout);

#else

static inline struct tls_ctx *
tls_ctx_new(const struct tls_conf *tc, char *err, size_t len)
{
	(void)tc;
	if (len > 0)
		err[0] = '\0';
	return NULL;
}

static inline struct tls_ctx *
tls_ctx_ref(struct tls_ctx *ctx)
{
	return ctx;
}

static inline void tls_ctx_unref(struct tls_ctx *ctx) { (void)ctx; }
static inline void tls_log_kernel(void) {}

static inline struct transport *
tls_transport_new(struct tls_ctx *ctx, int fd, unsigned now,
    unsigned timeout)
{
	(void)ctx;
	(void)fd;
	(void)now;
	(void)timeout;
	return NULL;
}

#endif

#endif
