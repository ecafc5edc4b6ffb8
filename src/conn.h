/* conn.h: client connections and each reactor's set of them: buffers, framing, output, closing. */
#ifndef ECHOROUTERD_CONN_H
#define ECHOROUTERD_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "handle.h"
#include "reactor.h"

struct proto;
struct iplimit_entry;
struct transport;
struct transport_ctx;
struct conn_set;

enum conn_close_reason {
	CONN_CLOSE_PEER,	/* orderly EOF from the client */
	CONN_CLOSE_RESET,	/* the socket failed: reset, broken pipe */
	CONN_CLOSE_IDLE,	/* idle_timeout passed */
	CONN_CLOSE_SLOW,	/* output over output_limit */
	CONN_CLOSE_PROTOCOL,	/* malformed input */
	CONN_CLOSE_QUIT,	/* the protocol ended the session */
	CONN_CLOSE_SHUTDOWN,	/* the daemon stopped */
	CONN_CLOSE_TIMEOUT,	/* the client stopped answering (keep-alive) */
	CONN_CLOSE_N
};

/*
 * The reason's name in logs, the same as its closed_total label ("peer",
 * "slow-consumer"); "?" if out of range. Any thread.
 */
const char *conn_close_reason_name(enum conn_close_reason reason);

enum {
	CONN_F_CLOSING = 1 << 0,	/* torn down at the end of the turn */
	CONN_F_DRAIN = 1 << 1,		/* no more input; close once flushed */
	CONN_F_PAUSED = 1 << 2,		/* output over the high watermark */
	CONN_F_CORK = 1 << 3,		/* input being handled: flush after */
	CONN_F_FLUSH_QUEUED = 1 << 4,	/* on the reactor's flush list */
	CONN_F_HELD = 1 << 5,		/* the protocol asked: no input now */
	CONN_F_LINGER = 1 << 6,		/* all sent, half-closed, input dropped */
	CONN_F_EOF = 1 << 7,		/* the peer half-closed: read no more */
	CONN_F_PENDING = 1 << 8,	/* on the set's list: transport has input */
	CONN_F_BACKLOG = 1 << 9,	/* input kept while output was high */
	CONN_F_ACKWAIT = 1 << 10,	/* on the set's list: polled for acks */
};

/*
 * Owned by one reactor for its whole life: only that reactor's thread reads
 * or writes any field. An idle connection holds no buffer: in is NULL and
 * out holds no chunk. Outside conn.c and the transports, only r, proto,
 * pdata and slot are to be read; flags and the fd are conn.c's.
 */
struct conn {
	struct reactor_io io;
	struct reactor *r;
	const struct proto *proto;
	void	*pdata;			/* the protocol's state */
	struct transport *xp;		/* how it reaches the kernel */
	struct conn *lru_prev;		/* by last activity; closing list */
	struct conn *lru_next;
	struct conn *flush_next;
	struct buf *in;			/* part of a message, or NULL */
	struct outq out;
	struct iplimit_entry *ip;	/* its address's count, or NULL */
	uint32_t slot;
	uint32_t gen;
	uint32_t last_active;		/* reactor seconds */
	uint16_t flags;
	uint8_t	close_reason;
	uint8_t	drain_reason;
	uint8_t	listener;		/* its listener's index, or CONN_NO_LISTENER */
	uint32_t linger_input;		/* lingering: ms of the last input */
	uint64_t out_sent;		/* queued bytes written, since open */
	uint64_t out_acked;		/* conn_out_acked's last answer */
};

#define CONN_NO_LISTENER	0xff

/* Connections open in the whole process: the acceptor counts them in. */
extern atomic_uint conn_live;

/*
 * Gives an accepted socket to reactor r, which adopts it as a connection
 * speaking proto, counted under listener (an index in the config's
 * listeners, below COUNTER_LISTENERS_MAX), over the transport that xp's
 * type accepts it with (a reference, taken; NULL: plain), holding the
 * handshake place its type admitted for ip. The caller has counted it in
 * conn_live and never touches fd again. Any thread.
 */
void	conn_handoff(struct reactor *r, int fd, const struct proto *proto,
	    unsigned listener, struct transport_ctx *xp,
	    struct iplimit_entry *ip);

/*
 * Adopts fd as a connection speaking proto over the plain transport
 * (conn_new) or over xp (conn_new_with; its ops->close frees it), watched
 * for input. The caller has counted it in conn_live. NULL (fd closed, xp
 * closed, count dropped) if it cannot be watched. Owning reactor only;
 * conn_handoff is the way in from others.
 */
struct conn *conn_new(struct reactor *r, int fd, const struct proto *proto);
struct conn *conn_new_with(struct reactor *r, int fd, const struct proto *proto,
	    struct transport *xp);

/* The handle by which other threads name c. Owning reactor only. */
struct conn_handle conn_handle(const struct conn *c);

/*
 * The connection h names, if it is on r and still open (not closing).
 * NULL otherwise. Owning reactor (r) only.
 */
struct conn *conn_resolve(struct reactor *r, const struct conn_handle *h);

/*
 * Whether c takes more routed output now: open, not paused and below
 * output_high_watermark. Owning reactor only.
 */
bool	conn_can_take(const struct conn *c);

/*
 * Whether the protocol has held c's input (conn_hold) and not released
 * it. Owning reactor only.
 */
bool	conn_is_held(const struct conn *c);

/*
 * Queues n bytes for the client. They are sent before the reactor waits
 * again; if the queue passes output_limit the client is closed as a slow
 * consumer. Returns true if the bytes were queued, false if c is closing
 * or was just closed. Owning reactor only.
 */
bool	conn_write(struct conn *c, const void *p, size_t n);

/*
 * Like conn_write, but when nothing is queued it writes at once, from p,
 * and queues only what the socket did not take: no copy, and no cork. For
 * a last word before conn_close. Owning reactor only.
 */
bool	conn_write_now(struct conn *c, const void *p, size_t n);

/*
 * The answer to one message per read (echo): the answer to a batched read
 * is queued for the turn's batched write; any other goes as by
 * conn_write_now. Owning reactor only.
 */
bool	conn_reply(struct conn *c, const void *p, size_t n);

/*
 * Marks c closed for reason; it is torn down at the end of the loop turn.
 * Owning reactor only.
 */
void	conn_close(struct conn *c, enum conn_close_reason reason);

/* Stops reading c and closes it once its output is sent. Owning reactor. */
void	conn_close_after_flush(struct conn *c, enum conn_close_reason reason);

/* Closed or closing once flushed. Owning reactor only. */
static inline bool
conn_is_closing(const struct conn *c)
{
	return (c->flags & (CONN_F_CLOSING | CONN_F_DRAIN)) != 0;
}

/*
 * conn_hold stops handing c's input to its protocol (bytes already read are
 * kept) and stops reading the socket; conn_release hands over what was kept
 * and reads again. For protocols that must wait for answers before taking
 * more commands. Owning reactor only.
 */
void	conn_hold(struct conn *c);
void	conn_release(struct conn *c);

/*
 * True if an info record about c (its close, its offence) may be logged
 * now: at info level, while the reactor's own LOG_LIMIT_PER_SECOND lasts;
 * at debug level always; below info never. Owning reactor only.
 */
bool	conn_log_allowed(struct conn *c);

/*
 * Bytes of an unfinished message read and kept; 0 while whole messages
 * wait for c's output to drain below the high watermark (the client is
 * being answered). Owning reactor only.
 */
size_t	conn_input_pending(const struct conn *c);

/* Bytes queued and not yet sent. Owning reactor only. */
static inline size_t
conn_pending(const struct conn *c)
{
	return c->out.bytes;
}

/*
 * Output offsets, counted in bytes queued since c opened: conn_out_end is
 * the offset just past everything queued so far, conn_out_sent how far
 * the socket has taken it. Bytes queued now have left the daemon once
 * conn_out_sent reaches the conn_out_end read after queuing them; the
 * protocol's on_sent hears when it moves. Owning reactor only.
 */
static inline uint64_t
conn_out_end(const struct conn *c)
{
	return c->out_sent + c->out.bytes;
}

static inline uint64_t
conn_out_sent(const struct conn *c)
{
	return c->out_sent;
}

/*
 * How far the peer has surely acknowledged the output (an offset as
 * above, at most conn_out_sent): bytes written but not acknowledged are
 * lost if the connection is reset or the daemon killed, so a message
 * whose only copy is its line leaves its keeper only past here. Asks the
 * kernel (the transport's unsent). Owning reactor only.
 */
uint64_t conn_out_acked(struct conn *c);

/*
 * The protocol waits for the peer to acknowledge bytes already written:
 * the kernel announces no acknowledgement, so c's on_sent is called again
 * soon (polled, a few ms at first, less often while nothing moves), once;
 * on_sent asks again if it still waits. Owning reactor only.
 */
void	conn_watch_acked(struct conn *c);

/*
 * r's connection set, made (and hooked into r's loop) on first use: every
 * turn it sends what the turn queued, reads what the turn's batch asked
 * for, closes idle and stalled clients, and on stop drains them. Owning
 * reactor only (or the main thread before r starts).
 */
struct conn_set *conn_set_of(struct reactor *r);

/* Connections open on r now. Owning reactor only. */
uint32_t conn_count(struct reactor *r);

/* Closes every connection of r at once and frees them. Owning reactor. */
void	conn_close_all(struct reactor *r);

#endif
