/*
 * cluster_seen.h: the message ids a node took lately from other nodes, so
 * that a copy of one (published again by anyone who may publish on the
 * cluster's subjects) is not delivered twice. Memory is fixed when made:
 * the newest cap ids, older ones forgotten. No libnats, no locks: the
 * caller serialises.
 */
#ifndef ECHOROUTERD_CLUSTER_SEEN_H
#define ECHOROUTERD_CLUSTER_SEEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cluster_seen;

enum cluster_seen_result {
	CLUSTER_SEEN_NEW,	/* not seen: filed, its verdict pending */
	CLUSTER_SEEN_PENDING,	/* a copy of one whose verdict is pending */
	CLUSTER_SEEN_TAKEN,	/* a copy of one that was accepted */
};

/*
 * A table of the newest cap ids (a power of two, at least 2): about 20
 * bytes each, allocated now.
 */
struct cluster_seen *cluster_seen_new(size_t cap);
void	cluster_seen_free(struct cluster_seen *t);

/*
 * Looks up message id (unique in the cluster: its low bits name the id
 * slot, so the node and maker, that made it); when new, files it as
 * pending, in place of the oldest once the table is full. Whoever names
 * another sender, or no reply subject, still sends the same id.
 */
enum cluster_seen_result cluster_seen_add(struct cluster_seen *t,
	    uint64_t id);

/*
 * The verdict on a pending id: accepted, it stays (a copy is
 * CLUSTER_SEEN_TAKEN); not, it is forgotten, since its sender may send it
 * again (to its next address, or later). Unknown ids are ignored.
 */
void	cluster_seen_settle(struct cluster_seen *t, uint64_t id,
	    bool accepted);

#endif
