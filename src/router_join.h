/*
 * router_join.h: SMPP parts (UDH concatenation IEs or SAR fields) joined
 * into one message at a router client's edge: held per session until
 * every part is in, expired after the sending account's
 * reassembly_timeout, reported (receipts, the store's outcomes).
 */
#ifndef ECHOROUTERD_ROUTER_JOIN_H
#define ECHOROUTERD_ROUTER_JOIN_H

#include <stdbool.h>

struct conn;
struct msg;
struct router_join;

/*
 * What the router protocol does for the joiner: put decodes a message
 * without a UDH from its data_coding and queues its line on c (MSG_OK,
 * or why not, as on_deliver); keep keeps a copy of a stored part whose
 * joined line was queued, to tell the store once the socket took it;
 * durable says whether a store keeps the messages for c's address (then
 * a part waits there rather than in memory).
 */
struct router_join_ops {
	int	(*put)(struct conn *c, const struct msg *m);
	void	(*keep)(struct conn *c, const struct msg *part);
	bool	(*durable)(struct conn *c);
};

/*
 * Whether m, an SMPP client's octets (MSG_F_CODED), goes through the
 * joiner: it has a UDH (esm_class UDHI), or SAR fields of more than one
 * part. Any thread.
 */
bool	router_join_wants(const struct msg *m);

/*
 * Delivers m (router_join_wants) to c: a message of one part with its UDH
 * taken off through ops->put; one part of several held in *jp (made on
 * first use) until the rest come, then the joined message through
 * ops->put once. Returns on_deliver's verdict: MSG_HELD for a part kept
 * or joined (its receipt, or the store's outcome, follows from here),
 * MSG_STORE for a part that would wait in memory while a store could
 * keep it (ops->durable: it comes back from the store), MSG_BUSY when a cap is reached (nothing kept: the sender may try
 * again), MSG_UNFIT for a bad header or coding, or what ops->put said of
 * the joined message. m is borrowed. Owning reactor of c only.
 */
int	router_join_deliver(struct router_join **jp, struct conn *c,
	    const struct msg *m, const struct router_join_ops *ops);

/*
 * About once a second: messages whose parts did not all come within
 * their reassembly_timeout are dropped and reported (UNDELIV receipts to
 * their submitters; stored parts failed in the store). NULL: nothing.
 * Owning reactor of c only.
 */
void	router_join_tick(struct router_join *j, struct conn *c);

/*
 * c closes: stored parts go back to the store (they come again), the
 * others are reported undeliverable; then j is freed. NULL is a no-op.
 * Owning reactor of c only.
 */
void	router_join_free(struct router_join *j, struct conn *c);

#endif
