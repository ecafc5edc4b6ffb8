/* test_route.c: the route table, prefix routes, and the router's line framer. */
#include <check.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "proto.h"
#include "deliver.h"
#include "route.h"
#include "suites.h"
#include "util.h"

static struct route_owner
owner(uint32_t r, uint32_t slot, uint32_t gen)
{
	return route_owner_conn((struct conn_handle){ .reactor = r,
	    .slot = slot, .gen = gen });
}

START_TEST(test_addr_valid)
{
	char long_addr[ROUTE_ADDR_MAX + 2];

	ck_assert(route_addr_valid("alice", 5));
	ck_assert(route_addr_valid("+351912345678", 13));
	ck_assert(route_addr_valid("a.b_c:d@e-f", 11));
	ck_assert(!route_addr_valid("", 0));
	ck_assert(!route_addr_valid("a b", 3));
	ck_assert(!route_addr_valid("a/b", 3));
	ck_assert(!route_addr_valid("a\0b", 3));
	ck_assert(!route_addr_valid("a\x80", 2));
	ck_assert(!route_addr_valid("\xc3\xa9", 2));
	memset(long_addr, 'x', sizeof(long_addr));
	ck_assert(route_addr_valid(long_addr, ROUTE_ADDR_MAX));
	ck_assert(!route_addr_valid(long_addr, ROUTE_ADDR_MAX + 1));
}
END_TEST

START_TEST(test_claim_lookup_release)
{
	struct route_owner a = owner(1, 2, 3), b = owner(1, 2, 4), got;

	ck_assert(!route_lookup("t-alice", &got));
	ck_assert_int_eq(route_claim("t-alice", &a), 0);
	ck_assert_int_eq(route_claim("t-alice", &b), -1);
	ck_assert(route_lookup("t-alice", &got));
	ck_assert_uint_eq(got.conn.reactor, 1);
	ck_assert_uint_eq(got.conn.slot, 2);
	ck_assert_uint_eq(got.conn.gen, 3);
	/* A stale owner (another generation) cannot release it. */
	route_release("t-alice", &b);
	ck_assert(route_lookup("t-alice", &got));
	route_release("t-alice", &a);
	ck_assert(!route_lookup("t-alice", &got));
	ck_assert_int_eq(route_claim("t-alice", &b), 0);
	route_release("t-alice", &b);
}
END_TEST

START_TEST(test_many_addresses)
{
	char name[32];
	struct route_owner got;

	for (uint32_t i = 0; i < 20000; i++) {
		struct route_owner o = owner(i % 7, i, i * 3);

		snprintf(name, sizeof(name), "many-%u", i);
		ck_assert_int_eq(route_claim(name, &o), 0);
	}
	for (uint32_t i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "many-%u", i);
		ck_assert(route_lookup(name, &got));
		ck_assert_uint_eq(got.conn.slot, i);
		ck_assert_uint_eq(got.conn.gen, i * 3);
	}
	for (uint32_t i = 0; i < 20000; i++) {
		struct route_owner o = owner(i % 7, i, i * 3);

		snprintf(name, sizeof(name), "many-%u", i);
		route_release(name, &o);
		ck_assert(!route_lookup(name, &got));
	}
}
END_TEST

#define RACERS 8

struct race {
	pthread_barrier_t *start;
	unsigned id;
	int	wins;
};

static void *
race_main(void *arg)
{
	struct race *rc = arg;
	char name[32];

	pthread_barrier_wait(rc->start);
	for (int i = 0; i < 2000; i++) {
		struct route_owner o = owner(rc->id, (uint32_t)i, 1);

		snprintf(name, sizeof(name), "race-%d", i);
		if (route_claim(name, &o) == 0)
			rc->wins++;
	}
	return NULL;
}

/* Claims are atomic: of many threads claiming one address, one wins. */
START_TEST(test_claim_race)
{
	pthread_t t[RACERS];
	struct race rc[RACERS];
	pthread_barrier_t start;
	struct route_owner got;
	char name[32];
	int wins = 0;

	pthread_barrier_init(&start, NULL, RACERS);
	for (unsigned i = 0; i < RACERS; i++) {
		rc[i] = (struct race){ &start, i, 0 };
		pthread_create(&t[i], NULL, race_main, &rc[i]);
	}
	for (unsigned i = 0; i < RACERS; i++) {
		pthread_join(t[i], NULL);
		wins += rc[i].wins;
	}
	ck_assert_int_eq(wins, 2000);
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "race-%d", i);
		ck_assert(route_lookup(name, &got));
		route_release(name, &got);
	}
	pthread_barrier_destroy(&start);
}
END_TEST

START_TEST(test_resolve_longest_prefix)
{
	struct config *cf = unit_config(
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"router\"; } );\n"
	    "routes = ( { prefix = \"+351\"; to = \"gw-pt\"; },\n"
	    "  { prefix = \"+35191\"; to = \"gw-voda\"; },\n"
	    "  { prefix = \"+44\"; to = \"gw-uk\"; } );\n");
	struct route_owner pt = owner(0, 1, 1), voda = owner(1, 2, 2);
	struct route_owner direct = owner(2, 3, 3), got;
	const char *to;

	ck_assert_int_eq(route_claim("gw-pt", &pt), 0);
	ck_assert_int_eq(route_claim("gw-voda", &voda), 0);
	to = route_resolve(cf, "+351210000000", false, &got);
	ck_assert_ptr_nonnull(to);
	ck_assert_str_eq(to, "gw-pt");
	ck_assert_uint_eq(got.conn.reactor, 0);
	to = route_resolve(cf, "+351912345678", false, &got);
	ck_assert_ptr_nonnull(to);
	ck_assert_str_eq(to, "gw-voda");
	/* A route to nobody logged in is no route. */
	ck_assert_ptr_null(route_resolve(cf, "+447700900123", false, &got));
	ck_assert_ptr_null(route_resolve(cf, "+1555", false, &got));
	/* Someone logged in with the very address beats any prefix. */
	ck_assert_int_eq(route_claim("+351912345678", &direct), 0);
	to = route_resolve(cf, "+351912345678", false, &got);
	ck_assert_str_eq(to, "+351912345678");
	ck_assert_uint_eq(got.conn.reactor, 2);
	route_release("+351912345678", &direct);
	route_release("gw-pt", &pt);
	route_release("gw-voda", &voda);
	config_unref(cf);
}
END_TEST

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

/* Not calloc, so on memory just freed dirty, as malloc often hands back. */
START_TEST(test_route_msg_new_clean)
{
	static const struct deliver_msg zero;
	enum { LEN = 64 };

	for (int i = 0; i < 8; i++) {
		size_t n = sizeof(struct deliver_msg) + LEN + 1;
		struct deliver_msg *m;
		void *dirty = xmalloc(n);

		memset(dirty, 0xAA, n);
		free(dirty);
		m = deliver_msg_new(LEN);
		ck_assert(memcmp(m, &zero, offsetof(struct deliver_msg,
		    src_addr)) == 0);
		ck_assert_str_eq(m->src_addr, "");
		ck_assert_str_eq(m->dst_addr, "");
		ck_assert_str_eq(m->reply_to, "");
		ck_assert_str_eq(m->receipted_id, "");
		ck_assert_str_eq(m->from, "");
		ck_assert_str_eq(m->to, "");
		ck_assert_uint_eq(m->len, 0);
		ck_assert_int_eq(m->text[LEN], '\0');
		ck_assert_uint_eq(deliver_msg_size(m), sizeof(*m) + 1);
		free(m);
	}
}
END_TEST

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
}
END_TEST

Suite *
route_suite(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("table");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_addr_valid);
	tcase_add_test(tc, test_claim_lookup_release);
	tcase_add_test(tc, test_many_addresses);
	tcase_add_test(tc, test_claim_race);
	tcase_add_test(tc, test_resolve_longest_prefix);
	tcase_add_test(tc, test_u64_to_dec);
	tcase_add_test(tc, test_route_msg_new_clean);
	suite_add_tcase(s, tc);
	tc = tcase_create("framing");
	tcase_add_test(tc, test_router_frame_bytewise);
	tcase_add_test(tc, test_router_frame_several_and_long);
	suite_add_tcase(s, tc);
	return s;
}
