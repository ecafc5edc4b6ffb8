/*
 * cluster.h: nodes sharing one address space through NATS (why: see
 * docs/architecture.md, "The cluster"). One service thread, "cluster",
 * owns the NATS connection; libnats's own threads only decode what
 * arrives and post it to a reactor's mailbox or to the cluster thread.
 * Reactors reach the cluster through its mailbox and never wait on the
 * network.
 *
 * On the wire, nodes share:
 *   <prefix>.o.<node>.<address> a bundle: a batch's messages for an
 *                               address, under consecutive request ids,
 *                               to the node whose claim it is (a router
 *                               LOGIN), as the claims' bucket said last:
 *                               not to a node that lost it while frozen
 *   <prefix>.a.<address>        the same, for an address nobody claimed:
 *                               every node that holds it subscribes in one
 *                               queue group, so an account's binds on
 *                               several nodes share its traffic
 *   <prefix>.r.<node>.<first>.<count>
 *                               a bundle's reply subject: NATS "no
 *                               responders" there means nobody holds it
 *   <prefix>.r.<node>.v         verdicts, back to the sending node: all a
 *                               node has for it at the end of a batch
 *   KV <prefix>-claims          address -> "<node> <instance>": LOGIN's
 *                               cluster-wide claims, read from the
 *                               stream's leader, each write in place of
 *                               a revision once (cluster_kv.c)
 *   KV <prefix>-nodes           node -> instance, kept alive every
 *                               claim_ttl / 3 s in a bucket whose entries
 *                               live claim_ttl s: a claim whose node is
 *                               not alive there is free
 * Addresses are encoded for subjects and keys (cluster_wire.h).
 */
#ifndef ECHOROUTERD_CLUSTER_H
#define ECHOROUTERD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "handle.h"
#include "mailbox.h"
#include "route.h"
#include "version.h"

struct config;
struct msg;
struct reactor_batch;
struct service;

/* The cluster's state as numbers (for /metrics). */
struct cluster_stats {
	bool	connected;	/* to a NATS server now */
	uint64_t nodes;		/* nodes alive, this one included */
	uint64_t to_nodes;	/* messages sent to other nodes */
	uint64_t from_nodes;	/* messages from other nodes */
	uint64_t errors;
};

/*
 * Receipts from an upstream SMS centre, cluster-wide: a receipt may come
 * back on any node's session, but only the node that submitted the
 * message has its SMSC id. A question about one, from another node, is
 * handed to the matcher (the receipts' module sets it before the cluster
 * starts) on the cluster thread; the matcher owns q and, on any thread,
 * ends it with cluster_receipt_answer: matched (it relayed the receipt
 * to its submitter) or not. task is the matcher's to use meanwhile (to
 * post q to a reactor). done hears, on the cluster thread, whether some
 * node matched a receipt this node asked about.
 */
struct cluster_receipt_q {
	struct mailbox_task task;
	uint8_t	state;			/* message_state, 0 if none */
	char	upstream[65];
	char	id[65];			/* the SMSC's id, as the receipt has it */
	char	reply[192];		/* the cluster's: where to answer */
	uint64_t seq;			/* the cluster's */
	size_t	len;
	uint8_t	text[];			/* the receipt's text */
};
typedef void (*cluster_receipt_match_fn)(struct cluster_receipt_q *q);
typedef void (*cluster_receipt_done_fn)(const char *upstream,
	    const char *id, uint8_t state, const uint8_t *text, size_t len,
	    bool matched);

#if ER_WITH_NATS

/*
 * When cf has a cluster group: connects to NATS (or keeps trying in the
 * background, until libnats gives up on refused credentials) and makes
 * the cluster's service threads, appended to svcs[*n] in start order.
 * Nothing without one. -1 and a malloc'd *err if it cannot, or if another
 * node in the cluster has cf's node name. Main thread, before any thread
 * starts.
 */
int	cluster_open(const struct config *cf, struct service **svcs,
	    unsigned *n, char **err);

/* After the service stopped: ends libnats's threads. Main thread. */
void	cluster_close(void);

/* Whether there is a cluster, and whether it is connected now. Any thread. */
bool	cluster_on(void);
bool	cluster_up(void);

/* The settings that reload (cf holds a reference for it). Main thread. */
void	cluster_reload(const struct config *cf);

/*
 * Appends " cluster=<server|down> nodes=N to_nodes=N from_nodes=N
 * cluster_errors=N" (status: ", cluster <server>, N nodes") to buf, which
 * holds a NUL-terminated string; nothing without a cluster. Any thread.
 */
void	cluster_stats_append(char *buf, size_t len, bool status);

/* Fills st; all zero without a cluster. Any thread. */
void	cluster_get_stats(struct cluster_stats *st);

/*
 * Sends m to whichever node holds m->to (or its prefix route's address):
 * its verdict comes back through deliver_answer, MSG_UNAVAILABLE when
 * the cluster is down or silent past request_timeout; nobody anywhere:
 * deliver_unrouted. Staged in b (the calling thread's, reactor.h) when it
 * is not NULL, posted now otherwise. Takes m. Any thread.
 */
void	cluster_send(struct reactor_batch *b, struct msg *m);

/*
 * Sends the verdict of m, which came from another node, back to it,
 * staged in b as cluster_send does. Takes m. Any thread.
 */
void	cluster_answer(struct reactor_batch *b, struct msg *m);

void	cluster_receipt_matcher(cluster_receipt_match_fn fn);
/* Ends another node's question q (matched: it was ours). Any thread. */
void	cluster_receipt_answer(struct cluster_receipt_q *q, bool matched);

/*
 * Asks the other nodes about a receipt (its upstream, the id it names,
 * its message_state, its text) that matched nothing here; done hears the
 * outcome, with the receipt as asked, within two seconds. false: no cluster, or the receipt cannot
 * be asked about (an id over 64 characters, a text over 1 KiB): it is
 * unmatched now. Any thread.
 */
bool	cluster_receipt_ask(const char *upstream, const char *id,
	    size_t idlen, uint8_t state, const uint8_t *text, size_t len,
	    cluster_receipt_done_fn done);

#else

static inline int
cluster_open(const struct config *cf, struct service **svcs, unsigned *n,
    char **err)
{
	(void)cf;
	(void)svcs;
	(void)n;
	(void)err;
	return 0;
}

static inline void cluster_close(void) {}
static inline bool cluster_on(void) { return false; }
static inline bool cluster_up(void) { return false; }
static inline void cluster_reload(const struct config *cf) { (void)cf; }

static inline void
cluster_get_stats(struct cluster_stats *st)
{
	*st = (struct cluster_stats){ 0 };
}

static inline void
cluster_stats_append(char *buf, size_t len, bool status)
{
	(void)buf;
	(void)len;
	(void)status;
}

/* Never called without a cluster (cluster_on is false). */
static inline void
cluster_send(struct reactor_batch *b, struct msg *m)
{
	(void)b;
	free(m);
}

static inline void
cluster_answer(struct reactor_batch *b, struct msg *m)
{
	(void)b;
	free(m);
}

static inline void
cluster_receipt_matcher(cluster_receipt_match_fn fn)
{
	(void)fn;
}

/* Never called without a cluster: no question comes. */
static inline void
cluster_receipt_answer(struct cluster_receipt_q *q, bool matched)
{
	(void)matched;
	free(q);
}

static inline bool
cluster_receipt_ask(const char *upstream, const char *id, size_t idlen,
    uint8_t state, const uint8_t *text, size_t len,
    cluster_receipt_done_fn done)
{
	(void)upstream;
	(void)id;
	(void)idlen;
	(void)state;
	(void)text;
	(void)len;
	(void)done;
	return false;
}

#endif

#endif
