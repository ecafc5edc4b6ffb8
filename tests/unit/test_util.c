/*
 * test_util.c: small helpers: u64_to_dec against snprintf, str_copy, spares
 * (and the messages a reactor keeps as spares).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "msg.h"
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

/*
 * Spares come back zeroed whatever was left in them, at most SPARES_MAX
 * are kept (the rest are freed: ASan's leak check sees any lost), and
 * draining frees them all.
 */
START_TEST(test_spares)
{
	struct spares s = { 0 };
	unsigned char *p[SPARES_MAX + 8];
	unsigned char zero[96] = { 0 };

	for (size_t i = 0; i < ARRAY_LEN(p); i++) {
		p[i] = spares_get(&s, sizeof(zero));
		ck_assert(memcmp(p[i], zero, sizeof(zero)) == 0);
		memset(p[i], 0xA5, sizeof(zero));
	}
	ck_assert_uint_eq(s.n, 0);
	for (size_t i = 0; i < ARRAY_LEN(p); i++)
		spares_put(&s, p[i]);
	ck_assert_uint_eq(s.n, SPARES_MAX);
	/* Taken back last in, first out: the one put last of those kept. */
	p[0] = spares_get(&s, sizeof(zero));
	ck_assert(p[0] == p[SPARES_MAX - 1]);
	ck_assert(memcmp(p[0], zero, sizeof(zero)) == 0);
	ck_assert_uint_eq(s.n, SPARES_MAX - 1);
	spares_put(&s, p[0]);
	spares_put(&s, NULL);
	ck_assert_uint_eq(s.n, SPARES_MAX);
	spares_drain(&s);
	ck_assert_uint_eq(s.n, 0);
	ck_assert(s.head == NULL);
	/* Empty: a new one. */
	p[0] = spares_get(&s, sizeof(zero));
	ck_assert(memcmp(p[0], zero, sizeof(zero)) == 0);
	spares_put(&s, p[0]);
	spares_drain(&s);
}
END_TEST

/*
 * A trim frees the spares that no get needed since the one before: ten
 * kept, three taken and put back, then seven go; with no get at all, the
 * rest. Nothing is lost (ASan's leak check) and the count stays true.
 */
START_TEST(test_spares_trim)
{
	struct spares s = { 0 };
	void *p[10];

	for (size_t i = 0; i < ARRAY_LEN(p); i++)
		p[i] = spares_get(&s, 64);
	for (size_t i = 0; i < ARRAY_LEN(p); i++)
		spares_put(&s, p[i]);
	spares_trim(&s);	/* the first: none were kept before it */
	ck_assert_uint_eq(s.n, 10);
	for (size_t i = 0; i < 3; i++)
		p[i] = spares_get(&s, 64);
	for (size_t i = 0; i < 3; i++)
		spares_put(&s, p[i]);
	spares_trim(&s);
	ck_assert_uint_eq(s.n, 3);
	/* Taken and put back between trims, one is needed: it stays. */
	spares_put(&s, spares_get(&s, 64));
	spares_trim(&s);
	ck_assert_uint_eq(s.n, 1);
	spares_trim(&s);
	ck_assert_uint_eq(s.n, 0);
	ck_assert(s.head == NULL);
	p[0] = spares_get(&s, 64);
	spares_put(&s, p[0]);
	spares_drain(&s);
	ck_assert_uint_eq(s.n, 0);
}
END_TEST

/*
 * On a thread with message spares (a reactor's): a message freed comes
 * back for the next one, its numbers zeroed and strings empty again
 * (poisoned meanwhile under ASan); a copy is a copy; one too big to keep
 * (a long text's) or too small to serve (made without spares) is freed.
 */
START_TEST(test_msg_spares)
{
	struct spares s = { 0 };
	struct msg *a, *b, *c, *big, *plain;

	msg_spares_use(&s);
	a = msg_new(10);
	a->id = 42;
	a->flags = 0xff;
	str_copy(a->to, sizeof(a->to), "+351");
	memcpy(a->text, "0123456789", 10);
	a->len = 10;
	msg_free(a);
	ck_assert_uint_eq(s.n, 1);
#if defined(__SANITIZE_ADDRESS__)
	ck_assert(__asan_address_is_poisoned(&a->id));
#endif
	b = msg_new(20);
	ck_assert(b == a);
	ck_assert_uint_eq(s.n, 0);
	ck_assert_uint_eq(b->id, 0);
	ck_assert_uint_eq(b->flags, 0);
	ck_assert_str_eq(b->to, "");
	ck_assert_uint_eq(b->len, 0);
	ck_assert_uint_eq(b->text[20], 0);
	memcpy(b->text, "abcdefghijklmnopqrst", 20);
	b->len = 20;
	c = msg_dup(b);
	ck_assert(c != b);
	ck_assert(memcmp(c, b, msg_size(b)) == 0);
	msg_free(b);
	msg_free(c);
	ck_assert_uint_eq(s.n, 2);
	big = msg_new(4000);
	msg_free(big);
	ck_assert_uint_eq(s.n, 2);
	big = msg_new(1000);	/* a long line's: no get would take it */
	msg_free(big);
	ck_assert_uint_eq(s.n, 2);
	msg_spares_use(NULL);
	plain = msg_new(1);
	msg_spares_use(&s);
	msg_free(plain);
	ck_assert_uint_eq(s.n, 2);
	msg_free(NULL);
	msg_spares_use(NULL);
	spares_drain(&s);
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
	tcase_add_test(tc, test_spares);
	tcase_add_test(tc, test_spares_trim);
	tcase_add_test(tc, test_msg_spares);
	suite_add_tcase(s, tc);
	return s;
}
