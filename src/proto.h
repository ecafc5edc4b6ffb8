/* proto.h: the protocol vtable (framing and message handling) and its registry. */
#ifndef ECHOROUTERD_PROTO_H
#define ECHOROUTERD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct conn;
struct conn_handle;
struct limits;
struct msg;

/* Why a session is evicted (on_evict). */
enum proto_evict {
	/*
	 * Another node claimed the session's address lawfully while this
	 * one was cut off from the cluster: the address is that node's.
	 */
	PROTO_EVICT_CLAIM_LOST = 1,
};

/*
 * A protocol frames and handles messages; conn.c does all the I/O. Every
 * callback runs on the connection's owning reactor.
 */
struct proto {
	const char *name;
	/*
	 * Length of the whole message at the start of p[0..n): >0 its length,
	 * 0 more bytes are needed, -1 malformed (the connection is closed).
	 * No side effects: it may be called again on the same bytes.
	 */
	ssize_t	(*frame_len)(const uint8_t *p, size_t n,
		    const struct limits *lim);
	/*
	 * Handles one whole message. msg is borrowed for the call only.
	 * Returns 0, or -1 to close the connection (after flushing output)
	 * as the client asked (reason quit). To close for another reason,
	 * call conn_close_after_flush with it and return 0.
	 */
	int	(*on_message)(struct conn *c, const uint8_t *msg, size_t len);
	void	(*on_open)(struct conn *c);	/* may be NULL */
	/*
	 * The peer half-closed: no more input. Return true if the protocol
	 * still owes answers and will close (conn_close_after_flush) once
	 * they are out; false (or NULL) closes after flushing now.
	 */
	bool	(*on_eof)(struct conn *c);
	/*
	 * The daemon is stopping (SIGTERM). Return true if the client still
	 * owes answers to what it was sent and the protocol goes on reading
	 * until they are in, then closes (conn_close_after_flush) itself;
	 * false (or NULL) closes once output is flushed, reading no more.
	 * shutdown_timeout bounds the wait either way.
	 */
	bool	(*on_stop)(struct conn *c);
	void	(*on_close)(struct conn *c);	/* before free; may be NULL */
	/*
	 * True while answers to commands already read are still to come
	 * (verdicts from other reactors). A connection closing once its
	 * output is written (SIGTERM, QUIT, the client's half-close) waits
	 * for them too. May be NULL.
	 */
	bool	(*owes_answers)(const struct conn *c);
	/*
	 * A routed message for this connection: queue it and return
	 * MSG_OK, or refuse it: MSG_BUSY or MSG_REFUSED (no
	 * room), MSG_UNFIT (it cannot carry the text), MSG_NO_ROUTE
	 * (the session has said goodbye), or MSG_STORE (it would only
	 * hold m in memory: the store of the account it receives for takes
	 * it), or MSG_HELD: taken and kept by the protocol, which sends m's
	 * receipt (or tells the store, MSG_F_STORED) itself. m is borrowed. NULL: the protocol takes no routed messages.
	 */
	int	(*on_deliver)(struct conn *c, const struct msg *m);
	/* The verdict (m->verdict) of a message c sent; m is borrowed. */
	void	(*on_verdict)(struct conn *c, const struct msg *m);
	/*
	 * Queued output was written to the socket (conn_out_sent moved), or
	 * a write was tried. May be NULL.
	 */
	void	(*on_sent)(struct conn *c);
	/* About once a second, for timers of the protocol's own. */
	void	(*on_tick)(struct conn *c);
	/*
	 * The session must end (why): the protocol tells its client, as it
	 * can, and closes (conn_close_after_flush). Never called on a
	 * closing connection. NULL: closed once its output is written.
	 */
	void	(*on_evict)(struct conn *c, enum proto_evict why);
	/*
	 * The protocol sends delivery receipts itself once the client
	 * confirms (SMPP's deliver_sm_resp); otherwise deliver.c sends them
	 * as soon as a message is queued.
	 */
	bool	confirms_delivery;
	/*
	 * A message from the store (MSG_F_STORED) that on_deliver took
	 * is kept (copied) by the protocol, which tells the store what became
	 * of it (deliver_outcome): SMPP on deliver_sm_resp, the router once
	 * its line is written. Otherwise deliver.c tells the store as soon
	 * as it is queued.
	 */
	bool	reports_stored;
	/* Its messages_total{protocol} counter (enum counter_id); 0 none. */
	unsigned messages_counter;
};

extern const struct proto proto_echo;
extern const struct proto proto_router;
extern const struct proto proto_smpp;
extern const struct proto proto_metrics;
extern const struct proto proto_http;

/*
 * Has the reactor of the connection h names end its session through its
 * protocol's on_evict, if it is still there and not closing by then.
 * -1 when h names no reactor. Any thread.
 */
int	proto_evict(const struct conn_handle *h, enum proto_evict why);

/*
 * Registers p under p->name (again: nothing). 0, or -1 with errno EINVAL
 * when another has the name or the registry is full. Main thread, at
 * start, before the configuration is read.
 */
int	proto_register(const struct proto *p);

/* Registers the protocols above (proto_builtin.c). Main thread, at start. */
void	proto_builtin_register(void);

/* The protocol registered under name, or NULL. Any thread. */
const struct proto *proto_find(const char *name);

/* A comma-separated list of the registered names, for error messages. */
const char *proto_names(void);

#endif
