/* route.h: the address table (who holds which address) and prefix routes. */
#ifndef ECHOROUTERD_ROUTE_H
#define ECHOROUTERD_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handle.h"
#include "mailbox.h"

#define ROUTE_ADDR_MAX	64

struct config;
struct route_conf;

/* Kinds of owner; a cluster adds one for another node. */
enum route_owner_kind {
	ROUTE_OWNER_CONN = 0,	/* a connection on one of our reactors */
	/*
	 * Any other value is a kind of destination registered with deliver
	 * (enum msg_kind, deliver_register), its address in conn's numbers.
	 */
};

/* Who holds an address. */
struct route_owner {
	enum route_owner_kind kind;
	struct conn_handle conn;	/* ROUTE_OWNER_CONN */
};

/* An owner that is the connection h names. */
static inline struct route_owner
route_owner_conn(struct conn_handle h)
{
	return (struct route_owner){ .kind = ROUTE_OWNER_CONN, .conn = h };
}

static inline bool
route_owner_eq(const struct route_owner *a, const struct route_owner *b)
{
	return a->kind == b->kind && conn_handle_eq(&a->conn, &b->conn);
}

/*
 * fn(addr) is called whenever an address gets its first holder or loses
 * its last, after the table changed, on the thread that changed it (the
 * cluster keeps its subscriptions so). Set once, before threads start;
 * NULL: nobody is told.
 */
void	route_watch(void (*fn)(const char *addr));

/* Valid address: 1-64 of A-Z a-z 0-9 + . _ : @ - */
bool	route_addr_valid(const char *s, size_t len);

/*
 * Claims addr for owner alone (a router LOGIN). 0, or -1 if anyone holds
 * it. Any thread: the table is sharded, each shard under its own short lock.
 */
int	route_claim(const char *addr, const struct route_owner *owner);

/*
 * As route_claim, but pending: the address is taken here (no other
 * session can have it, and route_is_claimed says so) while the cluster is
 * asked, and nobody finds it yet (route_lookup, route_is_held, the
 * watcher) until route_confirm. Released with route_release. Any thread.
 */
int	route_claim_pending(const char *addr, const struct route_owner *owner);

/* The cluster agreed: owner's pending claim on addr is a claim. */
void	route_confirm(const char *addr, const struct route_owner *owner);

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
 * Whether anyone holds addr now, without taking a turn among those
 * sharing it. Any thread.
 */
bool	route_is_held(const char *addr);

/*
 * Whether one owner holds addr alone (a router LOGIN), as opposed to
 * owners sharing it (an SMPP account's binds); a pending claim counts.
 * Any thread.
 */
bool	route_is_claimed(const char *addr);

/*
 * The "to" of the longest prefix route in cf matching addr, held or not;
 * NULL if none matches. Any thread.
 */
const char *route_by_prefix(const struct config *cf, const char *addr);

/*
 * The longest prefix route in cf matching addr, or NULL: as many probes
 * of cf's index of prefixes as the routes have lengths of prefix, however
 * many routes there are. Any thread.
 */
const struct route_conf *route_conf_by_prefix(const struct config *cf,
	    const char *addr);

/*
 * The address a message to addr goes to, and its owner: the owner of addr
 * itself, else the "to" of the longest matching prefix route in cf (with
 * prefix_first, the route is tried first), else NULL. Any thread (cf is
 * immutable; the table takes its shard locks).
 */
const char *route_resolve(const struct config *cf, const char *addr,
	    bool prefix_first, struct route_owner *owner);

/*
 * Claims beyond this node. A router LOGIN in a cluster must have its
 * address free on every node; whoever can ask them (the cluster) registers
 * these operations at start, and a protocol asks through route_wide_*
 * without knowing who answers.
 */

/* What became of a claim beyond this node. */
enum route_claim_result {
	ROUTE_CLAIMED = 0,	/* ours everywhere */
	ROUTE_IN_USE,		/* a live node holds it */
	ROUTE_UNAVAILABLE,	/* the others cannot be asked now */
};

/*
 * A claim on its way: the caller fills conn, addr and done, and owns it
 * again when done(reactor, claim, MAILBOX_RUN) runs on conn's reactor
 * with result set (MAILBOX_CANCELLED: at exit, only free it).
 */
struct route_claim {
	struct mailbox_task task;
	mailbox_task_fn *done;
	struct conn_handle conn;
	enum route_claim_result result;
	char	addr[ROUTE_ADDR_MAX + 1];
};

struct route_wide_ops {
	/* Whether the others can be asked now. */
	bool	(*up)(void);
	/* Claims q->addr everywhere (struct route_claim). Takes q. */
	void	(*claim)(struct route_claim *q);
	/* Gives up the claim on addr, unless a session here holds it again. */
	void	(*release)(const char *addr);
};

/*
 * Registers ops (NULL: none). Main thread, before the reactors start or
 * after they stopped; ops must outlive their use.
 */
void	route_wide_register(const struct route_wide_ops *ops);

/* Whether claims go beyond this node, and whether they can now. Any thread. */
bool	route_wide_on(void);
bool	route_wide_up(void);

/*
 * Claims q->addr beyond this node: 0, q taken; -1 when nobody registered
 * (q still the caller's). Any thread.
 */
int	route_wide_claim(struct route_claim *q);

/* Gives up this node's claim on addr beyond it. Any thread. */
void	route_wide_release(const char *addr);

#endif
