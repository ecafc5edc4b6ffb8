/*
 * store_jetstream.c: the store's messages in a JetStream key-value bucket
 * on the cluster's NATS servers (store.backend = "jetstream"), so that a
 * node's backlog survives the loss of the node. See store_backend.h.
 *
 * The bucket "<prefix>-store" (file storage, store.replicas copies):
 *   m.<node>.<id>   one message and what the store keeps beside it
 *   p.<node>        node has messages here (a partition)
 *   a.<node>        another node is taking node's messages over
 * Each node writes its own partition alone, so its store stays the one
 * writer of what it holds, as with SQLite, and keeps the partition's
 * waiting (ENROUTE) messages in memory (bounded by store.max_bytes), read
 * back at start. A node that is gone from the cluster's nodes bucket
 * (silent past claim_ttl) has its partition taken over by a live one: its
 * messages are written into the taker's partition. A message can then be
 * delivered twice (the dead node may have handed it out), never lost.
 *
 * Nothing is ever deleted (a KV delete leaves a marker per key for good):
 * a message in a final state is written over, and stays for query_sm, and
 * a moved one is written over as moved; the bucket's TTL (default_validity
 * when the bucket was made, at least an hour) removes them. So that it
 * does not remove a waiting message, those are written again once half
 * the bucket's TTL (as it is, not as this run would make it) has passed.
 *
 * Writes between begin and commit are published asynchronously and the
 * commit waits for JetStream to acknowledge them all (group commit). A
 * failed commit reads the partition back: it then holds what JetStream
 * holds, which the store counts again.
 *
 * This runs on the store thread, which may wait on the network; reactors
 * never do.
 */
#include "store_backend.h"

#include <nats/nats.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_wire.h"
#include "config.h"
#include "msg.h"
#include "log.h"
#include "nats_link.h"
#include "store.h"
#include "util.h"

#define JS_ID_BUCKETS	(1u << 16)
#define JS_ACCT_BUCKETS	1024
#define JS_KEY_MAX	(2 + CLUSTER_NODE_MAX + 1 + 20 + 1)
/*
 * Row format: its version, then the fields below, then the message.
 * Version 2 rows' flags say how to read the text; row_decode reads 1.
 */
#define JS_ROW_VERSION	2
#define JS_ROW_FIXED	(1 + 1 + 8 + 8 + 8 + 4 + 1)
/* How long a JetStream call may take, ms, and a commit. */
#define JS_WAIT_MS	3000
#define JS_COMMIT_MS	5000
/* How often, s, partitions are looked at for dead nodes. */
#define JS_ADOPT_EVERY_MIN 2
/* The bucket's TTL at least, s; how often waiting rows are refreshed. */
#define JS_TTL_MIN	3600
#define JS_REFRESH_EVERY_MS 60000
/* The state of a message another node took over (never a real one). */
#define JS_STATE_MOVED	0xFF

/* A waiting (ENROUTE) message. */
struct js_row {
	struct js_row *next;		/* id hash chain */
	struct store_rec rec;		/* rec.m owned */
	uint64_t written;		/* wall clock s it was written */
};

/* An account's ENROUTE rows, in id order. */
struct js_acct {
	struct js_acct *next;
	char	id[65];
	struct js_row **v;
	size_t	n;
	size_t	cap;
};

struct store_backend {
	natsOptions *opts;
	natsConnection *nc;
	jsCtx	*js;
	kvStore	*kv;			/* <prefix>-store */
	kvStore	*nodes;			/* <prefix>-nodes, the cluster's */
	char	node[CLUSTER_NODE_MAX + 1];
	char	bucket[CLUSTER_PREFIX_MAX + 16];
	char	nodes_bucket[CLUSTER_PREFIX_MAX + 16];
	char	subj_prefix[CLUSTER_PREFIX_MAX + 32];	/* "$KV.<bucket>." */
	unsigned replicas;
	unsigned claim_ttl;
	uint64_t ttl;			/* s: the bucket's, as it is */
	bool	loaded;			/* the partition is in memory */
	bool	quiesced;		/* shutting down: no NATS any more */
	bool	changed;		/* for poll: loaded or taken over */
	bool	in_txn;
	bool	txn_failed;		/* a publish failed in this group */
	unsigned npending;		/* publishes this group */
	atomic_bool ack_failed;		/* libnats's thread: an ack said no */
	uint64_t next_load_ms;
	uint64_t next_adopt_ms;
	uint64_t next_refresh_ms;
	uint64_t nrows;
	uint8_t	*buf;
	size_t	bufcap;
	struct js_row *ids[JS_ID_BUCKETS];
	struct js_acct *accts[JS_ACCT_BUCKETS];
};


/* ---- the index -------------------------------------------------------- */

static unsigned
id_hash(uint64_t id)
{
	return (unsigned)((id * 0x9E3779B97F4A7C15ull) >> 48) &
	    (JS_ID_BUCKETS - 1);
}

static struct js_row **
row_slot(struct store_backend *b, uint64_t id)
{
	struct js_row **pp = &b->ids[id_hash(id)];

	while (*pp != NULL && (*pp)->rec.m->id != id)
		pp = &(*pp)->next;
	return pp;
}

static struct js_row *
row_find(struct store_backend *b, uint64_t id)
{
	return *row_slot(b, id);
}

static struct js_acct *
acct_of(struct store_backend *b, const char *id, bool make)
{
	uint32_t h = fnv1a_str(id) % JS_ACCT_BUCKETS;
	struct js_acct *a;

	for (a = b->accts[h]; a != NULL; a = a->next)
		if (strcmp(a->id, id) == 0)
			return a;
	if (!make)
		return NULL;
	a = xcalloc(1, sizeof(*a));
	snprintf(a->id, sizeof(a->id), "%s", id);
	a->next = b->accts[h];
	b->accts[h] = a;
	return a;
}

/* Where id is, or goes, in a's rows. */
static size_t
acct_pos(const struct js_acct *a, uint64_t id)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->v[mid]->rec.m->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
acct_add(struct store_backend *b, struct js_row *r)
{
	struct js_acct *a = acct_of(b, r->rec.account, true);
	size_t i = acct_pos(a, r->rec.m->id);

	if (i < a->n && a->v[i] == r)
		return;
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	memmove(a->v + i + 1, a->v + i, (a->n - i) * sizeof(*a->v));
	a->v[i] = r;
	a->n++;
}

static void
acct_del(struct store_backend *b, struct js_row *r)
{
	struct js_acct *a = acct_of(b, r->rec.account, false);
	size_t i;

	if (a == NULL)
		return;
	i = acct_pos(a, r->rec.m->id);
	if (i < a->n && a->v[i] == r) {
		memmove(a->v + i, a->v + i + 1, (a->n - i - 1) * sizeof(*a->v));
		a->n--;
	}
}

static void index_del(struct store_backend *b, uint64_t id);

/*
 * Puts rec (taking rec->m), written at written, in the index over a row
 * with its id; a final one only takes the row out.
 */
static void
index_set(struct store_backend *b, struct store_rec *rec, uint64_t written)
{
	struct js_row **pp = row_slot(b, rec->m->id), *r = *pp;

	if (rec->state != MSG_STATE_ENROUTE) {
		index_del(b, rec->m->id);
		free(rec->m);
		rec->m = NULL;
		return;
	}
	if (r != NULL) {
		acct_del(b, r);
		free(r->rec.m);
	} else {
		r = xcalloc(1, sizeof(*r));
		*pp = r;
		b->nrows++;
	}
	r->rec = *rec;
	r->written = written;
	rec->m = NULL;
	acct_add(b, r);
}

static void
index_del(struct store_backend *b, uint64_t id)
{
	struct js_row **pp = row_slot(b, id), *r = *pp;

	if (r == NULL)
		return;
	acct_del(b, r);
	*pp = r->next;
	free(r->rec.m);
	free(r);
	b->nrows--;
}

static void
index_clear(struct store_backend *b)
{
	for (size_t i = 0; i < JS_ID_BUCKETS; i++)
		while (b->ids[i] != NULL) {
			struct js_row *r = b->ids[i];

			b->ids[i] = r->next;
			free(r->rec.m);
			free(r);
		}
	for (size_t i = 0; i < JS_ACCT_BUCKETS; i++)
		for (struct js_acct *a = b->accts[i]; a != NULL; a = a->next)
			a->n = 0;
	b->nrows = 0;
}

/* ---- rows on the wire ------------------------------------------------- */

static uint8_t *
put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = bytes; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
	return p + bytes;
}

static uint64_t
get_be(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* rec as a value, in b->buf: its length. */
static size_t
row_encode(struct store_backend *b, const struct store_rec *rec)
{
	size_t alen = strlen(rec->account);
	size_t need = JS_ROW_FIXED + alen + cluster_msg_size(rec->m);
	uint8_t *p;

	if (need > b->bufcap) {
		free(b->buf);
		b->bufcap = need * 2;
		b->buf = xmalloc(b->bufcap);
	}
	p = b->buf;
	*p++ = JS_ROW_VERSION;
	*p++ = rec->state;
	p = put_be(p, rec->due, 8);
	p = put_be(p, rec->expires, 8);
	p = put_be(p, rec->final_date, 8);
	p = put_be(p, rec->attempts, 4);
	*p++ = (uint8_t)alen;
	memcpy(p, rec->account, alen);
	p += alen;
	return (size_t)(p - b->buf) + cluster_msg_encode(rec->m, p);
}

/* A value back into rec (rec->m malloc'd): false if it is not one. */
static bool
row_decode(const uint8_t *p, size_t n, struct store_rec *rec)
{
	size_t alen;

	memset(rec, 0, sizeof(*rec));
	if (n < JS_ROW_FIXED || (p[0] != 1 && p[0] != JS_ROW_VERSION))
		return false;
	rec->state = p[1];
	rec->due = get_be(p + 2, 8);
	rec->expires = get_be(p + 10, 8);
	rec->final_date = get_be(p + 18, 8);
	rec->attempts = (uint32_t)get_be(p + 26, 4);
	alen = p[30];
	if (alen >= sizeof(rec->account) || n < JS_ROW_FIXED + alen)
		return false;
	memcpy(rec->account, p + JS_ROW_FIXED, alen);
	rec->account[alen] = '\0';
	rec->m = cluster_msg_decode(p + JS_ROW_FIXED + alen,
	    n - JS_ROW_FIXED - alen);
	if (rec->m == NULL)
		return false;
	/*
	 * A version 1 row is from before the flags said how to read the
	 * text: an SMPP client's message (it has the submitted destination
	 * address; a line client's has none) is in data_coding.
	 */
	if (p[0] == 1 && !(rec->m->flags & MSG_F_RECEIPT) &&
	    rec->m->dst_addr[0] != '\0')
		rec->m->flags |= MSG_F_CODED;
	return true;
}

static void
row_key(char *out, size_t n, const char *node, uint64_t id)
{
	snprintf(out, n, "m.%s.%llu", node, (unsigned long long)id);
}

/* ---- writes ----------------------------------------------------------- */

/* libnats's thread: JetStream did not take a write. */
static void
on_ack_error(jsCtx *js, jsPubAckErr *pae, void *closure)
{
	struct store_backend *b = closure;

	(void)js;
	(void)pae;
	atomic_store(&b->ack_failed, true);
}

/* Publishes value for key in the group. */
static int
publish(struct store_backend *b, const char *key, const void *value,
    size_t len)
{
	char subj[sizeof(b->subj_prefix) + JS_KEY_MAX];
	natsMsg *msg = NULL;
	natsStatus s;

	if (!b->loaded || b->js == NULL)
		return -1;
	snprintf(subj, sizeof(subj), "%s%s", b->subj_prefix, key);
	s = natsMsg_Create(&msg, subj, NULL, value, (int)len);
	if (s == NATS_OK)
		s = js_PublishMsgAsync(b->js, &msg, NULL);
	natsMsg_Destroy(msg);
	if (s != NATS_OK) {
		b->txn_failed = true;
		return -1;
	}
	b->npending++;
	return 0;
}

static int
publish_row(struct store_backend *b, const struct store_rec *rec)
{
	char key[JS_KEY_MAX];
	size_t n = row_encode(b, rec);

	row_key(key, sizeof(key), b->node, rec->m->id);
	return publish(b, key, b->buf, n);
}

/* ---- the connection and the partition ---------------------------------- */

static void
bucket_names(struct store_backend *b, const struct cluster_conf *cl)
{
	char stream[NATS_LINK_STREAM_MAX];

	nats_link_bucket(b->bucket, sizeof(b->bucket), cl->subject_prefix,
	    "store");
	nats_link_bucket(b->nodes_bucket, sizeof(b->nodes_bucket),
	    cl->subject_prefix, "nodes");
	nats_link_kv_names(cl->subject_prefix, "store", "", stream,
	    sizeof(stream), b->subj_prefix, sizeof(b->subj_prefix));
}

/*
 * The TTL of the bucket as it is: one made by an earlier run keeps the
 * TTL it was made with (a longer default_validity since does not change
 * it), and waiting messages must be written again within it.
 */
static void
bucket_ttl(struct store_backend *b)
{
	kvStatus *st = NULL;
	int64_t ns;

	if (kvStore_Status(&st, b->kv) != NATS_OK)
		return;
	ns = kvStatus_TTL(st);
	kvStatus_Destroy(st);
	if (ns <= 0 || (uint64_t)(ns / 1000000000) == b->ttl)
		return;
	log_notice("store: bucket %s keeps messages %lld s (made so earlier), "
	    "not %llu: waiting messages are written again every %lld s",
	    b->bucket, (long long)(ns / 1000000000),
	    (unsigned long long)b->ttl, (long long)(ns / 2000000000));
	if (ns < (int64_t)JS_TTL_MIN * 1000000000)
		log_warnx("store: bucket %s: a TTL under %d s is too short "
		    "for messages waiting long", b->bucket, JS_TTL_MIN);
	b->ttl = (uint64_t)(ns / 1000000000);
	if (b->ttl < 2)
		b->ttl = 2;
}

/* How often waiting messages are looked at: a quarter of the TTL at most. */
static uint64_t
refresh_every_ms(const struct store_backend *b)
{
	return b->ttl * 250 < JS_REFRESH_EVERY_MS ? b->ttl * 250 :
	    JS_REFRESH_EVERY_MS;
}

/* The store bucket, made if missing; the nodes bucket if it is there. */
static bool
open_buckets(struct store_backend *b)
{
	kvConfig kc;
	natsStatus s;

	if (b->kv == NULL) {
		kvConfig_Init(&kc);
		kc.Bucket = b->bucket;
		kc.History = 1;
		kc.StorageType = js_FileStorage;
		kc.Replicas = (int)b->replicas;
		kc.TTL = (int64_t)b->ttl * 1000000000;
		if ((s = js_CreateKeyValue(&b->kv, b->js, &kc)) != NATS_OK &&
		    (s = js_KeyValue(&b->kv, b->js, b->bucket)) != NATS_OK) {
			b->kv = NULL;
			log_debug("store: JetStream bucket %s: %s", b->bucket,
			    natsStatus_GetText(s));
			return false;
		}
		bucket_ttl(b);
	}
	/* The cluster thread makes it; until then nobody is taken over. */
	if (b->nodes == NULL &&
	    js_KeyValue(&b->nodes, b->js, b->nodes_bucket) != NATS_OK)
		b->nodes = NULL;
	return true;
}

/* The partition key, written again so that the TTL does not take it. */
static bool
mark_partition(struct store_backend *b)
{
	char key[JS_KEY_MAX], val[32];

	snprintf(key, sizeof(key), "p.%s", b->node);
	snprintf(val, sizeof(val), "%lld", (long long)time(NULL));
	return kvStore_PutString(NULL, b->kv, key, val) == NATS_OK;
}

/*
 * Calls fn for every entry under keys (a subject filter) as it is now.
 * The entries' count, or -1.
 */
static long
each_entry(struct store_backend *b, const char *keys,
    void (*fn)(struct store_backend *b, kvEntry *e, void *arg), void *arg)
{
	kvWatcher *w = NULL;
	kvWatchOptions wo;
	kvEntry *e = NULL;
	natsStatus s;
	long n = 0;

	kvWatchOptions_Init(&wo);
	wo.IgnoreDeletes = true;
	wo.Timeout = JS_WAIT_MS;
	if (kvStore_Watch(&w, b->kv, keys, &wo) != NATS_OK)
		return -1;
	/* Entries, then a NULL one: all there was. */
	while ((s = kvWatcher_Next(&e, w, JS_WAIT_MS)) == NATS_OK &&
	    e != NULL) {
		fn(b, e, arg);
		kvEntry_Destroy(e);
		e = NULL;
		n++;
	}
	kvWatcher_Destroy(w);
	return s == NATS_OK ? n : -1;
}

/* kvEntry_Created is in ns since the epoch. */
static uint64_t
entry_time(kvEntry *e)
{
	return (uint64_t)kvEntry_Created(e) / 1000000000;
}

static void
load_one(struct store_backend *b, kvEntry *e, void *arg)
{
	struct store_rec rec;
	unsigned long *bad = arg;

	/* Only what waits; the rest is there for query_sm, or moved. */
	if (row_decode(kvEntry_Value(e), (size_t)kvEntry_ValueLen(e), &rec))
		index_set(b, &rec, entry_time(e));
	else
		(*bad)++;
}

static bool alive(struct store_backend *b, const char *node);

/* Reads this node's partition into memory. true once done. */
static bool
load(struct store_backend *b)
{
	char keys[JS_KEY_MAX];
	unsigned long bad = 0;
	kvEntry *e = NULL;
	natsStatus s;

	b->loaded = false;
	index_clear(b);
	if (b->quiesced ||
	    natsConnection_Status(b->nc) != NATS_CONN_STATUS_CONNECTED ||
	    !open_buckets(b))
		return false;
	/*
	 * Another node is taking this one's messages over (it took this
	 * node for dead): after it, unless it died too.
	 */
	snprintf(keys, sizeof(keys), "a.%s", b->node);
	if ((s = kvStore_Get(&e, b->kv, keys)) == NATS_OK) {
		bool wait = b->nodes == NULL ||
		    alive(b, kvEntry_ValueString(e));

		if (wait)
			log_info("store: node %s is taking over this node's "
			    "messages: waiting for it",
			    kvEntry_ValueString(e));
		else
			kvStore_Delete(b->kv, keys);
		kvEntry_Destroy(e);
		if (wait)
			return false;
	} else if (s != NATS_NOT_FOUND) {
		return false;
	}
	snprintf(keys, sizeof(keys), "m.%s.>", b->node);
	if (each_entry(b, keys, load_one, &bad) < 0) {
		index_clear(b);
		return false;
	}
	if (bad > 0)
		log_err("store: %lu entries of bucket %s are not messages; "
		    "left alone", bad, b->bucket);
	/* The partition is ours, and has messages, from now on. */
	if (!mark_partition(b)) {
		index_clear(b);
		return false;
	}
	b->loaded = true;
	b->changed = true;
	return true;
}

/* ---- taking over a dead node's partition -------------------------------- */

struct names {
	char	(*v)[CLUSTER_NODE_MAX + 1];
	size_t	n;
};

static void
name_one(struct store_backend *b, kvEntry *e, void *arg)
{
	struct names *ns = arg;
	const char *k = kvEntry_Key(e);

	(void)b;
	if (strncmp(k, "p.", 2) != 0 || strlen(k + 2) > CLUSTER_NODE_MAX)
		return;
	ns->v = xrealloc(ns->v, (ns->n + 1) * sizeof(*ns->v));
	snprintf(ns->v[ns->n++], sizeof(ns->v[0]), "%s", k + 2);
}

/* Whether node has its heartbeat in the nodes bucket. In doubt, yes. */
static bool
alive(struct store_backend *b, const char *node)
{
	kvEntry *e = NULL;
	natsStatus s = kvStore_Get(&e, b->nodes, node);

	kvEntry_Destroy(e);
	return s != NATS_NOT_FOUND;
}

struct move {
	const char *from;
	unsigned long moved;
	unsigned long kept;
	bool	failed;
};

/* One of a dead node's messages into this node's partition. */
static void
move_one(struct store_backend *b, kvEntry *e, void *arg)
{
	struct move *mv = arg;
	struct store_rec rec;
	char key[JS_KEY_MAX];
	size_t n;

	if (mv->failed)
		return;
	if (!row_decode(kvEntry_Value(e), (size_t)kvEntry_ValueLen(e), &rec)) {
		mv->kept++;
		return;
	}
	/* Final or moved: left for the TTL. */
	if (rec.state != MSG_STATE_ENROUTE) {
		free(rec.m);
		return;
	}
	/*
	 * Ids are unique across nodes once they have their slots (ids made
	 * before, with no NATS yet, may not be): one the same as ours stays.
	 */
	if (row_find(b, rec.m->id) != NULL) {
		free(rec.m);
		mv->kept++;
		return;
	}
	/* Ours first, then theirs written over as moved. */
	n = row_encode(b, &rec);
	row_key(key, sizeof(key), b->node, rec.m->id);
	if (kvStore_Put(NULL, b->kv, key, b->buf, (int)n) != NATS_OK) {
		free(rec.m);
		mv->failed = true;
		return;
	}
	b->buf[1] = JS_STATE_MOVED;
	if (kvStore_Put(NULL, b->kv, kvEntry_Key(e), b->buf, (int)n) !=
	    NATS_OK) {
		free(rec.m);
		mv->failed = true;
		return;
	}
	index_set(b, &rec, (uint64_t)time(NULL));
	mv->moved++;
}

static void
adopt(struct store_backend *b, const char *dead)
{
	char key[JS_KEY_MAX], keys[JS_KEY_MAX], val[CLUSTER_NODE_MAX + 32];
	struct move mv = { .from = dead };
	kvEntry *e = NULL;
	uint64_t rev = 0;
	natsStatus s;

	/* One taker: whoever makes a.<dead>, or replaces a dead taker's. */
	snprintf(key, sizeof(key), "a.%s", dead);
	snprintf(val, sizeof(val), "%s", b->node);
	s = kvStore_CreateString(&rev, b->kv, key, val);
	if (s != NATS_OK) {
		if (kvStore_Get(&e, b->kv, key) != NATS_OK)
			return;
		if (strcmp(kvEntry_ValueString(e), b->node) != 0 &&
		    alive(b, kvEntry_ValueString(e))) {
			kvEntry_Destroy(e);
			return;
		}
		s = kvStore_UpdateString(&rev, b->kv, key, val,
		    kvEntry_Revision(e));
		kvEntry_Destroy(e);
		if (s != NATS_OK)
			return;
	}
	snprintf(keys, sizeof(keys), "m.%s.>", dead);
	if (each_entry(b, keys, move_one, &mv) < 0 || mv.failed) {
		log_err("store: taking over node %s's messages stopped after "
		    "%lu; again later", dead, mv.moved);
		b->changed |= mv.moved > 0;
		return;
	}
	if (mv.kept == 0) {
		snprintf(keys, sizeof(keys), "p.%s", dead);
		kvStore_Purge(b->kv, keys, NULL);
	}
	kvStore_Purge(b->kv, key, NULL);
	log_notice("store: node %s is gone: took over its %lu messages%s",
	    dead, mv.moved, mv.kept > 0 ? " (some left: see the log)" : "");
	if (mv.kept > 0)
		log_err("store: %lu messages of node %s have ids this node "
		    "uses, or cannot be read: left in the bucket", mv.kept,
		    dead);
	b->changed |= mv.moved > 0;
}

/*
 * Whether another node took this one's messages over (it took this node
 * for dead: cut off, or stopped, past claim_ttl): our partition key gone,
 * or a taker's key there.
 */
static bool
taken_over(struct store_backend *b)
{
	char key[JS_KEY_MAX];
	kvEntry *e = NULL;
	natsStatus s;

	snprintf(key, sizeof(key), "p.%s", b->node);
	if ((s = kvStore_Get(&e, b->kv, key)) == NATS_NOT_FOUND)
		return true;
	kvEntry_Destroy(e);
	e = NULL;
	if (s != NATS_OK)
		return false;
	snprintf(key, sizeof(key), "a.%s", b->node);
	s = kvStore_Get(&e, b->kv, key);
	kvEntry_Destroy(e);
	return s == NATS_OK;
}

/*
 * Takes over the partitions of nodes that are gone; first, whether this
 * one's was taken: then what is still ours is read again, rather than
 * deliver what is now another node's too.
 */
static void
adopt_dead(struct store_backend *b)
{
	struct names ns = { 0 };

	if (b->nodes == NULL && !open_buckets(b))
		return;
	if (b->nodes == NULL)
		return;
	if (taken_over(b)) {
		log_notice("store: another node took this node's messages "
		    "over (it took this node for dead): reading what is "
		    "still ours again");
		b->loaded = false;
		b->next_load_ms = 0;
		b->changed = true;
		index_clear(b);
		return;
	}
	mark_partition(b);
	if (each_entry(b, "p.*", name_one, &ns) >= 0)
		for (size_t i = 0; i < ns.n; i++)
			if (strcmp(ns.v[i], b->node) != 0 &&
			    !alive(b, ns.v[i]))
				adopt(b, ns.v[i]);
	free(ns.v);
}

/* ---- the backend ops ---------------------------------------------------- */

static void js_close(struct store_backend *b);

/* Connected after all: load sees it (a callback makes Connect return). */
static void
on_connected(natsConnection *nc, void *closure)
{
	(void)nc;
	(void)closure;
}

/*
 * Connects once, to log libnats's reason when no server takes us (no
 * answer, a wrong password, a credentials file it cannot use), then
 * again retrying in the background, which keeps that reason to itself.
 */
static natsStatus
js_connect(struct store_backend *b)
{
	char why[256];
	natsStatus s = nats_link_connect_once(&b->nc, b->opts, why,
	    sizeof(why));

	if (s == NATS_OK)
		return s;
	log_warnx("store: cannot connect to the NATS servers yet: %s; "
	    "retrying", why);
	return nats_link_connect_retry(&b->nc, b->opts, on_connected);
}

static struct store_backend *
js_open(const struct config *config, const char *path, bool check_only,
    char **err)
{
	const struct store_conf *cf = &config->store;
	const struct cluster_conf *cl = &config->cluster;
	struct store_backend *b;
	struct nats_link_settings ls;
	jsOptions jo;
	natsStatus s;

	(void)path;		/* its bucket is named after the node */
	if (!cl->enabled) {
		if (asprintf(err, "store.backend \"jetstream\" needs a cluster "
		    "group") < 0)
			*err = NULL;
		return NULL;
	}
	b = xcalloc(1, sizeof(*b));
	memcpy(b->node, cl->node, sizeof(b->node));
	b->node[sizeof(b->node) - 1] = '\0';
	b->replicas = cf->replicas;
	b->claim_ttl = cl->claim_ttl;
	b->ttl = cf->default_validity > JS_TTL_MIN ? cf->default_validity :
	    JS_TTL_MIN;
	bucket_names(b, cl);
	/* -t: the settings were checked; the servers are not asked. */
	if (check_only)
		return b;
	nats_link_settings(&ls, cl, NATS_LINK_STORE, NULL);
	s = nats_link_options(&b->opts, &ls);
	/* Connects in the background when no server answers yet. */
	if (s == NATS_OK && (s = js_connect(b)) == NATS_NOT_YET_CONNECTED)
		s = NATS_OK;
	if (s == NATS_OK) {
		jsOptions_Init(&jo);
		jo.Wait = JS_WAIT_MS;
		jo.PublishAsync.ErrHandler = on_ack_error;
		jo.PublishAsync.ErrHandlerClosure = b;
		jo.PublishAsync.MaxPending = 4096;
		s = natsConnection_JetStream(&b->js, b->nc, &jo);
	}
	if (s != NATS_OK) {
		if (asprintf(err, "JetStream store: cannot set up the NATS "
		    "client: %s", natsStatus_GetText(s)) < 0)
			*err = NULL;
		js_close(b);
		return NULL;
	}
	/* Read now if the servers answer; else at a later tick. */
	if (!load(b))
		log_warnx("store: JetStream bucket %s not readable yet; "
		    "messages are refused until it is", b->bucket);
	b->next_adopt_ms = mono_ms() + 1000;
	b->next_refresh_ms = mono_ms() + refresh_every_ms(b);
	return b;
}

static void
js_close(struct store_backend *b)
{
	if (b == NULL)
		return;
	if (b->js != NULL && b->npending > 0) {
		jsPubOptions po;

		jsPubOptions_Init(&po);
		po.MaxWait = JS_COMMIT_MS;
		js_PublishAsyncComplete(b->js, &po);
	}
	index_clear(b);
	for (size_t i = 0; i < JS_ACCT_BUCKETS; i++)
		while (b->accts[i] != NULL) {
			struct js_acct *a = b->accts[i];

			b->accts[i] = a->next;
			free(a->v);
			free(a);
		}
	kvStore_Destroy(b->kv);
	kvStore_Destroy(b->nodes);
	jsCtx_Destroy(b->js);
	if (b->nc != NULL) {
		natsConnection_Close(b->nc);
		natsConnection_Destroy(b->nc);
	}
	natsOptions_Destroy(b->opts);
	free(b->buf);
	free(b);
}

static int
js_begin(struct store_backend *b, bool durable)
{
	(void)durable;		/* acknowledged by JetStream: durable */
	/*
	 * Cut off: refused now, rather than buffered by libnats to be stored
	 * later, maybe, after the sender heard no.
	 */
	if (!b->loaded || b->quiesced ||
	    natsConnection_Status(b->nc) != NATS_CONN_STATUS_CONNECTED)
		return -1;
	b->in_txn = true;
	b->txn_failed = false;
	b->npending = 0;
	atomic_store(&b->ack_failed, false);
	return 0;
}

static int
js_commit(struct store_backend *b)
{
	jsPubOptions po;
	natsStatus s = NATS_OK;

	if (!b->in_txn)
		return 0;
	b->in_txn = false;
	if (b->npending > 0) {
		jsPubOptions_Init(&po);
		po.MaxWait = JS_COMMIT_MS;
		s = js_PublishAsyncComplete(b->js, &po);
		b->npending = 0;
	}
	if (s == NATS_OK && !b->txn_failed && !atomic_load(&b->ack_failed))
		return 0;
	/*
	 * Some writes may have been taken, some not: what JetStream holds
	 * is the truth, read back (now, or at a later tick).
	 */
	log_err("store: JetStream did not take a group of writes (%s)",
	    s != NATS_OK ? natsStatus_GetText(s) : "refused");
	load(b);
	return -1;
}

static void
js_rollback(struct store_backend *b)
{
	if (b->in_txn) {
		b->in_txn = false;
		load(b);
	}
}

static bool
js_in_txn(struct store_backend *b)
{
	return b->in_txn;
}

static int
js_put(struct store_backend *b, const struct store_rec *rec)
{
	struct store_rec r = *rec;

	if (!b->in_txn || row_find(b, rec->m->id) != NULL ||
	    publish_row(b, rec) < 0)
		return -1;
	r.m = msg_dup(rec->m);
	index_set(b, &r, (uint64_t)time(NULL));
	return 0;
}

static int
js_update(struct store_backend *b, const struct store_rec *rec)
{
	struct js_row *row = row_find(b, rec->m->id);
	struct store_rec r = *rec;

	if (!b->in_txn || row == NULL || publish_row(b, rec) < 0)
		return -1;
	r.m = msg_dup(rec->m);
	index_set(b, &r, (uint64_t)time(NULL));
	return 0;
}

static int
js_mark(struct store_backend *b, uint64_t id, const char *account,
    uint8_t state, uint64_t final_date, uint64_t due, uint32_t attempts,
    bool final_row)
{
	struct js_row *row = row_find(b, id);
	struct store_rec r;

	(void)account;		/* the row has it */
	(void)final_row;	/* the bucket keeps every final row */
	if (!b->in_txn)
		return -1;
	/*
	 * Not in the index of a loaded partition: the row is not ours to
	 * mark any more (another node took this node's messages over while
	 * it was away), as for SQLite a row that is not waiting. A failure
	 * here would be retried every second, and hold the account's pump.
	 */
	if (row == NULL)
		return b->loaded ? 0 : -1;
	r = row->rec;
	r.state = state;
	r.final_date = final_date;
	r.due = due;
	r.attempts = attempts;
	if (publish_row(b, &r) < 0)
		return -1;
	/* Final: out of memory; query_sm reads it from the bucket. */
	if (state != MSG_STATE_ENROUTE) {
		index_del(b, id);
		return 0;
	}
	row->rec.final_date = final_date;
	row->rec.due = due;
	row->rec.attempts = attempts;
	row->written = (uint64_t)time(NULL);
	return 0;
}

static int
js_get(struct store_backend *b, uint64_t id, struct store_rec *rec)
{
	struct js_row *row = row_find(b, id);
	char key[JS_KEY_MAX];
	kvEntry *e = NULL;
	natsStatus s;
	int found = 0;

	if (!b->loaded)
		return -1;
	if (row != NULL) {
		*rec = row->rec;
		rec->m = msg_dup(row->rec.m);
		return 1;
	}
	/* A final one: in the bucket, until its TTL. */
	row_key(key, sizeof(key), b->node, id);
	if ((s = kvStore_Get(&e, b->kv, key)) == NATS_NOT_FOUND)
		return 0;
	if (s != NATS_OK)
		return -1;
	if (row_decode(kvEntry_Value(e), (size_t)kvEntry_ValueLen(e), rec)) {
		if (rec->state == JS_STATE_MOVED) {
			free(rec->m);
			rec->m = NULL;
		} else {
			found = 1;
		}
	}
	kvEntry_Destroy(e);
	return found;
}

/* Calls fn with a copy of row's record; its result. */
static int
call(const struct js_row *row, store_rec_fn *fn, void *arg)
{
	struct store_rec rec = row->rec;
	int r;

	rec.m = msg_dup(row->rec.m);
	r = fn(&rec, arg);
	free(rec.m);
	return r;
}

static int
js_scan(struct store_backend *b, const char *account, uint64_t after,
    unsigned n, store_rec_fn *fn, void *arg)
{
	struct js_acct *a = acct_of(b, account, false);
	int count = 0;

	if (!b->loaded)
		return -1;
	if (a == NULL)
		return 0;
	/*
	 * fn changes nothing here (the store marks rows once a scan is
	 * over); a copy of the few pointers keeps the walk safe anyway.
	 */
	for (size_t i = acct_pos(a, after + 1); i < a->n && count < (int)n;
	    i++) {
		count++;
		if (call(a->v[i], fn, arg) != 0)
			break;
	}
	return count;
}

/* Every ENROUTE row in any order, while fn says go on and n lasts. */
static int
each_enroute(struct store_backend *b, unsigned n,
    bool (*want)(const struct store_rec *rec, const void *key),
    const void *key, store_rec_fn *fn, void *arg)
{
	int count = 0;

	if (!b->loaded)
		return -1;
	for (size_t i = 0; i < JS_ACCT_BUCKETS; i++)
		for (struct js_acct *a = b->accts[i]; a != NULL; a = a->next)
			for (size_t j = 0; j < a->n; j++) {
				if (count >= (int)n)
					return count;
				if (!want(&a->v[j]->rec, key))
					continue;
				count++;
				if (call(a->v[j], fn, arg) != 0)
					return count;
			}
	return count;
}

static bool
want_expired(const struct store_rec *rec, const void *key)
{
	return rec->expires <= *(const uint64_t *)key;
}

static int
js_expired(struct store_backend *b, uint64_t now, unsigned n,
    store_rec_fn *fn, void *arg)
{
	return each_enroute(b, n, want_expired, &now, fn, arg);
}

struct dest_key {
	const char *submitter;
	const char *dst;
};

static bool
want_dest(const struct store_rec *rec, const void *key)
{
	const struct dest_key *k = key;

	return strcmp(rec->m->reply_to, k->submitter) == 0 &&
	    strcmp(rec->m->to, k->dst) == 0;
}

static int
js_by_dest(struct store_backend *b, const char *submitter, const char *dst,
    unsigned n, store_rec_fn *fn, void *arg)
{
	struct dest_key k = { submitter, dst };

	return each_enroute(b, n, want_dest, &k, fn, arg);
}

/* The bucket's TTL purges: final messages are not in memory. */
static int
js_purge(struct store_backend *b, uint64_t before, uint64_t *cursor,
    unsigned n, uint64_t *bytes)
{
	(void)b;
	(void)before;
	(void)n;
	(void)bytes;
	*cursor = 0;
	return 0;
}

/*
 * Writes again the waiting messages written more than half the TTL ago
 * (a long validity), so that the TTL never takes one. Its own group.
 */
static void
refresh(struct store_backend *b)
{
	uint64_t old = (uint64_t)time(NULL) - b->ttl / 2;
	unsigned long n = 0;

	if (js_begin(b, true) < 0)
		return;
	for (size_t i = 0; i < JS_ID_BUCKETS; i++)
		for (struct js_row *r = b->ids[i]; r != NULL; r = r->next)
			if (r->written <= old && publish_row(b, &r->rec) == 0) {
				r->written = (uint64_t)time(NULL);
				n++;
			}
	if (js_commit(b) == 0 && n > 0)
		log_info("store: wrote %lu waiting messages again (the "
		    "bucket's TTL is %llu s)", n, (unsigned long long)b->ttl);
}

static int
js_backlogs(struct store_backend *b, store_backlog_fn *fn, void *arg)
{
	if (!b->loaded)
		return 0;	/* nothing yet: counted when it is read */
	for (size_t i = 0; i < JS_ACCT_BUCKETS; i++)
		for (struct js_acct *a = b->accts[i]; a != NULL; a = a->next) {
			uint64_t bytes = 0;

			if (a->n == 0)
				continue;
			for (size_t j = 0; j < a->n; j++)
				bytes += store_msg_bytes(a->v[j]->rec.m);
			if (fn(a->id, a->n, bytes, arg) != 0)
				return 0;
		}
	return 0;
}

static uint64_t
js_oldest(struct store_backend *b, const char *account)
{
	struct js_acct *a = acct_of(b, account, false);

	return a != NULL && a->n > 0 ? a->v[0]->rec.m->submitted : 0;
}

static int
js_max_id(struct store_backend *b, uint64_t *id)
{
	*id = 0;
	for (size_t i = 0; i < JS_ID_BUCKETS; i++)
		for (struct js_row *r = b->ids[i]; r != NULL; r = r->next)
			if (r->rec.m->id > *id)
				*id = r->rec.m->id;
	return 0;
}

/* Done with NATS: the connection goes now, on the store thread. */
static void
js_quiesce(struct store_backend *b)
{
	if (b->js != NULL && b->npending > 0) {
		jsPubOptions po;

		jsPubOptions_Init(&po);
		po.MaxWait = JS_COMMIT_MS;
		js_PublishAsyncComplete(b->js, &po);
	}
	b->npending = 0;
	b->loaded = false;
	b->quiesced = true;
	kvStore_Destroy(b->kv);
	kvStore_Destroy(b->nodes);
	jsCtx_Destroy(b->js);
	b->kv = b->nodes = NULL;
	b->js = NULL;
	if (b->nc != NULL) {
		natsConnection_Close(b->nc);
		natsConnection_Destroy(b->nc);
		b->nc = NULL;
	}
}

static int
js_poll(struct store_backend *b)
{
	uint64_t now = mono_ms();
	unsigned every = b->claim_ttl / 2;

	if (b->quiesced)
		return 0;
	if (!b->loaded && now >= b->next_load_ms && !b->in_txn) {
		b->next_load_ms = now + 1000;
		if (load(b))
			log_info("store: JetStream bucket %s: %llu messages "
			    "of this node", b->bucket,
			    (unsigned long long)b->nrows);
	}
	if (b->loaded && now >= b->next_adopt_ms && !b->in_txn) {
		if (every < JS_ADOPT_EVERY_MIN)
			every = JS_ADOPT_EVERY_MIN;
		b->next_adopt_ms = now + every * 1000ull;
		adopt_dead(b);
	}
	if (b->loaded && now >= b->next_refresh_ms && !b->in_txn) {
		b->next_refresh_ms = now + refresh_every_ms(b);
		refresh(b);
	}
	if (!b->changed)
		return 0;
	b->changed = false;
	return 1;
}

const struct store_backend_ops store_js_ops = {
	.name = "jetstream",
	.open = js_open,
	.close = js_close,
	.begin = js_begin,
	.commit = js_commit,
	.rollback = js_rollback,
	.in_txn = js_in_txn,
	.put = js_put,
	.update = js_update,
	.mark = js_mark,
	.get = js_get,
	.scan = js_scan,
	.expired = js_expired,
	.by_dest = js_by_dest,
	.purge = js_purge,
	.backlogs = js_backlogs,
	.oldest = js_oldest,
	.max_id = js_max_id,
	.poll = js_poll,
	.quiesce = js_quiesce,
};
