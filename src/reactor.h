/* reactor.h: one epoll loop per thread, owning its fds, connections and mailbox. */
#ifndef ECHOROUTERD_REACTOR_H
#define ECHOROUTERD_REACTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "buf.h"
#include "log.h"
#include "uring.h"
#include "util.h"

struct reactor;
struct reactor_io;
struct config;
struct conn;

/* Called on the owning reactor when io's fd is ready. */
typedef void reactor_io_fn(struct reactor *r, struct reactor_io *io,
    uint32_t events);
/* Work posted to a reactor; runs on that reactor's thread. */
typedef void reactor_task_fn(struct reactor *r, void *arg);

/*
 * An fd in a reactor's epoll set. It is embedded in the object that owns the
 * fd (a connection, say), which the callback finds with container_of.
 */
struct reactor_io {
	int	fd;
	uint32_t events;	/* the interest now registered */
	reactor_io_fn *fn;
};

/* A mailbox entry. Embed it to post without an allocation. */
struct reactor_task {
	struct reactor_task *next;
	reactor_task_fn *fn;
	void	*arg;
};

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

const char *conn_close_reason_name(enum conn_close_reason reason);

/* Error replies counted by code, for the stats line. */
enum reactor_err {
	REACTOR_ERR_400,	/* bad request, unknown command */
	REACTOR_ERR_401,	/* bad credentials */
	REACTOR_ERR_403,	/* login first */
	REACTOR_ERR_404,	/* no route */
	REACTOR_ERR_409,	/* address in use */
	REACTOR_ERR_413,	/* line too long */
	REACTOR_ERR_503,	/* recipient busy */
	REACTOR_ERR_N
};

/* The numeric code of e: 400, 401, ... */
int	reactor_err_code(enum reactor_err e);

/*
 * Counters kept by one reactor and read by any thread without locks. Only
 * the owner writes them (REACTOR_STAT_ADD), so plain relaxed loads and
 * stores suffice; the struct has cache lines of its own.
 */
struct reactor_stats {
	_Atomic uint64_t conns;		/* open now */
	_Atomic uint64_t accepted;
	_Atomic uint64_t closed[CONN_CLOSE_N];
	_Atomic uint64_t bytes_in;
	_Atomic uint64_t bytes_out;
	_Atomic uint64_t messages;	/* whole messages handled */
	_Atomic uint64_t routed_local;	/* delivered on the sender's reactor */
	_Atomic uint64_t routed_remote;	/* delivered through a mailbox */
	_Atomic uint64_t errors[REACTOR_ERR_N];
	_Atomic uint64_t loops;		/* loop turns, for the watchdog */
} __attribute__((aligned(CACHE_LINE)));

#define REACTOR_STAT_ADD(field, n)					\
	atomic_store_explicit(&(field),					\
	    atomic_load_explicit(&(field), memory_order_relaxed) + (n),	\
	    memory_order_relaxed)

#define REACTOR_STAT_GET(field)						\
	atomic_load_explicit(&(field), memory_order_relaxed)

#define REACTOR_SCRATCH_SIZE	65536
#define REACTOR_MAX_EVENTS	256	/* events per epoll_wait */
#define REACTOR_BATCH		REACTOR_MAX_EVENTS /* requests per run */
#define REACTOR_BATCH_READ	2048	/* bytes per batched read */
#define REACTOR_BATCH_IOV	8	/* iovecs per batched write */
#define REACTOR_LINGER_TIMEOUT	5	/* s a closing connection may linger */

/* Where a reactor is in stopping; other reactors read it. */
enum reactor_stop_state {
	REACTOR_RUNNING,
	REACTOR_DRAINING,	/* asked to stop, connections still open */
	REACTOR_QUIET,		/* none left; runs its mailbox until all are */
};

/*
 * One turn's reads and writes, done by the reactor's io_uring with one
 * system call for each batch (conn.c). Each connection's first read of the
 * turn goes in `in`; whatever does not fit in one batched read or write is
 * done with plain system calls.
 */
struct reactor_batch {
	struct conn *rconn[REACTOR_BATCH];	/* readable this turn */
	uint32_t nread;
	bool	reading;			/* handling a batched read */
	struct conn *wconn[REACTOR_BATCH];	/* being written */
	struct msghdr msg[REACTOR_BATCH];
	struct iovec iov[REACTOR_BATCH][REACTOR_BATCH_IOV];
	size_t	want[REACTOR_BATCH];		/* bytes in msg[i] */
	int32_t	res[REACTOR_BATCH];		/* bytes, -errno, or _NONE */
	uint8_t	in[REACTOR_BATCH][REACTOR_BATCH_READ];
};

#define REACTOR_BATCH_NONE	INT32_MIN	/* the ring did not run it */

struct reactor {
	struct reactor_stats stats;
	_Atomic(struct reactor_task *) mailbox;	/* LIFO; reversed on drain */
	unsigned id;
	int	epfd;
	int	evfd;
	struct reactor_io evio;
	pthread_t thread;
	bool	started;
	bool	cpu_affinity;
	bool	use_uring;		/* config: io_uring */
	bool	sched_batch;		/* config: sched_batch */
	bool	uring_tried;		/* the ring was asked for */
	bool	stopping;
	bool	done;
	_Atomic int stop_state;		/* enum reactor_stop_state */
	uint32_t now;			/* seconds, CLOCK_MONOTONIC, per turn */
	uint64_t now_ms;		/* the same reading in milliseconds */
	uint32_t stop_deadline;
	uint32_t last_sweep;
	uint32_t npaused;		/* connections over the high watermark */
	uint32_t nlinger;		/* connections lingering before close */
	uint64_t msg_seq;		/* for route_next_id */
	struct config *cf;		/* this reactor's reference */
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
	struct log_limit client_log;	/* records about clients (log.h) */
	struct conn *flush_list;	/* written to during this turn */
	struct buf_pool pool;
	uint8_t	*scratch;		/* REACTOR_SCRATCH_SIZE read buffer */
	/* Batched I/O: both set, on the reactor's thread, or neither. */
	struct uring ring;
	struct reactor_batch *batch;
	/*
	 * Tasks for other reactors staged during this turn, one list per
	 * destination (newest first), published at the end of the turn.
	 */
	struct reactor_stage *stage;	/* by destination id, or NULL */
	uint32_t *staged;		/* destination ids with tasks staged */
	uint32_t nstaged;
};

struct reactor_stage {
	struct reactor_task *head;
	struct reactor_task *tail;
};

/*
 * A reactor that holds a reference to cf, not yet running. NULL with errno
 * set if its fds cannot be made. Main thread.
 */
struct reactor *reactor_new(unsigned id, struct config *cf);

/*
 * The reactor with this id, from reactor_new until reactor_free, or NULL.
 * Any thread (ids are registered before threads start).
 */
struct reactor *reactor_get(unsigned id);

/* Frees a reactor whose thread has ended or never started; NULL is a no-op. */
void	reactor_free(struct reactor *r);

/* Starts the reactor's thread, named "reactor-<id>". 0, or -1 with errno. */
int	reactor_start(struct reactor *r);

/*
 * Runs one loop turn on the calling thread, waiting up to timeout_ms for
 * events: for tests and fuzzers driving a reactor that was never started.
 */
void	reactor_run_once(struct reactor *r, int timeout_ms);

/* Waits for the thread to end (after reactor_stop). Main thread. */
void	reactor_join(struct reactor *r);

/*
 * Asks the reactor to stop reading, flush its connections for up to
 * shutdown_timeout seconds, close them and end its thread. Any thread.
 * Reactors stopping at the same time end together: one whose connections
 * are gone keeps answering the others' deliveries (no route) until every
 * stopping reactor's connections are gone, so that no sender waits for a
 * verdict from a reactor that has already ended. reactor_stop_all marks
 * the whole set stopping before any of them can finish.
 */
void	reactor_stop(struct reactor *r);
void	reactor_stop_all(struct reactor **rs, unsigned n);

/* Hands cf to the reactor, which drops its old one. Any thread. */
void	reactor_set_config(struct reactor *r, struct config *cf);

/*
 * Queues fn(r, arg) to run on r's thread in the order posted by this thread.
 * Only the first task into an empty mailbox writes the eventfd, so a burst
 * costs one wakeup. reactor_post allocates the entry; reactor_post_task
 * takes one the caller embedded (its fn and arg already set). Any thread.
 */
void	reactor_post(struct reactor *r, reactor_task_fn *fn, void *arg);
void	reactor_post_task(struct reactor *r, struct reactor_task *t);

/*
 * Queues t for reactor to, from reactor from (the caller's own): tasks to
 * one destination are published together at the end of from's loop turn,
 * with one compare-and-swap and at most one eventfd write, so a busy turn
 * wakes each other reactor once rather than once per message. Per-pair
 * order is kept. Owning reactor (from) only.
 */
void	reactor_send(struct reactor *from, struct reactor *to,
	    struct reactor_task *t);

/* Publishes what reactor_send staged. Owning reactor only. */
void	reactor_publish(struct reactor *r);

/* Adds, changes or removes io's fd in the epoll set. Owning reactor only. */
int	reactor_add_io(struct reactor *r, struct reactor_io *io,
	    uint32_t events);
int	reactor_mod_io(struct reactor *r, struct reactor_io *io,
	    uint32_t events);
void	reactor_del_io(struct reactor *r, struct reactor_io *io);

/* Slot bookkeeping for connections. Owning reactor only. */
uint32_t reactor_slot_add(struct reactor *r, struct conn *c);
void	reactor_slot_del(struct reactor *r, uint32_t slot);
struct conn *reactor_slot_get(struct reactor *r, uint32_t slot, uint32_t gen);

#endif
