/* version.c: the line that says which version and features a build has. */
#include "version.h"

#ifndef VERSION
#define VERSION "0.1.0"
#endif
#ifndef ER_LIBURING_VERSION
#define ER_LIBURING_VERSION "?"
#endif

/* Chosen by the preprocessor, so that the line is one constant string. */
#if ER_WITH_SQLITE
#define SQLITE_IS	"yes"
#else
#define SQLITE_IS	"no"
#endif
#if ER_WITH_NATS
#define NATS_IS		"yes"
#else
#define NATS_IS		"no"
#endif
#if ER_WITH_TLS
#define TLS_IS		"yes"
#else
#define TLS_IS		"no"
#endif
#if ER_WITH_CURL
#define CURL_IS		"yes"
#else
#define CURL_IS		"no"
#endif

const char *
version_line(void)
{
	return "echorouterd " VERSION " (io_uring: liburing "
	    ER_LIBURING_VERSION "; sqlite: " SQLITE_IS "; nats: " NATS_IS
	    "; tls: " TLS_IS "; curl: " CURL_IS ")";
}

const char *
version_number(void)
{
	return VERSION;
}
