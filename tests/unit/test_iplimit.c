/* test_iplimit.c: per-address connection counts and rates. */
#include <arpa/inet.h>
#include <check.h>
#include <string.h>

#include "iplimit.h"
#include "suites.h"

static struct sockaddr_in
v4(const char *addr)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sa.sin_addr);
	return sa;
}

START_TEST(test_off_admits_everything)
{
	struct iplimit *t = iplimit_new();
	struct sockaddr_in a = v4("127.0.0.1");
	struct iplimit_entry *e;

	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&a, 0, 0,
		    1000, &e), IPLIMIT_OK);
		ck_assert_ptr_null(e);
	}
	ck_assert_uint_eq(iplimit_count(t), 0);
	iplimit_free(t);
}
END_TEST

START_TEST(test_max_per_address)
{
	struct iplimit *t = iplimit_new();
	struct sockaddr_in a = v4("127.0.0.1"), b = v4("127.0.0.2");
	struct iplimit_entry *e[4], *f;

	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&a, 3, 0,
		    1000, &e[i]), IPLIMIT_OK);
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&a, 3, 0, 1000,
	    &e[3]), IPLIMIT_TOO_MANY);
	ck_assert_ptr_null(e[3]);
	/* Another address has its own count. */
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&b, 3, 0, 1000,
	    &f), IPLIMIT_OK);
	/* One leaves: one more may come. */
	iplimit_release(e[0]);
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&a, 3, 0, 1000,
	    &e[0]), IPLIMIT_OK);
	ck_assert_uint_eq(iplimit_count(t), 2);
	/* Entries with connections survive GC; without, they go. */
	iplimit_gc(t, 0, 2000);
	ck_assert_uint_eq(iplimit_count(t), 2);
	iplimit_release(f);
	iplimit_gc(t, 0, 2000);
	ck_assert_uint_eq(iplimit_count(t), 1);
	for (int i = 0; i < 3; i++)
		iplimit_release(e[i]);
	iplimit_gc(t, 0, 2000);
	ck_assert_uint_eq(iplimit_count(t), 0);
	iplimit_free(t);
}
END_TEST

START_TEST(test_rate_per_address)
{
	struct iplimit *t = iplimit_new();
	struct sockaddr_in a = v4("10.0.0.1");
	struct iplimit_entry *e;
	int ok = 0;

	/* A burst of one second's worth, then nothing until it refills. */
	for (int i = 0; i < 20; i++)
		if (iplimit_admit(t, (struct sockaddr *)&a, 0, 5, 1000, &e) ==
		    IPLIMIT_OK) {
			ok++;
			iplimit_release(e);
		}
	ck_assert_int_eq(ok, 5);
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&a, 0, 5, 1100,
	    &e), IPLIMIT_TOO_FAST);
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&a, 0, 5, 1200,
	    &e), IPLIMIT_OK);	/* 200 ms at 5/s: one token */
	iplimit_release(e);
	/* GC keeps an entry until its bucket is full again. */
	iplimit_gc(t, 5, 1300);
	ck_assert_uint_eq(iplimit_count(t), 1);
	iplimit_gc(t, 5, 3000);
	ck_assert_uint_eq(iplimit_count(t), 0);
	iplimit_free(t);
}
END_TEST

START_TEST(test_ipv6_and_mapped)
{
	struct iplimit *t = iplimit_new();
	struct sockaddr_in6 s6;
	struct sockaddr_in s4 = v4("192.0.2.1");
	struct iplimit_entry *e1, *e2, *e3;

	memset(&s6, 0, sizeof(s6));
	s6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "::ffff:192.0.2.1", &s6.sin6_addr);
	/* An IPv4 client and its v4-mapped form are one address. */
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&s4, 1, 0, 0,
	    &e1), IPLIMIT_OK);
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&s6, 1, 0, 0,
	    &e2), IPLIMIT_TOO_MANY);
	inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
	ck_assert_int_eq(iplimit_admit(t, (struct sockaddr *)&s6, 1, 0, 0,
	    &e3), IPLIMIT_OK);
	iplimit_release(e1);
	iplimit_release(e3);
	iplimit_free(t);
}
END_TEST

Suite *
iplimit_suite(void)
{
	Suite *s = suite_create("iplimit");
	TCase *tc = tcase_create("limits");

	tcase_add_test(tc, test_off_admits_everything);
	tcase_add_test(tc, test_max_per_address);
	tcase_add_test(tc, test_rate_per_address);
	tcase_add_test(tc, test_ipv6_and_mapped);
	suite_add_tcase(s, tc);
	return s;
}
