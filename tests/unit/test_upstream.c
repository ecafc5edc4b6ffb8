/* test_upstream.c: the upstream sessions' back-off, status names and the upstreams config rows. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "route.h"
#include "smpp_pdu.h"
#include "transport.h"
#include "upstream.h"
#include "upstream_int.h"
#include "helpers.h"
#include "suites.h"

#define METRICS								\
	"listeners = ( { name = \"m\"; address = \"127.0.0.1\"; port = 0; "	\
	"protocol = \"metrics\"; } );\n"

/* The first wait is reconnect_min, plus at most a half of it again. */
START_TEST(backoff_first)
{
	for (uint32_t rnd = 0; rnd < 5000; rnd += 7) {
		uint64_t d = upstream_backoff_ms(1, 60, 1, rnd);

		ck_assert_uint_ge(d, 1000);
		ck_assert_uint_le(d, 1500);
	}
	/* Attempt 0 is taken as the first. */
	ck_assert_uint_eq(upstream_backoff_ms(2, 60, 0, 0), 2000);
}
END_TEST

/* Each failure in a row doubles the wait, up to reconnect_max. */
START_TEST(backoff_doubles_to_max)
{
	uint64_t want = 1000;

	for (unsigned a = 1; a <= 12; a++) {
		uint64_t lo = upstream_backoff_ms(1, 60, a, 0);
		uint64_t hi = upstream_backoff_ms(1, 60, a, UINT32_MAX);

		ck_assert_uint_eq(lo, want < 60000 ? want : 60000);
		ck_assert_uint_ge(hi, lo);
		ck_assert_uint_le(hi, 60000);
		ck_assert_uint_le(hi, lo + lo / 2);
		want *= 2;
	}
	/* Far past the cap: no overflow, still the cap. */
	ck_assert_uint_eq(upstream_backoff_ms(1, 60, 4000000000u, 12345),
	    60000);
	ck_assert_uint_eq(upstream_backoff_ms(86400, 86400, 99, 7), 86400000);
}
END_TEST

/* The jitter spreads sessions that failed together. */
START_TEST(backoff_jitter_spreads)
{
	uint64_t seen[4] = { 0 };
	unsigned distinct = 0;

	for (uint32_t rnd = 0; rnd < 4; rnd++)
		seen[rnd] = upstream_backoff_ms(4, 60, 2, rnd * 977);
	for (unsigned i = 0; i < 4; i++) {
		bool dup = false;

		for (unsigned j = 0; j < i; j++)
			dup = dup || seen[i] == seen[j];
		distinct += !dup;
		ck_assert_uint_ge(seen[i], 8000);
		ck_assert_uint_le(seen[i], 12000);
	}
	ck_assert_uint_eq(distinct, 4);
}
END_TEST

START_TEST(status_named)
{
	char buf[96];

	ck_assert_str_eq(upstream_status_text(SMPP_ESME_RINVPASWD, buf,
	    sizeof(buf)), "ESME_RINVPASWD (invalid password)");
	ck_assert_str_eq(upstream_status_text(SMPP_ESME_RBINDFAIL, buf,
	    sizeof(buf)), "ESME_RBINDFAIL (bind failed)");
	ck_assert_str_eq(upstream_status_text(0x4242, buf, sizeof(buf)),
	    "command_status 0x00004242");
}
END_TEST

/* The stats line's and STATUS='s words for one upstream. */
START_TEST(counts_appended)
{
	struct upstream_counts n = { .bound = 2, .reconnects = 7,
	    .bind_failures = 3, .receipts_matched = 5,
	    .receipts_unmatched = 1, .receipts_late = 6, .submits = 40, .resp_ok = 30,
	    .resp_throttled = 4, .resp_failed = 2, .window = 4,
	    .oldest_age = 9 };
	char buf[512] = "stats conns=1";
	char tiny[24] = "x";

	upstream_counts_append(buf, sizeof(buf), "opA", &n, false);
	ck_assert_str_eq(buf, "stats conns=1 upstream_opA_bound=2 "
	    "upstream_opA_reconnects=7 upstream_opA_bind_failures=3 "
	    "upstream_opA_submits=40 upstream_opA_ok=30 "
	    "upstream_opA_throttled=4 upstream_opA_refused=2 "
	    "upstream_opA_window=4 upstream_opA_oldest_age=9 "
	    "upstream_opA_receipts_matched=5 "
	    "upstream_opA_receipts_unmatched=1 "
	    "upstream_opA_receipts_late=6");
	snprintf(buf, sizeof(buf), "2 connections");
	upstream_counts_append(buf, sizeof(buf), "opA", &n, true);
	ck_assert_str_eq(buf, "2 connections, opA 2 bound 4 in flight "
	    "oldest 9s");
	/* Nothing in flight, nothing waiting: only the bound sessions. */
	n.window = 0;
	n.oldest_age = 0;
	snprintf(buf, sizeof(buf), "2 connections");
	upstream_counts_append(buf, sizeof(buf), "opA", &n, true);
	ck_assert_str_eq(buf, "2 connections, opA 2 bound");
	/* Cut short, still a string within its buffer. */
	upstream_counts_append(tiny, sizeof(tiny), "opA", &n, false);
	ck_assert_uint_eq(strlen(tiny), sizeof(tiny) - 1);
	upstream_counts_append(tiny, sizeof(tiny), "opA", &n, false);
	ck_assert_uint_eq(strlen(tiny), sizeof(tiny) - 1);
}
END_TEST

/* A whole upstream: every row read, defaults where none is given. */
START_TEST(config_upstream_read)
{
	struct config *cf = unit_config(METRICS
	    "upstreams = (\n"
	    "  { name = \"opA\"; host = \"127.0.0.1\"; port = 2776;\n"
	    "    bind = \"pair\"; system_id = \"erd\"; password = \"secret\";\n"
	    "    system_type = \"VMA\"; address_range = \"^351\";\n"
	    "    sessions = 3; window = 20; max_tps = 50;\n"
	    "    enquire_link_interval = 5; response_timeout = 3;\n"
	    "    reconnect_min = 2; reconnect_max = 30;\n"
	    "    source_ton = 5; source_npi = 0; dest_ton = 1; dest_npi = 1;\n"
	    "    alphabet = \"latin1\"; long = \"sar\"; receipt_id = \"hex\";"
	    " },\n"
	    "  { name = \"opB\"; host = \"::1\"; system_id = \"x\"; }\n"
	    ");\n");
	const struct upstream_conf *a, *b;

	ck_assert_ptr_nonnull(cf);
	ck_assert_uint_eq(cf->nupstreams, 2);
	a = &cf->upstreams[0];
	b = &cf->upstreams[1];
	ck_assert_str_eq(a->name, "opA");
	ck_assert_str_eq(a->address, "127.0.0.1");
	ck_assert_uint_eq(a->port, 2776);
	ck_assert_uint_eq(a->bind, UPSTREAM_BIND_PAIR);
	ck_assert_str_eq(a->password, "secret");
	ck_assert_str_eq(a->system_type, "VMA");
	ck_assert_str_eq(a->address_range, "^351");
	ck_assert_uint_eq(a->sessions, 3);
	ck_assert_uint_eq(a->window, 20);
	ck_assert_uint_eq(a->max_tps, 50);
	ck_assert_uint_eq(a->enquire_link_interval, 5);
	ck_assert_uint_eq(a->response_timeout, 3);
	ck_assert_uint_eq(a->reconnect_min, 2);
	ck_assert_uint_eq(a->reconnect_max, 30);
	ck_assert_uint_eq(a->source_ton, 5);
	ck_assert_uint_eq(a->source_npi, 0);
	ck_assert_uint_eq(a->alphabet, CONFIG_ALPHABET_LATIN1);
	ck_assert_uint_eq(a->long_mode, UPSTREAM_LONG_SAR);
	ck_assert_uint_eq(a->receipt_id, UPSTREAM_RECEIPT_HEX);
	ck_assert(!a->tls.enabled);
	ck_assert_ptr_nonnull(a->xp_ctx);
	ck_assert_str_eq(a->xp_ctx->type->name, "plain");
	/* The defaults. */
	ck_assert_str_eq(b->address, "::1");
	ck_assert_uint_eq(b->port, 2775);
	ck_assert_uint_eq(b->bind, UPSTREAM_BIND_TRANSCEIVER);
	ck_assert_str_eq(b->password, "");
	ck_assert_uint_eq(b->sessions, 1);
	ck_assert_uint_eq(b->window, 10);
	ck_assert_uint_eq(b->max_tps, 0);
	ck_assert_uint_eq(b->enquire_link_interval, 30);
	ck_assert_uint_eq(b->response_timeout, 10);
	ck_assert_uint_eq(b->reconnect_min, 1);
	ck_assert_uint_eq(b->reconnect_max, 60);
	ck_assert_uint_eq(b->dest_ton, 1);
	ck_assert_uint_eq(b->alphabet, CONFIG_ALPHABET_GSM);
	ck_assert_uint_eq(b->long_mode, UPSTREAM_LONG_UDH);
	ck_assert_uint_eq(b->receipt_id, UPSTREAM_RECEIPT_AUTO);
	config_unref(cf);
}
END_TEST

/* Each bad upstream: one error, on its line, naming what is wrong. */
START_TEST(config_upstream_errors)
{
	static const struct {
		const char *body, *what;
	} cases[] = {
		{ "host = \"127.0.0.1\"; system_id = \"e\";",
		  "upstream: \"name\" is missing" },
		{ "name = \"a\"; system_id = \"e\";",
		  "upstream: \"host\" is missing" },
		{ "name = \"a\"; host = \"127.0.0.1\";",
		  "upstream: \"system_id\" is missing" },
		{ "name = \"a b\"; host = \"127.0.0.1\"; system_id = \"e\";",
		  "upstream name \"a b\"" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = "
		  "\"sixteen-chars-xx\";", "upstreams.system_id: 1 to 15" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "password = \"ninechars\";", "upstreams.password: at most 8" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "bind = \"both\";", "bind" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "sessions = 0;", "sessions" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "reconnect_min = 10; reconnect_max = 5;",
		  "reconnect_min (10) is above reconnect_max (5)" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "receipt_id = \"octal\";", "receipt_id" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "tls = { verify = true; };", "upstreams.tls: \"ca\" is "
		  "missing" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "tls = { verify = false; certificate = \"/c.pem\"; };",
		  "\"certificate\" and \"key\" go together" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "tls = { ca = \"/nonexistent/ca.pem\"; };",
		  "/nonexistent/ca.pem" },
		{ "name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; "
		  "colour = 1;", "upstreams.colour: unknown setting" },
	};
	char text[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), METRICS "upstreams = (\n"
		    "  { %s }\n);\n", cases[i].body);
		unit_expect_one_error(text, 3, cases[i].what);
	}
}
END_TEST

START_TEST(config_upstream_unique)
{
	unit_expect_one_error(METRICS "upstreams = (\n"
	    "  { name = \"a\"; host = \"127.0.0.1\"; system_id = \"e\"; },\n"
	    "  { name = \"a\"; host = \"127.0.0.2\"; system_id = \"e\"; }\n"
	    ");\n", 4, "upstream name \"a\" is already used on line 3");
}
END_TEST

#define TWO_UPSTREAMS							\
	"upstreams = (\n"						\
	"  { name = \"opA\"; host = \"127.0.0.1\"; system_id = \"e\"; },\n" \
	"  { name = \"opB\"; host = \"127.0.0.1\"; system_id = \"e\"; }\n" \
	");\n"

/*
 * Routes name upstreams as a list or one string, with a mode; the
 * upstreams may come after the routes in the file.
 */
START_TEST(config_route_upstreams_read)
{
	struct config *cf = unit_config(METRICS
	    "routes = (\n"
	    "  { prefix = \"+351\"; to = [ \"upstream:opA\", "
	    "\"upstream:opB\" ];\n"
	    "    mode = \"round_robin\"; },\n"
	    "  { prefix = \"+44\"; to = \"upstream:opB\"; },\n"
	    "  { prefix = \"+3519\"; to = \"esme1\"; }\n"
	    ");\n" TWO_UPSTREAMS);
	const struct route_conf *r;

	ck_assert_ptr_nonnull(cf);
	ck_assert_uint_eq(cf->nroutes, 3);
	r = &cf->routes[0];
	ck_assert_uint_eq(r->nupstreams, 2);
	ck_assert_str_eq(r->upstreams[0], "opA");
	ck_assert_str_eq(r->upstreams[1], "opB");
	ck_assert_str_eq(r->to, "upstream:opA");
	ck_assert_uint_eq(r->mode, ROUTE_MODE_ROUND_ROBIN);
	r = &cf->routes[1];
	ck_assert_uint_eq(r->nupstreams, 1);
	ck_assert_str_eq(r->upstreams[0], "opB");
	ck_assert_uint_eq(r->mode, ROUTE_MODE_FAILOVER);
	ck_assert_uint_eq(cf->routes[2].nupstreams, 0);
	ck_assert_str_eq(cf->routes[2].to, "esme1");
	/* The longest prefix wins: an address route inside an upstream one. */
	ck_assert_ptr_eq(route_conf_by_prefix(cf, "+351912345678"),
	    &cf->routes[2]);
	ck_assert_ptr_eq(route_conf_by_prefix(cf, "+351212345678"),
	    &cf->routes[0]);
	ck_assert_ptr_eq(route_conf_by_prefix(cf, "+447700900000"),
	    &cf->routes[1]);
	ck_assert_ptr_null(route_conf_by_prefix(cf, "+1555"));
	ck_assert_ptr_eq(config_find_upstream(cf, "opB"), &cf->upstreams[1]);
	ck_assert_ptr_null(config_find_upstream(cf, "opC"));
	config_unref(cf);
}
END_TEST

/* Each bad route to upstreams: one error, on the route's line. */
START_TEST(config_route_upstreams_errors)
{
	static const struct {
		const char *route, *what;
	} cases[] = {
		{ "to = [ \"upstream:opA\", \"upstream:opX\" ];",
		  "route \"+351\": no upstream named \"opX\" (define it" },
		{ "to = \"upstream:nope\";", "no upstream named \"nope\"" },
		{ "to = [ \"upstream:opA\", \"esme1\" ];",
		  "a list names upstreams only (\"upstream:NAME\"), not "
		  "\"esme1\"" },
		{ "to = [ ];", "route to: a list of 1 to 8 upstreams" },
		{ "to = [ \"upstream:opA\", \"upstream:opA\", \"upstream:opA\","
		  " \"upstream:opA\", \"upstream:opA\", \"upstream:opA\","
		  " \"upstream:opA\", \"upstream:opA\", \"upstream:opA\" ];",
		  "route to: a list of 1 to 8 upstreams" },
		{ "to = \"upstream:\";", "an upstream name is 1-64 of" },
		{ "to = \"esme1\"; mode = \"round_robin\";",
		  "mode picks among upstreams; this route goes to \"esme1\"" },
		{ "to = \"upstream:opA\"; mode = \"random\";", "mode" },
		{ "to = [ 5 ];", "expected a string" },
	};
	char text[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), METRICS TWO_UPSTREAMS
		    "routes = (\n  { prefix = \"+351\"; %s }\n);\n",
		    cases[i].route);
		unit_expect_one_error(text, 7, cases[i].what);
	}
}
END_TEST

/*
 * max_tps: a second's worth at once, then one part every 1/tps second;
 * an idle while saves up no more than a second's worth.
 */
START_TEST(tps_paces)
{
	_Atomic uint64_t at = 0;
	const uint64_t s = 1000000000u, t0 = 100 * s;
	unsigned n = 0;

	ck_assert_uint_eq(upstream_tps_wait(&at, 2, t0), 0);
	ck_assert(upstream_tps_take(&at, 2, t0));
	ck_assert(upstream_tps_take(&at, 2, t0));
	/* The burst is spent: the next part may go half a second on. */
	ck_assert_uint_eq(upstream_tps_wait(&at, 2, t0), s / 2);
	ck_assert_uint_eq(upstream_tps_wait(&at, 2, t0 + s / 4), s / 4);
	ck_assert(!upstream_tps_take(&at, 2, t0));
	ck_assert(!upstream_tps_take(&at, 2, t0 + s / 2 - 1));
	ck_assert_uint_eq(upstream_tps_wait(&at, 2, t0 + s / 2), 0);
	ck_assert(upstream_tps_take(&at, 2, t0 + s / 2));
	ck_assert(!upstream_tps_take(&at, 2, t0 + s / 2));
	/* Idle a while: the burst is a second's, not more. */
	for (int i = 0; i < 10; i++)
		n += upstream_tps_take(&at, 2, t0 + 60 * s);
	ck_assert_uint_eq(n, 2);
	at = 0;
	n = 0;
	for (int i = 0; i < 5000; i++)
		n += upstream_tps_take(&at, 1000, t0);
	ck_assert_uint_eq(n, 1000);
}
END_TEST

Suite *
upstream_suite(void)
{
	Suite *s = suite_create("upstream");
	TCase *tc = tcase_create("upstream");

	tcase_add_test(tc, backoff_first);
	tcase_add_test(tc, backoff_doubles_to_max);
	tcase_add_test(tc, backoff_jitter_spreads);
	tcase_add_test(tc, status_named);
	tcase_add_test(tc, counts_appended);
	tcase_add_test(tc, config_upstream_read);
	tcase_add_test(tc, config_upstream_errors);
	tcase_add_test(tc, config_upstream_unique);
	tcase_add_test(tc, config_route_upstreams_read);
	tcase_add_test(tc, config_route_upstreams_errors);
	tcase_add_test(tc, tps_paces);
	suite_add_tcase(s, tc);
	return s;
}
