/* cluster_seen.c: the ids lately taken from other nodes, in a ring. */
#include "cluster_seen.h"

#include <stdlib.h>

#include "util.h"

enum { SEEN_FREE, SEEN_PENDING, SEEN_TAKEN };

/* One id in the ring; next chains a bucket (index + 1; 0 ends it). */
struct seen_entry {
	uint64_t id;
	uint32_t next;
};

struct cluster_seen {
	size_t	mask;			/* cap - 1 */
	unsigned shift;			/* 64 - log2(cap) */
	size_t	head;			/* where the next id goes */
	struct seen_entry *ring;
	uint8_t	*state;
	uint32_t *bucket;		/* index + 1 of a chain's first */
};

struct cluster_seen *
cluster_seen_new(size_t cap)
{
	struct cluster_seen *t = xcalloc(1, sizeof(*t));
	unsigned bits = 0;

	while (((size_t)1 << bits) < cap)
		bits++;
	t->mask = ((size_t)1 << bits) - 1;
	t->shift = 64 - bits;
	t->ring = xcalloc(t->mask + 1, sizeof(*t->ring));
	t->state = xcalloc(t->mask + 1, sizeof(*t->state));
	t->bucket = xcalloc(t->mask + 1, sizeof(*t->bucket));
	return t;
}

void
cluster_seen_free(struct cluster_seen *t)
{
	if (t == NULL)
		return;
	free(t->ring);
	free(t->state);
	free(t->bucket);
	free(t);
}

static uint32_t *
bucket_of(struct cluster_seen *t, uint64_t id)
{
	/* Fibonacci hashing: ids differ mostly in their middle bits. */
	uint64_t k = id * 0x9E3779B97F4A7C15ull;

	return &t->bucket[t->shift < 64 ? k >> t->shift : 0];
}

/* The live entry for id, or SIZE_MAX. */
static size_t
seen_find(struct cluster_seen *t, uint64_t id)
{
	for (uint32_t i = *bucket_of(t, id); i != 0; i = t->ring[i - 1].next)
		if (t->ring[i - 1].id == id && t->state[i - 1] != SEEN_FREE)
			return i - 1;
	return SIZE_MAX;
}

/* Takes slot i out of its bucket's chain (it is about to be reused). */
static void
seen_unlink(struct cluster_seen *t, size_t i)
{
	uint32_t *pp = bucket_of(t, t->ring[i].id);

	while (*pp != 0 && *pp != i + 1)
		pp = &t->ring[*pp - 1].next;
	if (*pp != 0)
		*pp = t->ring[i].next;
}

enum cluster_seen_result
cluster_seen_add(struct cluster_seen *t, uint64_t id)
{
	size_t i = seen_find(t, id);
	uint32_t *b;

	if (i != SIZE_MAX)
		return t->state[i] == SEEN_TAKEN ? CLUSTER_SEEN_TAKEN :
		    CLUSTER_SEEN_PENDING;
	i = t->head;
	t->head = (t->head + 1) & t->mask;
	/* The oldest goes: used once, it is in a chain, freed or not. */
	seen_unlink(t, i);
	b = bucket_of(t, id);
	t->ring[i] = (struct seen_entry){ .id = id, .next = *b };
	*b = (uint32_t)(i + 1);
	t->state[i] = SEEN_PENDING;
	return CLUSTER_SEEN_NEW;
}

void
cluster_seen_settle(struct cluster_seen *t, uint64_t id, bool accepted)
{
	size_t i = seen_find(t, id);

	if (i != SIZE_MAX && t->state[i] == SEEN_PENDING)
		t->state[i] = accepted ? SEEN_TAKEN : SEEN_FREE;
}
