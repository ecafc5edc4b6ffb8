/* store_rows.c: the store's rows that leave other than by delivery: query_sm, cancel_sm and replace_sm, expiry, the purge of final rows. */
#include "store_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "reactor.h"
#include "service.h"
#include "smpp_receipt.h"
#include "store_backend.h"
#include "util.h"

/*
 * Records a scan found, to change once the scan is over: rows are not
 * written while a statement walks them.
 */
struct rec_list {
	struct store_rec *v;
	size_t	n;
	size_t	cap;
};

static int
collect(struct store_rec *rec, void *arg)
{
	struct rec_list *l = arg;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = *rec;
	rec->m = NULL;		/* taken */
	return 0;
}

static void
rec_list_free(struct rec_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].m);
	free(l->v);
}

/* Expires what is past its validity (not what a session has now). */
void
store_expire(uint64_t now)
{
	struct store *S = store_state();
	struct rec_list l = { 0 };

	S->ops->expired(S->b, now, 1000, collect, &l);
	for (size_t i = 0; i < l.n; i++) {
		struct store_rec *rec = &l.v[i];
		struct store_acct *a = store_acct_get(rec->account);
		int kept;

		if (store_acct_has_out(a, rec->m->id))
			continue;
		if (!store_txn(false))
			break;
		if ((kept = S->ops->mark(S->b, rec->m->id, rec->account,
		    MSG_STATE_EXPIRED, now, rec->due, rec->attempts,
		    store_final_row(rec->m))) < 0) {
			store_write_error();
			break;
		}
		store_acct_leave(a, rec->m);
		if (kept > 0)
			store_final_add(rec->account, rec->m);
		store_receipt(rec->m, SMPP_STATE_EXPIRED);
	}
	rec_list_free(&l);
}

/*
 * Deletes final rows older than default_validity: a pass over the table
 * each minute, 4,096 final rows a second (make_room keeps the limits).
 */
void
store_purge_old(uint64_t now)
{
	struct store *S = store_state();
	uint64_t bytes = 0;
	int n;

	if (S->purge_cursor == 0) {
		if (now - S->last_purge < 60 || S->nfinal == 0)
			return;
		S->last_purge = now;
	}
	if (!store_txn(false))
		return;
	n = S->ops->purge(S->b, now - S->cf->store.default_validity,
	    &S->purge_cursor, 4096, &bytes);
	if (n > 0)
		store_final_sub((uint64_t)n, bytes);
	else if (n < 0)
		S->purge_cursor = 0;
	store_write_error();
}

/* Requests: query_sm, cancel_sm, replace_sm. */

static void
answer(struct msg_req *q)
{
	struct reactor *r = reactor_get(q->conn.reactor);

	q->task.fn = q->done;
	q->task.arg = q;
	if (r != NULL)
		reactor_post_task(r, &q->task);
	else
		q->done(NULL, q, MAILBOX_CANCELLED);
}

static bool
cancel_rec(struct msg_req *q, struct store_rec *rec)
{
	struct store *S = store_state();
	struct store_acct *a = store_acct_get(rec->account);
	int kept;

	if (rec->state != MSG_STATE_ENROUTE ||
	    strcmp(rec->m->reply_to, q->submitter) != 0 ||
	    store_acct_has_out(a, rec->m->id))
		return false;
	if (!store_txn(false))
		return false;
	if ((kept = S->ops->mark(S->b, rec->m->id, rec->account,
	    MSG_STATE_DELETED, store_wall_now(), rec->due, rec->attempts,
	    store_final_row(rec->m))) < 0) {
		store_write_error();
		return false;
	}
	store_acct_leave(a, rec->m);
	if (kept > 0)
		store_final_add(rec->account, rec->m);
	store_receipt(rec->m, SMPP_STATE_DELETED);
	return true;
}

/* cancel_sm by address: every pending message of the binder's to dst. */
static void
cancel_by_dest(struct msg_req *q)
{
	struct store *S = store_state();
	struct rec_list l = { 0 };

	S->ops->by_dest(S->b, q->submitter, q->dst, 100000, collect, &l);
	for (size_t i = 0; i < l.n; i++)
		if (cancel_rec(q, &l.v[i]))
			q->ok = true;
	rec_list_free(&l);
}

static void
replace_rec(struct msg_req *q, struct store_rec *rec)
{
	struct store *S = store_state();
	struct store_acct *a = store_acct_get(rec->account);
	struct msg *m = rec->m;
	uint64_t before = store_msg_bytes(m);

	if (rec->state != MSG_STATE_ENROUTE || strcmp(m->reply_to,
	    q->submitter) != 0 || store_acct_has_out(a, m->id))
		return;
	if (q->has_text) {
		struct msg *n = msg_new(q->len);

		memcpy(n, m, offsetof(struct msg, len));
		memcpy(n->text, q->text, q->len);
		n->len = q->len;
		/* Checked again for a line when delivered. */
		n->flags &= ~(uint32_t)MSG_F_LINE_TEXT;
		msg_free(m);
		rec->m = m = n;
	}
	if (q->due != 0)
		rec->due = q->due;
	if (q->expires != 0)
		rec->expires = q->expires;
	else if (rec->expires <= rec->due)
		rec->expires = rec->due + S->cf->store.default_validity;
	m->registered_delivery = q->registered_delivery;
	if (!store_txn(true))
		return;
	if (S->ops->update(S->b, rec) < 0) {
		store_write_error();
		return;
	}
	a->bytes += store_msg_bytes(m) - before;
	store_count(0, (int64_t)(store_msg_bytes(m) - before));
	a->cursor = 0;
	if (rec->due > store_wall_now() && (a->rescan_at == 0 ||
	    rec->due < a->rescan_at))
		a->rescan_at = rec->due;
	store_mark_dirty(a);
	q->ok = true;
}

static void
request_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store *S = store_state();
	struct msg_req *q = arg;
	struct store_rec rec;
	bool found = false;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		q->done(NULL, q, MAILBOX_CANCELLED);
		return;
	}
	memset(&rec, 0, sizeof(rec));
	if (q->kind == MSG_REQ_CANCEL && q->id == 0) {
		cancel_by_dest(q);
	} else if (S->ops->get(S->b, q->id, &rec) == 1) {
		found = true;
		if (strcmp(rec.m->reply_to, q->submitter) != 0)
			;	/* not the binder's: as if there were none */
		else if (q->kind == MSG_REQ_QUERY) {
			q->ok = true;
			q->state = rec.state;
			q->final_date = rec.final_date;
		} else if (q->kind == MSG_REQ_CANCEL) {
			q->ok = cancel_rec(q, &rec);
		} else {
			replace_rec(q, &rec);
		}
	}
	free(rec.m);
	/* Answered after the commit that holds the change: none, no OK. */
	if (S->in_txn && !store_group_commit() && q->kind != MSG_REQ_QUERY)
		q->ok = false;
	/*
	 * Ids say nothing of the account, nor of its shard: each shard is
	 * asked in turn until one has it; a cancel by address asks them all.
	 */
	if (++q->shard < store_nshards() && (!found ||
	    (q->kind == MSG_REQ_CANCEL && q->id == 0))) {
		service_post(store_shard(q->shard)->svc, &q->task);
		return;
	}
	answer(q);
}

void
store_request(struct msg_req *q)
{
	q->shard = 0;
	q->ok = false;
	q->task.fn = request_task;
	q->task.arg = q;
	service_post(store_shard(0)->svc, &q->task);
}
