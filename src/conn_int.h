/*
 * conn_int.h: what conn.c and conn_set.c share, and nothing else
 * includes: struct conn_set, one turn's batch, and the functions one file
 * calls in the other.
 *   conn.c      a connection: I/O through its transport, framing, queued
 *               and batched writes, watermarks, lingering, close and free
 *   conn_set.c  a reactor's set of them: its hooks into the loop, the
 *               end-of-turn reap, and the idle, stalled and linger sweeps
 * The public API is conn.h's.
 */
#ifndef ECHOROUTERD_CONN_INT_H
#define ECHOROUTERD_CONN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "buf.h"
#include "conn.h"
#include "log.h"
#include "reactor.h"
#include "uring.h"

#define CONN_SCRATCH_SIZE	65536	/* the set's plain read buffer */
#define CONN_BATCH		REACTOR_MAX_EVENTS /* requests per run */
#define CONN_BATCH_READ		2048	/* bytes per batched read */
#define CONN_BATCH_IOV		8	/* iovecs per batched write */
/* A lingering client that sent nothing for this long has stopped. */
#define CONN_LINGER_QUIET_MS	200

/*
 * One turn's reads and writes, done by the set's io_uring with one system
 * call for each batch. Each connection's first read of the turn goes in
 * `in`; whatever does not fit in one batched read or write is done with
 * plain calls through the transport.
 */
struct conn_batch {
	struct conn *rconn[CONN_BATCH];		/* readable this turn */
	uint32_t nread;
	bool	reading;			/* handling a batched read */
	struct conn *wconn[CONN_BATCH];		/* being written */
	struct msghdr msg[CONN_BATCH];
	struct iovec iov[CONN_BATCH][CONN_BATCH_IOV];
	size_t	want[CONN_BATCH];		/* bytes in msg[i] */
	int32_t	res[CONN_BATCH];		/* bytes, -errno, or _NONE */
	uint8_t	in[CONN_BATCH][CONN_BATCH_READ];
};

/*
 * A reactor's connections and what they share; hooked into its loop.
 * Owning reactor only, every field.
 */
struct conn_set {
	struct reactor *r;
	/* Connections by slot; gens[slot] changes each time a slot is freed. */
	struct conn **slots;
	uint32_t *gens;
	uint32_t *free_slots;
	uint32_t nslots;
	uint32_t nfree;
	uint32_t nconns;
	/* Least recently active first, for idle_timeout. */
	struct conn *lru_head;
	struct conn *lru_tail;
	struct conn *closing;		/* torn down at the end of the turn */
	struct conn *flush_list;	/* written to during this turn */
	struct conn **pending;		/* their transports hold input */
	uint32_t npending;
	uint32_t pending_cap;
	struct conn **ackwait;		/* conn_watch_acked: polled */
	uint32_t nackwait;
	uint32_t ackwait_cap;
	uint32_t ack_poll_ms;		/* between polls: grows while idle */
	uint64_t ack_polled_ms;		/* the last poll, the turn's clock */
	bool	ack_polling;		/* conn_poll_acked's on_sent calls run */
	uint32_t npaused;		/* over the high watermark */
	uint32_t nlinger;		/* lingering before close */
	bool	draining;		/* the reactor is stopping */
	bool	use_uring;		/* config io_uring, at creation */
	struct log_limit client_log;	/* records about clients (log.h) */
	struct buf_pool pool;
	uint8_t	*scratch;		/* CONN_SCRATCH_SIZE read buffer */
	/* Batched I/O: both set, on the reactor's thread, or neither. */
	struct uring ring;
	struct conn_batch *batch;
};

/* The set's hooks into its reactor's loop (conn_set.c); also the key
 * reactor_hook_arg finds a reactor's set by. */
extern const struct reactor_hooks conn_set_hooks;

/*
 * conn.c's, for conn_set.c. Owning reactor only, all of them; each is
 * described where it is defined.
 */
void	conn_update_interest(struct conn *c);
void	conn_flush_queued(struct conn_set *set);
void	conn_queue_flush(struct conn *c);
void	conn_input(struct conn *c, const uint8_t *p, size_t n);
bool	conn_backlog_ready(const struct conn *c);
bool	conn_xp_pending(struct conn *c);
void	conn_xp_failed(struct conn *c);
void	conn_read(struct conn *c);
void	conn_read_batch(struct conn_set *set);
bool	conn_linger_done(struct conn *c);
void	conn_poll_acked(struct conn_set *set);
void	conn_free(struct conn *c);

#endif
