/* proto.c: the registry of protocols (filled at start, proto_builtin.c) and evictions. */
#include "proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "reactor.h"
#include "util.h"

#define PROTO_MAX	16

/* An eviction on its way to the connection's reactor. */
struct evict_note {
	struct conn_handle h;
	enum proto_evict why;
};

/*
 * Written at start, before any thread but main's runs, and read after:
 * the configuration names protocols without depending on them, so no
 * module a protocol calls (delivery, the store, the cluster) reaches back
 * to the protocols through the configuration.
 */
static const struct proto *protos[PROTO_MAX];
static unsigned nprotos;
static char names[PROTO_MAX * 16];

int
proto_register(const struct proto *p)
{
	size_t used = strlen(names);

	for (unsigned i = 0; i < nprotos; i++)
		if (protos[i] == p)
			return 0;
	if (nprotos == PROTO_MAX || proto_find(p->name) != NULL ||
	    used + strlen(p->name) + 3 > sizeof(names)) {
		errno = EINVAL;
		return -1;
	}
	protos[nprotos++] = p;
	snprintf(names + used, sizeof(names) - used, "%s%s",
	    used > 0 ? ", " : "", p->name);
	return 0;
}

const struct proto *
proto_find(const char *name)
{
	for (unsigned i = 0; i < nprotos; i++)
		if (strcmp(protos[i]->name, name) == 0)
			return protos[i];
	return NULL;
}

/* On the connection's reactor: its protocol ends the session. */
static void
evict_task(void *owner, void *arg, enum mailbox_status st)
{
	struct evict_note *e = arg;
	struct conn *c;

	if (st == MAILBOX_RUN && (c = conn_resolve(owner, &e->h)) != NULL &&
	    !conn_is_closing(c)) {
		if (c->proto->on_evict != NULL)
			c->proto->on_evict(c, e->why);
		else
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
	}
	free(e);
}

int
proto_evict(const struct conn_handle *h, enum proto_evict why)
{
	struct reactor *r = reactor_get(h->reactor);
	struct evict_note *e;

	if (r == NULL)
		return -1;
	e = xmalloc(sizeof(*e));
	e->h = *h;
	e->why = why;
	reactor_post(r, evict_task, e);
	return 0;
}

const char *
proto_names(void)
{
	return names;
}
