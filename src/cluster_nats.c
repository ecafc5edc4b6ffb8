/*
 * cluster_nats.c: the cluster thread and its NATS connection. See
 * cluster.h for what goes over the wire, docs/architecture.md for why.
 *
 * Three kinds of thread meet here:
 *   - reactors post sends, verdicts, claims and address changes to the
 *     cluster thread (service_post), and never call libnats;
 *   - libnats's threads (its message delivery pool and its connection
 *     thread) run the callbacks below, which only decode and post: a
 *     message for one of our addresses straight to its reactor, a verdict
 *     to the cluster thread;
 *   - the cluster thread owns the connection, the KV handles, the table
 *     of requests awaiting a verdict and the subscriptions, and is the
 *     only one that publishes, subscribes or talks to JetStream (whose
 *     calls wait, at most request_timeout, on this thread alone).
 */
#include "cluster.h"

#include <ctype.h>
#include <nats/nats.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_seen.h"
#include "cluster_wire.h"
#include "config.h"
#include "conn.h"
#include "deliver.h"
#include "log.h"
#include "reactor.h"
#include "service.h"
#include "store.h"
#include "util.h"

#define CLUSTER_TICK_MS		100
#define CLUSTER_QUEUE		"erd"	/* every node's queue group */
#define PEND_BUCKETS		16384	/* a power of two */
#define SUB_BUCKETS		4096	/* a power of two */
#define OUT_BUCKETS		1024	/* a power of two */
/* A bundle, or a batch of verdicts, is sent once it is this big. */
#define BUNDLE_BYTES		(64 * 1024)
#define VERDICTS_BYTES		(64 * 1024)
/* Spare struct pends kept for reuse, at most. */
#define PEND_SPARE		4096
#define SUBJECT_MAX		(CLUSTER_PREFIX_MAX + CLUSTER_TOKEN_MAX + 64)
/* Runs call while s is still NATS_OK. */
#define IFOK_NATS(s, call)	do { if ((s) == NATS_OK) (s) = (call); } while (0)
/* libnats's delivery threads: a subscription keeps to one, so in order. */
#define DELIVERY_THREADS	2
/*
 * Message ids taken from other nodes that a node remembers (the newest;
 * about 1.3 MiB): a copy of one of them is not delivered again.
 */
#define SEEN_IDS		65536
/* How long a node asks whether another one has its name, at most. */
#define NAME_PROBE_MS		1000

/* A message for another node: in an outbox, then awaiting its verdict. */
struct pend {
	struct pend *hnext;		/* by request id */
	struct pend *prev, *next;	/* by deadline (sent order) */
	struct pend *qnext;		/* in its outbox */
	uint64_t req;
	uint64_t deadline_ms;
	unsigned cand;			/* which address is being tried */
	unsigned tries;			/* its owners tried, after the first */
	struct msg *m;
	char	via[CLUSTER_NODE_MAX + 1];	/* the owner tried; "" none */
};

/* One address held here, and its subscription. */
struct csub {
	struct csub *next;
	natsSubscription *sub;
	char	addr[ROUTE_ADDR_MAX + 1];
};

/*
 * An address some node claimed, and which node, as the claims' bucket
 * last said (the cluster thread's copy, for sending).
 */
struct owner {
	struct owner *next;
	char	addr[ROUTE_ADDR_MAX + 1];
	char	node[CLUSTER_NODE_MAX + 1];
};

/* An address this node claimed, as the key-value thread knows it. */
struct claimed {
	struct claimed *next;
	bool	leaving;		/* given up here, not yet deleted there */
	char	addr[ROUTE_ADDR_MAX + 1];
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

/*
 * Verdicts for our requests, as they came (cluster_verdict_get), or
 * NATS's "no responders" for the count requests of a bundle from first.
 */
struct verdict_note {
	struct mailbox_task task;
	bool	nobody;
	uint64_t first, count;
	size_t	n;
	uint8_t	data[];
};

/* An address whose holders changed, or a claim given up. */
struct addr_note {
	struct mailbox_task task;
	char	addr[ROUTE_ADDR_MAX + 1];
};

/* What the claims' bucket says of addr now: node's ("" nobody's). */
struct owner_note {
	struct mailbox_task task;
	char	addr[ROUTE_ADDR_MAX + 1];
	char	node[CLUSTER_NODE_MAX + 1];
};

struct cluster {
	struct service *svc;
	struct service *kvsvc;		/* "cluster-kv": JetStream's calls */
	atomic_bool on;
	atomic_bool up;
	/* Counters for the stats line; written by any thread. */
	atomic_uint_fast64_t to_nodes;
	atomic_uint_fast64_t from_nodes;
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t nodes_seen;
	atomic_uint_fast64_t foreign_at_ms;	/* said "another version" */
	/* Until then no other node can have taken our claims lawfully. */
	atomic_uint_fast64_t trust_until_ms;
	pthread_mutex_t url_lock;
	char	url[256];		/* the server we use; "" down */
	char	why[256];		/* libnats's last reason, while down */
	atomic_bool gave_up;		/* libnats closed the connection */
	atomic_bool gave_up_said;
	atomic_bool outcast;		/* another node has our name */
	/* Ids lately taken from other nodes; libnats's and ours. */
	pthread_mutex_t seen_lock;
	struct cluster_seen *seen;
	atomic_bool stopping;
	/* Set before the thread starts; read-only after. */
	char	node[CLUSTER_NODE_MAX + 1];
	char	me[CLUSTER_NODE_MAX + 40];	/* "<node> <instance>" */
	char	instance[24];
	/* Made before the threads start; libnats's, after. */
	natsOptions *opts;
	natsConnection *nc;
	/*
	 * The key-value thread's alone: JetStream's calls wait (at most
	 * request_timeout), so they have a thread of their own and never
	 * hold up messages.
	 */
	struct config *kvcf;
	jsCtx	*js;
	kvStore	*claims;
	kvStore	*nodes;
	kvStore	*slots;			/* which node's ids end in what */
	natsSubscription *watch;	/* every change of the claims */
	uint64_t watch_at_ms;		/* it failed: again not before */
	unsigned makers;		/* reactors; the store is one more */
	bool	slots_done;		/* this run's slots are ours */
	/* LOGINs claimed and subscribed to, answered after a flush. */
	struct cluster_claim **logins;
	size_t	nlogins, logins_cap;
	uint64_t slots_at_ms;		/* JetStream failed: not before */
	bool	kv_failed;		/* said once per connection */
	uint64_t kv_retry_ms;		/* JetStream failed: not before */
	bool	beat_ok;		/* our heartbeat is there, as far as known */
	uint64_t beat_at_ms;
	struct claimed *claimed[SUB_BUCKETS];
	unsigned nleaving;		/* claims given up, still to delete */
	uint64_t leave_at_ms;		/* try those again, not before */
	bool	was_down;		/* lost the connection since the last check */
	uint64_t beat_last_ms;		/* the last heartbeat that went through */
	/* The cluster thread's alone: */
	struct config *cf;
	natsSubscription *inbox;
	natsSubscription *notices;	/* <prefix>.h.*: binds elsewhere */
	natsSubscription *named;	/* <prefix>.n.<node>: name taken? */
	natsSubscription *named_answer;	/* ... its answers to us */
	natsSubscription *mine;		/* <prefix>.o.<node>.*: our claims' */
	struct owner *owners[SUB_BUCKETS];	/* who claimed what */
	char	prefix[CLUSTER_PREFIX_MAX + 1];	/* the one subscribed with */
	char	linked_url[256];	/* the server last logged; "" down */
	uint64_t next_req;		/* from a random start (cluster_open) */
	struct pend *pend[PEND_BUCKETS];
	struct pend *oldest, *newest;
	struct pend *spare;		/* for reuse, by hnext */
	unsigned nspare;
	struct csub *subs[SUB_BUCKETS];
	struct outbox *out[OUT_BUCKETS];
	struct outbox *out_first, *out_last;	/* this batch's */
	struct verdicts *vlist;			/* this batch's */
	struct reactor_batch answers;		/* verdicts for our reactors */
	uint8_t	*buf;			/* a bundle */
	size_t	bufcap;
};

static struct cluster C = {
	.url_lock = PTHREAD_MUTEX_INITIALIZER,
	.seen_lock = PTHREAD_MUTEX_INITIALIZER,
};


static uint32_t
str_hash(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static void
note_error(const char *what, natsStatus s)
{
	atomic_fetch_add(&C.errors, 1);
	log_debug("cluster: %s: %s", what, natsStatus_GetText(s));
}

bool
cluster_on(void)
{
	return atomic_load_explicit(&C.on, memory_order_relaxed);
}

bool
cluster_up(void)
{
	return atomic_load_explicit(&C.up, memory_order_relaxed);
}

/* ---- subjects and keys ------------------------------------------------ */

/*
 * Where messages for addr go: "<prefix>.o.<node>.<token>" when node
 * claimed it, else "<prefix>.a.<token>", to whichever nodes hold it.
 */
static void
addr_subject(char *out, size_t n, const char *addr, const char *node)
{
	char tok[CLUSTER_TOKEN_MAX + 1];

	cluster_token_encode(addr, tok);
	if (node != NULL && node[0] != '\0')
		snprintf(out, n, "%s.o.%s.%s", C.prefix, node, tok);
	else
		snprintf(out, n, "%s.a.%s", C.prefix, tok);
}

/* A bucket's name: the prefix with its dots as underscores, and what. */
static void
bucket_name(char *out, size_t n, const char *what)
{
	snprintf(out, n, "%s-%s", C.kvcf->cluster.subject_prefix, what);
	for (char *p = out; *p != '\0'; p++)
		if (*p == '.')
			*p = '_';
}

/* The stream of bucket what, and the subject of key in it. */
static void
kv_names(const char *what, const char *key, char *stream, size_t sn,
    char *subj, size_t n)
{
	char b[CLUSTER_PREFIX_MAX + 16];

	bucket_name(b, sizeof(b), what);
	snprintf(stream, sn, "KV_%s", b);
	snprintf(subj, n, "$KV.%s.%s", b, key);
}

/* ---- requests awaiting a verdict ------------------------------------- */

static struct pend **
pend_slot(uint64_t req)
{
	struct pend **pp = &C.pend[req & (PEND_BUCKETS - 1)];

	while (*pp != NULL && (*pp)->req != req)
		pp = &(*pp)->hnext;
	return pp;
}

static void
pend_unlink(struct pend *p)
{
	struct pend **pp = pend_slot(p->req);

	if (*pp == p)
		*pp = p->hnext;
	if (p->prev != NULL)
		p->prev->next = p->next;
	else if (C.oldest == p)
		C.oldest = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	else if (C.newest == p)
		C.newest = p->prev;
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
	p->prev = C.newest;
	p->next = NULL;
	if (C.newest != NULL)
		C.newest->next = p;
	else
		C.oldest = p;
	C.newest = p;
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
	struct owner **pp = &C.owners[str_hash(addr) & (SUB_BUCKETS - 1)];

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
	snprintf(o->node, sizeof(o->node), "%s", node);
}

static void
owners_clear(void)
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
	const char *a;

	for (p = C.oldest; p != NULL; p = next) {
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
	for (p = head; p != NULL; p = next) {
		next = p->qnext;
		pend_try(p);
	}
}

static void
owner_task(void *owner, void *arg, enum mailbox_status st)
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
	uint64_t first = C.next_req + 1, deadline = mono_ms() +
	    (uint64_t)C.cf->cluster.request_timeout * 1000;
	struct pend *p, *next;
	natsStatus s = NATS_CONNECTION_DISCONNECTED;
	size_t n = cluster_bundle_head(buf);

	for (p = ob->head; p != NULL; p = p->qnext) {
		pend_link(p, deadline);
		n += cluster_bundle_put(p->m, buf + n);
	}
	addr_subject(subj, sizeof(subj), ob->addr, ob->node);
	snprintf(reply, sizeof(reply), "%s.r.%s.%llu.%u", C.prefix, C.node,
	    (unsigned long long)first, ob->count);
	/* Buffered by libnats: a full buffer is a refusal, not a wait. */
	if (!cluster_up() || (s = natsConnection_PublishRequest(C.nc, subj,
	    reply, buf, (int)n)) != NATS_OK) {
		note_error("publish", s);
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

/* Queues p for addr at node ("" any), in this batch's bundle for it. */
static void
outbox_add(const char *addr, const char *node, struct pend *p)
{
	struct outbox **pp = &C.out[str_hash(addr) & (OUT_BUCKETS - 1)], *ob;
	size_t need = cluster_bundle_item_size(p->m);

	while (*pp != NULL && (strcmp((*pp)->addr, addr) != 0 ||
	    strcmp((*pp)->node, node) != 0))
		pp = &(*pp)->hnext;
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
		C.out[str_hash(ob->addr) & (OUT_BUCKETS - 1)] = NULL;
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

static void
send_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		free(m);
		return;
	}
	pend_try(pend_new(m));
}

void
cluster_send(struct reactor_batch *b, struct msg *m)
{
	m->task.fn = send_task;
	m->task.arg = m;
	if (b != NULL)
		reactor_batch_add_service(b, C.svc, &m->task);
	else
		service_post(C.svc, &m->task);
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
		if (!pend_owner_moved(p)) {
			p->cand++;
			p->tries = 0;
		}
		pend_try(p);
	} else {
		pend_finish(p, v);
	}
}

/* Only verdicts a sender may hear; anything else is a failure. */
static enum msg_verdict
verdict_of(uint8_t b)
{
	if (b >= MSG_OK && b <= MSG_UNAVAILABLE && b != MSG_STORE)
		return (enum msg_verdict)b;
	return MSG_UNAVAILABLE;
}

static void
verdict_task(void *owner, void *arg, enum mailbox_status st)
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
		note_error("verdict", s);
	vb->len = 0;
}

/* Queues the verdict of request req for node. */
static void
verdicts_add(const char *node, uint64_t req, enum msg_verdict v)
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

/* The end of a batch of tasks: what it queued for other nodes goes. */
static void
cluster_after_batch(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	outbox_flush(true);
	verdicts_flush(true);
	reactor_batch_publish(&C.answers, s);
}

/* Ends what waited past request_timeout. */
static void
pend_expire(uint64_t now)
{
	while (C.oldest != NULL && C.oldest->deadline_ms <= now)
		pend_finish(C.oldest, MSG_UNAVAILABLE);
}

/* ---- libnats's threads: decode and post, nothing more ---------------- */

/*
 * The numbers in the last two tokens of s, "...<a>.<b>", and the token
 * before them in node (MSG_NODE_MAX + 1 bytes) when it is not NULL.
 * false unless s has them.
 */
static bool
last_numbers(const char *s, char *node, uint64_t *a, uint64_t *b)
{
	const char *db = strrchr(s, '.'), *da, *dn;
	char *end;

	if (db == NULL || db == s)
		return false;
	for (da = db - 1; da > s && *da != '.'; da--)
		;
	if (*da != '.' || da == s)
		return false;
	*a = strtoull(da + 1, &end, 10);
	if (end != db || da + 1 == db)
		return false;
	*b = strtoull(db + 1, &end, 10);
	if (*end != '\0' || db[1] == '\0')
		return false;
	if (node == NULL)
		return true;
	for (dn = da - 1; dn > s && dn[-1] != '.'; dn--)
		;
	if (da == dn || (size_t)(da - dn) > MSG_NODE_MAX)
		return false;
	memcpy(node, dn, (size_t)(da - dn));
	node[da - dn] = '\0';
	return true;
}

/*
 * When the n bytes at d, from who, are in another version's wire format:
 * says so, at most once a minute (libnats's threads, any of them). Such
 * traffic is dropped like garbage; the log says why.
 */
static void
warn_foreign(const char *who, const void *d, size_t n)
{
	unsigned f = cluster_wire_foreign(d, n);
	uint64_t now = mono_ms() + 1, last;

	if (f == 0)
		return;
	last = atomic_load(&C.foreign_at_ms);
	if ((last != 0 && now - last < 60000) ||
	    !atomic_compare_exchange_strong(&C.foreign_at_ms, &last, now))
		return;
	log_warnx("cluster: %s sends wire format 0x%02X, this node reads "
	    "0x%02X: its traffic is dropped; run the same version of "
	    "echorouterd on every node", who, f, cluster_wire_format(f));
}

/*
 * On "<prefix>.r.<node>.v" a batch of verdicts, on "<prefix>.r.<node>.
 * <first>.<count>" NATS's "no responders" for a bundle: to the cluster
 * thread, which holds the requests.
 */
static void
on_verdict(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	const uint8_t *d = (const uint8_t *)natsMsg_GetData(msg);
	size_t n = (size_t)natsMsg_GetDataLength(msg);
	struct verdict_note *vn;
	uint64_t first, count;
	long k;

	(void)nc;
	(void)sub;
	(void)closure;
	if (natsMsg_IsNoResponders(msg)) {
		/* (Anyone may publish here: no count a bundle cannot have.) */
		if (!last_numbers(natsMsg_GetSubject(msg), NULL, &first,
		    &count) || count == 0 || count > CLUSTER_BUNDLE_MAX)
			goto bad;
		vn = xcalloc(1, sizeof(*vn));
		vn->nobody = true;
		vn->first = first;
		vn->count = count;
	} else {
		if ((k = cluster_verdicts_count(d, n)) <= 0)
			goto bad;
		vn = xmalloc(sizeof(*vn) + n);
		vn->nobody = false;
		vn->n = (size_t)k;
		memcpy(vn->data, d, n);
	}
	natsMsg_Destroy(msg);
	vn->task.fn = verdict_task;
	vn->task.arg = vn;
	service_post(C.svc, &vn->task);
	return;
bad:
	atomic_fetch_add(&C.errors, 1);
	warn_foreign("a node", d, n);
	log_debug("cluster: dropped a malformed verdict on %s",
	    natsMsg_GetSubject(msg));
	natsMsg_Destroy(msg);
}

/*
 * Hands the k messages of a bundle for addr to the reactor of addr's owner
 * here, in one push; with nobody here, each hears "no route", and while
 * this node cannot be sure its claim on addr is still its own, that the
 * cluster is unavailable.
 */
static void
bundle_deliver(const char *addr, struct msg **ms, size_t k)
{
	enum msg_verdict v = MSG_NO_ROUTE;
	struct route_owner o;
	struct reactor *r;

	/*
	 * Silent past claim_ttl (frozen, cut off): another node may have
	 * taken a LOGIN's address lawfully meanwhile, and its session here is
	 * stale until claims_recheck closes it. Nothing for it till then.
	 */
	if (mono_ms() >= atomic_load(&C.trust_until_ms) &&
	    route_is_claimed(addr))
		v = MSG_UNAVAILABLE;
	else if (route_lookup(addr, &o) && o.kind == ROUTE_OWNER_CONN &&
	    (r = reactor_get(o.conn.reactor)) != NULL) {
		/* Newest first: ms[k - 1] .. ms[0]. */
		for (size_t i = 0; i < k; i++) {
			ms[i]->recipient = o;
			ms[i]->task.fn = deliver_node_task;
			ms[i]->task.arg = ms[i];
			ms[i]->task.next = i > 0 ? &ms[i - 1]->task : NULL;
		}
		reactor_post_chain(r, &ms[k - 1]->task, &ms[0]->task);
		return;
	}
	for (size_t i = 0; i < k; i++) {
		ms[i]->verdict = v;
		deliver_answer(ms[i]);
	}
}

static void copy_answer_task(void *owner, void *arg,
	    enum mailbox_status st);

/*
 * Whether m (from another node, its sender set) is a copy of a message
 * this node took or is taking: the same id, which names the node that
 * made it. Anyone allowed to publish on the cluster's subjects could send
 * one again, under another sender's name. A copy is answered as its
 * original was (or, still pending, with a temporary error) and freed; a
 * new one is filed until its verdict.
 */
static bool
is_copy(struct msg *m)
{
	enum cluster_seen_result r;

	pthread_mutex_lock(&C.seen_lock);
	r = cluster_seen_add(C.seen, m->id);
	pthread_mutex_unlock(&C.seen_lock);
	if (r == CLUSTER_SEEN_NEW)
		return false;
	atomic_fetch_add(&C.errors, 1);
	log_debug("cluster: dropped a copy of message %llu from node %s",
	    (unsigned long long)m->id, m->remote_node[0] != '\0' ?
	    m->remote_node : "(unnamed)");
	if (m->flags & MSG_F_NO_VERDICT) {
		free(m);
		return true;
	}
	m->verdict = r == CLUSTER_SEEN_TAKEN ? MSG_OK :
	    MSG_UNAVAILABLE;
	m->task.fn = copy_answer_task;
	m->task.arg = m;
	service_post(C.svc, &m->task);
	return true;
}

/* The k messages of a bundle without the copies (freed); how many stay. */
static size_t
drop_copies(struct msg **ms, size_t k)
{
	size_t n = 0;

	for (size_t i = 0; i < k; i++)
		if (!is_copy(ms[i]))
			ms[n++] = ms[i];
	return n;
}

/*
 * A bundle of messages for an address held here: to its owner's reactor,
 * together. Each hears its verdict under its own request id, the bundle's
 * first plus its place in it.
 */
static void
on_message(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	const char *subj = natsMsg_GetSubject(msg), *tok = strrchr(subj, '.');
	const char *reply = natsMsg_GetReply(msg);
	char addr[ROUTE_ADDR_MAX + 1], node[MSG_NODE_MAX + 1];
	struct msg *ms[CLUSTER_BUNDLE_MAX];
	uint64_t first = 0, count = 0;
	bool answer = reply != NULL && reply[0] != '\0';
	size_t k;

	(void)nc;
	(void)sub;
	(void)closure;
	k = cluster_bundle_decode((const uint8_t *)natsMsg_GetData(msg),
	    (size_t)natsMsg_GetDataLength(msg), ms, CLUSTER_BUNDLE_MAX);
	if (k == 0 || tok == NULL ||
	    !cluster_token_decode(tok + 1, strlen(tok + 1), addr) ||
	    (answer && (!last_numbers(reply, node, &first, &count) ||
	    count != k))) {
		atomic_fetch_add(&C.errors, 1);
		if (k == 0) {
			char who[MSG_NODE_MAX + 8] = "a node";

			if (answer && last_numbers(reply, node, &first, &count))
				snprintf(who, sizeof(who), "node %s", node);
			warn_foreign(who, natsMsg_GetData(msg),
			    (size_t)natsMsg_GetDataLength(msg));
		}
		log_debug("cluster: dropped a malformed message on %s", subj);
		while (k > 0)
			free(ms[--k]);
		natsMsg_Destroy(msg);
		return;
	}
	natsMsg_Destroy(msg);
	for (size_t i = 0; i < k; i++) {
		if (answer) {
			ms[i]->sender_kind = MSG_KIND_NODE;
			memcpy(ms[i]->remote_node, node, sizeof(node));
			ms[i]->remote_req = first + i;
		} else {
			ms[i]->sender_kind = MSG_KIND_NONE;
			ms[i]->flags |= MSG_F_NO_VERDICT;
		}
	}
	if ((k = drop_copies(ms, k)) == 0)
		return;
	atomic_fetch_add_explicit(&C.from_nodes, k, memory_order_relaxed);
	bundle_deliver(addr, ms, k);
}

/* Kept as shown (log, stats, STATUS=): never a password from servers. */
static void
set_url(const char *url)
{
	pthread_mutex_lock(&C.url_lock);
	cluster_url_shown(url, C.url, sizeof(C.url));
	pthread_mutex_unlock(&C.url_lock);
}

static void
set_why(const char *why)
{
	pthread_mutex_lock(&C.url_lock);
	snprintf(C.why, sizeof(C.why), "%s", why);
	pthread_mutex_unlock(&C.url_lock);
}

static void
get_why(char *out, size_t n)
{
	pthread_mutex_lock(&C.url_lock);
	snprintf(out, n, "%s", C.why[0] != '\0' ? C.why : "no reason given");
	pthread_mutex_unlock(&C.url_lock);
}

/*
 * Why libnats's last call on this thread failed with s, in its own words
 * ("Authorization Violation"), without the "(conn.c:1905): " before them.
 */
static void
nats_why(natsStatus s, char *out, size_t n)
{
	const char *t = nats_GetLastError(NULL), *p;

	if (t == NULL || t[0] == '\0')
		t = natsStatus_GetText(s);
	else if (t[0] == '(' && (p = strstr(t, "): ")) != NULL)
		t = p + 3;
	snprintf(out, n, "%s", t);
}

static void link_task(void *owner, void *arg, enum mailbox_status st);

/* The connection came up or went down: the cluster thread sees to it. */
static void
on_link(natsConnection *nc, void *closure)
{
	char url[256] = "";
	natsConnStatus cs = natsConnection_Status(nc);

	(void)closure;
	if (cs == NATS_CONN_STATUS_CONNECTED &&
	    natsConnection_GetConnectedUrl(nc, url, sizeof(url)) == NATS_OK) {
		set_url(url);
		set_why("");
		atomic_store(&C.up, true);
	} else {
		set_url("");
		atomic_store(&C.up, false);
		if (cs == NATS_CONN_STATUS_CLOSED)
			atomic_store(&C.gave_up, true);
	}
	service_post_fn(C.svc, link_task, NULL);
}

static void
on_nats_error(natsConnection *nc, natsSubscription *sub, natsStatus err,
    void *closure)
{
	const char *why = NULL;

	(void)sub;
	(void)closure;
	/*
	 * Refused by a server (a wrong password, say): the reason, which
	 * libnats keeps only until its next attempt. Twice in a row from one
	 * server and it closes the connection (link_task says so).
	 */
	if (err == NATS_CONNECTION_AUTH_FAILED) {
		natsConnection_GetLastError(nc, &why);
		why = why != NULL && why[0] != '\0' ? why :
		    natsStatus_GetText(err);
		set_why(why);
		log_warnx("cluster: a NATS server refused this node: %s", why);
	}
	/* Slow consumer and the like: the senders time out and hear 503. */
	note_error("async error", err);
}

/* ---- verdicts for other nodes ---------------------------------------- */

static void
answer_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	(void)owner;
	/*
	 * Settled before the verdict goes: refused here, the sender may try
	 * the same message again (its next address), and it is new then.
	 */
	pthread_mutex_lock(&C.seen_lock);
	cluster_seen_settle(C.seen, m->id, m->verdict == MSG_OK);
	pthread_mutex_unlock(&C.seen_lock);
	if (st == MAILBOX_RUN)
		verdicts_add(m->remote_node, m->remote_req, m->verdict);
	free(m);
}

/* A copy's answer: the verdict only; its original's entry stays as is. */
static void
copy_answer_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	(void)owner;
	if (st == MAILBOX_RUN)
		verdicts_add(m->remote_node, m->remote_req, m->verdict);
	free(m);
}

void
cluster_answer(struct reactor_batch *b, struct msg *m)
{
	m->task.fn = answer_task;
	m->task.arg = m;
	if (b != NULL)
		reactor_batch_add_service(b, C.svc, &m->task);
	else
		service_post(C.svc, &m->task);
}

static void
node_take(struct reactor_batch *b, struct msg *m, const char *to)
{
	(void)to;	/* the cluster resolves m->to itself */
	cluster_send(b, m);
}

/* Other nodes as a kind of destination and origin (deliver_register). */
static const struct deliver_kind_ops node_kind = {
	.name = "node",
	.on = cluster_on,
	.up = cluster_up,
	.take = node_take,
	.answer = cluster_answer,
};

/* ---- subscriptions: one per address held here ------------------------ */

static struct csub **
sub_slot(const char *addr)
{
	struct csub **pp = &C.subs[str_hash(addr) & (SUB_BUCKETS - 1)];

	while (*pp != NULL && strcmp((*pp)->addr, addr) != 0)
		pp = &(*pp)->next;
	return pp;
}

static natsSubscription *
subscribe_addr(const char *addr)
{
	char subj[SUBJECT_MAX];
	natsSubscription *sub = NULL;
	natsStatus s;

	addr_subject(subj, sizeof(subj), addr, NULL);
	if ((s = natsConnection_QueueSubscribe(&sub, C.nc, subj, CLUSTER_QUEUE,
	    on_message, NULL)) != NATS_OK) {
		note_error("subscribe", s);
		return NULL;
	}
	return sub;
}

static void
unsubscribe(natsSubscription *sub)
{
	if (sub == NULL)
		return;
	natsSubscription_Unsubscribe(sub);
	natsSubscription_Destroy(sub);
}

/*
 * "<prefix>.h.<token>": addr is held here now. A node whose store keeps
 * messages for it sends them here (store_held_elsewhere). Best effort:
 * the stores also try now and then by themselves.
 */
static void
announce(const char *addr)
{
	char subj[SUBJECT_MAX], tok[CLUSTER_TOKEN_MAX + 1];
	natsStatus s;

	if (!store_on() || !cluster_up())
		return;
	cluster_token_encode(addr, tok);
	snprintf(subj, sizeof(subj), "%s.h.%s", C.prefix, tok);
	if ((s = natsConnection_Publish(C.nc, subj, NULL, 0)) != NATS_OK)
		note_error("publish a notice", s);
}

/* libnats's thread: another node holds an address now. */
static void
on_notice(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	const char *tok = strrchr(natsMsg_GetSubject(msg), '.');
	char addr[ROUTE_ADDR_MAX + 1];

	(void)nc;
	(void)sub;
	(void)closure;
	if (tok != NULL && cluster_token_decode(tok + 1, strlen(tok + 1), addr))
		store_held_elsewhere(addr);
	natsMsg_Destroy(msg);
}

/* Subscribes to addr while someone here holds it, and only then. */
static void
sub_reconcile(const char *addr)
{
	struct csub **pp = sub_slot(addr), *cs = *pp;
	bool held = route_is_held(addr);

	if (held && cs == NULL) {
		cs = xcalloc(1, sizeof(*cs));
		snprintf(cs->addr, sizeof(cs->addr), "%s", addr);
		cs->sub = subscribe_addr(addr);
		*pp = cs;
		announce(addr);
	} else if (!held && cs != NULL) {
		*pp = cs->next;
		unsubscribe(cs->sub);
		free(cs);
	} else if (held && cs->sub == NULL) {
		cs->sub = subscribe_addr(addr);	/* it failed before */
	}
}

static void
watch_task(void *owner, void *arg, enum mailbox_status st)
{
	struct addr_note *an = arg;

	(void)owner;
	if (st == MAILBOX_RUN)
		sub_reconcile(an->addr);
	free(an);
}

/* route.c's watcher: any thread that changed the table. */
static void
on_route_change(const char *addr)
{
	struct addr_note *an = xcalloc(1, sizeof(*an));

	snprintf(an->addr, sizeof(an->addr), "%s", addr);
	an->task.fn = watch_task;
	an->task.arg = an;
	service_post(C.svc, &an->task);
}

/* ---- one node per name --------------------------------------------- */

/*
 * Two processes with one node name would share its id slots, claims and
 * verdicts. Each node answers on "<prefix>.n.<node>" with its instance,
 * to "<prefix>.n.<node>.<instance>" of whoever asks. A node asks when it
 * starts (and waits for the answer) and whenever it connects again; one
 * that hears another instance stays out.
 */

/* A question from a node of our name, for the cluster thread. */
struct name_note {
	struct mailbox_task task;
	char	reply[SUBJECT_MAX];
	char	other[sizeof(C.instance)];
};

/* The instance in n bytes at d, if it reads as one (hex), into out. */
static bool
instance_of(const char *d, int n, char *out, size_t cap)
{
	if (n <= 0 || (size_t)n >= cap)
		return false;
	for (int i = 0; i < n; i++)
		if (!isxdigit((unsigned char)d[i]))
			return false;
	memcpy(out, d, (size_t)n);
	out[n] = '\0';
	return true;
}

/* The cluster thread: answers, and says so once per question. */
static void
name_task(void *owner, void *arg, enum mailbox_status st)
{
	struct name_note *nn = arg;
	natsStatus s;

	(void)owner;
	if (st == MAILBOX_RUN && !atomic_load(&C.outcast)) {
		log_err("cluster: another process with node name %s (instance "
		    "%s) tried to join: node names must be unique; it stays "
		    "out", C.node, nn->other);
		if ((s = natsConnection_PublishString(C.nc, nn->reply,
		    C.instance)) != NATS_OK)
			note_error("answer a name probe", s);
	}
	free(nn);
}

/* libnats's thread: someone asks whether our name is taken. */
static void
on_name(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	const char *reply = natsMsg_GetReply(msg);
	struct name_note *nn = xcalloc(1, sizeof(*nn));

	(void)nc;
	(void)sub;
	(void)closure;
	if (reply == NULL || strlen(reply) >= sizeof(nn->reply) ||
	    !instance_of(natsMsg_GetData(msg), natsMsg_GetDataLength(msg),
	    nn->other, sizeof(nn->other)) ||
	    strcmp(nn->other, C.instance) == 0) {
		free(nn);
		natsMsg_Destroy(msg);
		return;
	}
	snprintf(nn->reply, sizeof(nn->reply), "%s", reply);
	natsMsg_Destroy(msg);
	nn->task.fn = name_task;
	nn->task.arg = nn;
	service_post(C.svc, &nn->task);
}

/* "<prefix>.n.<node>", and with ".<instance>" after it for answers. */
static void
name_subjects(char *ask, size_t n, char *answer, size_t m)
{
	snprintf(ask, n, "%s.n.%s", C.prefix, C.node);
	snprintf(answer, m, "%s.n.%s.%s", C.prefix, C.node, C.instance);
}

static void stay_out(const char *other);

static void
name_taken_task(void *owner, void *arg, enum mailbox_status st)
{
	struct name_note *nn = arg;

	(void)owner;
	if (st == MAILBOX_RUN && !atomic_load(&C.outcast))
		stay_out(nn->other);
	free(nn);
}

/* libnats's thread: an answer to our question; another instance's, out. */
static void
on_name_answer(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	struct name_note *nn = xcalloc(1, sizeof(*nn));

	(void)nc;
	(void)sub;
	(void)closure;
	if (natsMsg_IsNoResponders(msg) ||
	    !instance_of(natsMsg_GetData(msg), natsMsg_GetDataLength(msg),
	    nn->other, sizeof(nn->other)) ||
	    strcmp(nn->other, C.instance) == 0) {
		free(nn);
		natsMsg_Destroy(msg);
		return;
	}
	natsMsg_Destroy(msg);
	nn->task.fn = name_taken_task;
	nn->task.arg = nn;
	service_post(C.svc, &nn->task);
}

/* Both, made once per prefix (resubscribe_all), as the others are. */
static void
name_subscribe(void)
{
	char ask[SUBJECT_MAX], answer[SUBJECT_MAX + sizeof(C.instance)];
	natsStatus s;

	unsubscribe(C.named);
	unsubscribe(C.named_answer);
	C.named = C.named_answer = NULL;
	name_subjects(ask, sizeof(ask), answer, sizeof(answer));
	if ((s = natsConnection_Subscribe(&C.named, C.nc, ask, on_name,
	    NULL)) != NATS_OK ||
	    (s = natsConnection_Subscribe(&C.named_answer, C.nc, answer,
	    on_name_answer, NULL)) != NATS_OK)
		note_error("subscribe to name probes", s);
}

/* Connected again: asks; an answer from another instance comes later. */
static void
name_ask(void)
{
	char ask[SUBJECT_MAX], answer[SUBJECT_MAX + sizeof(C.instance)];
	natsStatus s;

	name_subjects(ask, sizeof(ask), answer, sizeof(answer));
	if ((s = natsConnection_PublishRequestString(C.nc, ask, answer,
	    C.instance)) != NATS_OK)
		note_error("ask for our name", s);
}

/*
 * At start, before our own subscriptions (ours would hear the question
 * and keep NATS from saying "no responders"): whether no other node has
 * our name. When one answers, its instance is in other. Waits
 * NAME_PROBE_MS at most; no answer in that time is taken for none.
 */
static bool
name_is_free(char *other, size_t n)
{
	char ask[SUBJECT_MAX], answer[SUBJECT_MAX + sizeof(C.instance)];
	natsSubscription *sub = NULL;
	natsMsg *m = NULL;
	natsStatus s;
	bool free_ = true;

	name_subjects(ask, sizeof(ask), answer, sizeof(answer));
	s = natsConnection_SubscribeSync(&sub, C.nc, answer);
	IFOK_NATS(s, natsConnection_PublishRequestString(C.nc, ask, answer,
	    C.instance));
	IFOK_NATS(s, natsSubscription_NextMsg(&m, sub, NAME_PROBE_MS));
	if (s == NATS_OK) {
		if (!instance_of(natsMsg_GetData(m), natsMsg_GetDataLength(m),
		    other, n))
			snprintf(other, n, "unknown");
		free_ = strcmp(other, C.instance) == 0;
	}
	natsMsg_Destroy(m);
	unsubscribe(sub);
	return free_;
}

/* The cluster thread: another node has our name; we leave NATS for good. */
static void
stay_out(const char *other)
{
	char why[128];

	log_err("cluster: node %s is in the cluster already (instance %s): "
	    "node names must be unique; this one stays out of the cluster "
	    "until it restarts, local traffic goes on", C.node, other);
	snprintf(why, sizeof(why), "node name %s taken", C.node);
	set_why(why);
	atomic_store(&C.outcast, true);
	atomic_store(&C.gave_up_said, true);
	C.linked_url[0] = '\0';
	natsConnection_Close(C.nc);
}

/* Every subscription again (a new prefix), and the inbox. */
static void
resubscribe_all(void)
{
	char subj[SUBJECT_MAX];
	natsStatus s;

	unsubscribe(C.inbox);
	C.inbox = NULL;
	snprintf(C.prefix, sizeof(C.prefix), "%s", C.cf->cluster.subject_prefix);
	snprintf(subj, sizeof(subj), "%s.r.%s.>", C.prefix, C.node);
	if ((s = natsConnection_Subscribe(&C.inbox, C.nc, subj, on_verdict,
	    NULL)) != NATS_OK)
		note_error("subscribe to verdicts", s);
	/* What other nodes send to addresses this node claimed. */
	unsubscribe(C.mine);
	C.mine = NULL;
	snprintf(subj, sizeof(subj), "%s.o.%s.*", C.prefix, C.node);
	if ((s = natsConnection_Subscribe(&C.mine, C.nc, subj, on_message,
	    NULL)) != NATS_OK)
		note_error("subscribe to our claims' subject", s);
	unsubscribe(C.notices);
	C.notices = NULL;
	snprintf(subj, sizeof(subj), "%s.h.*", C.prefix);
	if (store_on() && (s = natsConnection_Subscribe(&C.notices, C.nc, subj,
	    on_notice, NULL)) != NATS_OK)
		note_error("subscribe to notices", s);
	name_subscribe();
	for (size_t i = 0; i < SUB_BUCKETS; i++)
		for (struct csub *cs = C.subs[i]; cs != NULL; cs = cs->next) {
			unsubscribe(cs->sub);
			cs->sub = subscribe_addr(cs->addr);
			announce(cs->addr);
		}
}

/* ---- claims (JetStream KV) ------------------------------------------- */

static void
kv_close(void)
{
	unsubscribe(C.watch);
	C.watch = NULL;
	kvStore_Destroy(C.claims);
	kvStore_Destroy(C.nodes);
	kvStore_Destroy(C.slots);
	jsCtx_Destroy(C.js);
	C.claims = C.nodes = C.slots = NULL;
	C.js = NULL;
}

/* The bucket named what: made if missing, else the one there. */
static kvStore *
kv_bucket(const char *what, int64_t ttl_ns)
{
	char name[CLUSTER_PREFIX_MAX + 16];
	kvStore *kv = NULL;
	kvConfig kc;
	natsStatus s;

	bucket_name(name, sizeof(name), what);
	kvConfig_Init(&kc);
	kc.Bucket = name;
	kc.History = 1;
	kc.TTL = ttl_ns;
	kc.StorageType = js_FileStorage;
	/*
	 * Claims outlive the loss of a NATS server when it can hold them on
	 * three (a single server, or store.replicas asked for more: that).
	 */
	kc.Replicas = C.kvcf->store.replicas > 3 ?
	    (int)C.kvcf->store.replicas : 3;
	if ((s = js_CreateKeyValue(&kv, C.js, &kc)) == NATS_OK)
		return kv;
	kc.Replicas = (int)C.kvcf->store.replicas;
	if ((s = js_CreateKeyValue(&kv, C.js, &kc)) == NATS_OK)
		return kv;
	/* Made by another node, or by us with other settings: use it. */
	if ((s = js_KeyValue(&kv, C.js, name)) == NATS_OK)
		return kv;
	if (!C.kv_failed)
		log_err("cluster: JetStream key-value bucket %s: %s (LOGIN "
		    "needs JetStream on the NATS servers for its claims, and "
		    "message ids for their slots)", name, natsStatus_GetText(s));
	C.kv_failed = true;
	return NULL;
}

/*
 * Gives the nodes bucket claim_ttl as its TTL. The bucket is the
 * cluster's: a node that starts, or reloads, with another claim_ttl than
 * the one it was made with sets it (nodes should agree; the log says so).
 */
static void
nodes_ttl_sync(void)
{
	int64_t want = (int64_t)C.kvcf->cluster.claim_ttl * 1000000000;
	jsStreamInfo *si = NULL, *now = NULL;
	char stream[CLUSTER_PREFIX_MAX + 20];
	jsErrCode jerr = 0;
	natsStatus s;
	int64_t was;

	snprintf(stream, sizeof(stream), "KV_");
	bucket_name(stream + 3, sizeof(stream) - 3, "nodes");
	if ((s = js_GetStreamInfo(&si, C.js, stream, NULL, &jerr)) !=
	    NATS_OK) {
		note_error("bucket TTL", s);
		return;
	}
	if ((was = si->Config->MaxAge) != want) {
		si->Config->MaxAge = want;
		if ((s = js_UpdateStream(&now, C.js, si->Config, NULL,
		    &jerr)) == NATS_OK)
			log_notice("cluster: bucket %s: TTL %lld s, was %lld s "
			    "(claim_ttl)", stream + 3, (long long)(want /
			    1000000000), (long long)(was / 1000000000));
		else
			log_warnx("cluster: bucket %s: cannot set its TTL to "
			    "claim_ttl (%lld s): %s", stream + 3,
			    (long long)(want / 1000000000),
			    natsStatus_GetText(s));
		jsStreamInfo_Destroy(now);
	}
	jsStreamInfo_Destroy(si);
}

/*
 * libnats's thread: a claim was written or deleted (or, first, the last
 * of each): to the cluster thread, which sends by it. A value that does
 * not start with a node's name names no owner.
 */
static void
on_claim_seen(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	const char *tok = strrchr(natsMsg_GetSubject(msg), '.'), *op = NULL;
	const char *val = natsMsg_GetData(msg);
	int n = natsMsg_GetDataLength(msg), k = 0;
	struct owner_note *on = xcalloc(1, sizeof(*on));

	(void)nc;
	(void)sub;
	(void)closure;
	if (tok == NULL ||
	    !cluster_token_decode(tok + 1, strlen(tok + 1), on->addr)) {
		free(on);
		natsMsg_Destroy(msg);
		return;
	}
	if (natsMsgHeader_Get(msg, "KV-Operation", &op) != NATS_OK)
		while (k < n && k < CLUSTER_NODE_MAX && (isalnum((unsigned char)
		    val[k]) || val[k] == '_' || val[k] == '-'))
			k++;
	if (k > 0 && k < n && val[k] == ' ')
		memcpy(on->node, val, (size_t)k);
	natsMsg_Destroy(msg);
	on->task.fn = owner_task;
	on->task.arg = on;
	service_post(C.svc, &on->task);
}

/*
 * Follows the claims' bucket, from the last entry of each address on, so
 * that the cluster thread knows which node claimed what. Until it can,
 * messages go to whichever nodes hold an address.
 */
static void
claims_watch(void)
{
	char stream[CLUSTER_PREFIX_MAX + 20], subj[SUBJECT_MAX];
	jsErrCode jerr = 0;
	jsSubOptions so;
	natsStatus s;

	if (C.watch != NULL || C.claims == NULL)
		return;
	kv_names("claims", ">", stream, sizeof(stream), subj, sizeof(subj));
	jsSubOptions_Init(&so);
	so.Stream = stream;
	so.Ordered = true;
	so.Config.DeliverPolicy = js_DeliverLastPerSubject;
	if ((s = js_Subscribe(&C.watch, C.js, subj, on_claim_seen, NULL, NULL,
	    &so, &jerr)) != NATS_OK) {
		C.watch = NULL;
		note_error("watch the claims", s);
	}
}

static bool
kv_open(void)
{
	jsOptions jo;
	natsStatus s;

	if (C.claims != NULL && C.nodes != NULL)
		return true;
	/*
	 * JetStream's calls wait on this thread: while it is in trouble, ask
	 * at most once a second, so that sends keep flowing meanwhile.
	 */
	if (mono_ms() < C.kv_retry_ms)
		return false;
	C.kv_retry_ms = mono_ms() + 1000;
	kv_close();
	jsOptions_Init(&jo);
	jo.Wait = (int64_t)C.kvcf->cluster.request_timeout * 1000;
	if ((s = natsConnection_JetStream(&C.js, C.nc, &jo)) != NATS_OK) {
		note_error("jetstream", s);
		return false;
	}
	C.claims = kv_bucket("claims", 0);
	C.nodes = kv_bucket("nodes",
	    (int64_t)C.kvcf->cluster.claim_ttl * 1000000000);
	if (C.claims == NULL || C.nodes == NULL) {
		kv_close();
		return false;
	}
	nodes_ttl_sync();
	claims_watch();
	return true;
}

/*
 * Our heartbeat, put when beat_last_ms began, lives at least claim_ttl
 * on the server: until then no other node takes our claims, and other
 * nodes' traffic for them is delivered here (bundle_deliver).
 */
static void
claims_trust(void)
{
	atomic_store(&C.trust_until_ms, C.beat_last_ms +
	    (uint64_t)C.kvcf->cluster.claim_ttl * 1000);
}

/* Tells the cluster this node is alive, every claim_ttl / 3 s. */
static void
heartbeat(uint64_t now)
{
	uint64_t every = (uint64_t)C.kvcf->cluster.claim_ttl * 1000 / 3;
	kvKeysList keys;
	natsStatus s;

	if (now < C.beat_at_ms || !cluster_up() || !kv_open())
		return;
	C.beat_at_ms = now + (every > 0 ? every : 1000);
	if ((s = kvStore_PutString(NULL, C.nodes, C.node, C.instance)) !=
	    NATS_OK) {
		C.beat_ok = false;
		C.beat_at_ms = now + 1000;
		note_error("heartbeat", s);
		return;
	}
	/*
	 * Silent past claim_ttl (cut off, or the process stopped): the other
	 * nodes took us for dead, and may have taken our addresses.
	 */
	if (C.beat_last_ms != 0 && now - C.beat_last_ms >=
	    (uint64_t)C.kvcf->cluster.claim_ttl * 1000)
		C.was_down = true;
	C.beat_last_ms = now;
	/* (Back from an outage: once claims_recheck has seen to them.) */
	if (!C.was_down)
		claims_trust();
	C.beat_ok = true;
	memset(&keys, 0, sizeof(keys));
	if (kvStore_Keys(&keys, C.nodes, NULL) == NATS_OK) {
		atomic_store(&C.nodes_seen, (uint64_t)keys.Count);
		kvKeysList_Destroy(&keys);
	}
}

/*
 * key's entry in bucket what, as the stream's leader has it: a replica
 * may lag behind (libnats's kvStore_Get asks any of them), and who owns
 * what is never read from one. 1 and its value in val (n bytes, cut and
 * NUL-terminated) and revision in *rev; 0 when there is none or it was
 * deleted (*rev: the deletion's, or 0 when there is nothing at all); -1
 * when JetStream cannot say.
 */
static int
kv_leader_get(const char *what, const char *key, char *val, size_t n,
    uint64_t *rev)
{
	char stream[CLUSTER_PREFIX_MAX + 20], subj[SUBJECT_MAX];
	const char *op = NULL;
	natsMsg *msg = NULL;
	natsStatus s;

	kv_names(what, key, stream, sizeof(stream), subj, sizeof(subj));
	*rev = 0;
	val[0] = '\0';
	if ((s = js_GetLastMsg(&msg, C.js, stream, subj, NULL, NULL)) ==
	    NATS_NOT_FOUND)
		return 0;
	if (s != NATS_OK) {
		note_error(what, s);
		return -1;
	}
	*rev = natsMsg_GetSequence(msg);
	/* A deletion (DEL) or purge (PURGE) marker. */
	if (natsMsgHeader_Get(msg, "KV-Operation", &op) == NATS_OK) {
		natsMsg_Destroy(msg);
		return 0;
	}
	snprintf(val, n, "%.*s", natsMsg_GetDataLength(msg),
	    natsMsg_GetData(msg));
	natsMsg_Destroy(msg);
	return 1;
}

/*
 * Writes val (NULL: a deletion) as key's claim in place of revision last
 * (0: nothing), which must still be the last one there. A NATS 2.9
 * server checks that revision only before its cluster agrees on the
 * write, so two writes in place of one revision, at the same instant,
 * both pass: two nodes would both own the address. So each write also
 * carries the message id "<key>@<last>", which the stream checks as it
 * stores, on every replica in the same order (within its duplicate
 * window, two minutes): of the writes in place of one revision one is
 * stored, the others hear they are duplicates. Every claim, takeover and
 * release goes through here. 1: stored; 0: another write came first; -1:
 * JetStream cannot say.
 */
static int
claim_write(const char *key, const char *val, uint64_t last)
{
	char stream[CLUSTER_PREFIX_MAX + 20], subj[SUBJECT_MAX];
	char id[CLUSTER_TOKEN_MAX + 24];
	jsErrCode jerr = 0;
	jsPubAck *pa = NULL;
	natsMsg *msg = NULL;
	jsPubOptions po;
	natsStatus s;
	int won;

	kv_names("claims", key, stream, sizeof(stream), subj, sizeof(subj));
	snprintf(id, sizeof(id), "%s@%llu", key, (unsigned long long)last);
	jsPubOptions_Init(&po);
	po.MsgId = id;
	po.ExpectStream = stream;
	if (last == 0)
		po.ExpectNoMessage = true;
	else
		po.ExpectLastSubjectSeq = last;
	s = natsMsg_Create(&msg, subj, NULL, val,
	    val != NULL ? (int)strlen(val) : 0);
	if (val == NULL)
		IFOK_NATS(s, natsMsgHeader_Set(msg, "KV-Operation", "DEL"));
	IFOK_NATS(s, js_PublishMsg(&pa, C.js, msg, &po, &jerr));
	natsMsg_Destroy(msg);
	if (s == NATS_OK) {
		won = !pa->Duplicate;
		jsPubAck_Destroy(pa);
		return won;
	}
	if (jerr == JSStreamWrongLastSequenceErr)
		return 0;
	note_error("claim", s);
	return -1;
}

/*
 * Whether the node that wrote a claim ("<node> <instance>") is alive: its
 * heartbeat is there and names the same instance (a node that restarted
 * left its old claims behind). In doubt, alive.
 */
static bool
holder_alive(const char *val)
{
	const char *sp = strchr(val, ' ');
	char node[CLUSTER_NODE_MAX + 1], inst[sizeof(C.instance) + 1];
	uint64_t rev;
	int beat;

	if (sp == NULL || (size_t)(sp - val) > CLUSTER_NODE_MAX)
		return false;
	memcpy(node, val, (size_t)(sp - val));
	node[sp - val] = '\0';
	if ((beat = kv_leader_get("nodes", node, inst, sizeof(inst),
	    &rev)) < 0)
		return true;
	return beat > 0 && strcmp(inst, sp + 1) == 0;
}

static enum cluster_claim_result
claim_kv(const char *addr)
{
	char key[CLUSTER_TOKEN_MAX + 1], val[sizeof(C.me) + 1];

	if (!cluster_up() || !kv_open())
		return CLUSTER_UNAVAILABLE;
	/*
	 * Never claim while our own heartbeat may be missing (just back from
	 * an outage): another node would take the claim for a dead one's.
	 */
	if (!C.beat_ok) {
		C.beat_at_ms = 0;
		heartbeat(mono_ms());
		if (!C.beat_ok)
			return CLUSTER_UNAVAILABLE;
	}
	cluster_token_encode(addr, key);
	/* A few rounds: another node may take or free it meanwhile. */
	for (int round = 0; round < 3; round++) {
		uint64_t rev;
		int held, w;

		if ((held = kv_leader_get("claims", key, val, sizeof(val),
		    &rev)) < 0)
			return CLUSTER_UNAVAILABLE;
		/* Ours (a session here just left it): keep it. */
		if (held && strcmp(val, C.me) == 0)
			return CLUSTER_CLAIMED;
		if (held && holder_alive(val))
			return CLUSTER_IN_USE;
		/* Free, or its node is gone: ours, unless another was first. */
		if ((w = claim_write(key, C.me, rev)) != 0)
			return w > 0 ? CLUSTER_CLAIMED : CLUSTER_UNAVAILABLE;
	}
	return CLUSTER_IN_USE;
}

static struct claimed **
claimed_slot(const char *addr)
{
	struct claimed **pp = &C.claimed[str_hash(addr) & (SUB_BUCKETS - 1)];

	while (*pp != NULL && strcmp((*pp)->addr, addr) != 0)
		pp = &(*pp)->next;
	return pp;
}

static void
claimed_set(const char *addr, bool on)
{
	struct claimed **pp = claimed_slot(addr), *c = *pp;

	if (on && c == NULL) {
		c = xcalloc(1, sizeof(*c));
		snprintf(c->addr, sizeof(c->addr), "%s", addr);
		*pp = c;
	} else if (c != NULL && c->leaving) {
		c->leaving = false;
		C.nleaving--;
	}
	if (!on && c != NULL) {
		*pp = c->next;
		free(c);
	}
}

/* c's claim is given up here, and still to delete in JetStream. */
static void
leaving_set(struct claimed *c)
{
	if (!c->leaving) {
		c->leaving = true;
		C.nleaving++;
	}
}

/*
 * Deletes our claim on addr, if it is still ours (never another's, even
 * one written meanwhile); false when JetStream could not say.
 */
static bool
release_kv(const char *addr)
{
	char key[CLUSTER_TOKEN_MAX + 1], val[sizeof(C.me) + 1];
	uint64_t rev;
	int held;

	if (!cluster_up() || !kv_open())
		return false;
	cluster_token_encode(addr, key);
	if ((held = kv_leader_get("claims", key, val, sizeof(val), &rev)) < 0)
		return false;
	if (held == 0 || strcmp(val, C.me) != 0)
		return true;
	return claim_write(key, NULL, rev) >= 0;
}

/*
 * The last session here for addr left. Its claim goes now; or, if
 * JetStream cannot be reached, it stays marked and is deleted later
 * (claims_leave): a claim lost on the way would keep the address from
 * every other node for as long as this one lives.
 */
static void
claim_give_up(const char *addr)
{
	struct claimed *c;

	if (release_kv(addr)) {
		claimed_set(addr, false);
		return;
	}
	claimed_set(addr, true);
	c = *claimed_slot(addr);
	leaving_set(c);
}

/* Deletes the claims given up while JetStream could not be reached. */
static void
claims_leave(void)
{
	for (size_t i = 0; i < SUB_BUCKETS && C.nleaving > 0; i++) {
		struct claimed *c, *next;

		for (c = C.claimed[i]; c != NULL; c = next) {
			next = c->next;
			if (!c->leaving || route_is_claimed(c->addr))
				continue;
			/* Still out of reach: not one wait per address. */
			if (!release_kv(c->addr))
				return;
			claimed_set(c->addr, false);
		}
	}
}

/* On the reactor: the session holding the address must go. */
static void
evict_task(void *owner, void *arg, enum mailbox_status st)
{
	struct conn_handle *h = arg;
	struct conn *c;
	static const char bye[] = "ERR 409 address taken by another node "
	    "while this one was cut off\n";

	if (st == MAILBOX_RUN && (c = conn_resolve(owner, h)) != NULL &&
	    !conn_is_closing(c)) {
		conn_write(c, bye, sizeof(bye) - 1);
		conn_close_after_flush(c, CONN_CLOSE_QUIT);
	}
	free(h);
}

/*
 * Back after an outage: a claim of ours that expired meanwhile is made
 * again, and one another node took lawfully (our heartbeat was gone) wins:
 * our session for it is closed, so that no address has two owners. One
 * given up meanwhile is deleted.
 */
static void
claims_recheck(void)
{
	for (size_t i = 0; i < SUB_BUCKETS; i++) {
		struct claimed *c, *next;

		for (c = C.claimed[i]; c != NULL; c = next) {
			struct route_owner o;
			struct reactor *r;

			next = c->next;
			if (!route_is_claimed(c->addr)) {
				leaving_set(c);
				continue;
			}
			if (claim_kv(c->addr) != CLUSTER_IN_USE)
				continue;
			log_warnx("cluster: %s was claimed by another node while "
			    "this one was cut off: closing its session here",
			    c->addr);
			if (route_lookup(c->addr, &o) &&
			    o.kind == ROUTE_OWNER_CONN &&
			    (r = reactor_get(o.conn.reactor)) != NULL) {
				struct conn_handle *h = xmalloc(sizeof(*h));

				*h = o.conn;
				reactor_post(r, evict_task, h);
				/*
				 * Found here no more from now on, not once the
				 * session is closed: what still arrives for it
				 * (claims_trust below) is not delivered to it.
				 */
				route_release(c->addr, &o);
			}
			claimed_set(c->addr, false);
		}
	}
	claims_trust();
	claims_leave();
}

/* The claim's answer, to the reactor of the session that asked. */
static void
claim_answer(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_claim *q = arg;
	struct reactor *r;

	(void)owner;
	if (st == MAILBOX_CANCELLED ||
	    (r = reactor_get(q->conn.reactor)) == NULL) {
		free(q);
		return;
	}
	q->task.fn = q->done;
	q->task.arg = q;
	reactor_post_task(r, &q->task);
}

/* Back on the key-value thread: answered after this batch's flush. */
static void
claim_to_flush(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_claim *q = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		free(q);
		return;
	}
	if (C.nlogins == C.logins_cap) {
		C.logins_cap = C.logins_cap ? C.logins_cap * 2 : 16;
		C.logins = xrealloc(C.logins, C.logins_cap *
		    sizeof(*C.logins));
	}
	C.logins[C.nlogins++] = q;
}

/* On the cluster thread, after the address's subscription (FIFO). */
static void
claim_subscribed(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_claim *q = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		free(q);
		return;
	}
	q->task.fn = claim_to_flush;
	q->task.arg = q;
	service_post(C.kvsvc, &q->task);
}

/*
 * The key-value thread's batch is done: one round trip to the server for
 * all the LOGINs claimed in it, so that their subscriptions (and the
 * interest its routes pass on) are there before their OK LOGIN.
 */
static void
kv_after_batch(struct service *s, void *arg)
{
	natsStatus st;

	(void)s;
	(void)arg;
	if (C.nlogins == 0)
		return;
	if (cluster_up() && (st = natsConnection_FlushTimeout(C.nc,
	    (int64_t)C.kvcf->cluster.request_timeout * 1000)) != NATS_OK)
		note_error("flush", st);
	for (size_t i = 0; i < C.nlogins; i++)
		claim_answer(NULL, C.logins[i], MAILBOX_RUN);
	C.nlogins = 0;
}

static void
claim_task(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_claim *q = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		free(q);
		return;
	}
	q->result = claim_kv(q->addr);
	if (q->result == CLUSTER_CLAIMED) {
		struct route_owner o = route_owner_conn(q->conn);

		claimed_set(q->addr, true);
		/*
		 * Found here from now on: the cluster thread subscribes to it
		 * (the route watcher posts that), and the answer goes to the
		 * reactor through the cluster thread, after the subscription,
		 * so that OK LOGIN never comes before other nodes can reach it.
		 */
		route_confirm(q->addr, &o);
		q->task.fn = claim_subscribed;
		q->task.arg = q;
		service_post(C.svc, &q->task);
		return;
	}
	claim_answer(NULL, q, MAILBOX_RUN);
}

void
cluster_claim(struct cluster_claim *q)
{
	q->task.fn = claim_task;
	q->task.arg = q;
	service_post(C.kvsvc, &q->task);
}

static void
release_task(void *owner, void *arg, enum mailbox_status st)
{
	struct addr_note *an = arg;

	(void)owner;
	/* A session here took it again meanwhile: the claim stays. */
	if (st == MAILBOX_RUN && !route_is_claimed(an->addr))
		claim_give_up(an->addr);
	free(an);
}

void
cluster_release(const char *addr)
{
	struct addr_note *an = xcalloc(1, sizeof(*an));

	snprintf(an->addr, sizeof(an->addr), "%s", addr);
	an->task.fn = release_task;
	an->task.arg = an;
	service_post(C.kvsvc, &an->task);
}

/* ---- id slots (JetStream KV) ------------------------------------------ */

/*
 * A message id ends in 10 bits that tell who made it (deliver.h). In a
 * cluster each node takes slots of its own for its reactors and its store
 * in the bucket "<prefix>-slots", for good (no TTL):
 *   s.<k>       the node whose ids end in k (0 <= k < SLOTS)
 *   n.<node>    that node's slots, "k,k,..." in maker order
 * so that no two nodes hand out the same id, and a node keeps its slots
 * across restarts. Until this is done (no NATS yet), ids end in the
 * makers' own numbers, as on one node.
 */
#define SLOTS	MSG_ID_LOW_MAX	/* 1023 stays the standalone store's */

/* Slot k as ours, if it is free or already ours; -1 on a JetStream error. */
static int
slot_take(unsigned k)
{
	char key[16];
	kvEntry *e = NULL;
	natsStatus s;
	int ours;

	snprintf(key, sizeof(key), "s.%u", k);
	for (int round = 0; round < 2; round++) {
		if (kvStore_CreateString(NULL, C.slots, key, C.node) == NATS_OK)
			return 1;
		if ((s = kvStore_Get(&e, C.slots, key)) == NATS_NOT_FOUND)
			continue;
		if (s != NATS_OK) {
			note_error("id slots", s);
			return -1;
		}
		ours = strcmp(kvEntry_ValueString(e), C.node) == 0;
		kvEntry_Destroy(e);
		return ours;
	}
	return 0;
}

/* Whether k is among the n slots in have. */
static bool
slot_listed(const unsigned *have, int n, unsigned long k)
{
	for (int j = 0; j < n; j++)
		if (have[j] == k)
			return true;
	return false;
}

/*
 * Reads n.<node> into have (slots still ours, each once: anyone allowed
 * on the NATS server may have written the list); their count, -1 on
 * error.
 */
static int
slots_read(unsigned *have, unsigned need)
{
	char key[CLUSTER_NODE_MAX + 3];
	kvEntry *e = NULL;
	const char *p;
	unsigned n = 0;
	natsStatus s;

	snprintf(key, sizeof(key), "n.%s", C.node);
	if ((s = kvStore_Get(&e, C.slots, key)) == NATS_NOT_FOUND)
		return 0;
	if (s != NATS_OK) {
		note_error("id slots", s);
		return -1;
	}
	for (p = kvEntry_ValueString(e); *p != '\0' && n < need; ) {
		char *end;
		unsigned long k = strtoul(p, &end, 10);
		int t;

		if (end == p)
			break;
		p = *end == ',' ? end + 1 : end;
		/* An operator may have removed it: only one still ours. */
		if (k >= SLOTS || slot_listed(have, (int)n, k) ||
		    (t = slot_take((unsigned)k)) == 0)
			continue;
		if (t < 0) {
			kvEntry_Destroy(e);
			return -1;
		}
		have[n++] = (unsigned)k;
	}
	kvEntry_Destroy(e);
	return (int)n;
}

/* This node's slots: those it had, and more if it needs more. */
static void
slots_lease(void)
{
	unsigned have[SLOTS], need = C.makers < SLOTS ? C.makers : SLOTS;
	char key[CLUSTER_NODE_MAX + 3], list[SLOTS * 5 + 1];
	unsigned start = str_hash(C.node) % SLOTS;
	size_t len = 0;
	int n, t;

	if (C.slots_done || mono_ms() < C.slots_at_ms || !cluster_up() ||
	    !kv_open())
		return;
	/* JetStream in trouble: not a wait per tick. */
	C.slots_at_ms = mono_ms() + 1000;
	/* Not needed for claims: a node that cannot have it still works. */
	if (C.slots == NULL && (C.slots = kv_bucket("slots", 0)) == NULL)
		return;
	if ((n = slots_read(have, need)) < 0)
		return;
	/* From a place of its own, so that nodes seldom race for one. */
	for (unsigned i = 0; i < SLOTS && (unsigned)n < need; i++) {
		unsigned k = (start + i) % SLOTS;

		if (slot_listed(have, n, k) || (t = slot_take(k)) == 0)
			continue;
		if (t < 0)
			return;
		have[n++] = k;
	}
	for (int j = 0; j < n; j++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u",
		    j > 0 ? "," : "", have[j]);
	snprintf(key, sizeof(key), "n.%s", C.node);
	if (kvStore_PutString(NULL, C.slots, key, list) != NATS_OK)
		return;
	C.slots_done = true;
	if ((unsigned)n < need) {
		log_err("cluster: node %s: only %d of the %u id slots it needs "
		    "are free (%u in all): its message ids may repeat another "
		    "node's", C.node, n, need, SLOTS);
		return;
	}
	for (unsigned i = 0; i + 1 < need; i++)
		msg_set_id_low(i, have[i]);
	msg_set_id_low(MSG_ID_STORE, have[need - 1]);
	log_notice("cluster: node %s: message ids end in %s (reactors, then "
	    "the store)", C.node, list);
}

/* ---- the thread ------------------------------------------------------ */

/* The key-value thread: the connection moved or went down. */
static void
kv_link_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	if (st != MAILBOX_RUN)
		return;
	kv_close();
	C.kv_failed = false;
	C.kv_retry_ms = 0;
	C.beat_at_ms = 0;
	C.beat_ok = false;
	/* Up (arg not NULL): say we are alive at once, then check. */
	if (arg == NULL) {
		C.was_down = true;
		return;
	}
	heartbeat(mono_ms());
	slots_lease();
	if (C.was_down && C.beat_ok) {
		C.was_down = false;
		claims_recheck();
	}
}

static void
link_task(void *owner, void *arg, enum mailbox_status st)
{
	char url[256];
	bool up = cluster_up();

	(void)owner;
	(void)arg;
	if (st != MAILBOX_RUN)
		return;
	pthread_mutex_lock(&C.url_lock);
	snprintf(url, sizeof(url), "%s", C.url);
	pthread_mutex_unlock(&C.url_lock);
	/* Closed by libnats, not by us: no further attempt will come. */
	if (!up && atomic_load(&C.gave_up) && !atomic_load(&C.stopping) &&
	    !atomic_exchange(&C.gave_up_said, true)) {
		char why[256];

		get_why(why, sizeof(why));
		log_err("cluster: the NATS client gave up (%s): node %s stays "
		    "out of the cluster until it restarts; local traffic goes "
		    "on", why, C.node);
	}
	/* Down and up again before this ran still counts as a move. */
	if (up && strcmp(url, C.linked_url) != 0 && !atomic_load(&C.outcast)) {
		log_notice("cluster: node %s connected to %s", C.node, url);
		snprintf(C.linked_url, sizeof(C.linked_url), "%s", url);
		/* Joined by a process of our name while we were cut off? */
		name_ask();
		service_post_fn(C.kvsvc, kv_link_task, &C);
	} else if (!up && C.linked_url[0] != '\0') {
		log_warnx("cluster: lost the NATS server; reconnecting (sends "
		    "that need another node get a temporary error meanwhile)");
		C.linked_url[0] = '\0';
		service_post_fn(C.kvsvc, kv_link_task, NULL);
	}
}

static void
cluster_tick(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	pend_expire(mono_ms());
	reactor_batch_publish(&C.answers, s);
}

static void
cluster_stop(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	atomic_store(&C.stopping, true);
	atomic_store(&C.up, false);
	/* Whoever still waits hears a temporary error. */
	outbox_flush(false);
	verdicts_flush(false);
	while (C.oldest != NULL)
		pend_finish(C.oldest, MSG_UNAVAILABLE);
	while (C.spare != NULL) {
		struct pend *p = C.spare;

		C.spare = p->hnext;
		free(p);
	}
	C.nspare = 0;
	reactor_batch_publish(&C.answers, s);
	reactor_batch_fini(&C.answers);
	for (size_t i = 0; i < SUB_BUCKETS; i++)
		while (C.subs[i] != NULL) {
			struct csub *cs = C.subs[i];

			C.subs[i] = cs->next;
			unsubscribe(cs->sub);
			free(cs);
		}
	unsubscribe(C.inbox);
	C.inbox = NULL;
	unsubscribe(C.notices);
	C.notices = NULL;
	unsubscribe(C.named);
	unsubscribe(C.named_answer);
	C.named = C.named_answer = NULL;
	unsubscribe(C.mine);
	C.mine = NULL;
	owners_clear();
	if (C.nc != NULL) {
		natsConnection_Close(C.nc);
		natsConnection_Destroy(C.nc);
		C.nc = NULL;
	}
	/* libnats's threads end here: no callback can post after this. */
	nats_CloseAndWait(5000);
}

static const struct service_hooks cluster_hooks = {
	.after_batch = cluster_after_batch,
	.tick = cluster_tick,
	.stop = cluster_stop,
	.tick_ms = CLUSTER_TICK_MS,
};

static void
kv_tick(struct service *s, void *arg)
{
	uint64_t now = mono_ms();

	(void)s;
	(void)arg;
	heartbeat(now);
	slots_lease();
	/* The claims' watch failed: again, at most once a second. */
	if (C.watch == NULL && C.claims != NULL && cluster_up() &&
	    now >= C.watch_at_ms) {
		C.watch_at_ms = now + 1000;
		claims_watch();
	}
	/* Back, but JetStream was not ready when we came back: now. */
	if (C.was_down && C.beat_ok && cluster_up()) {
		C.was_down = false;
		claims_recheck();
	}
	if (C.nleaving > 0 && cluster_up() && now >= C.leave_at_ms) {
		C.leave_at_ms = now + 1000;
		claims_leave();
	}
}

/* Stopped before the cluster thread: the connection is still there. */
static void
kv_stop(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	/* Our claims go at once, not claim_ttl later. */
	if (C.nodes != NULL)
		kvStore_Delete(C.nodes, C.node);
	kv_close();
	for (size_t i = 0; i < SUB_BUCKETS; i++)
		while (C.claimed[i] != NULL)
			claimed_set(C.claimed[i]->addr, false);
	/* (after_batch answered every one; the list itself goes.) */
	for (size_t i = 0; i < C.nlogins; i++)
		free(C.logins[i]);
	free(C.logins);
	C.logins = NULL;
	C.nlogins = C.logins_cap = 0;
}

static const struct service_hooks kv_hooks = {
	.after_batch = kv_after_batch,
	.tick = kv_tick,
	.stop = kv_stop,
	.tick_ms = CLUSTER_TICK_MS,
};

/* libnats's options for cf's cluster group; -1 and *err if refused. */
static int
make_options(const struct cluster_conf *cl, char **err)
{
	const char *servers[CLUSTER_SERVERS_MAX];
	natsStatus s;

	for (unsigned i = 0; i < cl->nservers; i++)
		servers[i] = cl->servers[i];
	s = natsOptions_Create(&C.opts);
	IFOK_NATS(s, natsOptions_SetServers(C.opts, servers,
	    (int)cl->nservers));
	IFOK_NATS(s, natsOptions_SetName(C.opts, C.me));
	IFOK_NATS(s, natsOptions_SetMaxReconnect(C.opts, -1));
	IFOK_NATS(s, natsOptions_SetReconnectWait(C.opts, 500));
	IFOK_NATS(s, natsOptions_SetTimeout(C.opts, 2000));
	IFOK_NATS(s, natsOptions_SetPingInterval(C.opts, 2000));
	IFOK_NATS(s, natsOptions_SetDisconnectedCB(C.opts, on_link, NULL));
	IFOK_NATS(s, natsOptions_SetReconnectedCB(C.opts, on_link, NULL));
	IFOK_NATS(s, natsOptions_SetClosedCB(C.opts, on_link, NULL));
	IFOK_NATS(s, natsOptions_SetErrorHandler(C.opts, on_nats_error, NULL));
	IFOK_NATS(s, natsOptions_UseGlobalMessageDelivery(C.opts, true));
	if (cl->credentials[0] != '\0')
		IFOK_NATS(s, natsOptions_SetUserCredentialsFromFiles(C.opts,
		    cl->credentials, NULL));
	if (s != NATS_OK) {
		if (asprintf(err, "cannot set up the NATS client: %s",
		    nats_GetLastError(NULL)) < 0)
			*err = NULL;
		return -1;
	}
	return 0;
}

/*
 * Without credentials the NATS servers take whoever connects, and anyone
 * who may publish on the cluster's subjects can send as any address: a
 * warning at start, since the servers may be set up so on purpose.
 */
static void
warn_no_credentials(const struct cluster_conf *cl)
{
	char shown[sizeof(cl->servers[0])];

	if (cl->credentials[0] != '\0')
		return;
	for (unsigned i = 0; i < cl->nservers; i++) {
		cluster_url_shown(cl->servers[i], shown, sizeof(shown));
		if (strcmp(shown, cl->servers[i]) != 0)
			return;		/* user:password@ */
	}
	log_warnx("cluster: no NATS credentials (cluster.credentials, or "
	    "user:password@ in servers): whoever can connect to the NATS "
	    "servers can publish on %s.> and send messages as any address",
	    cl->subject_prefix);
}

/*
 * Connects once, to hear libnats's reason when no server takes us (no
 * answer, a wrong password, a credentials file it cannot use), then
 * again retrying in the background, which would keep that reason to
 * itself. NATS_NOT_YET_CONNECTED: retrying.
 */
static natsStatus
connect_first(void)
{
	char why[256];
	natsStatus s = natsConnection_Connect(&C.nc, C.opts);

	if (s == NATS_OK)
		return s;
	nats_why(s, why, sizeof(why));
	set_why(why);
	log_warnx("cluster: cannot connect to the NATS servers yet: %s; "
	    "retrying", why);
	s = natsOptions_SetRetryOnFailedConnect(C.opts, true, on_link, NULL);
	IFOK_NATS(s, natsConnection_Connect(&C.nc, C.opts));
	return s;
}

/*
 * Connected at start: -1 and *err when another node has our name, so that
 * a second one is refused at once rather than left out of the cluster.
 */
static int
refuse_taken_name(char **err)
{
	char other[sizeof(C.instance)];

	if (name_is_free(other, sizeof(other)))
		return 0;
	if (asprintf(err, "node %s is in the cluster already (instance %s): "
	    "node names must be unique", C.node, other) < 0)
		*err = NULL;
	return -1;
}

int
cluster_open(const struct config *cf, struct service **svcs, unsigned *n,
    char **err)
{
	const struct cluster_conf *cl = &cf->cluster;
	uint64_t inst;
	natsStatus s;

	if (!cl->enabled)
		return 0;
	if ((s = nats_Open(-1)) != NATS_OK ||
	    (s = nats_SetMessageDeliveryPoolSize(DELIVERY_THREADS)) !=
	    NATS_OK) {
		if (asprintf(err, "cannot start the NATS client: %s",
		    natsStatus_GetText(s)) < 0)
			*err = NULL;
		return -1;
	}
	snprintf(C.node, sizeof(C.node), "%s", cl->node);
	/* Tells this run's claims from those of the node's earlier runs. */
	if (getrandom(&inst, sizeof(inst), 0) != sizeof(inst))
		inst = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
	snprintf(C.instance, sizeof(C.instance), "%016llx",
	    (unsigned long long)inst);
	snprintf(C.me, sizeof(C.me), "%s %s", C.node, C.instance);
	/*
	 * Request ids start somewhere new each run: a verdict still on its
	 * way to this node's earlier run must not answer one of this run's
	 * requests. (Below 2^62: no wrap in any run.)
	 */
	C.next_req = inst >> 2;
	snprintf(C.prefix, sizeof(C.prefix), "%s", cl->subject_prefix);
	C.cf = config_ref((struct config *)cf);
	C.kvcf = config_ref((struct config *)cf);
	C.makers = cf->dispatchers + 1;
	C.seen = cluster_seen_new(SEEN_IDS);
	warn_no_credentials(cl);
	if (make_options(cl, err) < 0)
		return -1;
	if ((C.svc = service_new("cluster", &cluster_hooks, NULL)) == NULL ||
	    (C.kvsvc = service_new("cluster-kv", &kv_hooks, NULL)) == NULL) {
		*err = xstrdup("cannot make the cluster threads");
		return -1;
	}
	/*
	 * Connected (or retrying in the background) before any thread runs:
	 * the connection is then only read. Its callbacks post to the
	 * threads, which run what was posted once they start.
	 */
	if ((s = connect_first()) != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
		if (asprintf(err, "cannot use the NATS servers: %s",
		    natsStatus_GetText(s)) < 0)
			*err = NULL;
		return -1;
	}
	if (s == NATS_OK && refuse_taken_name(err) < 0)
		return -1;
	if (s == NATS_OK)
		on_link(C.nc, NULL);
	resubscribe_all();
	atomic_store(&C.on, true);
	deliver_register(MSG_KIND_NODE, &node_kind);
	route_watch(on_route_change);
	/* Stopped in reverse: the key-value thread first. */
	svcs[(*n)++] = C.svc;
	svcs[(*n)++] = C.kvsvc;
	return 0;
}

void
cluster_close(void)
{
	natsOptions_Destroy(C.opts);
	C.opts = NULL;
	config_unref(C.cf);
	config_unref(C.kvcf);
	C.cf = C.kvcf = NULL;
	free(C.buf);
	C.buf = NULL;
	C.bufcap = 0;
	cluster_seen_free(C.seen);
	C.seen = NULL;
}

static void
reload_task(void *owner, void *arg, enum mailbox_status st)
{
	struct config *cf = arg;
	bool moved;

	(void)owner;
	if (st != MAILBOX_RUN) {
		config_unref(cf);
		return;
	}
	moved = strcmp(cf->cluster.subject_prefix, C.prefix) != 0;
	config_unref(C.cf);
	C.cf = cf;
	/* The claims' bucket is another: its watch tells anew. */
	if (moved)
		owners_clear();
	if (moved && C.nc != NULL) {
		resubscribe_all();
		log_notice("cluster: subject prefix now %s", C.prefix);
	}
}

static void
kv_reload_task(void *owner, void *arg, enum mailbox_status st)
{
	struct config *cf = arg;
	bool moved, ttl;

	(void)owner;
	if (st != MAILBOX_RUN) {
		config_unref(cf);
		return;
	}
	moved = strcmp(cf->cluster.subject_prefix,
	    C.kvcf->cluster.subject_prefix) != 0;
	ttl = cf->cluster.claim_ttl != C.kvcf->cluster.claim_ttl;
	config_unref(C.kvcf);
	C.kvcf = cf;
	if (ttl && !moved && C.nodes != NULL)
		nodes_ttl_sync();
	/* Other buckets: open them, and say we are alive there. */
	if (moved) {
		kv_close();
		C.kv_retry_ms = C.beat_at_ms = 0;
		C.beat_ok = false;
	}
}

void
cluster_reload(const struct config *cf)
{
	if (!cluster_on())
		return;
	service_post_fn(C.svc, reload_task, config_ref((struct config *)cf));
	service_post_fn(C.kvsvc, kv_reload_task,
	    config_ref((struct config *)cf));
}

void
cluster_get_stats(struct cluster_stats *st)
{
	*st = (struct cluster_stats){ 0 };
	if (!cluster_on())
		return;
	pthread_mutex_lock(&C.url_lock);
	st->connected = C.url[0] != '\0';
	pthread_mutex_unlock(&C.url_lock);
	st->nodes = atomic_load(&C.nodes_seen);
	st->to_nodes = atomic_load(&C.to_nodes);
	st->from_nodes = atomic_load(&C.from_nodes);
	st->errors = atomic_load(&C.errors);
}

void
cluster_stats_append(char *buf, size_t len, bool status)
{
	size_t used = strlen(buf);
	char url[sizeof(C.why) + 16];

	if (!cluster_on() || used >= len)
		return;
	pthread_mutex_lock(&C.url_lock);
	/* STATUS= says why it is down, as far as libnats said. */
	if (C.url[0] == '\0' && status && C.why[0] != '\0')
		snprintf(url, sizeof(url), "down (%s)", C.why);
	else
		snprintf(url, sizeof(url), "%s", C.url[0] != '\0' ? C.url :
		    "down");
	pthread_mutex_unlock(&C.url_lock);
	if (status)
		snprintf(buf + used, len - used, ", cluster %s, %llu nodes", url,
		    (unsigned long long)atomic_load(&C.nodes_seen));
	else
		snprintf(buf + used, len - used, " cluster=%s nodes=%llu "
		    "to_nodes=%llu from_nodes=%llu cluster_errors=%llu", url,
		    (unsigned long long)atomic_load(&C.nodes_seen),
		    (unsigned long long)atomic_load(&C.to_nodes),
		    (unsigned long long)atomic_load(&C.from_nodes),
		    (unsigned long long)atomic_load(&C.errors));
}
