/*
 * transport_tls.h: the "tls" transport type (transport.h), OpenSSL 3,
 * non-blocking inside the owning reactor, server and client side. Others
 * reach it by name through transport.h; this header holds what only the
 * start-up and tests need.
 *
 * A server context belongs to a configuration snapshot and is prepared
 * when the configuration is loaded, so that a bad certificate or key
 * fails the load (at start, for echorouterd -t, on SIGHUP: the old
 * snapshot, and its context, stay). Each connection's TLS session holds
 * its own reference: a reload gives new connections the new pair and
 * leaves old ones theirs.
 */
#ifndef ECHOROUTERD_TRANSPORT_TLS_H
#define ECHOROUTERD_TRANSPORT_TLS_H

#include <stdbool.h>

#include "version.h"

struct transport;

/*
 * TLS 1.2 ciphers when tls.ciphers is empty: ECDHE (forward secrecy) with
 * AEAD only. TLS 1.3's suites are all of that kind and stay OpenSSL's.
 */
#define TLS_CIPHERS_DEFAULT	"ECDHE+AESGCM:ECDHE+CHACHA20"

#if ER_WITH_TLS

/* Logs whether the kernel offers kernel TLS (at start). Main thread. */
void	tls_log_kernel(void);

/*
 * The server name (SNI) a client sent to xp, a server side TLS
 * transport; NULL if none, or if xp is not TLS. The owning reactor.
 */
const char *tls_server_name(const struct transport *xp);

/*
 * Whether xp can carry data now: not TLS, or its handshake is done. The
 * owning reactor.
 */
bool	tls_is_handshaken(const struct transport *xp);

#else

static inline void tls_log_kernel(void) {}

static inline bool
tls_is_handshaken(const struct transport *xp)
{
	(void)xp;
	return true;
}

#endif

#endif
