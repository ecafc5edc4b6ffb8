/* esme_in.c: what an upstream SMS centre sends us: receipts, matched to our ids and passed to their submitters, and messages from the network, routed like a local submit. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "config.h"
#include "conn.h"
#include "deliver.h"
#include "http_out.h"
#include "log.h"
#include "msg.h"
#include "reactor.h"
#include "receipt_map.h"
#include "smpp_msg.h"
#include "smpp_pdu.h"
#include "smpp_receipt.h"
#include "store.h"
#include "upstream.h"
#include "upstream_int.h"
#include "util.h"

/* esm_class's message type bits, and those that mark a receipt. */
#define ESM_TYPE_MASK		0x3C
#define ESM_SME_ACK		0x08
#define ESM_INTERMEDIATE	0x20

/* One map for every upstream: a receipt may come back on any session. */
static struct receipt_map *receipts;
static pthread_once_t receipts_once = PTHREAD_ONCE_INIT;

static void
receipts_init(void)
{
	receipts = receipt_map_new();
}

static struct receipt_map *
receipts_map(void)
{
	pthread_once(&receipts_once, receipts_init);
	return receipts;
}

size_t
upstream_receipt_ids(void)
{
	return receipt_map_count(receipts_map());
}

static uint64_t
receipts_now(void)
{
	return mono_ms() / 1000;
}

static struct receipt_limits
receipts_limits(const struct config *cf)
{
	return (struct receipt_limits){ .limit = cf->upstream_receipts.limit,
	    .expiry = cf->upstream_receipts.expiry };
}

void
esme_receipt_record(const struct config *cf, const struct upstream_conf *uc,
    const char *id, size_t len, const struct msg *m)
{
	struct receipt_limits lim;
	struct receipt_orig o;
	struct receipt_key keys[RECEIPT_KEYS_MAX];
	unsigned n;

	/*
	 * The centre was not asked for a receipt (submit_sm carries the
	 * sender's registered_delivery): an id filed for one would only take
	 * room and time. Asked first: the entry below is hundreds of octets
	 * to fill, for every submit_sm answered.
	 */
	if ((m->registered_delivery & 0x03) == 0)
		return;
	lim = receipts_limits(cf);
	o = (struct receipt_orig){ .id = m->id, .submitted = m->submitted,
	    .registered_delivery = m->registered_delivery,
	    .http = (m->flags & MSG_F_HTTP_RCPT) != 0,
	    .src_ton = m->src_ton, .src_npi = m->src_npi,
	    .dst_ton = m->dst_ton, .dst_npi = m->dst_npi };
	n = receipt_id_keys(uc->receipt_id, false, id, len, keys);

	str_copy(o.reply_to, sizeof(o.reply_to), m->reply_to);
	str_copy(o.to, sizeof(o.to), m->to);
	memcpy(o.src_addr, m->src_addr, sizeof(o.src_addr));
	memcpy(o.dst_addr, m->dst_addr, sizeof(o.dst_addr));

	/* With a store, a restart or an evicted entry loses no receipt. */
	if (n > 0 && store_rcpt_on())
		store_rcpt_file(uc->name, keys, n, &o);
	if (receipt_map_add(receipts_map(), uc->name, keys, n, &o,
	    receipts_now(), &lim) < 0)
		log_debug("upstream %s: message %llu: no receipt can match "
		    "its id \"%.*s\"", uc->name, (unsigned long long)m->id,
		    (int)(len > RECEIPT_ID_MAX ? RECEIPT_ID_MAX : len), id);
}

static void
esme_answer_deliver(struct conn *c, uint32_t cmd, uint32_t status,
    uint32_t seq)
{
	uint8_t buf[SMPP_RESP_MAX];
	ssize_t n = smpp_encode_resp(buf, cmd | SMPP_RESP, status, seq, NULL);

	if (n > 0)
		conn_write(c, buf, (size_t)n);
}

/*
 * Whether p is a receipt: esm_class says so (a centre's receipt, an
 * SME's acknowledgement, an intermediate notification), it names the
 * message it is about, or its text is a receipt's ("id:... stat:...").
 */
static bool
pdu_is_receipt(const struct smpp_pdu *p, struct smpp_receipt_text *f)
{
	unsigned type = p->esm_class & ESM_TYPE_MASK;
	size_t len;
	const uint8_t *t = smpp_msg_text(p, &len);
	bool parsed = smpp_receipt_parse(t, len, f) == 0;

	if (type == SMPP_ESM_RECEIPT || type == ESM_SME_ACK ||
	    type == ESM_INTERMEDIATE)
		return true;
	if (p->tlvs & SMPP_TLV_RECEIPTED_MESSAGE_ID)
		return true;
	return parsed && len >= 3 && memcmp(t, "id:", 3) == 0 &&
	    f->stat[0] != '\0';
}

/*
 * The centre's receipt as ours to the submitter: our id in its text and
 * receipted_message_id, the centre's stat, err and dates kept.
 */
static struct msg *
receipt_relay(struct reactor *r, const struct receipt_orig *o,
    const struct smpp_receipt_text *f, uint8_t state)
{
	char sub[16], done[16], text[200], oid[24];
	bool ok = state == SMPP_STATE_DELIVERED;
	size_t n;

	oid[u64_to_dec(oid, o->id)] = '\0';
	/* Ours only where the centre wrote none. */
	if (f->submit_date[0] == '\0')
		smpp_receipt_date(o->submitted, sub, sizeof(sub));
	if (f->done_date[0] == '\0')
		smpp_receipt_date((uint64_t)time(NULL), done, sizeof(done));
	n = smpp_receipt_write(text, sizeof(text), &(struct smpp_receipt_parts){
	    .id = oid, .sub = f->sub[0] ? f->sub : "001",
	    .dlvrd = f->dlvrd[0] ? f->dlvrd : ok ? "001" : "000",
	    .submit_date = f->submit_date[0] ? f->submit_date : sub,
	    .done_date = f->done_date[0] ? f->done_date : done,
	    .stat = f->stat[0] ? f->stat : smpp_receipt_stat(state),
	    .err = f->err[0] ? f->err : ok ? "000" : "001", .text = f->text,
	    .tl = strlen(f->text) });
	return smpp_receipt_msg(text, n, msg_next_id(r),
	    (uint64_t)time(NULL), state, &(struct smpp_receipt_ends){
	    .id = oid, .to = o->to, .reply_to = o->reply_to,
	    .src_addr = o->src_addr, .dst_addr = o->dst_addr,
	    .src_ton = o->src_ton, .src_npi = o->src_npi,
	    .dst_ton = o->dst_ton, .dst_npi = o->dst_npi });
}

/* Whether the submitter asked for a receipt in this state. */
static bool
receipt_wanted(const struct receipt_orig *o, uint8_t state)
{
	unsigned rd = o->registered_delivery & 0x03;

	if (o->reply_to[0] == '\0' || !smpp_receipt_final(state))
		return false;
	return rd == 1 || (rd == 2 && state != SMPP_STATE_DELIVERED);
}

static void mo_update_hold(struct conn *c, struct upstream_sess *s);

/* Counted, and said at debug: a receipt for none of our messages. */
static void
receipt_unmatched(const char *upstream, const char *id, const char *why)
{
	struct upstream_stat *st = upstream_stat_find(upstream);

	if (st != NULL)
		atomic_fetch_add(&st->receipts_unmatched, 1);
	log_debug("upstream %s: receipt for \"%s\", an id of no message of "
	    "ours%s: dropped", upstream, id, why);
}

static void receipt_cluster_again(const char *upstream, const char *id,
	    uint8_t state, const uint8_t *text, size_t len);

/*
 * The cluster thread: what the other nodes said of a receipt we asked.
 * Matched nowhere, it is looked for here once more: it may have come
 * before the submit_sm_resp that filed its id here.
 */
static void
receipt_cluster_done(const char *upstream, const char *id, uint8_t state,
    const uint8_t *text, size_t len, bool matched)
{
	if (!matched)
		receipt_cluster_again(upstream, id, state, text, len);
}

/*
 * A receipt that matches nothing on this node (memory, store): asked of
 * the other nodes of a cluster, which may have submitted its message;
 * else unmatched.
 */
static void
receipt_elsewhere(const struct upstream_sess *s, const char *id,
    uint8_t state, const uint8_t *text, size_t len)
{
	if (cluster_receipt_ask(s->uc->name, id, strlen(id), state, text, len,
	    receipt_cluster_done)) {
		log_debug("upstream %s: link %u: receipt for \"%s\" matches "
		    "nothing here: asking the other nodes", s->uc->name,
		    s->link, id);
		return;
	}
	receipt_unmatched(s->uc->name, id, "");
}

/* A receipt matched to o: counted, and relayed if asked for. */
static void
receipt_settle(struct reactor *r, const char *upstream,
    const struct smpp_receipt_text *f, uint8_t state,
    const struct receipt_orig *o)
{
	struct upstream_stat *st = upstream_stat_find(upstream);

	if (st != NULL)
		UPSTREAM_COUNT(upstream_slice(st, r)->receipts_matched, 1);
	/* An HTTP send: http-out posts it to the application's URL. */
	if (o->http) {
		if (smpp_receipt_final(state) &&
		    !http_out_receipt_of(o->id, state, (uint64_t)time(NULL)))
			log_debug("upstream %s: receipt for HTTP message %llu: "
			    "no http-out to post it", upstream,
			    (unsigned long long)o->id);
		return;
	}
	if (receipt_wanted(o, state))
		deliver_forward(r, receipt_relay(r, o, f, state));
}

/*
 * Looks the receipt's id up in memory, in the upstream's receipt_id form
 * (r's configuration bounds the map) and, matched, settles it; true if it
 * was there.
 */
static bool
receipt_match(struct reactor *r, const char *upstream, unsigned form,
    const char *id, uint8_t state, const struct smpp_receipt_text *f)
{
	struct receipt_limits lim = receipts_limits(r->cf);
	bool final = smpp_receipt_final(state);
	struct receipt_key keys[RECEIPT_KEYS_MAX];
	unsigned n = receipt_id_keys(form, true, id, strlen(id), keys);
	struct receipt_orig o;

	if (n == 0 || !receipt_map_find(receipts_map(), upstream, keys, n,
	    final, receipts_now(), &lim, &o))
		return false;
	if (final && store_rcpt_on())
		store_rcpt_forget(upstream, keys, n, o.id);
	receipt_settle(r, upstream, f, state, &o);
	return true;
}

/*
 * A receipt that matched nothing yet. An SMS centre may send a receipt
 * before the submit_sm_resp that files its id: on another session, which
 * another reactor reads, or on one the centre answers from several
 * threads. While the upstream has submits unanswered, such a receipt is
 * looked for again after 4, 8, 16... ms (at most 256 between tries) for
 * up to upstream_receipts.wait seconds, its deliver_sm unanswered
 * meanwhile (so a crash loses nothing the centre was told we took; the
 * session's input waits while LATE_SESS_MAX wait), and only then counted
 * unmatched. In a cluster the other nodes are asked at once instead: the
 * receipt may be theirs (cluster_receipt.c looks here once more when
 * none has it).
 */
struct esme_late {
	struct esme_late *next;
	struct conn_handle conn;
	uint32_t cmd, seq;
	uint8_t	state;
	uint64_t due_ms, until_ms;	/* the reactor's clock */
	unsigned step_ms;
	char	id[RECEIPT_ID_MAX + 1];
	struct smpp_receipt_text f;
};

/* A reactor's late receipts, oldest first. */
struct late_list {
	struct esme_late *head, **tail;
};

#define LATE_STEP_MIN_MS	4	/* the reactor's clock's grain */
#define LATE_STEP_MAX_MS	256
#define LATE_SESS_MAX		1024	/* waiting at once, per session */

static void
late_append(struct late_list *list, struct esme_late *l)
{
	l->next = NULL;
	*list->tail = l;
	list->tail = &l->next;
}

/*
 * One try of l, due now: true when it is done with (matched, given up:
 * the wait is over, or no submit is unanswered any more, so none can
 * file its id; or its session gone), answered where its session is
 * still there.
 * Answering may release the session's held input, which may park more
 * receipts on the list: the caller walks a list of its own.
 */
static bool
late_try(struct reactor *r, struct esme_late *l)
{
	struct conn *c = conn_resolve(r, &l->conn);
	struct upstream_sess *s;

	/* Gone: the centre sends the receipt again on another link. */
	if (c == NULL || (s = c->pdata) == NULL || s->late == 0)
		return true;
	if (s->state != UPSTREAM_CLOSING) {
		/* As at first: read before the lookup (esme_receipt). */
		bool pending = upstream_stat_unanswered(s->stat);

		if (!receipt_match(r, s->uc->name, s->uc->receipt_id, l->id,
		    l->state, &l->f)) {
			if (pending && r->now_ms < l->until_ms) {
				l->due_ms = r->now_ms + l->step_ms;
				if (l->step_ms < LATE_STEP_MAX_MS)
					l->step_ms *= 2;
				return false;
			}
			receipt_elsewhere(s, l->id, l->state, NULL, 0);
		}
		esme_answer_deliver(c, l->cmd, SMPP_ESME_ROK, l->seq);
	}
	s->late--;
	s->mo_pending--;
	mo_update_hold(c, s);
	return true;
}

/* Tries what is due, oldest first, and wakes for the next. */
static void
late_after_events(struct reactor *r, void *arg)
{
	struct late_list *list = arg, todo = *list, kept;
	struct esme_late *l, *next;
	uint64_t soonest = UINT64_MAX;

	if (todo.head == NULL)
		return;
	/* What the tries park meanwhile goes on the emptied list. */
	list->head = NULL;
	list->tail = &list->head;
	kept.head = NULL;
	kept.tail = &kept.head;
	for (l = todo.head; l != NULL; l = next) {
		next = l->next;
		if (l->due_ms <= r->now_ms && late_try(r, l)) {
			free(l);
			continue;
		}
		late_append(&kept, l);
	}
	/* The kept ones first, then those parked meanwhile. */
	if (kept.head != NULL) {
		*kept.tail = list->head;
		list->head = kept.head;
		if (*kept.tail == NULL)
			list->tail = kept.tail;
	}
	for (l = list->head; l != NULL; l = l->next)
		if (l->due_ms < soonest)
			soonest = l->due_ms;
	if (soonest != UINT64_MAX)
		reactor_wake_within(r, soonest > r->now_ms ?
		    (int)(soonest - r->now_ms) : 0);
}

/* The reactor goes: nobody is left to answer. */
static void
late_free(struct reactor *r, void *arg)
{
	struct late_list *list = arg;

	(void)r;
	while (list->head != NULL) {
		struct esme_late *l = list->head;

		list->head = l->next;
		free(l);
	}
	free(list);
}

static const struct reactor_hooks late_hooks = {
	.after_events = late_after_events,
	.free = late_free,
};

/*
 * r's late receipts, its hook added with the first; NULL (said once) if
 * no hook has room.
 */
static struct late_list *
late_list(struct reactor *r)
{
	static atomic_bool told;
	struct late_list *list = reactor_hook_arg(r, &late_hooks);

	if (list == NULL) {
		list = xcalloc(1, sizeof(*list));
		list->tail = &list->head;
		if (reactor_hook_add(r, &late_hooks, list) < 0) {
			free(list);
			if (!atomic_exchange(&told, true))
				log_warnx("reactor=%u: no room for its late "
				    "receipts' hook: receipts that come before "
				    "their id count as unmatched", r->id);
			return NULL;
		}
	}
	return list;
}

/*
 * Parks a receipt that matched nothing (its deliver_sm: cmd, seq) to be
 * looked for again; the caller counts it in mo_pending and answers
 * nothing. false: it is not to wait (upstream_receipts.wait is 0, no
 * submit of this upstream was unanswered before the receipt was first
 * looked up (pending false), so no answer can still file its id, or a
 * cluster's other nodes are asked at once instead).
 */
static bool
late_park(struct conn *c, struct upstream_sess *s, uint32_t cmd,
    uint32_t seq, const char *id, uint8_t state,
    const struct smpp_receipt_text *f, bool pending)
{
	unsigned wait = c->r->cf->upstream_receipts.wait;
	struct late_list *list;
	struct esme_late *l;

	if (wait == 0 || id[0] == '\0' || !pending || cluster_on() ||
	    (list = late_list(c->r)) == NULL)
		return false;
	l = xcalloc(1, sizeof(*l));
	l->conn = conn_handle(c);
	l->cmd = cmd;
	l->seq = seq;
	l->state = state;
	l->step_ms = LATE_STEP_MIN_MS;
	l->due_ms = c->r->now_ms + l->step_ms;
	l->until_ms = c->r->now_ms + (uint64_t)wait * 1000;
	str_copy(l->id, sizeof(l->id), id);
	l->f = *f;
	late_append(list, l);
	s->late++;
	atomic_fetch_add(&s->stat->receipts_late, 1);
	reactor_wake_within(c->r, (int)l->step_ms);
	return true;
}

/* A receipt looked up in the store: what it needs when the answer comes. */
struct rcpt_wait {
	struct store_rcpt_req q;	/* first: the store's part */
	struct conn_handle conn;
	uint32_t cmd, seq;
	uint8_t	state;
	char	id[RECEIPT_ID_MAX + 1];
	struct smpp_receipt_text f;
	struct receipt_key keys[RECEIPT_KEYS_MAX];
	struct receipt_orig o;
	bool	pending;		/* submits were unanswered before */
	size_t	len;			/* the receipt's text, for the cluster */
	uint8_t	text[];
};

/*
 * The store's answer, on the session's reactor: settled and answered as
 * at once from memory (not there either: looked for again while its id
 * may still come, or asked of the cluster). A
 * session gone meanwhile answers nothing: the centre sends the receipt
 * again.
 */
static void
rcpt_found(void *owner, void *arg, enum mailbox_status st)
{
	struct rcpt_wait *w = arg;
	struct conn *c;
	struct upstream_sess *s;

	if (st == MAILBOX_RUN && (c = conn_resolve(owner, &w->conn)) != NULL &&
	    (s = c->pdata) != NULL && s->mo_pending > 0) {
		s->mo_pending--;
		if (s->state == UPSTREAM_CLOSING) {
			/* nothing more is answered */
		} else if (receipt_match(c->r, s->uc->name, s->uc->receipt_id,
		    w->id, w->state, &w->f)) {
			/*
			 * Filed in memory meanwhile (its submit_sm_resp came
			 * while the store looked): settled from there, so that
			 * no entry is left behind.
			 */
			esme_answer_deliver(c, w->cmd, SMPP_ESME_ROK, w->seq);
		} else if (w->q.found) {
			receipt_settle(c->r, s->uc->name, &w->f, w->state,
			    &w->o);
			esme_answer_deliver(c, w->cmd, SMPP_ESME_ROK, w->seq);
		} else if (late_park(c, s, w->cmd, w->seq, w->id, w->state,
		    &w->f, w->pending)) {
			s->mo_pending++;	/* its answer waits on */
		} else {
			receipt_elsewhere(s, w->id, w->state, w->text, w->len);
			esme_answer_deliver(c, w->cmd, SMPP_ESME_ROK, w->seq);
		}
		mo_update_hold(c, s);
	}
	free(w);
}

/*
 * Not in memory (evicted, or filed before a restart): the store is asked,
 * and the answer waits; the window bounds such waits as it bounds MOs.
 */
static void
receipt_ask_store(struct conn *c, struct upstream_sess *s,
    const struct smpp_pdu *p, const char *id,
    const struct smpp_receipt_text *f, uint8_t state, bool pending)
{
	size_t len;
	const uint8_t *text = smpp_msg_text(p, &len);
	struct rcpt_wait *w;

	if (len > 1024)
		len = 0;	/* too long to ask the cluster about */
	w = xcalloc(1, sizeof(*w) + len);
	memcpy(w->text, text, len);
	w->len = len;
	w->q.done = rcpt_found;
	w->q.reactor = c->r->id;
	str_copy(w->q.upstream, sizeof(w->q.upstream), s->uc->name);
	w->q.nkeys = receipt_id_keys(s->uc->receipt_id, true, id, strlen(id),
	    w->keys);
	w->q.keys = w->keys;
	w->q.take = smpp_receipt_final(state);
	w->q.o = &w->o;
	w->conn = conn_handle(c);
	w->cmd = p->command_id;
	w->seq = p->sequence_number;
	w->state = state;
	w->pending = pending;
	str_copy(w->id, sizeof(w->id), id);
	w->f = *f;
	s->mo_pending++;
	mo_update_hold(c, s);
	store_rcpt_find(&w->q);
}

/*
 * A receipt: to its submitter with our id; one that matches nothing here
 * is looked up in the store, then asked of the other nodes of a cluster,
 * else counted as unmatched. false: it waits for the store, which
 * answers the centre later.
 */
static bool
esme_receipt(struct conn *c, struct upstream_sess *s,
    const struct smpp_pdu *p, const struct smpp_receipt_text *f)
{
	const char *id = (p->tlvs & SMPP_TLV_RECEIPTED_MESSAGE_ID) ?
	    p->receipted_message_id : f->id;
	uint8_t state = (p->tlvs & SMPP_TLV_MESSAGE_STATE) ?
	    p->message_state_tlv : smpp_receipt_state(f->stat);
	const uint8_t *text;
	size_t len;
	/*
	 * Read before the lookup: an answer files its id before it leaves
	 * the window, so with none unanswered now no answer can still come
	 * with this receipt's id.
	 */
	bool pending = upstream_stat_unanswered(s->stat);

	if (receipt_match(c->r, s->uc->name, s->uc->receipt_id, id, state, f))
		return true;
	if (store_rcpt_on() && id[0] != '\0') {
		receipt_ask_store(c, s, p, id, f, state, pending);
		return false;
	}
	text = smpp_msg_text(p, &len);
	if (late_park(c, s, p->command_id, p->sequence_number, id, state, f,
	    pending)) {
		s->mo_pending++;
		mo_update_hold(c, s);
		return false;
	}
	receipt_elsewhere(s, id, state, text, len);
	return true;
}

/* The upstream called name in r's configuration, or NULL. */
static const struct upstream_conf *
upstream_named(const struct reactor *r, const char *name)
{
	for (size_t i = 0; i < r->cf->nupstreams; i++)
		if (strcmp(r->cf->upstreams[i].name, name) == 0)
			return &r->cf->upstreams[i];
	return NULL;
}

/* The receipt's text fields, or none. */
static void
question_text(const struct cluster_receipt_q *q, struct smpp_receipt_text *f)
{
	if (smpp_receipt_parse(q->text, q->len, f) < 0)
		memset(f, 0, sizeof(*f));
}

/*
 * A reactor: a receipt the cluster carried (another node's question, or
 * ours that no other node matched) looked up in this node's memory.
 */
static bool
question_match(struct reactor *r, const struct cluster_receipt_q *q)
{
	const struct upstream_conf *uc = upstream_named(r, q->upstream);
	struct smpp_receipt_text f;

	/* An upstream this node does not have has no ids here. */
	if (uc == NULL)
		return false;
	question_text(q, &f);
	return receipt_match(r, q->upstream, uc->receipt_id, q->id, q->state,
	    &f);
}

/*
 * Other nodes' questions waiting for this node's store at once: each
 * asking node keeps at most 4,096 in flight; past this (a flood on the
 * cluster's subject), a question that misses memory is answered no.
 */
#define QUESTIONS_STORE_MAX	16384

static atomic_uint questions_in_store;

/* Another node's question, looked up in this node's store. */
struct question_wait {
	struct store_rcpt_req q;	/* first: the store's part */
	struct cluster_receipt_q *cq;
	struct smpp_receipt_text f;
	struct receipt_key keys[RECEIPT_KEYS_MAX];
	struct receipt_orig o;
};

/*
 * The store's answer, on reactor 0: relayed and answered when found.
 * Memory first: an id filed there while the store looked (its
 * submit_sm_resp files the store's copy first) is settled from there, so
 * that no entry is left behind. The store's copy goes once relayed.
 */
static void
question_found(void *owner, void *arg, enum mailbox_status st)
{
	struct question_wait *w = arg;
	bool matched = false;

	if (st == MAILBOX_RUN) {
		if (question_match(owner, w->cq)) {
			matched = true;
		} else if (w->q.found) {
			matched = true;
			if (smpp_receipt_final(w->cq->state))
				store_rcpt_forget(w->cq->upstream,
				    &w->keys[w->q.which], 1, w->o.id);
			receipt_settle(owner, w->cq->upstream, &w->f,
			    w->cq->state, &w->o);
		}
	}
	cluster_receipt_answer(w->cq, matched);
	atomic_fetch_sub(&questions_in_store, 1);
	free(w);
}

/*
 * Not in memory: filed before a restart, or gone from memory, the id may
 * be in this node's store. false: not asked (no store, no such upstream
 * here, or QUESTIONS_STORE_MAX waiting).
 */
static bool
question_ask_store(struct reactor *r, struct cluster_receipt_q *cq)
{
	const struct upstream_conf *uc = upstream_named(r, cq->upstream);
	struct question_wait *w;

	if (uc == NULL || !store_rcpt_on() || cq->id[0] == '\0')
		return false;
	if (atomic_fetch_add(&questions_in_store, 1) >= QUESTIONS_STORE_MAX) {
		atomic_fetch_sub(&questions_in_store, 1);
		return false;
	}
	w = xcalloc(1, sizeof(*w));
	w->cq = cq;
	question_text(cq, &w->f);
	w->q.done = question_found;
	w->q.reactor = r->id;
	str_copy(w->q.upstream, sizeof(w->q.upstream), cq->upstream);
	w->q.nkeys = receipt_id_keys(uc->receipt_id, true, cq->id,
	    strlen(cq->id), w->keys);
	w->q.keys = w->keys;
	w->q.take = false;	/* forgotten once relayed (question_found) */
	w->q.o = &w->o;
	store_rcpt_find(&w->q);
	return true;
}

/*
 * A reactor: another node's question, looked up here, in memory, then in
 * the store (q is the cluster's until it is answered).
 */
static void
question_task(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_receipt_q *q = arg;

	if (st == MAILBOX_RUN && question_match(owner, q))
		cluster_receipt_answer(q, true);
	else if (st != MAILBOX_RUN || !question_ask_store(owner, q))
		cluster_receipt_answer(q, false);
}

/* A reactor: our receipt that no other node matched, tried here again. */
static void
again_task(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_receipt_q *q = arg;

	if (st == MAILBOX_RUN && !question_match(owner, q))
		receipt_unmatched(q->upstream, q->id, " on any node");
	free(q);
}

static void
receipt_cluster_again(const char *upstream, const char *id, uint8_t state,
    const uint8_t *text, size_t len)
{
	struct reactor *r = reactor_get(0);
	struct cluster_receipt_q *q;

	if (r == NULL) {
		receipt_unmatched(upstream, id, " on any node");
		return;
	}
	q = xcalloc(1, sizeof(*q) + len);
	q->state = state;
	str_copy(q->upstream, sizeof(q->upstream), upstream);
	str_copy(q->id, sizeof(q->id), id);
	if (len > 0)
		memcpy(q->text, text, len);
	q->len = len;
	q->task.fn = again_task;
	q->task.arg = q;
	reactor_post_task(r, &q->task);
}

/* The cluster thread: another node's question goes to a reactor. */
static void
receipt_question(struct cluster_receipt_q *q)
{
	struct reactor *r = reactor_get(0);

	if (r == NULL) {
		cluster_receipt_answer(q, false);
		return;
	}
	q->task.fn = question_task;
	q->task.arg = q;
	reactor_post_task(r, &q->task);
}

void
esme_receipts_attach(void)
{
	cluster_receipt_matcher(receipt_question);
}

/* The status that answers a message from the centre, by its verdict. */
static uint32_t
mo_status(enum msg_verdict v)
{
	switch (v) {
	case MSG_OK:
		return SMPP_ESME_ROK;
	case MSG_NO_ROUTE:
		return SMPP_ESME_RINVDSTADR;
	case MSG_UNFIT:
	case MSG_TOO_LONG:
		return SMPP_ESME_RSUBMITFAIL;
	case MSG_BUSY:
	case MSG_REFUSED:
	case MSG_FULL:
		return SMPP_ESME_RMSGQFUL;
	default:
		return SMPP_ESME_RX_T_APPN;	/* try again later */
	}
}

static struct msg *
mo_msg(struct conn *c, struct upstream_sess *s, const struct smpp_pdu *p,
    const char *from, const char *to)
{
	struct msg *m = smpp_msg_new(p, from, to);

	m->id = msg_next_id(c->r);
	m->read_ns = c->r->turn_ns;
	/* How a line client reads data_coding 0 from this centre. */
	m->flags |= MSG_F_PREFIX_FIRST | smpp_msg_coding_flags(s->uc->alphabet);
	return m;
}

/*
 * Input waits while a window of messages awaits verdicts: a flood from
 * the centre is bounded by what it may leave unanswered. Receipts looked
 * for again have a bound of their own (LATE_SESS_MAX): their ids may be
 * in submit_sm_resps behind them in this very input.
 */
static void
mo_update_hold(struct conn *c, struct upstream_sess *s)
{
	unsigned n = s->mo_pending - s->late;

	if (n >= s->uc->window || s->late >= LATE_SESS_MAX)
		conn_hold(c);
	else if (n <= s->uc->window / 2 && s->late < LATE_SESS_MAX / 2)
		conn_release(c);
}

static void
mo_answer(struct conn *c, struct upstream_sess *s, uint32_t cmd,
    uint32_t seq, enum msg_verdict v)
{
	uint32_t status = mo_status(v);

	if (status == SMPP_ESME_ROK)
		UPSTREAM_COUNT(upstream_slice(s->stat, c->r)->mo_routed, 1);
	else {
		atomic_fetch_add(&s->stat->deliver_refused, 1);
		log_debug("upstream %s: link %u: %s refused: %s", s->uc->name,
		    s->link, smpp_command_name(cmd), msg_verdict_name(v));
	}
	esme_answer_deliver(c, cmd, status, seq);
}

/* A message from the network: routed by its destination. */
static void
esme_mo(struct conn *c, struct upstream_sess *s, const struct smpp_pdu *p)
{
	char from[ROUTE_ADDR_MAX + 2], to[ROUTE_ADDR_MAX + 2];
	enum msg_verdict v;

	if (!smpp_msg_addr(p->destination_addr, p->dest_addr_ton, to, sizeof(to))) {
		mo_answer(c, s, p->command_id, p->sequence_number,
		    MSG_NO_ROUTE);
		return;
	}
	if (!smpp_msg_addr(p->source_addr, p->source_addr_ton, from, sizeof(from))) {
		atomic_fetch_add(&s->stat->deliver_refused, 1);
		esme_answer_deliver(c, p->command_id, SMPP_ESME_RINVSRCADR,
		    p->sequence_number);
		return;
	}
	v = deliver_send(c, mo_msg(c, s, p, from, to));
	if (v != MSG_PENDING) {
		mo_answer(c, s, p->command_id, p->sequence_number, v);
		return;
	}
	s->mo_pending++;
	mo_update_hold(c, s);
}

void
esme_verdict(struct conn *c, const struct msg *m)
{
	struct upstream_sess *s = c->pdata;

	if (s == NULL || s->mo_pending == 0)
		return;
	s->mo_pending--;
	if (s->state != UPSTREAM_CLOSING)
		mo_answer(c, s, m->sender_cmd, m->sender_ref, m->verdict);
	mo_update_hold(c, s);
}

void
esme_deliver(struct conn *c, const struct smpp_pdu *p)
{
	struct upstream_sess *s = c->pdata;
	struct smpp_receipt_text f;

	if (pdu_is_receipt(p, &f)) {
		/* Handed on or dropped: either way the centre is done. */
		if (esme_receipt(c, s, p, &f))
			esme_answer_deliver(c, p->command_id, SMPP_ESME_ROK,
			    p->sequence_number);
		return;
	}
	esme_mo(c, s, p);
}
