/* test_util.c: small helpers: u64_to_dec against snprintf, str_copy. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "suites.h"
#include "util.h"

START_TEST(test_u64_to_dec)
{
	static const struct { uint64_t v; const char *s; } cases[] = {
		{ 0, "0" }, { 7, "7" }, { 10, "10" }, { 99, "99" },
		{ 100, "100" }, { 909, "909" }, { 1000, "1000" },
		{ 1234567890, "1234567890" }, { 9999999999, "9999999999" },
		{ 1000000000000000000u, "1000000000000000000" },
		{ 9999999999999999999u, "9999999999999999999" },
		{ 10000000000000000000u, "10000000000000000000" },
		{ UINT64_MAX, "18446744073709551615" },
	};
	char buf[24];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		size_t n;

		memset(buf, 'x', sizeof(buf));
		n = u64_to_dec(buf, cases[i].v);
		ck_assert_uint_eq(n, strlen(cases[i].s));
		ck_assert(memcmp(buf, cases[i].s, n) == 0);
		ck_assert_int_eq(buf[n], 'x');
	}
	/* Every value below 10^6 against snprintf (no ck_assert per value:
	 * each one costs Check a write). */
	for (uint64_t v = 0; v < 1000000; v++) {
		char want[24];
		size_t n = u64_to_dec(buf, v);

		if (n != (size_t)snprintf(want, sizeof(want), "%llu",
		    (unsigned long long)v) || memcmp(buf, want, n) != 0)
			ck_abort_msg("u64_to_dec(%llu) wrong",
			    (unsigned long long)v);
	}
	/* Each power of ten and its neighbours (where a digit is added and
	 * where the 8-digit pieces are cut), then pseudo-random values of
	 * every length. */
	uint64_t x = 88172645463325252u, pow = 1;

	for (int k = 0; k < 40000; k++) {
		char want[24];
		uint64_t v;
		size_t n;

		if (k < 60) {
			v = pow + (uint64_t)(k % 3) - 1;
			if (k % 3 == 2 && pow <= UINT64_MAX / 10)
				pow *= 10;
		} else {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			v = x >> (x % 64);
		}
		n = u64_to_dec(buf, v);
		if (n != (size_t)snprintf(want, sizeof(want), "%llu",
		    (unsigned long long)v) || memcmp(buf, want, n) != 0)
			ck_abort_msg("u64_to_dec(%llu) wrong",
			    (unsigned long long)v);
	}
}
END_TEST

/* str_copy: the whole string when it fits, else cut; always terminated. */
START_TEST(test_str_copy)
{
	char buf[8];

	memset(buf, 'x', sizeof(buf));
	ck_assert_uint_eq(str_copy(buf, sizeof(buf), "abc"), 3);
	ck_assert_str_eq(buf, "abc");
	ck_assert_int_eq(buf[4], 'x');
	ck_assert_uint_eq(str_copy(buf, sizeof(buf), "abcdefgh"), 7);
	ck_assert_str_eq(buf, "abcdefg");
	ck_assert_uint_eq(str_copy(buf, 1, "abc"), 0);
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(str_copy(buf, sizeof(buf), ""), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

Suite *
util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("dec");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_u64_to_dec);
	tcase_add_test(tc, test_str_copy);
	suite_add_tcase(s, tc);
	return s;
}
