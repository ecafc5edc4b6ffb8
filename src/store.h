/*
 * store.h: store-and-forward. A message for an account with no session
 * that can take it waits in the store, on disk, and is delivered when the
 * account comes back, across restarts and crashes.
 *
 * One service thread ("store") owns the store and its backend (SQLite,
 * store_backend.h). Reactors only post to it and hear back through their
 * mailboxes: they never touch the file and never wait on it. Everything
 * that reached the thread since its last commit goes in one transaction:
 * one fsync acknowledges a whole group.
 *
 *  reactor k --store_put(m)--> store: commit --> verdict back to k (OK / full)
 *  store --stored message--> reactor j (a session of the account)
 *  reactor j --deliver_outcome(m, delivered | retry | ...)--> store_outcome
 */
#ifndef ECHOROUTERD_STORE_H
#define ECHOROUTERD_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "handle.h"
#include "mailbox.h"
#include "msg.h"

struct config;
struct reactor;
struct service;

/* The backlog, for the stats line, STATUS= and SIGUSR1. Any thread. */
struct store_stats {
	uint64_t messages;	/* waiting (not in a final state) */
	uint64_t bytes;
	uint64_t oldest;	/* wall clock s of the oldest waiting; 0 none */
	uint64_t commits;	/* group commits made since start */
	uint64_t commit_failures; /* and those that failed (rolled back) */
	uint64_t in_flight;	/* handed to sessions, outcome not back yet */
	uint64_t in_flight_bytes; /* their msg_size */
};

/*
 * Opens cf's store to see that it can be (echorouterd -t): 0, or -1 and
 * a malloc'd *err naming the file and why. Any thread, store not running.
 */
int	store_check(const struct config *cf, char **err);

/*
 * Opens cf's store (checking it): a file per shard (store.shards), the
 * waiting messages moved to their account's shard if store.shards
 * changed; reads what is needed to find backlogs, and makes the shards'
 * service threads, not yet started, appended to svcs[*nsvcs] (room for
 * CONFIG_SHARDS_MAX): the caller starts and stops them with the other
 * services, then calls store_close. 0 (also when cf has no store: none
 * appended), or -1 and a malloc'd *err. Main thread, once.
 */
int	store_open(const struct config *cf, struct service **svcs,
	    unsigned *nsvcs, char **err);

/*
 * Message ids (msg_next_id) must start above this for ids to stay
 * unique across restarts: the highest stored, in sequence terms. Main
 * thread, after store_open.
 */
uint64_t store_id_floor(void);

/*
 * At shutdown, once the reactors have stopped and before the other
 * services stop: the store commits what it holds and lets go of the NATS
 * servers (JetStream), which the cluster's stop then closes for good.
 * Waits for it. Main thread.
 */
void	store_quiesce(void);

/* After the service has stopped: closes the file, frees all. */
void	store_close(void);

/* Whether there is a store. Any thread. */
bool	store_on(void);

/* A new configuration (limits, validity) from SIGHUP. Main thread. */
void	store_reload(const struct config *cf);

void	store_get_stats(struct store_stats *st);

/*
 * Shard k's part of them (store.shards): false once k is past the last.
 * Any thread.
 */
bool	store_get_shard_stats(unsigned k, struct store_stats *st);

/*
 * Appends the backlog to the stats line (" stored=N stored_bytes=B
 * stored_oldest_age=S") or, status, to STATUS= (", N stored, oldest S s");
 * nothing without a store. Any thread.
 */
void	store_stats_append(char *buf, size_t len, bool status);

/*
 * Whether messages for account are in the store or on their way to it:
 * then a new one for account goes behind them, not around them. Any
 * thread; no lock.
 */
bool	store_holds(const char *account);

/*
 * Stores m for account (an account of the configuration). The verdict
 * (MSG_OK once committed, MSG_FULL if refused) goes back to
 * m->sender's reactor as a cross-reactor one does, unless
 * MSG_F_NO_VERDICT. Takes m. Any reactor.
 */
void	store_put(struct msg *m, const char *account);

/* A session that can receive for account appeared. Any thread. */
void	store_wake(const char *account);

/*
 * What became of m, a message the store handed out (MSG_F_STORED).
 * Takes m. The reactor that holds it.
 */
void	store_outcome(struct msg *m, enum msg_outcome o);

/*
 * Another node says account is bound there now: what is stored for it
 * goes there (through the cluster) while nobody here holds it. Any thread.
 */
void	store_held_elsewhere(const char *account);

/* Posts q to the store. Takes q until it comes back. Any reactor. */
void	store_request(struct msg_req *q);

struct receipt_key;
struct receipt_orig;

/*
 * Whether the store keeps the receipt id map (receipt_map.h) durably:
 * its backend can (SQLite). Any thread.
 */
bool	store_rcpt_on(void);

/*
 * Files o under upstream's keys (n of them, receipt_id_keys) in the
 * store, in its next group; nobody hears back. Any thread.
 */
void	store_rcpt_file(const char *upstream, const struct receipt_key *keys,
	    unsigned n, const struct receipt_orig *o);

/*
 * The final receipt for our message id came, with these keys (n of them,
 * receipt_id_keys of its id): what was filed for that part of it goes,
 * not what its other parts' receipts still need. Any thread.
 */
void	store_rcpt_forget(const char *upstream, const struct receipt_key *keys,
	    unsigned n, uint64_t id);

/*
 * A lookup of the receipt id map in the store: the first of keys that
 * is filed for upstream (keys[which]), its record in o (found); take
 * drops it (the rows of that id of the centre's, one part's). The
 * store posts it back to reactor, where done(reactor, q, status) runs
 * and frees it (MAILBOX_CANCELLED: at exit; free only). The caller
 * allocates it, with room after it for its own.
 */
struct store_rcpt_req {
	struct mailbox_task task;
	mailbox_task_fn *done;
	unsigned reactor;
	char	upstream[65];
	unsigned nkeys;
	struct receipt_key *keys;	/* the caller's, with q */
	bool	take;
	bool	found;
	unsigned which;
	struct receipt_orig *o;		/* the caller's, with q */
};

/* Posts q to the store. Takes q until it comes back. Any thread. */
void	store_rcpt_find(struct store_rcpt_req *q);

/*
 * HTTP posts not yet answered (http_out.h), kept so that a restart (a
 * kill -9 included) posts them: with a store whose backend keeps them
 * (SQLite; store_keeps_posts). store_post_keep adds post id (body NULL: a
 * GET) and, in the same group, forgets the receipt awaited unwant (0
 * none: store_want_done) that the post ends; store_post_done removes it;
 * written by the store thread in its next group commit, after which it
 * tells http_out_kept. Any thread.
 */
typedef int store_post_fn(uint64_t id, const char *url, const char *body,
	    void *arg);
bool	store_keeps_posts(void);
void	store_post_keep(uint64_t id, const char *url, const char *body,
	    uint64_t unwant);
void	store_post_done(uint64_t id);

/*
 * The same for the receipts HTTP sends await (http_out.h), by message id:
 * a message stored across a restart still has its receipt posted.
 */
struct http_out_want;
typedef int store_want_fn(const struct http_out_want *w, void *arg);
void	store_want_keep(const struct http_out_want *w);
void	store_want_done(uint64_t id);

/*
 * Calls fn for each post, or each receipt awaited, kept (0 to go on). 0,
 * or -1. The main thread, after store_open, before the store thread
 * starts.
 */
int	store_posts_each(store_post_fn *fn, void *arg);
int	store_wants_each(store_want_fn *fn, void *arg);

/*
 * Whether message id is in a final state of its own whose receipt is
 * ours to give (not an SMS centre's): then its SMPP message_state and
 * when, in *state and *at. The shards are asked in turn. The main thread,
 * like store_wants_each: a receipt awaited whose message a kill -9 left
 * final before the post was kept is posted at the start.
 */
bool	store_final_of(uint64_t id, uint8_t *state, uint64_t *at);

#endif
