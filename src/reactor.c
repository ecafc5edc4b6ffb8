/* reactor.c: the per-thread epoll loop, its mailbox and its connection slots. */
#include "reactor.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "log.h"

#define REACTOR_POOL_CHUNKS	64	/* spare output chunks kept: 1 MiB */
/* With batched writes a turn holds a chunk per client written: 5 MiB. */
#define REACTOR_POOL_CHUNKS_BATCH (REACTOR_BATCH + REACTOR_POOL_CHUNKS)

static const char *const close_reason_names[CONN_CLOSE_N] = {
	[CONN_CLOSE_PEER] = "peer",
	[CONN_CLOSE_RESET] = "reset",
	[CONN_CLOSE_IDLE] = "idle",
	[CONN_CLOSE_SLOW] = "slow-consumer",
	[CONN_CLOSE_PROTOCOL] = "protocol",
	[CONN_CLOSE_QUIT] = "quit",
	[CONN_CLOSE_SHUTDOWN] = "shutdown",
	[CONN_CLOSE_TIMEOUT] = "timeout",
};

const char *
conn_close_reason_name(enum conn_close_reason reason)
{
	return reason < CONN_CLOSE_N ? close_reason_names[reason] : "?";
}

static const int err_codes[REACTOR_ERR_N] = {
	[REACTOR_ERR_400] = 400,
	[REACTOR_ERR_401] = 401,
	[REACTOR_ERR_403] = 403,
	[REACTOR_ERR_404] = 404,
	[REACTOR_ERR_409] = 409,
	[REACTOR_ERR_413] = 413,
	[REACTOR_ERR_503] = 503,
};

int
reactor_err_code(enum reactor_err e)
{
	return e < REACTOR_ERR_N ? err_codes[e] : 0;
}

/* Reactors by id, for posting to a connection's owner. */
static struct reactor *_Atomic registry[CONFIG_DISPATCHERS_MAX];

struct reactor *
reactor_get(unsigned id)
{
	if (id >= CONFIG_DISPATCHERS_MAX)
		return NULL;
	return atomic_load_explicit(&registry[id], memory_order_acquire);
}

/* The clock, once per turn (coarse: a few ms is precise enough). */
static void
reactor_clock(struct reactor *r)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	r->now = (uint32_t)ts.tv_sec;
	r->now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs every task in the mailbox, oldest first. */
static void
mailbox_drain(struct reactor *r)
{
	struct reactor_task *t, *next, *fifo = NULL;

	t = atomic_exchange_explicit(&r->mailbox, NULL, memory_order_acquire);
	/* The mailbox is a stack; reverse it to run tasks in posting order. */
	for (; t != NULL; t = next) {
		next = t->next;
		t->next = fifo;
		fifo = t;
	}
	for (t = fifo; t != NULL; t = next) {
		next = t->next;
		t->fn(r, t->arg);
	}
}

static void
mailbox_on_io(struct reactor *r, struct reactor_io *io, uint32_t events)
{
	uint64_t v;

	(void)events;
	/*
	 * Read the eventfd before taking the tasks: a poster that finds the
	 * mailbox empty after our exchange writes it again, so no wakeup is
	 * lost.
	 */
	while (read(io->fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	mailbox_drain(r);
}

struct reactor *
reactor_new(unsigned id, struct config *cf)
{
	struct reactor *r;

	if (posix_memalign((void **)&r, CACHE_LINE, sizeof(*r)) != 0)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->cf = config_ref(cf);
	r->cpu_affinity = cf->cpu_affinity;
	r->use_uring = cf->io_uring;
	r->sched_batch = cf->sched_batch;
	r->ring.fd = -1;
	atomic_init(&r->mailbox, NULL);
	buf_pool_init(&r->pool, REACTOR_POOL_CHUNKS);
	r->scratch = xmalloc(REACTOR_SCRATCH_SIZE);
	reactor_clock(r);
	r->last_sweep = r->now;
	r->evfd = -1;
	if ((r->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	if ((r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		goto fail;
	r->evio.fd = r->evfd;
	r->evio.fn = mailbox_on_io;
	if (reactor_add_io(r, &r->evio, EPOLLIN) < 0)
		goto fail;
	if (id < CONFIG_DISPATCHERS_MAX)
		atomic_store_explicit(&registry[id], r, memory_order_release);
	return r;
fail:
	reactor_free(r);
	return NULL;
}

void
reactor_free(struct reactor *r)
{
	int saved = errno;

	if (r == NULL)
		return;
	if (r->id < CONFIG_DISPATCHERS_MAX && reactor_get(r->id) == r)
		atomic_store_explicit(&registry[r->id], NULL,
		    memory_order_release);
	/* The ring is its thread's alone: what is left goes by plain calls. */
	uring_fini(&r->ring);
	free(r->batch);
	r->batch = NULL;
	/* Tasks still queued see a stopped reactor and only clean up. */
	r->stopping = r->done = true;
	mailbox_drain(r);
	conn_close_all(r);
	reactor_publish(r);
	free(r->stage);
	free(r->staged);
	free(r->slots);
	free(r->gens);
	free(r->free_slots);
	buf_pool_fini(&r->pool);
	free(r->scratch);
	if (r->evfd >= 0)
		close(r->evfd);
	if (r->epfd >= 0)
		close(r->epfd);
	config_unref(r->cf);
	free(r);
	errno = saved;
}

static void
reactor_pin(struct reactor *r)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	int err;

	if (ncpu < 1)
		return;
	CPU_ZERO(&set);
	CPU_SET(r->id % (unsigned)ncpu, &set);
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err != 0) {
		errno = err;
		log_warn("reactor=%u cannot pin to cpu %u", r->id,
		    r->id % (unsigned)ncpu);
	}
}

/* Once a second: idle connections, and the stop deadline. */
static void
reactor_tick(struct reactor *r)
{
	r->last_sweep = r->now;
	log_limit_report(&r->client_log, r->now, "reactor", r->id);
	if (!r->stopping && r->cf->idle_timeout > 0)
		conn_sweep_idle(r, r->cf->idle_timeout);
	if (r->npaused > 0 && r->cf->limits.output_stall_timeout > 0)
		conn_sweep_stalled(r, r->cf->limits.output_stall_timeout);
	if (!r->stopping)
		conn_tick_all(r);
}

/*
 * True once no reactor is still draining connections. Until then a quiet
 * reactor keeps running its mailbox: a draining one may be waiting for
 * its verdicts (they say no route now), and would otherwise close its
 * clients with those replies never written.
 */
static bool
reactors_quiet(void)
{
	for (unsigned i = 0; i < CONFIG_DISPATCHERS_MAX; i++) {
		struct reactor *o = reactor_get(i);

		if (o != NULL && atomic_load_explicit(&o->stop_state,
		    memory_order_acquire) == REACTOR_DRAINING)
			return false;
	}
	return true;
}

/*
 * SCHED_BATCH: a reactor woken by traffic does not preempt the thread on
 * its CPU (a client, on a shared machine) but waits for that thread's
 * slice to end; it then finds more ready at once. Fewer, larger turns and
 * far fewer context switches, for the cost of that wait when the CPU is
 * busy. Needs no privilege; a filter that refuses it leaves the default.
 */
static void
reactor_sched_batch(struct reactor *r)
{
	static atomic_bool told;
	struct sched_param sp = { .sched_priority = 0 };
	int err;

	if (!r->sched_batch)
		return;
	err = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	if (err != 0 && !atomic_exchange(&told, true))
		log_notice("SCHED_BATCH refused (%s): reactors keep the "
		    "default scheduling", strerror(err));
}

/*
 * Makes the ring on the reactor's own thread, the only one that may use
 * it. Without it (old kernel, io_uring disabled or filtered out) every
 * read and write is its own system call, as with io_uring = false.
 */
static void
reactor_batch_start(struct reactor *r)
{
	static atomic_bool told;

	if (!r->use_uring || r->uring_tried)
		return;
	r->uring_tried = true;
	if (uring_init(&r->ring, REACTOR_BATCH) < 0) {
		if (!atomic_exchange(&told, true))
			log_notice("io_uring unavailable (%s): one system call "
			    "per read and per write", strerror(errno));
		return;
	}
	r->batch = xmalloc(sizeof(*r->batch));
	r->batch->nread = 0;
	r->batch->reading = false;
	r->pool.max = REACTOR_POOL_CHUNKS_BATCH;
	log_debug("reactor=%u batches reads and writes with io_uring", r->id);
}

static void
reactor_turn(struct reactor *r, struct epoll_event *evs, int timeout)
{
	bool new_second;
	int n;

	n = epoll_wait(r->epfd, evs, REACTOR_MAX_EVENTS, timeout);
	if (n < 0 && errno != EINTR)
		fatal("reactor=%u epoll_wait", r->id);
	reactor_clock(r);
	REACTOR_STAT_ADD(r->stats.loops, 1);
	for (int i = 0; i < n; i++) {
		struct reactor_io *io = evs[i].data.ptr;

		io->fn(r, io, evs[i].events);
	}
	/* The reads the handlers asked for, all in one system call. */
	conn_read_batch(r);
	/*
	 * Hand other reactors their tasks before writing this turn's output:
	 * they work on them while we are in writev, instead of waiting (and
	 * their CPU idling) until we are done. What the rest of the turn
	 * stages goes at its end.
	 */
	reactor_publish(r);
	new_second = r->now != r->last_sweep;
	if (new_second)
		reactor_tick(r);
	/* Stopping: every turn (100 ms), so that exit waits no longer than
	 * the lingering connections need. */
	if (r->nlinger > 0 && (r->stopping || new_second))
		conn_sweep_linger(r, REACTOR_LINGER_TIMEOUT);
	conn_reap(r);
	if (r->stopping && (r->nconns == 0 || r->now >= r->stop_deadline)) {
		conn_close_all(r);
		atomic_store_explicit(&r->stop_state, REACTOR_QUIET,
		    memory_order_release);
		r->done = reactors_quiet();
	}
	reactor_publish(r);
}

static void *
reactor_main(void *arg)
{
	struct reactor *r = arg;
	struct epoll_event *evs = xcalloc(REACTOR_MAX_EVENTS, sizeof(*evs));

	if (r->cpu_affinity)
		reactor_pin(r);
	reactor_sched_batch(r);
	reactor_batch_start(r);
	log_debug("reactor=%u running", r->id);
	while (!r->done)
		reactor_turn(r, evs, r->stopping ? 100 : 1000);
	/* What this second dropped: as if it were over. */
	log_limit_report(&r->client_log, r->client_log.second + 1, "reactor",
	    r->id);
	free(evs);
	log_debug("reactor=%u stopped", r->id);
	return NULL;
}

void
reactor_run_once(struct reactor *r, int timeout_ms)
{
	struct epoll_event evs[REACTOR_MAX_EVENTS];

	reactor_batch_start(r);
	reactor_turn(r, evs, timeout_ms);
}

int
reactor_start(struct reactor *r)
{
	char name[16];
	int err;

	if ((err = pthread_create(&r->thread, NULL, reactor_main, r)) != 0) {
		errno = err;
		return -1;
	}
	r->started = true;
	snprintf(name, sizeof(name), "reactor-%u", r->id);
	pthread_setname_np(r->thread, name);
	return 0;
}

void
reactor_join(struct reactor *r)
{
	if (r->started) {
		pthread_join(r->thread, NULL);
		r->started = false;
	}
}

static void
reactor_stop_task(struct reactor *r, void *arg)
{
	(void)arg;
	if (r->stopping)
		return;
	r->stopping = true;
	/*
	 * r->now is whole seconds, so part of this second is already gone:
	 * one more second lets the drain last at least shutdown_timeout.
	 */
	r->stop_deadline = r->now + r->cf->shutdown_timeout +
	    (r->cf->shutdown_timeout > 0);
	conn_shutdown_all(r);
}

void
reactor_stop_all(struct reactor **rs, unsigned n)
{
	/* All draining before any can find the others quiet and end. */
	for (unsigned i = 0; i < n; i++) {
		int running = REACTOR_RUNNING;

		atomic_compare_exchange_strong(&rs[i]->stop_state, &running,
		    REACTOR_DRAINING);
	}
	for (unsigned i = 0; i < n; i++)
		reactor_post(rs[i], reactor_stop_task, NULL);
}

void
reactor_stop(struct reactor *r)
{
	reactor_stop_all(&r, 1);
}

static void
reactor_config_task(struct reactor *r, void *arg)
{
	config_unref(r->cf);
	r->cf = arg;
}

void
reactor_set_config(struct reactor *r, struct config *cf)
{
	reactor_post(r, reactor_config_task, config_ref(cf));
}

/* A task posted by reactor_post: the entry and the caller's fn and arg. */
struct heap_task {
	struct reactor_task task;
	reactor_task_fn *fn;
	void	*arg;
};

static void
reactor_heap_task(struct reactor *r, void *arg)
{
	struct heap_task *ht = arg;

	ht->fn(r, ht->arg);
	free(ht);
}

void
reactor_post(struct reactor *r, reactor_task_fn *fn, void *arg)
{
	struct heap_task *ht = xmalloc(sizeof(*ht));

	ht->fn = fn;
	ht->arg = arg;
	ht->task.fn = reactor_heap_task;
	ht->task.arg = ht;
	reactor_post_task(r, &ht->task);
}

/*
 * Pushes the chain head..tail (newest first) onto r's mailbox, and wakes r
 * if the mailbox was empty.
 */
static void
mailbox_push(struct reactor *r, struct reactor_task *head,
    struct reactor_task *tail)
{
	struct reactor_task *old = atomic_load_explicit(&r->mailbox,
	    memory_order_relaxed);
	uint64_t one = 1;

	do {
		tail->next = old;
	} while (!atomic_compare_exchange_weak_explicit(&r->mailbox, &old,
	    head, memory_order_release, memory_order_relaxed));
	if (old != NULL)
		return;
	while (write(r->evfd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

void
reactor_post_task(struct reactor *r, struct reactor_task *t)
{
	mailbox_push(r, t, t);
}

void
reactor_send(struct reactor *from, struct reactor *to, struct reactor_task *t)
{
	struct reactor_stage *st;

	if (from->stage == NULL) {
		from->stage = xcalloc(CONFIG_DISPATCHERS_MAX,
		    sizeof(*from->stage));
		from->staged = xcalloc(CONFIG_DISPATCHERS_MAX,
		    sizeof(*from->staged));
	}
	st = &from->stage[to->id];
	if (st->head == NULL) {
		st->tail = t;
		from->staged[from->nstaged++] = to->id;
	}
	t->next = st->head;
	st->head = t;
}

void
reactor_publish(struct reactor *r)
{
	for (uint32_t i = 0; i < r->nstaged; i++) {
		struct reactor_stage *st = &r->stage[r->staged[i]];
		struct reactor *to = reactor_get(r->staged[i]);

		if (to != NULL) {
			mailbox_push(to, st->head, st->tail);
		} else {
			/*
			 * The destination is gone (only while freeing at exit):
			 * run the tasks here, where r->done makes them clean up.
			 */
			struct reactor_task *t, *next;

			for (t = st->head; t != NULL; t = next) {
				next = t->next;
				t->fn(r, t->arg);
			}
		}
		st->head = st->tail = NULL;
	}
	r->nstaged = 0;
}

int
reactor_add_io(struct reactor *r, struct reactor_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	io->events = events;
	return epoll_ctl(r->epfd, EPOLL_CTL_ADD, io->fd, &ev);
}

int
reactor_mod_io(struct reactor *r, struct reactor_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	if (io->events == events)
		return 0;
	io->events = events;
	return epoll_ctl(r->epfd, EPOLL_CTL_MOD, io->fd, &ev);
}

void
reactor_del_io(struct reactor *r, struct reactor_io *io)
{
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	io->events = 0;
}

uint32_t
reactor_slot_add(struct reactor *r, struct conn *c)
{
	uint32_t slot;

	if (r->nfree > 0) {
		slot = r->free_slots[--r->nfree];
	} else {
		uint32_t n = r->nslots ? r->nslots * 2 : 64;

		r->slots = xrealloc(r->slots, n * sizeof(*r->slots));
		r->gens = xrealloc(r->gens, n * sizeof(*r->gens));
		r->free_slots = xrealloc(r->free_slots,
		    n * sizeof(*r->free_slots));
		/* Hand out low slots first: push the new ones high to low. */
		for (uint32_t i = n; i-- > r->nslots + 1;) {
			r->gens[i] = 0;
			r->slots[i] = NULL;
			r->free_slots[r->nfree++] = i;
		}
		slot = r->nslots;
		r->gens[slot] = 0;
		r->nslots = n;
	}
	r->slots[slot] = c;
	r->nconns++;
	return slot;
}

void
reactor_slot_del(struct reactor *r, uint32_t slot)
{
	r->slots[slot] = NULL;
	r->gens[slot]++;
	r->free_slots[r->nfree++] = slot;
	r->nconns--;
}

struct conn *
reactor_slot_get(struct reactor *r, uint32_t slot, uint32_t gen)
{
	if (slot >= r->nslots || r->gens[slot] != gen)
		return NULL;
	return r->slots[slot];
}
