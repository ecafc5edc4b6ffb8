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

/*
 * What the rows of one id an SMS centre gave share (its first key's
 * FNV-1a, 64 bits): a message in parts has an id of the centre's for
 * each, and the final receipt of one drops that one's rows only.
 */
static uint64_t
rcpt_grp(const struct receipt_key *k)
{
	const unsigned char *p = k->kind == RECEIPT_KEY_STR ?
	    (const unsigned char *)k->str : (const unsigned char *)&k->val;
	size_t n = k->kind == RECEIPT_KEY_STR ? k->len : sizeof(k->val);
	uint64_t h = (0xcbf29ce484222325ull ^ (unsigned)k->kind) *
	    0x100000001b3ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
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
			    rcpt_grp(&f->keys[0]), &f->o, now) < 0)
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

/*
 * The rows of the part of message f->o.id whose receipt had f's keys go:
 * those of the first key filed for it, as the memory's lookup found it.
 */
static void
forget_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store *S = store_state();
	struct rcpt_file *f = arg;
	struct receipt_orig o;

	(void)owner;
	if (st == MAILBOX_RUN && !S->quiesced && store_txn(false)) {
		for (unsigned i = 0; i < f->nkeys; i++)
			if (S->ops->rcpt_get(S->b, f->upstream, &f->keys[i],
			    &o) == 1 && o.id == f->o.id) {
				S->ops->rcpt_del(S->b, f->upstream,
				    &f->keys[i]);
				break;
			}
		store_write_error();
	}
	free(f);
}

void
store_rcpt_forget(const char *upstream, const struct receipt_key *keys,
    unsigned n, uint64_t id)
{
	struct rcpt_file *f = xcalloc(1, sizeof(*f));

	snprintf(f->upstream, sizeof(f->upstream), "%s", upstream);
	f->nkeys = n < RECEIPT_KEYS_MAX ? n : RECEIPT_KEYS_MAX;
	memcpy(f->keys, keys, f->nkeys * sizeof(*keys));
	f->o.id = id;
	service_post_fn(store_shard(0)->svc, forget_task, f);
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
	for (q->which = 0; q->which < q->nkeys; q->which++)
		if ((q->found = S->ops->rcpt_get(S->b, q->upstream,
		    &q->keys[q->which], q->o) == 1))
			break;
	if (q->found && q->take && !S->quiesced && store_txn(false)) {
		S->ops->rcpt_del(S->b, q->upstream, &q->keys[q->which]);
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
