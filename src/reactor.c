/* reactor.c: the per-thread epoll loop, its mailbox, staged sends and hooks. */
#include "reactor.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "msg.h"
#include "service.h"

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

static void
mailbox_on_io(struct reactor *r, struct reactor_io *io, uint32_t events)
{
	(void)io;
	(void)events;
	mailbox_drain(&r->mb, r, MAILBOX_RUN);
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
	r->sched_batch = cf->sched_batch;
	reactor_clock(r);
	r->last_second = r->now;
	r->mb.evfd = -1;
	r->wake_within_ms = -1;
	if ((r->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	if (mailbox_init(&r->mb) < 0)
		goto fail;
	r->mbio.fd = mailbox_fd(&r->mb);
	r->mbio.fn = mailbox_on_io;
	if (reactor_add_io(r, &r->mbio, EPOLLIN) < 0)
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
	/* Tasks still queued are told they are cancelled: they clean up. */
	r->stopping = r->done = true;
	mailbox_fini(&r->mb, r);
	for (unsigned i = r->nhooks; i-- > 0;)
		if (r->hooks[i].h->free != NULL)
			r->hooks[i].h->free(r, r->hooks[i].arg);
	reactor_publish(r);
	reactor_batch_fini(&r->batch);
	if (r->epfd >= 0)
		close(r->epfd);
	config_unref(r->cf);
	/* Last: what the hooks freed above may have gone there. */
	for (unsigned i = 0; i < REACTOR_SPARES; i++)
		spares_drain(&r->spares[i]);
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

/* Runs the hooks' fn of one kind, in the order they were added. */
#define REACTOR_HOOKS_RUN(r, fn)					\
	do {								\
		for (unsigned i_ = 0; i_ < (r)->nhooks; i_++)		\
			if ((r)->hooks[i_].h->fn != NULL)		\
				(r)->hooks[i_].h->fn((r),		\
				    (r)->hooks[i_].arg);		\
	} while (0)

/* Whether every hooked module has drained. */
static bool
reactor_drained(struct reactor *r)
{
	for (unsigned i = 0; i < r->nhooks; i++)
		if (r->hooks[i].h->drained != NULL &&
		    !r->hooks[i].h->drained(r, r->hooks[i].arg))
			return false;
	return true;
}

/* Whether a hook has work it can do at once. */
static bool
reactor_before_sleep(struct reactor *r)
{
	bool busy = false;

	for (unsigned i = 0; i < r->nhooks; i++)
		if (r->hooks[i].h->before_sleep != NULL &&
		    r->hooks[i].h->before_sleep(r, r->hooks[i].arg))
			busy = true;
	return busy;
}

void
reactor_wake_within(struct reactor *r, int ms)
{
	if (ms < 0)
		ms = 0;
	if (r->wake_within_ms < 0 || ms < r->wake_within_ms)
		r->wake_within_ms = ms;
}

int
reactor_hook_add(struct reactor *r, const struct reactor_hooks *h, void *arg)
{
	if (r->nhooks == REACTOR_MAX_HOOKS) {
		errno = ENOSPC;
		return -1;
	}
	r->hooks[r->nhooks].h = h;
	r->hooks[r->nhooks].arg = arg;
	r->nhooks++;
	/*
	 * Added on a running reactor: its start hook runs now; on a stopping
	 * one, its stop hook too, so that it drains like the others.
	 */
	if (r->hooks_started && h->start != NULL)
		h->start(r, arg);
	if (r->stopping && h->stop != NULL)
		h->stop(r, arg);
	return 0;
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

/* The start hooks, once, on the thread that runs the loop. */
static void
reactor_hooks_start(struct reactor *r)
{
	if (r->hooks_started)
		return;
	r->hooks_started = true;
	REACTOR_HOOKS_RUN(r, start);
}

/* Stopping: once every module has drained, or time is up, end. */
static void
reactor_check_stop(struct reactor *r)
{
	if (!r->stopping || (!reactor_drained(r) && r->now < r->stop_deadline))
		return;
	REACTOR_HOOKS_RUN(r, finish);
	atomic_store_explicit(&r->stop_state, REACTOR_QUIET,
	    memory_order_release);
	r->done = reactors_quiet();
}

static void
reactor_turn(struct reactor *r, struct epoll_event *evs, int timeout)
{
	uint64_t t0;
	int n;

	if (r->busy)
		timeout = 0;
	else if (r->wake_within_ms >= 0 &&
	    (timeout < 0 || r->wake_within_ms < timeout))
		timeout = r->wake_within_ms;
	r->wake_within_ms = -1;
	n = epoll_wait(r->epfd, evs, REACTOR_MAX_EVENTS, timeout);
	if (n < 0 && errno != EINTR)
		fatal("reactor=%u epoll_wait", r->id);
	t0 = counter_now_ns();
	r->turn_ns = t0;
	reactor_clock(r);
	counter_add(&r->counters, COUNTER_LOOPS, 1);
	for (int i = 0; i < n; i++) {
		struct reactor_io *io = evs[i].data.ptr;

		io->fn(r, io, evs[i].events);
	}
	REACTOR_HOOKS_RUN(r, after_events);
	/*
	 * Hand other reactors their tasks before this turn's writes: they
	 * work on them while we are in writev, instead of waiting (and their
	 * CPU idling) until we are done. What the rest of the turn stages
	 * goes at its end.
	 */
	reactor_publish(r);
	if (r->now != r->last_second) {
		r->last_second = r->now;
		REACTOR_HOOKS_RUN(r, every_second);
		for (unsigned i = 0; i < REACTOR_SPARES; i++)
			spares_trim(&r->spares[i]);
	}
	r->busy = reactor_before_sleep(r);
	reactor_check_stop(r);
	reactor_publish(r);
	counter_observe(&r->detail.hist[HIST_TURN], counter_now_ns() - t0);
}

static void *
reactor_main(void *arg)
{
	struct reactor *r = arg;
	struct epoll_event *evs = xcalloc(REACTOR_MAX_EVENTS, sizeof(*evs));
	char name[16];

	/* Named before any hook or task runs on it. */
	snprintf(name, sizeof(name), "reactor-%u", r->id);
	pthread_setname_np(pthread_self(), name);
	if (r->cpu_affinity)
		reactor_pin(r);
	reactor_sched_batch(r);
	msg_spares_use(&r->spares[REACTOR_SPARE_MSG]);
	reactor_hooks_start(r);
	log_debug("reactor=%u running", r->id);
	/* Stopping: every 100 ms, so exit waits no longer than needed. */
	while (!r->done)
		reactor_turn(r, evs, r->stopping ? 100 : 1000);
	free(evs);
	msg_spares_use(NULL);
	log_debug("reactor=%u stopped", r->id);
	return NULL;
}

void
reactor_run_once(struct reactor *r, int timeout_ms)
{
	struct epoll_event evs[REACTOR_MAX_EVENTS];

	reactor_hooks_start(r);
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
	/* Named here too: from now on, whoever looks sees the name. */
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
reactor_stop_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;

	(void)arg;
	if (st == MAILBOX_CANCELLED || r->stopping)
		return;
	r->stopping = true;
	/*
	 * r->now is whole seconds, so part of this second is already gone:
	 * one more second lets the drain last at least shutdown_timeout.
	 */
	r->stop_deadline = r->now + r->cf->shutdown_timeout +
	    (r->cf->shutdown_timeout > 0);
	REACTOR_HOOKS_RUN(r, stop);
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
reactor_config_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;

	/* Cancelled: the reactor keeps its own; this reference goes. */
	if (st == MAILBOX_CANCELLED) {
		config_unref(arg);
		return;
	}
	config_unref(r->cf);
	r->cf = arg;
}

void
reactor_set_config(struct reactor *r, struct config *cf)
{
	reactor_post(r, reactor_config_task, config_ref(cf));
}

void
reactor_post(struct reactor *r, mailbox_task_fn *fn, void *arg)
{
	mailbox_post_fn(&r->mb, fn, arg);
}

void
reactor_post_task(struct reactor *r, struct mailbox_task *t)
{
	mailbox_post(&r->mb, t);
}

void
reactor_post_chain(struct reactor *r, struct mailbox_task *head,
    struct mailbox_task *tail)
{
	mailbox_push(&r->mb, head, tail);
}

void
reactor_batch_add(struct reactor_batch *b, struct reactor *to,
    struct mailbox_task *t)
{
	struct reactor_stage *st;

	if (b->stage == NULL) {
		b->stage = xcalloc(CONFIG_DISPATCHERS_MAX, sizeof(*b->stage));
		b->staged = xcalloc(CONFIG_DISPATCHERS_MAX, sizeof(*b->staged));
	}
	st = &b->stage[to->id];
	if (st->head == NULL) {
		st->tail = t;
		b->staged[b->nstaged++] = to->id;
	}
	t->next = st->head;
	st->head = t;
}

void
reactor_batch_add_service(struct reactor_batch *b, struct service *to,
    struct mailbox_task *t)
{
	unsigned i;

	for (i = 0; i < b->nsvc && b->svc[i].to != to; i++)
		;
	if (i == b->nsvc) {
		/* More services than kept apart: straight to it. */
		if (i == REACTOR_BATCH_SERVICES) {
			service_post(to, t);
			return;
		}
		b->svc[b->nsvc++].to = to;
	}
	if (b->svc[i].st.head == NULL)
		b->svc[i].st.tail = t;
	t->next = b->svc[i].st.head;
	b->svc[i].st.head = t;
}

void
reactor_batch_publish(struct reactor_batch *b, void *owner)
{
	for (uint32_t i = 0; i < b->nstaged; i++) {
		struct reactor_stage *st = &b->stage[b->staged[i]];
		struct reactor *to = reactor_get(b->staged[i]);

		if (to != NULL) {
			mailbox_push(&to->mb, st->head, st->tail);
		} else {
			/*
			 * The destination is gone (only while freeing at exit):
			 * the tasks are cancelled, here. Newest first, as
			 * staged: nobody runs them in order any more.
			 */
			mailbox_run_chain(st->head, owner, MAILBOX_CANCELLED);
		}
		st->head = st->tail = NULL;
	}
	b->nstaged = 0;
	for (unsigned i = 0; i < b->nsvc; i++) {
		service_post_chain(b->svc[i].to, b->svc[i].st.head,
		    b->svc[i].st.tail);
		b->svc[i].st.head = b->svc[i].st.tail = NULL;
	}
	b->nsvc = 0;
}

void
reactor_batch_fini(struct reactor_batch *b)
{
	free(b->stage);
	free(b->staged);
	b->stage = NULL;
	b->staged = NULL;
}

void
reactor_send(struct reactor *from, struct reactor *to, struct mailbox_task *t)
{
	reactor_batch_add(&from->batch, to, t);
}

void
reactor_send_service(struct reactor *from, struct service *to,
    struct mailbox_task *t)
{
	reactor_batch_add_service(&from->batch, to, t);
}

void
reactor_publish(struct reactor *r)
{
	reactor_batch_publish(&r->batch, r);
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

int
reactor_del_io(struct reactor *r, struct reactor_io *io)
{
	io->events = 0;
	return epoll_ctl(r->epfd, EPOLL_CTL_DEL, io->fd, NULL);
}
