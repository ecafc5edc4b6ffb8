/* route.c: the sharded address table, prefix routes, and cross-reactor delivery. */
#include "route.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "conn.h"
#include "proto.h"
#include "util.h"

#define ROUTE_SHARDS	64	/* a power of two */

/*
 * An address and who holds it: one owner (a router LOGIN), or several
 * sharing it (an SMPP account's receiving binds), taken in turn.
 */
struct route_entry {
	struct route_entry *next;
	uint32_t hash;
	bool	shared;
	uint32_t n;
	uint32_t cap;
	uint32_t turn;
	struct route_owner *owners;	/* &one while cap is 1 */
	struct route_owner one;
	char	addr[ROUTE_ADDR_MAX + 1];
};

/* One lock per shard, never held across I/O or another shard's lock. */
struct route_shard {
	pthread_mutex_t lock;
	struct route_entry **buckets;
	uint32_t nbuckets;	/* 0 or a power of two */
	uint32_t count;
} __attribute__((aligned(CACHE_LINE)));

static struct route_shard shards[ROUTE_SHARDS];
static pthread_once_t shards_once = PTHREAD_ONCE_INIT;

static void
shards_init(void)
{
	for (int i = 0; i < ROUTE_SHARDS; i++)
		pthread_mutex_init(&shards[i].lock, NULL);
}

static uint32_t
route_hash(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static struct route_shard *
shard_of(uint32_t hash)
{
	pthread_once(&shards_once, shards_init);
	return &shards[hash & (ROUTE_SHARDS - 1)];
}

/* Address bytes: A-Z a-z 0-9 + . _ : @ - (checked once per message). */
static bool
addr_char(uint8_t ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || ch == '+' || ch == '.' || ch == '_' ||
	    ch == ':' || ch == '@' || ch == '-';
}

bool
route_addr_valid(const char *s, size_t len)
{
	if (len == 0 || len > ROUTE_ADDR_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!addr_char((uint8_t)s[i]))
			return false;
	return true;
}

static struct route_entry **
shard_find(struct route_shard *sh, uint32_t hash, const char *addr)
{
	struct route_entry **pe;

	if (sh->nbuckets == 0)
		return NULL;
	pe = &sh->buckets[(hash >> 6) & (sh->nbuckets - 1)];
	for (; *pe != NULL; pe = &(*pe)->next)
		if ((*pe)->hash == hash && strcmp((*pe)->addr, addr) == 0)
			return pe;
	return pe;
}

/* Doubles the buckets when entries outnumber them. Shard lock held. */
static void
shard_grow_locked(struct route_shard *sh)
{
	uint32_t n = sh->nbuckets ? sh->nbuckets * 2 : 16;
	struct route_entry **b = xcalloc(n, sizeof(*b));

	for (uint32_t i = 0; i < sh->nbuckets; i++) {
		struct route_entry *e, *next;

		for (e = sh->buckets[i]; e != NULL; e = next) {
			uint32_t k = (e->hash >> 6) & (n - 1);

			next = e->next;
			e->next = b[k];
			b[k] = e;
		}
	}
	free(sh->buckets);
	sh->buckets = b;
	sh->nbuckets = n;
}

static bool
owner_eq(const struct route_owner *a, const struct route_owner *b)
{
	return a->reactor == b->reactor && a->slot == b->slot &&
	    a->gen == b->gen;
}

/* Adds an entry for addr held by owner. Shard lock held. */
static void
shard_insert_locked(struct route_shard *sh, struct route_entry **pe,
    uint32_t hash, const char *addr, const struct route_owner *owner,
    bool shared)
{
	struct route_entry *e = xcalloc(1, sizeof(*e));

	e->hash = hash;
	e->shared = shared;
	e->one = *owner;
	e->owners = &e->one;
	e->n = e->cap = 1;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	*pe = e;
	sh->count++;
}

/* Adds or joins; alone: only if nobody holds addr. */
static int
route_take(const char *addr, const struct route_owner *owner, bool shared)
{
	uint32_t hash = route_hash(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e;
	int rc = -1;

	pthread_mutex_lock(&sh->lock);
	if (sh->count >= sh->nbuckets)
		shard_grow_locked(sh);
	pe = shard_find(sh, hash, addr);
	if ((e = *pe) == NULL) {
		shard_insert_locked(sh, pe, hash, addr, owner, shared);
		rc = 0;
	} else if (shared && e->shared) {
		if (e->n == e->cap) {
			struct route_owner *o = xcalloc(e->cap * 2, sizeof(*o));

			memcpy(o, e->owners, e->n * sizeof(*o));
			if (e->owners != &e->one)
				free(e->owners);
			e->owners = o;
			e->cap *= 2;
		}
		e->owners[e->n++] = *owner;
		rc = 0;
	}
	pthread_mutex_unlock(&sh->lock);
	return rc;
}

int
route_claim(const char *addr, const struct route_owner *owner)
{
	return route_take(addr, owner, false);
}

int
route_join(const char *addr, const struct route_owner *owner)
{
	return route_take(addr, owner, true);
}

/* Drops owner from e; true if e is left empty. Shard lock held. */
static bool
entry_drop_locked(struct route_entry *e, const struct route_owner *owner)
{
	for (uint32_t i = 0; i < e->n; i++) {
		if (!owner_eq(&e->owners[i], owner))
			continue;
		e->owners[i] = e->owners[--e->n];
		break;
	}
	return e->n == 0;
}

void
route_release(const char *addr, const struct route_owner *owner)
{
	uint32_t hash = route_hash(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e = NULL;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	if (pe != NULL && *pe != NULL && entry_drop_locked(*pe, owner)) {
		e = *pe;
		*pe = e->next;
		/* An empty table holds no memory. */
		if (--sh->count == 0) {
			free(sh->buckets);
			sh->buckets = NULL;
			sh->nbuckets = 0;
		}
	}
	pthread_mutex_unlock(&sh->lock);
	if (e != NULL && e->owners != &e->one)
		free(e->owners);
	free(e);
}

bool
route_lookup(const char *addr, struct route_owner *owner)
{
	uint32_t hash = route_hash(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e;
	bool found = false;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	if (pe != NULL && (e = *pe) != NULL) {
		/* One owner: no turn to advance (and no line to dirty). */
		*owner = e->n == 1 ? e->owners[0] : e->owners[e->turn++ % e->n];
		found = true;
	}
	pthread_mutex_unlock(&sh->lock);
	return found;
}

/* The "to" of the longest route whose prefix starts addr, or NULL. */
static const char *
route_by_prefix(const struct config *cf, const char *addr)
{
	const struct route_conf *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < cf->nroutes; i++) {
		const struct route_conf *rc = &cf->routes[i];
		size_t n = strlen(rc->prefix);

		if (n > best_len && strncmp(addr, rc->prefix, n) == 0) {
			best = rc;
			best_len = n;
		}
	}
	return best != NULL ? best->to : NULL;
}

const char *
route_resolve(const struct config *cf, const char *addr, bool prefix_first,
    struct route_owner *owner)
{
	const char *to;

	if (!prefix_first && route_lookup(addr, owner))
		return addr;
	if ((to = route_by_prefix(cf, addr)) != NULL &&
	    route_lookup(to, owner))
		return to;
	if (prefix_first && route_lookup(addr, owner))
		return addr;
	return NULL;
}

struct route_msg *
route_msg_new(size_t len)
{
	struct route_msg *m = xmalloc(sizeof(*m) + len + 1);

	/*
	 * Not calloc: zeroing the whole message (368 bytes and the text, most
	 * of them SMPP strings a line client leaves empty) was 2 % of the time
	 * of cross-reactor routing. The fixed fields are zeroed, the strings
	 * emptied; the text is the caller's to fill.
	 */
	memset(m, 0, offsetof(struct route_msg, src_addr));
	m->src_addr[0] = m->dst_addr[0] = m->reply_to[0] = '\0';
	m->receipted_id[0] = m->from[0] = m->to[0] = '\0';
	m->len = 0;
	m->text[len] = '\0';
	return m;
}

struct route_msg *
route_msg_dup(const struct route_msg *m)
{
	size_t n = route_msg_size(m);

	return memcpy(xmalloc(n), m, n);
}

uint64_t
route_next_id(struct reactor *r)
{
	/* Reactor ids are below 1024: the low bits keep ids apart. */
	return (++r->msg_seq << 10) | r->id;
}

const char *
route_verdict_name(enum route_verdict v)
{
	switch (v) {
	case ROUTE_PENDING:
		return "pending";
	case ROUTE_OK:
		return "ok";
	case ROUTE_NO_ROUTE:
		return "no route";
	case ROUTE_BUSY:
		return "recipient busy";
	case ROUTE_REFUSED:
		return "refused";
	case ROUTE_UNFIT:
		return "unfit";
	}
	return "?";
}

/* Hands m to the recipient's protocol on its own reactor. */
static enum route_verdict
route_deliver(struct reactor *r, struct route_msg *m)
{
	struct conn *c = reactor_slot_get(r, m->recipient.slot,
	    m->recipient.gen);
	const struct limits *lim = &r->cf->limits;
	enum route_verdict v;

	if (c == NULL || conn_is_closing(c) || c->proto->on_deliver == NULL)
		return ROUTE_NO_ROUTE;
	if ((c->flags & CONN_F_PAUSED) ||
	    conn_pending(c) >= lim->output_high_watermark)
		return ROUTE_BUSY;
	v = (enum route_verdict)c->proto->on_deliver(c, m);
	/* Protocols that hear back from the client confirm later. */
	if (v == ROUTE_OK && !c->proto->confirms_delivery)
		route_receipt(r, m, ROUTE_STATE_DELIVERED);
	return v;
}

/* On the sender's reactor: the verdict came back. */
static void
route_verdict_task(struct reactor *r, void *arg)
{
	struct route_msg *m = arg;
	struct conn *c;

	if (!r->done) {
		c = reactor_slot_get(r, m->sender.slot, m->sender.gen);
		if (c != NULL && !(c->flags & CONN_F_CLOSING) &&
		    c->proto->on_verdict != NULL)
			c->proto->on_verdict(c, m);
	}
	free(m);
}

/* On the recipient's reactor: deliver, then send the verdict back. */
static void
route_deliver_task(struct reactor *r, void *arg)
{
	struct route_msg *m = arg;
	struct reactor *back;

	if (r->done) {
		free(m);	/* shutting down: nobody is left to answer */
		return;
	}
	m->verdict = route_deliver(r, m);
	if (m->verdict == ROUTE_OK)
		REACTOR_STAT_ADD(r->stats.routed_remote, 1);
	if ((m->flags & ROUTE_F_NO_VERDICT) ||
	    (back = reactor_get(m->sender.reactor)) == NULL) {
		free(m);
		return;
	}
	m->task.fn = route_verdict_task;
	m->task.arg = m;
	reactor_send(r, back, &m->task);
}

/*
 * Finds m's recipient and delivers m on this reactor or posts it to the
 * recipient's. Returns the verdict, or ROUTE_PENDING once posted.
 */
static enum route_verdict
route_dispatch(struct reactor *r, struct route_msg *m)
{
	struct reactor *dst;
	enum route_verdict v;
	bool found;

	if (m->flags & ROUTE_F_EXACT)
		found = route_lookup(m->to, &m->recipient);
	else
		found = route_resolve(r->cf, m->to,
		    (m->flags & ROUTE_F_PREFIX_FIRST) != 0,
		    &m->recipient) != NULL;
	if (!found || (dst = reactor_get(m->recipient.reactor)) == NULL) {
		free(m);
		return ROUTE_NO_ROUTE;
	}
	if (dst == r) {
		v = route_deliver(r, m);
		if (v == ROUTE_OK)
			REACTOR_STAT_ADD(r->stats.routed_local, 1);
		free(m);
		return v;
	}
	m->task.fn = route_deliver_task;
	m->task.arg = m;
	reactor_send(r, dst, &m->task);
	return ROUTE_PENDING;
}

enum route_verdict
route_send(struct conn *c, struct route_msg *m)
{
	m->sender.reactor = c->r->id;
	m->sender.slot = c->slot;
	m->sender.gen = c->gen;
	return route_dispatch(c->r, m);
}

void
route_forward(struct reactor *r, struct route_msg *m)
{
	m->flags |= ROUTE_F_NO_VERDICT;
	m->sender.reactor = ROUTE_NO_REACTOR;
	route_dispatch(r, m);
}

/* "YYMMDDhhmm" in UTC, as receipts write dates. */
static void
receipt_date(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%y%m%d%H%M", &tm);
}

void
route_receipt(struct reactor *r, const struct route_msg *orig, uint8_t state)
{
	char sub[16], done[16], text[200];
	struct route_msg *m;
	bool ok = state == ROUTE_STATE_DELIVERED;
	int n;

	if (!(orig->registered_delivery & 0x01) || orig->reply_to[0] == '\0')
		return;
	receipt_date(orig->submitted, sub, sizeof(sub));
	receipt_date((uint64_t)time(NULL), done, sizeof(done));
	n = snprintf(text, sizeof(text), "id:%llu sub:001 dlvrd:%s submit "
	    "date:%s done date:%s stat:%s err:%s text:%.20s",
	    (unsigned long long)orig->id, ok ? "001" : "000", sub, done,
	    ok ? "DELIVRD" : "UNDELIV", ok ? "000" : "001",
	    orig->flags & ROUTE_F_RECEIPT ? "" : (const char *)orig->text);
	m = route_msg_new((size_t)n);
	memcpy(m->text, text, (size_t)n);
	m->len = (size_t)n;
	m->id = route_next_id(r);
	m->flags = ROUTE_F_EXACT | ROUTE_F_RECEIPT;
	m->esm_class = ROUTE_ESM_RECEIPT;
	m->message_state = state;
	snprintf(m->receipted_id, sizeof(m->receipted_id), "%llu",
	    (unsigned long long)orig->id);
	/* The receipt travels back: from the recipient to the submitter. */
	snprintf(m->from, sizeof(m->from), "%s", orig->to);
	snprintf(m->to, sizeof(m->to), "%s", orig->reply_to);
	memcpy(m->src_addr, orig->dst_addr, sizeof(m->src_addr));
	memcpy(m->dst_addr, orig->src_addr, sizeof(m->dst_addr));
	m->src_ton = orig->dst_ton;
	m->src_npi = orig->dst_npi;
	m->dst_ton = orig->src_ton;
	m->dst_npi = orig->src_npi;
	route_forward(r, m);
}
