/* store_backends.c: the store's backends by the name the configuration gives them, built in or not. */
#include "store_backend.h"
#include "version.h"

#include <string.h>

/*
 * One row a backend. A backend whose build option is off is still named,
 * so that choosing it is a clear error rather than an unknown name.
 */
static const struct store_backend_info backends[] = {
	{ "sqlite", "SQLite", "WITH_SQLITE",
#if ER_WITH_SQLITE
	    &store_sqlite_ops,
#else
	    NULL,
#endif
	},
	{ "jetstream", "NATS", "WITH_NATS",
#if ER_WITH_NATS
	    &store_js_ops,
#else
	    NULL,
#endif
	},
};

const struct store_backend_info *
store_backend_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(backends[i].name, name) == 0)
			return &backends[i];
	return NULL;
}
