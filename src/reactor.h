/* reactor.h: one epoll loop per thread, owning its fds and mailbox; modules hook into it. */
#ifndef ECHOROUTERD_REACTOR_H
#define ECHOROUTERD_REACTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "counter.h"
#include "log.h"
#include "mailbox.h"
#include "util.h"

struct reactor;
struct reactor_io;
struct config;
struct service;

struct reactor_stage {
	struct mailbox_task *head;	/* newest first */
	struct mailbox_task *tail;
};

#define REACTOR_BATCH_SERVICES	4

/*
 * Tasks that one thread gathers for reactors and service threads, and
 * publishes together: one push (one compare-and-swap, at most one eventfd
 * write) per destination, so a busy turn wakes each once rather than once
 * per message. Per-destination order is kept. Zeroed to start; one
 * thread's alone.
 */
struct reactor_batch {
	struct reactor_stage *stage;	/* by destination id, or NULL */
	uint32_t *staged;		/* destination ids with tasks staged */
	uint32_t nstaged;
	struct {
		struct service *to;
		struct reactor_stage st;
	} svc[REACTOR_BATCH_SERVICES];
	unsigned nsvc;
};

/* Called on the owning reactor when io's fd is ready. */
typedef void reactor_io_fn(struct reactor *r, struct reactor_io *io,
    uint32_t events);

/*
 * An fd in a reactor's epoll set. It is embedded in the object that owns the
 * fd (a connection, say), which the callback finds with container_of.
 */
struct reactor_io {
	int	fd;
	uint32_t events;	/* the interest now registered */
	reactor_io_fn *fn;
};

#define REACTOR_MAX_EVENTS	256	/* events per epoll_wait */
#define REACTOR_MAX_HOOKS	4	/* modules hooked into one reactor */

/* Where a reactor is in stopping; other reactors read it. */
enum reactor_stop_state {
	REACTOR_RUNNING,
	REACTOR_DRAINING,	/* asked to stop, its hooks still busy */
	REACTOR_QUIET,		/* done; runs its mailbox until all are */
};

/*
 * What a module (the connection set, later TLS) does at each point of a
 * reactor's loop: Redis's beforeSleep, generalised. Every hook runs on the
 * reactor's thread; any may be NULL; arg is the one given to
 * reactor_hook_add.
 */
struct reactor_hooks {
	/* On the thread, before its first turn (or the first run_once). */
	void	(*start)(struct reactor *r, void *arg);
	/* After the turn's events were handled: batched work goes here. */
	void	(*after_events)(struct reactor *r, void *arg);
	/* About once a second, on the turn's clock. */
	void	(*every_second)(struct reactor *r, void *arg);
	/*
	 * At the end of each turn. Returns true if it has work it could do
	 * at once (a transport's pending data): the next wait does not block.
	 */
	bool	(*before_sleep)(struct reactor *r, void *arg);
	/* The reactor was asked to stop: stop taking work, start draining. */
	void	(*stop)(struct reactor *r, void *arg);
	/* Stopping: whether the module is done (nothing left to drain). */
	bool	(*drained)(struct reactor *r, void *arg);
	/* Stopping, drained or out of time: end what is left. */
	void	(*finish)(struct reactor *r, void *arg);
	/* reactor_free, after the thread ended: free everything. */
	void	(*free)(struct reactor *r, void *arg);
};

/*
 * Fields are grouped by who may touch them. A reactor's connections and
 * their state belong to the modules hooked into it (conn.c), not to it.
 */
/* What a reactor keeps spares of (util.h): each kind one size. */
enum reactor_spare {
	REACTOR_SPARE_REPLY,		/* a line client's queued reply */
	REACTOR_SPARE_JOB,		/* an upstream job */
	REACTOR_SPARE_MSG,		/* a message of an SMS's size (msg.h) */
	REACTOR_SPARES
};

struct reactor {
	/* Any thread: atomics, and fields fixed before the thread starts. */
	/*
	 * Written by this reactor's thread only (counter_add): what the
	 * modules hooked in count, and the loop's turns (COUNTER_LOOPS).
	 */
	struct counter_block counters;
	/* The same, for histograms and labelled tables. */
	struct counter_detail detail;
	struct mailbox mb;
	_Atomic int stop_state;		/* enum reactor_stop_state */
	unsigned id;

	/* Main thread (reactor_new, _start, _join, _free). */
	pthread_t thread;
	bool	started;

	/* Owning reactor only. */
	int	epfd;
	struct reactor_io mbio;		/* the mailbox's eventfd */
	bool	cpu_affinity;		/* config, at reactor_new */
	bool	sched_batch;
	bool	hooks_started;		/* the start hooks have run */
	bool	stopping;
	bool	done;
	bool	busy;			/* a hook has work: do not block */
	/*
	 * A hook wants the next wait to last no longer than this (ms): it
	 * polls for something no descriptor announces. -1: no such wish.
	 * Set during a turn, for the wait after it.
	 */
	int	wake_within_ms;
	uint32_t now;			/* seconds, CLOCK_MONOTONIC, per turn */
	uint64_t now_ms;		/* the same reading in milliseconds */
	/*
	 * counter_now_ns at the turn's start (precise, unlike now): the
	 * histograms' timestamps, so that a message costs no clock read.
	 */
	uint64_t turn_ns;
	uint32_t stop_deadline;
	uint32_t last_second;
	uint64_t msg_seq;		/* for msg_next_id */
	struct config *cf;		/* this reactor's reference */
	struct {
		const struct reactor_hooks *h;
		void	*arg;
	} hooks[REACTOR_MAX_HOOKS];
	unsigned nhooks;
	/*
	 * Tasks for other reactors (and service threads) staged during this
	 * turn, published at the end of the turn.
	 */
	struct reactor_batch batch;
	/* Objects made and freed per message, kept for the next. */
	struct spares spares[REACTOR_SPARES];
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

/*
 * Frees a reactor whose thread has ended or never started: its mailbox's
 * tasks are cancelled, then its hooks free what they hold. NULL is a
 * no-op. Main thread.
 */
void	reactor_free(struct reactor *r);

/*
 * Starts the reactor's thread, named "reactor-<id>". 0, or -1 with errno.
 * Main thread.
 */
int	reactor_start(struct reactor *r);

/*
 * Runs one loop turn on the calling thread, waiting up to timeout_ms for
 * events: for tests and fuzzers driving a reactor that was never started
 * (the calling thread is then its owner).
 */
void	reactor_run_once(struct reactor *r, int timeout_ms);

/* Waits for the thread to end (after reactor_stop). Main thread. */
void	reactor_join(struct reactor *r);

/*
 * Asks the reactor to stop: its hooks' stop runs (the connection set
 * stops reading and flushes), then, once every hook has drained or
 * shutdown_timeout has passed, their finish, and the thread ends. Any
 * thread. Reactors stopping at the same time end together: one that is
 * done keeps running its mailbox (a delivery to it finds no route) until
 * every stopping reactor is done, so that no sender waits for a verdict
 * from a reactor that has already ended. reactor_stop_all marks the whole
 * set stopping before any of them can finish.
 */
void	reactor_stop(struct reactor *r);
void	reactor_stop_all(struct reactor **rs, unsigned n);

/* Hands cf to the reactor, which drops its old one. Any thread. */
void	reactor_set_config(struct reactor *r, struct config *cf);

/*
 * Queues fn(r, arg, status) to run on r's thread in the order posted by
 * this thread (mailbox.h): status is MAILBOX_RUN, or MAILBOX_CANCELLED if
 * r is freed at exit before running it. Only the first task into an empty
 * mailbox writes the eventfd, so a burst costs one wakeup. reactor_post
 * allocates the entry; reactor_post_task takes one the caller embedded
 * (its fn and arg already set). Any thread.
 */
void	reactor_post(struct reactor *r, mailbox_task_fn *fn, void *arg);
void	reactor_post_task(struct reactor *r, struct mailbox_task *t);

/*
 * Posts the chain head..tail (linked by next, newest first) in one push,
 * to run oldest first: as reactor_post_task of tail, ..., head. Any
 * thread.
 */
void	reactor_post_chain(struct reactor *r, struct mailbox_task *head,
	    struct mailbox_task *tail);

/*
 * Queues t for reactor to, from reactor from (the caller's own): tasks to
 * one destination are published together at the end of from's loop turn,
 * with one compare-and-swap and at most one eventfd write, so a busy turn
 * wakes each other reactor once rather than once per message. Per-pair
 * order is kept. Owning reactor (from) only.
 */
void	reactor_send(struct reactor *from, struct reactor *to,
	    struct mailbox_task *t);

/* Queues t for service thread to, the same way. Owning reactor only. */
void	reactor_send_service(struct reactor *from, struct service *to,
	    struct mailbox_task *t);

/*
 * The same for any other thread, in a batch of its own: queues t for
 * reactor to, or for service to; publishes (owner: the caller's struct
 * reactor or service, for tasks cancelled when their reactor is gone);
 * frees what a published batch holds.
 */
void	reactor_batch_add(struct reactor_batch *b, struct reactor *to,
	    struct mailbox_task *t);
void	reactor_batch_add_service(struct reactor_batch *b, struct service *to,
	    struct mailbox_task *t);
void	reactor_batch_publish(struct reactor_batch *b, void *owner);
void	reactor_batch_fini(struct reactor_batch *b);

/* Publishes what reactor_send staged. Owning reactor only. */
void	reactor_publish(struct reactor *r);

/*
 * Adds, changes or removes io's fd in the epoll set: 0, or -1 with errno
 * from epoll_ctl (the caller decides what a failure means). Closing an fd
 * also removes it. Owning reactor only.
 */
int	reactor_add_io(struct reactor *r, struct reactor_io *io,
	    uint32_t events);
int	reactor_mod_io(struct reactor *r, struct reactor_io *io,
	    uint32_t events);
int	reactor_del_io(struct reactor *r, struct reactor_io *io);

/*
 * The next wait ends within ms milliseconds even if nothing happens: for a
 * hook that polls what no descriptor announces (a peer's TCP
 * acknowledgements). The shortest wish of the turn wins. Owning reactor.
 */
void	reactor_wake_within(struct reactor *r, int ms);

/*
 * Hooks h (with arg) into r's loop, after those added before. 0, or -1
 * with errno ENOSPC when REACTOR_MAX_HOOKS are in. Owning reactor only
 * (or the main thread before the reactor starts).
 */
int	reactor_hook_add(struct reactor *r, const struct reactor_hooks *h,
	    void *arg);

/*
 * The arg hooked in with h, or NULL if h is not: how a module finds its
 * own state for r. Owning reactor only.
 */
static inline void *
reactor_hook_arg(const struct reactor *r, const struct reactor_hooks *h)
{
	for (unsigned i = 0; i < r->nhooks; i++)
		if (r->hooks[i].h == h)
			return r->hooks[i].arg;
	return NULL;
}

#endif
