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
struct iplimit_entry;
struct reactor;
struct tls_conf;
struct tls_ctx;
struct transport;

/*
 * TLS 1.2 ciphers when tls.ciphers is empty: ECDHE (forward secrecy) with
 * AEAD only. TLS 1.3's suites are all of that kind and stay OpenSSL's.
 */
#define TLS_CIPHERS_DEFAULT	"ECDHE+AESGCM:ECDHE+CHACHA20"

enum tls_admit_verdict {
	TLS_ADMIT_OK,
	TLS_ADMIT_TOO_MANY,		/* limits.max_handshakes */
	TLS_ADMIT_TOO_MANY_IP,		/* limits.max_handshakes_per_ip */
};

#if ER_WITH_TLS

/*
 * Takes a place for one more half-open handshake, from the address of ip
 * (NULL: not tracked), under max in all and max_per_ip from one address
 * (0: no limit); anything but TLS_ADMIT_OK takes none. The place is held
 * until the handshake ends by the transport tls_transport_new makes with
 * ip, or given back by tls_release if none is made. Acceptor thread for
 * tls_admit; any thread for tls_release.
 */
enum tls_admit_verdict tls_admit(struct iplimit_entry *ip, unsigned max,
	    unsigned max_per_ip);
void	tls_release(struct iplimit_entry *ip);

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
 * A server-side TLS transport on reactor r for the accepted socket fd,
 * handshaking within timeout seconds from now, holding the place
 * tls_admit took for ip; or NULL (the place still the caller's). Its
 * close frees it. The owning reactor.
 */
struct transport *tls_transport_new(struct tls_ctx *ctx, struct reactor *r,
	    int fd, unsigned timeout, struct iplimit_entry *ip);

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

static inline enum tls_admit_verdict
tls_admit(struct iplimit_entry *ip, unsigned max, unsigned max_per_ip)
{
	(void)ip;
	(void)max;
	(void)max_per_ip;
	return TLS_ADMIT_OK;
}

static inline void tls_release(struct iplimit_entry *ip) { (void)ip; }

static inline struct transport *
tls_transport_new(struct tls_ctx *ctx, struct reactor *r, int fd,
    unsigned timeout, struct iplimit_entry *ip)
{
	(void)ctx;
	(void)r;
	(void)fd;
	(void)timeout;
	(void)ip;
	return NULL;
}

#endif

#endif
