/* test_store_ids.c: the waiting ids kept in memory for a store file. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "store_ids.h"

/* Slot's ids, all of them, compared with want[0..n). */
static void
expect(const struct store_ids *ids, size_t slot, const uint64_t *want,
    size_t n)
{
	uint64_t got[64];
	size_t k = store_ids_from(ids, slot, 0, got, 64);

	ck_assert_uint_eq(k, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(got[i], want[i]);
	ck_assert_uint_eq(store_ids_first(ids, slot), n ? want[0] : 0);
}

START_TEST(test_order_whatever_the_adds)
{
	struct store_ids ids = { 0 };
	static const uint64_t want[] = { 5, 10, 20, 30, 40, 50 };
	uint64_t got[4];

	store_ids_add(&ids, 3, 20);
	store_ids_add(&ids, 3, 40);
	store_ids_add(&ids, 3, 10);	/* before all */
	store_ids_add(&ids, 3, 30);	/* between */
	store_ids_add(&ids, 3, 50);
	store_ids_add(&ids, 3, 5);
	store_ids_add(&ids, 3, 30);	/* twice: once */
	expect(&ids, 3, want, 6);
	ck_assert_uint_eq(ids.count, 6);
	/* Other slots: their own, empty until given some. */
	expect(&ids, 0, NULL, 0);
	expect(&ids, 1000, NULL, 0);
	/* From after an id, up to n. */
	ck_assert_uint_eq(store_ids_from(&ids, 3, 20, got, 2), 2);
	ck_assert_uint_eq(got[0], 30);
	ck_assert_uint_eq(got[1], 40);
	ck_assert_uint_eq(store_ids_from(&ids, 3, 25, got, 4), 3);
	ck_assert_uint_eq(got[0], 30);
	ck_assert_uint_eq(store_ids_from(&ids, 3, 50, got, 4), 0);
	ck_assert_uint_eq(store_ids_from(&ids, 3, UINT64_MAX, got, 4), 0);
	store_ids_fini(&ids);
}
END_TEST

START_TEST(test_del_anywhere)
{
	struct store_ids ids = { 0 };
	static const uint64_t want[] = { 2, 4, 7, 8 };

	for (uint64_t id = 1; id <= 8; id++)
		store_ids_add(&ids, 0, id);
	ck_assert(store_ids_del(&ids, 0, 1));	/* the front */
	ck_assert(store_ids_del(&ids, 0, 3));	/* near it */
	ck_assert(store_ids_del(&ids, 0, 6));	/* near the back */
	ck_assert(store_ids_del(&ids, 0, 5));
	ck_assert(!store_ids_del(&ids, 0, 5));	/* gone already */
	ck_assert(!store_ids_del(&ids, 0, 99));
	ck_assert(!store_ids_del(&ids, 7, 2));	/* another slot's */
	expect(&ids, 0, want, 4);
	ck_assert_uint_eq(ids.count, 4);
	/* Added again where the front was taken. */
	store_ids_add(&ids, 0, 3);
	store_ids_add(&ids, 0, 1);
	{
		static const uint64_t again[] = { 1, 2, 3, 4, 7, 8 };

		expect(&ids, 0, again, 6);
	}
	store_ids_fini(&ids);
}
END_TEST

/*
 * A queue's life: many stored, delivered from the front while more come;
 * every id comes out once, in order, and the list shrinks again.
 */
START_TEST(test_fifo_many)
{
	struct store_ids ids = { 0 };
	uint64_t next_in = 1, next_out = 1, got[16];

	for (int round = 0; round < 2000; round++) {
		for (int i = 0; i < 7; i++)
			store_ids_add(&ids, 1, next_in++);
		for (int i = 0; i < (round < 1000 ? 3 : 11) &&
		    next_out < next_in; i++) {
			ck_assert_uint_eq(store_ids_first(&ids, 1), next_out);
			ck_assert(store_ids_del(&ids, 1, next_out++));
		}
	}
	while (next_out < next_in) {
		size_t k = store_ids_from(&ids, 1, next_out - 1, got, 16);

		ck_assert_uint_gt(k, 0);
		for (size_t i = 0; i < k; i++) {
			ck_assert_uint_eq(got[i], next_out);
			ck_assert(store_ids_del(&ids, 1, next_out++));
		}
	}
	ck_assert_uint_eq(ids.count, 0);
	ck_assert_uint_eq(ids.l[1].n, 0);
	ck_assert_uint_le(ids.l[1].cap, 64);	/* given back */
	store_ids_fini(&ids);
}
END_TEST

/* A transaction that does not commit leaves the lists as they were. */
START_TEST(test_undo_and_commit)
{
	struct store_ids ids = { 0 };
	static const uint64_t before[] = { 10, 20, 30 };
	static const uint64_t after[] = { 20, 25, 30 };

	store_ids_add(&ids, 2, 10);
	store_ids_add(&ids, 2, 20);
	store_ids_add(&ids, 2, 30);
	store_ids_begin(&ids);
	store_ids_add(&ids, 2, 40);
	store_ids_add(&ids, 5, 1);	/* a slot new in it */
	ck_assert(store_ids_del(&ids, 2, 10));
	ck_assert(store_ids_del(&ids, 2, 40));
	store_ids_add(&ids, 2, 15);
	ck_assert(!store_ids_del(&ids, 2, 99));
	store_ids_undo(&ids);
	expect(&ids, 2, before, 3);
	expect(&ids, 5, NULL, 0);
	ck_assert_uint_eq(ids.count, 3);
	/* Committed: kept; and nothing recorded outside a transaction. */
	store_ids_begin(&ids);
	ck_assert(store_ids_del(&ids, 2, 10));
	store_ids_add(&ids, 2, 25);
	store_ids_commit(&ids);
	store_ids_undo(&ids);
	expect(&ids, 2, after, 3);
	store_ids_fini(&ids);
}
END_TEST

/*
 * Ids older than the list's (receipts, numbered by the store) go in
 * front, ids newer at the back, a list trimmed to fit grows again: every
 * id in order.
 */
START_TEST(test_both_ends_after_trim)
{
	struct store_ids ids = { 0 };
	uint64_t got[64];
	size_t k;

	store_ids_add(&ids, 0, 100000);
	store_ids_trim(&ids);
	ck_assert_uint_eq(ids.l[0].cap, 1);
	for (uint64_t i = 1; i <= 3000; i++) {
		store_ids_add(&ids, 0, 100000 + i);	/* at the back */
		store_ids_add(&ids, 0, 100000 - i);	/* in front */
	}
	store_ids_trim(&ids);
	store_ids_add(&ids, 0, 1);
	store_ids_add(&ids, 0, 200000);
	ck_assert_uint_eq(ids.count, 6003);
	ck_assert_uint_eq(store_ids_first(&ids, 0), 1);
	k = store_ids_from(&ids, 0, 0, got, 3);
	ck_assert_uint_eq(k, 3);
	ck_assert_uint_eq(got[1], 97000);
	ck_assert_uint_eq(got[2], 97001);
	for (uint64_t after = 1, n = 1; (k = store_ids_from(&ids, 0, after,
	    got, 64)) > 0; after = got[k - 1]) {
		for (size_t i = 0; i < k; i++, n++) {
			ck_assert_uint_gt(got[i], after);
			if (i > 0)
				ck_assert_uint_gt(got[i], got[i - 1]);
		}
		if (got[k - 1] == 200000)
			ck_assert_uint_eq(n, 6003);
	}
	store_ids_fini(&ids);
}
END_TEST

Suite *
store_ids_suite(void)
{
	Suite *s = suite_create("store_ids");
	TCase *tc = tcase_create("lists");

	tcase_add_test(tc, test_order_whatever_the_adds);
	tcase_add_test(tc, test_del_anywhere);
	tcase_add_test(tc, test_fifo_many);
	tcase_add_test(tc, test_undo_and_commit);
	tcase_add_test(tc, test_both_ends_after_trim);
	suite_add_tcase(s, tc);
	return s;
}
