/* deliver.c: messages from a connection to their recipient's, across reactors and registered kinds, and verdicts back. */
#include "deliver.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "conn.h"
#include "http_out.h"
#include "proto.h"
#include "reactor.h"
#include "smpp_receipt.h"
#include "util.h"

_Static_assert((int)MSG_KIND_CONN == (int)ROUTE_OWNER_CONN,
    "a route owner's kind is a message kind");

/*
 * The registered kinds. Written at start and shutdown, read by every
 * thread that delivers: release and acquire make a registration whole.
 */
static const struct deliver_kind_ops *_Atomic kinds[MSG_KIND_MAX];

int
deliver_register(unsigned kind, const struct deliver_kind_ops *ops)
{
	if (kind >= MSG_KIND_MAX || kind == MSG_KIND_CONN ||
	    kind == MSG_KIND_NONE) {
		errno = EINVAL;
		return -1;
	}
	atomic_store_explicit(&kinds[kind], ops, memory_order_release);
	return 0;
}

static const struct deliver_kind_ops *
kind_ops(unsigned kind)
{
	if (kind >= MSG_KIND_MAX)
		return NULL;
	return atomic_load_explicit(&kinds[kind], memory_order_acquire);
}

bool
deliver_kind_on(unsigned kind)
{
	const struct deliver_kind_ops *ops = kind_ops(kind);

	return ops != NULL && ops->on();
}

bool
deliver_kind_up(unsigned kind)
{
	const struct deliver_kind_ops *ops = kind_ops(kind);

	if (ops == NULL)
		return false;
	return ops->up != NULL ? ops->up() : ops->on();
}

/*
 * What became of m, sent here by another node's store (MSG_F_NODE_HELD):
 * the verdict that node waits for, and the receipt, made here as for a
 * message delivered here. Delivered: it leaves that store; given back or
 * a temporary error: it comes again.
 */
static void
node_outcome(struct msg *m, enum msg_outcome o)
{
	struct reactor *r;

	switch (o) {
	case MSG_OUT_WRITTEN:
		msg_free(m);
		return;
	case MSG_OUT_DELIVERED:
		m->verdict = MSG_OK;
		if (m->recipient.kind == ROUTE_OWNER_CONN &&
		    (r = reactor_get(m->recipient.conn.reactor)) != NULL &&
		    !(m->flags & MSG_F_RECEIPT))
			deliver_receipt(r, m, SMPP_STATE_DELIVERED);
		break;
	case MSG_OUT_FAILED:
		/* (That store sends the UNDELIV receipt, as for its own.) */
		m->verdict = MSG_UNFIT;
		break;
	case MSG_OUT_RETRY:
		m->verdict = MSG_FULL;
		break;
	default:
		m->verdict = MSG_BUSY;
		break;
	}
	m->flags &= ~(uint32_t)(MSG_F_STORED | MSG_F_NODE_HELD);
	deliver_answer(m);
}

void
deliver_outcome(struct msg *m, enum msg_outcome o)
{
	const struct deliver_kind_ops *ops = kind_ops(MSG_KIND_STORE);

	if (m->flags & MSG_F_NODE_HELD) {
		node_outcome(m, o);
		return;
	}
	/* Only the store hands messages out, and it outlives the reactors. */
	if (ops == NULL || ops->outcome == NULL) {
		msg_free(m);
		return;
	}
	ops->outcome(m, o);
}

void
deliver_written(struct msg *const *ms, unsigned n)
{
	const struct deliver_kind_ops *ops = kind_ops(MSG_KIND_STORE);

	if (ops == NULL || ops->written == NULL)
		return;
	/* Another node's store waits for DELIVERED alone: not told. */
	for (unsigned i = 0, j; i < n; i = j + 1) {
		for (j = i; j < n && !(ms[j]->flags & MSG_F_NODE_HELD); j++)
			;
		if (j > i)
			ops->written(ms + i, j - i);
	}
}

void
deliver_wake(const char *address)
{
	for (unsigned k = 0; k < MSG_KIND_MAX; k++) {
		const struct deliver_kind_ops *ops = kind_ops(k);

		if (ops != NULL && ops->wake != NULL && ops->on())
			ops->wake(address);
	}
}

int
deliver_request(unsigned kind, struct msg_req *q)
{
	const struct deliver_kind_ops *ops = kind_ops(kind);

	if (ops == NULL || ops->request == NULL || !ops->on()) {
		errno = ENOTSUP;
		return -1;
	}
	ops->request(q);
	return 0;
}

/* Whether the store holds messages for address (its backlog). */
static bool
deliver_store_holds(const char *address)
{
	const struct deliver_kind_ops *ops = kind_ops(MSG_KIND_STORE);

	return ops != NULL && ops->holds != NULL && ops->holds(address);
}

static void deliver_reply_in(struct reactor_batch *b, struct msg *m);

void
deliver_to_kind(unsigned kind, struct reactor_batch *b, struct msg *m,
    const char *to)
{
	const struct deliver_kind_ops *ops = kind_ops(kind);

	if (ops == NULL) {
		m->verdict = MSG_NO_ROUTE;
		deliver_reply_in(b, m);
		return;
	}
	ops->take(b, m, to);
}

/* A receipt staged by deliver_receipt, now sent on its way. */
static void
deliver_receipt_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	if (st == MAILBOX_CANCELLED) {
		msg_free(m);
		return;
	}
	deliver_forward(owner, m);
}

/*
 * The receipt leaves in a later turn of r: after the verdict for orig,
 * which goes back to its sender in this one (on this reactor, or staged
 * in r's batch ahead of it). A gateway files a receipt under the id of
 * the submit_sm_resp; a receipt before that response finds nothing.
 */
void
deliver_receipt(struct reactor *r, const struct msg *orig, uint8_t state)
{
	struct msg *m;

	if (!(orig->registered_delivery & 0x01) || orig->reply_to[0] == '\0')
		return;
	/* An HTTP send's receipt goes to its URL, not to a session. */
	if (http_out_receipt(orig, state, (uint64_t)time(NULL)))
		return;
	m = smpp_receipt_make(orig, state, msg_next_id(r),
	    (uint64_t)time(NULL));
	if (m == NULL)
		return;
	m->task.fn = deliver_receipt_task;
	m->task.arg = m;
	reactor_batch_add(&r->batch, r, &m->task);
}

/* Hands m to the recipient's protocol on its own reactor. */
static enum msg_verdict
deliver_here(struct reactor *r, struct msg *m)
{
	struct conn *c = conn_resolve(r, &m->recipient.conn);
	enum msg_verdict v;

	if (c == NULL || conn_is_closing(c) || c->proto->on_deliver == NULL)
		return MSG_NO_ROUTE;
	/*
	 * The store hands out a bounded few per account (until written or
	 * answered) and in order: one refused for room while a later one
	 * is taken would arrive after it.
	 */
	if (!(m->flags & MSG_F_STORED) && !conn_can_take(c))
		return MSG_BUSY;
	v = (enum msg_verdict)c->proto->on_deliver(c, m);
	/*
	 * Taken, but kept by the protocol (a part waiting for the rest of
	 * its message), which sends its receipt or outcome when it knows.
	 */
	if (v == MSG_HELD)
		return MSG_OK;
	/* Routing latency: what came straight from a sender on this host. */
	if (v == MSG_OK && m->read_ns != 0 &&
	    !(m->flags & MSG_F_STORED))
		counter_observe(&r->detail.hist[HIST_ROUTE],
		    counter_now_ns() - m->read_ns);
	/*
	 * Protocols that hear back from the client confirm later; the store
	 * sends the receipts of what it held.
	 */
	if (v == MSG_OK && !c->proto->confirms_delivery &&
	    !(m->flags & MSG_F_STORED))
		deliver_receipt(r, m, SMPP_STATE_DELIVERED);
	return v;
}

void
deliver_stored_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct msg *m = arg;
	const struct deliver_kind_ops *store = kind_ops(MSG_KIND_STORE);
	struct conn *c;

	if (st == MAILBOX_CANCELLED || store == NULL) {
		/* Still in the store: delivered after the restart. */
		msg_free(m);
		return;
	}
	m->verdict = deliver_here(r, m);
	if (m->verdict == MSG_OK) {
		counter_add(&r->counters, COUNTER_ROUTED_STORED, 1);
		c = conn_resolve(r, &m->recipient.conn);
		/*
		 * The protocol holds a copy and tells the store once the
		 * client has it (SMPP: deliver_sm_resp; router: its line
		 * acknowledged by the client's TCP).
		 */
		if (c != NULL && c->proto->reports_stored) {
			msg_free(m);
			return;
		}
	}
	store->answer(NULL, m);
}

/*
 * On the sender's reactor: the verdict came back. Cancelled (the reactor
 * is freed at exit): the sender is gone; only m is freed.
 */
static void
deliver_verdict_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;
	struct conn *c;

	if (st == MAILBOX_RUN &&
	    (c = conn_resolve(owner, &m->sender)) != NULL &&
	    c->proto->on_verdict != NULL)
		c->proto->on_verdict(c, m);
	msg_free(m);
}

static bool deliver_to_store(struct reactor *r, struct msg *m);
static void deliver_store_now(struct reactor *r, struct msg *m);

/*
 * Sends m's verdict back to its sender: a reactor of ours, the answer of
 * the sender's registered kind (another node, the store), or nobody (then
 * m is freed). Staged in b when it is not NULL (the caller's reactor's
 * turn, or its own batch), posted otherwise. Takes m. Any thread.
 */
static void
deliver_reply_in(struct reactor_batch *b, struct msg *m)
{
	const struct deliver_kind_ops *ops;
	struct reactor *back;

	if (m->flags & MSG_F_NO_VERDICT) {
		msg_free(m);
		return;
	}
	if (m->sender_kind != MSG_KIND_CONN) {
		if ((ops = kind_ops(m->sender_kind)) != NULL &&
		    ops->answer != NULL)
			ops->answer(b, m);
		else
			msg_free(m);
		return;
	}
	if ((back = reactor_get(m->sender.reactor)) == NULL) {
		msg_free(m);
		return;
	}
	m->task.fn = deliver_verdict_task;
	m->task.arg = m;
	if (b != NULL)
		reactor_batch_add(b, back, &m->task);
	else
		reactor_post_task(back, &m->task);
}

/* The same, staged on reactor r's turn when r is not NULL. */
static void
deliver_reply(struct reactor *r, struct msg *m)
{
	deliver_reply_in(r != NULL ? &r->batch : NULL, m);
}

/*
 * On the recipient's reactor: deliver, then send the verdict back.
 * Cancelled (freed at exit): nobody is left to answer.
 */
static void
deliver_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct msg *m = arg;

	if (st == MAILBOX_CANCELLED) {
		msg_free(m);
		return;
	}
	m->verdict = deliver_here(r, m);
	if (m->verdict == MSG_OK)
		counter_add(&r->counters, COUNTER_ROUTED_REMOTE, 1);
	/* The store's own: it keeps it, and hears the verdict. */
	else if (m->sender_kind == MSG_KIND_STORE)
		;
	/* The recipient left on the way: its account's store takes it. */
	else if (m->verdict == MSG_NO_ROUTE && deliver_to_store(r, m))
		return;
	else if (m->verdict == MSG_STORE) {
		deliver_store_now(r, m);
		return;
	}
	deliver_reply(r, m);
}

void
deliver_answer(struct msg *m)
{
	deliver_reply(NULL, m);
}

void
deliver_answer_in(struct reactor_batch *b, struct msg *m)
{
	deliver_reply_in(b, m);
}

void
deliver_answer_on(struct reactor *r, struct msg *m)
{
	if (!(m->flags & MSG_F_NO_VERDICT) &&
	    m->sender_kind == MSG_KIND_CONN && m->sender.reactor == r->id) {
		deliver_verdict_task(r, m, MAILBOX_RUN);
		return;
	}
	deliver_reply_in(&r->batch, m);
}

static const char *deliver_target(const struct config *cf,
	    struct msg *m, bool *held);
static bool deliver_store_if(const struct config *cf, struct msg *m,
	    const char *to, bool held);

void
deliver_node_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct msg *m = arg;
	/* From another node's store: it leaves there once delivered. */
	bool held_there = (m->flags & MSG_F_NODE_HELD) != 0;
	bool held;
	const char *to;
	struct conn *c;

	if (st == MAILBOX_CANCELLED) {
		/* Exiting: the sending node hears nothing and times out. */
		msg_free(m);
		return;
	}
	m->flags &= ~(uint32_t)MSG_F_NODE_HELD;
	/*
	 * Behind what this node's store holds for the account, as a local
	 * sender's message would go: per sender -> recipient order. (Once
	 * this store has it, it is this store's.)
	 */
	if (deliver_kind_on(MSG_KIND_STORE)) {
		struct route_owner chosen = m->recipient;

		to = deliver_target(r->cf, m, &held);
		if (deliver_store_if(r->cf, m, to, true))
			return;
		m->recipient = chosen;	/* the owner the cluster picked */
	}
	/*
	 * As a stored message here: the protocol keeps a copy and tells
	 * deliver_outcome, which answers, once its client has it.
	 */
	if (held_there)
		m->flags |= MSG_F_STORED | MSG_F_NODE_HELD;
	m->verdict = deliver_here(r, m);
	if (m->verdict == MSG_OK) {
		counter_add(&r->counters, COUNTER_ROUTED_NODE, 1);
		c = conn_resolve(r, &m->recipient.conn);
		if (held_there && c != NULL && c->proto->reports_stored) {
			msg_free(m);
			return;
		}
	} else if (m->verdict == MSG_STORE && !held_there) {
		deliver_store_now(r, m);
		return;
	} else if (m->verdict == MSG_STORE) {
		m->verdict = MSG_BUSY;	/* that store keeps it */
	}
	m->flags &= ~(uint32_t)(MSG_F_STORED | MSG_F_NODE_HELD);
	/* "No route" lets the sending node look further (or store it). */
	deliver_reply(r, m);
}

/*
 * Finds where m goes: the address it is for (the owner of m->to, the "to"
 * of the longest matching prefix route, or m->to itself: tried in that
 * order, routes first with MSG_F_PREFIX_FIRST) and, when someone holds
 * it, its owner in m->recipient (*held). NULL: no address fits.
 */
/*
 * A route to upstreams matches m->to, and no owner of the address itself
 * comes first (as with a route to an account: with MSG_F_PREFIX_FIRST the
 * route wins): m goes to the upstream kind (its take picks the upstream),
 * and the route's "to" is returned. NULL: not for an upstream.
 */
static const char *
deliver_upstream_route(const struct config *cf, struct msg *m)
{
	const struct route_conf *rc = route_conf_by_prefix(cf, m->to);

	if (rc == NULL || rc->nupstreams == 0)
		return NULL;
	if (!(m->flags & MSG_F_PREFIX_FIRST) &&
	    route_lookup(m->to, &m->recipient))
		return m->to;
	/* No reactor: nothing takes it as a connection's. */
	m->recipient = (struct route_owner){
	    .kind = (enum route_owner_kind)MSG_KIND_UPSTREAM,
	    .conn = { .reactor = UINT32_MAX } };
	return rc->to;
}

static const char *
deliver_target(const struct config *cf, struct msg *m, bool *held)
{
	const char *via;

	*held = true;
	if (m->flags & MSG_F_EXACT) {
		*held = route_lookup(m->to, &m->recipient);
		return m->to;
	}
	if ((via = deliver_upstream_route(cf, m)) != NULL)
		return via;
	if ((via = route_resolve(cf, m->to,
	    (m->flags & MSG_F_PREFIX_FIRST) != 0, &m->recipient)) != NULL)
		return via;
	*held = false;
	via = route_by_prefix(cf, m->to);
	/* Nobody holds either: the account a route names, else the address. */
	if (via != NULL && config_find_account(cf, via) != NULL)
		return via;
	return m->to;
}

/*
 * With a store: stores m when it is for an account that nobody can take
 * it for now, that has messages waiting (they go first), or when m is
 * scheduled for later. true: the store took m (the verdict follows).
 */
static bool
deliver_store_if(const struct config *cf, struct msg *m,
    const char *to, bool held)
{
	if (!deliver_kind_on(MSG_KIND_STORE) || (m->flags & MSG_F_STORED))
		return false;
	if (held && m->due == 0 && !deliver_store_holds(to))
		return false;
	if (config_find_account(cf, to) == NULL)
		return false;
	deliver_to_kind(MSG_KIND_STORE, NULL, m, to);
	return true;
}

/*
 * The recipient left on the way: its account's store may take m. Held
 * still by a session of this reactor's that is closing (its address not
 * given back yet), it is held by nobody.
 */
static bool
deliver_to_store(struct reactor *r, struct msg *m)
{
	bool held;
	const char *to = deliver_target(r->cf, m, &held);

	if (held && m->recipient.kind == ROUTE_OWNER_CONN &&
	    m->recipient.conn.reactor == r->id &&
	    conn_resolve(r, &m->recipient.conn) == NULL)
		held = false;
	/* Someone else holds it now: the sender hears "no route" as before. */
	return !held && deliver_store_if(r->cf, m, to, false);
}

/*
 * The recipient's session would only have queued m in memory: the store
 * of the account it holds takes m instead (MSG_STORE).
 */
static void
deliver_store_now(struct reactor *r, struct msg *m)
{
	bool held;
	const char *to = deliver_target(r->cf, m, &held);

	deliver_to_kind(MSG_KIND_STORE, NULL, m, to);
}

/*
 * In a cluster: whether this node decides alone where m goes. It does for
 * an address held here alone (a router LOGIN: the cluster's claims keep it
 * unique), and for everything while the cluster is down. An account's
 * binds may be on several nodes, so their traffic goes through the
 * cluster, which shares it among them; so does whatever nobody holds here.
 */
static bool
deliver_node_decides(const struct msg *m, const char *to, bool held)
{
	if (!deliver_kind_up(MSG_KIND_NODE))
		return true;
	/* Each node binds to its upstreams itself. */
	if (held && (unsigned)m->recipient.kind == MSG_KIND_UPSTREAM)
		return true;
	return held && strcmp(to, m->to) == 0 && route_is_claimed(to);
}

/* Sends m through the cluster, or says why it cannot go. */
static enum msg_verdict
deliver_cluster(struct reactor *r, struct msg *m, const char *to)
{
	/* Its account's backlog, or its schedule, still comes first. */
	if (deliver_store_if(r->cf, m, to, true))
		return MSG_PENDING;
	deliver_to_kind(MSG_KIND_NODE, &r->batch, m, to);
	return MSG_PENDING;
}

void
deliver_unrouted(const struct config *cf, struct msg *m)
{
	bool held;
	const char *to = deliver_target(cf, m, &held);

	/*
	 * The store's own message: back to it (no route), which hands it
	 * to whoever holds it here now as a stored message, kept until
	 * delivered, not as a sender's message would go.
	 */
	if (held && m->sender_kind != MSG_KIND_STORE) {
		/*
		 * Someone here holds it after all (it came after the cluster
		 * was asked): this node's reactor takes it, as a sender's
		 * would.
		 */
		struct reactor *dst = reactor_get(m->recipient.conn.reactor);

		if (dst != NULL) {
			m->task.fn = deliver_task;
			m->task.arg = m;
			reactor_post_task(dst, &m->task);
			return;
		}
	}
	/* (Not what the store itself sent: it is in the store already.) */
	if (!held && m->sender_kind != MSG_KIND_STORE &&
	    deliver_store_if(cf, m, to, false))
		return;
	m->verdict = MSG_NO_ROUTE;
	deliver_reply(NULL, m);
}

/*
 * m's recipient is an owner of a registered kind: its take has it, or an
 * unregistered kind's owner is no route.
 */
static enum msg_verdict
deliver_owned(struct reactor *r, struct msg *m, const char *to)
{
	if (kind_ops(m->recipient.kind) == NULL) {
		msg_free(m);
		return MSG_NO_ROUTE;
	}
	deliver_to_kind(m->recipient.kind, &r->batch, m, to);
	return MSG_PENDING;
}

/*
 * With a store, a message for upstreams is on disk before its sender
 * hears OK: the store hands it to them and keeps it until an SMSC took
 * it. Not a JetStream store: every node reads it, and each would send
 * the backlog to its own sessions. true: the store took m.
 */
static bool
deliver_upstream_stored(const struct config *cf, struct msg *m,
    const char *to)
{
	if ((unsigned)m->recipient.kind != MSG_KIND_UPSTREAM ||
	    !deliver_kind_on(MSG_KIND_STORE) || (m->flags & MSG_F_STORED) ||
	    cf->store.jetstream)
		return false;
	deliver_to_kind(MSG_KIND_STORE, NULL, m, to);
	return true;
}

/*
 * On m's sender's reactor: http-out posted m to its mo_url and the
 * application answered, or it gave up (m->message_state says which).
 */
static void
deliver_mo_receipt_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	if (st == MAILBOX_RUN)
		deliver_receipt(owner, m, m->message_state);
	msg_free(m);
}

/*
 * The mo_url m goes to: to is an account that takes messages over HTTP
 * and nobody holds it (receipts are not posted there). NULL otherwise.
 */
static const char *
deliver_mo_url(const struct config *cf, const struct msg *m, const char *to)
{
	const struct account_conf *a;

	if ((m->flags & (MSG_F_RECEIPT | MSG_F_STORED)) ||
	    cf->naccounts_mo_url == 0 || !http_out_on() ||
	    (a = config_find_account(cf, to)) == NULL || a->mo_url[0] == '\0')
		return NULL;
	return a->mo_url;
}

/*
 * Delivers m on this reactor, posts it to the recipient's, or gives it to
 * the store. Returns the verdict, or MSG_PENDING once posted.
 */
static enum msg_verdict
deliver_dispatch(struct reactor *r, struct msg *m)
{
	struct reactor *dst;
	enum msg_verdict v;
	bool held;
	const char *to = deliver_target(r->cf, m, &held), *url;

	bool node = deliver_kind_on(MSG_KIND_NODE);

	if (node && !deliver_node_decides(m, to, held))
		return deliver_cluster(r, m, to);
	/* In memory at http-out, even with a store: it would never leave. */
	if (!held && (url = deliver_mo_url(r->cf, m, to)) != NULL)
		return (enum msg_verdict)http_out_mo(m, url,
		    deliver_mo_receipt_task);
	if (deliver_store_if(r->cf, m, to, held))
		return MSG_PENDING;
	/* Nobody here has it, and the cluster that might cannot be asked. */
	if (!held && node) {
		msg_free(m);
		return MSG_UNAVAILABLE;
	}
	if (held && deliver_upstream_stored(r->cf, m, to))
		return MSG_PENDING;
	/* Held by a registered kind of owner (not a connection of ours). */
	if (held && m->recipient.kind != ROUTE_OWNER_CONN)
		return deliver_owned(r, m, to);
	if (!held || (dst = reactor_get(m->recipient.conn.reactor)) == NULL) {
		msg_free(m);
		return MSG_NO_ROUTE;
	}
	if (dst == r) {
		v = deliver_here(r, m);
		if (v == MSG_OK)
			counter_add(&r->counters, COUNTER_ROUTED_LOCAL, 1);
		else if (v == MSG_NO_ROUTE && deliver_to_store(r, m))
			return MSG_PENDING;
		else if (v == MSG_STORE) {
			deliver_to_kind(MSG_KIND_STORE, NULL, m, to);
			return MSG_PENDING;
		}
		msg_free(m);
		return v;
	}
	m->task.fn = deliver_task;
	m->task.arg = m;
	reactor_send(r, dst, &m->task);
	return MSG_PENDING;
}

enum msg_verdict
deliver_send(struct conn *c, struct msg *m)
{
	m->sender_kind = MSG_KIND_CONN;
	m->sender = conn_handle(c);
	return deliver_dispatch(c->r, m);
}

enum msg_verdict
deliver_from(struct reactor *r, struct msg *m)
{
	return deliver_dispatch(r, m);
}

void
deliver_forward(struct reactor *r, struct msg *m)
{
	m->flags |= MSG_F_NO_VERDICT;
	m->sender_kind = MSG_KIND_NONE;
	deliver_dispatch(r, m);
}
