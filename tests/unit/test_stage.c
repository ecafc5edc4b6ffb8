/* test_stage.c: reactor_send stages envelopes per destination, published once a turn. */
#include <check.h>
#include <stdlib.h>

#include "config.h"
#include "helpers.h"
#include "reactor.h"
#include "suites.h"

#define STAGE_N 1000

struct order {
	int	seen[STAGE_N];
	int	n;
	struct reactor *ran_on;
};

struct item {
	struct reactor_task task;
	struct order *o;
	int	k;
};

static void
record(struct reactor *r, void *arg)
{
	struct item *it = arg;

	it->o->ran_on = r;
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
	struct order o = { .n = 0 };

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	for (int k = 0; k < STAGE_N; k++) {
		struct item *it = calloc(1, sizeof(*it));

		it->task.fn = record;
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

/* Freeing a reactor with staged tasks runs them there; nothing leaks. */
START_TEST(test_staged_at_free)
{
	struct config *cf = two_reactor_config();
	struct reactor *a = reactor_new(0, cf), *b = reactor_new(1, cf);
	struct order o = { .n = 0 };
	struct item *it = calloc(1, sizeof(*it));

	it->task.fn = record;
	it->task.arg = it;
	it->o = &o;
	reactor_send(a, b, &it->task);
	reactor_free(b);	/* the destination is gone first */
	reactor_free(a);
	ck_assert_int_eq(o.n, 1);
	ck_assert_ptr_eq(o.ran_on, a);
	config_unref(cf);
}
END_TEST

Suite *
stage_suite(void)
{
	Suite *s = suite_create("stage");
	TCase *tc = tcase_create("send");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_send_publish_order);
	tcase_add_test(tc, test_staged_at_free);
	suite_add_tcase(s, tc);
	return s;
}
