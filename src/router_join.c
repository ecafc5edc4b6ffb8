/* router_join.c: SMPP parts held, joined and reported for one router client's session. */
#include "router_join.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "deliver.h"
#include "smpp_receipt.h"
#include "text.h"
#include "text_join.h"
#include "util.h"

/*
 * One table per recipient session, not per reactor: the parts wait for
 * that session alone, so its close hands its stored parts back to the
 * store (they come again, to whichever session logs in next) without a
 * search through others', and its once-a-second tick is the expiry
 * timer. The caps per sending account apply within a session; these
 * bound a session and a reactor whatever the accounts say.
 */
#define JOIN_SESSION_MESSAGES	1024
#define JOIN_SESSION_BYTES	((size_t)16 << 20)
#define JOIN_REACTOR_BYTES	((uint64_t)64 << 20)
/*
 * Stored parts held at once for a session: half the store's in-flight
 * window of an account (64), so that the parts that complete a message
 * still find room in it; a part that would start one more message
 * waits in the store meanwhile.
 */
#define JOIN_STORED_MAX		32

#define UDHI	0x40		/* esm_class: the text starts with a UDH */

/* A copy of a part kept until its message is joined or given up. */
struct held {
	struct held *next;
	struct msg *m;
	size_t	size;		/* the memory it takes, the table's copy too */
};

struct router_join {
	struct text_join *t;
	struct held *held;
	unsigned nstored;	/* of held, MSG_F_STORED */
};

bool
router_join_wants(const struct msg *m)
{
	return (m->esm_class & UDHI) ||
	    ((m->flags & MSG_F_SAR) && m->sar_total > 1);
}

/*
 * The memory a held part takes: its copy here and its octets in the
 * table. A part of no octets still costs its fields, so the reactor's
 * bound counts these, not the octets alone.
 */
static size_t
held_size(const struct msg *m, size_t len)
{
	return sizeof(struct held) + msg_size(m) + len;
}

static void
held_add(struct router_join *j, struct conn *c, const struct msg *m,
    size_t len)
{
	struct held *h = xcalloc(1, sizeof(*h));

	h->m = msg_dup(m);
	h->size = held_size(m, len);
	h->next = j->held;
	j->held = h;
	if (m->flags & MSG_F_STORED)
		j->nstored++;
	counter_add(&c->r->counters, COUNTER_JOIN_HELD, 1);
	counter_add(&c->r->counters, COUNTER_JOIN_BYTES, h->size);
}

/* The kept copy of part id, taken out (the caller owns it), or NULL. */
static struct msg *
held_take(struct router_join *j, struct conn *c, uint64_t id)
{
	struct held **pp, *h;
	struct msg *m;

	for (pp = &j->held; (h = *pp) != NULL; pp = &h->next)
		if (h->m->id == id)
			break;
	if (h == NULL)
		return NULL;
	*pp = h->next;
	m = h->m;
	if (m->flags & MSG_F_STORED)
		j->nstored--;
	counter_add(&c->r->counters, COUNTER_JOIN_HELD, (uint64_t)-1);
	counter_add(&c->r->counters, COUNTER_JOIN_BYTES, -(uint64_t)h->size);
	free(h);
	return m;
}

/* A copy of m whose text is text[0..len) (what follows its UDH). */
static struct msg *
msg_text_only(const struct msg *m, const uint8_t *text, size_t len)
{
	struct msg *d = msg_new(len);

	memcpy(d, m, offsetof(struct msg, len));
	memcpy(d->text, text, len);
	d->len = len;
	d->esm_class &= (uint8_t)~UDHI;
	d->flags &= ~(uint32_t)MSG_F_SAR;
	return d;
}

/*
 * p's receipt, its text the part's own: a receipt quotes the start of the
 * text, which is not the UDH's octets.
 */
static void
part_receipt(struct conn *c, const struct msg *p, uint8_t state)
{
	struct text_concat cc;
	size_t hl = 0;
	struct msg *d;

	if (!(p->registered_delivery & 0x01))
		return;
	if (!(p->esm_class & UDHI) ||
	    text_udh_concat(p->text, p->len, &cc, &hl) < 0) {
		deliver_receipt(c->r, p, state);
		return;
	}
	d = msg_text_only(p, p->text + hl, p->len - hl);
	deliver_receipt(c->r, d, state);
	msg_free(d);
}

/*
 * What became of part p (taken): delivered (in a joined line now queued),
 * or not, and then whether it may come again (stored: back to the store)
 * or is undeliverable (a receipt saying so, or failed in the store).
 */
static void
part_report(struct conn *c, struct msg *p, bool delivered, bool again,
    const struct router_join_ops *ops)
{
	if (p->flags & MSG_F_STORED) {
		if (delivered) {
			ops->keep(c, p);
			free(p);
		} else
			deliver_outcome(p, again ? MSG_OUT_RETURNED :
			    MSG_OUT_FAILED);
		return;
	}
	part_receipt(c, p, delivered ? SMPP_STATE_DELIVERED :
	    SMPP_STATE_UNDELIVERABLE);
	free(p);
}

/*
 * Every part of joined message tm is in (m the last): one line for all,
 * with the first part's id, then each part reported. The verdict for m.
 */
static int
join_done(struct router_join *j, struct conn *c, const struct msg *m,
    struct text_join_msg *tm, const struct router_join_ops *ops)
{
	struct msg *w = msg_text_only(m, tm->data, tm->len), *p;
	int v;

	w->id = tm->ids[0];
	/* Its parts are the store's: they are reported one by one below. */
	w->flags &= ~(uint32_t)(MSG_F_STORED | MSG_F_NODE_HELD);
	v = ops->put(c, w);
	free(w);
	if (v == MSG_OK)
		counter_add(&c->r->counters, COUNTER_JOIN_JOINED, 1);
	for (unsigned i = 0; i < tm->concat.total; i++) {
		if (tm->ids[i] == m->id) {
			if (v != MSG_OK)
				continue;	/* m hears v itself */
			p = msg_dup(m);
		} else if ((p = held_take(j, c, tm->ids[i])) == NULL)
			continue;
		part_report(c, p, v == MSG_OK, v != MSG_UNFIT, ops);
	}
	text_join_msg_free(tm);
	return v == MSG_OK ? MSG_HELD : v;
}

/* The sending account's caps and timeout, or the smpp group's. */
static void
part_caps(const struct config *cf, struct text_join_part *p)
{
	const struct account_conf *a = config_find_account(cf, p->owner);
	unsigned timeout = cf->smpp.reassembly_timeout;

	p->max_pending_owner = cf->smpp.reassembly_limit;
	p->max_bytes_owner = cf->smpp.reassembly_bytes;
	if (a != NULL && a->reassembly_timeout != 0)
		timeout = a->reassembly_timeout;
	if (a != NULL && a->reassembly_limit != 0)
		p->max_pending_owner = a->reassembly_limit;
	if (a != NULL && a->reassembly_bytes != 0)
		p->max_bytes_owner = a->reassembly_bytes;
	p->timeout_ms = (uint64_t)timeout * 1000;
}

static struct router_join *
join_get(struct router_join **jp)
{
	const struct text_join_limits lim = {
		.max_pending = JOIN_SESSION_MESSAGES,
		.max_bytes = JOIN_SESSION_BYTES,
		.max_pending_owner = JOIN_SESSION_MESSAGES,
		.max_bytes_owner = JOIN_SESSION_BYTES,
		.timeout_ms = 60000,
	};

	if (*jp == NULL) {
		*jp = xcalloc(1, sizeof(**jp));
		(*jp)->t = text_join_new(&lim);
	}
	return *jp;
}

/*
 * Whether p must wait (MSG_BUSY) rather than be held: the memory the
 * reactor's held parts take is at its bound, or p (stored) would start one more message
 * while the store's window for the recipient is half held already.
 */
static bool
join_full(const struct router_join *j, const struct conn *c,
    const struct msg *m, const struct text_join_part *p)
{
	if (counter_get(&c->r->counters, COUNTER_JOIN_BYTES) +
	    held_size(m, p->len) > JOIN_REACTOR_BYTES)
		return true;
	return (m->flags & MSG_F_STORED) && j->nstored >= JOIN_STORED_MAX &&
	    !text_join_has(j->t, p);
}

/* Holds part m (header read into p), or joins its message. */
static int
join_part(struct router_join *j, struct conn *c, const struct msg *m,
    struct text_join_part *p, const struct router_join_ops *ops)
{
	struct text_join_msg *tm = NULL;

	part_caps(c->r->cf, p);
	if (join_full(j, c, m, p))
		return MSG_BUSY;
	switch (text_join_add(j->t, p, c->r->now_ms, &tm)) {
	case TEXT_JOIN_PENDING:
		held_add(j, c, m, p->len);
		return MSG_HELD;
	case TEXT_JOIN_DONE:
		return join_done(j, c, m, tm, ops);
	case TEXT_JOIN_DUP:
		/*
		 * The first copy stands; the second, answered and receipted
		 * as delivered (its text is in the line to come), or done
		 * with in the store.
		 */
		if (m->flags & MSG_F_STORED) {
			deliver_outcome(msg_dup(m), MSG_OUT_DELIVERED);
			return MSG_HELD;
		}
		return MSG_OK;
	default:
		return errno == ENOBUFS ? MSG_BUSY : MSG_UNFIT;
	}
}

/*
 * Reads m's concatenation (its UDH's IE, else its SAR fields) into p,
 * and its text after the UDH: 1 when m is one part of several, 0 when it
 * is a message of its own, -1 for a malformed header or numbers.
 */
static int
part_read(const struct msg *m, struct text_join_part *p)
{
	size_t hl = 0;
	int k = 0;

	if ((m->esm_class & UDHI) &&
	    (k = text_udh_concat(m->text, m->len, &p->concat, &hl)) < 0)
		return -1;
	if (k == 0 && (m->flags & MSG_F_SAR) && m->sar_total > 1) {
		p->concat = (struct text_concat){ .ref = m->sar_ref,
		    .total = m->sar_total, .seq = m->sar_seq, .ref16 = true };
		if (m->sar_seq == 0 || m->sar_seq > m->sar_total)
			return -1;
		k = 1;
	}
	p->data = m->text + hl;
	p->len = m->len - hl;
	return k == 1 && p->concat.total > 1;
}

int
router_join_deliver(struct router_join **jp, struct conn *c,
    const struct msg *m, const struct router_join_ops *ops)
{
	struct text_join_part p = { .owner = m->reply_to, .sender = m->from,
	    .recipient = m->to, .data_coding = m->data_coding, .id = m->id };
	struct msg *d;
	int k, v;

	if (p.owner[0] == '\0')
		p.owner = m->from;
	/* Binary: no text to join. */
	if (text_coding_of(m->data_coding, TEXT_GSM) < 0 ||
	    (k = part_read(m, &p)) < 0)
		return MSG_UNFIT;
	/*
	 * A part waits, maybe for long: on disk where a store keeps this
	 * address's messages, so that a close or a crash loses nothing.
	 */
	if (k == 1 && !(m->flags & MSG_F_STORED) && ops->durable(c))
		return MSG_STORE;
	if (k == 1)
		return join_part(join_get(jp), c, m, &p, ops);
	/* One part: its header off, delivered as it is. */
	d = msg_text_only(m, p.data, p.len);
	v = ops->put(c, d);
	msg_free(d);
	return v;
}

/* A message given up: each part that came is reported, and it counted. */
static void
join_given_up(struct router_join *j, struct conn *c, struct text_join_msg *tm,
    bool again)
{
	const struct router_join_ops none = { 0 };
	struct msg *p;
	bool stored = false;

	for (unsigned i = 0; i < tm->concat.total; i++) {
		if (tm->ids[i] == 0 || (p = held_take(j, c, tm->ids[i])) == NULL)
			continue;
		stored |= (p->flags & MSG_F_STORED) != 0;
		part_report(c, p, false, again, &none);
	}
	/* Parts that go back to the store are not lost: not counted. */
	if (!(again && stored))
		counter_add(&c->r->counters, COUNTER_JOIN_INCOMPLETE, 1);
	text_join_msg_free(tm);
}

struct join_expiry {
	struct router_join *j;
	struct conn *c;
	bool	again;
};

static void
join_expired(void *arg, struct text_join_msg *tm)
{
	struct join_expiry *x = arg;

	join_given_up(x->j, x->c, tm, x->again);
}

void
router_join_tick(struct router_join *j, struct conn *c)
{
	struct join_expiry x = { .j = j, .c = c, .again = false };

	if (j == NULL || text_join_next_expiry(j->t) > c->r->now_ms)
		return;
	text_join_expire(j->t, c->r->now_ms, join_expired, &x);
}

void
router_join_free(struct router_join *j, struct conn *c)
{
	struct join_expiry x = { .j = j, .c = c, .again = true };

	if (j == NULL)
		return;
	text_join_expire(j->t, UINT64_MAX, join_expired, &x);
	text_join_free(j->t);
	free(j);
}
