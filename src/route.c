/* route.c: the sharded address table, prefix routes, and cross-reactor delivery. */
#include "route.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "proto.h"
#include "util.h"

#define ROUTE_SHARDS	64	/* a power of two */

struct route_entry {
	struct route_entry *next;
	struct route_owner owner;
	uint32_t hash;
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

bool
route_addr_valid(const char *s, size_t len)
{
	static const char ok[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789+._:@-";

	if (len == 0 || len > ROUTE_ADDR_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\0' || strchr(ok, s[i]) == NULL)
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

int
route_claim(const char *addr, const struct route_owner *owner)
{
	uint32_t hash = route_hash(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e;
	int rc = -1;

	pthread_mutex_lock(&sh->lock);
	if (sh->count >= sh->nbuckets)
		shard_grow_locked(sh);
	pe = shard_find(sh, hash, addr);
	if (*pe == NULL) {
		e = xcalloc(1, sizeof(*e));
		e->hash = hash;
		e->owner = *owner;
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
		*pe = e;
		sh->count++;
		rc = 0;
	}
	pthread_mutex_unlock(&sh->lock);
	return rc;
}

static bool
owner_eq(const struct route_owner *a, const struct route_owner *b)
{
	return a->reactor == b->reactor && a->slot == b->slot &&
	    a->gen == b->gen;
}

void
route_release(const char *addr, const struct route_owner *owner)
{
	uint32_t hash = route_hash(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e = NULL;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	if (pe != NULL && *pe != NULL && owner_eq(&(*pe)->owner, owner)) {
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
	free(e);
}

bool
route_lookup(const char *addr, struct route_owner *owner)
{
	uint32_t hash = route_hash(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe;
	bool found = false;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	if (pe != NULL && *pe != NULL) {
		*owner = (*pe)->owner;
		found = true;
	}
	pthread_mutex_unlock(&sh->lock);
	return found;
}

const char *
route_resolve(const struct config *cf, const char *addr,
    struct route_owner *owner)
{
	const struct route_conf *best = NULL;
	size_t best_len = 0;

	if (route_lookup(addr, owner))
		return addr;
	for (size_t i = 0; i < cf->nroutes; i++) {
		const struct route_conf *rc = &cf->routes[i];
		size_t n = strlen(rc->prefix);

		if (n > best_len && strncmp(addr, rc->prefix, n) == 0) {
			best = rc;
			best_len = n;
		}
	}
	if (best == NULL || !route_lookup(best->to, owner))
		return NULL;
	return best->to;
}

struct route_msg *
route_msg_new(size_t len)
{
	return xcalloc(1, sizeof(struct route_msg) + len + 1);
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

	if (c == NULL || conn_is_closing(c) || c->proto->on_deliver == NULL)
		return ROUTE_NO_ROUTE;
	if ((c->flags & CONN_F_PAUSED) ||
	    conn_pending(c) >= lim->output_high_watermark)
		return ROUTE_BUSY;
	return (enum route_verdict)c->proto->on_deliver(c, m);
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
	back = reactor_get(m->sender.reactor);
	if (back == NULL) {
		free(m);
		return;
	}
	m->task.fn = route_verdict_task;
	m->task.arg = m;
	reactor_post_task(back, &m->task);
}

enum route_verdict
route_send(struct conn *c, struct route_msg *m)
{
	struct reactor *r = c->r, *dst;
	enum route_verdict v;

	m->sender.reactor = r->id;
	m->sender.slot = c->slot;
	m->sender.gen = c->gen;
	if (route_resolve(r->cf, m->to, &m->recipient) == NULL ||
	    (dst = reactor_get(m->recipient.reactor)) == NULL) {
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
	reactor_post_task(dst, &m->task);
	return ROUTE_PENDING;
}
