/*
 * deliver.h: messages and their delivery: from a sender's connection to
 * the recipient's, on the same reactor or through the recipient's
 * mailbox, and the verdict back. This is where "stored" and "on another
 * node" plug in; the address table itself is route.h.
 */
#ifndef ECHOROUTERD_DELIVER_H
#define ECHOROUTERD_DELIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handle.h"
#include "mailbox.h"
#include "route.h"

struct config;
struct conn;
struct reactor;
struct store_acct;

enum deliver_verdict {
	DELIVER_PENDING = 0,	/* posted to another reactor; answer follows */
	DELIVER_OK,		/* queued on the recipient's connection */
	DELIVER_NO_ROUTE,		/* nobody owns the address (or it left) */
	DELIVER_BUSY,		/* the recipient's output is over its watermark */
	DELIVER_REFUSED,		/* the recipient's queue for it is full */
	DELIVER_UNFIT,		/* the recipient's protocol cannot carry it */
	DELIVER_FULL,		/* the store is full (or cannot write) */
	/*
	 * The recipient would only hold it in memory (behind a full SMPP
	 * window): its account's store takes it. Never reaches a sender.
	 */
	DELIVER_STORE,
	/*
	 * It needs another node and the cluster cannot be reached (or did not
	 * answer in time): a temporary error, as a full store is.
	 */
	DELIVER_UNAVAILABLE,
	/*
	 * The store's file was removed or replaced under the daemon: nothing
	 * is stored until a restart.
	 */
	DELIVER_STORE_LOST,
};

/* deliver_msg flags. */
enum {
	DELIVER_F_PREFIX_FIRST = 1 << 0,	/* routes before logged-in owners */
	DELIVER_F_EXACT = 1 << 1,		/* only the owner of the address */
	DELIVER_F_NO_VERDICT = 1 << 2,	/* nobody waits for the verdict */
	DELIVER_F_RECEIPT = 1 << 3,	/* a delivery receipt */
	DELIVER_F_UMR = 1 << 4,		/* user_message_reference is set */
	DELIVER_F_SAR = 1 << 5,		/* the sar_* fields are set */
	DELIVER_F_LINE_TEXT = 1 << 6,	/* text checked fit for a line */
	DELIVER_F_STORED = 1 << 7,	/* from the store: tell it the outcome */
	/* The store's, delivered by another node: that node sends receipts. */
	DELIVER_F_VIA_NODE = 1 << 8,
};

#define DELIVER_NO_REACTOR	UINT32_MAX
/* The sender is on another node: its verdict goes back through NATS. */
#define DELIVER_REMOTE_REACTOR	(UINT32_MAX - 1)
/*
 * The sender is this node's store, handing a stored message to an
 * account bound on another node: the verdict goes to store_outcome.
 */
#define DELIVER_STORE_REACTOR	(UINT32_MAX - 2)
#define DELIVER_NODE_MAX	32	/* a node name's bytes (cluster.node) */

/*
 * A message on its way. It travels from the sender's reactor to the
 * recipient's and back (for the verdict) as one allocation, posted through
 * the mailboxes; whoever holds it owns it. deliver_msg_new zeroes what comes
 * before src_addr and empties the strings: keep every number field above
 * src_addr.
 */
struct deliver_msg {
	struct mailbox_task task;
	uint64_t id;
	struct conn_handle sender;
	struct route_owner recipient;
	enum deliver_verdict verdict;
	uint32_t flags;
	uint32_t sender_ref;		/* the sender's own reference */
	uint32_t sender_cmd;		/* and what it was answering */
	uint64_t submitted;		/* wall clock seconds, for receipts */
	uint64_t due;			/* scheduled: not before (s); 0 now */
	uint64_t expires;		/* validity: not after (s); 0 default */
	struct store_acct *store_acct;	/* DELIVER_F_STORED: whose it is */
	uint32_t attempts;		/* DELIVER_F_STORED: failures so far */
	uint64_t remote_req;		/* REMOTE_REACTOR: the sender's request */
	uint64_t read_ns;		/* turn_ns of the turn that read it; 0 none */
	/* SMPP details, carried through untouched; zero from line clients. */
	uint8_t	src_ton, src_npi;
	uint8_t	dst_ton, dst_npi;
	uint8_t	esm_class;
	uint8_t	data_coding;
	uint8_t	registered_delivery;
	uint8_t	message_state;		/* receipts */
	uint16_t umr;
	uint16_t sar_ref;
	uint8_t	sar_total;
	uint8_t	sar_seq;
	char	src_addr[21];		/* as submitted, without normalising */
	char	dst_addr[21];
	char	reply_to[ROUTE_ADDR_MAX + 1];	/* receipts go here */
	char	receipted_id[24];
	char	from[ROUTE_ADDR_MAX + 1];
	char	to[ROUTE_ADDR_MAX + 1];
	char	remote_node[DELIVER_NODE_MAX + 1];	/* REMOTE_REACTOR */
	size_t	len;
	uint8_t	text[];
};

/*
 * A message with room for len bytes of text (and a NUL after them): its
 * numbers zero, its strings empty, the text for the caller to fill. Any
 * thread.
 */
struct deliver_msg *deliver_msg_new(size_t len);

/* The bytes m takes: its fields, its text, the NUL after. */
static inline size_t
deliver_msg_size(const struct deliver_msg *m)
{
	return sizeof(*m) + m->len + 1;
}

/* A copy of m (text included) that the caller owns. Any thread. */
struct deliver_msg *deliver_msg_dup(const struct deliver_msg *m);

/*
 * A message id unique within the run (and, in a cluster, across nodes once
 * deliver_set_id_low has run). Owning reactor only.
 */
uint64_t deliver_next_id(struct reactor *r);

#define DELIVER_ID_LOW_MAX	1023
/* The id maker that is not a reactor: the store (its receipts). */
#define DELIVER_ID_STORE	DELIVER_ID_LOW_MAX

/*
 * An id's low 10 bits tell who made it: reactor i's end in i, the store's
 * in DELIVER_ID_STORE, until a cluster hands each of them a slot of its
 * own (low), unique among the nodes. Any thread; maker is a reactor id or
 * DELIVER_ID_STORE, low at most DELIVER_ID_LOW_MAX.
 */
void	deliver_set_id_low(unsigned maker, unsigned low);
uint64_t deliver_id_low(unsigned maker);

/*
 * Sends m from connection c (the sender, on its owning reactor) to m->to.
 * Returns the verdict when it is known at once (the recipient is on the
 * same reactor, or there is no route) and frees m; returns DELIVER_PENDING
 * when m went to the recipient's reactor, in which case the sender's
 * protocol gets on_verdict(c, m) later, unless c has closed by then.
 * Owning reactor (of c) only.
 */
enum deliver_verdict deliver_send(struct conn *c, struct deliver_msg *m);

/*
 * Sends m from reactor r with nobody waiting for a verdict (delivery
 * receipts): to the owner of m->to only when DELIVER_F_EXACT. Takes m.
 * Owning reactor of whatever made m.
 */
void	deliver_forward(struct reactor *r, struct deliver_msg *m);

/*
 * Sends m's verdict (m->verdict) back to its sender's reactor, as a
 * cross-reactor delivery does; frees m when nobody waits for one. Takes m.
 * Any thread (the store's answers).
 */
void	deliver_answer(struct deliver_msg *m);

/*
 * The same from a thread that answers many at once: the verdict for a
 * reactor is staged in b (reactor.h), which the caller publishes.
 */
struct reactor_batch;
void	deliver_answer_in(struct reactor_batch *b, struct deliver_msg *m);

/*
 * Mailbox task: hands a message that came from another node (m->sender is
 * DELIVER_REMOTE_REACTOR) to the recipient's protocol on this reactor and
 * sends the verdict back through the cluster. Owning reactor
 * (m->recipient.conn.reactor).
 */
void	deliver_node_task(void *owner, void *arg, enum mailbox_status st);

/*
 * Mailbox task: hands a message from the store to the recipient's
 * protocol on this reactor and tells the store what became of it. Owning
 * reactor (m->recipient.conn.reactor).
 */
void	deliver_stored_task(void *owner, void *arg, enum mailbox_status st);

/*
 * The cluster found nobody for m (no node answered for any address it may
 * go to): its account's store takes it when there is one, else the sender
 * hears "no route". Takes m. Any thread (the cluster's).
 */
void	deliver_unrouted(const struct config *cf, struct deliver_msg *m);

/* Message ids start above base (see main.c): unique across restarts. */
void	deliver_set_id_base(struct reactor *r, uint64_t base);

/* The verdict's name: "ok", "no route", ... Any thread. */
const char *deliver_verdict_name(enum deliver_verdict v);

#endif
