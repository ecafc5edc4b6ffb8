/*
 * cluster_receipt.c: a receipt from an upstream SMS centre may come back
 * on another node's session than the one that submitted the message, and
 * only the submitting node has the SMSC's id in its receipt map. A node
 * that finds no entry asks every other node over NATS; the one that has
 * it relays the receipt to its submitter (wherever that is bound: the
 * relay is routed like any message) and answers; no answer within
 * RCPT_WAIT_MS and the receipt is unmatched.
 *
 * Subjects: "<prefix>.rq" carries the questions (every node subscribes,
 * no queue group); "<prefix>.ra.<node>.<instance>" each node's answers.
 * A question: "<instance> <seq> <state> <upstream> <idlen>\n", then the
 * id and the receipt's text; an answer: "<seq>". Threads: the asking and
 * the matching run on the cluster thread; libnats's callbacks only decode
 * and post to it, as in cluster.c.
 */
#include "cluster_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "service.h"
#include "util.h"

#define RCPT_WAIT_MS		2000	/* for another node's answer */
#define RCPT_PENDING_MAX	4096	/* questions awaiting one */
#define RCPT_UPSTREAM_MAX	64
#define RCPT_ID_MAX		64
#define RCPT_TEXT_MAX		1024

/* A question of ours on its way to the thread. */
struct rcpt_note {
	struct mailbox_task task;
	cluster_receipt_done_fn done;	/* told the outcome */
	uint8_t	state;
	char	upstream[RCPT_UPSTREAM_MAX + 1];
	char	id[RCPT_ID_MAX + 1];
	size_t	len;
	uint8_t	text[];
};

/* Another node matched our question seq. */
struct rcpt_answer {
	struct mailbox_task task;
	uint64_t seq;
};

/* A question of ours awaiting an answer; the ring keeps them in order. */
struct rcpt_wait {
	uint64_t seq, deadline;
	bool	answered;
	cluster_receipt_done_fn done;
	char	upstream[RCPT_UPSTREAM_MAX + 1];
	char	id[RCPT_ID_MAX + 1];
	uint8_t	state;
	uint8_t	*text;			/* malloc'd, len bytes */
	size_t	len;
};

_Static_assert(sizeof(((struct cluster_receipt_q *)0)->upstream) ==
    RCPT_UPSTREAM_MAX + 1, "a question's upstream");
_Static_assert(sizeof(((struct cluster_receipt_q *)0)->id) ==
    RCPT_ID_MAX + 1, "a question's id");

/* The cluster thread's alone. */
static _Atomic(cluster_receipt_match_fn) match_fn;	/* any thread's */

static struct {
	natsSubscription *questions, *answers;
	struct rcpt_wait ring[RCPT_PENDING_MAX];
	uint64_t head, tail;		/* seqs: ring[seq % MAX], head..tail */
} R;

void
cluster_receipt_matcher(cluster_receipt_match_fn fn)
{
	atomic_store(&match_fn, fn);
}

static void
answers_subject(char *out, size_t n, const char *node, const char *instance)
{
	snprintf(out, n, "%s.ra.%s.%s", C.prefix, node, instance);
}

/* The outcome of a question: said to whoever asked, then forgotten. */
static void
wait_end(struct rcpt_wait *w, bool matched)
{
	if (w->done != NULL)
		w->done(w->upstream, w->id, w->state, w->text, w->len, matched);
	w->done = NULL;
	free(w->text);
	w->text = NULL;
}

/* ---- our questions ------------------------------------------------------- */

static void
ask_task(void *owner, void *arg, enum mailbox_status st)
{
	struct rcpt_note *q = arg;
	struct rcpt_wait *w;
	char subj[SUBJECT_MAX], reply[SUBJECT_MAX + 48], head[256];
	size_t hl, idl = strlen(q->id);
	uint8_t *buf;
	natsStatus s = NATS_ERR;

	(void)owner;
	if (st != MAILBOX_RUN || !cluster_up() ||
	    R.tail - R.head == RCPT_PENDING_MAX) {
		q->done(q->upstream, q->id, q->state, q->text, q->len, false);
		free(q);
		return;
	}
	w = &R.ring[R.tail % RCPT_PENDING_MAX];
	*w = (struct rcpt_wait){ .seq = R.tail, .done = q->done,
	    .deadline = mono_ms() + RCPT_WAIT_MS, .state = q->state,
	    .len = q->len };
	if (q->len > 0) {
		w->text = xmalloc(q->len);
		memcpy(w->text, q->text, q->len);
	}
	memcpy(w->upstream, q->upstream, sizeof(w->upstream));
	memcpy(w->id, q->id, sizeof(w->id));
	R.tail++;
	hl = (size_t)snprintf(head, sizeof(head), "%s %llu %u %s %zu\n",
	    C.instance, (unsigned long long)w->seq, q->state, q->upstream,
	    idl);
	buf = xmalloc(hl + idl + q->len);
	memcpy(buf, head, hl);
	memcpy(buf + hl, q->id, idl);
	memcpy(buf + hl + idl, q->text, q->len);
	snprintf(subj, sizeof(subj), "%s.rq", C.prefix);
	answers_subject(reply, sizeof(reply), C.node, C.instance);
	s = natsConnection_PublishRequest(C.nc, subj, reply, buf,
	    (int)(hl + idl + q->len));
	free(buf);
	free(q);
	if (s != NATS_OK) {
		cluster_note_error("ask the other nodes for a receipt", s);
		w->deadline = 0;	/* unmatched at the next tick */
	}
}

bool
cluster_receipt_ask(const char *upstream, const char *id, size_t idlen,
    uint8_t state, const uint8_t *text, size_t len,
    cluster_receipt_done_fn done)
{
	struct rcpt_note *q;

	if (!cluster_on() ||
	    strlen(upstream) > RCPT_UPSTREAM_MAX || idlen == 0 ||
	    idlen > RCPT_ID_MAX || memchr(id, '\n', idlen) != NULL ||
	    memchr(id, '\0', idlen) != NULL || len > RCPT_TEXT_MAX)
		return false;
	q = xcalloc(1, sizeof(*q) + len);
	q->done = done;
	q->state = state;
	snprintf(q->upstream, sizeof(q->upstream), "%s", upstream);
	memcpy(q->id, id, idlen);
	if (len > 0)
		memcpy(q->text, text, len);
	q->len = len;
	q->task.fn = ask_task;
	q->task.arg = q;
	service_post(C.svc, &q->task);
	return true;
}

/* The cluster thread: another node matched question seq. */
static void
answer_task(void *owner, void *arg, enum mailbox_status st)
{
	struct rcpt_answer *a = arg;

	(void)owner;
	if (st == MAILBOX_RUN && a->seq >= R.head && a->seq < R.tail) {
		struct rcpt_wait *w = &R.ring[a->seq % RCPT_PENDING_MAX];

		if (w->seq == a->seq && !w->answered) {
			w->answered = true;
			wait_end(w, true);
		}
	}
	free(a);
}

/* libnats's thread: an answer to one of our questions. */
static void
on_answer(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	char num[24];
	int n = natsMsg_GetDataLength(msg);
	struct rcpt_answer *a;

	(void)nc;
	(void)sub;
	(void)closure;
	if (natsMsg_IsNoResponders(msg) || n <= 0 || n >= (int)sizeof(num)) {
		natsMsg_Destroy(msg);
		return;
	}
	memcpy(num, natsMsg_GetData(msg), (size_t)n);
	num[n] = '\0';
	natsMsg_Destroy(msg);
	a = xcalloc(1, sizeof(*a));
	a->seq = strtoull(num, NULL, 10);
	a->task.fn = answer_task;
	a->task.arg = a;
	service_post(C.svc, &a->task);
}

/* The tick: questions past their wait (or never sent) are unmatched. */
void
cluster_receipt_expire(uint64_t now)
{
	while (R.head < R.tail) {
		struct rcpt_wait *w = &R.ring[R.head % RCPT_PENDING_MAX];

		if (atomic_load(&C.stopping)) {
			/* Nobody to tell by now. */
			for (; R.head < R.tail; R.head++) {
				w = &R.ring[R.head % RCPT_PENDING_MAX];
				free(w->text);
				w->text = NULL;
			}
			break;
		}
		if (!w->answered && w->deadline > now)
			break;
		if (!w->answered)
			wait_end(w, false);
		R.head++;
	}
}

/* ---- other nodes' questions ---------------------------------------------- */

/* The cluster thread: a question to the matcher. */
static void
question_task(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_receipt_q *q = arg;
	cluster_receipt_match_fn match = atomic_load(&match_fn);

	(void)owner;
	if (st == MAILBOX_RUN && match != NULL)
		match(q);
	else
		free(q);
}

/* The cluster thread: the matcher's verdict; a match is answered. */
static void
matched_task(void *owner, void *arg, enum mailbox_status st)
{
	struct cluster_receipt_q *q = arg;
	char num[24];
	natsStatus s;

	(void)owner;
	if (st == MAILBOX_RUN && cluster_up()) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)q->seq);
		if ((s = natsConnection_PublishString(C.nc, q->reply, num)) !=
		    NATS_OK)
			cluster_note_error("answer a receipt's question", s);
	}
	free(q);
}

void
cluster_receipt_answer(struct cluster_receipt_q *q, bool matched)
{
	if (!matched) {
		free(q);
		return;
	}
	q->task.fn = matched_task;
	q->task.arg = q;
	service_post(C.svc, &q->task);
}

/*
 * Parses a question's head ("<instance> <seq> <state> <upstream>
 * <idlen>\n"); the id and text follow at *off. false: malformed, or ours.
 */
static bool
question_parse(const char *d, size_t n, struct cluster_receipt_q *q,
    size_t *off, size_t *idlen)
{
	char inst[sizeof(C.instance)], head[256];
	const char *nl = memchr(d, '\n', n < sizeof(head) ? n : sizeof(head));
	unsigned long long seq;
	unsigned state;
	int used = 0;

	if (nl == NULL)
		return false;
	memcpy(head, d, (size_t)(nl - d));
	head[nl - d] = '\0';
	if (sscanf(head, "%23s %llu %u %64s %zu%n", inst, &seq, &state,
	    q->upstream, idlen, &used) != 5 || used != nl - d ||
	    state > 255 || strcmp(inst, C.instance) == 0 || *idlen == 0 ||
	    *idlen > RCPT_ID_MAX || (size_t)(nl + 1 - d) + *idlen > n)
		return false;
	q->seq = seq;
	q->state = (uint8_t)state;
	*off = (size_t)(nl + 1 - d);
	return true;
}

/* libnats's thread: a question of another node's, to the thread. */
static void
on_question(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
    void *closure)
{
	const char *d = natsMsg_GetData(msg), *reply = natsMsg_GetReply(msg);
	int n = natsMsg_GetDataLength(msg);
	struct cluster_receipt_q probe = { .state = 0 }, *q;
	size_t off, idlen, tl;

	(void)nc;
	(void)sub;
	(void)closure;
	if (n <= 0 || reply == NULL || strlen(reply) >= sizeof(probe.reply) ||
	    !question_parse(d, (size_t)n, &probe, &off, &idlen) ||
	    (tl = (size_t)n - off - idlen) > RCPT_TEXT_MAX) {
		natsMsg_Destroy(msg);
		return;
	}
	q = xcalloc(1, sizeof(*q) + tl);
	*q = probe;
	memcpy(q->reply, reply, strlen(reply) + 1);
	memcpy(q->id, d + off, idlen);
	memcpy(q->text, d + off + idlen, tl);
	q->len = tl;
	natsMsg_Destroy(msg);
	q->task.fn = question_task;
	q->task.arg = q;
	service_post(C.svc, &q->task);
}

/* ---- subscriptions ------------------------------------------------------- */

void
cluster_receipt_subscribe(void)
{
	char subj[SUBJECT_MAX + 48];
	natsStatus s;

	cluster_receipt_unsubscribe();
	snprintf(subj, sizeof(subj), "%s.rq", C.prefix);
	if ((s = cluster_subscribe(&R.questions, subj, NULL, on_question)) !=
	    NATS_OK)
		cluster_note_error("subscribe to receipts' questions", s);
	answers_subject(subj, sizeof(subj), C.node, C.instance);
	if ((s = cluster_subscribe(&R.answers, subj, NULL, on_answer)) !=
	    NATS_OK)
		cluster_note_error("subscribe to receipts' answers", s);
}

void
cluster_receipt_unsubscribe(void)
{
	cluster_unsubscribe(R.questions);
	cluster_unsubscribe(R.answers);
	R.questions = R.answers = NULL;
}
