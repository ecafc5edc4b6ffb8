/* deliver.c: messages from a connection to their recipient's, across reactors, and verdicts back. */
#include "deliver.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "proto.h"
#include "reactor.h"
#include "smpp_receipt.h"
#include "util.h"

struct deliver_msg *
deliver_msg_new(size_t len)
{
	struct deliver_msg *m = xmalloc(sizeof(*m) + len + 1);

	/*
	 * Not calloc: zeroing the whole message (368 bytes and the text, most
	 * of them SMPP strings a line client leaves empty) was 2 % of the time
	 * of cross-reactor routing. The fixed fields are zeroed, the strings
	 * emptied; the text is the caller's to fill.
	 */
	memset(m, 0, offsetof(struct deliver_msg, src_addr));
	m->src_addr[0] = m->dst_addr[0] = m->reply_to[0] = '\0';
	m->receipted_id[0] = m->from[0] = m->to[0] = '\0';
	m->len = 0;
	m->text[len] = '\0';
	return m;
}

struct deliver_msg *
deliver_msg_dup(const struct deliver_msg *m)
{
	size_t n = deliver_msg_size(m);

	return memcpy(xmalloc(n), m, n);
}

uint64_t
deliver_next_id(struct reactor *r)
{
	/* Reactor ids are below 1024: the low bits keep ids apart. */
	return (++r->msg_seq << 10) | r->id;
}

const char *
deliver_verdict_name(enum deliver_verdict v)
{
	switch (v) {
	case DELIVER_PENDING:
		return "pending";
	case DELIVER_OK:
		return "ok";
	case DELIVER_NO_ROUTE:
		return "no route";
	case DELIVER_BUSY:
		return "recipient busy";
	case DELIVER_REFUSED:
		return "refused";
	case DELIVER_UNFIT:
		return "unfit";
	}
	return "?";
}

/* Hands m to the recipient's protocol on its own reactor. */
static enum deliver_verdict
deliver_here(struct reactor *r, struct deliver_msg *m)
{
	struct conn *c = conn_resolve(r, &m->recipient.conn);
	enum deliver_verdict v;

	if (c == NULL || conn_is_closing(c) || c->proto->on_deliver == NULL)
		return DELIVER_NO_ROUTE;
	if (!conn_can_take(c))
		return DELIVER_BUSY;
	v = (enum deliver_verdict)c->proto->on_deliver(c, m);
	/* Protocols that hear back from the client confirm later. */
	if (v == DELIVER_OK && !c->proto->confirms_delivery)
		smpp_receipt_send(r, m, SMPP_STATE_DELIVERED);
	return v;
}

/*
 * On the sender's reactor: the verdict came back. Cancelled (the reactor
 * is freed at exit): the sender is gone; only m is freed.
 */
static void
deliver_verdict_task(void *owner, void *arg, enum mailbox_status st)
{
	struct deliver_msg *m = arg;
	struct conn *c;

	if (st == MAILBOX_RUN &&
	    (c = conn_resolve(owner, &m->sender)) != NULL &&
	    c->proto->on_verdict != NULL)
		c->proto->on_verdict(c, m);
	free(m);
}

/*
 * On the recipient's reactor: deliver, then send the verdict back.
 * Cancelled (freed at exit): nobody is left to answer.
 */
static void
deliver_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner, *back;
	struct deliver_msg *m = arg;

	if (st == MAILBOX_CANCELLED) {
		free(m);
		return;
	}
	m->verdict = deliver_here(r, m);
	if (m->verdict == DELIVER_OK)
		counter_add(&r->counters, COUNTER_ROUTED_REMOTE, 1);
	if ((m->flags & DELIVER_F_NO_VERDICT) ||
	    (back = reactor_get(m->sender.reactor)) == NULL) {
		free(m);
		return;
	}
	m->task.fn = deliver_verdict_task;
	m->task.arg = m;
	reactor_send(r, back, &m->task);
}

/* Finds m's recipient: its owner in the table, by address or route. */
static bool
deliver_find(struct reactor *r, struct deliver_msg *m)
{
	if (m->flags & DELIVER_F_EXACT)
		return route_lookup(m->to, &m->recipient);
	return route_resolve(r->cf, m->to,
	    (m->flags & DELIVER_F_PREFIX_FIRST) != 0, &m->recipient) != NULL;
}

/*
 * Delivers m on this reactor or posts it to the recipient's. Returns the
 * verdict, or DELIVER_PENDING once posted.
 */
static enum deliver_verdict
deliver_dispatch(struct reactor *r, struct deliver_msg *m)
{
	struct reactor *dst;
	enum deliver_verdict v;

	if (!deliver_find(r, m) || m->recipient.kind != ROUTE_OWNER_CONN ||
	    (dst = reactor_get(m->recipient.conn.reactor)) == NULL) {
		free(m);
		return DELIVER_NO_ROUTE;
	}
	if (dst == r) {
		v = deliver_here(r, m);
		if (v == DELIVER_OK)
			counter_add(&r->counters, COUNTER_ROUTED_LOCAL, 1);
		free(m);
		return v;
	}
	m->task.fn = deliver_task;
	m->task.arg = m;
	reactor_send(r, dst, &m->task);
	return DELIVER_PENDING;
}

enum deliver_verdict
deliver_send(struct conn *c, struct deliver_msg *m)
{
	m->sender = conn_handle(c);
	return deliver_dispatch(c->r, m);
}

void
deliver_forward(struct reactor *r, struct deliver_msg *m)
{
	m->flags |= DELIVER_F_NO_VERDICT;
	m->sender.reactor = DELIVER_NO_REACTOR;
	deliver_dispatch(r, m);
}
