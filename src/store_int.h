/*
 * store_int.h: what the store's own files share (store.c, store_rows.c):
 * its accounts, its state and the helpers both call. Not for other
 * modules: they use store.h. Store thread, unless a field says otherwise.
 */
#ifndef ECHOROUTERD_STORE_INT_H
#define ECHOROUTERD_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "msg.h"
#include "route.h"
#include "store.h"

/*
 * Messages handed to sessions and not yet written out or answered for:
 * per account (a few windows' worth) and in all, by count and by bytes
 * (msg_size). A backlog of a million never lands in memory at once. The
 * count is what a drain's batches are made of: at 8,192 a store thread
 * waited on the round trip through the reactors with half its accounts
 * starved, and each group and scan carried a quarter of what it does at
 * 32,768 (1,000 accounts drained at 0.7 of the CPU per message, 1.45
 * times the rate; 65,536 added nothing). 32,768 SMS of 160 bytes take 19
 * MiB. The bytes bound what long texts take (max_line goes to 1 MiB):
 * each shard its share of STORE_INFLIGHT_BYTES, each account at most
 * 1/STORE_ACCT_BYTES_SHARE of its shard's (each may pass its bound by
 * one message: one always goes), so that a few accounts whose sessions
 * sit on big messages leave room for the rest.
 */
#define STORE_ACCT_INFLIGHT	64
#define STORE_INFLIGHT_MAX	32768
#define STORE_INFLIGHT_BYTES	((uint64_t)64 << 20)
#define STORE_ACCT_BYTES_SHARE	8
/*
 * Per account, at most this many on the wire (written to a session's
 * socket, not yet acknowledged by its peer): past it, a written message
 * keeps its place in flight. Enough for a receiver that holds its ACK for
 * two 64 KiB loopback segments of short lines; it bounds the copies the
 * session keeps, the rows a scan skips, and what may come twice after a
 * crash.
 */
#define STORE_ACCT_WIRE_MAX	4096
/* How long an account whose sessions had no room waits to be tried. */
#define STORE_PAUSE_MS		200
/* Retries back off from 1 s, doubling, to at most this. */
#define STORE_RETRY_MAX_S	300
#define STORE_ACCT_BUCKETS	4096
#define STORE_TICK_MS		100
/*
 * A group with senders waiting for its commit gathers more while they
 * keep coming, when busy (store.c, gather): until none came for
 * STORE_GATHER_GAP_US, and for at most STORE_GATHER_MAX_US.
 */
#define STORE_GATHER_GAP_US	200
#define STORE_GATHER_MAX_US	3000
/*
 * In a cluster, an account with a backlog and nobody here: how often the
 * store tries whether another node holds it (besides the nodes' notices).
 */
#define STORE_PROBE_S		10

/*
 * An account that has had messages in the store this run. Made on first
 * use and kept till exit (accounts are few: the configuration's), so that
 * reactors can read held without a lock. An account is its shard's
 * (store_shard_of its id), where senders' messages for it go; a shard
 * that stores a receipt for it (in the group that marks the message it
 * tells of) has one of its own too, and a route's upstreams have one in
 * each shard (for the numbers: store_shard_for). Each is one shard's:
 * that shard's thread alone touches the fields below held.
 */
struct store_acct {
	struct store_acct *_Atomic next;	/* hash chain */
	atomic_uint_fast64_t held;	/* in the store or on the way there */
	char	id[ROUTE_ADDR_MAX + 1];
	unsigned shard;
	/* Its shard's thread's alone: */
	struct store_acct *all;		/* the shard's accounts, for the tick */
	struct store_acct *dirty_next;
	bool	dirty;
	bool	oldest_stale;
	uint64_t count;			/* ENROUTE in the file */
	uint64_t bytes;
	uint64_t oldest;
	uint64_t cursor;		/* handed out up to this id */
	uint64_t rescan_at;		/* s: a retry or a schedule falls due */
	uint64_t resume_ms;		/* no room at its sessions: wait */
	uint64_t probe_at;		/* s: try other nodes again then */
	bool	remote;			/* another node may hold it: send there */
	struct route_owner inflight_to;	/* the session of what is in flight */
	unsigned ninflight;
	uint64_t inflight[STORE_ACCT_INFLIGHT];
	uint32_t inflight_size[STORE_ACCT_INFLIGHT];	/* msg_size of each */
	uint64_t inflight_bytes;	/* their sum */
	/*
	 * On the wire (MSG_OUT_WRITTEN): written to a session's socket, not
	 * yet acknowledged by its peer. Out of the window, so that the next
	 * go out meanwhile, but kept: they come again if the session ends
	 * first. As many as a socket's send queue holds: a set of ids (open
	 * addressing; 0 is empty, wire_cap a power of 2 or 0).
	 */
	uint64_t *wire;
	unsigned nwire;
	unsigned wire_cap;
	/*
	 * Delivered or failed, their final state not yet committed: kept
	 * (with the message, for its receipt) until it is, and while one is
	 * not even written the account gets nothing more, so that a full disk
	 * pauses it instead of sending the same messages again and again.
	 * Each was in flight or on the wire.
	 */
	struct store_mark {
		struct msg *m;
		uint8_t	state;		/* the final enum msg_state */
		bool	written;	/* in the open transaction */
	} *marks;
	unsigned nmarks;
	unsigned marks_cap;
	unsigned nunwritten;
	struct store_acct *marking_next; /* S.marking: nmarks is not 0 */
	bool	marking;
};

/*
 * A shard: a store thread, its backend and file, and the accounts that
 * hash to it. The limits (max_messages, max_bytes) count all shards
 * together (store.c's totals); the rest is the shard's own.
 */
struct store {
	const struct store_backend_ops *ops;
	struct store_backend *b;
	struct service *svc;
	unsigned index;			/* shards[index] */
	char	path[4096 + 16];	/* its file */
	unsigned inflight_max;		/* its share of STORE_INFLIGHT_MAX */
	uint64_t inflight_bytes_max;	/* and of STORE_INFLIGHT_BYTES */
	struct config *cf;		/* the store thread's snapshot */
	struct store_acct *_Atomic all;	/* its accounts, newest first */
	/* The store thread's alone: */
	bool	in_txn;
	bool	durable;		/* the open transaction acknowledges */
	bool	failing;		/* writes fail: logged once */
	bool	quiesced;		/* shutting down: nothing written */
	bool	starved;		/* an account found no place in flight */
	/* The file was removed or replaced under us: store nothing more. */
	atomic_bool lost;
	struct mailbox_task *waiting;	/* puts awaiting the commit */
	unsigned nwaiting;		/* how many */
	unsigned last_waiting;		/* in the last group that had some */
	uint64_t posts_kept;		/* the last HTTP post kept in the group */
	struct store_acct *dirty;
	struct store_acct *marking;	/* accounts with marks to finish */
	uint64_t mark_retry_ms;		/* failing: marks written again then */
	uint64_t id_seq;		/* the store's own message ids */
	uint64_t nmessages;
	uint64_t nbytes;
	/*
	 * Final rows, kept for query_sm till default_validity, count against
	 * the limits too: the oldest go early to make room. As in the open
	 * group, and as last committed.
	 */
	uint64_t nfinal, final_bytes;
	uint64_t nfinal_ok, final_bytes_ok;
	uint64_t evict_cursor;		/* the purges' places in the table */
	uint64_t purge_cursor;
	unsigned ninflight;
	uint64_t inflight_bytes;
	uint64_t last_second;
	uint64_t last_purge;
	/* For the stats, any thread. */
	atomic_uint_fast64_t st_messages;
	atomic_uint_fast64_t st_bytes;
	atomic_uint_fast64_t st_in_flight;
	atomic_uint_fast64_t st_in_flight_bytes;
	atomic_uint_fast64_t st_oldest;
	atomic_uint_fast64_t st_commits;
	atomic_uint_fast64_t st_commit_failures;
};

/* The calling store thread's shard (store.c's); NULL on other threads. */
struct store *store_state(void);

/*
 * The shard of account id among n: stable across restarts for the same
 * n (another n moves messages at start: store_move). Any thread.
 */
unsigned store_shard_of(const char *id, unsigned n);

/*
 * At start, before the threads run: moves the waiting messages of the
 * store at path (b, shard k; k >= nshards: a file no longer used) whose
 * account is another shard's to that shard's file, each batch committed
 * there before it is deleted here (a crash between leaves it in both,
 * and the next start deletes it here). The count moved, or -1 and *err.
 * store_move.c.
 */
long	store_move(struct store_backend *b, const char *path, unsigned k,
	    char **err);

/*
 * The shard that stores m for account: store_shard_of the account, or
 * for a route's upstreams ("upstream:NAME"), of m's destination number.
 * Any thread, once the store is open.
 */
unsigned store_shard_for(const char *account, const struct msg *m);

/* Shard k (0: the one that also keeps receipts and HTTP posts). */
struct store *store_shard(unsigned k);
unsigned store_nshards(void);

/* Wall clock seconds. */
uint64_t store_wall_now(void);

/*
 * The calling store thread's account called id, made on first use. A
 * route's upstreams have one in each shard, for the numbers that hash to
 * it; any other account is in its own shard only.
 */
struct store_acct *store_acct_get(const char *id);

/* a has work for the next pump. */
void	store_mark_dirty(struct store_acct *a);

/* Whether id is out: at a session, or its final state not committed. */
bool	store_acct_has_out(const struct store_acct *a, uint64_t id);

/* Starts the group's transaction if none is open; false if it cannot. */
bool	store_txn(bool durable);

/* After a write: a failed one is logged once (and the group fails). */
void	store_write_error(void);

/* A message leaves ENROUTE: counts down. */
void	store_acct_leave(struct store_acct *a, const struct msg *m);

/* A message reached a final state, or n of them were purged. */
void	store_final_add(const char *account, const struct msg *m);
void	store_final_sub(uint64_t n, uint64_t bytes);

/* Counts n messages of b bytes more (or fewer) into the shard's totals. */
void	store_count(int64_t n, int64_t b);

/* Stores the receipt for orig in state (SMPP), if it asked for one. */
void	store_receipt(const struct msg *orig, uint8_t state);

/*
 * Commits the open group and answers those waiting for it; false if the
 * commit failed (its waiters refused, what it changed undone).
 */
bool	store_group_commit(void);

/* store_rows.c: expiry and the purge of final rows, from the tick. */
void	store_expire(uint64_t now);
void	store_purge_old(uint64_t now);

/* store_rcpt.c: receipt ids older than upstream_receipts.expiry go. */
void	store_rcpt_purge(uint64_t now);

#endif
