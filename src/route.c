/* route.c: the sharded address table and prefix routes; any thread, no I/O. */
#include "route.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
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
	bool	pending;	/* claimed here, the cluster not yet agreed */
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
static void (*watcher)(const char *addr);
static const struct route_wide_ops *_Atomic wide;

void
route_watch(void (*fn)(const char *addr))
{
	watcher = fn;
}
static pthread_once_t shards_once = PTHREAD_ONCE_INIT;

static void
shards_init(void)
{
	for (int i = 0; i < ROUTE_SHARDS; i++)
		pthread_mutex_init(&shards[i].lock, NULL);
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
	/* By table: a load and a test a character, not nine compares. */
	static const uint8_t ok[256] = {
		['+'] = 1, ['-'] = 1, ['.'] = 1, ['0'] = 1, ['1'] = 1,
		['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,
		['7'] = 1, ['8'] = 1, ['9'] = 1, [':'] = 1, ['@'] = 1,
		['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,
		['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
		['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1,
		['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
		['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1,
		['Z'] = 1, ['_'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,
		['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
		['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1,
		['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
		['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1,
		['x'] = 1, ['y'] = 1, ['z'] = 1,
	};

	return ok[ch] != 0;
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

/* Adds an entry for addr held by owner. Shard lock held. */
static void
shard_insert_locked(struct route_shard *sh, struct route_entry **pe,
    uint32_t hash, const char *addr, const struct route_owner *owner,
    bool shared, bool pending)
{
	struct route_entry *e = xcalloc(1, sizeof(*e));

	e->hash = hash;
	e->shared = shared;
	e->pending = pending;
	e->one = *owner;
	e->owners = &e->one;
	e->n = e->cap = 1;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	*pe = e;
	sh->count++;
}

/*
 * Adds or joins; alone: only if nobody holds addr. Pending: nobody is told
 * yet (route_confirm tells).
 */
static int
route_take(const char *addr, const struct route_owner *owner, bool shared,
    bool pending)
{
	uint32_t hash = fnv1a_str(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e;
	int rc = -1;

	pthread_mutex_lock(&sh->lock);
	if (sh->count >= sh->nbuckets)
		shard_grow_locked(sh);
	pe = shard_find(sh, hash, addr);
	if ((e = *pe) == NULL) {
		shard_insert_locked(sh, pe, hash, addr, owner, shared,
		    pending);
		rc = pending ? 0 : 1;
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
	if (rc == 1) {
		if (watcher != NULL)
			watcher(addr);
		rc = 0;
	}
	return rc;
}

int
route_claim(const char *addr, const struct route_owner *owner)
{
	return route_take(addr, owner, false, false);
}

int
route_claim_pending(const char *addr, const struct route_owner *owner)
{
	return route_take(addr, owner, false, true);
}

void
route_confirm(const char *addr, const struct route_owner *owner)
{
	uint32_t hash = fnv1a_str(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e;
	bool told = false;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	if (pe != NULL && (e = *pe) != NULL && e->pending && e->n == 1 &&
	    route_owner_eq(&e->owners[0], owner)) {
		e->pending = false;
		told = true;
	}
	pthread_mutex_unlock(&sh->lock);
	if (told && watcher != NULL)
		watcher(addr);
}

int
route_join(const char *addr, const struct route_owner *owner)
{
	return route_take(addr, owner, true, false);
}

/* Drops owner from e; true if e is left empty. Shard lock held. */
static bool
entry_drop_locked(struct route_entry *e, const struct route_owner *owner)
{
	for (uint32_t i = 0; i < e->n; i++) {
		if (!route_owner_eq(&e->owners[i], owner))
			continue;
		e->owners[i] = e->owners[--e->n];
		break;
	}
	return e->n == 0;
}

void
route_release(const char *addr, const struct route_owner *owner)
{
	uint32_t hash = fnv1a_str(addr);
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
	/* A pending one: nobody was told it was there. */
	if (e != NULL && !e->pending && watcher != NULL)
		watcher(addr);
	if (e != NULL && e->owners != &e->one)
		free(e->owners);
	free(e);
}

bool
route_lookup(const char *addr, struct route_owner *owner)
{
	uint32_t hash = fnv1a_str(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe, *e;
	bool found = false;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	if (pe != NULL && (e = *pe) != NULL && !e->pending) {
		/* One owner: no turn to advance (and no line to dirty). */
		*owner = e->n == 1 ? e->owners[0] : e->owners[e->turn++ % e->n];
		found = true;
	}
	pthread_mutex_unlock(&sh->lock);
	return found;
}

/*
 * Whether addr is held, and (claimed) whether it is held alone or pending
 * (claimed here, the cluster not yet agreed).
 */
static bool
route_probe(const char *addr, bool *claimed)
{
	uint32_t hash = fnv1a_str(addr);
	struct route_shard *sh = shard_of(hash);
	struct route_entry **pe;
	bool held;

	pthread_mutex_lock(&sh->lock);
	pe = shard_find(sh, hash, addr);
	held = pe != NULL && *pe != NULL && !(*pe)->pending;
	*claimed = pe != NULL && *pe != NULL && !(*pe)->shared;
	pthread_mutex_unlock(&sh->lock);
	return held;
}

bool
route_is_held(const char *addr)
{
	bool claimed;

	return route_probe(addr, &claimed);
}

bool
route_is_claimed(const char *addr)
{
	bool claimed;

	route_probe(addr, &claimed);
	return claimed;
}

/* Whether the route rc's prefix is the l octets addr starts with. */
static inline bool
route_prefix_is(const struct route_conf *rc, const char *addr, size_t l)
{
	size_t i = 0;

	if (rc->prefix[l] != '\0')
		return false;
	while (i < l && rc->prefix[i] == addr[i])
		i++;
	return i == l;
}

const struct route_conf *
route_conf_by_prefix(const struct config *cf, const char *addr)
{
	const struct route_conf *best = NULL;
	const uint32_t *slots = cf->route_slots;
	uint64_t lens = cf->route_lens;
	size_t mask = cf->route_nslots - 1;
	uint32_t h = FNV1A_START;

	/*
	 * addr's prefixes, shortest first, as long as the routes' go: each of
	 * a length some route has is looked up; the last found wins.
	 */
	for (size_t l = 1; lens != 0 && addr[l - 1] != '\0'; l++, lens >>= 1) {
		h = fnv1a_step(h, (unsigned char)addr[l - 1]);
		if (!(lens & 1))
			continue;
		for (size_t j = h & mask; slots[j] != 0; j = (j + 1) & mask)
			if (route_prefix_is(&cf->routes[slots[j] - 1], addr,
			    l)) {
				best = &cf->routes[slots[j] - 1];
				break;
			}
	}
	return best;
}

const char *
route_by_prefix(const struct config *cf, const char *addr)
{
	const struct route_conf *best = route_conf_by_prefix(cf, addr);

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

void
route_wide_register(const struct route_wide_ops *ops)
{
	atomic_store_explicit(&wide, ops, memory_order_release);
}

static const struct route_wide_ops *
wide_ops(void)
{
	return atomic_load_explicit(&wide, memory_order_acquire);
}

bool
route_wide_on(void)
{
	return wide_ops() != NULL;
}

bool
route_wide_up(void)
{
	const struct route_wide_ops *ops = wide_ops();

	return ops != NULL && ops->up();
}

int
route_wide_claim(struct route_claim *q)
{
	const struct route_wide_ops *ops = wide_ops();

	if (ops == NULL)
		return -1;
	ops->claim(q);
	return 0;
}

void
route_wide_release(const char *addr)
{
	const struct route_wide_ops *ops = wide_ops();

	if (ops != NULL)
		ops->release(addr);
}
