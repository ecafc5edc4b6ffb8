/* iplimit.h: per-client-address connection counts and new-connection rates. */
#ifndef ECHOROUTERD_IPLIMIT_H
#define ECHOROUTERD_IPLIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct iplimit;

/* One client address. A connection holds a pointer to it while it lives. */
struct iplimit_entry {
	struct iplimit_entry *next;
	uint8_t	addr[16];		/* IPv4 as v4-mapped IPv6 */
	atomic_uint conns;		/* open now: any thread decrements */
	atomic_uint handshakes;		/* TLS ones half-open now (transport.h) */
	double	tokens;			/* new connections allowed now */
	uint64_t last_ms;
};

enum iplimit_verdict {
	IPLIMIT_OK,
	IPLIMIT_TOO_MANY,		/* max_connections_per_ip */
	IPLIMIT_TOO_FAST,		/* connection_rate_per_ip */
};

/* The table: acceptor thread only, except iplimit_release. */
struct iplimit *iplimit_new(void);
void	iplimit_free(struct iplimit *t);

/*
 * Admits a new connection from sa under the limits (0: none). On
 * IPLIMIT_OK, *entry is counted and the connection must release it when it
 * closes. The rate is a token bucket holding one second's worth.
 */
enum iplimit_verdict iplimit_admit(struct iplimit *t, const struct sockaddr *sa,
	    unsigned max_conns, unsigned rate, uint64_t now_ms,
	    struct iplimit_entry **entry);

/* The connection that held e has closed. Any thread. */
void	iplimit_release(struct iplimit_entry *e);

/* Frees entries with no connection whose bucket has refilled. */
void	iplimit_gc(struct iplimit *t, unsigned rate, uint64_t now_ms);

/* Entries in the table (for tests). */
unsigned iplimit_count(const struct iplimit *t);

#endif
