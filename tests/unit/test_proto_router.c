/* test_proto_router.c: the router protocol's line framer, at a guard page. */
#include <check.h>
#include <string.h>
#include <sys/types.h>

#include "config.h"
#include "helpers.h"
#include "proto.h"
#include "suites.h"

static const struct limits router_limits = { .max_line = 100 };

START_TEST(test_router_frame_bytewise)
{
	const struct proto *pr = proto_find("router");
	const char *line = "SEND bob hello there\r\n";
	size_t n = strlen(line);

	ck_assert_ptr_nonnull(pr);
	/* Fed one byte more at a time: 0 until the LF, then the length. */
	for (size_t k = 1; k <= n; k++) {
		struct unit_guard map;
		uint8_t *p = unit_guarded(line, k, &map);
		ssize_t r = pr->frame_len(p, k, &router_limits);

		ck_assert_int_eq(r, k < n ? 0 : (ssize_t)n);
		unit_guard_free(&map);
	}
}
END_TEST

START_TEST(test_router_frame_several_and_long)
{
	const struct proto *pr = proto_find("router");
	const char *two = "PING 1\nPING 2\n";
	char big[300];
	struct unit_guard map;
	uint8_t *p;

	ck_assert_int_eq(pr->frame_len((const uint8_t *)two, strlen(two),
	    &router_limits), 7);
	/* No LF within max_line + CR LF: the bytes are handed over to skip. */
	memset(big, 'x', sizeof(big));
	p = unit_guarded(big, 101, &map);
	ck_assert_int_eq(pr->frame_len(p, 101, &router_limits), 0);
	unit_guard_free(&map);
	p = unit_guarded(big, 102, &map);
	ck_assert_int_eq(pr->frame_len(p, 102, &router_limits), 102);
	unit_guard_free(&map);
	/* An LF anywhere ends the frame there, however long the line. */
	big[250] = '\n';
	ck_assert_int_eq(pr->frame_len((uint8_t *)big, sizeof(big),
	    &router_limits), 251);
	ck_assert_ptr_null(proto_find("nope"));
}
END_TEST

Suite *
proto_router_suite(void)
{
	Suite *s = suite_create("proto_router");
	TCase *tc = tcase_create("framing");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_router_frame_bytewise);
	tcase_add_test(tc, test_router_frame_several_and_long);
	suite_add_tcase(s, tc);
	return s;
}
