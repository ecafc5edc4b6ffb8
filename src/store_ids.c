/*
 * store_ids.c: each account's waiting message ids, in memory, in order.
 *
 * A list is a sorted array with its free room at both ends: messages are
 * stored with rising ids (appended) and mostly delivered oldest first
 * (taken from the front), so both are O(1); an id out of order (a
 * message moved from another shard, an answer out of turn) moves the
 * shorter side by one place.
 */
#include <stdlib.h>
#include <string.h>

#include "store_ids.h"
#include "util.h"

#define IDS_MIN_CAP	8

/* The index in l->v of the first id >= id (head + n: none). */
static size_t
lower_bound(const struct store_id_list *l, uint64_t id)
{
	size_t lo = l->head, hi = l->head + l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->v[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Moves the ids to the front, in an array of cap places: realloc, which
 * grows in place where it can, leaves fewer holes in the heap than a new
 * array and the old one freed (a tenth of the RSS at a million waiting).
 */
static void
list_resize(struct store_id_list *l, size_t cap)
{
	if (l->head > 0 && l->n > 0)
		memmove(l->v, l->v + l->head, l->n * sizeof(*l->v));
	l->v = xrealloc(l->v, cap * sizeof(*l->v));
	l->head = 0;
	l->cap = cap;
}

/* Room for one more id at the back. */
static void
list_room_back(struct store_id_list *l)
{
	if (l->head + l->n < l->cap)
		return;
	if (l->head > l->n) {
		/* Mostly taken from the front: use that room first. */
		memmove(l->v, l->v + l->head, l->n * sizeof(*l->v));
		l->head = 0;
		return;
	}
	/* Grown in place: what room the front has, it keeps. */
	l->cap += l->cap / 2 + IDS_MIN_CAP;
	l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
}

/*
 * Room for one more id at the front: the ids moved to the middle of a
 * larger array. Ids older than a list's (a receipt's, numbered by the
 * store, not by a reactor's clock) then cost one id's move each, not the
 * whole list's.
 */
static void
list_room_front(struct store_id_list *l)
{
	size_t cap = l->cap, gap;

	if (l->head > 0)
		return;
	if (l->n + l->n / 2 + IDS_MIN_CAP > cap)
		list_resize(l, l->n + l->n / 2 + IDS_MIN_CAP);
	gap = (l->cap - l->n) / 2;
	memmove(l->v + gap, l->v, l->n * sizeof(*l->v));
	l->head = gap;
}

/* A list that shrank to a quarter of its places gives half back. */
static void
list_shrink(struct store_id_list *l)
{
	if (l->n == 0) {
		l->head = 0;
		if (l->cap > IDS_MIN_CAP * 8) {
			free(l->v);
			l->v = NULL;
			l->cap = 0;
		}
		return;
	}
	if (l->cap > IDS_MIN_CAP * 8 && l->n < l->cap / 4)
		list_resize(l, l->cap / 2);
}

static struct store_id_list *
slot_list(struct store_ids *ids, size_t slot)
{
	if (slot >= ids->nl) {
		size_t nl = ids->nl ? ids->nl : 64;

		while (nl <= slot)
			nl *= 2;
		ids->l = xrealloc(ids->l, nl * sizeof(*ids->l));
		memset(ids->l + ids->nl, 0, (nl - ids->nl) * sizeof(*ids->l));
		ids->nl = nl;
	}
	return &ids->l[slot];
}

static void
record(struct store_ids *ids, size_t slot, uint64_t id, bool added)
{
	if (!ids->journal)
		return;
	if (ids->nundo == ids->capundo) {
		ids->capundo = ids->capundo ? ids->capundo * 2 : 256;
		ids->undo = xrealloc(ids->undo,
		    ids->capundo * sizeof(*ids->undo));
	}
	ids->undo[ids->nundo++] = (struct store_id_undo){ .id = id,
	    .slot = slot, .added = added };
}

static bool
list_add(struct store_id_list *l, uint64_t id)
{
	size_t at;

	if (l->n == 0 || l->v[l->head + l->n - 1] < id) {
		list_room_back(l);
		l->v[l->head + l->n++] = id;
		return true;
	}
	at = lower_bound(l, id);
	if (l->v[at] == id)
		return false;
	if (at - l->head < l->n / 2) {
		/* Nearer the front: the front moves. */
		size_t off = at - l->head;

		list_room_front(l);	/* may move the ids: at with them */
		at = l->head + off;
		memmove(l->v + l->head - 1, l->v + l->head,
		    (at - l->head) * sizeof(*l->v));
		l->head--;
		l->v[at - 1] = id;
	} else {
		size_t off = at - l->head;

		list_room_back(l);	/* may move the ids: at with them */
		at = l->head + off;
		memmove(l->v + at + 1, l->v + at,
		    (l->head + l->n - at) * sizeof(*l->v));
		l->v[at] = id;
	}
	l->n++;
	return true;
}

static bool
list_del(struct store_id_list *l, uint64_t id)
{
	size_t at = lower_bound(l, id);

	if (at == l->head + l->n || l->v[at] != id)
		return false;
	if (at - l->head < l->n / 2) {
		memmove(l->v + l->head + 1, l->v + l->head,
		    (at - l->head) * sizeof(*l->v));
		l->head++;
	} else
		memmove(l->v + at, l->v + at + 1,
		    (l->head + l->n - at - 1) * sizeof(*l->v));
	l->n--;
	list_shrink(l);
	return true;
}

void
store_ids_add(struct store_ids *ids, size_t slot, uint64_t id)
{
	if (list_add(slot_list(ids, slot), id)) {
		ids->count++;
		record(ids, slot, id, true);
	}
}

bool
store_ids_del(struct store_ids *ids, size_t slot, uint64_t id)
{
	if (slot >= ids->nl || !list_del(&ids->l[slot], id))
		return false;
	ids->count--;
	record(ids, slot, id, false);
	return true;
}

size_t
store_ids_from(const struct store_ids *ids, size_t slot, uint64_t after,
    uint64_t *out, size_t n)
{
	const struct store_id_list *l;
	size_t at, k = 0;

	if (slot >= ids->nl)
		return 0;
	l = &ids->l[slot];
	at = after == UINT64_MAX ? l->head + l->n : lower_bound(l, after + 1);
	while (k < n && at < l->head + l->n)
		out[k++] = l->v[at++];
	return k;
}

void
store_ids_trim(struct store_ids *ids)
{
	for (size_t i = 0; i < ids->nl; i++) {
		struct store_id_list *l = &ids->l[i];

		if (l->n > 0 && l->cap > l->n)
			list_resize(l, l->n);
	}
}

uint64_t
store_ids_first(const struct store_ids *ids, size_t slot)
{
	if (slot >= ids->nl || ids->l[slot].n == 0)
		return 0;
	return ids->l[slot].v[ids->l[slot].head];
}

void
store_ids_begin(struct store_ids *ids)
{
	ids->nundo = 0;
	ids->journal = true;
}

/* A long transaction's journal (shards' messages moved) is not kept. */
static void
journal_end(struct store_ids *ids)
{
	ids->nundo = 0;
	ids->journal = false;
	if (ids->capundo > 65536) {
		free(ids->undo);
		ids->undo = NULL;
		ids->capundo = 0;
	}
}

void
store_ids_commit(struct store_ids *ids)
{
	journal_end(ids);
}

void
store_ids_undo(struct store_ids *ids)
{
	ids->journal = false;
	while (ids->nundo > 0) {
		const struct store_id_undo *u = &ids->undo[--ids->nundo];
		struct store_id_list *l = slot_list(ids, u->slot);

		if (u->added ? list_del(l, u->id) : list_add(l, u->id))
			ids->count += u->added ? (uint64_t)-1 : 1;
	}
	journal_end(ids);
}

void
store_ids_fini(struct store_ids *ids)
{
	for (size_t i = 0; i < ids->nl; i++)
		free(ids->l[i].v);
	free(ids->l);
	free(ids->undo);
	memset(ids, 0, sizeof(*ids));
}
