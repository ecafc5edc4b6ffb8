/* store_move.c: after store.shards changed, the waiting messages go to the shard their account now hashes to. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "store_backend.h"
#include "util.h"

/* Messages moved per transaction. */
#define MOVE_BATCH	256

struct names {
	char	**v;
	size_t	n, cap;
};

static int
collect_name(const char *account, uint64_t count, uint64_t bytes, void *arg)
{
	struct names *l = arg;

	(void)count;
	(void)bytes;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = xstrdup(account);
	return 0;
}

struct batch {
	struct store_rec v[MOVE_BATCH];
	size_t	n;
};

static int
collect_rec(struct store_rec *rec, void *arg)
{
	struct batch *bt = arg;

	bt->v[bt->n] = *rec;
	rec->m = NULL;		/* taken */
	return ++bt->n == MOVE_BATCH;
}

/* Writes the batch into to, durably; one already there is left. */
static int
batch_put(const struct store_backend_ops *ops, struct store_backend *to,
    struct batch *bt)
{
	struct store_rec there;

	if (ops->begin(to, true) < 0)
		return -1;
	for (size_t i = 0; i < bt->n; i++) {
		int rc = ops->get(to, bt->v[i].m->id, &there);

		free(there.m);
		if (rc < 0 || (rc == 0 && ops->put(to, &bt->v[i]) < 0)) {
			ops->rollback(to);
			return -1;
		}
	}
	return ops->commit(to);
}

static int
batch_del(const struct store_backend_ops *ops, struct store_backend *from,
    struct batch *bt)
{
	if (ops->begin(from, true) < 0)
		return -1;
	for (size_t i = 0; i < bt->n; i++)
		if (ops->del(from, bt->v[i].m->id, bt->v[i].account) < 0) {
			ops->rollback(from);
			return -1;
		}
	return ops->commit(from);
}

/*
 * The waiting messages of account in b (shard k) that are another
 * shard's: all of an account's, or (upstreams) those whose number hashes
 * elsewhere. The count moved, or -1.
 */
static long
move_account(struct store_backend *b, const char *account, unsigned k)
{
	const struct store_backend_ops *ops = store_shard(0)->ops;
	struct batch *all = xcalloc(1, sizeof(*all));
	struct batch *out = xcalloc(1, sizeof(*out));
	uint64_t after = 0;
	long moved = 0;
	int rc = 0;

	for (;;) {
		all->n = 0;
		if (ops->scan(b, account, after, MOVE_BATCH, collect_rec,
		    all) < 0) {
			rc = -1;
			break;
		}
		if (all->n == 0)
			break;
		after = all->v[all->n - 1].m->id;
		for (unsigned t = 0; t < store_nshards() && rc == 0; t++) {
			out->n = 0;
			for (size_t i = 0; i < all->n; i++)
				if (t != k && store_shard_for(account,
				    all->v[i].m) == t)
					out->v[out->n++] = all->v[i];
			if (out->n == 0)
				continue;
			if (batch_put(ops, store_shard(t)->b, out) < 0 ||
			    batch_del(ops, b, out) < 0)
				rc = -1;
			moved += (long)out->n;
		}
		for (size_t i = 0; i < all->n; i++)
			free(all->v[i].m);
		if (rc < 0)
			break;
	}
	free(all);
	free(out);
	return rc < 0 ? -1 : moved;
}

long
store_move(struct store_backend *b, const char *path, unsigned k,
    char **err)
{
	const struct store_backend_ops *ops = store_shard(0)->ops;
	struct names l = { 0 };
	unsigned n = store_nshards();
	long moved = 0, one = 0;

	if (ops->backlogs(b, collect_name, &l) < 0)
		one = -1;
	for (size_t i = 0; i < l.n && one >= 0; i++) {
		/* An upstream's messages are spread by number: each looked at. */
		if (strncmp(l.v[i], CONFIG_UPSTREAM_PREFIX,
		    strlen(CONFIG_UPSTREAM_PREFIX)) != 0 &&
		    store_shard_of(l.v[i], n) == k)
			continue;
		if ((one = move_account(b, l.v[i], k)) >= 0)
			moved += one;
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i]);
	free(l.v);
	if (one < 0) {
		if (asprintf(err, "%s: cannot move its waiting messages to "
		    "the shards of store.shards = %u", path, n) < 0)
			*err = NULL;
		return -1;
	}
	return moved;
}
