/* store_rcpt.c: the receipt id map's durable half, on the store thread: SMSC ids filed, looked up, dropped and expired. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "reactor.h"
#include "receipt_map.h"
#include "service.h"
#include "store.h"
#include "store_backend.h"
#include "store_int.h"
#include "util.h"

/* Keys dropped per second past their expiry: a bounded step. */
#define RCPT_PURGE_STEP	4096

/* Ids to file: posted by a reactor, written in the store's next group. */
struct rcpt_file {
	struct mailbox_task task;
	char	upstream[CONFIG_NAME_MAX + 1];
	unsigned nkeys;
	struct receipt_key keys[RECEIPT_KEYS_MAX];
	struct receipt_orig o;
};

/* Shard 0 keeps the map: its thread runs the tasks below. */
bool
store_rcpt_on(void)
{
	return store_on() && store_shard(0)->ops->rcpt_put != NULL;
}

static void
file_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store *S = store_state();
	struct rcpt_file *f = arg;
	uint64_t now = store_wall_now();

	(void)owner;
	if (st == MAILBOX_RUN && !S->quiesced && store_txn(false)) {
		for (unsigned i = 0; i < f->nkeys; i++)
			if (S->ops->rcpt_put(S->b, f->upstream, &f->keys[i],
			    &f->o, now) < 0)
				break;
		store_write_error();
	}
	free(f);
}

void
store_rcpt_file(const char *upstream, const struct receipt_key *keys,
    unsigned n, const struct receipt_orig *o)
{
	struct rcpt_file *f = xcalloc(1, sizeof(*f));

	snprintf(f->upstream, sizeof(f->upstream), "%s", upstream);
	f->nkeys = n < RECEIPT_KEYS_MAX ? n : RECEIPT_KEYS_MAX;
	memcpy(f->keys, keys, f->nkeys * sizeof(*keys));
	f->o = *o;
	f->task.fn = file_task;
	f->task.arg = f;
	service_post(store_shard(0)->svc, &f->task);
}

static void
forget_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store *S = store_state();
	uint64_t *id = arg;

	(void)owner;
	if (st == MAILBOX_RUN && !S->quiesced && store_txn(false)) {
		S->ops->rcpt_del(S->b, *id);
		store_write_error();
	}
	free(id);
}

void
store_rcpt_forget(uint64_t id)
{
	uint64_t *p = xmalloc(sizeof(*p));

	*p = id;
	service_post_fn(store_shard(0)->svc, forget_task, p);
}

/* Back to the asker's reactor; nobody there (exit): done cleans up. */
static void
find_answer(struct store_rcpt_req *q)
{
	struct reactor *r = reactor_get(q->reactor);

	q->task.fn = q->done;
	q->task.arg = q;
	if (r == NULL) {
		q->done(NULL, q, MAILBOX_CANCELLED);
		return;
	}
	reactor_post_task(r, &q->task);
}

static void
find_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store *S = store_state();
	struct store_rcpt_req *q = arg;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		q->done(NULL, q, MAILBOX_CANCELLED);
		return;
	}
	q->found = false;
	for (unsigned i = 0; i < q->nkeys && !q->found; i++)
		q->found = S->ops->rcpt_get(S->b, q->upstream, &q->keys[i],
		    q->o) == 1;
	if (q->found && q->take && !S->quiesced && store_txn(false)) {
		S->ops->rcpt_del(S->b, q->o->id);
		store_write_error();
	}
	find_answer(q);
}

void
store_rcpt_find(struct store_rcpt_req *q)
{
	q->task.fn = find_task;
	q->task.arg = q;
	service_post(store_shard(0)->svc, &q->task);
}

void
store_rcpt_purge(uint64_t now)
{
	struct store *S = store_state();
	unsigned expiry = S->cf->upstream_receipts.expiry;

	if (S->ops->rcpt_purge == NULL || expiry == 0 || now < expiry ||
	    S->quiesced || !store_txn(false))
		return;
	if (S->ops->rcpt_purge(S->b, now - expiry, RCPT_PURGE_STEP) < 0)
		store_write_error();
}
