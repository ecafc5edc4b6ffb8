/*
 * store_ids.h: the ids of each account's waiting messages, in memory and
 * in order, for a store file that keeps no index of them on disk.
 *
 * An index by (account, id) in the file made every group commit rewrite a
 * page of it per account the group touched: 1,000 accounts' messages
 * stored in one group wrote some thousand index pages to the WAL, eight
 * times the bytes of the messages themselves. Kept here instead, it costs
 * 8 bytes a waiting message and is read back from the rows at start.
 *
 * Lists are found by a slot (the store's dense number for an account).
 * Changes made inside a transaction are journalled so that a transaction
 * that does not commit takes them back (store_ids_undo). Not thread-safe:
 * one store thread owns an index.
 */
#ifndef ECHOROUTERD_STORE_IDS_H
#define ECHOROUTERD_STORE_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One account's ids, ascending, in v[head .. head + n). */
struct store_id_list {
	uint64_t *v;
	size_t	head, n, cap;
};

struct store_ids {
	struct store_id_list *l;	/* by slot */
	size_t	nl;
	uint64_t count;			/* ids in all lists */
	/* What the open transaction changed: undone in reverse. */
	struct store_id_undo {
		uint64_t id;
		size_t	slot;
		bool	added;
	} *undo;
	size_t	nundo, capundo;
	bool	journal;		/* a transaction is open: record */
};

/* Frees what ids holds; it is empty after (and may be used again). */
void	store_ids_fini(struct store_ids *ids);

/* Adds id to slot's list (where it is already: nothing). */
void	store_ids_add(struct store_ids *ids, size_t slot, uint64_t id);

/* Takes id from slot's list. Whether it was there. */
bool	store_ids_del(struct store_ids *ids, size_t slot, uint64_t id);

/*
 * Copies into out up to n of slot's ids above after, ascending. The count
 * copied.
 */
size_t	store_ids_from(const struct store_ids *ids, size_t slot,
	    uint64_t after, uint64_t *out, size_t n);

/* Gives back the room the lists have beyond their ids (after a load). */
void	store_ids_trim(struct store_ids *ids);

/* Slot's lowest id; 0 for an empty list. */
uint64_t store_ids_first(const struct store_ids *ids, size_t slot);

/* Starts recording changes (BEGIN). */
void	store_ids_begin(struct store_ids *ids);

/* Keeps what was recorded (COMMIT) and stops recording. */
void	store_ids_commit(struct store_ids *ids);

/* Takes back what was recorded (ROLLBACK) and stops recording. */
void	store_ids_undo(struct store_ids *ids);

#endif
