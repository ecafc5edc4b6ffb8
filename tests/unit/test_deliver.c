/*
 * test_deliver.c: messages on their way: a new one is clean on dirty
 * memory; the low bits of ids, as a cluster hands them out; a registered
 * kind of destination takes what is addressed to it and its answer goes
 * back through the origin's registered answerer; a message another node's
 * store holds is answered to that node once its recipient has it.
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "deliver.h"
#include "helpers.h"
#include "reactor.h"
#include "route.h"
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

/*
 * A kind nobody in the daemon registers (as an upstream bind will be):
 * what its take and its answerer saw.
 */
enum { FAKE_KIND = MSG_KIND_MAX - 1 };

static struct {
	int	takes;
	int	answers;
	struct msg *taken;
	char	taken_to[ROUTE_ADDR_MAX + 1];
	struct msg *answered;
	enum msg_verdict answered_verdict;
	uint32_t answered_flags;
	struct conn_handle answered_to;
} fake;

static bool fake_on(void) { return true; }

static void
fake_take(struct reactor_batch *b, struct msg *m, const char *to)
{
	(void)b;
	fake.takes++;
	fake.taken = m;
	snprintf(fake.taken_to, sizeof(fake.taken_to), "%s", to);
}

static void
fake_answer(struct reactor_batch *b, struct msg *m)
{
	(void)b;
	fake.answers++;
	fake.answered = m;
	fake.answered_verdict = m->verdict;
	fake.answered_flags = m->flags;
	fake.answered_to = m->sender;
	free(m);
}

static const struct deliver_kind_ops fake_ops = {
	.name = "fake",
	.on = fake_on,
	.take = fake_take,
	.answer = fake_answer,
};

static const char *const deliver_conf =
    "dispatchers = 1;\n"
    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"router\"; } );\n";

/* A message from the fake kind's own address (7, 8, 9) to "to". */
static struct msg *
fake_msg(const char *to)
{
	struct msg *m = msg_new(2);

	memcpy(m->text, "hi", 2);
	m->len = 2;
	snprintf(m->to, sizeof(m->to), "%s", to);
	snprintf(m->from, sizeof(m->from), "fake-src");
	m->sender_kind = FAKE_KIND;
	m->sender = (struct conn_handle){ 7, 8, 9 };
	return m;
}

/*
 * An address held by an owner of the fake kind: deliver hands the message
 * to the kind's take (not to a reactor), and the verdict the kind gives
 * goes back through the answerer of the sender's kind, with the sender's
 * own address in it.
 */
START_TEST(test_deliver_registered_kind)
{
	struct config *cf = unit_config(deliver_conf);
	struct reactor *r = reactor_new(0, cf);
	struct route_owner owner = {
		.kind = (enum route_owner_kind)FAKE_KIND,
		.conn = { 1, 2, 3 },
	};
	struct msg *m;

	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(route_claim("fake-dst", &owner), 0);
	ck_assert_int_eq(deliver_register(FAKE_KIND, &fake_ops), 0);
	ck_assert(deliver_kind_on(FAKE_KIND));
	ck_assert(deliver_kind_up(FAKE_KIND));

	m = fake_msg("fake-dst");
	ck_assert_int_eq(deliver_from(r, m), MSG_PENDING);
	ck_assert_int_eq(fake.takes, 1);
	ck_assert_ptr_eq(fake.taken, m);
	ck_assert_str_eq(fake.taken_to, "fake-dst");
	ck_assert_uint_eq(m->recipient.kind, FAKE_KIND);
	ck_assert_uint_eq(m->recipient.conn.slot, 2);
	ck_assert_int_eq(fake.answers, 0);

	/* The kind delivered it: its verdict goes back to the origin. */
	m->verdict = MSG_OK;
	deliver_answer(m);
	ck_assert_int_eq(fake.answers, 1);
	ck_assert_ptr_eq(fake.answered, m);
	ck_assert_int_eq(fake.answered_verdict, MSG_OK);
	ck_assert_uint_eq(fake.answered_to.reactor, 7);
	ck_assert_uint_eq(fake.answered_to.slot, 8);
	ck_assert_uint_eq(fake.answered_to.gen, 9);

	/* Nobody waits: the answerer is not called. */
	m = fake_msg("fake-dst");
	m->flags |= MSG_F_NO_VERDICT;
	m->verdict = MSG_OK;
	deliver_answer(m);
	ck_assert_int_eq(fake.answers, 1);

	route_release("fake-dst", &owner);
	deliver_register(FAKE_KIND, NULL);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

/*
 * Without a registration: an owner of the kind is no route, a message
 * handed to the kind is answered "no route" to its sender, an answer for
 * a sender of the kind is dropped; kinds deliver keeps, or out of range,
 * cannot be registered.
 */
START_TEST(test_deliver_unregistered_kind)
{
	struct config *cf = unit_config(deliver_conf);
	struct reactor *r = reactor_new(0, cf);
	struct route_owner owner = {
		.kind = (enum route_owner_kind)FAKE_KIND,
		.conn = { 1, 2, 3 },
	};
	const unsigned origin = FAKE_KIND - 1;
	struct msg *m;

	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(route_claim("fake-dst", &owner), 0);
	ck_assert(!deliver_kind_on(FAKE_KIND));
	ck_assert(!deliver_kind_up(FAKE_KIND));
	ck_assert_int_eq(deliver_from(r, fake_msg("fake-dst")),
	    MSG_NO_ROUTE);
	ck_assert_int_eq(fake.takes, 0);

	/* Registered, then gone again: the same. */
	ck_assert_int_eq(deliver_register(FAKE_KIND, &fake_ops), 0);
	ck_assert_int_eq(deliver_register(FAKE_KIND, NULL), 0);
	ck_assert_int_eq(deliver_from(r, fake_msg("fake-dst")),
	    MSG_NO_ROUTE);
	ck_assert_int_eq(fake.takes, 0);

	/* Handed to the unregistered kind: "no route" back to the origin. */
	ck_assert_int_eq(deliver_register(origin, &fake_ops), 0);
	m = fake_msg("fake-dst");
	m->sender_kind = origin;
	deliver_to_kind(FAKE_KIND, NULL, m, "fake-dst");
	ck_assert_int_eq(fake.takes, 0);
	ck_assert_int_eq(fake.answers, 1);
	ck_assert_int_eq(fake.answered_verdict, MSG_NO_ROUTE);
	ck_assert_uint_eq(fake.answered_to.slot, 8);
	deliver_register(origin, NULL);

	/* An answer for a sender of an unregistered kind: freed, no call. */
	m = fake_msg("fake-dst");
	m->verdict = MSG_OK;
	deliver_answer(m);
	ck_assert_int_eq(fake.answers, 1);

	errno = 0;
	ck_assert_int_eq(deliver_register(MSG_KIND_MAX, &fake_ops), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(deliver_register(MSG_KIND_CONN, &fake_ops), -1);
	ck_assert_int_eq(deliver_register(MSG_KIND_NONE, &fake_ops), -1);
	ck_assert(!deliver_kind_on(MSG_KIND_MAX));

	route_release("fake-dst", &owner);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

/* What a fake store heard from the protocols' side of deliver. */
static struct {
	bool	on;
	int	outcomes;
	enum msg_outcome outcome;
	int	wakes;
	char	woken[ROUTE_ADDR_MAX + 1];
	int	requests;
	struct msg_req *req;
} fstore;

static bool fstore_on(void) { return fstore.on; }

static void
fstore_outcome(struct msg *m, enum msg_outcome o)
{
	fstore.outcomes++;
	fstore.outcome = o;
	free(m);
}

static void
fstore_wake(const char *address)
{
	fstore.wakes++;
	snprintf(fstore.woken, sizeof(fstore.woken), "%s", address);
}

static void
fstore_request(struct msg_req *q)
{
	fstore.requests++;
	fstore.req = q;
}

/* The fake store's take: counted apart from the fake kind's. */
static int fstore_takes;

static void
fstore_take(struct reactor_batch *b, struct msg *m, const char *to)
{
	fstore_takes++;
	fake_take(b, m, to);
}

static const struct deliver_kind_ops fstore_ops = {
	.name = "fake store",
	.on = fstore_on,
	.take = fstore_take,
	.outcome = fstore_outcome,
	.wake = fstore_wake,
	.request = fstore_request,
};

/*
 * Protocols tell the store outcomes, logins and SMPP requests through
 * deliver, never by name: each reaches the registered kind's operation,
 * and a request is refused (q still the caller's) while the kind is off
 * or not registered.
 */
START_TEST(test_deliver_store_seam)
{
	struct msg_req *q = calloc(1, sizeof(*q));
	struct msg *m = msg_new(0);

	memset(&fstore, 0, sizeof(fstore));
	errno = 0;
	ck_assert_int_eq(deliver_request(MSG_KIND_STORE, q), -1);
	ck_assert_int_eq(errno, ENOTSUP);
	deliver_wake("alice");		/* nobody: nothing happens */

	ck_assert_int_eq(deliver_register(MSG_KIND_STORE, &fstore_ops), 0);
	ck_assert_int_eq(deliver_request(MSG_KIND_STORE, q), -1);
	deliver_wake("alice");
	ck_assert_int_eq(fstore.wakes, 0);	/* registered, not on */

	fstore.on = true;
	deliver_wake("alice");
	ck_assert_int_eq(fstore.wakes, 1);
	ck_assert_str_eq(fstore.woken, "alice");
	ck_assert_int_eq(deliver_request(MSG_KIND_STORE, q), 0);
	ck_assert_int_eq(fstore.requests, 1);
	ck_assert_ptr_eq(fstore.req, q);
	ck_assert_int_eq(deliver_request(MSG_KIND_NODE, q), -1);
	m->flags = MSG_F_STORED;
	deliver_outcome(m, MSG_OUT_RETRY);
	ck_assert_int_eq(fstore.outcomes, 1);
	ck_assert_int_eq(fstore.outcome, MSG_OUT_RETRY);

	deliver_register(MSG_KIND_STORE, NULL);
	free(q);
}
END_TEST

static unsigned fstore_nwritten;

static void
fstore_written(struct msg *const *ms, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ck_assert(!(ms[i]->flags & MSG_F_NODE_HELD));
	fstore_nwritten += n;
}

/*
 * A message another node's store sent here (MSG_F_NODE_HELD): what its
 * recipient's protocol makes of it is that node's verdict, not this
 * node's store's outcome; "written" is nobody's business.
 */
START_TEST(test_deliver_node_held)
{
	static const struct {
		enum msg_outcome o;
		enum msg_verdict v;
	} map[] = {
		{ MSG_OUT_DELIVERED, MSG_OK }, { MSG_OUT_RETRY, MSG_FULL },
		{ MSG_OUT_FAILED, MSG_UNFIT }, { MSG_OUT_RETURNED, MSG_BUSY },
	};
	struct deliver_kind_ops store = fstore_ops;
	struct msg *m, *ms[4];

	memset(&fstore, 0, sizeof(fstore));
	memset(&fake, 0, sizeof(fake));
	fstore.on = true;
	fstore_nwritten = 0;
	store.written = fstore_written;
	ck_assert_int_eq(deliver_register(MSG_KIND_STORE, &store), 0);
	ck_assert_int_eq(deliver_register(MSG_KIND_NODE, &fake_ops), 0);
	for (unsigned i = 0; i < ARRAY_LEN(map); i++) {
		m = msg_new(0);
		m->flags = MSG_F_STORED | MSG_F_NODE_HELD;
		m->sender_kind = MSG_KIND_NODE;
		deliver_outcome(m, map[i].o);
		ck_assert_int_eq(fake.answers, (int)i + 1);
		ck_assert_int_eq(fake.answered_verdict, map[i].v);
		ck_assert_uint_eq(fake.answered_flags &
		    (MSG_F_STORED | MSG_F_NODE_HELD), 0);
	}
	m = msg_new(0);
	m->flags = MSG_F_STORED | MSG_F_NODE_HELD;
	m->sender_kind = MSG_KIND_NODE;
	deliver_outcome(m, MSG_OUT_WRITTEN);
	ck_assert_int_eq(fake.answers, (int)ARRAY_LEN(map));
	ck_assert_int_eq(fstore.outcomes, 0);

	/* Written: the store hears of its own, in runs around the held. */
	for (unsigned i = 0; i < 4; i++) {
		ms[i] = msg_new(0);
		ms[i]->flags = MSG_F_STORED | (i == 1 || i == 3 ?
		    MSG_F_NODE_HELD : 0);
	}
	deliver_written(ms, 4);
	ck_assert_uint_eq(fstore_nwritten, 2);
	for (unsigned i = 0; i < 4; i++)
		free(ms[i]);

	/* The store's own still reach it. */
	m = msg_new(0);
	m->flags = MSG_F_STORED;
	deliver_outcome(m, MSG_OUT_DELIVERED);
	ck_assert_int_eq(fstore.outcomes, 1);
	ck_assert_int_eq(fake.answers, (int)ARRAY_LEN(map));
	deliver_register(MSG_KIND_NODE, NULL);
	deliver_register(MSG_KIND_STORE, NULL);
}
END_TEST

/*
 * A message the store sent to the cluster, and nobody else holds its
 * address but a session here now: it goes back to the store (which hands
 * it out as a stored message, kept until delivered), not to the session
 * as a sender's message would.
 */
START_TEST(test_deliver_unrouted_store_msg)
{
	struct config *cf = unit_config(deliver_conf);
	struct reactor *r = reactor_new(0, cf);
	struct route_owner owner =
	    route_owner_conn((struct conn_handle){ 0, 1, 1 });
	struct deliver_kind_ops store = fstore_ops;
	struct msg *m;

	ck_assert_ptr_nonnull(r);
	memset(&fstore, 0, sizeof(fstore));
	memset(&fake, 0, sizeof(fake));
	fstore.on = true;
	store.answer = fake_answer;
	ck_assert_int_eq(deliver_register(MSG_KIND_STORE, &store), 0);
	ck_assert_int_eq(deliver_register(FAKE_KIND, &fake_ops), 0);
	ck_assert_int_eq(route_claim("held-here", &owner), 0);

	m = fake_msg("held-here");
	m->sender_kind = MSG_KIND_STORE;
	m->flags |= MSG_F_NODE_HELD;
	deliver_unrouted(cf, m);
	ck_assert_int_eq(fake.answers, 1);
	ck_assert_int_eq(fake.answered_verdict, MSG_NO_ROUTE);

	/* A sender's goes to the session's reactor (no verdict yet). */
	deliver_unrouted(cf, fake_msg("held-here"));
	ck_assert_int_eq(fake.answers, 1);

	route_release("held-here", &owner);
	deliver_register(FAKE_KIND, NULL);
	deliver_register(MSG_KIND_STORE, NULL);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

static const char *const acct_conf =
    "dispatchers = 1;\n"
    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"router\"; } );\n"
    "accounts = ( { id = \"bob\"; password = \"b\"; } );\n";

/*
 * A message for an account whose session here is closing, its address
 * not given back yet (its close and the message read in one turn): the
 * account's store takes it, as it would a moment later, not "no route".
 */
START_TEST(test_deliver_recipient_leaving)
{
	struct config *cf = unit_config(acct_conf);
	struct reactor *r = reactor_new(0, cf);
	/* No session in that place (closing, or gone): as in a close's turn. */
	struct route_owner owner =
	    route_owner_conn((struct conn_handle){ 0, 1, 1 });
	struct deliver_kind_ops store = fstore_ops;

	ck_assert_ptr_nonnull(r);
	memset(&fstore, 0, sizeof(fstore));
	memset(&fake, 0, sizeof(fake));
	fstore_takes = 0;
	fstore.on = true;
	ck_assert_int_eq(deliver_register(MSG_KIND_STORE, &store), 0);
	ck_assert_int_eq(route_claim("bob", &owner), 0);
	ck_assert_int_eq(deliver_from(r, fake_msg("bob")), MSG_PENDING);
	ck_assert_int_eq(fstore_takes, 1);
	ck_assert_str_eq(fake.taken_to, "bob");
	free(fake.taken);
	route_release("bob", &owner);
	deliver_register(MSG_KIND_STORE, NULL);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

static const char *const upstream_conf =
    "dispatchers = 1;\n"
    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"router\"; } );\n"
    "routes = ( { prefix = \"+351\"; to = [ \"upstream:opA\","
    " \"upstream:opB\" ]; } );\n"
    "upstreams = (\n"
    "  { name = \"opA\"; host = \"127.0.0.1\"; system_id = \"e\"; },\n"
    "  { name = \"opB\"; host = \"127.0.0.1\"; system_id = \"e\"; }\n"
    ");\n";

/* Sends a message to "to" from the fake kind; the one its take got. */
static struct msg *
upstream_send(struct reactor *r, const char *to, uint32_t flags)
{
	struct msg *m = fake_msg(to);

	m->flags |= flags;
	fake.takes = 0;
	fake.taken = NULL;
	ck_assert_int_eq(deliver_from(r, m), MSG_PENDING);
	ck_assert_int_eq(fake.takes, 1);
	ck_assert_ptr_eq(fake.taken, m);
	return m;
}

/*
 * A route to upstreams: the upstream kind takes the message, for the
 * route's to; an owner of the very address comes first for a line
 * client's message, the route first for an SMPP one (MSG_F_PREFIX_FIRST);
 * with a store on (not JetStream), the store takes it first, for the same
 * name.
 */
START_TEST(test_deliver_upstream_route)
{
	struct config *cf = unit_config(upstream_conf);
	struct reactor *r = reactor_new(0, cf);
	struct route_owner owner = {
		.kind = (enum route_owner_kind)FAKE_KIND, .conn = { 1, 2, 3 },
	};
	struct msg *m;

	memset(&fake, 0, sizeof(fake));
	memset(&fstore, 0, sizeof(fstore));
	ck_assert_int_eq(deliver_register(MSG_KIND_UPSTREAM, &fake_ops), 0);
	ck_assert_int_eq(deliver_register(FAKE_KIND, &fake_ops), 0);
	m = upstream_send(r, "+351911000000", 0);
	ck_assert_uint_eq(m->recipient.kind, MSG_KIND_UPSTREAM);
	ck_assert_str_eq(fake.taken_to, "upstream:opA");
	free(m);

	ck_assert_int_eq(route_claim("+351922000000", &owner), 0);
	m = upstream_send(r, "+351922000000", 0);
	ck_assert_uint_eq(m->recipient.kind, FAKE_KIND);
	ck_assert_str_eq(fake.taken_to, "+351922000000");
	free(m);
	m = upstream_send(r, "+351922000000", MSG_F_PREFIX_FIRST);
	ck_assert_uint_eq(m->recipient.kind, MSG_KIND_UPSTREAM);
	free(m);
	route_release("+351922000000", &owner);

	ck_assert_int_eq(deliver_register(MSG_KIND_STORE, &fstore_ops), 0);
	fstore.on = true;
	fstore_takes = 0;
	m = upstream_send(r, "+351911000000", 0);
	ck_assert_int_eq(fstore_takes, 1);
	ck_assert_str_eq(fake.taken_to, "upstream:opA");
	free(m);
	/* What the store hands out goes to the upstreams themselves. */
	m = upstream_send(r, "+351911000000", MSG_F_STORED);
	ck_assert_int_eq(fstore_takes, 1);
	ck_assert_uint_eq(m->recipient.kind, MSG_KIND_UPSTREAM);
	free(m);
	/* A JetStream store, which every node reads: not stored first. */
	cf->store.jetstream = true;
	m = upstream_send(r, "+351911000000", 0);
	ck_assert_int_eq(fstore_takes, 1);
	free(m);

	deliver_register(MSG_KIND_STORE, NULL);
	deliver_register(MSG_KIND_UPSTREAM, NULL);
	deliver_register(FAKE_KIND, NULL);
	reactor_free(r);
	config_unref(cf);
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
	tc = tcase_create("kinds");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_deliver_registered_kind);
	tcase_add_test(tc, test_deliver_unregistered_kind);
	tcase_add_test(tc, test_deliver_store_seam);
	tcase_add_test(tc, test_deliver_upstream_route);
	tcase_add_test(tc, test_deliver_node_held);
	tcase_add_test(tc, test_deliver_unrouted_store_msg);
	tcase_add_test(tc, test_deliver_recipient_leaving);
	suite_add_tcase(s, tc);
	return s;
}
