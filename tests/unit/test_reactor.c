/* test_reactor.c: reactor threads, the mailbox (order, once), and staged sends. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "helpers.h"
#include "reactor.h"
#include "suites.h"

#define NREACTORS	2
#define NPRODUCERS	4
#define NTASKS		20000	/* per producer */
#define STAGE_N		1000	/* staged sends */

static const char *const reactor_conf =
    "dispatchers = 2;\n"
    "shutdown_timeout = 1;\n"
    "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"echo\"; } );\n";

/* What one posted task saw when it ran; written on the reactor only. */
struct task_rec {
	unsigned producer;
	unsigned seq;
	unsigned ran;
	struct reactor *ran_on;
	pthread_t thread;
};

/* Per reactor, per producer: the last sequence number seen. */
struct order {
	int	last[NPRODUCERS];
	unsigned out_of_order;
};

struct mailbox_test {
	struct reactor *rs[NREACTORS];
	struct order order[NREACTORS];
	struct task_rec *recs;		/* NPRODUCERS * NTASKS */
	pthread_t producers[NPRODUCERS];
};

static struct mailbox_test mt;

static void
record_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct task_rec *rec = arg;
	struct order *o = &mt.order[r->id];

	/* Run by the reactor, not cancelled: counted as out of order. */
	if (st != MAILBOX_RUN)
		o->out_of_order++;
	rec->ran++;
	rec->ran_on = r;
	rec->thread = pthread_self();
	if ((int)rec->seq <= o->last[rec->producer])
		o->out_of_order++;
	o->last[rec->producer] = (int)rec->seq;
}

static void *
producer_main(void *arg)
{
	unsigned p = (unsigned)(uintptr_t)arg;

	for (unsigned i = 0; i < NTASKS; i++) {
		struct task_rec *rec = &mt.recs[p * NTASKS + i];

		/* Each producer spreads its tasks over both reactors. */
		reactor_post(mt.rs[(i / 3) % NREACTORS], record_task, rec);
	}
	return NULL;
}

static struct reactor *
start_reactor(unsigned id, struct config *cf)
{
	struct reactor *r = reactor_new(id, cf);

	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->id, id);
	ck_assert_int_eq(reactor_start(r), 0);
	return r;
}

START_TEST(reactor_mailbox_many_producers)
{
	struct config *cf = unit_config(reactor_conf);
	size_t total = (size_t)NPRODUCERS * NTASKS;

	memset(&mt, 0, sizeof(mt));
	mt.recs = calloc(total, sizeof(*mt.recs));
	ck_assert_ptr_nonnull(mt.recs);
	for (unsigned p = 0; p < NPRODUCERS; p++)
		for (unsigned i = 0; i < NTASKS; i++) {
			mt.recs[p * NTASKS + i].producer = p;
			mt.recs[p * NTASKS + i].seq = i;
		}
	for (unsigned i = 0; i < NREACTORS; i++) {
		for (unsigned p = 0; p < NPRODUCERS; p++)
			mt.order[i].last[p] = -1;
		mt.rs[i] = start_reactor(i, cf);
	}
	for (unsigned p = 0; p < NPRODUCERS; p++)
		ck_assert_int_eq(pthread_create(&mt.producers[p], NULL,
		    producer_main, (void *)(uintptr_t)p), 0);
	for (unsigned p = 0; p < NPRODUCERS; p++)
		pthread_join(mt.producers[p], NULL);
	/* Posted after every task, so it runs after them. */
	for (unsigned i = 0; i < NREACTORS; i++)
		reactor_stop(mt.rs[i]);
	for (unsigned i = 0; i < NREACTORS; i++)
		reactor_join(mt.rs[i]);

	for (size_t k = 0; k < total; k++) {
		struct task_rec *rec = &mt.recs[k];
		struct reactor *want = mt.rs[(rec->seq / 3) % NREACTORS];

		if (rec->ran != 1)
			ck_abort_msg("task %u/%u ran %u times", rec->producer,
			    rec->seq, rec->ran);
		if (rec->ran_on != want ||
		    !pthread_equal(rec->thread, want->thread))
			ck_abort_msg("task %u/%u ran off its reactor's thread",
			    rec->producer, rec->seq);
	}
	for (unsigned i = 0; i < NREACTORS; i++) {
		ck_assert_uint_eq(mt.order[i].out_of_order, 0);
		for (unsigned p = 0; p < NPRODUCERS; p++)
			ck_assert_int_ge(mt.order[i].last[p], NTASKS - 3);
	}
	for (unsigned i = 0; i < NREACTORS; i++)
		reactor_free(mt.rs[i]);
	free(mt.recs);
	config_unref(cf);
}
END_TEST

/* Tasks the caller embedded, posted with reactor_post_task. */
struct embedded {
	struct mailbox_task task;
	unsigned value;
	unsigned ran;
};

static unsigned embedded_sum;

static void
embedded_run(void *owner, void *arg, enum mailbox_status st)
{
	struct embedded *e = arg;

	(void)owner;
	(void)st;
	e->ran++;
	embedded_sum = embedded_sum * 31 + e->value;
}

START_TEST(reactor_post_task_embedded)
{
	struct config *cf = unit_config(reactor_conf);
	struct reactor *r = start_reactor(3, cf);
	struct embedded es[100];
	unsigned want = 0;

	embedded_sum = 0;
	for (unsigned i = 0; i < 100; i++) {
		es[i].task.fn = embedded_run;
		es[i].task.arg = &es[i];
		es[i].value = i * 7 + 1;
		es[i].ran = 0;
		want = want * 31 + es[i].value;
		reactor_post_task(r, &es[i].task);
	}
	reactor_stop(r);
	reactor_join(r);
	for (unsigned i = 0; i < 100; i++)
		ck_assert_uint_eq(es[i].ran, 1);
	/* The hash depends on the order the tasks ran in. */
	ck_assert_uint_eq(embedded_sum, want);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

static void
name_task(void *owner, void *arg, enum mailbox_status st)
{
	char *name = arg;

	(void)owner;
	(void)st;
	pthread_getname_np(pthread_self(), name, 16);
}

START_TEST(reactor_thread_names)
{
	struct config *cf = unit_config(reactor_conf);
	struct reactor *r0 = start_reactor(0, cf);
	struct reactor *r7 = start_reactor(17, cf);
	char name[16] = "", inside[16] = "";

	ck_assert_int_eq(pthread_getname_np(r0->thread, name, sizeof(name)),
	    0);
	ck_assert_str_eq(name, "reactor-0");
	ck_assert_int_eq(pthread_getname_np(r7->thread, name, sizeof(name)),
	    0);
	ck_assert_str_eq(name, "reactor-17");
	reactor_post(r7, name_task, inside);
	reactor_stop(r0);
	reactor_stop(r7);
	reactor_join(r0);
	reactor_join(r7);
	ck_assert_str_eq(inside, "reactor-17");
	reactor_free(r0);
	reactor_free(r7);
	config_unref(cf);
}
END_TEST

/* A reactor never started is freed cleanly; what was posted is cancelled. */
static void
count_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	/* Never run by a thread: only told it is cancelled. */
	ck_assert_int_eq(st, MAILBOX_CANCELLED);
	(*(unsigned *)arg)++;
}

START_TEST(reactor_free_unstarted)
{
	struct config *cf = unit_config(reactor_conf);
	struct reactor *r = reactor_new(0, cf);
	unsigned n = 0;

	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(atomic_load(&cf->refs), 2);
	reactor_post(r, count_task, &n);
	reactor_post(r, count_task, &n);
	reactor_join(r);
	reactor_free(r);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(atomic_load(&cf->refs), 1);
	reactor_free(NULL);
	config_unref(cf);
}
END_TEST

/* The new configuration is what the reactor holds afterwards. */
static void
cf_probe(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;

	(void)st;
	*(unsigned *)arg = r->cf->max_connections;
}

START_TEST(reactor_set_config_swaps)
{
	struct config *a = unit_config(reactor_conf);
	struct config *b = unit_config("max_connections = 77;\n"
	    "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"echo\"; } );\n");
	struct reactor *r = start_reactor(0, a);
	unsigned seen = 0;

	reactor_set_config(r, b);
	reactor_post(r, cf_probe, &seen);
	reactor_stop(r);
	reactor_join(r);
	ck_assert_uint_eq(seen, 77);
	ck_assert_uint_eq(atomic_load(&a->refs), 1);
	ck_assert_uint_eq(atomic_load(&b->refs), 2);
	reactor_free(r);
	ck_assert_uint_eq(atomic_load(&b->refs), 1);
	config_unref(a);
	config_unref(b);
}
END_TEST

/* reactor_send: staged per destination, published once a turn. */
struct stage_order {
	int	seen[STAGE_N];
	int	n;
	int	cancelled;	/* runs told MAILBOX_CANCELLED */
	struct reactor *ran_on;
};

struct stage_item {
	struct mailbox_task task;
	struct stage_order *o;
	int	k;
};

static void
stage_record(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct stage_item *it = arg;

	it->o->ran_on = r;
	it->o->cancelled += st == MAILBOX_CANCELLED;
	it->o->seen[it->o->n++] = it->k;
	free(it);
}

static struct config *
two_reactor_config(void)
{
	return unit_config("dispatchers = 2;\n"
	    "listeners = ( { name = \"x\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"echo\"; } );\n");
}

/* Staged tasks wait for the publish, then run in order, on the target. */
START_TEST(test_send_publish_order)
{
	struct config *cf = two_reactor_config();
	struct reactor *a = reactor_new(0, cf), *b = reactor_new(1, cf);
	struct stage_order o = { .n = 0 };

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	for (int k = 0; k < STAGE_N; k++) {
		struct stage_item *it = calloc(1, sizeof(*it));

		it->task.fn = stage_record;
		it->task.arg = it;
		it->o = &o;
		it->k = k;
		reactor_send(a, b, &it->task);
		if (k == STAGE_N / 2) {
			/* Nothing reaches b before a publishes. */
			reactor_run_once(b, 0);
			ck_assert_int_eq(o.n, 0);
			reactor_publish(a);
		}
	}
	reactor_publish(a);
	/* Bounded: each turn drains the whole mailbox. */
	for (int i = 0; i < 10 && o.n < STAGE_N; i++)
		reactor_run_once(b, 10);
	ck_assert_int_eq(o.n, STAGE_N);
	ck_assert_ptr_eq(o.ran_on, b);
	for (int k = 0; k < STAGE_N; k++)
		ck_assert_int_eq(o.seen[k], k);
	reactor_free(a);
	reactor_free(b);
	config_unref(cf);
}
END_TEST

/* Freeing a reactor with staged tasks cancels them there; nothing leaks. */
START_TEST(test_staged_at_free)
{
	struct config *cf = two_reactor_config();
	struct reactor *a = reactor_new(0, cf), *b = reactor_new(1, cf);
	struct stage_order o = { .n = 0 };
	struct stage_item *it = calloc(1, sizeof(*it));

	it->task.fn = stage_record;
	it->task.arg = it;
	it->o = &o;
	reactor_send(a, b, &it->task);
	reactor_free(b);	/* the destination is gone first */
	reactor_free(a);
	ck_assert_int_eq(o.n, 1);
	ck_assert_int_eq(o.cancelled, 1);
	ck_assert_ptr_eq(o.ran_on, a);
	config_unref(cf);
}
END_TEST

Suite *
reactor_suite(void)
{
	Suite *s = suite_create("reactor");
	TCase *mb = tcase_create("mailbox");
	TCase *stg = tcase_create("send");

	tcase_add_test(mb, reactor_mailbox_many_producers);
	tcase_add_test(mb, reactor_post_task_embedded);
	tcase_add_test(mb, reactor_thread_names);
	tcase_add_test(mb, reactor_free_unstarted);
	tcase_add_test(mb, reactor_set_config_swaps);
	tcase_set_timeout(mb, 60);
	suite_add_tcase(s, mb);
	tcase_add_test(stg, test_send_publish_order);
	tcase_add_test(stg, test_staged_at_free);
	tcase_set_timeout(stg, 30);
	suite_add_tcase(s, stg);
	return s;
}
