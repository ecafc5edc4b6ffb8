/*
 * store_backend.h: what the store thread asks of the file that holds the
 * messages: SQLite (store_sqlite.c), one file, or JetStream
 * (store_jetstream.c), a key-value bucket on the cluster's NATS servers.
 * Every call is on the store thread.
 *
 * Writes happen between begin and commit: the store thread begins at the
 * first write of a batch of tasks and commits after the batch (group
 * commit). A failed commit has rolled everything back.
 */
#ifndef ECHOROUTERD_STORE_BACKEND_H
#define ECHOROUTERD_STORE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "msg.h"
#include "store.h"

struct config;
struct receipt_key;
struct receipt_orig;
struct store_backend;

/* One stored message: its message and what the store keeps beside it. */
struct store_rec {
	struct msg *m;		/* id, addresses, text, SMPP fields */
	char	account[65];		/* the recipient account */
	uint8_t	state;			/* enum msg_state */
	uint64_t due;			/* not before (wall clock s) */
	uint64_t expires;		/* not after */
	uint64_t final_date;		/* when it reached a final state */
	uint32_t attempts;		/* temporary failures so far */
};

/*
 * For scans: 0 to go on, anything else stops the scan. rec is borrowed;
 * fn may take rec->m (setting it NULL).
 */
typedef int store_rec_fn(struct store_rec *rec, void *arg);
typedef int store_backlog_fn(const char *account, uint64_t count,
	    uint64_t bytes, void *arg);


struct store_backend_ops {
	const char *name;
	/*
	 * Opens (creating when missing) and checks the store at path (a
	 * shard's file: cf->store.path or one beside it), with the rest of
	 * cf (JetStream: the cluster's NATS servers) as it needs.
	 * check_only: opens an existing file read-only, or checks that a
	 * missing one can be made. NULL and a malloc'd *err naming the file
	 * and why.
	 */
	struct store_backend *(*open)(const struct config *cf,
		    const char *path, bool check_only, char **err);
	void	(*close)(struct store_backend *b);
	/*
	 * Optional (a backend of one shard): removes the closed store at
	 * path and the files beside it (a shard no longer used, its
	 * messages moved). 0, or -1 with errno.
	 */
	int	(*remove)(const char *path);
	/* A transaction; durable: its commit is fsync'd (sync = "full"). */
	int	(*begin)(struct store_backend *b, bool durable);
	int	(*commit)(struct store_backend *b);
	void	(*rollback)(struct store_backend *b);
	/*
	 * Whether a transaction is open: a failed write (a full disk) may
	 * have rolled the whole of it back.
	 */
	bool	(*in_txn)(struct store_backend *b);
	/* Adds rec (its id unique). 0, or -1. */
	int	(*put)(struct store_backend *b, const struct store_rec *rec);
	/* Rewrites what may change of rec's row: text, times, flags, state. */
	int	(*update)(struct store_backend *b, const struct store_rec *rec);
	/*
	 * Optional (a backend of one shard): deletes the waiting message
	 * with this id, for account, moved to another shard. 0, or -1.
	 */
	int	(*del)(struct store_backend *b, uint64_t id, const char *account);
	/*
	 * Sets the state and times of message id, for account. A final
	 * state: 1 when a final row is kept (and counts in finals), 0 when
	 * the row went (or was none). Else 0, or -1. final_row:
	 * store_final_row of the message; false spares the backend looking
	 * for what to keep.
	 */
	int	(*mark)(struct store_backend *b, uint64_t id,
		    const char *account, uint8_t state, uint64_t final_date,
		    uint64_t due, uint32_t attempts, bool final_row);
	/* The row with this id into *rec (rec->m malloc'd): 1, 0 none, -1. */
	int	(*get)(struct store_backend *b, uint64_t id,
		    struct store_rec *rec);
	/*
	 * Calls fn for up to n ENROUTE messages of account with ids above
	 * after, in id order. fn must not write to the backend. The count
	 * called, or -1.
	 */
	int	(*scan)(struct store_backend *b, const char *account,
		    uint64_t after, unsigned n, store_rec_fn *fn, void *arg);
	/* Up to n ENROUTE messages whose expires <= now. */
	int	(*expired)(struct store_backend *b, uint64_t now, unsigned n,
		    store_rec_fn *fn, void *arg);
	/* ENROUTE messages submitter sent to dst (cancel_sm by address). */
	int	(*by_dest)(struct store_backend *b, const char *submitter,
		    const char *dst, unsigned n, store_rec_fn *fn, void *arg);
	/*
	 * Looks at up to n final messages with ids above *cursor, in id
	 * order, and deletes those whose final_date < before (UINT64_MAX:
	 * all); *cursor ends at the last id looked at, 0 at the end of the
	 * table. Adds to *bytes what the deleted counted for
	 * (store_final_bytes). The count deleted (a failed delete stops it),
	 * or -1.
	 */
	int	(*purge)(struct store_backend *b, uint64_t before,
		    uint64_t *cursor, unsigned n, uint64_t *bytes);
	/*
	 * Optional: how many final messages the store holds and the bytes
	 * they count for. 0, or -1.
	 */
	int	(*finals)(struct store_backend *b, uint64_t *count,
		    uint64_t *bytes);
	/* Each account with ENROUTE messages: their count and bytes. */
	int	(*backlogs)(struct store_backend *b, store_backlog_fn *fn,
		    void *arg);
	/* The submitted time of account's oldest ENROUTE message; 0 none. */
	uint64_t (*oldest)(struct store_backend *b, const char *account);
	/* The highest id stored (0: none). */
	int	(*max_id)(struct store_backend *b, uint64_t *id);
	/*
	 * Optional, every tick: work of the backend's own (JetStream: load
	 * once the servers answer, take over a dead node's messages). 1 when
	 * what it holds changed by itself (the store counts again), else 0.
	 */
	int	(*poll)(struct store_backend *b);
	/*
	 * Optional: true while there is no room for new messages (the space
	 * the backend keeps for marks and deletes on a full disk is spent);
	 * marks, updates and purges may still be written.
	 */
	bool	(*full)(struct store_backend *b);
	/*
	 * Optional, once a second: 0 while the files the store has open are
	 * still the ones its path names, -1 once one was removed or replaced
	 * under the daemon (what is written after goes where no restart will
	 * find it).
	 */
	int	(*check)(struct store_backend *b);
	/*
	 * Optional, at shutdown once nothing more comes: lets go of what the
	 * backend shares with others (JetStream: the NATS connection, before
	 * the cluster ends the NATS library). Every write fails after it.
	 */
	void	(*quiesce)(struct store_backend *b);
	/*
	 * Optional: the receipt id map (receipt_map.h), kept durably: files
	 * o under upstream's key k, one of an SMS centre's id's keys, which
	 * all share grp, written at wall clock added; looks up k (1 and *o,
	 * 0 none, -1); drops every key of the centre's id that k is one of
	 * (not the other parts' of our message); and drops up to n keys
	 * written before before (the count, or -1).
	 */
	int	(*rcpt_put)(struct store_backend *b, const char *upstream,
		    const struct receipt_key *k, uint64_t grp,
		    const struct receipt_orig *o, uint64_t added);
	int	(*rcpt_get)(struct store_backend *b, const char *upstream,
		    const struct receipt_key *k, struct receipt_orig *o);
	int	(*rcpt_del)(struct store_backend *b, const char *upstream,
		    const struct receipt_key *k);
	int	(*rcpt_purge)(struct store_backend *b, uint64_t before,
		    unsigned n);
	/*
	 * Optional (NULL: the backend keeps none): HTTP posts not yet
	 * answered, so that a restart posts them. post_put adds one (body
	 * NULL: a GET), post_del removes it, posts calls fn for each.
	 * 0, or -1.
	 */
	int	(*post_put)(struct store_backend *b, uint64_t id,
		    const char *url, const char *body);
	int	(*post_del)(struct store_backend *b, uint64_t id);
	int	(*posts)(struct store_backend *b, store_post_fn *fn, void *arg);
	/* With post_put: the receipts awaited, by message id. */
	int	(*want_put)(struct store_backend *b,
		    const struct http_out_want *w);
	int	(*want_del)(struct store_backend *b, uint64_t id);
	int	(*wants)(struct store_backend *b, store_want_fn *fn, void *arg);
};

extern const struct store_backend_ops store_sqlite_ops;
/*
 * The SQLite connection's synchronous setting as SQLite reports it (2
 * FULL, 1 NORMAL), or -1. For the unit tests: a sweep commits at NORMAL,
 * and the next group must commit at the setting store.sync asks for.
 */
int	store_sqlite_synchronous(struct store_backend *b);
/*
 * For the unit tests: runs sql on the store's connection (a ROLLBACK, as
 * SQLite itself ends a transaction on some failed writes). 0, or -1.
 */
int	store_sqlite_exec(struct store_backend *b, const char *sql);
extern const struct store_backend_ops store_js_ops;

/* A backend the configuration can name (store.backend). */
struct store_backend_info {
	const char *name;		/* "sqlite", "jetstream" */
	const char *library;		/* for errors: "SQLite" */
	const char *option;		/* the build option: "WITH_SQLITE" */
	const struct store_backend_ops *ops;	/* NULL: not built in */
};

/*
 * The backend called name, built in or not (then its ops are NULL), or
 * NULL for a name no backend has (store_backends.c). Any thread.
 */
const struct store_backend_info *store_backend_find(const char *name);

/*
 * The bytes a message counts for in max_bytes: the text, the addresses,
 * and the packed SMPP fields (~100).
 */
static inline uint64_t
store_msg_bytes(const struct msg *m)
{
	return m->len + strlen(m->from) + strlen(m->to) + strlen(m->reply_to) +
	    100;
}

/*
 * What a message in a final state counts for in the limits: its account,
 * its submitter and STORE_FINAL_ROW for its numbers (its text and SMPP
 * fields are dropped then).
 */
#define STORE_FINAL_ROW	32

static inline uint64_t
store_final_bytes(const char *account, const struct msg *m)
{
	return strlen(account) + strlen(m->reply_to) + STORE_FINAL_ROW;
}

/*
 * A final state is kept (for query_sm and the JSON API) only where a
 * submitter can ask for it: a receipt, a line client's message (the router
 * protocol has no query) or one with no submitter leaves no final row.
 */
#define STORE_FINAL_NOT_KEPT	(MSG_F_RECEIPT | MSG_F_LINE_CLIENT)

/* Whether m, once final, keeps a final row (above). */
static inline bool
store_final_row(const struct msg *m)
{
	return !(m->flags & STORE_FINAL_NOT_KEPT) && m->reply_to[0] != '\0';
}

#endif
