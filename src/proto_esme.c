/* proto_esme.c: the ESME side of SMPP on an upstream session: bind, enquire_link, unbind, and answers to the SMS centre (what it delivers: esme_in.c). */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "log.h"
#include "proto.h"
#include "smpp_pdu.h"
#include "transport_tls.h"
#include "upstream.h"
#include "upstream_int.h"

/* Room for any PDU we send: a bind is the longest, about 100 bytes. */
#define ESME_PDU_MAX	256

static ssize_t
esme_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	return smpp_frame_len(p, n, lim->max_pdu_size);
}

static void
esme_send(struct conn *c, const struct smpp_pdu *p)
{
	uint8_t buf[ESME_PDU_MAX];
	ssize_t n = smpp_encode(p, buf, sizeof(buf));

	if (n > 0)
		conn_write(c, buf, (size_t)n);
}

/* Sends request cmd, waiting for its answer within response_timeout. */
static void
esme_request(struct conn *c, struct upstream_sess *s, struct smpp_pdu *p)
{
	s->seq = s->seq >= 0x7fffffffu ? 1 : s->seq + 1;
	p->sequence_number = s->seq;
	s->pending_seq = s->seq;
	s->pending_cmd = p->command_id;
	s->pending_since = c->r->now;
	esme_send(c, p);
}

static void
esme_answer(struct conn *c, uint32_t cmd, uint32_t status, uint32_t seq)
{
	struct smpp_pdu p = { .command_id = cmd, .command_status = status,
	    .sequence_number = seq };

	esme_send(c, &p);
}

static void
esme_bind(struct conn *c)
{
	struct upstream_sess *s = c->pdata;
	const struct upstream_conf *uc = s->uc;
	struct smpp_pdu p = { .command_id = s->bind_cmd,
	    .interface_version = 0x34 };

	snprintf(p.system_id, sizeof(p.system_id), "%s", uc->system_id);
	snprintf(p.password, sizeof(p.password), "%s", uc->password);
	snprintf(p.system_type, sizeof(p.system_type), "%s", uc->system_type);
	snprintf(p.address_range, sizeof(p.address_range), "%s",
	    uc->address_range);
	s->state = UPSTREAM_BINDING;
	s->last_enquire = c->r->now;
	esme_request(c, s, &p);
}

/*
 * The bind goes once the transport can carry it: over TLS, a bind queued
 * during the handshake was seen to reach no server (OpenSSL 3, TLS 1.3),
 * so it waits for the handshake's end; the TLS handshake_timeout bounds
 * that.
 */
void
esme_open(struct conn *c)
{
	struct upstream_sess *s = c->pdata;

	s->state = UPSTREAM_OPENING;
	s->mo_pending = 0;
	s->late = 0;
	s->centre_unbound = false;
	if (tls_is_handshaken(c->xp))
		esme_bind(c);
}

void
esme_unbind(struct conn *c)
{
	struct upstream_sess *s = c->pdata;
	struct smpp_pdu p = { .command_id = SMPP_UNBIND };

	/* Submits go to other sessions from now; answers still come. */
	upstream_sess_list(s, false);
	s->state = UPSTREAM_UNBINDING;
	esme_request(c, s, &p);
}

/* The answer to a bind: bound, or refused (named once per episode). */
static void
esme_bind_resp(struct conn *c, struct upstream_sess *s,
    const struct smpp_pdu *p)
{
	char why[96];

	if (s->state != UPSTREAM_BINDING)
		return;
	s->pending_cmd = 0;
	if (p->command_status == SMPP_ESME_ROK) {
		upstream_sess_bound(s);
		return;
	}
	atomic_fetch_add(&s->stat->bind_failures, 1);
	upstream_sess_fail(s, UPSTREAM_FAIL_BIND | p->command_status,
	    "bind refused: %s", upstream_status_text(p->command_status, why,
	    sizeof(why)));
	s->state = UPSTREAM_CLOSING;
	conn_close_after_flush(c, CONN_CLOSE_QUIT);
}

/* A response: to the request we wait for, or to nothing we sent. */
static void
esme_response(struct conn *c, struct upstream_sess *s,
    const struct smpp_pdu *p)
{
	uint32_t req = p->command_id & ~SMPP_RESP;
	struct smpp_pdu nack;

	/*
	 * A generic_nack is a refusal: one that names no error (status 0)
	 * takes no submit and makes no bind, it is the centre's failure.
	 */
	if (p->command_id == SMPP_GENERIC_NACK &&
	    p->command_status == SMPP_ESME_ROK) {
		nack = *p;
		nack.command_status = SMPP_ESME_RSYSERR;
		p = &nack;
	}

	if ((p->command_id == (SMPP_SUBMIT_SM | SMPP_RESP) ||
	    p->command_id == SMPP_GENERIC_NACK) &&
	    upstream_sess_answer(s, p->sequence_number, p->command_status,
	    p->message_id)) {
		/* The last answer the centre's unbind waited for. */
		if (s->centre_unbound && s->inflight == 0) {
			s->state = UPSTREAM_CLOSING;
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
		}
		return;
	}
	if (s->pending_cmd == 0 || p->sequence_number != s->pending_seq ||
	    (req != s->pending_cmd && p->command_id != SMPP_GENERIC_NACK)) {
		log_debug("upstream %s: link %u: %s for sequence %u, which "
		    "awaits no answer: ignored", s->uc->name, s->link,
		    smpp_command_name(p->command_id), p->sequence_number);
		return;
	}
	switch (s->pending_cmd) {
	case SMPP_BIND_RECEIVER:
	case SMPP_BIND_TRANSMITTER:
	case SMPP_BIND_TRANSCEIVER:
		esme_bind_resp(c, s, p);
		break;
	case SMPP_UNBIND:
		s->pending_cmd = 0;
		s->state = UPSTREAM_CLOSING;
		conn_close_after_flush(c, CONN_CLOSE_QUIT);
		break;
	default:
		s->pending_cmd = 0;
	}
}

/*
 * The SMS centre ends the session: answered, then a reconnect. Its
 * answers to submits still unanswered may follow its unbind: they are
 * read (for response_timeout at most), not left unread and the submits
 * sent again elsewhere, to reach the handsets twice.
 */
static void
esme_unbound(struct conn *c, struct upstream_sess *s,
    const struct smpp_pdu *p)
{
	bool ours = s->state == UPSTREAM_UNBINDING;

	esme_answer(c, SMPP_UNBIND | SMPP_RESP, SMPP_ESME_ROK,
	    p->sequence_number);
	atomic_fetch_add(&s->stat->unbinds, 1);
	if (!s->removed && !s->restart)
		upstream_sess_fail(s, UPSTREAM_FAIL_UNBIND, "the SMS centre "
		    "unbound");
	upstream_sess_list(s, false);
	if (s->inflight > 0 && !ours) {
		s->state = UPSTREAM_UNBINDING;
		s->centre_unbound = true;
		s->pending_cmd = 0;
		s->pending_since = c->r->now;
		return;
	}
	s->state = UPSTREAM_CLOSING;
	conn_close_after_flush(c, CONN_CLOSE_QUIT);
}

void
esme_handle(struct conn *c, const struct smpp_pdu *p)
{
	struct upstream_sess *s = c->pdata;

	if (s->state == UPSTREAM_CLOSING)
		return;
	if (p->command_id & SMPP_RESP) {
		esme_response(c, s, p);
		return;
	}
	switch (p->command_id) {
	case SMPP_ENQUIRE_LINK:
		esme_answer(c, SMPP_ENQUIRE_LINK | SMPP_RESP, SMPP_ESME_ROK,
		    p->sequence_number);
		break;
	case SMPP_UNBIND:
		esme_unbound(c, s, p);
		break;
	case SMPP_DELIVER_SM:
	case SMPP_DATA_SM:
		esme_deliver(c, p);
		break;
	default:
		esme_answer(c, SMPP_GENERIC_NACK, SMPP_ESME_RINVCMDID,
		    p->sequence_number);
	}
}

static int
esme_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	struct upstream_sess *s = c->pdata;
	struct smpp_pdu p;
	uint32_t st;

	if (s == NULL)
		return 0;
	memset(&p, 0, sizeof(p));
	st = smpp_decode(msg, len, &p);
	/*
	 * An answer's header is all we read of it: a refused bind has no
	 * body. A submit_sm_resp whose message_id did not decode (over 64
	 * octets) has none.
	 */
	if (st != SMPP_ESME_ROK && p.command_id == (SMPP_SUBMIT_SM | SMPP_RESP))
		p.message_id[0] = '\0';
	if (st == SMPP_ESME_ROK || (p.command_id & SMPP_RESP)) {
		esme_handle(c, &p);
		return 0;
	}
	if (conn_log_allowed(c))
		log_info("upstream %s: link %u: malformed %s from the SMS "
		    "centre (status 0x%x)", s->uc->name, s->link,
		    smpp_command_name(p.command_id), st);
	esme_answer(c, SMPP_GENERIC_NACK, st, p.sequence_number);
	return 0;
}

/* The link is dead when a request goes unanswered; enquire_link keeps it. */
static void
esme_on_tick(struct conn *c)
{
	struct upstream_sess *s = c->pdata;
	uint32_t now = c->r->now;
	struct smpp_pdu p = { .command_id = SMPP_ENQUIRE_LINK };

	if (s == NULL || s->state == UPSTREAM_CLOSING)
		return;
	if (s->state == UPSTREAM_OPENING) {
		if (tls_is_handshaken(c->xp))
			esme_bind(c);
		return;
	}
	/* The centre unbound: its last answers, or the close. */
	if (s->centre_unbound) {
		if (now - s->pending_since >= s->uc->response_timeout) {
			s->state = UPSTREAM_CLOSING;
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
		}
		return;
	}
	/*
	 * Input waits here (a window of the centre's messages awaits their
	 * verdicts): its answers to us are unread, not late. Their time
	 * starts again once it is read, and nothing is asked meanwhile.
	 */
	if (conn_is_held(c)) {
		if (s->pending_cmd != 0)
			s->pending_since = now;
		upstream_sess_unread(s, now);
		return;
	}
	if ((s->pending_cmd != 0 &&
	    now - s->pending_since >= s->uc->response_timeout) ||
	    upstream_sess_overdue(s, now)) {
		uint32_t cmd = s->pending_cmd != 0 &&
		    now - s->pending_since >= s->uc->response_timeout ?
		    s->pending_cmd : SMPP_SUBMIT_SM;

		if (cmd == SMPP_ENQUIRE_LINK || cmd == SMPP_SUBMIT_SM)
			atomic_fetch_add(&s->stat->dead_links, 1);
		upstream_sess_fail(s, UPSTREAM_FAIL_DEAD, "no answer to %s in "
		    "%us: the link is dead", smpp_command_name(cmd),
		    s->uc->response_timeout);
		upstream_sess_list(s, false);
		s->state = UPSTREAM_CLOSING;
		conn_close(c, CONN_CLOSE_TIMEOUT);
		return;
	}
	if (s->state == UPSTREAM_BOUND && s->pending_cmd == 0 &&
	    s->uc->enquire_link_interval > 0 &&
	    now - s->last_enquire >= s->uc->enquire_link_interval) {
		s->last_enquire = now;
		esme_request(c, s, &p);
	}
}

/* SIGTERM: a bound session unbinds and closes on the answer. */
static bool
esme_on_stop(struct conn *c)
{
	struct upstream_sess *s = c->pdata;

	if (s == NULL || s->state != UPSTREAM_BOUND)
		return false;
	esme_unbind(c);
	return true;
}

static void
esme_on_close(struct conn *c)
{
	upstream_conn_closed(c);
}

const struct proto proto_esme = {
	.name = "smpp-upstream",
	.frame_len = esme_frame_len,
	.on_message = esme_on_message,
	.on_tick = esme_on_tick,
	.on_stop = esme_on_stop,
	.on_close = esme_on_close,
	.on_verdict = esme_verdict,
};
