/* route.h: the address table and message delivery between connections and reactors. */
#ifndef ECHOROUTERD_ROUTE_H
#define ECHOROUTERD_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reactor.h"

#define ROUTE_ADDR_MAX	64

struct conn;
struct config;

/* Where a logged-in address lives: a connection on a reactor. */
struct route_owner {
	uint32_t reactor;
	uint32_t slot;
	uint32_t gen;
};

enum route_verdict {
	ROUTE_PENDING = 0,	/* posted to another reactor; answer follows */
	ROUTE_OK,		/* queued on the recipient's connection */
	ROUTE_NO_ROUTE,		/* nobody owns the address (or it left) */
	ROUTE_BUSY,		/* the recipient's output is over its watermark */
	ROUTE_REFUSED,		/* the recipient's queue for it is full */
	ROUTE_UNFIT,		/* the recipient's protocol cannot carry it */
};

/* route_msg flags. */
enum {
	ROUTE_F_PREFIX_FIRST = 1 << 0,	/* routes before logged-in owners */
	ROUTE_F_EXACT = 1 << 1,		/* only the owner of the address */
	ROUTE_F_NO_VERDICT = 1 << 2,	/* nobody waits for the verdict */
	ROUTE_F_RECEIPT = 1 << 3,	/* a delivery receipt */
	ROUTE_F_UMR = 1 << 4,		/* user_message_reference is set */
	ROUTE_F_SAR = 1 << 5,		/* the sar_* fields are set */
};

#define ROUTE_NO_REACTOR	UINT32_MAX
#define ROUTE_ESM_RECEIPT	0x04	/* esm_class of a delivery receipt */
#define ROUTE_STATE_DELIVERED	2	/* SMPP message_state values */
#define ROUTE_STATE_UNDELIVERABLE 5

/*
 * A message on its way. It travels from the sender's reactor to the
 * recipient's and back (for the verdict) as one allocation, posted through
 * the mailboxes; whoever holds it owns it. route_msg_new zeroes what comes
 * before src_addr and empties the strings: keep every number field above
 * src_addr.
 */
struct route_msg {
	struct reactor_task task;
	uint64_t id;
	struct route_owner sender;
	struct route_owner recipient;
	enum route_verdict verdict;
	uint32_t flags;
	uint32_t sender_ref;		/* the sender's own reference */
	uint32_t sender_cmd;		/* and what it was answering */
	uint64_t submitted;		/* wall clock seconds, for receipts */
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
	size_t	len;
	uint8_t	text[];
};

/* Valid address: 1-64 of A-Z a-z 0-9 + . _ : @ - */
bool	route_addr_valid(const char *s, size_t len);

/*
 * Claims addr for owner alone (a router LOGIN). 0, or -1 if anyone holds
 * it. Any thread: the table is sharded, each shard under its own short lock.
 */
int	route_claim(const char *addr, const struct route_owner *owner);

/*
 * Adds owner to the owners sharing addr (an SMPP account's receiving
 * binds); lookups take them in turn. 0, or -1 if addr is claimed alone.
 * Any thread.
 */
int	route_join(const char *addr, const struct route_owner *owner);

/* Removes owner from addr, if it holds it. Any thread. */
void	route_release(const char *addr, const struct route_owner *owner);

/*
 * The owner of addr, if anyone holds it; of several sharing it, the next
 * in turn. Any thread.
 */
bool	route_lookup(const char *addr, struct route_owner *owner);

/*
 * The address a message to addr goes to, and its owner: the owner of addr
 * itself, else the "to" of the longest matching prefix route in cf (with
 * prefix_first, the route is tried first), else NULL.
 */
const char *route_resolve(const struct config *cf, const char *addr,
	    bool prefix_first, struct route_owner *owner);

/*
 * A message with room for len bytes of text (and a NUL after them): its
 * numbers zero, its strings empty, the text for the caller to fill.
 */
struct route_msg *route_msg_new(size_t len);

/* The bytes m takes: its fields, its text, the NUL after. */
static inline size_t
route_msg_size(const struct route_msg *m)
{
	return sizeof(*m) + m->len + 1;
}

/* A copy of m (text included) that the caller owns. */
struct route_msg *route_msg_dup(const struct route_msg *m);

/* A message id unique within the run. Owning reactor only. */
uint64_t route_next_id(struct reactor *r);

/*
 * Sends m from connection c (the sender, on its owning reactor) to m->to.
 * Returns the verdict when it is known at once (the recipient is on the
 * same reactor, or there is no route) and frees m; returns ROUTE_PENDING
 * when m went to the recipient's reactor, in which case the sender's
 * protocol gets on_verdict(c, m) later, unless c has closed by then.
 */
enum route_verdict route_send(struct conn *c, struct route_msg *m);

/*
 * Sends m from reactor r with nobody waiting for a verdict (delivery
 * receipts): to the owner of m->to only when ROUTE_F_EXACT. Takes m.
 * Owning reactor of whatever made m.
 */
void	route_forward(struct reactor *r, struct route_msg *m);

/*
 * Makes and forwards the delivery receipt for orig, if orig asked for one
 * (registered_delivery), to orig->reply_to. state: SMPP message_state.
 */
void	route_receipt(struct reactor *r, const struct route_msg *orig,
	    uint8_t state);

/* The verdict's name: "ok", "no route", ... */
const char *route_verdict_name(enum route_verdict v);

#endif
