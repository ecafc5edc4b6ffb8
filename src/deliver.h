/*
 * deliver.h: the delivery of messages (msg.h): from a sender's connection
 * to the recipient's, on the same reactor or through the recipient's
 * mailbox, and the verdict back. Other kinds of destination and origin
 * ("stored", "on another node", next an upstream bind) register their
 * operations here (deliver_register); deliver calls them only through
 * those. The address table itself is route.h.
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

struct reactor_batch;

/*
 * What deliver asks of a kind of place messages come from or go to (the
 * store, another node, next an upstream bind), registered at start by the
 * module that provides it (deliver_register). Connections of this node
 * are deliver's own. b, where given, is the calling reactor's batch of
 * posts (reactor.h), or NULL for a post of its own.
 */
struct deliver_kind_ops {
	const char *name;
	/* Whether the kind is in service (configured and open). */
	bool	(*on)(void);
	/* Optional: whether it can take messages now; NULL: as on. */
	bool	(*up)(void);
	/* Optional: whether it holds messages for address (a backlog). */
	bool	(*holds)(const char *address);
	/*
	 * Takes m, for address to (the account, for the store): its verdict
	 * comes back to m's sender through deliver_answer later. Any thread.
	 */
	void	(*take)(struct reactor_batch *b, struct msg *m, const char *to);
	/*
	 * Optional: m's verdict (m->verdict) for a sender of this kind, whose
	 * address is in m. Takes m. Any thread.
	 */
	void	(*answer)(struct reactor_batch *b, struct msg *m);
	/*
	 * Optional: what became of m, which this kind handed out to a
	 * session here (the store: MSG_F_STORED). Takes m. The reactor that
	 * holds m.
	 */
	void	(*outcome)(struct msg *m, enum msg_outcome o);
	/*
	 * Optional: MSG_OUT_WRITTEN for ms[0..n) at once (a flush's worth),
	 * which the caller keeps. The reactor that holds them.
	 */
	void	(*written)(struct msg *const *ms, unsigned n);
	/* Optional: a session that can receive for address appeared. */
	void	(*wake)(const char *address);
	/*
	 * Optional: a session's request on messages this kind holds (struct
	 * msg_req). Takes q until it comes back. Any reactor.
	 */
	void	(*request)(struct msg_req *q);
};

/*
 * Registers ops for kind (enum msg_kind; NULL unregisters). Until a kind
 * is registered a message for it gets MSG_NO_ROUTE and an answer for a
 * sender of it is dropped. 0, or -1 with errno EINVAL for a kind out of
 * range or one deliver keeps (MSG_KIND_CONN, MSG_KIND_NONE). At start or
 * shutdown, while no message is on its way; ops must outlive their use.
 */
int	deliver_register(unsigned kind, const struct deliver_kind_ops *ops);

/* Whether kind is registered and in service, and able to take now. */
bool	deliver_kind_on(unsigned kind);
bool	deliver_kind_up(unsigned kind);

/*
 * What became of m, a message the store handed out (MSG_F_STORED), told
 * to the store's outcome; or, one another node's store sent here
 * (MSG_F_NODE_HELD), as the verdict that node waits for, with the receipt
 * made here. Takes m. The reactor that holds m.
 */
void	deliver_outcome(struct msg *m, enum msg_outcome o);

/*
 * MSG_OUT_WRITTEN for each of ms[0..n), messages the store handed out,
 * told to the store in one go; the caller keeps them (their DELIVERED or
 * RETURNED is to come). The reactor that holds them.
 */
void	deliver_written(struct msg *const *ms, unsigned n);

/*
 * A session that can receive for address appeared: every registered kind
 * that holds messages for it hears (wake). Any thread.
 */
void	deliver_wake(const char *address);

/*
 * Hands q to kind's request (SMPP query_sm, cancel_sm, replace_sm on the
 * store). -1 with errno ENOTSUP, q still the caller's, when the kind is
 * not on or takes no requests. Any reactor.
 */
int	deliver_request(unsigned kind, struct msg_req *q);

/*
 * Hands m to kind's take for address to, as deliver does when it picks
 * that kind; an unregistered kind answers MSG_NO_ROUTE to m's sender.
 * Takes m. Any thread.
 */
void	deliver_to_kind(unsigned kind, struct reactor_batch *b, struct msg *m,
	    const char *to);

/*
 * Sends m, whose sender (m->sender_kind and that kind's address) the
 * caller set, from reactor r to m->to; as deliver_send otherwise. Owning
 * reactor of r only.
 */
enum msg_verdict deliver_from(struct reactor *r, struct msg *m);

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
 * Sends m's verdict (m->verdict) back to its sender: a connection's
 * reactor, as a cross-reactor delivery does, or the answer of the sender's
 * registered kind; frees m when nobody waits for one. Takes m. Any thread
 * (the store's answers).
 */
void	deliver_answer(struct msg *m);

/*
 * The same from a thread that answers many at once: the verdict for a
 * reactor is staged in b (reactor.h), which the caller publishes.
 */
void	deliver_answer_in(struct reactor_batch *b, struct msg *m);

/*
 * The same on reactor r, in a task of its turn: a sender on r hears the
 * verdict at once, not in a task r posts to itself; others through r's
 * batch. Owning reactor (r) only.
 */
void	deliver_answer_on(struct reactor *r, struct msg *m);

/*
 * Mailbox task: hands a message that came from another node (its sender
 * of MSG_KIND_NODE) to the recipient's protocol on this reactor and sends
 * the verdict back through that kind's answer. Owning reactor
 * (m->recipient.conn.reactor).
 */
void	deliver_node_task(void *owner, void *arg, enum mailbox_status st);

/*
 * Mailbox task: hands a message from the store to the recipient's
 * protocol on this reactor and tells the store what became of it,
 * through the answer MSG_KIND_STORE registered (m's sender is not the
 * store then: that tells it from a verdict for what the store sent
 * through the cluster). Owning reactor (m->recipient.conn.reactor).
 */
void	deliver_stored_task(void *owner, void *arg, enum mailbox_status st);

/*
 * The cluster found nobody for m (no node answered for any address it may
 * go to): its account's store takes it when there is one, else the sender
 * hears "no route". Takes m. Any thread (the cluster's).
 */
void	deliver_unrouted(const struct config *cf, struct msg *m);

/*
 * Makes and forwards the delivery receipt for orig, if orig asked for one
 * (registered_delivery), to orig->reply_to: "id:... stat:DELIVRD ...".
 * state: SMPP message_state. It leaves in a later turn of r, so that
 * orig's sender has its answer (submit_sm_resp) first. Owning reactor of
 * the connection that ends orig's delivery (the recipient's), or of
 * whatever holds orig.
 */
void	deliver_receipt(struct reactor *r, const struct msg *orig,
	    uint8_t state);

#endif
