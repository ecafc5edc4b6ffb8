/*
 * cluster_int.h: what the cluster's files share, and nothing outside
 * them includes: the one struct cluster (C), which thread owns which of
 * its fields, and the functions one file calls in another.
 *   cluster.c       the cluster thread: the NATS connection, its libnats
 *                   callbacks, subscriptions, one node per name, start,
 *                   reload and stats
 *   cluster_send.c  the cluster thread's messages to other nodes:
 *                   requests awaiting a verdict, bundles, verdicts back,
 *                   who claimed what
 *   cluster_kv.c    the key-value thread ("cluster-kv"): claims,
 *                   heartbeats and id slots in JetStream
 * Connecting and bucket names are nats_link.h's.
 */
#ifndef ECHOROUTERD_CLUSTER_INT_H
#define ECHOROUTERD_CLUSTER_INT_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "cluster_wire.h"
#include "config.h"
#include "deliver.h"
#include "mailbox.h"
#include "reactor.h"
#include "route.h"

/* Both threads' tick. */
#define CLUSTER_TICK_MS		100
#define PEND_BUCKETS		16384	/* a power of two */
#define SUB_BUCKETS		4096	/* a power of two */
#define OUT_BUCKETS		1024	/* a power of two */
#define SUBJECT_MAX		(CLUSTER_PREFIX_MAX + CLUSTER_TOKEN_MAX + 64)
/* Runs call while s is still NATS_OK. */
#define IFOK_NATS(s, call)	do { if ((s) == NATS_OK) (s) = (call); } while (0)

/* Each file's own (cluster.c, cluster_send.c, cluster_kv.c). */
struct csub;
struct pend;
struct outbox;
struct verdicts;
struct claimed;

/*
 * An address some node claimed, and which node, as the claims' bucket
 * last said (the cluster thread's copy, for sending).
 */
struct owner {
	struct owner *next;
	uint64_t since_ms;		/* when this node heard it */
	char	addr[ROUTE_ADDR_MAX + 1];
	char	node[CLUSTER_NODE_MAX + 1];
};

/*
 * Verdicts for our requests, as they came (cluster_verdict_get), or
 * NATS's "no responders" for the count requests of a bundle from first.
 */
struct verdict_note {
	struct mailbox_task task;
	bool	nobody;
	uint64_t first, count;
	size_t	n;
	uint8_t	data[];
};

/* An address whose holders changed, or a claim given up. */
struct addr_note {
	struct mailbox_task task;
	char	addr[ROUTE_ADDR_MAX + 1];
};

/* What the claims' bucket says of addr now: node's ("" nobody's). */
struct owner_note {
	struct mailbox_task task;
	char	addr[ROUTE_ADDR_MAX + 1];
	char	node[CLUSTER_NODE_MAX + 1];
};

struct cluster {
	struct service *svc;
	struct service *kvsvc;		/* "cluster-kv": JetStream's calls */
	atomic_bool on;
	atomic_bool up;
	/* Counters for the stats line; written by any thread. */
	atomic_uint_fast64_t to_nodes;
	atomic_uint_fast64_t from_nodes;
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t nodes_seen;
	atomic_uint_fast64_t foreign_at_ms;	/* said "another version" */
	/* Until then no other node can have taken our claims lawfully. */
	atomic_uint_fast64_t trust_until_ms;
	pthread_mutex_t url_lock;
	char	url[256];		/* the server we use; "" down */
	char	why[256];		/* libnats's last reason, while down */
	atomic_bool gave_up;		/* libnats closed the connection */
	atomic_bool gave_up_said;
	atomic_bool outcast;		/* another node has our name */
	/* Ids lately taken from other nodes; libnats's and ours. */
	pthread_mutex_t seen_lock;
	struct cluster_seen *seen;
	atomic_bool stopping;
	/* Set before the thread starts; read-only after. */
	char	node[CLUSTER_NODE_MAX + 1];
	char	me[CLUSTER_NODE_MAX + 40];	/* "<node> <instance>" */
	char	instance[24];
	/* Made before the threads start; libnats's, after. */
	natsOptions *opts;
	natsConnection *nc;
	/*
	 * The key-value thread's alone: JetStream's calls wait (at most
	 * request_timeout), so they have a thread of their own and never
	 * hold up messages.
	 */
	struct config *kvcf;
	jsCtx	*js;
	kvStore	*claims;
	kvStore	*nodes;
	kvStore	*slots;			/* which node's ids end in what */
	natsSubscription *watch;	/* every change of the claims */
	uint64_t watch_at_ms;		/* it failed: again not before */
	unsigned makers;		/* reactors; the store is one more */
	bool	slots_done;		/* this run's slots are ours */
	/* LOGINs claimed and subscribed to, answered after a flush. */
	struct route_claim **logins;
	size_t	nlogins, logins_cap;
	uint64_t slots_at_ms;		/* JetStream failed: not before */
	bool	kv_failed;		/* said once per connection */
	uint64_t kv_retry_ms;		/* JetStream failed: not before */
	bool	beat_ok;		/* our heartbeat is there, as far as known */
	uint64_t beat_at_ms;
	struct claimed *claimed[SUB_BUCKETS];
	unsigned nleaving;		/* claims given up, still to delete */
	uint64_t leave_at_ms;		/* try those again, not before */
	bool	was_down;		/* lost the connection since the last check */
	uint64_t beat_last_ms;		/* the last heartbeat that went through */
	/* The cluster thread's alone: */
	struct config *cf;
	natsSubscription *inbox;
	natsSubscription *notices;	/* <prefix>.h.*: binds elsewhere */
	natsSubscription *named;	/* <prefix>.n.<node>: name taken? */
	natsSubscription *named_answer;	/* ... its answers to us */
	natsSubscription *mine;		/* <prefix>.o.<node>.*: our claims' */
	struct owner *owners[SUB_BUCKETS];	/* who claimed what */
	char	prefix[CLUSTER_PREFIX_MAX + 1];	/* the one subscribed with */
	char	linked_url[256];	/* the server last logged; "" down */
	uint64_t next_req;		/* from a random start (cluster_open) */
	struct pend *pend[PEND_BUCKETS];
	struct pend *oldest, *newest;	/* by deadline: request_timeout */
	struct pend *held_oldest, *held_newest;	/* held ones' (held_wait_ms) */
	/* Found no subscriber at a fresh owner: sent again next tick. */
	struct pend *later, **later_tail;
	struct pend *spare;		/* for reuse, by hnext */
	unsigned nspare;
	struct csub *subs[SUB_BUCKETS];
	struct outbox *out[OUT_BUCKETS];
	struct outbox *out_first, *out_last;	/* this batch's */
	struct verdicts *vlist;			/* this batch's */
	struct reactor_batch answers;		/* verdicts for our reactors */
	uint8_t	*buf;			/* a bundle */
	size_t	bufcap;
};

/* The one cluster, shared by the cluster's files (cluster.c has it). */
extern struct cluster cluster_state;
#define C	cluster_state

/* cluster.c */
/* Counts an error of libnats's, said in the debug log. */
void	cluster_note_error(const char *what, natsStatus s);
/* The subject of addr, claimed by node ("" or NULL: by none). */
void	cluster_addr_subject(char *out, size_t n, const char *addr,
	    const char *node);
/*
 * Posts m to the cluster thread with fn as its task (m->task), staged in b
 * when b is not NULL. Takes m. Any thread.
 */
void	cluster_post_msg(struct reactor_batch *b, struct msg *m,
	    mailbox_task_fn *fn);
/* Unsubscribes and destroys sub; NULL is fine. */
void	cluster_unsubscribe(natsSubscription *sub);
/*
 * Subscribes to subj (in queue, unless NULL) with handler cb, counted by
 * cluster_track. Any thread; libnats's status.
 */
natsStatus cluster_subscribe(natsSubscription **sub, const char *subj,
	    const char *queue, natsMsgHandler cb);
/*
 * Counts sub (one with a handler; NULL is fine) until libnats is done
 * with it, for the stop to wait for. Any thread.
 */
void	cluster_track(natsSubscription *sub);

/* cluster_send.c: the cluster thread's, every one. */
/* What the claims' bucket says of an address (a struct owner_note). */
void	cluster_owner_task(void *owner, void *arg, enum mailbox_status st);
/* Verdicts from another node (a struct verdict_note). */
void	cluster_verdict_task(void *owner, void *arg, enum mailbox_status st);
/* Queues the verdict of request req for node, sent when the batch ends. */
void	cluster_verdicts_add(const char *node, uint64_t req,
	    enum msg_verdict v);
/*
 * The end of a batch: its bundles and verdicts go (send false: the
 * bundles' senders hear the cluster is unavailable, verdicts are lost).
 */
void	cluster_send_flush(bool send);
/* Ends what waited for a verdict past request_timeout. */
void	cluster_send_expire(uint64_t now);
/* Sends again what found its address's new owner not subscribed yet. */
void	cluster_send_later(void);
/* Stopping: every request ends, unavailable, and the spares go. */
void	cluster_send_stop(void);
/* Forgets who claimed what (a new claims' bucket tells anew). */
void	cluster_owners_clear(void);

/* cluster_receipt.c: the cluster thread's. */
/* Questions about receipts past their wait end unmatched. */
void	cluster_receipt_expire(uint64_t now);
/* Subscribes to questions and our answers (a new prefix too), or stops. */
void	cluster_receipt_subscribe(void);
void	cluster_receipt_unsubscribe(void);

/* cluster_kv.c */
struct service_hooks;
/* The key-value thread's loop: its batches, ticks and stop. */
extern const struct service_hooks cluster_kv_hooks;
/* The key-value thread: the connection came up (arg not NULL) or went. */
void	cluster_kv_link_task(void *owner, void *arg, enum mailbox_status st);
/* The key-value thread: a new configuration (a reference, taken). */
void	cluster_kv_reload_task(void *owner, void *arg,
	    enum mailbox_status st);
/* Claims q->addr cluster-wide (struct route_claim). Any thread. */
void	cluster_claim(struct route_claim *q);
/*
 * Gives up this node's cluster-wide claim on addr, unless a session here
 * holds it again by then. Any thread.
 */
void	cluster_release(const char *addr);

#endif
