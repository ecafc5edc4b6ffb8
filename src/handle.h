/*
 * handle.h: how one thread names a connection it does not own: its
 * reactor, its slot there and the slot's generation. A handle outlives
 * its connection harmlessly: resolving it afterwards finds nothing
 * (conn_resolve in conn.h, on the owning reactor only).
 */
#ifndef ECHOROUTERD_HANDLE_H
#define ECHOROUTERD_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

struct conn_handle {
	uint32_t reactor;
	uint32_t slot;
	uint32_t gen;
};

static inline bool
conn_handle_eq(const struct conn_handle *a, const struct conn_handle *b)
{
	return a->reactor == b->reactor && a->slot == b->slot &&
	    a->gen == b->gen;
}

#endif
