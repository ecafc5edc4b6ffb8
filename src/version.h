/* version.h: the version, and which optional features this build has. */
#ifndef ECHOROUTERD_VERSION_H
#define ECHOROUTERD_VERSION_H

/*
 * The Makefile sets these from WITH_SQLITE, WITH_NATS and WITH_TLS; a
 * compile without them (a fuzz target, say) has none of the features.
 */
#ifndef ER_WITH_SQLITE
#define ER_WITH_SQLITE	0
#endif
#ifndef ER_WITH_NATS
#define ER_WITH_NATS	0
#endif
#ifndef ER_WITH_TLS
#define ER_WITH_TLS	0
#endif

/*
 * One line naming the version and the build's features, e.g.
 * "echorouterd 0.1.0 (io_uring: liburing 2.3; sqlite: yes; nats: no;
 * tls: yes)", for -V and the log at start. Static storage; any thread.
 */
const char *version_line(void);

/* The version alone ("0.1.0"). Static storage; any thread. */
const char *version_number(void);

#endif
