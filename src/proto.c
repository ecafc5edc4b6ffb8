/* proto.c: the registry of protocols a listener can name, and evictions. */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "reactor.h"
#include "util.h"

/* An eviction on its way to the connection's reactor. */
struct evict_note {
	struct conn_handle h;
	enum proto_evict why;
};

static const struct proto *const protos[] = {
	&proto_echo,
	&proto_router,
	&proto_smpp,
	&proto_metrics,
};

const struct proto *
proto_find(const char *name)
{
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++)
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
	return "echo, router, smpp, metrics";
}
