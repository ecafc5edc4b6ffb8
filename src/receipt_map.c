/* receipt_map.c: SMS centres' message ids as keys, and the bounded map from them to what our submits left for their receipts. */
#include "receipt_map.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Entries looked at past their expiry per call: a bounded step. */
#define RECEIPT_EXPIRE_STEP	64
/*
 * Entries past the limit dropped by one call, at most: a reload that
 * lowers upstream_receipts.limit by a million does not hold the lock
 * (every reactor's receipts) while it frees them all at once.
 */
#define RECEIPT_TRIM_STEP	1024
#define RECEIPT_BUCKETS_MIN	1024

/* The value of a decimal id, leading zeros aside; false if none fits. */
static bool
id_dec(const char *id, size_t len, uint64_t *v)
{
	uint64_t x = 0;

	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned char)id[i] - '0';

		/* Overflow checked without a division a digit. */
		if (d > 9 || __builtin_mul_overflow(x, 10, &x) ||
		    __builtin_add_overflow(x, d, &x))
			return false;
	}
	*v = x;
	return true;
}

/* The value of a hexadecimal id, in either case; false if none fits. */
static bool
id_hex(const char *id, size_t len, uint64_t *v)
{
	uint64_t x = 0;

	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned c = (unsigned char)id[i], d;

		/* ASCII by hand: ctype's calls cost more than the digits. */
		if (c - '0' <= 9)
			d = c - '0';
		else if ((c | 0x20) - 'a' <= 5)
			d = (c | 0x20) - 'a' + 10;
		else
			return false;
		if (x >> 60 != 0)
			return false;
		x = x << 4 | d;
	}
	*v = x;
	return true;
}

static unsigned
key_str(struct receipt_key *k, const char *id, size_t len)
{
	k->kind = RECEIPT_KEY_STR;
	k->len = len;
	memcpy(k->str, id, len);
	k->str[len] = '\0';
	return 1;
}

/* Adds value v as a key unless one of the n before has it already. */
static unsigned
key_val(struct receipt_key *keys, unsigned n, bool ok, uint64_t v)
{
	if (!ok)
		return 0;
	for (unsigned i = 0; i < n; i++)
		if (keys[i].kind == RECEIPT_KEY_VAL && keys[i].val == v)
			return 0;
	keys[n].kind = RECEIPT_KEY_VAL;
	keys[n].val = v;
	keys[n].len = 0;
	keys[n].str[0] = '\0';
	return 1;
}

/*
 * The auto form's keys: the text in lower case, its decimal value and
 * its hexadecimal one, all read in one pass over the id (two keys are
 * made for every submit_sm_resp and every receipt).
 */
static unsigned
keys_auto(const char *id, size_t len, struct receipt_key *keys)
{
	uint64_t dec = 0, hex = 0;
	bool dok = true, hok = true;
	unsigned n;

	keys[0].kind = RECEIPT_KEY_STR;
	keys[0].len = len;
	for (size_t i = 0; i < len; i++) {
		unsigned c = (unsigned char)id[i], d = c - '0';

		if (c - 'A' <= 'Z' - 'A')
			c += 32;
		keys[0].str[i] = (char)c;
		if (d > 9) {
			dok = false;
			d = c - 'a' + 10;
			if (d - 10 > 5)
				hok = false;
		}
		/*
		 * Any 19 decimal digits fit 64 bits, and any 16 hexadecimal
		 * ones: only the digits past those are checked.
		 */
		if (i < 19)
			dec = dec * 10 + d;
		else if (dok && (__builtin_mul_overflow(dec, 10, &dec) ||
		    __builtin_add_overflow(dec, d, &dec)))
			dok = false;
		if (i >= 16 && hex >> 60 != 0)
			hok = false;
		hex = hex << 4 | (d & 0xf);
	}
	keys[0].str[len] = '\0';
	n = 1;
	n += key_val(keys, n, dok, dec);
	n += key_val(keys, n, hok, hex);
	return n;
}

unsigned
receipt_id_keys(unsigned form, bool receipt, const char *id, size_t len,
    struct receipt_key *keys)
{
	uint64_t v = 0;
	bool ok;

	if (len == 0 || len > RECEIPT_ID_MAX)
		return 0;
	switch (form) {
	case UPSTREAM_RECEIPT_SAME:
		return key_str(&keys[0], id, len);
	case UPSTREAM_RECEIPT_HEX:
	case UPSTREAM_RECEIPT_DEC:
		/* hex: a receipt has the hex of the decimal id we got. */
		ok = (form == UPSTREAM_RECEIPT_HEX) == receipt ?
		    id_hex(id, len, &v) : id_dec(id, len, &v);
		if (ok)
			return key_val(keys, 0, true, v);
		return key_str(&keys[0], id, len);
	default:
		return keys_auto(id, len, keys);
	}
}

/* One key of an entry, in its hash chain. */
struct receipt_node {
	struct receipt_node *next;
	struct receipt_entry *e;
	uint64_t hash;
	uint64_t val;
	enum receipt_key_kind kind;
};

/*
 * An entry. Its upstream's name is the map's one copy of it, and the
 * text of its STR key takes only its own length: at a million entries
 * each byte is a megabyte.
 */
struct receipt_entry {
	struct receipt_entry *older, *newer;	/* in the age list */
	uint64_t added;
	unsigned nnodes;
	struct receipt_node nodes[RECEIPT_KEYS_MAX];
	const char *upstream;		/* in map->names */
	struct receipt_orig o;
	size_t	len;
	char	str[];			/* the STR key's text */
};

/* An upstream's name, kept once for all its entries. */
struct receipt_name {
	struct receipt_name *next;
	char	name[];
};

/*
 * One lock for the whole map: every operation is a few hash probes, so
 * it is held for well under a microsecond, and a receipt may arrive on
 * any reactor's session, not the one whose submit filed it. Keys are
 * made and hashed before it is taken, entries allocated before and
 * freed after.
 */
struct receipt_map {
	pthread_mutex_t lock;
	struct receipt_node **buckets;
	size_t	nbuckets;		/* a power of two */
	size_t	nnodes;
	size_t	count;
	struct receipt_entry *oldest, *newest;
	struct receipt_name *names;	/* few: the upstreams ever seen */
};

struct receipt_map *
receipt_map_new(void)
{
	struct receipt_map *map = xcalloc(1, sizeof(*map));
	pthread_mutexattr_t a;

	/*
	 * Held for a few probes, by every reactor: a waiter spins a while
	 * before it sleeps in the kernel (two syscalls a wait, else).
	 */
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&map->lock, &a);
	pthread_mutexattr_destroy(&a);
	map->nbuckets = RECEIPT_BUCKETS_MIN;
	map->buckets = xcalloc(map->nbuckets, sizeof(*map->buckets));
	return map;
}

void
receipt_map_free(struct receipt_map *map)
{
	struct receipt_entry *e, *next;

	if (map == NULL)
		return;
	for (e = map->oldest; e != NULL; e = next) {
		next = e->newer;
		free(e);
	}
	while (map->names != NULL) {
		struct receipt_name *nm = map->names;

		map->names = nm->next;
		free(nm);
	}
	free(map->buckets);
	pthread_mutex_destroy(&map->lock);
	free(map);
}

/* FNV-1a: the upstream's name, where every key's hash starts. */
static uint64_t
name_hash(const char *upstream)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)upstream;
	    *p != '\0'; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* FNV-1a on from the name's hash h over the key. */
static uint64_t
key_hash(uint64_t h, const struct receipt_key *k)
{
	const unsigned char *p;
	size_t n;

	h = (h ^ (unsigned)k->kind) * 0x100000001b3ull;
	p = k->kind == RECEIPT_KEY_STR ? (const unsigned char *)k->str :
	    (const unsigned char *)&k->val;
	n = k->kind == RECEIPT_KEY_STR ? k->len : sizeof(k->val);
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h ^ h >> 29;
}

static void
map_grow_locked(struct receipt_map *map)
{
	size_t nb = map->nbuckets * 2;
	struct receipt_node **b = xcalloc(nb, sizeof(*b));

	for (size_t i = 0; i < map->nbuckets; i++) {
		struct receipt_node *n, *next;

		for (n = map->buckets[i]; n != NULL; n = next) {
			next = n->next;
			n->next = b[n->hash & (nb - 1)];
			b[n->hash & (nb - 1)] = n;
		}
	}
	free(map->buckets);
	map->buckets = b;
	map->nbuckets = nb;
}

/*
 * Takes e out of the chains and the age list onto *gone, to be freed
 * (entries_free) once the lock is let go: free may wait on another
 * thread's arena, and every reactor's receipts wait on this lock.
 */
static void
entry_drop_locked(struct receipt_map *map, struct receipt_entry *e,
    struct receipt_entry **gone)
{
	for (unsigned i = 0; i < e->nnodes; i++) {
		struct receipt_node **pp =
		    &map->buckets[e->nodes[i].hash & (map->nbuckets - 1)];

		while (*pp != &e->nodes[i])
			pp = &(*pp)->next;
		*pp = e->nodes[i].next;
		map->nnodes--;
	}
	if (e->older != NULL)
		e->older->newer = e->newer;
	else
		map->oldest = e->newer;
	if (e->newer != NULL)
		e->newer->older = e->older;
	else
		map->newest = e->older;
	map->count--;
	e->newer = *gone;
	*gone = e;
}

/* Frees what entry_drop_locked took out. */
static void
entries_free(struct receipt_entry *gone)
{
	while (gone != NULL) {
		struct receipt_entry *next = gone->newer;

		free(gone);
		gone = next;
	}
}

static bool
entry_expired(const struct receipt_entry *e, uint64_t now,
    const struct receipt_limits *lim)
{
	return lim->expiry > 0 && now >= e->added + lim->expiry;
}

/*
 * Drops expired entries and, past limit (with room for room more), the
 * oldest: each a bounded step, so that a map over a lowered limit comes
 * down over the next calls, never growing meanwhile.
 */
static void
map_trim_locked(struct receipt_map *map, uint64_t now,
    const struct receipt_limits *lim, size_t room, struct receipt_entry **gone)
{
	unsigned step = 0;

	while (map->oldest != NULL && step++ < RECEIPT_EXPIRE_STEP &&
	    entry_expired(map->oldest, now, lim))
		entry_drop_locked(map, map->oldest, gone);
	step = 0;
	while (map->oldest != NULL && map->count + room > lim->limit &&
	    step++ < RECEIPT_TRIM_STEP)
		entry_drop_locked(map, map->oldest, gone);
}

static void
entry_link_locked(struct receipt_map *map, struct receipt_entry *e)
{
	for (unsigned i = 0; i < e->nnodes; i++) {
		struct receipt_node *n = &e->nodes[i];
		struct receipt_node **b = &map->buckets[n->hash &
		    (map->nbuckets - 1)];

		/* At the chain's head: the newest entry of a key wins. */
		n->next = *b;
		*b = n;
		map->nnodes++;
	}
	e->older = map->newest;
	e->newer = NULL;
	if (map->newest != NULL)
		map->newest->newer = e;
	else
		map->oldest = e;
	map->newest = e;
	map->count++;
}

/* The map's copy of upstream's name, made on first use. */
static const char *
map_name_locked(struct receipt_map *map, const char *upstream)
{
	struct receipt_name *nm;
	size_t n = strlen(upstream);

	for (nm = map->names; nm != NULL; nm = nm->next)
		if (strcmp(nm->name, upstream) == 0)
			return nm->name;
	nm = xmalloc(sizeof(*nm) + n + 1);
	memcpy(nm->name, upstream, n + 1);
	nm->next = map->names;
	map->names = nm;
	return nm->name;
}

int
receipt_map_add(struct receipt_map *map, const char *upstream,
    const struct receipt_key *keys, unsigned n, const struct receipt_orig *o,
    uint64_t now, const struct receipt_limits *lim)
{
	struct receipt_entry *e, *gone = NULL;
	uint64_t h0;
	size_t slen = 0;

	if (n == 0 || n > RECEIPT_KEYS_MAX || lim->limit == 0) {
		errno = EINVAL;
		return -1;
	}
	h0 = name_hash(upstream);
	for (unsigned i = 0; i < n; i++)
		if (keys[i].kind == RECEIPT_KEY_STR)
			slen = keys[i].len;
	/* Each field is set below (the links when it is linked): no zeroing
	 * of the few hundred octets an entry takes, one per submit. */
	e = xmalloc(sizeof(*e) + slen + 1);
	e->added = now;
	e->nnodes = n;
	e->o = *o;
	e->len = 0;
	e->str[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		e->nodes[i] = (struct receipt_node){ .e = e,
		    .hash = key_hash(h0, &keys[i]), .val = keys[i].val,
		    .kind = keys[i].kind };
		if (keys[i].kind == RECEIPT_KEY_STR) {
			memcpy(e->str, keys[i].str, keys[i].len + 1);
			e->len = keys[i].len;
		}
	}
	pthread_mutex_lock(&map->lock);
	e->upstream = map_name_locked(map, upstream);
	map_trim_locked(map, now, lim, 1, &gone);
	while (map->nnodes + n > map->nbuckets)
		map_grow_locked(map);
	entry_link_locked(map, e);
	pthread_mutex_unlock(&map->lock);
	entries_free(gone);
	return 0;
}

static bool
node_matches(const struct receipt_node *n, const char *upstream,
    const struct receipt_key *k, uint64_t hash)
{
	if (n->hash != hash || n->kind != k->kind)
		return false;
	if (k->kind == RECEIPT_KEY_VAL ? n->val != k->val :
	    n->e->len != k->len || memcmp(n->e->str, k->str, k->len) != 0)
		return false;
	return strcmp(n->e->upstream, upstream) == 0;
}

static struct receipt_entry *
map_lookup_locked(struct receipt_map *map, const char *upstream,
    const struct receipt_key *keys, const uint64_t *hashes, unsigned nkeys,
    uint64_t now, const struct receipt_limits *lim)
{
	for (unsigned i = 0; i < nkeys; i++) {
		uint64_t h = hashes[i];
		struct receipt_node *n = map->buckets[h & (map->nbuckets - 1)];

		for (; n != NULL; n = n->next)
			if (node_matches(n, upstream, &keys[i], h) &&
			    !entry_expired(n->e, now, lim))
				return n->e;
	}
	return NULL;
}

bool
receipt_map_find(struct receipt_map *map, const char *upstream,
    const struct receipt_key *keys, unsigned n, bool final, uint64_t now,
    const struct receipt_limits *lim, struct receipt_orig *o)
{
	struct receipt_entry *e, *gone = NULL;
	uint64_t h0, hashes[RECEIPT_KEYS_MAX];
	bool found;

	if (n == 0 || n > RECEIPT_KEYS_MAX)
		return false;
	h0 = name_hash(upstream);
	for (unsigned i = 0; i < n; i++)
		hashes[i] = key_hash(h0, &keys[i]);
	pthread_mutex_lock(&map->lock);
	map_trim_locked(map, now, lim, 0, &gone);
	e = map_lookup_locked(map, upstream, keys, hashes, n, now, lim);
	found = e != NULL;
	if (found) {
		*o = e->o;
		if (final)
			entry_drop_locked(map, e, &gone);
	}
	pthread_mutex_unlock(&map->lock);
	entries_free(gone);
	return found;
}

size_t
receipt_map_count(struct receipt_map *map)
{
	size_t n;

	pthread_mutex_lock(&map->lock);
	n = map->count;
	pthread_mutex_unlock(&map->lock);
	return n;
}
