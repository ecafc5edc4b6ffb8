/* test_cluster_seen.c: copies of ids taken from other nodes are known; memory stays fixed. */
#include <check.h>
#include <stdint.h>

#include "../../src/cluster_seen.h"
#include "suites.h"

/* A copy is known, pending or taken; other ids are new. */
START_TEST(seen_knows_copies)
{
	struct cluster_seen *t = cluster_seen_new(64);

	ck_assert_int_eq(cluster_seen_add(t, 1025), CLUSTER_SEEN_NEW);
	ck_assert_int_eq(cluster_seen_add(t, 1025), CLUSTER_SEEN_PENDING);
	/* Another slot's id, with the same sequence: another message. */
	ck_assert_int_eq(cluster_seen_add(t, 1026), CLUSTER_SEEN_NEW);
	ck_assert_int_eq(cluster_seen_add(t, 2049), CLUSTER_SEEN_NEW);
	cluster_seen_settle(t, 1025, true);
	ck_assert_int_eq(cluster_seen_add(t, 1025), CLUSTER_SEEN_TAKEN);
	/* Settled once: a later verdict does not undo it. */
	cluster_seen_settle(t, 1025, false);
	ck_assert_int_eq(cluster_seen_add(t, 1025), CLUSTER_SEEN_TAKEN);
	cluster_seen_settle(t, 7, true);	/* unknown: ignored */
	ck_assert_int_eq(cluster_seen_add(t, 7), CLUSTER_SEEN_NEW);
	cluster_seen_free(t);
}
END_TEST

/* Refused (no route, busy): it may come again, and is then new. */
START_TEST(seen_forgets_refused)
{
	struct cluster_seen *t = cluster_seen_new(8);

	ck_assert_int_eq(cluster_seen_add(t, 42), CLUSTER_SEEN_NEW);
	cluster_seen_settle(t, 42, false);
	ck_assert_int_eq(cluster_seen_add(t, 42), CLUSTER_SEEN_NEW);
	ck_assert_int_eq(cluster_seen_add(t, 42), CLUSTER_SEEN_PENDING);
	cluster_seen_free(t);
}
END_TEST

/*
 * The newest cap ids are kept, in fixed memory, whatever comes: many
 * times the table's size, with ids that collide in its buckets.
 */
START_TEST(seen_keeps_the_newest)
{
	enum { CAP = 256, N = 100 * CAP };
	struct cluster_seen *t = cluster_seen_new(CAP);

	for (uint64_t i = 0; i < N; i++) {
		uint64_t id = i << 20 | 5;

		ck_assert_int_eq(cluster_seen_add(t, id), CLUSTER_SEEN_NEW);
		if (i % 3 != 0)
			cluster_seen_settle(t, id, i % 3 == 1);
	}
	for (uint64_t i = N - CAP; i < N; i++) {
		enum cluster_seen_result r = cluster_seen_add(t, i << 20 | 5);

		/* Each of the newest as settled; the table is full now. */
		if (i % 3 == 0)
			ck_assert_int_eq(r, CLUSTER_SEEN_PENDING);
		else if (i % 3 == 1)
			ck_assert_int_eq(r, CLUSTER_SEEN_TAKEN);
		else
			ck_assert_int_eq(r, CLUSTER_SEEN_NEW);
	}
	/* Older than the newest cap: forgotten, new again. */
	ck_assert_int_eq(cluster_seen_add(t, (uint64_t)1 << 20 | 5),
	    CLUSTER_SEEN_NEW);
	cluster_seen_free(t);
}
END_TEST

Suite *
cluster_seen_suite(void)
{
	Suite *s = suite_create("cluster_seen");
	TCase *tc = tcase_create("seen");

	tcase_add_test(tc, seen_knows_copies);
	tcase_add_test(tc, seen_forgets_refused);
	tcase_add_test(tc, seen_keeps_the_newest);
	suite_add_tcase(s, tc);
	return s;
}
