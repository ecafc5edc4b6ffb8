/*
 * cluster_kv.c: the key-value thread, "cluster-kv": the cluster's state in
 * JetStream key-value buckets (see cluster.h): LOGIN's cluster-wide
 * claims, this node's heartbeat, and the id slots that keep message ids
 * unique across nodes. JetStream's calls wait (at most request_timeout),
 * so they run here and never hold up messages on the cluster thread
 * (cluster.c). A session whose claim another node took is evicted through
 * its protocol (proto_evict).
 */
#include "cluster_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "log.h"
#include "nats_link.h"
#include "proto.h"
#include "service.h"
#include "util.h"

/* An address this node claimed, as the key-value thread knows it. */
struct claimed {
	struct claimed *next;
	bool	leaving;		/* given up here, not yet deleted there */
	char	addr[ROUTE_ADDR_MAX + 1];
};

/* The bucket named what, of the prefix the key-value thread has now. */
static void
bucket_name(char *out, size_t n, const char *what)
{
	nats_link_bucket(out, n, C.kvcf->cluster.subject_prefix, what);
}

/* The stream of bucket what, and the subject of key in it. */
static void
kv_names(const char *what, const char *key, char *stream, size_t sn,
    char *subj, size_t n)
{
	nats_link_kv_names(C.kvcf->cluster.subject_prefix, what, key, stream,
	    sn, subj, n);
}

/* ---- claims (JetStream KV) ------------------------------------------- */

static void
kv_close(void)
{
	cluster_unsubscribe(C.watch);
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
		cluster_note_error("bucket TTL", s);
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
	on->task.fn = cluster_owner_task;
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
		cluster_note_error("watch the claims", s);
	}
	cluster_track(C.watch);
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
		cluster_note_error("jetstream", s);
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
		cluster_note_error("heartbeat", s);
		return;
	}
	/*
	 * Silent past claim_ttl (cut off, or the process stopped): the other
	 * nodes took us for dead, and may have taken our addresses. The
	 * last beat may have been stored as late as it began, and this one
	 * as late as now, when the put returned (it can wait request_timeout
	 * on a slow JetStream): measured so, not from when this one began.
	 */
	if (C.beat_last_ms != 0 && mono_ms() - C.beat_last_ms >=
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
		cluster_note_error(what, s);
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
	cluster_note_error("claim", s);
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

static enum route_claim_result
claim_kv(const char *addr)
{
	char key[CLUSTER_TOKEN_MAX + 1], val[sizeof(C.me) + 1];

	if (!cluster_up() || !kv_open())
		return ROUTE_UNAVAILABLE;
	/*
	 * Never claim while our own heartbeat may be missing (just back from
	 * an outage): another node would take the claim for a dead one's.
	 */
	if (!C.beat_ok) {
		C.beat_at_ms = 0;
		heartbeat(mono_ms());
		if (!C.beat_ok)
			return ROUTE_UNAVAILABLE;
	}
	cluster_token_encode(addr, key);
	/* A few rounds: another node may take or free it meanwhile. */
	for (int round = 0; round < 3; round++) {
		uint64_t rev;
		int held, w;

		if ((held = kv_leader_get("claims", key, val, sizeof(val),
		    &rev)) < 0)
			return ROUTE_UNAVAILABLE;
		/* Ours (a session here just left it): keep it. */
		if (held && strcmp(val, C.me) == 0)
			return ROUTE_CLAIMED;
		if (held && holder_alive(val))
			return ROUTE_IN_USE;
		/* Free, or its node is gone: ours, unless another was first. */
		if ((w = claim_write(key, C.me, rev)) != 0)
			return w > 0 ? ROUTE_CLAIMED : ROUTE_UNAVAILABLE;
	}
	return ROUTE_IN_USE;
}

static struct claimed **
claimed_slot(const char *addr)
{
	struct claimed **pp =
	    &C.claimed[fnv1a_str(addr) & (SUB_BUCKETS - 1)];

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

			next = c->next;
			if (!route_is_claimed(c->addr)) {
				leaving_set(c);
				continue;
			}
			if (claim_kv(c->addr) != ROUTE_IN_USE)
				continue;
			log_warnx("cluster: %s was claimed by another node while "
			    "this one was cut off: closing its session here",
			    c->addr);
			/* Its protocol tells the client (router: ERR 409). */
			if (route_lookup(c->addr, &o) &&
			    o.kind == ROUTE_OWNER_CONN &&
			    proto_evict(&o.conn, PROTO_EVICT_CLAIM_LOST) == 0) {
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
	struct route_claim *q = arg;
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
	struct route_claim *q = arg;

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
	struct route_claim *q = arg;

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
		cluster_note_error("flush", st);
	for (size_t i = 0; i < C.nlogins; i++)
		claim_answer(NULL, C.logins[i], MAILBOX_RUN);
	C.nlogins = 0;
}

static void
claim_task(void *owner, void *arg, enum mailbox_status st)
{
	struct route_claim *q = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		free(q);
		return;
	}
	q->result = claim_kv(q->addr);
	if (q->result == ROUTE_CLAIMED) {
		struct route_owner o = route_owner_conn(q->conn);

		fault_claim_stall();
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
cluster_claim(struct route_claim *q)
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
			cluster_note_error("id slots", s);
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
		cluster_note_error("id slots", s);
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

/*
 * The n slots in have (listed in list) are ours for good: the makers'
 * ids end in them from now on, if there are as many as they need.
 */
static void
slots_use(const unsigned *have, int n, unsigned need, const char *list)
{
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

/* This node's slots: those it had, and more if it needs more. */
static void
slots_lease(void)
{
	unsigned have[SLOTS], need = C.makers < SLOTS ? C.makers : SLOTS;
	char key[CLUSTER_NODE_MAX + 3], list[SLOTS * 5 + 1];
	unsigned start = fnv1a_str(C.node) % SLOTS;
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
	slots_use(have, n, need, list);
}

/* ---- the thread ------------------------------------------------------ */

/* The key-value thread: the connection moved or went down. */
void
cluster_kv_link_task(void *owner, void *arg, enum mailbox_status st)
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

const struct service_hooks cluster_kv_hooks = {
	.after_batch = kv_after_batch,
	.tick = kv_tick,
	.stop = kv_stop,
	.tick_ms = CLUSTER_TICK_MS,
};

void
cluster_kv_reload_task(void *owner, void *arg, enum mailbox_status st)
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

