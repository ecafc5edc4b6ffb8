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
	ROUTE_REFUSED,		/* the recipient's protocol cannot take it */
};

/*
 * A message on its way. It travels from the sender's reactor to the
 * recipient's and back (for the verdict) as one allocation, posted through
 * the mailboxes; whoever holds it owns it.
 */
struct route_msg {
	struct reactor_task task;
	uint64_t id;
	struct route_owner sender;
	struct route_owner recipient;
	enum route_verdict verdict;
	uint8_t	src_ton, src_npi;	/* SMPP address types, 0 otherwise */
	uint8_t	dst_ton, dst_npi;
	uint8_t	data_coding;
	uint8_t	registered_delivery;
	uint32_t sender_ref;		/* the sender's own reference */
	char	from[ROUTE_ADDR_MAX + 1];
	char	to[ROUTE_ADDR_MAX + 1];
	size_t	len;
	uint8_t	text[];
};

/* Valid address: 1-64 of A-Z a-z 0-9 + . _ : @ - */
bool	route_addr_valid(const char *s, size_t len);

/*
 * Claims addr for owner. 0, or -1 if someone else holds it. Any thread:
 * the table is sharded, each shard under its own short lock.
 */
int	route_claim(const char *addr, const struct route_owner *owner);

/* Releases addr if owner still holds it. Any thread. */
void	route_release(const char *addr, const struct route_owner *owner);

/* The owner of addr, if anyone holds it. Any thread. */
bool	route_lookup(const char *addr, struct route_owner *owner);

/*
 * The address a message to addr goes to: addr itself when someone holds
 * it, else the "to" of the longest matching prefix route in cf, else NULL.
 */
const char *route_resolve(const struct config *cf, const char *addr,
	    struct route_owner *owner);

/* A message with room for len bytes of text; its fields zeroed. */
struct route_msg *route_msg_new(size_t len);

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

/* The reply text of a verdict, as in "OK", "ERR 404 ... no route". */
const char *route_verdict_name(enum route_verdict v);

#endif
