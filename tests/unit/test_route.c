/* test_route.c: the address table (claim, join, release) and prefix routes. */
#include <check.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
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
	/* Every byte: the letters, digits and + . _ : @ - only. */
	for (unsigned c = 0; c < 256; c++) {
		const char one[2] = { 'a', (char)c };
		bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("+._:@-", (int)c) != NULL;

		ck_assert_msg(route_addr_valid(one, 2) == (want && c != 0),
		    "byte 0x%02x", c);
	}
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

/* The longest prefix of the routes addr starts with, by a walk. */
static const struct route_conf *
longest_by_walk(const struct config *cf, const char *addr)
{
	const struct route_conf *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < cf->nroutes; i++) {
		size_t n = strlen(cf->routes[i].prefix);

		if (n > best_len &&
		    strncmp(addr, cf->routes[i].prefix, n) == 0) {
			best = &cf->routes[i];
			best_len = n;
		}
	}
	return best;
}

/*
 * 600 routes with prefixes of 1 to 9 characters, many inside others (an
 * alphabet of four): the index gives the route a walk along them gives,
 * for addresses of every length, including the prefixes themselves, a
 * character short of them, and one that none starts.
 */
START_TEST(test_prefix_index_as_walk)
{
	enum { NROUTES = 600, NADDRS = 4000 };
	static const char alpha[] = "+019";
	static char prefixes[NROUTES][16];
	size_t cap = 256 + NROUTES * 64, len = 0;
	char *text = malloc(cap), addr[CONFIG_ADDR_MAX + 1];
	unsigned seed = 7, made = 0, hits = 0;
	struct config *cf;

	ck_assert_ptr_nonnull(text);
	len += (size_t)snprintf(text + len, cap - len, "listeners = ( { name "
	    "= \"r\"; address = \"127.0.0.1\"; port = 0; protocol = "
	    "\"router\"; } );\nroutes = (\n");
	while (made < NROUTES) {
		unsigned n = 1 + (seed = seed * 1103515245u + 12345u) % 9;
		bool again = false;

		for (unsigned i = 0; i < n; i++)
			prefixes[made][i] = alpha[(seed = seed * 1103515245u +
			    12345u) >> 16 & 3];
		prefixes[made][n] = '\0';
		/* (A prefix given twice is refused: each once.) */
		for (unsigned i = 0; i < made && !again; i++)
			again = strcmp(prefixes[i], prefixes[made]) == 0;
		if (again)
			continue;
		len += (size_t)snprintf(text + len, cap - len,
		    "%s{ prefix = \"%s\"; to = \"gw%u\"; }", made ? ",\n" : "",
		    prefixes[made], made);
		made++;
	}
	snprintf(text + len, cap - len, "\n);\n");
	cf = unit_config(text);
	ck_assert_uint_eq(cf->nroutes, NROUTES);
	for (unsigned k = 0; k < NADDRS; k++) {
		unsigned n = (seed = seed * 1103515245u + 12345u) % 14;

		if (k % 4 == 0) {
			/* A route's prefix, whole or a character short. */
			const char *p = cf->routes[k % NROUTES].prefix;

			snprintf(addr, sizeof(addr), "%.*s", (int)(strlen(p) -
			    (k % 8 == 0)), p);
		} else {
			for (unsigned i = 0; i < n; i++)
				addr[i] = alpha[(seed = seed * 1103515245u +
				    12345u) >> 16 & 3];
			addr[n] = '\0';
			if (k % 4 == 1 && n > 0)
				addr[0] = '7';	/* no prefix starts so */
		}
		ck_assert_ptr_eq(route_conf_by_prefix(cf, addr),
		    longest_by_walk(cf, addr));
		hits += route_conf_by_prefix(cf, addr) != NULL;
	}
	/* (Most of them are found: not a test of NULL against NULL.) */
	ck_assert_uint_gt(hits, NADDRS / 2);
	/* Longer than any address of a route, and 64 long. */
	memset(addr, '1', CONFIG_ADDR_MAX);
	addr[CONFIG_ADDR_MAX] = '\0';
	ck_assert_ptr_eq(route_conf_by_prefix(cf, addr),
	    longest_by_walk(cf, addr));
	config_unref(cf);
	free(text);
}
END_TEST

/* A prefix given twice is an error naming the first one's line. */
START_TEST(test_prefix_twice_refused)
{
	char path[256], *errors = NULL;
	struct config *cf = unit_config_load(
	    "routes = (\n  { prefix = \"+351\"; to = \"a\"; },\n"
	    "  { prefix = \"+44\"; to = \"b\"; },\n"
	    "  { prefix = \"+351\"; to = \"c\"; }\n);\n"
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; port = "
	    "0; protocol = \"router\"; } );\n", path, sizeof(path), &errors);

	ck_assert_ptr_null(cf);
	ck_assert_ptr_nonnull(errors);
	ck_assert_ptr_nonnull(strstr(errors,
	    "route prefix \"+351\" is already used on line 2"));
	free(errors);
}
END_TEST

/* Owners sharing an address (route_join) are looked up in turn. */
START_TEST(test_join_shared_in_turn)
{
	struct route_owner o[3] = { owner(0, 1, 1), owner(1, 5, 2),
	    owner(2, 9, 3) }, got;
	unsigned seen[3] = { 0, 0, 0 };

	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(route_join("t-shared", &o[i]), 0);
	/* Every three lookups take each owner once. */
	for (unsigned round = 0; round < 4; round++) {
		bool in_round[3] = { false, false, false };

		for (unsigned k = 0; k < 3; k++) {
			ck_assert(route_lookup("t-shared", &got));
			for (unsigned i = 0; i < 3; i++)
				if (route_owner_eq(&got, &o[i])) {
					ck_assert_msg(!in_round[i], "owner %u "
					    "twice in round %u", i, round);
					in_round[i] = true;
					seen[i]++;
				}
		}
	}
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_eq(seen[i], 4);
	/* One leaves: the other two alternate. */
	route_release("t-shared", &o[1]);
	for (unsigned k = 0; k < 4; k++) {
		struct route_owner next;

		ck_assert(route_lookup("t-shared", &got));
		ck_assert(!route_owner_eq(&got, &o[1]));
		ck_assert(route_lookup("t-shared", &next));
		ck_assert(!route_owner_eq(&got, &next));
	}
	route_release("t-shared", &o[0]);
	ck_assert(route_lookup("t-shared", &got));
	ck_assert(route_owner_eq(&got, &o[2]));
	ck_assert(route_lookup("t-shared", &got));
	ck_assert(route_owner_eq(&got, &o[2]));
	route_release("t-shared", &o[2]);
	ck_assert(!route_lookup("t-shared", &got));
}
END_TEST

/* An address is held alone or shared, never both. */
START_TEST(test_claim_and_join_exclude)
{
	struct route_owner a = owner(0, 1, 1), b = owner(1, 2, 1), got;

	ck_assert_int_eq(route_join("t-sh", &a), 0);
	ck_assert_int_eq(route_claim("t-sh", &b), -1);
	ck_assert_int_eq(route_claim("t-sh", &a), -1);
	ck_assert_int_eq(route_join("t-sh", &b), 0);
	ck_assert_int_eq(route_claim("t-one", &a), 0);
	ck_assert_int_eq(route_join("t-one", &b), -1);
	ck_assert_int_eq(route_join("t-one", &a), -1);
	ck_assert(route_lookup("t-one", &got));
	ck_assert(route_owner_eq(&got, &a));
	ck_assert(route_lookup("t-one", &got));
	ck_assert(route_owner_eq(&got, &a));
	route_release("t-one", &a);
	route_release("t-sh", &a);
	route_release("t-sh", &b);
	ck_assert(!route_lookup("t-one", &got));
	ck_assert(!route_lookup("t-sh", &got));
}
END_TEST

static unsigned watched;
static char watched_addr[ROUTE_ADDR_MAX + 1];

static void
watch(const char *addr)
{
	watched++;
	snprintf(watched_addr, sizeof(watched_addr), "%s", addr);
}

/*
 * A pending claim (a LOGIN the cluster is asked about) keeps others out,
 * but nobody finds it, and the watcher hears of it, only once confirmed;
 * one given up unconfirmed is never heard of.
 */
START_TEST(test_claim_pending)
{
	struct route_owner a = owner(0, 1, 1), b = owner(1, 2, 1), got;

	route_watch(watch);
	watched = 0;
	ck_assert_int_eq(route_claim_pending("t-p", &a), 0);
	ck_assert(!route_lookup("t-p", &got));
	ck_assert(!route_is_held("t-p"));
	ck_assert(route_is_claimed("t-p"));
	ck_assert_int_eq(route_claim("t-p", &b), -1);
	ck_assert_int_eq(route_claim_pending("t-p", &b), -1);
	ck_assert_int_eq(route_join("t-p", &b), -1);
	ck_assert_uint_eq(watched, 0);
	/* Only its own owner confirms it. */
	route_confirm("t-p", &b);
	ck_assert(!route_lookup("t-p", &got));
	route_confirm("t-p", &a);
	ck_assert_uint_eq(watched, 1);
	ck_assert_str_eq(watched_addr, "t-p");
	ck_assert(route_lookup("t-p", &got));
	ck_assert(route_owner_eq(&got, &a));
	ck_assert(route_is_held("t-p"));
	route_release("t-p", &a);
	ck_assert_uint_eq(watched, 2);
	/* Given up before the cluster agreed: nobody is told. */
	ck_assert_int_eq(route_claim_pending("t-q", &b), 0);
	route_release("t-q", &b);
	ck_assert_uint_eq(watched, 2);
	ck_assert(!route_is_claimed("t-q"));
	ck_assert_int_eq(route_claim("t-q", &a), 0);
	ck_assert_uint_eq(watched, 3);
	route_release("t-q", &a);
	route_watch(NULL);
}
END_TEST

/*
 * A stale owner (its slot's connection closed, the slot reused: another
 * generation), or another reactor's same slot, cannot release an entry.
 */
START_TEST(test_release_stale_owner)
{
	struct route_owner a = owner(1, 7, 3), b = owner(2, 8, 1), got;
	struct route_owner stale = owner(1, 7, 4), elsewhere = owner(0, 7, 3);

	ck_assert_int_eq(route_claim("t-stale", &a), 0);
	route_release("t-stale", &stale);
	route_release("t-stale", &elsewhere);
	ck_assert(route_lookup("t-stale", &got));
	ck_assert(route_owner_eq(&got, &a));
	route_release("t-stale", &a);
	ck_assert(!route_lookup("t-stale", &got));
	/* Shared: the stale one's release leaves both owners. */
	ck_assert_int_eq(route_join("t-stale-sh", &a), 0);
	ck_assert_int_eq(route_join("t-stale-sh", &b), 0);
	route_release("t-stale-sh", &stale);
	ck_assert(route_lookup("t-stale-sh", &got));
	route_release("t-stale-sh", &a);
	ck_assert(route_lookup("t-stale-sh", &got));
	ck_assert(route_owner_eq(&got, &b));
	route_release("t-stale-sh", &b);
	ck_assert(!route_lookup("t-stale-sh", &got));
}
END_TEST

/*
 * prefix_first: the prefix route is tried before the address's own
 * owner; with nobody on the route, the owner still gets it.
 */
START_TEST(test_resolve_prefix_first)
{
	struct config *cf = unit_config(
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"router\"; } );\n"
	    "routes = ( { prefix = \"+351\"; to = \"gw-pf\"; } );\n");
	struct route_owner gw = owner(0, 1, 1), direct = owner(1, 2, 2), got;
	const char *to;

	ck_assert_int_eq(route_claim("gw-pf", &gw), 0);
	ck_assert_int_eq(route_claim("+351911", &direct), 0);
	to = route_resolve(cf, "+351911", false, &got);
	ck_assert_ptr_nonnull(to);
	ck_assert_str_eq(to, "+351911");
	ck_assert(route_owner_eq(&got, &direct));
	to = route_resolve(cf, "+351911", true, &got);
	ck_assert_ptr_nonnull(to);
	ck_assert_str_eq(to, "gw-pf");
	ck_assert(route_owner_eq(&got, &gw));
	/* The route's gateway gone: the owner of the address after all. */
	route_release("gw-pf", &gw);
	to = route_resolve(cf, "+351911", true, &got);
	ck_assert_ptr_nonnull(to);
	ck_assert_str_eq(to, "+351911");
	ck_assert(route_owner_eq(&got, &direct));
	route_release("+351911", &direct);
	ck_assert_ptr_null(route_resolve(cf, "+351911", true, &got));
	ck_assert_ptr_null(route_resolve(cf, "+351911", false, &got));
	config_unref(cf);
}
END_TEST

/*
 * Emptied, the table finds nothing, and fills again: a shard that gave
 * its buckets back on its last release makes new ones (ASan would see a
 * use after free, a crash a missing reset).
 */
START_TEST(test_table_empties_and_refills)
{
	char name[32];
	struct route_owner got;

	for (unsigned cycle = 0; cycle < 3; cycle++) {
		for (uint32_t i = 0; i < 500; i++) {
			struct route_owner o = owner(0, i, cycle);

			snprintf(name, sizeof(name), "t-cycle-%u", i);
			ck_assert_int_eq(route_claim(name, &o), 0);
		}
		for (uint32_t i = 0; i < 500; i++) {
			struct route_owner o = owner(0, i, cycle);

			snprintf(name, sizeof(name), "t-cycle-%u", i);
			ck_assert(route_lookup(name, &got));
			ck_assert(route_owner_eq(&got, &o));
			route_release(name, &o);
		}
		for (uint32_t i = 0; i < 500; i++) {
			snprintf(name, sizeof(name), "t-cycle-%u", i);
			ck_assert(!route_lookup(name, &got));
		}
	}
}
END_TEST

/* A fake cluster: what route_wide_* handed it. */
static struct {
	bool	up;
	int	claims;
	struct route_claim *q;
	char	released[ROUTE_ADDR_MAX + 1];
} fwide;

static bool fwide_up(void) { return fwide.up; }

static void
fwide_claim(struct route_claim *q)
{
	fwide.claims++;
	fwide.q = q;
}

static void
fwide_release(const char *addr)
{
	snprintf(fwide.released, sizeof(fwide.released), "%s", addr);
}

static const struct route_wide_ops fwide_ops = {
	.up = fwide_up,
	.claim = fwide_claim,
	.release = fwide_release,
};

/*
 * A protocol claims beyond this node through route_wide_*: nothing
 * registered is a single node (claim refused, q still the caller's);
 * registered, each call reaches the registered operations.
 */
START_TEST(test_wide_claims)
{
	struct route_claim q = { .addr = "alice" };

	memset(&fwide, 0, sizeof(fwide));
	ck_assert(!route_wide_on());
	ck_assert(!route_wide_up());
	ck_assert_int_eq(route_wide_claim(&q), -1);
	route_wide_release("alice");

	route_wide_register(&fwide_ops);
	ck_assert(route_wide_on());
	ck_assert(!route_wide_up());
	fwide.up = true;
	ck_assert(route_wide_up());
	ck_assert_int_eq(route_wide_claim(&q), 0);
	ck_assert_int_eq(fwide.claims, 1);
	ck_assert_ptr_eq(fwide.q, &q);
	route_wide_release("alice");
	ck_assert_str_eq(fwide.released, "alice");

	route_wide_register(NULL);
	ck_assert(!route_wide_on());
	ck_assert_int_eq(route_wide_claim(&q), -1);
	ck_assert_int_eq(fwide.claims, 1);
}
END_TEST

Suite *
route_suite(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("table");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_addr_valid);
	tcase_add_test(tc, test_wide_claims);
	tcase_add_test(tc, test_claim_lookup_release);
	tcase_add_test(tc, test_many_addresses);
	tcase_add_test(tc, test_claim_race);
	tcase_add_test(tc, test_resolve_longest_prefix);
	tcase_add_test(tc, test_prefix_index_as_walk);
	tcase_add_test(tc, test_prefix_twice_refused);
	tcase_add_test(tc, test_join_shared_in_turn);
	tcase_add_test(tc, test_claim_and_join_exclude);
	tcase_add_test(tc, test_claim_pending);
	tcase_add_test(tc, test_release_stale_owner);
	tcase_add_test(tc, test_resolve_prefix_first);
	tcase_add_test(tc, test_table_empties_and_refills);
	suite_add_tcase(s, tc);
	return s;
}
