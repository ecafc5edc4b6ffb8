/* test_esme_in.c: what an upstream session takes from the SMS centre: a flood of MOs read a window at a time, a receipt matched and relayed with our id. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "mailbox.h"
#include "msg.h"
#include "proto.h"
#include "reactor.h"
#include "route.h"
#include "smpp_pdu.h"
#include "upstream.h"
#include "upstream_int.h"
#include "helpers.h"
#include "suites.h"

#define METRICS_ONLY							\
	"listeners = ( { name = \"m\"; address = \"127.0.0.1\"; "		\
	"port = 0; protocol = \"metrics\"; } );\n"
#define MO_WINDOW	3
#define MO_COUNT	10

static struct upstream_conf uc = {
	.name = "opT", .host = "127.0.0.1", .address = "127.0.0.1",
	.port = 2775, .bind = UPSTREAM_BIND_TRANSCEIVER, .system_id = "erd",
	.password = "secret", .sessions = 1, .window = MO_WINDOW,
	.enquire_link_interval = 30, .response_timeout = 10,
	.reconnect_min = 1, .reconnect_max = 60,
	.receipt_id = UPSTREAM_RECEIPT_AUTO,
};

static struct proto esme;

static void
esme_test_open(struct conn *c)
{
	upstream_fuzz_attach(c, &uc);
}

static void
put_pdu(int fd, const struct smpp_pdu *p)
{
	uint8_t buf[512];
	ssize_t n = smpp_encode(p, buf, sizeof(buf));

	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(write(fd, buf, (size_t)n), n);
}

static void
put_deliver(int fd, uint32_t seq, const char *dst, uint8_t esm,
    const char *text)
{
	struct smpp_pdu p = { .command_id = SMPP_DELIVER_SM,
	    .sequence_number = seq, .source_addr_ton = 1, .dest_addr_ton = 1,
	    .esm_class = esm, .sm_length = (uint8_t)strlen(text),
	    .short_message = (const uint8_t *)text };

	snprintf(p.source_addr, sizeof(p.source_addr), "351911");
	snprintf(p.destination_addr, sizeof(p.destination_addr), "%s", dst);
	put_pdu(fd, &p);
}

/*
 * The PDUs the session sent that fd has now (after the bind), as
 * command_id and status pairs in cmds and sts; how many.
 */
static unsigned
read_answers(int fd, uint32_t *cmds, uint32_t *sts, unsigned max)
{
	static uint8_t buf[65536];
	static size_t have;
	unsigned n = 0;
	ssize_t r;

	while ((r = read(fd, buf + have, sizeof(buf) - have)) > 0)
		have += (size_t)r;
	while (have >= 16 && n < max) {
		uint32_t len, id, st, seq;

		smpp_peek_header(buf, &len, &id, &st, &seq);
		if (len > have)
			break;
		if (id != SMPP_BIND_TRANSCEIVER) {
			cmds[n] = id;
			sts[n++] = st;
		}
		memmove(buf, buf + len, have - len);
		have -= len;
	}
	return n;
}

static void
turns(struct reactor *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		reactor_run_once(r, 0);
}

/* The session, bound, on r (driven by this thread); its peer end *peer. */
static struct conn *
esme_session(struct reactor *r, int *peer)
{
	struct smpp_pdu bresp = { .command_id = SMPP_BIND_TRANSCEIVER |
	    SMPP_RESP, .sequence_number = 1 };
	int sv[2];
	struct conn *c;

	esme = proto_esme;
	esme.on_open = esme_test_open;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	atomic_fetch_add(&conn_live, 1);
	c = conn_new(r, sv[0], &esme);
	ck_assert_ptr_nonnull(c);
	snprintf(bresp.system_id, sizeof(bresp.system_id), "sim");
	put_pdu(sv[1], &bresp);
	turns(r, 5);
	*peer = sv[1];
	return c;
}

static void
esme_session_end(struct reactor *r, int peer)
{
	close(peer);
	for (int i = 0; i < 1000 && conn_count(r) > 0; i++)
		reactor_run_once(r, 0);
	if (conn_count(r) > 0)
		conn_close_all(r);
	ck_assert_uint_eq(conn_count(r), 0);
}

/*
 * MOs for a recipient on another reactor wait there for their verdicts:
 * the session reads no more than its window of them meanwhile, and each
 * is answered by its verdict (no route: the recipient is not there).
 */
START_TEST(mo_flood_read_a_window_at_a_time)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf), *r1 = reactor_new(1, cf);
	struct route_owner far = route_owner_conn((struct conn_handle){
	    .reactor = 1, .slot = 7, .gen = 1 });
	uint32_t cmds[MO_COUNT + 1], sts[MO_COUNT + 1];
	unsigned posted = 0, answered = 0, n;
	int peer;

	ck_assert_int_eq(route_claim("+15551", &far), 0);
	esme_session(r0, &peer);
	for (uint32_t i = 0; i < MO_COUNT; i++)
		put_deliver(peer, 10 + i, "15551", 0, "flood");
	for (int round = 0; round < 50 && answered < MO_COUNT; round++) {
		turns(r0, 5);
		/* What reached the recipient's reactor: a window at most. */
		n = mailbox_drain(&r1->mb, r1, MAILBOX_RUN);
		ck_assert_uint_le(n, MO_WINDOW);
		posted += n;
		reactor_publish(r1);
		turns(r0, 5);
		n = read_answers(peer, cmds + answered, sts + answered,
		    MO_COUNT + 1 - answered);
		for (unsigned i = 0; i < n; i++) {
			ck_assert_uint_eq(cmds[answered + i],
			    SMPP_DELIVER_SM | SMPP_RESP);
			ck_assert_uint_eq(sts[answered + i],
			    SMPP_ESME_RINVDSTADR);
		}
		answered += n;
		ck_assert_uint_le(answered, posted);
	}
	ck_assert_uint_eq(posted, MO_COUNT);
	ck_assert_uint_eq(answered, MO_COUNT);
	esme_session_end(r0, peer);
	route_release("+15551", &far);
	reactor_free(r1);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/* Reads what fd has until want came, driving r, for up to 5 s. */
static bool
line_until(struct reactor *r, int fd, const char *want, char *got,
    size_t cap)
{
	size_t have = strlen(got);
	uint64_t deadline = unit_now_ms() + 5000;
	ssize_t n;

	while (strstr(got, want) == NULL && unit_now_ms() < deadline) {
		reactor_run_once(r, 10);
		if ((n = read(fd, got + have, cap - 1 - have)) > 0)
			have += (size_t)n;
		got[have] = '\0';
	}
	return strstr(got, want) != NULL;
}

/*
 * A line client logged in as alice on r with RECEIPTS ON; its peer end.
 * got has what it read so far.
 */
static int
alice_on(struct reactor *r, char *got, size_t cap)
{
	int lv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, lv), 0);
	atomic_fetch_add(&conn_live, 1);
	ck_assert_ptr_nonnull(conn_new(r, lv[0], &proto_router));
	ck_assert_int_eq(write(lv[1], "LOGIN alice\nRECEIPTS ON\n", 24), 24);
	ck_assert_msg(line_until(r, lv[1], "OK RECEIPTS ON\n", got, cap),
	    "got: %s", got);
	return lv[1];
}

/*
 * A receipt naming the SMSC's id in another form than its submit_sm_resp
 * gave reaches the submitter (a line client with RECEIPTS ON) as a RCPT
 * line with our id and the centre's stat, err and date; an intermediate
 * one is not passed on, and once the final one took the entry the same
 * receipt again matches nothing, at once: no submit is unanswered, so
 * no answer can file its id later. Each is answered ESME_ROK.
 */
START_TEST(receipt_matched_to_line_client)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf);
	const char *fmt = "id:%s sub:001 dlvrd:001 submit date:2611261830 "
	    "done date:2611261831 stat:%s err:%s text:hi";
	struct msg *m = msg_new(2);
	uint32_t cmds[4], sts[4];
	char got[1024] = "", text[160];
	int peer, lv[2] = { -1, -1 };

	lv[1] = alice_on(r0, got, sizeof(got));
	/* Message 42 went to opT, which called it "3039". */
	m->id = 42;
	m->registered_delivery = 1;
	snprintf(m->reply_to, sizeof(m->reply_to), "alice");
	snprintf(m->to, sizeof(m->to), "+351911");
	esme_receipt_record(cf, &uc, "3039", 4, m);
	free(m);
	esme_session(r0, &peer);
	snprintf(text, sizeof(text), fmt, "12345", "ENROUTE", "000");
	put_deliver(peer, 20, "alice", 0x04, text);
	snprintf(text, sizeof(text), fmt, "0000012345", "DELIVRD", "000");
	put_deliver(peer, 21, "alice", 0x04, text);
	ck_assert_msg(line_until(r0, lv[1], "RCPT 42 DELIVRD 000 2611261831\n",
	    got, sizeof(got)), "got: %s", got);
	put_deliver(peer, 22, "alice", 0x04, text);
	turns(r0, 20);
	ck_assert_uint_eq(read_answers(peer, cmds, sts, 4), 3);
	for (unsigned i = 0; i < 3; i++)
		ck_assert(cmds[i] == (SMPP_DELIVER_SM | SMPP_RESP) &&
		    sts[i] == SMPP_ESME_ROK);
	/* One RCPT line only: not the ENROUTE, not the unmatched repeat. */
	ck_assert_ptr_null(strstr(strstr(got, "RCPT") + 4, "RCPT"));
	ck_assert_ptr_null(strstr(got, "MSG"));
	ck_assert_uint_eq(upstream_receipt_ids(), 0);
	close(lv[1]);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/*
 * A receipt before the submit_sm_resp that files its id (a submit is
 * unanswered): unanswered while nothing matches it, then, once the id
 * is filed, passed to its submitter and answered ESME_ROK. One for an id
 * never filed is answered too, after upstream_receipts.wait, and passed
 * to nobody.
 */
START_TEST(receipt_before_its_id_waits_for_it)
{
	struct config *cf = unit_config(METRICS_ONLY
	    "upstream_receipts = { wait = 3; };\n");
	struct reactor *r0 = reactor_new(0, cf);
	const char *fmt = "id:%s sub:001 dlvrd:001 submit date:2611261830 "
	    "done date:2611261831 stat:DELIVRD err:000 text:hi";
	struct msg *m = msg_new(2);
	uint32_t cmds[4], sts[4];
	char got[1024] = "", text[160];
	uint64_t t0;
	struct conn *c;
	unsigned n = 0;
	int peer, lv[2] = { -1, -1 };

	lv[1] = alice_on(r0, got, sizeof(got));
	c = esme_session(r0, &peer);
	/* A submit goes and stays unanswered. */
	upstream_fuzz_submit(c, "in flight");
	turns(r0, 5);
	ck_assert_uint_eq(read_answers(peer, cmds, sts, 4), 1);
	ck_assert_uint_eq(cmds[0], SMPP_SUBMIT_SM);
	snprintf(text, sizeof(text), fmt, "E77");
	put_deliver(peer, 30, "alice", 0x04, text);
	for (int i = 0; i < 5; i++)
		reactor_run_once(r0, 10);
	ck_assert_uint_eq(read_answers(peer, cmds, sts, 4), 0);
	/* Message 43's submit_sm_resp comes now: the centre called it E77. */
	m->id = 43;
	m->registered_delivery = 1;
	snprintf(m->reply_to, sizeof(m->reply_to), "alice");
	snprintf(m->to, sizeof(m->to), "+351911");
	esme_receipt_record(cf, &uc, "E77", 3, m);
	free(m);
	ck_assert_msg(line_until(r0, lv[1], "RCPT 43 DELIVRD 000 2611261831\n",
	    got, sizeof(got)), "got: %s", got);
	turns(r0, 5);
	ck_assert_uint_eq(read_answers(peer, cmds, sts, 4), 1);
	ck_assert(cmds[0] == (SMPP_DELIVER_SM | SMPP_RESP) &&
	    sts[0] == SMPP_ESME_ROK);
	ck_assert_uint_eq(upstream_receipt_ids(), 0);
	/* An id nobody files: answered once the wait is over, not before. */
	snprintf(text, sizeof(text), fmt, "E78");
	t0 = unit_now_ms();
	put_deliver(peer, 31, "alice", 0x04, text);
	while ((n = read_answers(peer, cmds, sts, 4)) == 0 &&
	    unit_now_ms() < t0 + 10000)
		reactor_run_once(r0, 50);
	ck_assert_uint_eq(n, 1);
	ck_assert(cmds[0] == (SMPP_DELIVER_SM | SMPP_RESP) &&
	    sts[0] == SMPP_ESME_ROK);
	/* The reactor's clock is coarse: a tick's grain either way. */
	ck_assert_uint_ge(unit_now_ms() - t0, 2990);
	/* Nothing more reached alice: one RCPT line in all. */
	for (int i = 0; i < 10; i++) {
		size_t have = strlen(got);
		ssize_t k;

		reactor_run_once(r0, 10);
		if ((k = read(lv[1], got + have, sizeof(got) - 1 - have)) > 0)
			got[have + (size_t)k] = '\0';
	}
	ck_assert_ptr_null(strstr(strstr(got, "RCPT") + 4, "RCPT"));
	close(lv[1]);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/* Files the centre's id "R<n>" for message 1000 + n, for no submitter. */
static void
file_id(const struct config *cf, unsigned n)
{
	struct msg *m = msg_new(2);
	char id[16];

	m->id = 1000 + n;
	m->registered_delivery = 1;
	snprintf(m->to, sizeof(m->to), "+351911");
	snprintf(id, sizeof(id), "R%u", n);
	esme_receipt_record(cf, &uc, id, strlen(id), m);
	free(m);
}

/*
 * Drives r until peer has had want deliver_sm_resp in all (counting from
 * have) or deadline passes; how many it had.
 */
static unsigned
answers_until(struct reactor *r, int peer, unsigned have, unsigned want,
    uint64_t deadline)
{
	static uint32_t cmds[256], sts[256];
	unsigned k;

	while (have < want && unit_now_ms() < deadline) {
		reactor_run_once(r, 10);
		while ((k = read_answers(peer, cmds, sts, 256)) > 0)
			for (unsigned i = 0; i < k; i++)
				have += cmds[i] == (SMPP_DELIVER_SM | SMPP_RESP);
	}
	return have;
}

/*
 * More early receipts than a session keeps waiting (1024): its input
 * waits. Once the first 1024 ids are filed, answering those releases the
 * input, and the receipts read then (their ids not filed yet) wait on the
 * list being tried; filed in turn, they are answered too: every receipt
 * once, none lost.
 */
START_TEST(late_receipts_past_the_bound_all_answered)
{
	struct config *cf = unit_config(METRICS_ONLY
	    "upstream_receipts = { wait = 30; };\n");
	struct reactor *r0 = reactor_new(0, cf);
	const char *fmt = "id:R%u sub:001 dlvrd:001 submit date:2611261830 "
	    "done date:2611261831 stat:DELIVRD err:000 text:hi";
	uint32_t cmds[4], sts[4];
	char text[160];
	unsigned answered = 0;
	uint64_t deadline;
	struct conn *c;
	int peer;

	c = esme_session(r0, &peer);
	upstream_fuzz_submit(c, "in flight");
	turns(r0, 5);
	ck_assert_uint_eq(read_answers(peer, cmds, sts, 4), 1);
	/*
	 * A hundred at a time, each read whole: the one that fills the
	 * bound (the 1024th) is mid-read, so the input held keeps the 76
	 * after it, which its release hands over at once.
	 */
	for (unsigned n = 0; n < 1100; n++) {
		snprintf(text, sizeof(text), fmt, n);
		put_deliver(peer, 100 + n, "alice", 0x04, text);
		if (n % 100 == 99)
			turns(r0, 3);
	}
	turns(r0, 50);
	ck_assert_uint_eq(read_answers(peer, cmds, sts, 4), 0);
	for (unsigned n = 0; n < 1024; n++)
		file_id(cf, n);
	deadline = unit_now_ms() + 10000;
	answered = answers_until(r0, peer, answered, 1024, deadline);
	ck_assert_uint_eq(answered, 1024);
	for (unsigned n = 1024; n < 1100; n++)
		file_id(cf, n);
	answered = answers_until(r0, peer, answered, 1100, deadline);
	ck_assert_uint_eq(answered, 1100);
	ck_assert_uint_eq(upstream_receipt_ids(), 0);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/* The sequence numbers of the submit_sm fd has now, in seqs; how many. */
static unsigned
read_submits(int fd, uint32_t *seqs, unsigned max)
{
	uint8_t buf[4096];
	unsigned n = 0;
	ssize_t r;

	/* Each PDU is read whole: a submit_sm of a short text fits. */
	while (n < max && (r = read(fd, buf, 16)) == 16) {
		uint32_t len, id, st, seq;

		smpp_peek_header(buf, &len, &id, &st, &seq);
		ck_assert_uint_le(len, sizeof(buf));
		ck_assert_int_eq(read(fd, buf + 16, len - 16), (ssize_t)len - 16);
		if (id == SMPP_SUBMIT_SM)
			seqs[n++] = seq;
	}
	return n;
}

static void
put_submit_resp(int fd, uint32_t seq, const char *id)
{
	struct smpp_pdu p = { .command_id = SMPP_SUBMIT_SM | SMPP_RESP,
	    .sequence_number = seq };

	snprintf(p.message_id, sizeof(p.message_id), "%s", id);
	put_pdu(fd, &p);
}

/*
 * Answers in any order free the window: each takes its own submit out
 * (found where it was put, or by a search), the next submits go, and an
 * answer to a number never sent, or sent and answered, takes nothing.
 */
START_TEST(submit_answers_in_any_order)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf);
	struct upstream_sess *s;
	uint32_t seqs[16];
	struct conn *c;
	unsigned sent = 0, n;
	int peer;

	c = esme_session(r0, &peer);
	s = c->pdata;
	for (unsigned i = 0; i < 3 * MO_WINDOW; i++)
		upstream_fuzz_submit(c, "hello");
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 16), MO_WINDOW);
	ck_assert_uint_eq(s->inflight, MO_WINDOW);
	/* The last first, then a stranger, then the first twice, then the rest. */
	put_submit_resp(peer, seqs[MO_WINDOW - 1], "A1");
	put_submit_resp(peer, seqs[MO_WINDOW - 1] + 1000, "A2");
	put_submit_resp(peer, seqs[0], "A3");
	put_submit_resp(peer, seqs[0], "A4");
	turns(r0, 5);
	/* Two answers took two submits out; two more went. */
	ck_assert_uint_eq(s->inflight, MO_WINDOW);
	n = read_submits(peer, seqs + MO_WINDOW, 16 - MO_WINDOW);
	ck_assert_uint_eq(n, 2);
	for (unsigned i = 1; i < MO_WINDOW - 1; i++)
		put_submit_resp(peer, seqs[i], "B");
	put_submit_resp(peer, seqs[MO_WINDOW + 1], "B");
	put_submit_resp(peer, seqs[MO_WINDOW], "B");
	sent = MO_WINDOW + n;
	/* Then each answered as it comes, newest first. */
	for (unsigned round = 0; round < 20 && s->inflight + s->qlen > 0;
	    round++) {
		turns(r0, 5);
		n = read_submits(peer, seqs, 16);
		sent += n;
		while (n-- > 0)
			put_submit_resp(peer, seqs[n], "C");
		turns(r0, 5);
	}
	ck_assert_uint_eq(sent, 3 * MO_WINDOW);
	ck_assert_uint_eq(s->inflight, 0);
	ck_assert_uint_eq(s->qlen, 0);
	for (unsigned i = 0; i < s->wincap; i++)
		ck_assert_ptr_null(s->win[i].job);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/*
 * A generic_nack answers a submit with a refusal, whatever its status:
 * one of status 0 (no error named) is not the centre taking it.
 */
START_TEST(generic_nack_without_status_refuses)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf);
	struct smpp_pdu p = { .command_id = SMPP_GENERIC_NACK };
	struct upstream_sess *s;
	uint32_t seqs[4];
	struct conn *c;
	int peer;

	c = esme_session(r0, &peer);
	s = c->pdata;
	upstream_fuzz_submit(c, "hello");
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 4), 1);
	p.sequence_number = seqs[0];
	put_pdu(peer, &p);
	turns(r0, 5);
	ck_assert_uint_eq(s->inflight, 0);
	ck_assert_uint_eq(atomic_load(&s->stat->resp_failed), 1);
	ck_assert_uint_eq(upstream_slice(s->stat, r0)->resp_ok, 0);
	/* Refused for good: nothing goes again. */
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 4), 0);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/*
 * A window of MOs whose verdicts are slow holds the session's input, with
 * the centre's answer to our submit behind them: past response_timeout
 * that answer is unread, not late, and the link is not taken for dead.
 * Once the verdicts come, the answer is read and takes the submit.
 */
START_TEST(held_input_is_no_dead_link)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf), *r1 = reactor_new(1, cf);
	struct route_owner far = route_owner_conn((struct conn_handle){
	    .reactor = 1, .slot = 7, .gen = 1 });
	struct upstream_sess *s;
	uint32_t seqs[4];
	struct conn *c;
	int peer;

	ck_assert_int_eq(route_claim("+15551", &far), 0);
	c = esme_session(r0, &peer);
	s = c->pdata;
	upstream_fuzz_submit(c, "hello");
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 4), 1);
	for (uint32_t i = 0; i < MO_WINDOW; i++)
		put_deliver(peer, 10 + i, "15551", 0, "slow");
	turns(r0, 5);
	ck_assert(conn_is_held(c));
	put_submit_resp(peer, seqs[0], "X1");
	turns(r0, 5);
	ck_assert_uint_eq(s->inflight, 1);
	/* Past response_timeout, twice over, while held. */
	for (unsigned t = 1; t <= 2; t++) {
		r0->now += uc.response_timeout + 1;
		esme.on_tick(c);
		ck_assert(!conn_is_closing(c));
	}
	ck_assert_uint_eq(atomic_load(&s->stat->dead_links), 0);
	/* The verdicts (no route, as it happens): the input goes on. */
	ck_assert_uint_eq(mailbox_drain(&r1->mb, r1, MAILBOX_RUN), MO_WINDOW);
	reactor_publish(r1);
	turns(r0, 10);
	ck_assert(!conn_is_held(c));
	ck_assert_uint_eq(s->inflight, 0);
	ck_assert_uint_eq(upstream_slice(s->stat, r0)->resp_ok, 1);
	esme_session_end(r0, peer);
	route_release("+15551", &far);
	reactor_free(r1);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/*
 * The centre unbinds with submits unanswered, and its answers follow the
 * unbind: they are read and take their submits (not sent again, to
 * reach the handsets twice), and the session closes after the last.
 */
START_TEST(answers_after_the_centres_unbind_are_read)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf);
	struct smpp_pdu unbind = { .command_id = SMPP_UNBIND,
	    .sequence_number = 77 };
	uint32_t seqs[4], cmds[8], sts[8];
	struct upstream_stat *st;
	struct upstream_sess *s;
	struct conn *c;
	unsigned n;
	int peer;

	c = esme_session(r0, &peer);
	s = c->pdata;
	st = s->stat;
	upstream_fuzz_submit(c, "one");
	upstream_fuzz_submit(c, "two");
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 4), 2);
	put_pdu(peer, &unbind);
	put_submit_resp(peer, seqs[0], "U1");
	turns(r0, 5);
	ck_assert_uint_eq(s->inflight, 1);
	ck_assert_uint_eq(conn_count(r0), 1);
	put_submit_resp(peer, seqs[1], "U2");
	turns(r0, 5);
	ck_assert_uint_eq(upstream_slice(st, r0)->resp_ok, 2);
	n = read_answers(peer, cmds, sts, 8);
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_eq(cmds[0], SMPP_UNBIND | SMPP_RESP);
	/* Closing after the last answer: nothing went again. */
	ck_assert(conn_is_closing(c));
	turns(r0, 5);
	ck_assert_uint_eq(upstream_slice(st, r0)->submits, 2);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

/* A submit_sm_resp of status st for seq, with no id. */
static void
put_submit_status(int fd, uint32_t seq, uint32_t st)
{
	struct smpp_pdu p = { .command_id = SMPP_SUBMIT_SM | SMPP_RESP,
	    .command_status = st, .sequence_number = seq };

	put_pdu(fd, &p);
}

/*
 * A long text's first part taken, its second refused for a while
 * (ESME_RMSGQFUL: the handset's queue full, say): it goes again after
 * each pause, but once no part was taken for response_timeout the
 * message ends with that refusal, not tried for ever.
 */
START_TEST(part_refused_for_long_ends_the_message)
{
	struct config *cf = unit_config(METRICS_ONLY);
	struct reactor *r0 = reactor_new(0, cf);
	char text[201];
	struct upstream_sess *s;
	uint32_t seqs[8];
	struct conn *c;
	int peer;

	memset(text, 'x', 200);
	text[200] = '\0';
	c = esme_session(r0, &peer);
	s = c->pdata;
	upstream_fuzz_submit(c, text);
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 8), 2);
	put_submit_resp(peer, seqs[0], "P1");
	put_submit_status(peer, seqs[1], SMPP_ESME_RMSGQFUL);
	turns(r0, 5);
	ck_assert_uint_eq(s->inflight, 0);
	ck_assert_uint_eq(s->qlen, 1);
	/* The pause over, within response_timeout: it goes again. */
	atomic_store(&s->stat->paused_until, 0);
	upstream_sess_second(s);
	turns(r0, 5);
	ck_assert_uint_eq(s->inflight, 1);
	ck_assert_uint_eq(read_submits(peer, seqs, 8), 1);
	put_submit_status(peer, seqs[0], SMPP_ESME_RMSGQFUL);
	turns(r0, 5);
	ck_assert_uint_eq(s->qlen, 1);
	/* Refused for response_timeout since the first part: it ends. */
	ck_assert_ptr_nonnull(s->qhead);
	s->qhead->since_ms -= (uint64_t)uc.response_timeout * 1000;
	upstream_sess_second(s);
	ck_assert_uint_eq(s->qlen, 0);
	ck_assert_uint_eq(s->inflight, 0);
	atomic_store(&s->stat->paused_until, 0);
	upstream_sess_second(s);
	turns(r0, 5);
	ck_assert_uint_eq(read_submits(peer, seqs, 8), 0);
	esme_session_end(r0, peer);
	reactor_free(r0);
	config_unref(cf);
}
END_TEST

Suite *
esme_in_suite(void)
{
	Suite *s = suite_create("esme_in");
	TCase *tc = tcase_create("esme_in");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, mo_flood_read_a_window_at_a_time);
	tcase_add_test(tc, receipt_matched_to_line_client);
	tcase_add_test(tc, receipt_before_its_id_waits_for_it);
	tcase_add_test(tc, late_receipts_past_the_bound_all_answered);
	tcase_add_test(tc, submit_answers_in_any_order);
	tcase_add_test(tc, generic_nack_without_status_refuses);
	tcase_add_test(tc, held_input_is_no_dead_link);
	tcase_add_test(tc, answers_after_the_centres_unbind_are_read);
	tcase_add_test(tc, part_refused_for_long_ends_the_message);
	suite_add_tcase(s, tc);
	return s;
}
