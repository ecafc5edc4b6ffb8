/*
 * cluster.c: the cluster thread and its NATS connection. See cluster.h
 * for what goes over the wire, cluster_int.h for how the cluster's files
 * share the work, docs/architecture.md for why.
 *
 * Three kinds of thread meet here:
 *   - reactors post sends, verdicts, claims and address changes to the
 *     cluster thread (service_post), and never call libnats;
 *   - libnats's threads (its message delivery pool and its connection
 *     thread) run the callbacks below, which only decode and post: a
 *     message for one of our addresses straight to its reactor, a verdict
 *     to the cluster thread;
 *   - the cluster thread owns the connection, the table of requests
 *     awaiting a verdict (cluster_send.c) and the subscriptions, and is
 *     the only one that publishes or subscribes; JetStream's calls, which
 *     wait, are the key-value thread's (cluster_kv.c).
 */
#include "cluster_int.h"

#include <ctype.h>
#include <sys/random.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_seen.h"
#include "fault.h"
#include "log.h"
#include "nats_link.h"
#include "service.h"
#include "store.h"
#include "util.h"

#define CLUSTER_QUEUE		"erd"	/* every node's queue group */
/* libnats's delivery threads: a subscription keeps to one, so in order. */
#define DELIVERY_THREADS	2
/* How long stopping waits for libnats's threads to end. */
#define CLUSTER_CLOSE_MS	5000
/* ... and before that for its delivery threads to be done (a loaded box). */
#define CLUSTER_SUBS_WAIT_MS	10000
/*
 * Message ids taken from other nodes that a node remembers (the newest;
 * about 1.3 MiB): a copy of one of them is not delivered again.
 */
#define SEEN_IDS		65536
/* How long a node asks whether another one has its name, at most. */
#define NAME_PROBE_MS		1000

/* One address held here, and its subscription. */
struct csub {
	struct csub *next;
	natsSubscription *sub;
	char	addr[ROUTE_ADDR_MAX + 1];
};

struct cluster cluster_state = {
	.url_lock = PTHREAD_MUTEX_INITIALIZER,
	.seen_lock = PTHREAD_MUTEX_INITIALIZER,
};


void
cluster_note_error(const char *what, natsStatus s)
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
void
cluster_addr_subject(char *out, size_t n, const char *addr, const char *node)
{
	char tok[CLUSTER_TOKEN_MAX + 1];

	cluster_token_encode(addr, tok);
	if (node != NULL && node[0] != '\0')
		snprintf(out, n, "%s.o.%s.%s", C.prefix, node, tok);
	else
		snprintf(out, n, "%s.a.%s", C.prefix, tok);
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
	vn->task.fn = cluster_verdict_task;
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
		msg_free(m);
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
	cluster_note_error("async error", err);
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
		cluster_verdicts_add(m->remote_node, m->remote_req, m->verdict);
	msg_free(m);
}

/* A copy's answer: the verdict only; its original's entry stays as is. */
static void
copy_answer_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;

	(void)owner;
	if (st == MAILBOX_RUN)
		cluster_verdicts_add(m->remote_node, m->remote_req, m->verdict);
	msg_free(m);
}

void
cluster_post_msg(struct reactor_batch *b, struct msg *m, mailbox_task_fn *fn)
{
	m->task.fn = fn;
	m->task.arg = m;
	if (b != NULL)
		reactor_batch_add_service(b, C.svc, &m->task);
	else
		service_post(C.svc, &m->task);
}

void
cluster_answer(struct reactor_batch *b, struct msg *m)
{
	cluster_post_msg(b, m, answer_task);
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

/* LOGIN's claims, cluster-wide (route_wide_register). */
static const struct route_wide_ops claims_wide = {
	.up = cluster_up,
	.claim = cluster_claim,
	.release = cluster_release,
};

/* ---- subscriptions: one per address held here ------------------------ */

static struct csub **
sub_slot(const char *addr)
{
	struct csub **pp = &C.subs[fnv1a_str(addr) & (SUB_BUCKETS - 1)];

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

	cluster_addr_subject(subj, sizeof(subj), addr, NULL);
	if ((s = cluster_subscribe(&sub, subj, CLUSTER_QUEUE, on_message)) !=
	    NATS_OK) {
		cluster_note_error("subscribe", s);
		return NULL;
	}
	return sub;
}

void
cluster_unsubscribe(natsSubscription *sub)
{
	if (sub == NULL)
		return;
	natsSubscription_Unsubscribe(sub);
	natsSubscription_Destroy(sub);
}

/*
 * libnats's delivery threads hand every message they are done with, and
 * each subscription's "closed" note, to libnats's garbage collector
 * thread. nats_CloseAndWait tells the collector and the delivery threads
 * to end at the same time, and the collector ends once its list is empty:
 * what a delivery thread still behind (a loaded machine) hands it after
 * that is never freed (libnats 3.4.1: nats.c _close, _garbageCollector,
 * natsGC_collect). So each subscription with a handler is counted until
 * libnats says it is done with it (its completion callback, called after
 * its last message and its closed note), and the library is closed only
 * once none is left.
 */
static atomic_uint subs_live;

/* libnats's delivery thread: done with a subscription for good. */
static void
on_sub_done(void *closure)
{
	(void)closure;
	atomic_fetch_sub(&subs_live, 1);
}

void
cluster_track(natsSubscription *sub)
{
	if (sub == NULL)
		return;
	/* Counted first: the callback may come before the call returns. */
	atomic_fetch_add(&subs_live, 1);
	if (natsSubscription_SetOnCompleteCB(sub, on_sub_done, NULL) !=
	    NATS_OK)
		atomic_fetch_sub(&subs_live, 1);
}

natsStatus
cluster_subscribe(natsSubscription **sub, const char *subj,
    const char *queue, natsMsgHandler cb)
{
	natsStatus s;

	if (queue != NULL)
		s = natsConnection_QueueSubscribe(sub, C.nc, subj, queue, cb,
		    NULL);
	else
		s = natsConnection_Subscribe(sub, C.nc, subj, cb, NULL);
	if (s == NATS_OK)
		cluster_track(*sub);
	return s;
}

/*
 * The connection closed: waits up to ms for libnats's delivery threads to
 * be done with every subscription. Whether they were.
 */
static bool
subs_wait_done(uint64_t ms)
{
	uint64_t end = mono_ms() + ms;
	const struct timespec tick = { .tv_nsec = 5 * 1000 * 1000 };

	while (atomic_load(&subs_live) > 0 && mono_ms() < end)
		nanosleep(&tick, NULL);
	return atomic_load(&subs_live) == 0;
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
		cluster_note_error("publish a notice", s);
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
		cluster_unsubscribe(cs->sub);
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
			cluster_note_error("answer a name probe", s);
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
	fault_nats_stall();
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

	cluster_unsubscribe(C.named);
	cluster_unsubscribe(C.named_answer);
	C.named = C.named_answer = NULL;
	name_subjects(ask, sizeof(ask), answer, sizeof(answer));
	if ((s = cluster_subscribe(&C.named, ask, NULL, on_name)) != NATS_OK ||
	    (s = cluster_subscribe(&C.named_answer, answer, NULL,
	    on_name_answer)) != NATS_OK)
		cluster_note_error("subscribe to name probes", s);
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
		cluster_note_error("ask for our name", s);
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
	cluster_unsubscribe(sub);
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

/*
 * *sub anew: on subj with cb when on, else none. what names it in the
 * error count.
 */
static void
resubscribe(natsSubscription **sub, const char *subj, natsMsgHandler cb,
    bool on, const char *what)
{
	natsStatus s;

	cluster_unsubscribe(*sub);
	*sub = NULL;
	if (on && (s = cluster_subscribe(sub, subj, NULL, cb)) != NATS_OK)
		cluster_note_error(what, s);
}

/* Every subscription again (a new prefix), and the inbox. */
static void
resubscribe_all(void)
{
	char subj[SUBJECT_MAX];

	snprintf(C.prefix, sizeof(C.prefix), "%s", C.cf->cluster.subject_prefix);
	snprintf(subj, sizeof(subj), "%s.r.%s.>", C.prefix, C.node);
	resubscribe(&C.inbox, subj, on_verdict, true, "subscribe to verdicts");
	/* What other nodes send to addresses this node claimed. */
	snprintf(subj, sizeof(subj), "%s.o.%s.*", C.prefix, C.node);
	resubscribe(&C.mine, subj, on_message, true,
	    "subscribe to our claims' subject");
	snprintf(subj, sizeof(subj), "%s.h.*", C.prefix);
	resubscribe(&C.notices, subj, on_notice, store_on(),
	    "subscribe to notices");
	name_subscribe();
	cluster_receipt_subscribe();
	for (size_t i = 0; i < SUB_BUCKETS; i++)
		for (struct csub *cs = C.subs[i]; cs != NULL; cs = cs->next) {
			cluster_unsubscribe(cs->sub);
			cs->sub = subscribe_addr(cs->addr);
			announce(cs->addr);
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
		service_post_fn(C.kvsvc, cluster_kv_link_task, &C);
	} else if (!up && C.linked_url[0] != '\0') {
		log_warnx("cluster: lost the NATS server; reconnecting (sends "
		    "that need another node get a temporary error meanwhile)");
		C.linked_url[0] = '\0';
		service_post_fn(C.kvsvc, cluster_kv_link_task, NULL);
	}
}

/* The end of a batch of tasks: what it queued for other nodes goes. */
static void
cluster_after_batch(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	cluster_send_flush(true);
	reactor_batch_publish(&C.answers, s);
}

static void
cluster_tick(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	cluster_send_expire(mono_ms());
	cluster_send_later();
	cluster_send_flush(true);
	cluster_receipt_expire(mono_ms());
	reactor_batch_publish(&C.answers, s);
}

static void
cluster_stop(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	atomic_store(&C.stopping, true);
	atomic_store(&C.up, false);
	cluster_send_stop();
	cluster_receipt_expire(mono_ms());
	cluster_receipt_unsubscribe();
	reactor_batch_publish(&C.answers, s);
	reactor_batch_fini(&C.answers);
	for (size_t i = 0; i < SUB_BUCKETS; i++)
		while (C.subs[i] != NULL) {
			struct csub *cs = C.subs[i];

			C.subs[i] = cs->next;
			cluster_unsubscribe(cs->sub);
			free(cs);
		}
	cluster_unsubscribe(C.inbox);
	C.inbox = NULL;
	cluster_unsubscribe(C.notices);
	C.notices = NULL;
	cluster_unsubscribe(C.named);
	cluster_unsubscribe(C.named_answer);
	C.named = C.named_answer = NULL;
	cluster_unsubscribe(C.mine);
	C.mine = NULL;
	cluster_owners_clear();
	if (C.nc != NULL) {
		natsConnection_Close(C.nc);
		natsConnection_Destroy(C.nc);
		C.nc = NULL;
	}
	if (!subs_wait_done(CLUSTER_SUBS_WAIT_MS))
		log_warnx("cluster: libnats still delivers to %u subscriptions "
		    "after %d ms; closing it anyway", atomic_load(&subs_live),
		    CLUSTER_SUBS_WAIT_MS);
	/* libnats's threads end here: no callback can post after this. */
	nats_CloseAndWait(CLUSTER_CLOSE_MS);
}

static const struct service_hooks cluster_hooks = {
	.after_batch = cluster_after_batch,
	.tick = cluster_tick,
	.stop = cluster_stop,
	.tick_ms = CLUSTER_TICK_MS,
};

/* libnats's options for cf's cluster group; -1 and *err if refused. */
static int
make_options(const struct cluster_conf *cl, char **err)
{
	struct nats_link_settings ls;

	nats_link_settings(&ls, cl, NATS_LINK_CLUSTER, C.me);
	ls.on_link = on_link;
	ls.on_error = on_nats_error;
	if (nats_link_options(&C.opts, &ls) != NATS_OK) {
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
	if (nats_link_has_credentials(cl))
		return;
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
	natsStatus s = nats_link_connect_once(&C.nc, C.opts, why,
	    sizeof(why));

	if (s == NATS_OK)
		return s;
	set_why(why);
	log_warnx("cluster: cannot connect to the NATS servers yet: %s; "
	    "retrying", why);
	return nats_link_connect_retry(&C.nc, C.opts, on_link);
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

/* This run's name among the nodes: node, instance, and request ids. */
static void
identity_init(const struct cluster_conf *cl)
{
	uint64_t inst;

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
}

int
cluster_open(const struct config *cf, struct service **svcs, unsigned *n,
    char **err)
{
	const struct cluster_conf *cl = &cf->cluster;
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
	identity_init(cl);
	snprintf(C.prefix, sizeof(C.prefix), "%s", cl->subject_prefix);
	C.cf = config_ref((struct config *)cf);
	C.kvcf = config_ref((struct config *)cf);
	C.makers = cf->dispatchers + 1;
	C.seen = cluster_seen_new(SEEN_IDS);
	warn_no_credentials(cl);
	if (make_options(cl, err) < 0)
		return -1;
	if ((C.svc = service_new("cluster", &cluster_hooks, NULL)) == NULL ||
	    (C.kvsvc = service_new("cluster-kv", &cluster_kv_hooks,
	    NULL)) == NULL) {
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
	route_wide_register(&claims_wide);
	route_watch(on_route_change);
	/* Stopped in reverse: the key-value thread first. */
	svcs[(*n)++] = C.svc;
	svcs[(*n)++] = C.kvsvc;
	return 0;
}

void
cluster_close(void)
{
	route_wide_register(NULL);
	deliver_register(MSG_KIND_NODE, NULL);
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
		cluster_owners_clear();
	if (moved && C.nc != NULL) {
		resubscribe_all();
		log_notice("cluster: subject prefix now %s", C.prefix);
	}
}

void
cluster_reload(const struct config *cf)
{
	if (!cluster_on())
		return;
	service_post_fn(C.svc, reload_task, config_ref((struct config *)cf));
	service_post_fn(C.kvsvc, cluster_kv_reload_task,
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
