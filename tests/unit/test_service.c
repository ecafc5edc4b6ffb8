/* test_service.c: service threads: where tasks run, order, hooks, stop. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "service.h"
#include "suites.h"

#define SVC_NAME	"svc-unit"
#define NPRODUCERS	4
#define NTASKS		5000	/* per producer */
#define LOG_MAX		4096

enum ev_kind {
	EV_START,
	EV_TASK,
	EV_BATCH,
	EV_TICK,
	EV_STOP,
};

struct ev {
	enum ev_kind kind;
	unsigned seq;
	enum mailbox_status st;
};

/*
 * What the hooks and the tasks saw, in the order they saw it. Hooks and
 * tasks run on the service's thread; the test reads after service_stop
 * (a join) or under the lock.
 */
struct svc_log {
	pthread_mutex_t lock;
	struct service *s;
	struct ev ev[LOG_MAX];
	unsigned n;
	unsigned off_thread;	/* hooks or tasks run elsewhere */
	unsigned wrong_name;
	atomic_uint ticks;
	atomic_int inflight;	/* busy test: posted, not yet run */
};

static struct svc_log lg;

static void
log_reset(void)
{
	memset(&lg, 0, sizeof(lg));
	pthread_mutex_init(&lg.lock, NULL);
}

/* Checks the calling thread is the service's; records ev. */
static void
log_ev(enum ev_kind kind, unsigned seq, enum mailbox_status st)
{
	char name[16] = "";

	pthread_mutex_lock(&lg.lock);
	if (lg.n < LOG_MAX)
		lg.ev[lg.n++] = (struct ev){ kind, seq, st };
	pthread_mutex_unlock(&lg.lock);
	/* Cancelled tasks run on the thread that frees the service. */
	if (kind == EV_TASK && st == MAILBOX_CANCELLED)
		return;
	if (!service_is_current(lg.s))
		lg.off_thread++;
	pthread_getname_np(pthread_self(), name, sizeof(name));
	if (strcmp(name, SVC_NAME) != 0)
		lg.wrong_name++;
}

static void
hook_start(struct service *s, void *arg)
{
	ck_assert_ptr_eq(s, lg.s);
	ck_assert_ptr_eq(arg, &lg);
	log_ev(EV_START, 0, MAILBOX_RUN);
}

static void
hook_after_batch(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	log_ev(EV_BATCH, 0, MAILBOX_RUN);
}

static void
hook_stop(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	log_ev(EV_STOP, 0, MAILBOX_RUN);
}

static void
hook_tick(struct service *s, void *arg)
{
	(void)s;
	(void)arg;
	if (!service_is_current(lg.s))
		lg.off_thread++;
	atomic_fetch_add(&lg.ticks, 1);
}

static const struct service_hooks logging_hooks = {
	.start = hook_start,
	.after_batch = hook_after_batch,
	.stop = hook_stop,
};

static struct service *
new_service(const struct service_hooks *h)
{
	struct service *s = service_new(SVC_NAME, h, &lg);

	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(service_name(s), SVC_NAME);
	lg.s = s;
	return s;
}

/* A task that logs itself: seq is its arg. */
static void
log_task(void *owner, void *arg, enum mailbox_status st)
{
	ck_assert_ptr_eq(owner, lg.s);
	log_ev(EV_TASK, (unsigned)(uintptr_t)arg, st);
}

/* Where the last event of kind is in the log; -1 if none. */
static int
log_last(enum ev_kind kind)
{
	for (unsigned i = lg.n; i-- > 0;)
		if (lg.ev[i].kind == kind)
			return (int)i;
	return -1;
}

static int
log_first(enum ev_kind kind)
{
	for (unsigned i = 0; i < lg.n; i++)
		if (lg.ev[i].kind == kind)
			return (int)i;
	return -1;
}

/* One producer's tasks, embedded; written by the service thread only. */
struct ptask {
	struct mailbox_task task;
	unsigned producer;
	unsigned seq;
	unsigned ran;
	bool	on_thread;
};

struct producer {
	pthread_t thread;
	struct service *s;
	struct ptask *tasks;
};

/* Per producer, the last seq run; written by the service thread only. */
static int last_seq[NPRODUCERS];
static unsigned out_of_order;

static void
ptask_run(void *owner, void *arg, enum mailbox_status st)
{
	struct ptask *t = arg;
	char name[16] = "";

	(void)owner;
	t->ran++;
	pthread_getname_np(pthread_self(), name, sizeof(name));
	t->on_thread = st == MAILBOX_RUN && service_is_current(lg.s) &&
	    strcmp(name, SVC_NAME) == 0;
	if ((int)t->seq <= last_seq[t->producer])
		out_of_order++;
	last_seq[t->producer] = (int)t->seq;
}

static void *
producer_main(void *arg)
{
	struct producer *p = arg;

	for (unsigned i = 0; i < NTASKS; i++)
		service_post(p->s, &p->tasks[i].task);
	return NULL;
}

/*
 * Tasks posted from several threads (and one before the thread started)
 * all run once, on the service's thread, named after it, each producer's
 * in the order posted.
 */
START_TEST(service_tasks_on_own_thread_in_order)
{
	struct service *s;
	struct producer pr[NPRODUCERS];
	struct ptask early = { .producer = 0, .seq = 0 };

	log_reset();
	s = new_service(&logging_hooks);
	for (unsigned p = 0; p < NPRODUCERS; p++) {
		last_seq[p] = -1;
		pr[p].s = s;
		pr[p].tasks = calloc(NTASKS, sizeof(*pr[p].tasks));
		ck_assert_ptr_nonnull(pr[p].tasks);
		for (unsigned i = 0; i < NTASKS; i++)
			pr[p].tasks[i] = (struct ptask){ .task = {
			    .fn = ptask_run, .arg = &pr[p].tasks[i] },
			    .producer = p, .seq = i + 1 };
	}
	out_of_order = 0;
	early.task.fn = ptask_run;
	early.task.arg = &early;
	service_post(s, &early.task);
	ck_assert(!service_is_current(s));
	ck_assert_int_eq(service_start(s), 0);
	ck_assert(!service_is_current(s));
	for (unsigned p = 0; p < NPRODUCERS; p++)
		ck_assert_int_eq(pthread_create(&pr[p].thread, NULL,
		    producer_main, &pr[p]), 0);
	for (unsigned p = 0; p < NPRODUCERS; p++)
		pthread_join(pr[p].thread, NULL);
	service_stop(s);
	ck_assert_uint_eq(early.ran, 1);
	ck_assert_msg(early.on_thread, "a task posted before the start ran "
	    "off the service's thread or under another name");
	ck_assert_uint_eq(out_of_order, 0);
	for (unsigned p = 0; p < NPRODUCERS; p++) {
		ck_assert_int_eq(last_seq[p], NTASKS);
		for (unsigned i = 0; i < NTASKS; i++) {
			const struct ptask *t = &pr[p].tasks[i];

			if (t->ran != 1 || !t->on_thread)
				ck_abort_msg("task %u/%u ran %u times, %s", p,
				    i, t->ran, t->on_thread ? "on its thread" :
				    "off its thread");
		}
		free(pr[p].tasks);
	}
	ck_assert_uint_eq(lg.off_thread, 0);
	ck_assert_uint_eq(lg.wrong_name, 0);
	service_free(s);
}
END_TEST

/* What the start hook and a task posted before the start saw. */
struct early_look {
	struct service *s;
	bool	start_current;
	bool	task_current;
	char	start_name[16];
	char	task_name[16];
};

static void
early_start(struct service *s, void *arg)
{
	struct early_look *e = arg;

	e->start_current = service_is_current(s);
	pthread_getname_np(pthread_self(), e->start_name,
	    sizeof(e->start_name));
}

static void
early_task(void *owner, void *arg, enum mailbox_status st)
{
	struct early_look *e = arg;

	(void)st;
	e->task_current = service_is_current(owner);
	pthread_getname_np(pthread_self(), e->task_name, sizeof(e->task_name));
}

static const struct service_hooks early_hooks = { .start = early_start };

/*
 * Regression: the thread was named, and service_is_current made true, by
 * service_start after pthread_create returned, so the start hook and
 * tasks already queued could run first and find neither (and TSan saw a
 * race on `started`). Many starts make the window show.
 */
START_TEST(service_current_and_named_before_start_returns)
{
	for (unsigned i = 0; i < 50; i++) {
		struct early_look e = { .s = NULL };
		struct service *s = service_new(SVC_NAME, &early_hooks, &e);

		ck_assert_ptr_nonnull(s);
		service_post_fn(s, early_task, &e);
		ck_assert_int_eq(service_start(s), 0);
		service_stop(s);
		service_free(s);
		ck_assert_msg(e.start_current, "start hook: not current (%u)",
		    i);
		ck_assert_msg(e.task_current, "early task: not current (%u)",
		    i);
		ck_assert_str_eq(e.start_name, SVC_NAME);
		ck_assert_str_eq(e.task_name, SVC_NAME);
	}
}
END_TEST

/*
 * The start hook runs before any task, even tasks posted before the
 * start; after_batch follows the batches; service_stop runs everything
 * posted before it, then the stop hook; what is posted after the thread
 * ended is cancelled by service_free, after all that.
 */
START_TEST(service_stop_runs_posted_then_hook)
{
	enum { BEFORE = 5, DURING = 200, AFTER = 3 };
	struct service *s;
	int stop_at;

	log_reset();
	s = new_service(&logging_hooks);
	for (unsigned i = 0; i < BEFORE; i++)
		service_post_fn(s, log_task, (void *)(uintptr_t)i);
	ck_assert_int_eq(service_start(s), 0);
	for (unsigned i = BEFORE; i < BEFORE + DURING; i++) {
		service_post_fn(s, log_task, (void *)(uintptr_t)i);
		/* Now and then, let the thread take a batch. */
		if (i % 50 == 0)
			unit_sleep_ms(2);
	}
	service_stop(s);
	for (unsigned i = BEFORE + DURING; i < BEFORE + DURING + AFTER; i++)
		service_post_fn(s, log_task, (void *)(uintptr_t)i);
	service_free(s);

	ck_assert_uint_eq(lg.off_thread, 0);
	ck_assert_uint_eq(lg.wrong_name, 0);
	ck_assert_int_eq(log_first(EV_START), 0);
	ck_assert_int_eq(log_last(EV_START), 0);
	stop_at = log_first(EV_STOP);
	ck_assert_int_gt(stop_at, 0);
	ck_assert_int_eq(log_last(EV_STOP), stop_at);
	/* Every task before the stop ran, in order, then came a batch end. */
	{
		unsigned seq = 0, batches = 0;
		bool batch_owed = false;

		for (int i = 1; i < stop_at; i++) {
			const struct ev *e = &lg.ev[i];

			if (e->kind == EV_BATCH) {
				/*
				 * Only after a batch that ran something: ours,
				 * or at the end the stop's own task alone.
				 */
				ck_assert_msg(batch_owed || i == stop_at - 1,
				    "after_batch at %d with no task before it",
				    i);
				batch_owed = false;
				batches++;
				continue;
			}
			ck_assert_int_eq(e->kind, EV_TASK);
			ck_assert_int_eq(e->st, MAILBOX_RUN);
			ck_assert_uint_eq(e->seq, seq);
			seq++;
			batch_owed = true;
		}
		ck_assert_uint_eq(seq, BEFORE + DURING);
		ck_assert_msg(!batch_owed, "no after_batch after the last "
		    "batch before the stop");
		ck_assert_uint_ge(batches, 1);
	}
	/* Then the late ones, cancelled, in order. */
	ck_assert_uint_eq(lg.n, (unsigned)stop_at + 1 + AFTER);
	for (unsigned k = 0; k < AFTER; k++) {
		const struct ev *e = &lg.ev[stop_at + 1 + (int)k];

		ck_assert_int_eq(e->kind, EV_TASK);
		ck_assert_int_eq(e->st, MAILBOX_CANCELLED);
		ck_assert_uint_eq(e->seq, BEFORE + DURING + k);
	}
}
END_TEST

/* A task slow enough that the stop finds more queued behind it. */
static void
slow_task(void *owner, void *arg, enum mailbox_status st)
{
	if (st == MAILBOX_RUN)
		unit_sleep_ms(20);
	log_task(owner, arg, st);
}

/* Tasks still queued when service_stop is called run before the hook. */
START_TEST(service_stop_waits_for_queued)
{
	enum { N = 20 };
	struct service *s;
	int stop_at;

	log_reset();
	s = new_service(&logging_hooks);
	ck_assert_int_eq(service_start(s), 0);
	for (unsigned i = 0; i < N; i++)
		service_post_fn(s, slow_task, (void *)(uintptr_t)i);
	service_stop(s);
	stop_at = log_first(EV_STOP);
	service_free(s);
	ck_assert_int_ge(stop_at, 0);
	for (int i = 0, seq = 0; i < stop_at; i++) {
		const struct ev *e = &lg.ev[i];

		if (e->kind != EV_TASK)
			continue;
		ck_assert_int_eq(e->st, MAILBOX_RUN);
		ck_assert_uint_eq(e->seq, (unsigned)seq);
		seq++;
		if (seq == N)
			ck_assert_int_eq(lg.ev[stop_at - 1].kind, EV_BATCH);
	}
	for (unsigned i = 0; i < lg.n; i++)
		ck_assert_msg(lg.ev[i].kind != EV_TASK ||
		    lg.ev[i].st == MAILBOX_RUN, "task %u cancelled",
		    lg.ev[i].seq);
	ck_assert_uint_eq(lg.n, (unsigned)stop_at + 1);
}
END_TEST

#define TICK_MS		20

static const struct service_hooks tick_hooks = {
	.tick = hook_tick,
	.tick_ms = TICK_MS,
};

static void
busy_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	(void)arg;
	(void)st;
	atomic_fetch_sub(&lg.inflight, 1);
}

/*
 * The tick runs about every tick_ms, idle or with the mailbox never
 * empty; never more often. Bounds are loose: a loaded machine is slow.
 */
START_TEST(service_tick_idle_and_busy)
{
	struct service *s;
	uint64_t t0, t1, t2;
	unsigned idle_ticks, busy_ticks, posted = 0;

	log_reset();
	s = new_service(&tick_hooks);
	t0 = unit_now_ms();
	ck_assert_int_eq(service_start(s), 0);
	unit_sleep_ms(500);
	idle_ticks = atomic_load(&lg.ticks);
	/* Busy: tasks always queued, for a second. */
	t1 = unit_now_ms();
	while (unit_now_ms() - t1 < 1000) {
		if (atomic_load(&lg.inflight) < 100) {
			atomic_fetch_add(&lg.inflight, 1);
			service_post_fn(s, busy_task, NULL);
			posted++;
		} else {
			sched_yield();
		}
	}
	service_stop(s);
	t2 = unit_now_ms();
	busy_ticks = atomic_load(&lg.ticks) - idle_ticks;
	service_free(s);
	ck_assert_uint_eq(lg.off_thread, 0);
	/* About 25 idle and 50 busy are due; a starved thread gets fewer. */
	ck_assert_msg(idle_ticks >= 3, "%u ticks in 500 ms idle", idle_ticks);
	ck_assert_msg(busy_ticks >= 5, "%u ticks in 1 s busy (%u tasks)",
	    busy_ticks, posted);
	/* Never sooner than tick_ms after the last. */
	ck_assert_msg(atomic_load(&lg.ticks) <= (t2 - t0) / TICK_MS + 2,
	    "%u ticks in %llu ms", atomic_load(&lg.ticks),
	    (unsigned long long)(t2 - t0));
}
END_TEST

/*
 * A service never started is freed cleanly: its tasks are cancelled,
 * none of its hooks runs, and service_stop on it does nothing.
 */
START_TEST(service_free_unstarted)
{
	struct service *s;
	struct ptask t = { .producer = 0, .seq = 1 };

	log_reset();
	s = new_service(&logging_hooks);
	last_seq[0] = -1;
	t.task.fn = ptask_run;
	t.task.arg = &t;
	service_post(s, &t.task);
	service_post_fn(s, log_task, (void *)(uintptr_t)7);
	service_post_fn(s, log_task, (void *)(uintptr_t)8);
	service_stop(s);
	ck_assert_uint_eq(lg.n, 0);
	ck_assert_uint_eq(t.ran, 0);
	service_free(s);
	ck_assert_uint_eq(t.ran, 1);
	ck_assert(!t.on_thread);
	ck_assert_uint_eq(lg.n, 2);
	for (unsigned i = 0; i < 2; i++) {
		ck_assert_int_eq(lg.ev[i].kind, EV_TASK);
		ck_assert_int_eq(lg.ev[i].st, MAILBOX_CANCELLED);
		ck_assert_uint_eq(lg.ev[i].seq, 7 + i);
	}
	service_free(NULL);
}
END_TEST

/*
 * service_run_within, from the after_batch hook: a task posted while the
 * hook waits runs inside the wait (before the hook returns) and is
 * counted; with nothing posted the wait ends empty after its time.
 */
static atomic_int gather_phase;	/* 1: the hook waits; 2: it returned */
static unsigned gather_got, gather_none;
static uint64_t gather_empty_ms;

static void
gather_hook(struct service *s, void *arg)
{
	uint64_t t;

	(void)arg;
	if (atomic_load(&gather_phase) != 0)
		return;
	atomic_store(&gather_phase, 1);
	gather_got = service_run_within(s, 5000000);
	log_ev(EV_BATCH, 0, MAILBOX_RUN);
	t = unit_now_ms();
	gather_none = service_run_within(s, 50000);
	gather_empty_ms = unit_now_ms() - t;
	atomic_store(&gather_phase, 2);
}

static const struct service_hooks gather_hooks = {
	.after_batch = gather_hook,
};

START_TEST(service_run_within_gathers)
{
	struct service *s;
	uint64_t t0;

	log_reset();
	atomic_store(&gather_phase, 0);
	s = new_service(&gather_hooks);
	ck_assert_int_eq(service_start(s), 0);
	service_post_fn(s, log_task, (void *)(uintptr_t)1);
	t0 = unit_now_ms();
	while (atomic_load(&gather_phase) == 0 && unit_now_ms() - t0 < 5000)
		unit_sleep_ms(1);
	ck_assert_int_eq(atomic_load(&gather_phase), 1);
	service_post_fn(s, log_task, (void *)(uintptr_t)2);
	while (atomic_load(&gather_phase) == 1 && unit_now_ms() - t0 < 10000)
		unit_sleep_ms(1);
	service_stop(s);
	service_free(s);
	ck_assert_int_eq(atomic_load(&gather_phase), 2);
	ck_assert_uint_eq(gather_got, 1);
	ck_assert_uint_eq(gather_none, 0);
	ck_assert_msg(gather_empty_ms >= 40, "empty wait %llu ms",
	    (unsigned long long)gather_empty_ms);
	/* Task 1, task 2 (inside the hook's wait), then the hook's mark. */
	ck_assert_uint_eq(lg.n, 3);
	ck_assert_int_eq(lg.ev[0].kind, EV_TASK);
	ck_assert_uint_eq(lg.ev[0].seq, 1);
	ck_assert_int_eq(lg.ev[1].kind, EV_TASK);
	ck_assert_uint_eq(lg.ev[1].seq, 2);
	ck_assert_int_eq(lg.ev[2].kind, EV_BATCH);
	ck_assert_uint_eq(lg.off_thread, 0);
}
END_TEST

Suite *
service_suite(void)
{
	Suite *s = suite_create("service");
	TCase *tc = tcase_create("thread");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, service_tasks_on_own_thread_in_order);
	tcase_add_test(tc, service_current_and_named_before_start_returns);
	tcase_add_test(tc, service_stop_runs_posted_then_hook);
	tcase_add_test(tc, service_stop_waits_for_queued);
	tcase_add_test(tc, service_tick_idle_and_busy);
	tcase_add_test(tc, service_free_unstarted);
	tcase_add_test(tc, service_run_within_gathers);
	suite_add_tcase(s, tc);
	return s;
}
