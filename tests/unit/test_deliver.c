/*
 * test_deliver.c: messages on their way: a new one is clean on dirty
 * memory; the low bits of ids, as a cluster hands them out.
 */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "deliver.h"
#include "suites.h"
#include "util.h"

/* Not calloc, so on memory just freed dirty, as malloc often hands back. */
START_TEST(test_deliver_msg_new_clean)
{
	static const struct msg zero;
	enum { LEN = 64 };

	for (int i = 0; i < 8; i++) {
		size_t n = sizeof(struct msg) + LEN + 1;
		struct msg *m;
		void *dirty = xmalloc(n);

		memset(dirty, 0xAA, n);
		free(dirty);
		m = msg_new(LEN);
		ck_assert(memcmp(m, &zero, offsetof(struct msg,
		    src_addr)) == 0);
		ck_assert_str_eq(m->src_addr, "");
		ck_assert_str_eq(m->dst_addr, "");
		ck_assert_str_eq(m->reply_to, "");
		ck_assert_str_eq(m->receipted_id, "");
		ck_assert_str_eq(m->from, "");
		ck_assert_str_eq(m->to, "");
		ck_assert_uint_eq(m->len, 0);
		ck_assert_int_eq(m->text[LEN], '\0');
		ck_assert_uint_eq(msg_size(m), sizeof(*m) + 1);
		free(m);
	}
}
END_TEST

/* Own numbers until a slot is set; a slot set is what ids end in. */
START_TEST(test_deliver_id_low)
{
	ck_assert_uint_eq(msg_id_low(0), 0);
	ck_assert_uint_eq(msg_id_low(5), 5);
	ck_assert_uint_eq(msg_id_low(MSG_ID_STORE), 1023);
	msg_set_id_low(5, 700);
	msg_set_id_low(MSG_ID_STORE, 12);
	ck_assert_uint_eq(msg_id_low(5), 700);
	ck_assert_uint_eq(msg_id_low(MSG_ID_STORE), 12);
	ck_assert_uint_eq(msg_id_low(4), 4);
	/* Out of range: ignored. */
	msg_set_id_low(4, 1024);
	msg_set_id_low(1024, 3);
	ck_assert_uint_eq(msg_id_low(4), 4);
	msg_set_id_low(0, 0);
	ck_assert_uint_eq(msg_id_low(0), 0);
	msg_set_id_low(5, 5);
	msg_set_id_low(MSG_ID_STORE, MSG_ID_STORE);
}
END_TEST

Suite *
deliver_suite(void)
{
	Suite *s = suite_create("deliver");
	TCase *tc = tcase_create("msg");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_deliver_msg_new_clean);
	tcase_add_test(tc, test_deliver_id_low);
	suite_add_tcase(s, tc);
	return s;
}
