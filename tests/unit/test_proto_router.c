/* test_proto_router.c: the router protocol's line framer, at a guard page; eviction; SMPP parts joined; RECEIPTS and RCPT lines. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "counter.h"
#include "deliver.h"
#include "helpers.h"
#include "msg.h"
#include "proto.h"
#include "reactor.h"
#include "route.h"
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

/*
 * Reads from fd until want's bytes came (true) or 5 s passed; what came
 * is in got (cap bytes, NUL-terminated). EOF ends it early.
 */
static bool
read_until(int fd, const char *want, char *got, size_t cap, bool *eof)
{
	size_t have = 0;
	uint64_t deadline = unit_now_ms() + 5000;

	got[0] = '\0';
	*eof = false;
	while (strstr(got, want) == NULL && unit_now_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 50) <= 0)
			continue;
		if ((n = read(fd, got + have, cap - 1 - have)) == 0) {
			*eof = true;
			break;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (n > 0)
			have += (size_t)n;
		got[have] = '\0';
	}
	return strstr(got, want) != NULL;
}

/*
 * A router session on started reactor r, its client end sv[0], logged in
 * as addr (the OK read).
 */
static void
router_session(struct reactor *r, int sv[2], const char *addr)
{
	char line[128], got[512];
	bool eof;
	int n;

	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(reactor_start(r), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_router, 0, NULL, NULL);
	n = snprintf(line, sizeof(line), "LOGIN %s\n", addr);
	ck_assert_int_eq(write(sv[0], line, (size_t)n), n);
	snprintf(line, sizeof(line), "OK LOGIN %s\n", addr);
	ck_assert_msg(read_until(sv[0], line, got, sizeof(got), &eof),
	    "got: %s", got);
}

/*
 * proto_evict reaches the session on its reactor, and the router says
 * why (ERR 409) before it closes; a stale handle or a reactor that does
 * not exist evicts nobody.
 */
START_TEST(test_router_evicted_says_409)
{
	struct config *cf = unit_config("shutdown_timeout = 1;\n"
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"router\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	struct route_owner o;
	struct conn_handle stale;
	char got[512];
	bool eof;
	int sv[2];

	router_session(r, sv, "t-evicted");
	ck_assert(route_lookup("t-evicted", &o));
	ck_assert_int_eq(o.kind, ROUTE_OWNER_CONN);
	/* Another generation of the slot: not this session. */
	stale = o.conn;
	stale.gen++;
	ck_assert_int_eq(proto_evict(&stale, PROTO_EVICT_CLAIM_LOST), 0);
	stale = o.conn;
	stale.reactor = CONFIG_DISPATCHERS_MAX;
	ck_assert_int_eq(proto_evict(&stale, PROTO_EVICT_CLAIM_LOST), -1);
	ck_assert_int_eq(write(sv[0], "PING still\n", 11), 11);
	ck_assert_msg(read_until(sv[0], "PONG still\n", got, sizeof(got),
	    &eof), "got: %s", got);
	ck_assert_int_eq(proto_evict(&o.conn, PROTO_EVICT_CLAIM_LOST), 0);
	ck_assert_msg(read_until(sv[0], "ERR 409 address taken by another "
	    "node while this one was cut off\n", got, sizeof(got), &eof),
	    "got: %s", got);
	/* Then the session ends: EOF, and the connection is freed. */
	if (!eof)
		read_until(sv[0], "(never)", got, sizeof(got), &eof);
	ck_assert(eof);
	for (int i = 0; i < 500 && atomic_load(&conn_live) != 0; i++)
		unit_sleep_ms(10);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	close(sv[0]);
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

static void
forward_task(void *owner, void *arg, enum mailbox_status st)
{
	if (st == MAILBOX_RUN)
		deliver_forward(owner, arg);
	else
		free(arg);
}

/*
 * Sends bob's GSM 03.38 part (udh, then text) to address to on r, as an
 * SMPP client's message routed there would come.
 */
static void
post_part(struct reactor *r, const char *to, const uint8_t *udh, size_t hl,
    const char *text, uint64_t id)
{
	size_t n = strlen(text);
	struct msg *m = msg_new(hl + n);

	memcpy(m->text, udh, hl);
	memcpy(m->text + hl, text, n);
	m->len = hl + n;
	m->id = id;
	m->flags = MSG_F_CODED | MSG_F_EXACT;
	m->esm_class = 0x40;
	snprintf(m->from, sizeof(m->from), "bob");
	snprintf(m->reply_to, sizeof(m->reply_to), "bob");
	snprintf(m->to, sizeof(m->to), "%s", to);
	reactor_post(r, forward_task, m);
}

static uint64_t
join_count(struct reactor *r, enum counter_id id)
{
	return counter_get(&r->counters, id);
}

/* Waits up to 5 s for counter id of r to read want. */
static bool
join_count_is(struct reactor *r, enum counter_id id, uint64_t want)
{
	for (int i = 0; i < 500 && join_count(r, id) != want; i++)
		unit_sleep_ms(10);
	return join_count(r, id) == want;
}

/*
 * Parts for a router session are held until all are in (the gauges count
 * them), then written as one line with the first part's id; a message
 * whose parts do not all come within reassembly_timeout is given up
 * (counted, nothing written), and so is one whose session closes.
 */
START_TEST(test_router_joins_parts)
{
	struct config *cf = unit_config("shutdown_timeout = 1;\n"
	    "smpp = { reassembly_timeout = 1; };\n"
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"router\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	const uint8_t u1[] = { 5, 0, 3, 42, 3, 1 }, u2[] = { 5, 0, 3, 42, 3, 2 },
	    u3[] = { 5, 0, 3, 42, 3, 3 };
	char got[512];
	bool eof;
	int sv[2];

	router_session(r, sv, "t-join");
	post_part(r, "t-join", u3, sizeof(u3), "end", 103);
	post_part(r, "t-join", u1, sizeof(u1), "one, ", 101);
	ck_assert(join_count_is(r, COUNTER_JOIN_HELD, 2));
	/* Their octets (8) and what keeping them costs. */
	ck_assert_uint_gt(join_count(r, COUNTER_JOIN_BYTES), 8);
	post_part(r, "t-join", u2, sizeof(u2), "two, ", 102);
	ck_assert_msg(read_until(sv[0], "MSG 101 bob one, two, end\n", got,
	    sizeof(got), &eof), "got: %s", got);
	ck_assert_uint_eq(unit_count_lines(got), 1);
	ck_assert(join_count_is(r, COUNTER_JOIN_HELD, 0));
	ck_assert_uint_eq(join_count(r, COUNTER_JOIN_BYTES), 0);
	ck_assert_uint_eq(join_count(r, COUNTER_JOIN_JOINED), 1);
	/* Part 2 never comes: given up within a second or two. */
	post_part(r, "t-join", u1, sizeof(u1), "lonely", 201);
	ck_assert(join_count_is(r, COUNTER_JOIN_INCOMPLETE, 1));
	ck_assert_uint_eq(join_count(r, COUNTER_JOIN_HELD), 0);
	/* Nor here, and the session closes: given up at once. */
	post_part(r, "t-join", u1, sizeof(u1), "left", 301);
	ck_assert(join_count_is(r, COUNTER_JOIN_HELD, 1));
	ck_assert_int_eq(write(sv[0], "PING end\n", 9), 9);
	ck_assert_msg(read_until(sv[0], "PONG end\n", got, sizeof(got),
	    &eof), "got: %s", got);
	ck_assert_ptr_null(strstr(got, "MSG"));
	close(sv[0]);
	ck_assert(join_count_is(r, COUNTER_JOIN_HELD, 0));
	ck_assert_uint_eq(join_count(r, COUNTER_JOIN_INCOMPLETE), 2);
	for (int i = 0; i < 500 && atomic_load(&conn_live) != 0; i++)
		unit_sleep_ms(10);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

/* A receipt for our message 42 to address to on r, as an SMSC's relayed. */
static void
post_receipt(struct reactor *r, const char *to, const char *stat)
{
	char text[160];
	int n = snprintf(text, sizeof(text), "id:42 sub:001 dlvrd:001 submit "
	    "date:2611261830 done date:2611261831 stat:%s err:000 text:", stat);
	struct msg *m = msg_new((size_t)n);

	memcpy(m->text, text, (size_t)n);
	m->len = (size_t)n;
	m->id = 900;
	m->flags = MSG_F_EXACT | MSG_F_RECEIPT;
	m->esm_class = 0x04;
	snprintf(m->receipted_id, sizeof(m->receipted_id), "42");
	snprintf(m->from, sizeof(m->from), "+351911");
	snprintf(m->to, sizeof(m->to), "%s", to);
	reactor_post(r, forward_task, m);
}

/*
 * RECEIPTS ON makes receipts RCPT lines (a stat that is not a word
 * shows as "-"); OFF, they come as before, as MSG lines; anything but
 * ON or OFF is a usage error.
 */
START_TEST(test_router_receipts_lines)
{
	struct config *cf = unit_config("shutdown_timeout = 1;\n"
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"router\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	char got[512];
	bool eof;
	int sv[2];

	router_session(r, sv, "t-rcpt");
	ck_assert_int_eq(write(sv[0], "RECEIPTS maybe\nreceipts on\n", 27), 27);
	ck_assert_msg(read_until(sv[0], "ERR 400 usage: RECEIPTS ON|OFF\n"
	    "OK RECEIPTS ON\n", got, sizeof(got), &eof), "got: %s", got);
	post_receipt(r, "t-rcpt", "DELIVRD");
	ck_assert_msg(read_until(sv[0], "RCPT 42 DELIVRD 000 2611261831\n", got,
	    sizeof(got), &eof), "got: %s", got);
	post_receipt(r, "t-rcpt", "UND\001LV");
	ck_assert_msg(read_until(sv[0], "RCPT 42 - 000 2611261831\n", got,
	    sizeof(got), &eof), "got: %s", got);
	ck_assert_int_eq(write(sv[0], "RECEIPTS OFF\n", 13), 13);
	ck_assert_msg(read_until(sv[0], "OK RECEIPTS OFF\n", got, sizeof(got),
	    &eof), "got: %s", got);
	post_receipt(r, "t-rcpt", "DELIVRD");
	ck_assert_msg(read_until(sv[0], "MSG 900 +351911 id:42 ", got,
	    sizeof(got), &eof), "got: %s", got);
	close(sv[0]);
	for (int i = 0; i < 500 && atomic_load(&conn_live) != 0; i++)
		unit_sleep_ms(10);
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

/* A cluster that keeps the claim it is asked for, to be answered later. */
static struct route_claim *_Atomic held_claim;

static bool
wide_up(void)
{
	return true;
}

static void
wide_claim(struct route_claim *q)
{
	atomic_store(&held_claim, q);
}

static void
wide_release(const char *addr)
{
	(void)addr;
}

static const struct route_wide_ops wide_ops = {
	.up = wide_up, .claim = wide_claim, .release = wide_release,
};

/* A store that records what its handed-out messages became. */
static pthread_mutex_t fs_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned fs_answered, fs_delivered, fs_returned;

static bool
fs_on(void)
{
	return true;
}

static void
fs_answer(struct reactor_batch *b, struct msg *m)
{
	(void)b;
	pthread_mutex_lock(&fs_lock);
	fs_answered++;
	pthread_mutex_unlock(&fs_lock);
	msg_free(m);
}

static void
fs_outcome(struct msg *m, enum msg_outcome o)
{
	pthread_mutex_lock(&fs_lock);
	if (o == MSG_OUT_DELIVERED)
		fs_delivered++;
	else
		fs_returned++;
	pthread_mutex_unlock(&fs_lock);
	msg_free(m);
}

static void
fs_wake(const char *address)
{
	(void)address;
}

static const struct deliver_kind_ops fs_ops = {
	.name = "fake store", .on = fs_on, .answer = fs_answer,
	.outcome = fs_outcome, .wake = fs_wake,
};

static unsigned
fs_count(unsigned *n)
{
	unsigned v;

	pthread_mutex_lock(&fs_lock);
	v = *n;
	pthread_mutex_unlock(&fs_lock);
	return v;
}

/* The store hands out message id, text text, for address to, on r. */
static void
post_stored(struct reactor *r, const char *to, uint64_t id, const char *text)
{
	size_t n = strlen(text);
	struct msg *m = msg_new(n);

	memcpy(m->text, text, n);
	m->len = n;
	m->id = id;
	m->flags = MSG_F_STORED | MSG_F_NO_VERDICT | MSG_F_LINE_TEXT;
	snprintf(m->from, sizeof(m->from), "alice");
	snprintf(m->to, sizeof(m->to), "%s", to);
	ck_assert(route_lookup(to, &m->recipient));
	reactor_post(r, deliver_stored_task, m);
}

/* The store hands out its receipt for our message 42, for address to. */
static void
post_stored_receipt(struct reactor *r, const char *to)
{
	static const char text[] = "id:42 sub:001 dlvrd:001 submit "
	    "date:2611261830 done date:2611261831 stat:DELIVRD err:000 text:";
	struct msg *m = msg_new(sizeof(text) - 1);

	memcpy(m->text, text, sizeof(text) - 1);
	m->len = sizeof(text) - 1;
	m->id = 900;
	m->flags = MSG_F_STORED | MSG_F_NO_VERDICT | MSG_F_EXACT |
	    MSG_F_RECEIPT;
	m->esm_class = 0x04;
	snprintf(m->receipted_id, sizeof(m->receipted_id), "42");
	snprintf(m->from, sizeof(m->from), "+351911");
	snprintf(m->to, sizeof(m->to), "%s", to);
	ck_assert(route_lookup(to, &m->recipient));
	reactor_post(r, deliver_stored_task, m);
}

/*
 * A router session on r (its client end sv[0]) sends what (LOGIN t-claim
 * last), and the cluster agrees: found here from now on, the answer not
 * yet sent.
 */
static struct route_claim *
claim_agreed(struct reactor *r, int sv[2], const char *what)
{
	struct route_claim *q = NULL;
	ssize_t n = (ssize_t)strlen(what);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_router, 0, NULL, NULL);
	ck_assert_int_eq(write(sv[0], what, (size_t)n), n);
	for (int i = 0; i < 500 && (q = atomic_load(&held_claim)) == NULL; i++)
		unit_sleep_ms(10);
	ck_assert_ptr_nonnull(q);
	atomic_store(&held_claim, NULL);
	route_confirm(q->addr, &(struct route_owner){ .kind =
	    ROUTE_OWNER_CONN, .conn = q->conn });
	return q;
}

/*
 * In a cluster, the route of a LOGIN is found here as soon as the cluster
 * agrees, while the answer is still on its way to the session: the store
 * may hand the address its backlog then. Those messages (and a receipt,
 * as an RCPT line) wait behind the OK and come in their order (none
 * refused, which would let later ones pass them), each leaving the store
 * once the client has its line; and one still queued when the session
 * closes goes back to the store.
 */
START_TEST(test_router_stored_behind_login)
{
	struct config *cf = unit_config("shutdown_timeout = 1;\n"
	    "listeners = ( { name = \"r\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"router\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	struct route_claim *q;
	char got[1024];
	bool eof;
	int sv[2];

	route_wide_register(&wide_ops);
	ck_assert_int_eq(deliver_register(MSG_KIND_STORE, &fs_ops), 0);
	ck_assert_int_eq(reactor_start(r), 0);
	q = claim_agreed(r, sv, "RECEIPTS ON\nLOGIN t-claim\n");
	ck_assert_msg(read_until(sv[0], "OK RECEIPTS ON\n", got, sizeof(got),
	    &eof), "got: %s", got);
	post_stored(r, "t-claim", 1, "first");
	post_stored(r, "t-claim", 2, "second");
	post_stored_receipt(r, "t-claim");
	post_stored(r, "t-claim", 3, "third");
	/* Nothing before the OK, and nothing refused meanwhile. */
	unit_sleep_ms(200);
	ck_assert_int_lt(read(sv[0], got, sizeof(got)), 0);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_eq(fs_count(&fs_answered), 0);
	ck_assert_uint_eq(fs_count(&fs_returned), 0);
	/* The answer reaches the session. */
	q->result = ROUTE_CLAIMED;
	reactor_post(r, q->done, q);
	ck_assert_msg(read_until(sv[0], "OK LOGIN t-claim\n"
	    "MSG 1 alice first\nMSG 2 alice second\n"
	    "RCPT 42 DELIVRD 000 2611261831\nMSG 3 alice third\n",
	    got, sizeof(got), &eof), "got: %s", got);
	for (int i = 0; i < 500 && fs_count(&fs_delivered) < 4; i++)
		unit_sleep_ms(10);
	ck_assert_uint_eq(fs_count(&fs_delivered), 4);
	ck_assert_uint_eq(fs_count(&fs_answered), 0);
	close(sv[0]);
	for (int i = 0; i < 500 && atomic_load(&conn_live) != 0; i++)
		unit_sleep_ms(10);
	ck_assert_uint_eq(fs_count(&fs_returned), 0);

	/* Again, and the client leaves before the answer. */
	q = claim_agreed(r, sv, "LOGIN t-claim\n");
	post_stored(r, "t-claim", 4, "fourth");
	unit_sleep_ms(200);
	close(sv[0]);
	for (int i = 0; i < 500 && atomic_load(&conn_live) != 0; i++)
		unit_sleep_ms(10);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	ck_assert_uint_eq(fs_count(&fs_returned), 1);
	ck_assert_uint_eq(fs_count(&fs_answered), 0);
	q->result = ROUTE_CLAIMED;
	reactor_post(r, q->done, q);	/* nobody to tell: it is freed */
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	deliver_register(MSG_KIND_STORE, NULL);
	route_wide_register(NULL);
	config_unref(cf);
}
END_TEST

Suite *
proto_router_suite(void)
{
	Suite *s = suite_create("proto_router");
	TCase *tc = tcase_create("framing");
	TCase *ev = tcase_create("evict");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_router_frame_bytewise);
	tcase_add_test(tc, test_router_frame_several_and_long);
	suite_add_tcase(s, tc);
	tcase_set_timeout(ev, 30);
	tcase_add_test(ev, test_router_evicted_says_409);
	tcase_add_test(ev, test_router_joins_parts);
	tcase_add_test(ev, test_router_receipts_lines);
	tcase_add_test(ev, test_router_stored_behind_login);
	suite_add_tcase(s, ev);
	return s;
}
