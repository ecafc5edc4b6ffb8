/* upstream_submit.c: messages routed to upstream SMS centres: the route's pick, each session's queue, window and pace, and the verdict from submit_sm_resp. */
#include "upstream.h"
#include "upstream_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "deliver.h"
#include "http_out.h"
#include "log.h"
#include "msg.h"
#include "route.h"
#include "smpp_long.h"
#include "smpp_pdu.h"
#include "util.h"

/* Sessions a message is handed to before its sender hears "busy". */
#define UPSTREAM_MOVES_MAX	4

/* The pause after ESME_RTHROTTLED or ESME_RMSGQFUL, ms. */
#define UPSTREAM_PAUSE_MS	1000

/* The longest message_id an SMSC may give (SMPP 3.4: 65 with the NUL). */
#define UPSTREAM_ID_MAX		64

static atomic_uint route_turn;	/* round_robin routes take turns */
static atomic_uint links_up;	/* links that submit, all upstreams */

/* ---- the pick ------------------------------------------------------------- */

/*
 * A bound link of st that submits, for destination to: the same one for
 * every message to to while the links stay up, so that they keep their
 * order; after move moves (a link that was full or went), the next ones.
 * false if none.
 */
static bool
pick_link(struct upstream_stat *st, const char *to, unsigned move,
    unsigned *link)
{
	uint64_t w[2] = { atomic_load(&st->links_tx[0]),
	    atomic_load(&st->links_tx[1]) };
	/* (No popcnt instruction in the baseline: counted once, not zeros.) */
	unsigned c[2] = { w[0] ? (unsigned)__builtin_popcountll(w[0]) : 0,
	    w[1] ? (unsigned)__builtin_popcountll(w[1]) : 0 };
	unsigned n = c[0] + c[1], k;

	if (n == 0)
		return false;
	/* The k-th link up: past the words before it, then its bits. */
	k = (fnv1a_str(to) + move) % n;
	for (unsigned i = 0; i < 2; i++) {
		if (k >= c[i]) {
			k -= c[i];
			continue;
		}
		while (k-- > 0)
			w[i] &= w[i] - 1;	/* drops the lowest link */
		*link = i * 64 + (unsigned)__builtin_ctzll(w[i]);
		return true;
	}
	return false;
}

/*
 * Where j goes now, by its route in cf: the first upstream with a bound
 * link (failover) or the next in turn that has one (round_robin). A job
 * with parts already taken stays with its upstream. false: none is up.
 */
static bool
pick(const struct config *cf, struct upstream_job *j)
{
	const struct route_conf *rc = route_conf_by_prefix(cf, j->m->to);
	struct upstream_stat *st;
	unsigned n, start = 0;

	if (j->d != NULL && j->nparts > 1) {
		st = upstream_stat_find(j->upstream);
		return st != NULL && pick_link(st, j->m->to, j->moves, &j->link);
	}
	if (rc == NULL || (n = rc->nupstreams) == 0)
		return false;
	if (rc->mode == ROUTE_MODE_ROUND_ROBIN)
		start = atomic_fetch_add(&route_turn, 1) % n;
	for (unsigned i = 0; i < n; i++) {
		const char *name = rc->upstreams[(start + i) % n];

		if ((st = upstream_stat_find(name)) != NULL &&
		    pick_link(st, j->m->to, j->moves, &j->link)) {
			str_copy(j->upstream, sizeof(j->upstream), name);
			return true;
		}
	}
	return false;
}

/* ---- a job's life ----------------------------------------------------------- */

/*
 * j itself, on the reactor here (NULL: not one): the spares of the
 * reactor that made it take it (upstream_take), else free().
 */
static void
job_release(struct reactor *here, struct upstream_job *j)
{
	if (here != NULL && j->home >= 0 && (unsigned)j->home == here->id)
		spares_put(&here->spares[REACTOR_SPARE_JOB], j);
	else
		free(j);
}

static void
job_free(struct reactor *here, struct upstream_job *j)
{
	smpp_long_free(j->lp);
	msg_free(j->d);
	msg_free(j->m);
	job_release(here, j);
}

/*
 * A stored message's outcome: taken or refused for good, it leaves the
 * store; anything else, it waits there for another try.
 */
static enum msg_outcome
job_outcome(enum msg_verdict v)
{
	switch (v) {
	case MSG_OK:
		return MSG_OUT_DELIVERED;
	case MSG_REJECTED:
	case MSG_UNFIT:
	case MSG_TOO_LONG:
		return MSG_OUT_FAILED;
	default:
		return MSG_OUT_RETURNED;
	}
}

/*
 * Hands j to reactor to, to run fn there: staged in b (the caller's
 * turn) when there is one, posted otherwise.
 */
static void
job_post(struct reactor_batch *b, struct reactor *to, struct upstream_job *j,
    void (*fn)(void *, void *, enum mailbox_status))
{
	j->task.fn = fn;
	j->task.arg = j;
	if (b != NULL)
		reactor_batch_add(b, to, &j->task);
	else
		reactor_post_task(to, &j->task);
}

/*
 * What becomes of m, answered v: the store hears the outcome of its
 * message, the sender the verdict (through b, or at once when r, the
 * reactor this runs on, is the sender's; b and r may be NULL).
 */
static void
job_settled(struct reactor_batch *b, struct reactor *r, struct msg *m,
    enum msg_verdict v)
{
	if (m->flags & MSG_F_STORED) {
		/* "Busy" makes the store pause before it tries again. */
		m->verdict = v == MSG_OK ? MSG_OK : MSG_BUSY;
		deliver_outcome(m, job_outcome(v));
		return;
	}
	m->verdict = v;
	if (r != NULL)
		deliver_answer_on(r, m);
	else if (b != NULL)
		deliver_answer_in(b, m);
	else
		deliver_answer(m);
}

/*
 * On the reactor that made j, back from its session's: j is freed where
 * it was allocated, and m answered. Cancelled (exiting): only freed.
 */
static void
job_home(void *owner, void *arg, enum mailbox_status st)
{
	struct upstream_job *j = arg;
	struct msg *m = j->m;
	enum msg_verdict v = j->verdict;

	job_release(owner, j);
	if (st == MAILBOX_CANCELLED) {
		msg_free(m);
		return;
	}
	job_settled(NULL, owner, m, v);
}

/*
 * The sender hears v (m goes back with it), or the store what became of
 * its message; j is freed. b: staged.
 */
static void
job_answer(struct reactor_batch *b, struct upstream_job *j,
    enum msg_verdict v)
{
	struct reactor *here = upstream_self(), *home;
	struct msg *m = j->m;

	m->status = j->status;
	/* An HTTP send that asked (dlr-mask 8, 16) hears the SMSC's word. */
	if ((m->flags & MSG_F_HTTP_RCPT) && (v == MSG_OK || v == MSG_REJECTED))
		http_out_smsc(m->id, v == MSG_OK, j->smsc_id,
		    (uint64_t)time(NULL));
	/*
	 * Made by another reactor (the sender's, most often): j goes back
	 * there with m, as m would go alone, and is freed by the thread that
	 * allocated it. glibc frees another thread's chunk under that
	 * thread's arena lock, a merge of free chunks and a wait on the
	 * owner: a fifth of a routing reactor's time, measured. What this
	 * session encoded is freed here, by its maker.
	 */
	if (j->home >= 0 && (here == NULL || (unsigned)j->home != here->id) &&
	    (home = reactor_get((unsigned)j->home)) != NULL) {
		smpp_long_free(j->lp);
		msg_free(j->d);
		j->lp = NULL;
		j->d = NULL;
		j->verdict = v;
		job_post(b, home, j, job_home);
		return;
	}
	j->m = NULL;
	job_free(here, j);
	job_settled(b, NULL, m, v);
}

static void job_arrive(void *owner, void *arg, enum mailbox_status st);

/*
 * Hands j to the session pick chose, through its reactor's mailbox (the
 * batch b of the reactor that sends, or a post of its own); or answers
 * its sender when no upstream of its route is up.
 */
static void
job_send(struct reactor_batch *b, const struct config *cf,
    struct upstream_job *j)
{
	struct reactor *to;

	/* Sessions up but none could take it (full, or going): busy. */
	if (j->moves >= UPSTREAM_MOVES_MAX) {
		job_answer(b, j, MSG_BUSY);
		return;
	}
	if (cf == NULL || !pick(cf, j) ||
	    (to = reactor_get(upstream_reactor_of(j->upstream, j->link))) ==
	    NULL) {
		job_answer(b, j, MSG_UPSTREAM_DOWN);
		return;
	}
	j->moves++;
	job_post(b, to, j, job_arrive);
}

/*
 * The kind's take: on the sender's reactor, in its turn (b); from the
 * store's thread, a reactor picks, with its configuration: the one the
 * destination hashes to, so that one number's messages, picked in the
 * order the store hands them out, reach their session in that order.
 */
static void
upstream_take(struct reactor_batch *b, struct msg *m, const char *to)
{
	struct reactor *r = upstream_self();
	/* One a message: the reactor's spares when on one (it comes home
	 * to be freed: job_home). */
	struct upstream_job *j = r != NULL ?
	    spares_get(&r->spares[REACTOR_SPARE_JOB], sizeof(*j)) :
	    xcalloc(1, sizeof(*j));

	(void)to;
	j->m = m;
	j->home = r != NULL ? (int)r->id : -1;
	if (r != NULL) {
		job_send(b, r->cf, j);
		return;
	}
	if ((r = reactor_get(fnv1a_str(m->to) % upstream_nreactors())) ==
	    NULL) {
		job_answer(b, j, MSG_UPSTREAM_DOWN);
		return;
	}
	job_post(b, r, j, job_arrive);
}

/*
 * m's text as this upstream takes it: an SMPP client's octets and
 * data_coding as they are; a line client's UTF-8 in the upstream's
 * alphabet (GSM 03.38 when it fits, for "gsm7"; Latin-1, said as
 * data_coding 3, for "latin1" and "ascii"; else UCS-2), split as its
 * long says. MSG_OK, or why it cannot go.
 */
static enum msg_verdict
job_encode(struct upstream_sess *s, struct upstream_job *j)
{
	const struct upstream_conf *uc = s->uc;
	static const enum text_long how[] = {
		[UPSTREAM_LONG_UDH] = TEXT_LONG_UDH,
		[UPSTREAM_LONG_SAR] = TEXT_LONG_SAR,
		[UPSTREAM_LONG_PAYLOAD] = TEXT_LONG_PAYLOAD,
	};
	struct smpp_long_opts o = { .how = how[uc->long_mode],
	    .max_parts = TEXT_PARTS_MAX, .ref = s->next_ref };
	unsigned needed;

	j->nparts = 1;
	if (j->m->flags & MSG_F_CODED) {
		j->d = msg_dup(j->m);
		return MSG_OK;
	}
	o.coding = uc->alphabet == CONFIG_ALPHABET_GSM ? TEXT_CODING_AUTO :
	    TEXT_LATIN1;
	if (smpp_long_make(j->m, &o, &j->d, &j->lp, &needed) < 0)
		return errno == EMSGSIZE ? MSG_TOO_LONG : MSG_UNFIT;
	if (j->lp != NULL) {
		j->nparts = j->lp->nparts;
		if (!j->lp->payload)
			s->next_ref++;
	}
	return MSG_OK;
}

static void
queue_push(struct upstream_sess *s, struct upstream_job *j, bool head)
{
	j->queued = true;
	s->qlen++;
	if (head) {
		j->next = s->qhead;
		s->qhead = j;
		if (s->qtail == NULL)
			s->qtail = j;
		return;
	}
	j->next = NULL;
	if (s->qtail != NULL)
		s->qtail->next = j;
	else
		s->qhead = j;
	s->qtail = j;
}

static void
queue_del(struct upstream_sess *s, struct upstream_job *j)
{
	struct upstream_job **pp = &s->qhead, *prev = NULL;

	while (*pp != NULL && *pp != j) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp == NULL)
		return;
	*pp = j->next;
	if (s->qtail == j)
		s->qtail = prev;
	j->next = NULL;
	j->queued = false;
	s->qlen--;
}

/* On the chosen session's reactor: it takes j, or j moves on. */
static void
job_arrive(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct upstream_job *j = arg;
	struct upstream_sess *s;
	enum msg_verdict v;

	if (st == MAILBOX_CANCELLED) {
		job_free(r, j);	/* exiting: nobody is left to answer */
		return;
	}
	/* Not picked yet (from the store): this reactor picks. */
	if (j->upstream[0] == '\0') {
		job_send(&r->batch, r->cf, j);
		return;
	}
	s = upstream_sess_find(r, j->upstream, j->link);
	if (s == NULL || s->state != UPSTREAM_BOUND ||
	    s->qlen >= s->uc->queue_limit) {
		job_send(&r->batch, r->cf, j);
		return;
	}
	if (j->d == NULL && (v = job_encode(s, j)) != MSG_OK) {
		job_answer(&r->batch, j, v);
		return;
	}
	j->since_ms = r->now_ms;
	queue_push(s, j, false);
	upstream_sess_pump(s);
}

/* ---- the session's window ----------------------------------------------- */

/*
 * The generic cell rate algorithm on one atomic, so reactors need no
 * lock: *at is when the pace allows the next part (ns).
 */
bool
upstream_tps_take(_Atomic uint64_t *at, unsigned tps, uint64_t now)
{
	uint64_t t = atomic_load(at), next, step = 1000000000u / tps;

	do {
		next = (t > now ? t : now) + step;
		if (next > now + 1000000000u)
			return false;
	} while (!atomic_compare_exchange_weak(at, &t, next));
	return true;
}

uint64_t
upstream_tps_wait(_Atomic uint64_t *at, unsigned tps, uint64_t now)
{
	uint64_t t = atomic_load(at), step = 1000000000u / tps;
	uint64_t ok = t + step;		/* allowed once ok - now <= 1 s */

	return ok > now + 1000000000u ? ok - now - 1000000000u : 0;
}

/*
 * One more part within the upstream's max_tps, now. If none may go, false
 * and in *at_ms when one may: on the monotonic clock, which the reactor's
 * coarse one follows, so that a turn that sees that time may send.
 */
static bool
tps_take(struct upstream_stat *st, unsigned tps, uint64_t *at_ms)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (upstream_tps_take(&st->tps_at, tps, now))
		return true;
	*at_ms = (now + upstream_tps_wait(&st->tps_at, tps, now) + 999999) /
	    1000000;
	return false;
}

/*
 * One address of a submit_sm: as an SMPP sender wrote it, else ours;
 * without a leading '+', which the upstream's TON says instead.
 */
static void
submit_addr(const char *raw, const char *addr, char *out)
{
	if (raw[0] == '\0')
		raw = addr;
	if (raw[0] == '+')
		raw++;
	str_copy(out, 21, raw);
}

/* The text fields of part i of j (as the SMPP recipient edge fills). */
static void
submit_text(const struct upstream_job *j, unsigned i, struct smpp_pdu *p)
{
	const struct msg *d = j->d;

	if (j->lp != NULL) {
		smpp_long_part(j->lp, i, p);
		return;
	}
	p->esm_class = d->esm_class;
	p->data_coding = d->data_coding;
	if (d->len <= 254) {
		p->sm_length = (uint8_t)d->len;
		p->short_message = d->text;
	} else {
		p->tlvs |= SMPP_TLV_MESSAGE_PAYLOAD;
		p->message_payload = d->text;
		p->message_payload_len = (uint16_t)d->len;
	}
	if (d->flags & MSG_F_SAR) {
		p->tlvs |= SMPP_TLV_SAR;
		p->sar_msg_ref_num = d->sar_ref;
		p->sar_total_segments = d->sar_total;
		p->sar_segment_seqnum = d->sar_seq;
	}
}

/* The sequence_number after seq (SMPP 3.4: 1 to 0x7FFFFFFF). */
static uint32_t
next_seq(uint32_t seq)
{
	return seq >= 0x7fffffffu ? 1 : seq + 1;
}

/* Sends part i of j as a submit_sm in slot. */
static void
submit_part(struct upstream_sess *s, struct upstream_slot *slot,
    struct upstream_job *j, unsigned i)
{
	const struct upstream_conf *uc = s->uc;
	const struct msg *d = j->d;
	struct smpp_pdu p = { .command_id = SMPP_SUBMIT_SM };
	size_t cap = 1024 + d->len;
	/* Most PDUs fit on the stack; a long message_payload does not. */
	uint8_t stackbuf[2048], *buf = cap <= sizeof(stackbuf) ? stackbuf :
	    xmalloc(cap);
	ssize_t n;

	s->seq = next_seq(s->seq);
	p.sequence_number = s->seq;
	p.source_addr_ton = (uint8_t)uc->source_ton;
	p.source_addr_npi = (uint8_t)uc->source_npi;
	submit_addr(d->src_addr, d->from, p.source_addr);
	p.dest_addr_ton = (uint8_t)uc->dest_ton;
	p.dest_addr_npi = (uint8_t)uc->dest_npi;
	submit_addr(d->dst_addr, d->to, p.destination_addr);
	p.registered_delivery = d->registered_delivery;
	submit_text(j, i, &p);
	if ((n = smpp_encode(&p, buf, cap)) > 0)
		conn_write(s->c, buf, (size_t)n);
	if (buf != stackbuf)
		free(buf);
	*slot = (struct upstream_slot){ .job = j, .seq = p.sequence_number,
	    .sent_at = s->c->r->now, .part = i };
	j->part[i] = UPJ_SENT;
	s->inflight++;
	UPSTREAM_COUNT(upstream_slice(s->stat, s->r)->submits, 1);
	UPSTREAM_COUNT(upstream_slice(s->stat, s->r)->window, 1);
}

/* A free slot, the window grown to the upstream's window if need be. */
static struct upstream_slot *
slot_free(struct upstream_sess *s)
{
	unsigned want = s->uc->window;

	if (s->wincap < want) {
		s->win = xrealloc(s->win, want * sizeof(*s->win));
		memset(s->win + s->wincap, 0,
		    (want - s->wincap) * sizeof(*s->win));
		s->wincap = want;
	}
	/*
	 * The slot the next sequence number falls on, when free: its answer
	 * finds it at once (upstream_sess_answer); else the first free.
	 */
	if (s->wincap == 0)
		return NULL;
	if (s->win[next_seq(s->seq) % s->wincap].job == NULL)
		return &s->win[next_seq(s->seq) % s->wincap];
	for (unsigned i = 0; i < s->wincap; i++)
		if (s->win[i].job == NULL)
			return &s->win[i];
	return NULL;
}

/* The first part of j still to send; j->nparts when none is. */
static unsigned
job_next_part(const struct upstream_job *j)
{
	unsigned i = 0;

	while (i < j->nparts && j->part[i] != UPJ_WAIT)
		i++;
	return i;
}

/*
 * Sends what the window, the pause after a throttle and max_tps allow;
 * a pause or a pace that holds parts back has the reactor pump s again
 * when it ends.
 */
void
upstream_sess_pump(struct upstream_sess *s)
{
	struct upstream_slot *slot;
	uint64_t now = s->r->now_ms, until, at_ms;

	while (s->state == UPSTREAM_BOUND && s->qhead != NULL &&
	    s->inflight < s->uc->window && !conn_is_closing(s->c)) {
		struct upstream_job *j = s->qhead;
		unsigned i = job_next_part(j);

		if ((until = atomic_load(&s->stat->paused_until)) > now) {
			upstream_sess_pump_at(s, until);
			break;
		}
		if (i == j->nparts) {
			queue_del(s, j);	/* every part is out */
			continue;
		}
		if ((slot = slot_free(s)) == NULL)
			break;
		if (s->uc->max_tps > 0 &&
		    !tps_take(s->stat, s->uc->max_tps, &at_ms)) {
			upstream_sess_pump_at(s, at_ms > now ? at_ms : now + 1);
			break;
		}
		submit_part(s, slot, j, i);
		if (job_next_part(j) == j->nparts)
			queue_del(s, j);
	}
}

void
upstream_sess_list(struct upstream_sess *s, bool on)
{
	uint64_t bit = 1ull << (s->link % 64);

	if (s->listed == on || s->link >= 128)
		return;
	s->listed = on;
	if (on)
		atomic_fetch_add(&links_up, 1);
	else
		atomic_fetch_sub(&links_up, 1);
	if (on)
		atomic_fetch_or(&s->stat->links_tx[s->link / 64], bit);
	else
		atomic_fetch_and(&s->stat->links_tx[s->link / 64], ~bit);
}

/* Whether any part of j is still out. */
static bool
job_has_sent(const struct upstream_job *j)
{
	for (unsigned i = 0; i < j->nparts; i++)
		if (j->part[i] == UPJ_SENT)
			return true;
	return false;
}

/*
 * j's part answered: done when nothing of it is left to send or to hear
 * about; the sender hears OK, or the refusal.
 */
static void
job_settle(struct upstream_sess *s, struct upstream_job *j)
{
	if (job_has_sent(j) || (j->status == 0 &&
	    job_next_part(j) < j->nparts))
		return;
	if (j->queued)
		queue_del(s, j);
	job_answer(&s->c->r->batch, j, j->status == 0 ? MSG_OK :
	    MSG_REJECTED);
}

/*
 * A temporary refusal: the upstream pauses, the part goes again. (The
 * status stays in case the parts after the first never go: see
 * upstream_sess_second.)
 */
static void
answer_throttled(struct upstream_sess *s, struct upstream_job *j,
    unsigned part, uint32_t status)
{
	uint64_t until = s->c->r->now_ms + UPSTREAM_PAUSE_MS;

	atomic_fetch_add(&s->stat->resp_throttled, 1);
	if (atomic_exchange(&s->stat->paused_until, until) <
	    s->c->r->now_ms) {
		atomic_fetch_add(&s->stat->throttles, 1);
		log_info("upstream %s: link %u: throttled by the SMS centre: "
		    "pausing its submits for %ums", s->uc->name, s->link,
		    UPSTREAM_PAUSE_MS);
	}
	j->part[part] = UPJ_WAIT;
	j->throttled = status;
	if (!j->queued)
		queue_push(s, j, true);
}

/* A message_id the receipts can be matched by: warned of once. */
static bool
answer_id_ok(struct upstream_sess *s, const struct upstream_job *j,
    const char *id)
{
	static atomic_bool warned;
	size_t n = strlen(id);

	if (n > 0 && n <= UPSTREAM_ID_MAX)
		return true;
	atomic_fetch_add(&s->stat->bad_ids, 1);
	if (!atomic_exchange(&warned, true))
		log_warnx("upstream %s: link %u: submit_sm_resp ESME_ROK for "
		    "message %llu without a usable message_id (empty, or over "
		    "%d octets): delivered, but its receipts cannot be "
		    "matched (told once)", s->uc->name, s->link,
		    (unsigned long long)j->m->id, UPSTREAM_ID_MAX);
	return false;
}

bool
upstream_sess_answer(struct upstream_sess *s, uint32_t seq, uint32_t status,
    const char *id)
{
	struct upstream_slot *slot = NULL;
	struct upstream_job *j;
	unsigned part;

	/* Most answers are where slot_free put them; else, a search. */
	if (s->wincap > 0 && s->win[seq % s->wincap].job != NULL &&
	    s->win[seq % s->wincap].seq == seq)
		slot = &s->win[seq % s->wincap];
	for (unsigned i = 0; i < s->wincap && slot == NULL; i++)
		if (s->win[i].job != NULL && s->win[i].seq == seq)
			slot = &s->win[i];
	if (slot == NULL)
		return false;
	j = slot->job;
	part = slot->part;
	slot->job = NULL;
	s->inflight--;
	if (status == SMPP_ESME_ROK) {
		UPSTREAM_COUNT(upstream_slice(s->stat, s->r)->resp_ok, 1);
		j->part[part] = UPJ_DONE;
		j->since_ms = s->r->now_ms;	/* a part taken: progress */
		if (answer_id_ok(s, j, id)) {
			upstream_submitted(s->cf, s->uc, id, strlen(id), j->m);
			if (j->smsc_id[0] == '\0')
				str_copy(j->smsc_id, sizeof(j->smsc_id),
				    id);
		}
	} else if (status == SMPP_ESME_RTHROTTLED ||
	    status == SMPP_ESME_RMSGQFUL) {
		answer_throttled(s, j, part, status);
	} else {
		atomic_fetch_add(&s->stat->resp_failed, 1);
		j->part[part] = UPJ_DONE;
		if (j->status == 0)
			j->status = status;
		/* Refused for good: the parts not sent yet do not go. */
		for (unsigned i = 0; i < j->nparts; i++)
			if (j->part[i] == UPJ_WAIT)
				j->part[i] = UPJ_DONE;
	}
	/*
	 * Out of the window once its id is filed (release: a reader that
	 * sees the window without it sees the id filed): a receipt that
	 * overtook this answer waits while any submit is unanswered
	 * (esme_in.c).
	 */
	atomic_fetch_add_explicit(&upstream_slice(s->stat, s->r)->window, -1,
	    memory_order_release);
	job_settle(s, j);
	upstream_sess_pump(s);
	return true;
}

void
upstream_sess_unread(struct upstream_sess *s, uint32_t now)
{
	for (unsigned i = 0; i < s->wincap; i++)
		if (s->win[i].job != NULL)
			s->win[i].sent_at = now;
}

bool
upstream_sess_overdue(const struct upstream_sess *s, uint32_t now)
{
	for (unsigned i = 0; i < s->wincap; i++)
		if (s->win[i].job != NULL &&
		    now - s->win[i].sent_at >= s->uc->response_timeout)
			return true;
	return false;
}

/* Whether any part of j was taken already. */
static bool
job_has_done(const struct upstream_job *j)
{
	for (unsigned i = 0; i < j->nparts; i++)
		if (j->part[i] == UPJ_DONE)
			return true;
	return false;
}

/* Takes j off s (queue and window); its parts out go again. */
static void
job_detach(struct upstream_sess *s, struct upstream_job *j)
{
	if (j->queued)
		queue_del(s, j);
	for (unsigned i = 0; i < s->wincap; i++)
		if (s->win[i].job == j) {
			s->win[i].job = NULL;
			s->inflight--;
			UPSTREAM_COUNT(upstream_slice(s->stat, s->r)->window,
			    -1);
		}
	for (unsigned i = 0; i < j->nparts; i++)
		if (j->part[i] == UPJ_SENT)
			j->part[i] = UPJ_WAIT;
	/* Nothing of it taken: another upstream may encode it anew. */
	if (job_next_part(j) == 0 && !job_has_done(j)) {
		smpp_long_free(j->lp);
		msg_free(j->d);
		j->lp = NULL;
		j->d = NULL;
	}
}

void
upstream_sess_drop(struct upstream_sess *s, enum upstream_drop how)
{
	struct reactor *r = s->r;

	for (;;) {
		struct upstream_job *j = s->qhead;

		for (unsigned i = 0; j == NULL && i < s->wincap; i++)
			j = s->win[i].job;
		if (j == NULL)
			break;
		job_detach(s, j);
		if (how == UPSTREAM_DROP_FREE)
			job_free(r, j);
		else if (how == UPSTREAM_DROP_ANSWER)
			job_answer(&r->batch, j, MSG_UPSTREAM_DOWN);
		else
			job_send(&r->batch, r->cf, j);
	}
}

/* For /metrics: when the oldest message waiting on s was submitted. */
static void
sess_note_oldest(struct upstream_sess *s)
{
	uint64_t oldest = 0;

	for (struct upstream_job *j = s->qhead; j != NULL; j = j->next)
		if (oldest == 0 || j->m->submitted < oldest)
			oldest = j->m->submitted;
	for (unsigned i = 0; i < s->wincap; i++) {
		const struct upstream_job *j = s->win[i].job;

		if (j != NULL && (oldest == 0 || j->m->submitted < oldest))
			oldest = j->m->submitted;
	}
	atomic_store(&s->stat->oldest_at[s->link], oldest);
}

void
upstream_sess_second(struct upstream_sess *s)
{
	struct reactor *r = s->r;
	uint64_t limit = (uint64_t)s->uc->response_timeout * 1000;
	struct upstream_job *j, *next;

	/*
	 * A sender waits for its answer no longer than response_timeout
	 * for a session to start on its message: not for a pause or a
	 * pace that will not end soon. A message with parts taken already
	 * waits as long for the next part to be: a centre that refuses it
	 * for that long (a full queue for that handset, say) ends it with
	 * that refusal, the parts before it delivered.
	 */
	for (j = s->qhead; j != NULL; j = next) {
		next = j->next;
		if (r->now_ms - j->since_ms < limit || job_has_sent(j))
			continue;
		if (!job_has_done(j)) {
			queue_del(s, j);
			job_answer(&r->batch, j, MSG_BUSY);
			continue;
		}
		for (unsigned i = 0; i < j->nparts; i++)
			j->part[i] = UPJ_DONE;
		if (j->status == 0)
			j->status = j->throttled != 0 ? j->throttled :
			    SMPP_ESME_RTHROTTLED;
		job_settle(s, j);
	}
	upstream_sess_pump(s);
	sess_note_oldest(s);
}

void
upstream_fuzz_submit(struct conn *c, const char *text)
{
	struct upstream_sess *s = c->pdata;
	struct upstream_job *j;
	size_t n = strlen(text);

	if (s == NULL || s->state != UPSTREAM_BOUND)
		return;
	j = xcalloc(1, sizeof(*j));
	j->home = -1;
	j->m = msg_new(n);
	memcpy(j->m->text, text, n);
	j->m->len = n;
	j->m->flags = MSG_F_NO_VERDICT | MSG_F_LINE_TEXT;
	j->m->sender_kind = MSG_KIND_NONE;
	snprintf(j->m->from, sizeof(j->m->from), "fuzz");
	snprintf(j->m->to, sizeof(j->m->to), "+351911000000");
	str_copy(j->upstream, sizeof(j->upstream), s->uc->name);
	if (job_encode(s, j) != MSG_OK) {
		job_free(NULL, j);
		return;
	}
	j->since_ms = c->r->now_ms;
	queue_push(s, j, false);
	upstream_sess_pump(s);
}

/* ---- the kind ----------------------------------------------------------- */

static bool
upstream_kind_on(void)
{
	return true;
}

/* Whether any upstream has a link that submits (the store waits else). */
static bool
upstream_kind_up(void)
{
	return atomic_load(&links_up) > 0;
}

static const struct deliver_kind_ops upstream_kind = {
	.name = "upstream",
	.on = upstream_kind_on,
	.up = upstream_kind_up,
	.take = upstream_take,
};

void
upstream_kind_register(void)
{
	if (deliver_register(MSG_KIND_UPSTREAM, &upstream_kind) < 0)
		fatal("cannot register the upstream kind");
}

void
upstream_submitted(const struct config *cf, const struct upstream_conf *up,
    const char *smsc_id, size_t smsc_id_len, const struct msg *m)
{
	log_debug("upstream %s: message %llu is SMSC id %.*s", up->name,
	    (unsigned long long)m->id, (int)smsc_id_len, smsc_id);
	esme_receipt_record(cf, up, smsc_id, smsc_id_len, m);
}
