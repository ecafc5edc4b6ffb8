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

#include "msg.h"

struct config;
struct conn;
struct reactor;

#define DELIVER_NO_REACTOR	UINT32_MAX
/* The sender is on another node: its verdict goes back through NATS. */
#define DELIVER_REMOTE_REACTOR	(UINT32_MAX - 1)
/*
 * The sender is this node's store, handing a stored message to an
 * account bound on another node: the verdict goes to store_outcome.
 */
#define DELIVER_STORE_REACTOR	(UINT32_MAX - 2)

/*
 * Sends m from connection c (the sender, on its owning reactor) to m->to.
 * Returns the verdict when it is known at once (the recipient is on the
 * same reactor, or there is no route) and frees m; returns MSG_PENDING
 * when m went to the recipient's reactor, in which case the sender's
 * protocol gets on_verdict(c, m) later, unless c has closed by then.
 * Owning reactor (of c) only.
 */
enum msg_verdict deliver_send(struct conn *c, struct msg *m);

/*
 * Sends m from reactor r with nobody waiting for a verdict (delivery
 * receipts): to the owner of m->to only when MSG_F_EXACT. Takes m.
 * Owning reactor of whatever made m.
 */
void	deliver_forward(struct reactor *r, struct msg *m);

/*
 * Sends m's verdict (m->verdict) back to its sender's reactor, as a
 * cross-reactor delivery does; frees m when nobody waits for one. Takes m.
 * Any thread (the store's answers).
 */
void	deliver_answer(struct msg *m);

/*
 * The same from a thread that answers many at once: the verdict for a
 * reactor is staged in b (reactor.h), which the caller publishes.
 */
struct reactor_batch;
void	deliver_answer_in(struct reactor_batch *b, struct msg *m);

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
void	deliver_unrouted(const struct config *cf, struct msg *m);

#endif
