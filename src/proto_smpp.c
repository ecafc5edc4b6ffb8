/* proto_smpp.c: the SMPP 3.4 front end: binds, submit_sm routing, deliver_sm windows, receipts. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "conn.h"
#include "deliver.h"
#include "log.h"
#include "proto.h"
#include "route.h"
#include "smpp_acct.h"
#include "smpp_long.h"
#include "smpp_msg.h"
#include "smpp_pdu.h"
#include "smpp_receipt.h"
#include "smpp_time.h"
#include "text.h"
#include "util.h"

/* Submits awaiting a verdict from another reactor before input is held. */
#define SMPP_MAX_PENDING	1024
#define SMPP_INTERFACE_VERSION	0x34

enum smpp_state {
	SMPP_OPEN,		/* not bound yet */
	SMPP_BOUND_TX,
	SMPP_BOUND_RX,
	SMPP_BOUND_TRX,
};

/*
 * A deliver_sm sent and not yet answered. m == NULL: a free slot. The
 * parts of a long text each take a slot; they share m and lp.
 */
struct smpp_slot {
	uint32_t seq;
	uint32_t sent_at;
	uint64_t sent_ns;		/* for HIST_DELIVER_SM */
	struct msg *m;
	struct smpp_long *lp;		/* its parts; NULL: one deliver_sm */
};

/* A message waiting for the window: lp's parts not all sent yet. */
struct smpp_out {
	struct msg *m;
	struct smpp_long *lp;
};

struct smpp_sess {
	enum smpp_state state;
	bool	counted;		/* in its account's bind count */
	bool	joined;			/* receives for system_id */
	bool	enq_pending;
	bool	eof;			/* half-closed: close once answered */
	bool	unbinding;		/* unbind_resp waits for answers */
	bool	stopping;		/* SIGTERM: closes once answered */
	uint32_t unbind_seq;
	char	system_id[16];
	struct route_owner me;
	uint32_t next_seq;
	uint32_t last_rx;
	uint32_t enq_sent;
	unsigned npending;		/* submits awaiting a verdict */
	unsigned window;
	unsigned inflight;
	struct smpp_slot *win;
	uint16_t next_ref;		/* for the next long text's parts */
	struct smpp_out *q;	/* ring of messages waiting for window */
	unsigned qhead;
	unsigned qlen;
	unsigned qcap;
	size_t	qbytes;			/* msg_size of what is in q */
};

static struct smpp_sess *
sess_of(struct conn *c)
{
	if (c->pdata == NULL) {
		struct smpp_sess *s = xcalloc(1, sizeof(*s));

		s->next_seq = 1;
		s->last_rx = c->r->now;
		c->pdata = s;
	}
	return c->pdata;
}

static uint32_t
sess_seq(struct smpp_sess *s)
{
	uint32_t seq = s->next_seq;

	s->next_seq = seq >= 0x7FFFFFFF ? 1 : seq + 1;
	return seq;
}

/* Counts a PDU received (dir 0) or sent (1) in the reactor's table. */
static void
smpp_count_pdu(struct conn *c, unsigned dir, uint32_t cmd, uint32_t status)
{
	counter_bump(&c->r->detail.smpp_pdus[dir][smpp_command_index(cmd)]
	    [smpp_status_index(status)], 1);
}

/* Encodes pdu and queues it; false if it could not be encoded. */
static bool
smpp_send(struct conn *c, const struct smpp_pdu *pdu, size_t body_hint)
{
	uint8_t small[2048], *buf = small;
	size_t cap = 1024 + body_hint;
	ssize_t n;

	if (cap > sizeof(small))
		buf = xmalloc(cap);
	else
		cap = sizeof(small);
	n = smpp_encode(pdu, buf, cap);
	if (n > 0) {
		conn_write(c, buf, (size_t)n);
		smpp_count_pdu(c, 1, pdu->command_id, pdu->command_status);
	}
	if (buf != small)
		free(buf);
	return n > 0;
}

static void
smpp_respond(struct conn *c, uint32_t cmd, uint32_t status, uint32_t seq,
    const char *message_id)
{
	uint8_t buf[SMPP_RESP_MAX];
	struct smpp_pdu pdu;
	ssize_t n;

	/* The usual answers: written as they are, no pdu to zero. */
	if ((n = smpp_encode_resp(buf, cmd, status, seq, message_id)) > 0) {
		conn_write(c, buf, (size_t)n);
		smpp_count_pdu(c, 1, cmd, status);
		return;
	}
	memset(&pdu, 0, sizeof(pdu));
	pdu.command_id = cmd;
	pdu.command_status = status;
	pdu.sequence_number = seq;
	if (message_id != NULL)
		str_copy(pdu.message_id, sizeof(pdu.message_id),
		    message_id);
	smpp_send(c, &pdu, 0);
}

static void
smpp_nack(struct conn *c, uint32_t status, uint32_t seq)
{
	smpp_respond(c, SMPP_GENERIC_NACK, status, seq, NULL);
}

static bool
is_receiver(const struct smpp_sess *s)
{
	return s->state == SMPP_BOUND_RX || s->state == SMPP_BOUND_TRX;
}

static bool
is_transmitter(const struct smpp_sess *s)
{
	return s->state == SMPP_BOUND_TX || s->state == SMPP_BOUND_TRX;
}

/* Checks a bind against the accounts; SMPP_ESME_ROK or why not. */
static uint32_t
bind_check(const struct config *cf, const struct smpp_pdu *pdu,
    unsigned *max_binds)
{
	const struct account_conf *acct;

	*max_binds = cf->smpp.max_binds;
	if (!route_addr_valid(pdu->system_id, strlen(pdu->system_id)))
		return SMPP_ESME_RINVSYSID;
	if (cf->naccounts == 0)
		return SMPP_ESME_ROK;
	if ((acct = config_find_account(cf, pdu->system_id)) == NULL)
		return SMPP_ESME_RINVSYSID;
	if (!secret_eq(pdu->password, acct->password))
		return SMPP_ESME_RINVPASWD;
	*max_binds = acct->max_binds;
	return SMPP_ESME_ROK;
}

static uint32_t
bind_take(struct conn *c, struct smpp_sess *s, const struct smpp_pdu *pdu)
{
	const struct smpp_conf *sc = &c->r->cf->smpp;
	unsigned max_binds;
	uint32_t status = bind_check(c->r->cf, pdu, &max_binds);
	bool receiver;

	if (status != SMPP_ESME_ROK)
		return status;
	receiver = pdu->command_id != SMPP_BIND_TRANSMITTER;
	s->me = route_owner_conn(conn_handle(c));
	/* A router client logged in with this address holds it. */
	if (receiver && route_join(pdu->system_id, &s->me) < 0)
		return SMPP_ESME_RBINDFAIL;
	if (!smpp_acct_bind(pdu->system_id, max_binds,
	    smpp_bind_type(pdu->command_id))) {
		if (receiver)
			route_release(pdu->system_id, &s->me);
		return SMPP_ESME_RBINDFAIL;
	}
	/* Only now is anything of this bind kept, for on_close to undo. */
	str_copy(s->system_id, sizeof(s->system_id), pdu->system_id);
	s->counted = true;
	s->joined = receiver;
	s->state = pdu->command_id == SMPP_BIND_TRANSMITTER ? SMPP_BOUND_TX :
	    pdu->command_id == SMPP_BIND_RECEIVER ? SMPP_BOUND_RX :
	    SMPP_BOUND_TRX;
	if (receiver) {
		s->window = sc->window;
		s->win = xcalloc(s->window, sizeof(*s->win));
	}
	return SMPP_ESME_ROK;
}

static void
cmd_bind(struct conn *c, struct smpp_sess *s, const struct smpp_pdu *pdu)
{
	struct smpp_pdu resp;
	uint32_t status;

	status = s->state != SMPP_OPEN ? SMPP_ESME_RALYBND :
	    bind_take(c, s, pdu);
	memset(&resp, 0, sizeof(resp));
	resp.command_id = pdu->command_id | SMPP_RESP;
	resp.command_status = status;
	resp.sequence_number = pdu->sequence_number;
	str_copy(resp.system_id, sizeof(resp.system_id),
	    c->r->cf->smpp.system_id);
	resp.tlvs = SMPP_TLV_SC_INTERFACE_VERSION;
	resp.sc_interface_version = SMPP_INTERFACE_VERSION;
	smpp_send(c, &resp, 0);
	log_debug("conn=%u.%u %s system_id=%s status=0x%02x", c->r->id,
	    c->slot, smpp_command_name(pdu->command_id), pdu->system_id,
	    status);
	/* A receiver's backlog follows its bind_*_resp. */
	if (status == SMPP_ESME_ROK && s->joined)
		deliver_wake(s->system_id);
}

/*
 * Whether addr is someone else's: another account, or an address someone
 * else holds now (a line client logged in, another account's binds).
 */
static bool
source_foreign(const struct config *cf, const struct smpp_sess *s,
    const char *addr)
{
	/*
	 * Its own system_id: unless, with no accounts to prove who binds, a
	 * line client has logged in with it (a transmitter bind joins
	 * nothing, so nothing else stops it).
	 */
	if (strcmp(addr, s->system_id) == 0)
		return cf->naccounts == 0 && route_is_claimed(addr);
	return config_find_account(cf, addr) != NULL || route_is_held(addr);
}

/*
 * Whether this session may send as the source_addr raw, normalised to
 * norm. Its own system_id, always. Never another account, nor an address
 * someone else holds now, in either form (as the recipient may see it):
 * nobody speaks as an address they do not own. Free-form sender ids and
 * numbers that belong to nobody pass, unless the account lists
 * source_addrs: then only those prefixes of the normalised form, as for
 * routes, so that "+1555" lets through TON 1 "15551234" too.
 */
static bool
source_allowed(const struct config *cf, const struct smpp_sess *s,
    const char *raw, const char *norm)
{
	const struct account_conf *own;

	/* One table lookup when both forms are the same (all but TON 1). */
	if (source_foreign(cf, s, raw) ||
	    (strcmp(raw, norm) != 0 && source_foreign(cf, s, norm)))
		return false;
	if (strcmp(raw, s->system_id) == 0 || strcmp(norm, s->system_id) == 0)
		return true;
	own = config_find_account(cf, s->system_id);
	if (own == NULL || own->nsource_addrs == 0)
		return true;
	for (unsigned i = 0; i < own->nsource_addrs; i++)
		if (strncmp(norm, own->source_addrs[i],
		    strlen(own->source_addrs[i])) == 0)
			return true;
	return false;
}

/*
 * The status for a verdict on a message in data_coding dc: a recipient
 * that cannot carry it (a line client) refuses a binary or unknown coding
 * as ESME_RINVDCS, and text it cannot show as ESME_RSUBMITFAIL.
 */
static uint32_t
verdict_status(enum msg_verdict v, uint8_t dc)
{
	if (v == MSG_UNFIT && text_coding_of(dc, TEXT_GSM) < 0)
		return SMPP_ESME_RINVDCS;
	switch (v) {
	case MSG_OK:
		return SMPP_ESME_ROK;
	case MSG_BUSY:
	case MSG_REFUSED:
	case MSG_FULL:
		return SMPP_ESME_RMSGQFUL;
	case MSG_NO_ROUTE:
		return SMPP_ESME_RINVDSTADR;
	case MSG_UNFIT:
	case MSG_TOO_LONG:
		return SMPP_ESME_RSUBMITFAIL;
	case MSG_UNAVAILABLE:
	case MSG_UPSTREAM_DOWN:
		return SMPP_ESME_RTHROTTLED;	/* try again later */
	case MSG_STORE_LOST:
		return SMPP_ESME_RSYSERR;	/* not until a restart */
	default:
		return SMPP_ESME_RSYSERR;
	}
}

static void
submit_answer(struct conn *c, uint32_t cmd, uint32_t seq, uint64_t id,
    enum msg_verdict v, uint8_t dc)
{
	char mid[24];

	mid[u64_to_dec(mid, id)] = '\0';
	smpp_respond(c, cmd | SMPP_RESP, verdict_status(v, dc), seq, mid);
}

/* An account's setting, or the smpp group's where it has none. */
static unsigned
acct_alphabet(const struct config *cf, const char *id)
{
	const struct account_conf *a = config_find_account(cf, id);

	return a != NULL && a->alphabet != CONFIG_ALPHABET_SMPP ?
	    a->alphabet : cf->smpp.alphabet;
}

/* Fills a message from a submit_sm or data_sm. */
static struct msg *
submit_msg(struct conn *c, struct smpp_sess *s, const struct smpp_pdu *pdu,
    const char *from, const char *to)
{
	struct msg *m = smpp_msg_new(pdu, from, to);

	m->id = msg_next_id(c->r);
	m->read_ns = c->r->turn_ns;
	/* What this account sends: octets in data_coding, 0 in its alphabet. */
	m->flags |= MSG_F_PREFIX_FIRST |
	    smpp_msg_coding_flags(acct_alphabet(c->r->cf, s->system_id));
	m->registered_delivery = pdu->registered_delivery;
	str_copy(m->reply_to, sizeof(m->reply_to), s->system_id);
	if (pdu->tlvs & SMPP_TLV_USER_MESSAGE_REFERENCE) {
		m->flags |= MSG_F_UMR;
		m->umr = pdu->user_message_reference;
	}
	return m;
}

/*
 * schedule_delivery_time and validity_period (either SMPP time form) as
 * wall clock seconds, 0 when not given. A malformed or past time is
 * refused: ESME_RINVSCHED, ESME_RINVEXPIRY.
 */
static uint32_t
times_parse(const char *sched, const char *valid, uint64_t *due,
    uint64_t *expires)
{
	uint64_t now = (uint64_t)time(NULL);

	if (smpp_time_parse(sched, now, due) < 0 ||
	    (*due != 0 && *due < now))
		return SMPP_ESME_RINVSCHED;
	if (*due == now)
		*due = 0;	/* now is no schedule */
	if (smpp_time_parse(valid, now, expires) < 0 ||
	    (*expires != 0 && (*expires <= now ||
	    (*due != 0 && *expires <= *due))))
		return SMPP_ESME_RINVEXPIRY;
	return SMPP_ESME_ROK;
}

static uint32_t
submit_times(const struct smpp_pdu *pdu, uint64_t *due, uint64_t *expires)
{
	return times_parse(pdu->schedule_delivery_time, pdu->validity_period,
	    due, expires);
}

static void
sess_update_hold(struct conn *c, struct smpp_sess *s)
{
	if (s->unbinding)
		return;		/* only answers are taken after an unbind */
	if (s->npending >= SMPP_MAX_PENDING)
		conn_hold(c);
	else if (s->npending < SMPP_MAX_PENDING / 2)
		conn_release(c);
}

static void
cmd_submit(struct conn *c, struct smpp_sess *s, const struct smpp_pdu *pdu)
{
	const struct account_conf *acct;
	char from[ROUTE_ADDR_MAX + 2], to[ROUTE_ADDR_MAX + 2];
	uint32_t cmd = pdu->command_id, seq = pdu->sequence_number, status;
	struct msg *m;
	enum msg_verdict v;
	uint64_t id, due = 0, expires = 0;

	if (!is_transmitter(s)) {
		smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVBNDSTS, seq, NULL);
		return;
	}
	if (!smpp_msg_addr(pdu->destination_addr, pdu->dest_addr_ton, to,
	    sizeof(to))) {
		smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVDSTADR, seq, NULL);
		return;
	}
	if (pdu->source_addr[0] == '\0') {
		str_copy(from, sizeof(from), s->system_id);
		if (source_foreign(c->r->cf, s, from)) {
			smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVSRCADR,
			    seq, NULL);
			return;
		}
	} else if (!smpp_msg_addr(pdu->source_addr, pdu->source_addr_ton, from,
	    sizeof(from)) ||
	    !source_allowed(c->r->cf, s, pdu->source_addr, from)) {
		smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVSRCADR, seq, NULL);
		return;
	}
	acct = config_find_account(c->r->cf, s->system_id);
	if (acct != NULL && acct->max_tps > 0 &&
	    !smpp_acct_take_token(s->system_id, acct->max_tps)) {
		counter_add(&c->r->counters, COUNTER_SMPP_THROTTLED, 1);
		smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RTHROTTLED, seq, NULL);
		return;
	}
	if (deliver_kind_on(MSG_KIND_STORE) && (status = submit_times(pdu, &due, &expires)) !=
	    SMPP_ESME_ROK) {
		smpp_respond(c, cmd | SMPP_RESP, status, seq, NULL);
		return;
	}
	m = submit_msg(c, s, pdu, from, to);
	m->due = due;
	m->expires = expires;
	id = m->id;
	if ((v = deliver_send(c, m)) != MSG_PENDING) {
		submit_answer(c, cmd, seq, id, v, pdu->data_coding);
		return;
	}
	s->npending++;
	sess_update_hold(c, s);
}

/* The status a store request fails with, by kind. */
static uint32_t
req_fail_status(uint32_t cmd)
{
	return cmd == SMPP_QUERY_SM ? SMPP_ESME_RQUERYFAIL :
	    cmd == SMPP_CANCEL_SM ? SMPP_ESME_RCANCELFAIL :
	    SMPP_ESME_RREPLACEFAIL;
}

static uint32_t
req_cmd(enum msg_req_kind kind)
{
	return kind == MSG_REQ_QUERY ? SMPP_QUERY_SM :
	    kind == MSG_REQ_CANCEL ? SMPP_CANCEL_SM : SMPP_REPLACE_SM;
}

static void sess_maybe_done(struct conn *c, struct smpp_sess *s);

/* On the session's reactor: the store answered a request. */
static void
store_req_done(void *owner, void *arg, enum mailbox_status st)
{
	struct msg_req *q = arg;
	uint32_t cmd = req_cmd(q->kind);
	struct smpp_sess *s;
	struct smpp_pdu pdu;
	struct conn *c;

	if (st == MAILBOX_CANCELLED || owner == NULL ||
	    (c = conn_resolve(owner, &q->conn)) == NULL ||
	    (s = c->pdata) == NULL) {
		free(q);
		return;
	}
	memset(&pdu, 0, sizeof(pdu));
	pdu.command_id = cmd | SMPP_RESP;
	pdu.sequence_number = q->seq;
	pdu.command_status = q->ok ? SMPP_ESME_ROK : req_fail_status(cmd);
	if (q->kind == MSG_REQ_QUERY && q->ok) {
		snprintf(pdu.message_id, sizeof(pdu.message_id), "%llu",
		    (unsigned long long)q->id);
		smpp_time_format(q->final_date, pdu.final_date);
		pdu.message_state = q->state;
	}
	smpp_send(c, &pdu, 0);
	s->npending--;
	sess_update_hold(c, s);
	sess_maybe_done(c, s);
	free(q);
}

/* A message_id we gave: decimal digits. false if it is not one. */
static bool
parse_id(const char *t, uint64_t *id)
{
	char *end;

	if (t[0] < '0' || t[0] > '9')
		return false;
	errno = 0;
	*id = strtoull(t, &end, 10);
	return errno == 0 && *end == '\0' && *id != 0;
}

/*
 * query_sm, cancel_sm, replace_sm: the store answers for the messages
 * this account submitted. Without a store nothing is kept to ask about.
 */
static void
cmd_store_req(struct conn *c, struct smpp_sess *s, const struct smpp_pdu *pdu,
    enum msg_req_kind kind)
{
	uint32_t cmd = pdu->command_id, seq = pdu->sequence_number, status;
	uint64_t id = 0, due = 0, expires = 0;
	char dst[ROUTE_ADDR_MAX + 2] = "";
	struct msg_req *q;
	size_t len = 0;

	if (!is_transmitter(s)) {
		smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVBNDSTS, seq, NULL);
		return;
	}
	if (!deliver_kind_on(MSG_KIND_STORE)) {
		smpp_respond(c, cmd | SMPP_RESP, req_fail_status(cmd), seq, NULL);
		return;
	}
	/* cancel_sm may name a destination instead of a message. */
	if (kind == MSG_REQ_CANCEL && pdu->message_id[0] == '\0') {
		if (!smpp_msg_addr(pdu->destination_addr, pdu->dest_addr_ton,
		    dst, sizeof(dst))) {
			smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVDSTADR,
			    seq, NULL);
			return;
		}
	} else if (!parse_id(pdu->message_id, &id)) {
		smpp_respond(c, cmd | SMPP_RESP, SMPP_ESME_RINVMSGID, seq, NULL);
		return;
	}
	if (kind == MSG_REQ_REPLACE) {
		status = times_parse(pdu->schedule_delivery_time,
		    pdu->validity_period, &due, &expires);
		if (status != SMPP_ESME_ROK) {
			smpp_respond(c, cmd | SMPP_RESP, status, seq, NULL);
			return;
		}
		len = pdu->sm_length;
	}
	q = xcalloc(1, sizeof(*q) + len + 1);
	q->kind = kind;
	q->conn = conn_handle(c);
	q->done = store_req_done;
	q->seq = seq;
	str_copy(q->submitter, sizeof(q->submitter), s->system_id);
	q->id = id;
	snprintf(q->dst, sizeof(q->dst), "%.64s", dst);
	if (kind == MSG_REQ_REPLACE) {
		q->due = due;
		q->expires = expires;
		q->registered_delivery = pdu->registered_delivery;
		q->has_text = len > 0;
		if (len > 0)
			memcpy(q->text, pdu->short_message, len);
		q->len = len;
	}
	if (deliver_request(MSG_KIND_STORE, q) < 0) {
		free(q);
		smpp_respond(c, cmd | SMPP_RESP, req_fail_status(cmd), seq, NULL);
		return;
	}
	s->npending++;
	sess_update_hold(c, s);
}

/* A line address as an SMPP address: "+digits" is international. */
static void
addr_for_smpp(const char *addr, char *out, uint8_t *ton, uint8_t *npi)
{
	bool digits = addr[0] == '+' && addr[1] != '\0' &&
	    strspn(addr + 1, "0123456789") == strlen(addr + 1);

	if (digits) {
		*ton = 1;
		*npi = 1;
		str_copy(out, 21, addr + 1);
	} else {
		*ton = strspn(addr, "0123456789") == strlen(addr) ? 0 : 5;
		*npi = 0;
		str_copy(out, 21, addr);
	}
}

/*
 * One address of a deliver_sm: as the submitter wrote it, with its TON and
 * NPI, when it came over SMPP (raw is set); else made from the route
 * table address.
 */
static void
deliver_addr(const char *raw, uint8_t ton, uint8_t npi, const char *addr,
    char *out, uint8_t *oton, uint8_t *onpi)
{
	if (raw[0] == '\0') {
		addr_for_smpp(addr, out, oton, onpi);
		return;
	}
	str_copy(out, 21, raw);
	*oton = ton;
	*onpi = npi;
}

/* The text fields of a deliver_sm for m: its part lp->next, if lp. */
static void
deliver_text(struct conn *c, struct msg *m, struct smpp_long *lp,
    struct smpp_pdu *pdu)
{
	if (lp != NULL) {
		if (lp->next == 0)
			counter_add(&c->r->counters, COUNTER_SMPP_LONG, 1);
		counter_add(&c->r->counters, COUNTER_SMPP_PARTS, 1);
		smpp_long_part(lp, lp->next++, pdu);
		lp->unanswered++;
		return;
	}
	pdu->esm_class = m->esm_class;
	pdu->data_coding = m->data_coding;
	if (m->len <= 254) {
		pdu->sm_length = (uint8_t)m->len;
		pdu->short_message = m->text;
	} else {
		pdu->tlvs |= SMPP_TLV_MESSAGE_PAYLOAD;
		pdu->message_payload = m->text;
		pdu->message_payload_len = (uint16_t)m->len;
	}
	if (m->flags & MSG_F_SAR) {
		pdu->tlvs |= SMPP_TLV_SAR;
		pdu->sar_msg_ref_num = m->sar_ref;
		pdu->sar_total_segments = m->sar_total;
		pdu->sar_segment_seqnum = m->sar_seq;
	}
}

/*
 * Sends m, or lp's next part, as a deliver_sm; a window slot takes it
 * (the caller saw room).
 */
static void
send_deliver(struct conn *c, struct smpp_sess *s, struct msg *m,
    struct smpp_long *lp)
{
	uint32_t seq = sess_seq(s);
	struct smpp_slot *slot = &s->win[seq % s->window];
	struct smpp_pdu pdu;

	/*
	 * The sequence number's slot, free unless answers came out of order
	 * (or another PDU took a number): then the first free one.
	 */
	for (unsigned i = 0; slot->m != NULL && i < s->window; i++)
		slot = &s->win[i];
	memset(&pdu, 0, sizeof(pdu));
	pdu.command_id = SMPP_DELIVER_SM;
	pdu.sequence_number = seq;
	deliver_addr(m->src_addr, m->src_ton, m->src_npi, m->from,
	    pdu.source_addr, &pdu.source_addr_ton, &pdu.source_addr_npi);
	deliver_addr(m->dst_addr, m->dst_ton, m->dst_npi, m->to,
	    pdu.destination_addr, &pdu.dest_addr_ton, &pdu.dest_addr_npi);
	deliver_text(c, m, lp, &pdu);
	if (m->flags & MSG_F_UMR) {
		pdu.tlvs |= SMPP_TLV_USER_MESSAGE_REFERENCE;
		pdu.user_message_reference = m->umr;
	}
	if (m->flags & MSG_F_RECEIPT) {
		pdu.tlvs |= SMPP_TLV_RECEIPTED_MESSAGE_ID |
		    SMPP_TLV_MESSAGE_STATE;
		str_copy(pdu.receipted_message_id,
		    sizeof(pdu.receipted_message_id), m->receipted_id);
		pdu.message_state_tlv = m->message_state;
	}
	/* A part's octets, not its whole text's: one stack buffer. */
	smpp_send(c, &pdu, (size_t)pdu.sm_length + pdu.message_payload_len);
	slot->seq = pdu.sequence_number;
	slot->sent_at = c->r->now;
	slot->sent_ns = c->r->turn_ns;
	slot->m = m;
	slot->lp = lp;
	s->inflight++;
	counter_add(&c->r->counters, COUNTER_SMPP_WINDOW, 1);
}

/*
 * Sends queued messages while the window has room. A long text's parts
 * go as slots free, in order; it leaves the queue with its last part.
 */
static void
sess_pump(struct conn *c, struct smpp_sess *s)
{
	while (s->inflight < s->window && s->qlen > 0 && !conn_is_closing(c) &&
	    s->joined) {
		struct smpp_out *o = &s->q[s->qhead];
		struct msg *m = o->m;
		struct smpp_long *lp = o->lp;

		if (lp == NULL || lp->next + 1 == lp->nparts) {
			s->qhead = (s->qhead + 1) % s->qcap;
			s->qlen--;
			counter_add(&c->r->counters, COUNTER_SMPP_QUEUED,
			    (uint64_t)-1);
			s->qbytes -= msg_size(m);
		}
		send_deliver(c, s, m, lp);
	}
}

/*
 * Tells whoever waits what became of m, given the deliver_sm_resp
 * status that decides it (every part's, for a long text), and lets go
 * of m: the store removes it, retries or gives up, and sends receipts.
 */
static void
deliver_settle(struct conn *c, struct msg *m, uint32_t status)
{
	if (m->flags & MSG_F_STORED) {
		deliver_outcome(m, status == SMPP_ESME_ROK ?
		    MSG_OUT_DELIVERED : smpp_status_temporary(status) ?
		    MSG_OUT_RETRY : MSG_OUT_FAILED);
		return;
	}
	if (!(m->flags & MSG_F_RECEIPT))
		deliver_receipt(c->r, m, status == SMPP_ESME_ROK ?
		    SMPP_STATE_DELIVERED : SMPP_STATE_UNDELIVERABLE);
	msg_free(m);
}


/* deliver_sm_resp, or a generic_nack, for one of our deliver_sm. */
static void
deliver_answered(struct conn *c, struct smpp_sess *s, uint32_t seq,
    uint32_t status)
{
	unsigned first = seq % s->window;
	struct smpp_long *lp;

	/* Where send_deliver put it, as a rule; else where it found room. */
	for (unsigned k = 0; k <= s->window; k++) {
		unsigned i = k == 0 ? first : k - 1;
		struct msg *m = s->win[i].m;

		if (m == NULL || s->win[i].seq != seq)
			continue;
		counter_observe(&c->r->detail.hist[HIST_DELIVER_SM],
		    c->r->turn_ns - s->win[i].sent_ns);
		counter_add(&c->r->counters, COUNTER_SMPP_WINDOW, (uint64_t)-1);
		lp = s->win[i].lp;
		s->win[i].m = NULL;
		s->win[i].lp = NULL;
		s->inflight--;
		/* A long text's outcome waits for every part's answer. */
		if (lp == NULL) {
			deliver_settle(c, m, status);
		} else if (smpp_long_answered(lp, status)) {
			deliver_settle(c, m, smpp_long_status(lp));
			smpp_long_free(lp);
		}
		sess_pump(c, s);
		sess_maybe_done(c, s);
		return;
	}
}

/* Answers a PDU that failed to decode. */
static void
smpp_reject(struct conn *c, const struct smpp_pdu *pdu, uint32_t status)
{
	switch (pdu->command_id) {
	case SMPP_BIND_RECEIVER:
	case SMPP_BIND_TRANSMITTER:
	case SMPP_BIND_TRANSCEIVER:
	case SMPP_SUBMIT_SM:
	case SMPP_DATA_SM:
	case SMPP_QUERY_SM:
	case SMPP_CANCEL_SM:
	case SMPP_REPLACE_SM:
		smpp_respond(c, pdu->command_id | SMPP_RESP, status,
		    pdu->sequence_number, NULL);
		break;
	default:
		smpp_nack(c, status, pdu->sequence_number);
	}
}

/* Requests allowed before a bind get ESME_RINVBNDSTS otherwise. */
static bool
needs_bind(uint32_t cmd)
{
	return cmd == SMPP_SUBMIT_SM || cmd == SMPP_DATA_SM ||
	    cmd == SMPP_QUERY_SM || cmd == SMPP_CANCEL_SM ||
	    cmd == SMPP_REPLACE_SM || cmd == SMPP_UNBIND;
}

/* The bind's type as smpp_acct_bind counts it. */
static unsigned
sess_bind_type(const struct smpp_sess *s)
{
	return s->state == SMPP_BOUND_TX ? 0 : s->state == SMPP_BOUND_RX ?
	    1 : 2;
}

/*
 * Stops taking messages for this bind and gives back its place: the
 * address and the account's bind count, so that the ESME can bind again
 * at once, before this connection has closed.
 */
static void
sess_leave(struct smpp_sess *s)
{
	if (s->joined) {
		route_release(s->system_id, &s->me);
		s->joined = false;
	}
	if (s->counted) {
		smpp_acct_unbind(s->system_id, sess_bind_type(s));
		s->counted = false;
	}
}

/*
 * unbind: the bind takes no more messages at once. It is answered, and
 * the session closed, once every submit_sm it sent before has had its
 * answer and every deliver_sm we sent has had the ESME's (or
 * response_timeout passed: on_tick gives up). Until then only answers
 * and enquire_link are taken; other requests get ESME_RINVBNDSTS.
 */
static void
cmd_unbind(struct conn *c, struct smpp_sess *s, uint32_t seq)
{
	sess_leave(s);
	s->unbinding = true;
	s->unbind_seq = seq;
	sess_maybe_done(c, s);
}

/*
 * After a verdict or an answer: finish an unbind or a half-close once all
 * is answered.
 */
static void
sess_maybe_done(struct conn *c, struct smpp_sess *s)
{
	if (s->npending > 0)
		return;
	if (s->unbinding) {
		if (s->inflight > 0)
			return;
		smpp_respond(c, SMPP_UNBIND | SMPP_RESP, SMPP_ESME_ROK,
		    s->unbind_seq, NULL);
		s->unbinding = false;
		conn_close_after_flush(c, CONN_CLOSE_QUIT);
	} else if (s->eof && !conn_is_held(c)) {
		conn_close_after_flush(c, CONN_CLOSE_PEER);
	} else if (s->stopping && s->inflight == 0) {
		conn_close_after_flush(c, CONN_CLOSE_SHUTDOWN);
	}
}

static int
smpp_dispatch(struct conn *c, struct smpp_sess *s, const struct smpp_pdu *pdu)
{
	uint32_t seq = pdu->sequence_number;

	if (s->state == SMPP_OPEN && needs_bind(pdu->command_id)) {
		smpp_respond(c, pdu->command_id | SMPP_RESP,
		    SMPP_ESME_RINVBNDSTS, seq, NULL);
		return 0;
	}
	if ((s->unbinding || (s->stopping && pdu->command_id != SMPP_UNBIND)) &&
	    !(pdu->command_id & SMPP_RESP) &&
	    pdu->command_id != SMPP_GENERIC_NACK &&
	    pdu->command_id != SMPP_ENQUIRE_LINK) {
		/* The bind is ending: it only answers what we sent. */
		smpp_reject(c, pdu, SMPP_ESME_RINVBNDSTS);
		return 0;
	}
	switch (pdu->command_id) {
	case SMPP_BIND_RECEIVER:
	case SMPP_BIND_TRANSMITTER:
	case SMPP_BIND_TRANSCEIVER:
		cmd_bind(c, s, pdu);
		break;
	case SMPP_SUBMIT_SM:
	case SMPP_DATA_SM:
		cmd_submit(c, s, pdu);
		break;
	case SMPP_DELIVER_SM | SMPP_RESP:
	case SMPP_GENERIC_NACK:
		if (s->win != NULL)
			deliver_answered(c, s, seq, pdu->command_status);
		break;
	case SMPP_ENQUIRE_LINK:
		smpp_respond(c, SMPP_ENQUIRE_LINK | SMPP_RESP, SMPP_ESME_ROK,
		    seq, NULL);
		break;
	case SMPP_QUERY_SM:
		cmd_store_req(c, s, pdu, MSG_REQ_QUERY);
		break;
	case SMPP_CANCEL_SM:
		cmd_store_req(c, s, pdu, MSG_REQ_CANCEL);
		break;
	case SMPP_REPLACE_SM:
		cmd_store_req(c, s, pdu, MSG_REQ_REPLACE);
		break;
	case SMPP_UNBIND:
		cmd_unbind(c, s, seq);
		break;
	case SMPP_ENQUIRE_LINK | SMPP_RESP:
	case SMPP_UNBIND | SMPP_RESP:
		break;
	default:
		/* deliver_sm from an ESME, stray responses: not for us. */
		if (!(pdu->command_id & SMPP_RESP))
			smpp_nack(c, SMPP_ESME_RINVCMDID, seq);
		break;
	}
	return 0;
}

static ssize_t
smpp_proto_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	ssize_t len = smpp_frame_len(p, n, lim->max_pdu_size);

	if (len >= 0)
		return len;
	/*
	 * An absurd command_length: hand over the header, or what there is
	 * of it, so that on_message can nack it and end the session.
	 */
	return (ssize_t)(n < SMPP_HEADER_LEN ? n : SMPP_HEADER_LEN);
}

static int
smpp_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	struct smpp_sess *s = sess_of(c);
	uint32_t clen = 0, id = 0, st = 0, seq = 0, status;
	struct smpp_pdu pdu;

	if (len >= SMPP_HEADER_LEN)
		smpp_peek_header(msg, &clen, &id, &st, &seq);
	smpp_count_pdu(c, 0, id, st);
	if (clen != len) {
		/* The close is logged (reason=protocol); this says why. */
		log_debug("conn=%u.%u smpp command_length %u is absurd: "
		    "closing", c->r->id, c->slot, clen);
		smpp_nack(c, SMPP_ESME_RINVCMDLEN, seq);
		conn_close_after_flush(c, CONN_CLOSE_PROTOCOL);
		return 0;
	}
	s->last_rx = c->r->now;
	s->enq_pending = false;
	status = smpp_decode(msg, len, &pdu);
	if (status != SMPP_ESME_ROK) {
		smpp_reject(c, &pdu, status);
		return 0;
	}
	return smpp_dispatch(c, s, &pdu);
}

/*
 * m as the account is to read it (*d, and *lp when it goes as parts): a
 * line client's UTF-8 text in the coding the account asks for (by
 * default GSM 03.38 when every character is in it, else UCS-2), split as
 * its long asks when it does not fit one SMS; an SMPP client's octets,
 * and receipts, as they are. MSG_OK, or why not: MSG_UNFIT when the text
 * is not UTF-8 (from another node it is checked here), MSG_TOO_LONG over
 * the account's max_parts.
 */
static enum msg_verdict
edge_make(struct conn *c, struct smpp_sess *s, const struct msg *m,
    struct msg **d, struct smpp_long **lp)
{
	struct smpp_long_opts o;
	unsigned needed;

	*lp = NULL;
	if (m->flags & (MSG_F_CODED | MSG_F_RECEIPT)) {
		*d = msg_dup(m);
		return MSG_OK;
	}
	smpp_long_opts_of(c->r->cf, s->system_id, &o);
	o.ref = s->next_ref;
	if (smpp_long_make(m, &o, d, lp, &needed) < 0) {
		if (errno != EMSGSIZE)
			return MSG_UNFIT;
		/* Over 65,535 octets: however long one waits. */
		if (o.how == TEXT_LONG_PAYLOAD)
			return MSG_UNFIT;
		log_debug("conn=%u.%u system_id=%s message %llu needs %u "
		    "parts, over max_parts %u", c->r->id, c->slot,
		    s->system_id, (unsigned long long)m->id, needed,
		    o.max_parts);
		return MSG_TOO_LONG;
	}
	/* Each set of parts has its own reference. */
	if (*lp != NULL && !(*lp)->payload)
		s->next_ref++;
	return MSG_OK;
}

/* Puts d (lp's parts not all sent) at the end of the queue. */
static void
sess_enqueue(struct conn *c, struct smpp_sess *s, struct msg *d,
    struct smpp_long *lp)
{
	if (s->qlen == s->qcap) {
		unsigned cap = s->qcap ? s->qcap * 2 : 16;
		struct smpp_out *q = xcalloc(cap, sizeof(*q));

		for (unsigned i = 0; i < s->qlen; i++)
			q[i] = s->q[(s->qhead + i) % s->qcap];
		free(s->q);
		s->q = q;
		s->qcap = cap;
		s->qhead = 0;
	}
	s->q[(s->qhead + s->qlen++) % s->qcap] =
	    (struct smpp_out){ .m = d, .lp = lp };
	counter_add(&c->r->counters, COUNTER_SMPP_QUEUED, 1);
	s->qbytes += msg_size(d);
}

/*
 * Sends d's parts while the window has room; what is left waits at the
 * head of the queue (it was empty), taken whatever its limits, since
 * the message is under way.
 */
static void
send_long(struct conn *c, struct smpp_sess *s, struct msg *d,
    struct smpp_long *lp)
{
	while (s->inflight < s->window && lp->next < lp->nparts)
		send_deliver(c, s, d, lp);
	if (lp->next < lp->nparts)
		sess_enqueue(c, s, d, lp);
}

static int
smpp_on_deliver(struct conn *c, const struct msg *m)
{
	struct smpp_sess *s = c->pdata;
	unsigned limit = c->r->cf->smpp.queue_limit;
	struct smpp_long *lp;
	enum msg_verdict v;
	struct msg *d;

	/* Not joined any more: unbound, half-closed or given up on. */
	if (s == NULL || !is_receiver(s) || s->win == NULL || !s->joined)
		return MSG_NO_ROUTE;
	if ((v = edge_make(c, s, m, &d, &lp)) != MSG_OK)
		return v;
	if (d->len > 65535) {
		smpp_long_free(lp);
		msg_free(d);
		return MSG_UNFIT;
	}
	if (s->inflight < s->window && s->qlen == 0) {
		if (lp != NULL)
			send_long(c, s, d, lp);
		else
			send_deliver(c, s, d, NULL);
		return MSG_OK;
	}
	/*
	 * With a store, what would wait here, in memory, behind the window
	 * waits there instead, on disk: the submitter is answered once it is
	 * durable. What the store hands out queues here as before.
	 */
	if (!(m->flags & MSG_F_STORED) && deliver_kind_on(MSG_KIND_STORE) &&
	    config_find_account(c->r->cf, s->system_id) != NULL) {
		smpp_long_free(lp);
		msg_free(d);
		return MSG_STORE;
	}
	/*
	 * Bounded in count and in bytes: queue_limit messages, and no more
	 * memory than output_high_watermark, which a connection may hold
	 * anyway. A message costs its text and its fields (~370 bytes).
	 * The store's are bounded by the store (a few dozen per account) and
	 * come in order: one refused here while a later one is taken would
	 * arrive after it.
	 */
	if (!(m->flags & MSG_F_STORED) && (s->qlen >= limit ||
	    s->qbytes + msg_size(d) >
	    c->r->cf->limits.output_high_watermark)) {
		smpp_long_free(lp);
		msg_free(d);
		return MSG_REFUSED;
	}
	sess_enqueue(c, s, d, lp);
	return MSG_OK;
}

static void
smpp_on_verdict(struct conn *c, const struct msg *m)
{
	struct smpp_sess *s = c->pdata;

	if (s == NULL)
		return;
	/* An upstream's refusal reaches the submitter as the SMSC said it. */
	if (m->verdict == MSG_REJECTED) {
		char mid[24];

		mid[u64_to_dec(mid, m->id)] = '\0';
		smpp_respond(c, m->sender_cmd | SMPP_RESP, m->status,
		    m->sender_ref, mid);
	} else {
		submit_answer(c, m->sender_cmd, m->sender_ref, m->id,
		    m->verdict, m->data_coding);
	}
	s->npending--;
	sess_update_hold(c, s);
	sess_maybe_done(c, s);
}

static bool
smpp_owes_answers(const struct conn *c)
{
	const struct smpp_sess *s = c->pdata;

	return s != NULL && s->npending > 0;
}

/* The ESME half-closed: answer the submits still pending first. */
static bool
smpp_on_eof(struct conn *c)
{
	struct smpp_sess *s = c->pdata;

	if (s == NULL || s->npending == 0)
		return false;
	sess_leave(s);
	s->eof = true;
	return true;
}

/*
 * The daemon is stopping. A receiver with deliver_sm outstanding takes no
 * more messages but is still read, until their answers are in (or
 * shutdown_timeout ends it): an answer not read would leave a message the
 * ESME has in the store, to be sent again after the restart.
 */
static bool
smpp_on_stop(struct conn *c)
{
	struct smpp_sess *s = c->pdata;

	if (s == NULL || s->inflight == 0)
		return false;
	sess_leave(s);
	s->stopping = true;
	return true;
}

/* Gives up on a session that stopped answering: unbind, then close. */
static void
sess_give_up(struct conn *c, struct smpp_sess *s, const char *why)
{
	struct smpp_pdu pdu;

	if (conn_log_allowed(c))
		log_info("conn=%u.%u system_id=%s closed reason=timeout (%s)",
		    c->r->id, c->slot, s->system_id, why);
	sess_leave(s);
	memset(&pdu, 0, sizeof(pdu));
	/* The ESME asked to unbind: it is owed the answer, not our unbind. */
	pdu.command_id = s->unbinding ? SMPP_UNBIND | SMPP_RESP : SMPP_UNBIND;
	pdu.sequence_number = s->unbinding ? s->unbind_seq : sess_seq(s);
	/*
	 * A courtesy only: the peer is not answering, so it may not read
	 * either. Whatever the socket takes now goes; then it is closed.
	 */
	uint8_t buf[SMPP_HEADER_LEN];
	if (smpp_encode(&pdu, buf, sizeof(buf)) > 0)
		conn_write_now(c, buf, sizeof(buf));
	conn_close(c, CONN_CLOSE_TIMEOUT);
}

/*
 * The bind must end (an SMPP bind claims no address cluster-wide today,
 * so nothing evicts one yet): it takes no more messages, the ESME is told
 * with an unbind, and the session closes once that is written, as any
 * session ended by this side does.
 */
static void
smpp_on_evict(struct conn *c, enum proto_evict why)
{
	struct smpp_sess *s = c->pdata;
	struct smpp_pdu pdu;
	uint8_t buf[SMPP_HEADER_LEN];

	(void)why;
	if (s != NULL && s->state != SMPP_OPEN) {
		sess_leave(s);
		memset(&pdu, 0, sizeof(pdu));
		pdu.command_id = SMPP_UNBIND;
		pdu.sequence_number = sess_seq(s);
		if (smpp_encode(&pdu, buf, sizeof(buf)) > 0)
			conn_write(c, buf, sizeof(buf));
	}
	conn_close_after_flush(c, CONN_CLOSE_QUIT);
}

static void
smpp_on_tick(struct conn *c)
{
	struct smpp_sess *s = c->pdata;
	const struct smpp_conf *sc = &c->r->cf->smpp;
	uint32_t now = c->r->now;
	struct smpp_pdu pdu;

	if (s == NULL || s->state == SMPP_OPEN)
		return;
	for (unsigned i = 0; i < s->window; i++)
		if (s->win[i].m != NULL &&
		    now - s->win[i].sent_at >= sc->response_timeout) {
			sess_give_up(c, s, "deliver_sm unanswered");
			return;
		}
	/* Unbinding: it only waits for answers, and asks nothing more. */
	if (sc->enquire_link_interval == 0 || s->unbinding)
		return;
	if (s->enq_pending) {
		if (now - s->enq_sent >= sc->response_timeout)
			sess_give_up(c, s, "enquire_link unanswered");
		return;
	}
	if (now - s->last_rx < sc->enquire_link_interval)
		return;
	memset(&pdu, 0, sizeof(pdu));
	pdu.command_id = SMPP_ENQUIRE_LINK;
	pdu.sequence_number = sess_seq(s);
	smpp_send(c, &pdu, 0);
	s->enq_pending = true;
	s->enq_sent = now;
}

/* A message of a closing bind: the store keeps it (o), or it is lost. */
static void
close_settle(struct conn *c, struct msg *m, enum msg_outcome o)
{
	if (m->flags & MSG_F_STORED) {
		deliver_outcome(m, o);
		return;
	}
	deliver_receipt(c->r, m, SMPP_STATE_UNDELIVERABLE);
	msg_free(m);
}

static void
smpp_on_close(struct conn *c)
{
	struct smpp_sess *s = c->pdata;

	if (s == NULL)
		return;
	if (s->joined)
		route_release(s->system_id, &s->me);
	if (s->counted)
		smpp_acct_unbind(s->system_id, sess_bind_type(s));
	counter_add(&c->r->counters, COUNTER_SMPP_WINDOW,
	    -(uint64_t)s->inflight);
	counter_add(&c->r->counters, COUNTER_SMPP_QUEUED, -(uint64_t)s->qlen);
	/*
	 * What was accepted for this bind and not delivered is lost, but
	 * what the store handed out: it stays there. A deliver_sm sent and
	 * not answered counts as a temporary failure; so does a long text
	 * cut off with some of its parts sent, which the store sends again
	 * whole. The parts in the window go first: a text still queued
	 * meets its end there, once.
	 */
	for (unsigned i = 0; i < s->window; i++) {
		struct smpp_long *lp = s->win[i].lp;

		if (s->win[i].m == NULL)
			continue;
		if (lp != NULL && (--lp->unanswered > 0 ||
		    lp->next < lp->nparts))
			continue;
		close_settle(c, s->win[i].m, MSG_OUT_RETRY);
		smpp_long_free(lp);
	}
	for (unsigned i = 0; i < s->qlen; i++) {
		struct smpp_out *o = &s->q[(s->qhead + i) % s->qcap];

		close_settle(c, o->m, o->lp != NULL && o->lp->next > 0 ?
		    MSG_OUT_RETRY : MSG_OUT_RETURNED);
		smpp_long_free(o->lp);
	}
	free(s->win);
	free(s->q);
	free(s);
	c->pdata = NULL;
}

const struct proto proto_smpp = {
	.name = "smpp",
	.frame_len = smpp_proto_frame_len,
	.on_message = smpp_on_message,
	.on_eof = smpp_on_eof,
	.on_stop = smpp_on_stop,
	.on_close = smpp_on_close,
	.owes_answers = smpp_owes_answers,
	.on_deliver = smpp_on_deliver,
	.on_verdict = smpp_on_verdict,
	.on_tick = smpp_on_tick,
	.on_evict = smpp_on_evict,
	.confirms_delivery = true,
	.reports_stored = true,
	.messages_counter = COUNTER_MSG_SMPP,
};
