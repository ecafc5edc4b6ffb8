/* test_mailbox.c: the task queue: producer order, chains, wake-ups, fini. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "mailbox.h"
#include "suites.h"

#define NPRODUCERS	4
#define NTASKS		20000	/* per producer */

/* One task a producer posted; written by the owner only. */
struct seq_task {
	struct mailbox_task task;
	unsigned producer;
	unsigned seq;
	unsigned ran;
};

/* What the owner saw. */
struct seq_log {
	int	last[NPRODUCERS];	/* per producer: the last seq run */
	unsigned out_of_order;
	unsigned cancelled;
	unsigned total;
};

static struct seq_log seen;

static void
seq_run(void *owner, void *arg, enum mailbox_status st)
{
	struct seq_task *t = arg;

	ck_assert_ptr_eq(owner, &seen);
	t->ran++;
	seen.total++;
	seen.cancelled += st == MAILBOX_CANCELLED;
	if ((int)t->seq <= seen.last[t->producer])
		seen.out_of_order++;
	seen.last[t->producer] = (int)t->seq;
}

static void
seq_log_reset(void)
{
	memset(&seen, 0, sizeof(seen));
	for (unsigned p = 0; p < NPRODUCERS; p++)
		seen.last[p] = -1;
}

struct producer {
	pthread_t thread;
	struct mailbox *mb;
	struct seq_task *tasks;		/* NTASKS */
};

static void *
producer_main(void *arg)
{
	struct producer *p = arg;

	for (unsigned i = 0; i < NTASKS; i++)
		mailbox_post(p->mb, &p->tasks[i].task);
	return NULL;
}

/* Reads the eventfd's count without draining the tasks; 0 if none. */
static uint64_t
evfd_take(struct mailbox *mb)
{
	uint64_t v = 0;

	if (read(mailbox_fd(mb), &v, sizeof(v)) < 0) {
		ck_assert_int_eq(errno, EAGAIN);
		return 0;
	}
	return v;
}

/*
 * Several threads post while the owner drains as wake-ups come: every
 * task runs once, and each producer's in the order it posted them.
 */
START_TEST(mailbox_per_producer_fifo)
{
	struct mailbox mb;
	struct producer pr[NPRODUCERS];
	uint64_t deadline;

	seq_log_reset();
	ck_assert_int_eq(mailbox_init(&mb), 0);
	for (unsigned p = 0; p < NPRODUCERS; p++) {
		pr[p].mb = &mb;
		pr[p].tasks = calloc(NTASKS, sizeof(*pr[p].tasks));
		ck_assert_ptr_nonnull(pr[p].tasks);
		for (unsigned i = 0; i < NTASKS; i++) {
			struct seq_task *t = &pr[p].tasks[i];

			t->producer = p;
			t->seq = i;
			t->task.fn = seq_run;
			t->task.arg = t;
		}
	}
	for (unsigned p = 0; p < NPRODUCERS; p++)
		ck_assert_int_eq(pthread_create(&pr[p].thread, NULL,
		    producer_main, &pr[p]), 0);
	deadline = unit_now_ms() + 20000;
	while (seen.total < NPRODUCERS * NTASKS) {
		struct pollfd pfd = { .fd = mailbox_fd(&mb), .events = POLLIN };

		ck_assert_msg(unit_now_ms() < deadline, "ran %u of %u",
		    seen.total, NPRODUCERS * NTASKS);
		/* A lost wake-up would leave tasks behind: poll, then drain. */
		if (poll(&pfd, 1, 1000) > 0)
			mailbox_drain(&mb, &seen, MAILBOX_RUN);
	}
	for (unsigned p = 0; p < NPRODUCERS; p++)
		pthread_join(pr[p].thread, NULL);
	ck_assert_uint_eq(seen.out_of_order, 0);
	ck_assert_uint_eq(seen.cancelled, 0);
	for (unsigned p = 0; p < NPRODUCERS; p++) {
		ck_assert_int_eq(seen.last[p], NTASKS - 1);
		for (unsigned i = 0; i < NTASKS; i++)
			if (pr[p].tasks[i].ran != 1)
				ck_abort_msg("task %u/%u ran %u times", p, i,
				    pr[p].tasks[i].ran);
		free(pr[p].tasks);
	}
	ck_assert(mailbox_is_empty(&mb));
	mailbox_fini(&mb, &seen);
	ck_assert_uint_eq(seen.total, NPRODUCERS * NTASKS);
}
END_TEST

/*
 * A chain pushed at once (newest first: head the newest, tail the oldest)
 * runs oldest first, between what was posted before and after it.
 */
START_TEST(mailbox_chain_keeps_order)
{
	enum { CHAIN = 10 };
	struct seq_task t[CHAIN + 2];
	struct mailbox mb;

	seq_log_reset();
	ck_assert_int_eq(mailbox_init(&mb), 0);
	for (unsigned i = 0; i < CHAIN + 2; i++)
		t[i] = (struct seq_task){ .task = { .fn = seq_run,
		    .arg = &t[i] }, .producer = 0, .seq = i };
	mailbox_post(&mb, &t[0].task);
	/* t[1] .. t[CHAIN], linked newest first as reactor_send stages. */
	for (unsigned i = 2; i <= CHAIN; i++)
		t[i].task.next = &t[i - 1].task;
	mailbox_push(&mb, &t[CHAIN].task, &t[1].task);
	mailbox_post(&mb, &t[CHAIN + 1].task);
	ck_assert_uint_eq(mailbox_drain(&mb, &seen, MAILBOX_RUN), CHAIN + 2);
	ck_assert_uint_eq(seen.total, CHAIN + 2);
	ck_assert_uint_eq(seen.out_of_order, 0);
	ck_assert_int_eq(seen.last[0], CHAIN + 1);
	for (unsigned i = 0; i < CHAIN + 2; i++)
		ck_assert_uint_eq(t[i].ran, 1);
	mailbox_fini(&mb, &seen);
}
END_TEST

/*
 * Only a push into an empty mailbox writes the eventfd: a burst is one
 * wake-up; after a drain the next push wakes the owner again.
 */
START_TEST(mailbox_one_wakeup_per_burst)
{
	enum { BURST = 500 };
	struct seq_task *t = calloc(2 * BURST, sizeof(*t));
	struct mailbox mb;

	seq_log_reset();
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(mailbox_init(&mb), 0);
	ck_assert_int_ge(mailbox_fd(&mb), 0);
	ck_assert(mailbox_is_empty(&mb));
	ck_assert_uint_eq(evfd_take(&mb), 0);
	for (unsigned i = 0; i < 2 * BURST; i++)
		t[i] = (struct seq_task){ .task = { .fn = seq_run,
		    .arg = &t[i] }, .seq = i };
	for (unsigned i = 0; i < BURST; i++)
		mailbox_post(&mb, &t[i].task);
	ck_assert(!mailbox_is_empty(&mb));
	ck_assert_uint_eq(evfd_take(&mb), 1);
	ck_assert_uint_eq(mailbox_drain(&mb, &seen, MAILBOX_RUN), BURST);
	ck_assert(mailbox_is_empty(&mb));
	ck_assert_uint_eq(evfd_take(&mb), 0);
	/* Empty again: the next burst is one more wake-up. */
	for (unsigned i = BURST; i < 2 * BURST; i++)
		mailbox_post(&mb, &t[i].task);
	/* The drain takes the count itself: none is left for a spurious turn. */
	ck_assert_uint_eq(mailbox_drain(&mb, &seen, MAILBOX_RUN), BURST);
	ck_assert_uint_eq(evfd_take(&mb), 0);
	ck_assert_uint_eq(mailbox_drain(&mb, &seen, MAILBOX_RUN), 0);
	ck_assert_uint_eq(seen.total, 2 * BURST);
	ck_assert_uint_eq(seen.out_of_order, 0);
	mailbox_fini(&mb, &seen);
	free(t);
}
END_TEST

/* A cancelled task that answers with one more post, once. */
struct answering {
	struct mailbox_task task;
	struct mailbox *mb;
	struct seq_task *answer;
	unsigned cancelled;
	unsigned run;
};

static void
answering_run(void *owner, void *arg, enum mailbox_status st)
{
	struct answering *a = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED)
		a->cancelled++;
	else
		a->run++;
	if (a->answer != NULL) {
		mailbox_post(a->mb, &a->answer->task);
		a->answer = NULL;
	}
}

/*
 * mailbox_fini runs what is left as MAILBOX_CANCELLED, in order, and what
 * those tasks post as they clean up too; then the eventfd is gone.
 */
START_TEST(mailbox_fini_cancels_the_rest)
{
	struct seq_task t[3];
	struct answering a;
	struct mailbox mb;

	seq_log_reset();
	ck_assert_int_eq(mailbox_init(&mb), 0);
	for (unsigned i = 0; i < 3; i++)
		t[i] = (struct seq_task){ .task = { .fn = seq_run,
		    .arg = &t[i] }, .seq = i };
	a = (struct answering){ .task = { .fn = answering_run, .arg = &a },
	    .mb = &mb, .answer = &t[2] };
	mailbox_post(&mb, &t[0].task);
	mailbox_post(&mb, &a.task);
	mailbox_post(&mb, &t[1].task);
	mailbox_fini(&mb, &seen);
	ck_assert_uint_eq(a.cancelled, 1);
	ck_assert_uint_eq(a.run, 0);
	ck_assert_uint_eq(seen.total, 3);
	ck_assert_uint_eq(seen.cancelled, 3);
	ck_assert_uint_eq(seen.out_of_order, 0);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_eq(t[i].ran, 1);
	ck_assert_int_eq(mailbox_fd(&mb), -1);
	ck_assert(mailbox_is_empty(&mb));
	/* Twice, or on a zeroed mailbox: nothing happens. */
	mailbox_fini(&mb, &seen);
	memset(&mb, 0, sizeof(mb));
	mb.evfd = -1;
	mailbox_fini(&mb, &seen);
	ck_assert_uint_eq(seen.total, 3);
}
END_TEST

static void
count_fn(void *owner, void *arg, enum mailbox_status st)
{
	unsigned *n = arg;

	ck_assert_ptr_eq(owner, &seen);
	n[st == MAILBOX_CANCELLED]++;
}

/*
 * mailbox_post_fn allocates its entry and frees it after the run, whether
 * run or cancelled: LeakSanitizer (SANITIZE=address) fails the test if not.
 */
START_TEST(mailbox_post_fn_frees_entry)
{
	unsigned n[2] = { 0, 0 };	/* run, cancelled */
	struct mailbox mb;

	ck_assert_int_eq(mailbox_init(&mb), 0);
	for (unsigned i = 0; i < 1000; i++)
		mailbox_post_fn(&mb, count_fn, n);
	ck_assert_uint_eq(mailbox_drain(&mb, &seen, MAILBOX_RUN), 1000);
	for (unsigned i = 0; i < 1000; i++)
		mailbox_post_fn(&mb, count_fn, n);
	mailbox_fini(&mb, &seen);
	ck_assert_uint_eq(n[0], 1000);
	ck_assert_uint_eq(n[1], 1000);
}
END_TEST

Suite *
mailbox_suite(void)
{
	Suite *s = suite_create("mailbox");
	TCase *tc = tcase_create("queue");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, mailbox_per_producer_fifo);
	tcase_add_test(tc, mailbox_chain_keeps_order);
	tcase_add_test(tc, mailbox_one_wakeup_per_burst);
	tcase_add_test(tc, mailbox_fini_cancels_the_rest);
	tcase_add_test(tc, mailbox_post_fn_frees_entry);
	suite_add_tcase(s, tc);
	return s;
}
