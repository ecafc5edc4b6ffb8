/* test_counter.c: the counter table, sums over blocks, and the stats line and STATUS= built from it. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "counter.h"
#include "reactor.h"
#include "stats.h"
#include "suites.h"
#include "util.h"

/* [a-zA-Z_:][a-zA-Z0-9_:]* (metric) or [a-zA-Z_][a-zA-Z0-9_]* (label). */
static bool
prom_name_ok(const char *s, bool colon)
{
	const char *first = colon ? "_:" : "_";
	const char *rest = colon ? "_:0123456789" : "_0123456789";

	if (s == NULL || *s == '\0')
		return false;
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
	    strchr(first, *s) != NULL))
		return false;
	for (s++; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    strchr(rest, *s) != NULL))
			return false;
	return true;
}

static bool
ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && strcmp(s + n - m, tail) == 0;
}

START_TEST(test_every_counter_described)
{
	for (unsigned id = 0; id < COUNTER_N; id++) {
		const struct counter_info *ci = counter_info(id);

		ck_assert_msg(prom_name_ok(ci->name, true),
		    "counter %u: bad name \"%s\"", id, ci->name);
		ck_assert_msg(ci->help != NULL && ci->help[0] != '\0',
		    "%s: no help", ci->name);
		ck_assert_msg(ci->kind == COUNTER_KIND_COUNTER ||
		    ci->kind == COUNTER_KIND_GAUGE, "%s: no kind", ci->name);
		ck_assert_msg(ci->scope == COUNTER_SCOPE_REACTOR ||
		    ci->scope == COUNTER_SCOPE_ACCEPTOR, "%s: scope", ci->name);
		/* Prometheus: counters end in _total, gauges do not. */
		ck_assert_msg(ends_with(ci->name, "_total") ==
		    (ci->kind == COUNTER_KIND_COUNTER), "%s: kind vs name",
		    ci->name);
		ck_assert_msg((ci->label == NULL) == (ci->label_value == NULL),
		    "%s: label without a value or the reverse", ci->name);
		if (ci->label != NULL)
			ck_assert_msg(prom_name_ok(ci->label, false) &&
			    ci->label_value[0] != '\0', "%s: bad label",
			    ci->name);
	}
}
END_TEST

/* Whether two rows are the same series, or one family told two ways. */
static void
check_pair(const struct counter_info *a, const struct counter_info *b)
{
	/* A row kept out of /metrics may share a family's name. */
	bool same_name = strcmp(a->name, b->name) == 0 &&
	    !((a->flags | b->flags) & COUNTER_F_NO_METRIC);

	ck_assert_msg(!same_name || a->label != NULL,
	    "%s: listed twice", a->name);
	if (same_name)
		ck_assert_msg(strcmp(a->label_value, b->label_value) != 0 &&
		    strcmp(a->label, b->label) == 0 &&
		    strcmp(a->help, b->help) == 0 && a->kind == b->kind &&
		    a->scope == b->scope, "%s{%s}: differs from its family",
		    a->name, a->label_value);
	if (a->key != NULL && b->key != NULL)
		ck_assert_msg(strcmp(a->key, b->key) != 0,
		    "stats key %s twice", a->key);
}

START_TEST(test_series_unique_families_together)
{
	for (unsigned i = 0; i < COUNTER_N; i++) {
		const struct counter_info *a = counter_info(i);

		for (unsigned j = i + 1; j < COUNTER_N; j++) {
			const struct counter_info *b = counter_info(j);

			check_pair(a, b);
			/* A family's rows follow each other (one # HELP). */
			if (j > i + 1 && strcmp(a->name, b->name) == 0 &&
			    !((a->flags | b->flags) & COUNTER_F_NO_METRIC))
				ck_assert_str_eq(counter_info(j - 1)->name,
				    a->name);
		}
	}
}
END_TEST

START_TEST(test_close_reasons_named_by_their_counters)
{
	ck_assert_str_eq(conn_close_reason_name(CONN_CLOSE_PEER), "peer");
	ck_assert_str_eq(conn_close_reason_name(CONN_CLOSE_SLOW),
	    "slow-consumer");
	ck_assert_str_eq(conn_close_reason_name(CONN_CLOSE_N), "?");
	for (int k = 0; k < CONN_CLOSE_N; k++)
		ck_assert_str_eq(counter_info(COUNTER_CLOSED_PEER + k)->
		    label_value, conn_close_reason_name(k));
}
END_TEST

START_TEST(test_sums_over_blocks)
{
	struct counter_block *b[3];
	struct counter_totals t;

	memset(&t, 0, sizeof(t));
	for (unsigned i = 0; i < 3; i++) {
		b[i] = xzalloc_aligned(CACHE_LINE, sizeof(*b[i]));
		counter_add(b[i], COUNTER_MESSAGES, 10 * (i + 1));
		counter_add(b[i], COUNTER_CONNS, 2);
	}
	counter_add(b[1], COUNTER_CONNS, (uint64_t)-1);
	ck_assert_uint_eq(counter_get(b[1], COUNTER_CONNS), 1);
	ck_assert_uint_eq(counter_sum((const struct counter_block *const *)b,
	    3, COUNTER_MESSAGES), 60);
	ck_assert_uint_eq(counter_sum((const struct counter_block *const *)b,
	    3, COUNTER_CONNS), 5);
	ck_assert_uint_eq(counter_sum((const struct counter_block *const *)b,
	    3, COUNTER_LOOPS), 0);
	for (unsigned i = 0; i < 3; i++)
		counter_totals_add(&t, b[i]);
	ck_assert_uint_eq(t.v[COUNTER_MESSAGES], 60);
	ck_assert_uint_eq(t.v[COUNTER_CONNS], 5);
	ck_assert_uint_eq(t.v[COUNTER_BYTES_IN], 0);
	for (unsigned i = 0; i < 3; i++)
		free(b[i]);
}
END_TEST

/* Two reactors (only their counters used) with known values. */
static void
fill_reactors(struct reactor *rs[2])
{
	for (unsigned i = 0; i < 2; i++) {
		struct counter_block *k;

		rs[i] = xzalloc_aligned(CACHE_LINE, sizeof(*rs[i]));
		k = &rs[i]->counters;
		counter_add(k, COUNTER_CONNS, 2 + i);
		for (unsigned id = COUNTER_CLOSED_PEER;
		    id <= COUNTER_CLOSED_TIMEOUT; id++)
			counter_add(k, id, id - COUNTER_CLOSED_PEER + 1);
		counter_add(k, COUNTER_MESSAGES, 50);
		counter_add(k, COUNTER_BYTES_IN, 1000);
		counter_add(k, COUNTER_BYTES_OUT, 2000);
		counter_add(k, COUNTER_ROUTED_LOCAL, 3);
		counter_add(k, COUNTER_ROUTED_REMOTE, 4 * i);
		counter_add(k, COUNTER_ERR_400, 1);
		counter_add(k, COUNTER_ERR_503, i);
		/* Not in the stats line. */
		counter_add(k, COUNTER_ACCEPTED, 99);
		counter_add(k, COUNTER_LOOPS, 12345);
	}
}

START_TEST(test_stats_line_text)
{
	struct counter_block *acc = xzalloc_aligned(CACHE_LINE, sizeof(*acc));
	struct reactor *rs[2];
	char line[1024];

	fill_reactors(rs);
	counter_add(acc, COUNTER_ACCEPTOR_ACCEPTED, 7);
	for (unsigned k = 0; k < 4; k++)
		counter_add(acc, COUNTER_REFUSED_MAX + k, k + 1);
	stats_format(line, sizeof(line), rs, 2, acc);
	ck_assert_str_eq(line, "stats conns=5 per_reactor=2,3 accepted=7 "
	    "refused_max=1 refused_fd=2 refused_ip=3 refused_rate=4 "
	    "refused_handshakes=0 refused_handshakes_ip=0 closed_peer=2 closed_reset=4 closed_idle=6 "
	    "closed_slow-consumer=8 closed_protocol=10 closed_quit=12 "
	    "closed_shutdown=14 closed_timeout=16 messages=100 "
	    "bytes_in=2000 bytes_out=4000 routed_local=6 routed_remote=4 "
	    "routed_stored=0 routed_node=0 "
	    "err_400=2 err_401=0 err_403=0 err_404=0 err_409=0 err_413=0 "
	    "err_502=0 err_503=1 smpp_long=0 smpp_parts=0 tls_ok=0 tls_bad=0 "
	    "tls_certificate=0 tls_timeout=0 "
	    "tls_handshaking=0 tls_ktls_send=0 tls_ktls_receive=0");
	/* Truncated, still a string. */
	stats_format(line, 20, rs, 2, acc);
	ck_assert_str_eq(line, "stats conns=5 per_r");
	for (unsigned i = 0; i < 2; i++)
		free(rs[i]);
	free(acc);
}
END_TEST

START_TEST(test_status_text)
{
	struct counter_totals last;
	struct reactor *rs[2];
	char text[256];

	fill_reactors(rs);
	memset(&last, 0, sizeof(last));
	stats_format_status(text, sizeof(text), rs, 2, &last, 2.0);
	ck_assert_str_eq(text,
	    "5 connections (per reactor: 2,3), 50 messages/s");
	ck_assert_uint_eq(last.v[COUNTER_MESSAGES], 100);
	/* Against the totals just taken: no new messages. */
	counter_add(&rs[0]->counters, COUNTER_CONNS, (uint64_t)-2);
	stats_format_status(text, sizeof(text), rs, 2, &last, 5.0);
	ck_assert_str_eq(text,
	    "3 connections (per reactor: 0,3), 0 messages/s");
	stats_format_status(text, sizeof(text), rs, 2, &last, 0);
	ck_assert_str_eq(text,
	    "3 connections (per reactor: 0,3), 0 messages/s");
	for (unsigned i = 0; i < 2; i++)
		free(rs[i]);
}
END_TEST

#define WRITES	200000

struct race {
	struct counter_block *b;
	_Atomic bool done;
	bool	bad;		/* the reader saw what cannot be */
};

/* The owner: plain increments, a gauge that goes up and down. */
static void *
race_writer(void *arg)
{
	struct race *rc = arg;

	for (unsigned i = 0; i < WRITES; i++) {
		counter_add(rc->b, COUNTER_CONNS, 1);
		counter_add(rc->b, COUNTER_MESSAGES, 1);
		counter_add(rc->b, COUNTER_CONNS, (uint64_t)-1);
	}
	atomic_store(&rc->done, true);
	return NULL;
}

/*
 * Another thread (a metrics reactor, say) never sees a count go back or
 * past what was written. It only notes what it saw: check's assertions
 * belong on the test's own thread.
 */
static void *
race_reader(void *arg)
{
	struct race *rc = arg;
	const struct counter_block *bs[1] = { rc->b };
	uint64_t seen = 0, v;

	while (!atomic_load(&rc->done)) {
		struct counter_totals t;

		memset(&t, 0, sizeof(t));
		counter_totals_add(&t, rc->b);
		v = counter_sum(bs, 1, COUNTER_MESSAGES);
		if (v < seen || v > WRITES || t.v[COUNTER_CONNS] > 1)
			rc->bad = true;
		seen = v;
	}
	return NULL;
}

START_TEST(test_one_writer_one_reader)
{
	struct race rc = { .b = xzalloc_aligned(CACHE_LINE, sizeof(*rc.b)) };
	pthread_t w, r;

	ck_assert_int_eq(pthread_create(&r, NULL, race_reader, &rc), 0);
	ck_assert_int_eq(pthread_create(&w, NULL, race_writer, &rc), 0);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	ck_assert_msg(!rc.bad, "the reader saw a count go back");
	ck_assert_uint_eq(counter_get(rc.b, COUNTER_MESSAGES), WRITES);
	ck_assert_uint_eq(counter_get(rc.b, COUNTER_CONNS), 0);
	free(rc.b);
}
END_TEST

Suite *
counter_suite(void)
{
	Suite *s = suite_create("counter");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, test_every_counter_described);
	tcase_add_test(tc, test_series_unique_families_together);
	tcase_add_test(tc, test_close_reasons_named_by_their_counters);
	tcase_add_test(tc, test_sums_over_blocks);
	tcase_add_test(tc, test_stats_line_text);
	tcase_add_test(tc, test_status_text);
	tcase_add_test(tc, test_one_writer_one_reader);
	suite_add_tcase(s, tc);
	return s;
}
