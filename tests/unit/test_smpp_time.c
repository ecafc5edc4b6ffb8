/* test_smpp_time.c: SMPP time strings: absolute with offsets, relative, and what is refused. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "smpp_time.h"
#include "suites.h"
#include "util.h"

/* 2026-11-24 00:00:00 UTC */
#define T0	1795478400ull

START_TEST(test_absolute)
{
	uint64_t t;

	ck_assert_int_eq(smpp_time_parse("261124000000000+", 0, &t), 0);
	ck_assert_uint_eq(t, T0);
	/* 12:30 local, 4 quarter hours ahead of UTC: 11:30 UTC. */
	ck_assert_int_eq(smpp_time_parse("261124123000504+", 0, &t), 0);
	ck_assert_uint_eq(t, T0 + 11 * 3600 + 30 * 60);
	/* 12:30 local, 22 quarter hours behind UTC (-05:30): 18:00 UTC. */
	ck_assert_int_eq(smpp_time_parse("261124123000022-", 0, &t), 0);
	ck_assert_uint_eq(t, T0 + 18 * 3600);
	/* A leap day, and the tenths are ignored. */
	ck_assert_int_eq(smpp_time_parse("280229000000900+", 0, &t), 0);
	ck_assert_uint_eq(t, 1835395200ull);
	/* Nothing given: no time. */
	t = 5;
	ck_assert_int_eq(smpp_time_parse("", 0, &t), 0);
	ck_assert_uint_eq(t, 0);
}
END_TEST

START_TEST(test_relative)
{
	uint64_t t;

	ck_assert_int_eq(smpp_time_parse("000000000010000R", T0, &t), 0);
	ck_assert_uint_eq(t, T0 + 10);
	ck_assert_int_eq(smpp_time_parse("000002010203000R", T0, &t), 0);
	ck_assert_uint_eq(t, T0 + 2 * 86400 + 3600 + 2 * 60 + 3);
	/* Months by the calendar: 2026-11-24 + 3 months = 2027-02-24. */
	ck_assert_int_eq(smpp_time_parse("000300000000000R", T0, &t), 0);
	ck_assert_uint_eq(t, 1803427200ull);
	/* A year on from 2026-11-24. */
	ck_assert_int_eq(smpp_time_parse("010000000000000R", T0, &t), 0);
	ck_assert_uint_eq(t, T0 + 365 * 86400);
}
END_TEST

START_TEST(test_refused)
{
	static const char *const bad[] = {
		"garbage",			/* length */
		"26112400000000+",		/* 15 characters */
		"2611240000000000+",		/* 17 */
		"261324000000000+",		/* month 13 */
		"261100000000000+",		/* day 0 */
		"261131000000000+",		/* 31 November */
		"270229000000000+",		/* 29 February, not a leap year */
		"261124240000000+",		/* hour 24 */
		"261124006000000+",		/* minute 60 */
		"261124000060000+",		/* second 60 */
		"261124000000049+",		/* 49 quarter hours */
		"261124000000000X",		/* neither +, - nor R */
		"2611240000a0000+",		/* not a digit */
		"000000000010100R",		/* relative with tnn */
		"000000000010001R",
	};
	uint64_t t;

	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		ck_assert_msg(smpp_time_parse(bad[i], T0, &t) < 0,
		    "\"%s\" was taken", bad[i]);
}
END_TEST

START_TEST(test_format)
{
	char out[17];
	uint64_t t;

	smpp_time_format(T0 + 3723, out);
	ck_assert_str_eq(out, "261124010203000+");
	ck_assert_int_eq(smpp_time_parse(out, 0, &t), 0);
	ck_assert_uint_eq(t, T0 + 3723);
	smpp_time_format(0, out);
	ck_assert_str_eq(out, "");
}
END_TEST

Suite *
smpp_time_suite(void)
{
	Suite *s = suite_create("smpp_time");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_absolute);
	tcase_add_test(tc, test_relative);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_format);
	suite_add_tcase(s, tc);
	return s;
}
