/*
 * cluster_send.c: the cluster thread's messages to other nodes: each one
 * a request awaiting its verdict, sent in this batch's bundle for its
 * address to the node that claimed it (as the claims' bucket said last),
 * tried at its next address when nobody has it; and the verdicts this
 * node owes other nodes, sent together when the batch ends. All of it
 * runs on the cluster thread (cluster.c).
 */
#include "cluster_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"
#include "util.h"

/* A bundle, or a batch of verdicts, is sent once it is this big. */
#define BUNDLE_BYTES		(64 * 1024)
#define VERDICTS_BYTES		(64 * 1024)
/* Seconds a held message waits beyond its recipient's own timeouts. */
#define HELD_SLACK_S		5
/* Spare struct pends kept for reuse, at most. */
#define PEND_SPARE		4096

/* A message for another node: in an outbox, then awaiting its verdict. */
struct pend {
	struct pend *hnext;		/* by request id */
	struct pend *prev, *next;	/* by deadline (sent order) */
	struct pend *qnext;		/* in its outbox */
	uint64_t req;
	uint64_t deadline_ms;
	bool	held;			/* MSG_F_NODE_HELD: the longer wait */
	unsigned cand;			/* which address is being tried */
	unsigned tries;			/* its owners tried, after the first */
	struct msg *m;
	char	via[CLUSTER_NODE_MAX + 1];	/* the owner tried; "" none */
};

/*
 * This batch's messages for one address, sent as one bundle when the
 * batch ends (or sooner, when it is full).
 */
struct outbox {
	struct outbox *hnext;		/* by address */
	struct outbox *next;		/* in the order they were opened */
	struct pend *head, *tail;
	unsigned count;
	size_t	bytes;			/* the bundle's size, at most */
	char	addr[ROUTE_ADDR_MAX + 1];
	char	node[CLUSTER_NODE_MAX + 1];	/* its owner's; "" none */
};

/* This batch's verdicts for one other node, sent when it ends. */
struct verdicts {
	struct verdicts *next;
	uint8_t	*buf;
	size_t	len, cap;
	char	node[MSG_NODE_MAX + 1];
};

/* ---- requests awaiting a verdict ------------------------------------- */

static struct pend **
pend_slot(uint64_t req)
{
	struct pend **pp = &C.pend[req & (PEND_BUCKETS - 1)];

	while (*pp != NULL && (*pp)->req != req)
		pp = &(*pp)->hnext;
	return pp;
}

/*
 * The two lists by deadline, each in sent order: requests, which wait
 * request_timeout, and the store's held messages, which wait longer.
 */
static struct pend **
oldest_of(const struct pend *p)
{
	return p->held ? &C.held_oldest : &C.oldest;
}

static struct pend **
newest_of(const struct pend *p)
{
	return p->held ? &C.held_newest : &C.newest;
}

static void
pend_unlink(struct pend *p)
{
	struct pend **pp = pend_slot(p->req);

	if (*pp == p)
		*pp = p->hnext;
	if (p->prev != NULL)
		p->prev->next = p->next;
	else if (*oldest_of(p) == p)
		*oldest_of(p) = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	else if (*newest_of(p) == p)
		*newest_of(p) = p->prev;
	p->prev = p->next = p->hnext = NULL;
}

/* A pend for m, spare or new. */
static struct pend *
pend_new(struct msg *m)
{
	struct pend *p = C.spare;

	if (p != NULL) {
		C.spare = p->hnext;
		C.nspare--;
		*p = (struct pend){ 0 };
	} else {
		p = xcalloc(1, sizeof(*p));
	}
	p->m = m;
	return p;
}

static void
pend_free(struct pend *p)
{
	if (C.nspare == PEND_SPARE) {
		free(p);
		return;
	}
	p->hnext = C.spare;
	C.spare = p;
	C.nspare++;
}

/* Files p under a new request id, with its deadline, as the newest. */
static void
pend_link(struct pend *p, uint64_t deadline_ms)
{
	struct pend **pp;

	p->req = ++C.next_req;
	p->deadline_ms = deadline_ms;
	/* A new id: first in its bucket, nothing to look for. */
	pp = &C.pend[p->req & (PEND_BUCKETS - 1)];
	p->hnext = *pp;
	*pp = p;
	p->prev = *newest_of(p);
	p->next = NULL;
	if (p->prev != NULL)
		p->prev->next = p;
	else
		*oldest_of(p) = p;
	*newest_of(p) = p;
}

/*
 * How long a message of this node's store (MSG_F_NODE_HELD) waits for its
 * verdict: the other node answers once its recipient has it, which an
 * SMPP client may take smpp.response_timeout to say, and a line client
 * that stopped reading output_stall_timeout (its session is closed then,
 * and the message given back). Past it, the store sends it again, as
 * JetStream redelivers past a consumer's ack wait.
 */
static uint64_t
held_wait_ms(void)
{
	const struct config *cf = C.cf;
	unsigned s = cf->smpp.response_timeout;

	if (cf->limits.output_stall_timeout > s)
		s = cf->limits.output_stall_timeout;
	return ((uint64_t)cf->cluster.request_timeout + s +
	    HELD_SLACK_S) * 1000;
}

/* Ends p, which is in no list, with verdict v, told to the sender. */
static void
pend_end(struct pend *p, enum msg_verdict v)
{
	struct msg *m = p->m;

	pend_free(p);
	if (v == MSG_UNAVAILABLE)
		atomic_fetch_add(&C.errors, 1);
	m->verdict = v;
	deliver_answer_in(&C.answers, m);
}

/* Ends p, awaiting its verdict, with verdict v. */
static void
pend_finish(struct pend *p, enum msg_verdict v)
{
	pend_unlink(p);
	pend_end(p, v);
}

/* ---- who claimed what: the cluster thread's copy, for sending -------- */

static struct owner **
owner_slot(const char *addr)
{
	struct owner **pp =
	    &C.owners[fnv1a_str(addr) & (SUB_BUCKETS - 1)];

	while (*pp != NULL && strcmp((*pp)->addr, addr) != 0)
		pp = &(*pp)->next;
	return pp;
}

/* The node that claimed addr, as last heard; "" when none did. */
static const char *
owner_of(const char *addr)
{
	struct owner *o = *owner_slot(addr);

	return o != NULL ? o->node : "";
}

/* addr is node's now ("" nobody's). */
static void
owner_set(const char *addr, const char *node)
{
	struct owner **pp = owner_slot(addr), *o = *pp;

	if (node[0] == '\0') {
		if (o != NULL) {
			*pp = o->next;
			free(o);
		}
		return;
	}
	if (o == NULL) {
		o = *pp = xcalloc(1, sizeof(*o));
		snprintf(o->addr, sizeof(o->addr), "%s", addr);
	}
	if (strcmp(o->node, node) != 0) {
		snprintf(o->node, sizeof(o->node), "%s", node);
		o->since_ms = mono_ms();
	}
}

void
cluster_owners_clear(void)
{
	for (size_t i = 0; i < SUB_BUCKETS; i++)
		while (C.owners[i] != NULL) {
			struct owner *o = C.owners[i];

			C.owners[i] = o->next;
			free(o);
		}
}

static void pend_try(struct pend *p);
static const char *candidate(const struct msg *m, unsigned i);
static struct outbox **outbox_slot(const char *addr, const char *node);

/*
 * addr was taken from node was (silent past claim_ttl: frozen, cut off):
 * what went there for it and awaits a verdict goes to its new owner now,
 * in the order sent. A late verdict from was answers nothing; was itself
 * delivers nothing of it (bundle_deliver).
 */
static void
pend_redirect(const char *addr, const char *was)
{
	struct pend *p, *next, *head = NULL, **tail = &head;
	struct outbox *ob;
	const char *a;

	/* (Each list in sent order: per sender, order holds.) */
	for (int held = 0; held < 2; held++)
		for (p = held ? C.held_oldest : C.oldest; p != NULL;
		    p = next) {
			next = p->next;
			if (strcmp(p->via, was) != 0 ||
			    (a = candidate(p->m, p->cand)) == NULL ||
			    strcmp(a, addr) != 0)
				continue;
			pend_unlink(p);
			p->qnext = NULL;
			*tail = p;
			tail = &p->qnext;
		}
	/* Then what this batch was about to send there, after them. */
	if ((ob = *outbox_slot(addr, was)) != NULL && ob->head != NULL) {
		*tail = ob->head;
		ob->head = ob->tail = NULL;
		ob->count = 0;
		ob->bytes = CLUSTER_BUNDLE_HEAD;
	}
	for (p = head; p != NULL; p = next) {
		next = p->qnext;
		pend_try(p);
	}
}

void
cluster_owner_task(void *owner, void *arg, enum mailbox_status st)
{
	struct owner_note *on = arg;
	char was[CLUSTER_NODE_MAX + 1];

	(void)owner;
	if (st == MAILBOX_RUN) {
		snprintf(was, sizeof(was), "%s", owner_of(on->addr));
		owner_set(on->addr, on->node);
		/* Taken over, not given up and claimed again. */
		if (was[0] != '\0' && on->node[0] != '\0' &&
		    strcmp(was, on->node) != 0)
			pend_redirect(on->addr, was);
	}
	free(on);
}

/* ---- sending ---------------------------------------------------------- */

/*
 * The i-th address m may go to, as one node would resolve it: the
 * address itself, and the "to" of its longest prefix route (first with
 * MSG_F_PREFIX_FIRST). NULL past the last.
 */
static const char *
candidate(const struct msg *m, unsigned i)
{
	const char *via = NULL, *list[2];
	unsigned n = 0;

	if (!(m->flags & MSG_F_EXACT) &&
	    (via = route_by_prefix(C.cf, m->to)) != NULL &&
	    strcmp(via, m->to) == 0)
		via = NULL;
	if (via != NULL && (m->flags & MSG_F_PREFIX_FIRST))
		list[n++] = via;
	list[n++] = m->to;
	if (via != NULL && !(m->flags & MSG_F_PREFIX_FIRST))
		list[n++] = via;
	return i < n ? list[i] : NULL;
}

/* Room for n bytes in C.buf. */
static uint8_t *
wire_room(size_t n)
{
	if (n > C.bufcap) {
		free(C.buf);
		C.bufcap = n * 2;
		C.buf = xmalloc(C.bufcap);
	}
	return C.buf;
}

/*
 * Sends ob's messages as one bundle, under consecutive request ids, and
 * empties it. The reply subject names the first id and the count, for
 * NATS's "no responders" on them all.
 */
static void
outbox_send(struct outbox *ob)
{
	char subj[SUBJECT_MAX], reply[SUBJECT_MAX];
	uint8_t *buf = wire_room(ob->bytes);
	uint64_t first = C.next_req + 1, now = mono_ms(),
	    deadline = now + (uint64_t)C.cf->cluster.request_timeout * 1000,
	    held_deadline = now + held_wait_ms();
	struct pend *p, *next;
	natsStatus s = NATS_CONNECTION_DISCONNECTED;
	size_t n = cluster_bundle_head(buf);

	for (p = ob->head; p != NULL; p = p->qnext) {
		p->held = (p->m->flags & MSG_F_NODE_HELD) != 0;
		pend_link(p, p->held ? held_deadline : deadline);
		n += cluster_bundle_put(p->m, buf + n);
	}
	cluster_addr_subject(subj, sizeof(subj), ob->addr, ob->node);
	snprintf(reply, sizeof(reply), "%s.r.%s.%llu.%u", C.prefix, C.node,
	    (unsigned long long)first, ob->count);
	/* Buffered by libnats: a full buffer is a refusal, not a wait. */
	if (!cluster_up() || (s = natsConnection_PublishRequest(C.nc, subj,
	    reply, buf, (int)n)) != NATS_OK) {
		cluster_note_error("publish", s);
		for (p = ob->head; p != NULL; p = next) {
			next = p->qnext;
			pend_finish(p, MSG_UNAVAILABLE);
		}
	} else {
		atomic_fetch_add_explicit(&C.to_nodes, ob->count,
		    memory_order_relaxed);
	}
	ob->head = ob->tail = NULL;
	ob->count = 0;
	ob->bytes = CLUSTER_BUNDLE_HEAD;
}

/* Where this batch's outbox for addr at node is, or would go. */
static struct outbox **
outbox_slot(const char *addr, const char *node)
{
	struct outbox **pp = &C.out[fnv1a_str(addr) & (OUT_BUCKETS - 1)];

	while (*pp != NULL && (strcmp((*pp)->addr, addr) != 0 ||
	    strcmp((*pp)->node, node) != 0))
		pp = &(*pp)->hnext;
	return pp;
}

/* Queues p for addr at node ("" any), in this batch's bundle for it. */
static void
outbox_add(const char *addr, const char *node, struct pend *p)
{
	struct outbox **pp = outbox_slot(addr, node), *ob;
	size_t need = cluster_bundle_item_size(p->m);

	if ((ob = *pp) == NULL) {
		ob = *pp = xcalloc(1, sizeof(*ob));
		snprintf(ob->addr, sizeof(ob->addr), "%s", addr);
		snprintf(ob->node, sizeof(ob->node), "%s", node);
		ob->bytes = CLUSTER_BUNDLE_HEAD;
		if (C.out_last != NULL)
			C.out_last->next = ob;
		else
			C.out_first = ob;
		C.out_last = ob;
	} else if (ob->count == CLUSTER_BUNDLE_MAX ||
	    (ob->count > 0 && ob->bytes + need > BUNDLE_BYTES)) {
		outbox_send(ob);	/* full: this one starts the next */
	}
	p->qnext = NULL;
	if (ob->tail != NULL)
		ob->tail->qnext = p;
	else
		ob->head = p;
	ob->tail = p;
	ob->count++;
	ob->bytes += need;
}

/*
 * Each outbox, sent (or, when send is false, its messages told the
 * cluster is unavailable), and then gone.
 */
static void
outbox_flush(bool send)
{
	struct outbox *ob, *next;
	struct pend *p, *pn;

	for (ob = C.out_first; ob != NULL; ob = next) {
		next = ob->next;
		C.out[fnv1a_str(ob->addr) & (OUT_BUCKETS - 1)] = NULL;
		if (send && ob->count > 0)
			outbox_send(ob);
		for (p = ob->head; p != NULL; p = pn) {
			pn = p->qnext;
			pend_end(p, MSG_UNAVAILABLE);
		}
		free(ob);
	}
	C.out_first = C.out_last = NULL;
}

/*
 * p waits for the next tick, after any other already waiting (each
 * sender's messages keep their order). p is in no list.
 */
static void
later_add(struct pend *p)
{
	if (C.later == NULL)
		C.later_tail = &C.later;
	p->qnext = NULL;
	*C.later_tail = p;
	C.later_tail = &p->qnext;
}

/* Whether a message for addr waits for the next tick. */
static bool
later_has(const char *addr)
{
	const char *a;

	for (struct pend *p = C.later; p != NULL; p = p->qnext)
		if ((a = candidate(p->m, p->cand)) != NULL &&
		    strcmp(a, addr) == 0)
			return true;
	return false;
}

/*
 * Asks the node that claimed p's next candidate address (a router LOGIN:
 * one owner, and its traffic follows the claim, not whoever still
 * subscribes to it), or else the nodes holding it (an account's binds),
 * to deliver it; when none is left, nobody anywhere has it. p is in no
 * list.
 */
static void
pend_try(struct pend *p)
{
	const char *addr = candidate(p->m, p->cand), *node;

	if (addr == NULL) {
		struct msg *m = p->m;

		pend_free(p);
		deliver_unrouted(C.cf, m);
		return;
	}
	if (!cluster_up()) {
		pend_end(p, MSG_UNAVAILABLE);
		return;
	}
	if (C.later != NULL && later_has(addr)) {
		later_add(p);
		return;
	}
	node = owner_of(addr);
	snprintf(p->via, sizeof(p->via), "%s", node);
	outbox_add(addr, node, p);
}

/*
 * Whether p's address, which the node p went to does not have, has been
 * claimed by another since (the claim moved while p was on its way): that
 * one is asked then, a few times at most.
 */
static bool
pend_owner_moved(struct pend *p)
{
	const char *addr = candidate(p->m, p->cand);

	if (addr == NULL || p->tries >= 3 ||
	    strcmp(owner_of(addr), p->via) == 0)
		return false;
	p->tries++;
	return true;
}

/*
 * Whether the node that claimed p's address, which said it has no such
 * address (or could not be reached), may just not have taken it yet: its
 * claim is in the claims' bucket, and other nodes hear of it, before the
 * node has its answer from the bucket and takes the address. A claim is
 * given request_timeout from when this node heard of it.
 */
static bool
pend_owner_settling(const struct pend *p)
{
	const char *addr = candidate(p->m, p->cand);
	const struct owner *o;

	if (addr == NULL || p->via[0] == '\0' ||
	    (o = *owner_slot(addr)) == NULL || strcmp(o->node, p->via) != 0)
		return false;
	return mono_ms() - o->since_ms <
	    (uint64_t)C.cf->cluster.request_timeout * 1000;
}

static void
send_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		msg_free(m);
		return;
	}
	pend_try(pend_new(m));
}

void
cluster_send(struct reactor_batch *b, struct msg *m)
{
	cluster_post_msg(b, m, send_task);
}

/* What another node said of request req (nobody: no node has it). */
static void
pend_verdict(uint64_t req, bool nobody, enum msg_verdict v)
{
	struct pend *p = *pend_slot(req);

	/* Else it timed out: the sender had its answer. */
	if (p == NULL)
		return;
	/* Nobody has that address (or not any more): the next one. */
	if (nobody || v == MSG_NO_ROUTE) {
		pend_unlink(p);
		if (pend_owner_settling(p)) {
			later_add(p);
			return;
		}
		if (!pend_owner_moved(p)) {
			p->cand++;
			p->tries = 0;
		}
		pend_try(p);
	} else {
		pend_finish(p, v);
	}
}

/*
 * Only verdicts a sender may hear; anything else is a failure. (Over
 * max_parts is one: a refusal for good, as on one node, not a 503.)
 */
static enum msg_verdict
verdict_of(uint8_t b)
{
	if ((b >= MSG_OK && b <= MSG_UNAVAILABLE && b != MSG_STORE) ||
	    b == MSG_TOO_LONG)
		return (enum msg_verdict)b;
	return MSG_UNAVAILABLE;
}

void
cluster_verdict_task(void *owner, void *arg, enum mailbox_status st)
{
	struct verdict_note *vn = arg;
	uint64_t req;
	uint8_t v;

	(void)owner;
	if (st == MAILBOX_RUN && vn->nobody) {
		for (uint64_t i = 0; i < vn->count; i++)
			pend_verdict(vn->first + i, true, MSG_NO_ROUTE);
	} else if (st == MAILBOX_RUN) {
		for (size_t i = 0; i < vn->n; i++) {
			cluster_verdict_get(vn->data, i, &req, &v);
			pend_verdict(req, false, verdict_of(v));
		}
	}
	free(vn);
}

/* This batch's verdicts for node: found, or made empty. */
static struct verdicts *
verdicts_for(const char *node)
{
	struct verdicts *vb;

	for (vb = C.vlist; vb != NULL; vb = vb->next)
		if (strcmp(vb->node, node) == 0)
			return vb;
	vb = xcalloc(1, sizeof(*vb));
	snprintf(vb->node, sizeof(vb->node), "%s", node);
	vb->next = C.vlist;
	C.vlist = vb;
	return vb;
}

/* Sends what vb holds, if anything, and empties it. */
static void
verdicts_send(struct verdicts *vb)
{
	char subj[SUBJECT_MAX];
	natsStatus s;

	if (vb->len == 0)
		return;
	snprintf(subj, sizeof(subj), "%s.r.%s.v", C.prefix, vb->node);
	if (C.nc != NULL && (s = natsConnection_Publish(C.nc, subj, vb->buf,
	    (int)vb->len)) != NATS_OK)
		cluster_note_error("verdict", s);
	vb->len = 0;
}

/* Queues the verdict of request req for node. */
void
cluster_verdicts_add(const char *node, uint64_t req,
    enum msg_verdict v)
{
	struct verdicts *vb = verdicts_for(node);

	if (vb->len + CLUSTER_VERDICT_SIZE > VERDICTS_BYTES)
		verdicts_send(vb);
	if (vb->len + CLUSTER_VERDICT_SIZE > vb->cap) {
		vb->cap = vb->cap == 0 ? 1024 : vb->cap * 2;
		vb->buf = xrealloc(vb->buf, vb->cap);
	}
	if (vb->len == 0)
		vb->len = cluster_verdicts_head(vb->buf);
	vb->len += cluster_verdict_put(req, (uint8_t)v, vb->buf + vb->len);
}

/* Every batch of verdicts, sent (when send) and gone. */
static void
verdicts_flush(bool send)
{
	struct verdicts *vb;

	while ((vb = C.vlist) != NULL) {
		C.vlist = vb->next;
		if (send)
			verdicts_send(vb);
		free(vb->buf);
		free(vb);
	}
}

void
cluster_send_flush(bool send)
{
	outbox_flush(send);
	verdicts_flush(send);
}

void
cluster_send_expire(uint64_t now)
{
	while (C.oldest != NULL && C.oldest->deadline_ms <= now)
		pend_finish(C.oldest, MSG_UNAVAILABLE);
	while (C.held_oldest != NULL && C.held_oldest->deadline_ms <= now)
		pend_finish(C.held_oldest, MSG_UNAVAILABLE);
}

void
cluster_send_later(void)
{
	struct pend *p = C.later, *next;

	/* (Each goes on, or back to a fresh list, in order.) */
	C.later = NULL;
	for (; p != NULL; p = next) {
		next = p->qnext;
		pend_try(p);
	}
}

void
cluster_send_stop(void)
{
	struct pend *p;

	/* Whoever still waits hears a temporary error. */
	cluster_send_flush(false);
	while ((p = C.later) != NULL) {
		C.later = p->qnext;
		pend_end(p, MSG_UNAVAILABLE);
	}
	while (C.oldest != NULL)
		pend_finish(C.oldest, MSG_UNAVAILABLE);
	while (C.held_oldest != NULL)
		pend_finish(C.held_oldest, MSG_UNAVAILABLE);
	while (C.spare != NULL) {
		struct pend *p = C.spare;

		C.spare = p->hnext;
		free(p);
	}
	C.nspare = 0;
}

