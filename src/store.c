/*
 * store.c: the store thread: group commit of what reactors post, the
 * backlogs of accounts and their delivery within bounds, receipts. Expiry
 * and the answers to query_sm, cancel_sm and replace_sm are
 * store_rows.c's. See store.h.
 */
#include "store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "deliver.h"
#include "http_out.h"
#include "log.h"
#include "reactor.h"
#include "route.h"
#include "service.h"
#include "smpp_receipt.h"
#include "store_backend.h"
#include "store_int.h"
#include "util.h"

/*
 * The shards. Each is a service thread of its own ("store", "store1",
 * ...) with its own file: an account's messages are all in the shard its
 * id hashes to, so an account's order is one thread's and one file's, as
 * with one shard. Code below that says S works on the calling thread's
 * shard: set once, when its thread starts.
 */
static struct store *shards;
static unsigned nshards;
static _Thread_local struct store *cur;
#define S (*cur)

/* The accounts of all shards, by id. */
static pthread_mutex_t acct_lock = PTHREAD_MUTEX_INITIALIZER;
static struct store_acct *_Atomic buckets[STORE_ACCT_BUCKETS];
static atomic_uint nholding;	/* accounts whose held is not 0 */

/*
 * What the limits count, all shards together: each shard adds its own
 * changes (store_count, store_final_add). A shard may go past a limit by
 * what another stores at the same moment: by at most a message each.
 */
static struct {
	atomic_uint_fast64_t messages, bytes, finals, final_bytes;
} total;

/* The store's own message ids (receipts), all shards. */
static atomic_uint_fast64_t own_seq;
static atomic_bool on;

struct store *
store_state(void)
{
	return cur;
}

struct store *
store_shard(unsigned k)
{
	return &shards[k];
}

unsigned
store_nshards(void)
{
	return nshards;
}

uint64_t
store_wall_now(void)
{
	return (uint64_t)time(NULL);
}

static unsigned
acct_hash(const char *s)
{
	return fnv1a_str(s) % STORE_ACCT_BUCKETS;
}

/*
 * FNV-1a mixed again (murmur3's finaliser): FNV alone spreads numbers
 * that differ in a last digit badly over a few shards.
 */
unsigned
store_shard_of(const char *id, unsigned n)
{
	uint32_t h = fnv1a_str(id);

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h % n;
}

/* A route's upstreams ("upstream:NAME"): a backlog in every shard. */
static bool
id_is_upstream(const char *id)
{
	return strncmp(id, CONFIG_UPSTREAM_PREFIX,
	    strlen(CONFIG_UPSTREAM_PREFIX)) == 0;
}

/*
 * The shard that stores m for account: the account's, but for upstreams,
 * the destination number's. The upstreams promise order per number, not
 * over all of them (upstream_submit.c picks a session by number too), and
 * all the network's traffic in one shard would be one thread's again.
 */
unsigned
store_shard_for(const char *account, const struct msg *m)
{
	return store_shard_of(id_is_upstream(account) ? m->to : account,
	    nshards);
}

/* The account id of shard k, if made. Any thread. */
static struct store_acct *
acct_find(const char *id, unsigned k)
{
	struct store_acct *a = atomic_load_explicit(&buckets[acct_hash(id)],
	    memory_order_acquire);

	for (; a != NULL; a = atomic_load_explicit(&a->next,
	    memory_order_acquire))
		if (a->shard == k && strcmp(a->id, id) == 0)
			return a;
	return NULL;
}

/* The account id of shard k, made if new. Any thread. */
static struct store_acct *
acct_get(const char *id, unsigned k)
{
	struct store_acct *a;
	struct store *sh;
	unsigned h;

	if ((a = acct_find(id, k)) != NULL)
		return a;
	pthread_mutex_lock(&acct_lock);
	if ((a = acct_find(id, k)) == NULL) {
		h = acct_hash(id);
		a = xcalloc(1, sizeof(*a));
		str_copy(a->id, sizeof(a->id), id);
		a->shard = k;
		sh = &shards[a->shard];
		a->all = atomic_load_explicit(&sh->all, memory_order_relaxed);
		atomic_store_explicit(&sh->all, a, memory_order_release);
		atomic_store_explicit(&a->next, atomic_load_explicit(
		    &buckets[h], memory_order_relaxed), memory_order_relaxed);
		atomic_store_explicit(&buckets[h], a, memory_order_release);
	}
	pthread_mutex_unlock(&acct_lock);
	return a;
}

struct store_acct *
store_acct_get(const char *id)
{
	return acct_get(id, S.index);
}

/*
 * Calls fn for each shard's account id that holds something: its own
 * shard's, and any other's that stored receipts for it (or, for
 * upstreams, numbers). Any thread.
 */
static void
acct_each_held(const char *id, void (*fn)(struct store_acct *a,
    void *arg), void *arg)
{
	struct store_acct *a;

	for (unsigned k = 0; k < nshards; k++)
		if ((a = acct_find(id, k)) != NULL && atomic_load_explicit(
		    &a->held, memory_order_acquire) > 0)
			fn(a, arg);
}

/* The shard's accounts: its thread walks them while reactors add more. */
static struct store_acct *
acct_first(void)
{
	return atomic_load_explicit(&S.all, memory_order_acquire);
}

bool
store_on(void)
{
	return atomic_load_explicit(&on, memory_order_relaxed);
}

/*
 * held goes up and down through these: they count the accounts holding
 * anything, so that with none (all live traffic) store_holds looks up
 * nothing.
 */
static void
held_add(struct store_acct *a, uint64_t n)
{
	if (atomic_fetch_add_explicit(&a->held, n, memory_order_acq_rel) == 0 &&
	    n > 0)
		atomic_fetch_add_explicit(&nholding, 1, memory_order_acq_rel);
}

static void
held_sub(struct store_acct *a)
{
	if (atomic_fetch_sub_explicit(&a->held, 1, memory_order_acq_rel) == 1)
		atomic_fetch_sub_explicit(&nholding, 1, memory_order_acq_rel);
}

bool
store_holds(const char *account)
{
	struct store_acct *a;

	/*
	 * A sender's own earlier store_put is seen here (same thread); an
	 * account that another thread is just now storing for is a race
	 * between senders, which keep no order between them anyway.
	 */
	if (atomic_load_explicit(&nholding, memory_order_acquire) == 0)
		return false;
	/*
	 * Receipts another shard stored for the account are not looked at:
	 * nothing keeps order with them.
	 */
	if (id_is_upstream(account)) {
		for (unsigned k = 0; k < nshards; k++)
			if ((a = acct_find(account, k)) != NULL &&
			    atomic_load_explicit(&a->held,
			    memory_order_acquire) > 0)
				return true;
		return false;
	}
	a = acct_find(account, store_shard_of(account, nshards));

	return a != NULL && atomic_load_explicit(&a->held,
	    memory_order_acquire) > 0;
}

/* All shards together. */
void
store_get_stats(struct store_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned k = 0; k < nshards; k++) {
		struct store *sh = &shards[k];
		uint64_t oldest = atomic_load(&sh->st_oldest);

		st->messages += atomic_load(&sh->st_messages);
		st->bytes += atomic_load(&sh->st_bytes);
		if (oldest != 0 && (st->oldest == 0 || oldest < st->oldest))
			st->oldest = oldest;
		st->commits += atomic_load(&sh->st_commits);
		st->commit_failures += atomic_load(&sh->st_commit_failures);
		st->in_flight += atomic_load(&sh->st_in_flight);
		st->in_flight_bytes += atomic_load(&sh->st_in_flight_bytes);
	}
}

bool
store_get_shard_stats(unsigned k, struct store_stats *st)
{
	struct store *sh;

	if (!store_on() || k >= nshards)
		return false;
	sh = &shards[k];
	st->messages = atomic_load(&sh->st_messages);
	st->bytes = atomic_load(&sh->st_bytes);
	st->oldest = atomic_load(&sh->st_oldest);
	st->commits = atomic_load(&sh->st_commits);
	st->commit_failures = atomic_load(&sh->st_commit_failures);
	st->in_flight = atomic_load(&sh->st_in_flight);
	st->in_flight_bytes = atomic_load(&sh->st_in_flight_bytes);
	return true;
}

/* A shard's file was removed or replaced under the daemon. */
static bool
any_lost(void)
{
	for (unsigned k = 0; k < nshards; k++)
		if (atomic_load(&shards[k].lost))
			return true;
	return false;
}

void
store_stats_append(char *buf, size_t len, bool status)
{
	struct store_stats st;
	size_t used = strlen(buf);
	uint64_t now = store_wall_now(), age;

	if (!store_on() || used >= len)
		return;
	store_get_stats(&st);
	age = st.oldest != 0 && now > st.oldest ? now - st.oldest : 0;
	if (status)
		snprintf(buf + used, len - used, ", %llu stored, oldest %llu s%s",
		    (unsigned long long)st.messages, (unsigned long long)age,
		    any_lost() ? ", STORE FILE LOST: refusing "
		    "messages, restart" : "");
	else
		snprintf(buf + used, len - used, " stored=%llu stored_bytes=%llu "
		    "stored_oldest_age=%llu", (unsigned long long)st.messages,
		    (unsigned long long)st.bytes, (unsigned long long)age);
}

/* Store thread from here on, but for the posting functions. */

void
store_mark_dirty(struct store_acct *a)
{
	if (a->dirty)
		return;
	a->dirty = true;
	a->dirty_next = S.dirty;
	S.dirty = a;
}

static bool
inflight_has(const struct store_acct *a, uint64_t id)
{
	for (unsigned i = 0; i < a->ninflight; i++)
		if (a->inflight[i] == id)
			return true;
	return false;
}

/* ---- on the wire: a set of ids ------------------------------------- */

static unsigned
wire_slot(const struct store_acct *a, uint64_t id)
{
	/* (Ids are sequential: a multiplier spreads them over the table.) */
	return (unsigned)((id * 0x9e3779b97f4a7c15ull) >> 32) &
	    (a->wire_cap - 1);
}

static bool
wire_has(const struct store_acct *a, uint64_t id)
{
	if (a->nwire == 0)
		return false;
	for (unsigned i = wire_slot(a, id); a->wire[i] != 0;
	    i = (i + 1) & (a->wire_cap - 1))
		if (a->wire[i] == id)
			return true;
	return false;
}

static void wire_add(struct store_acct *a, uint64_t id);

/* Twice the room (or the first), the ids placed again. */
static void
wire_grow(struct store_acct *a)
{
	uint64_t *old = a->wire;
	unsigned cap = a->wire_cap;

	a->wire_cap = cap ? cap * 2 : 64;
	a->wire = xcalloc(a->wire_cap, sizeof(*a->wire));
	a->nwire = 0;
	for (unsigned i = 0; i < cap; i++)
		if (old[i] != 0)
			wire_add(a, old[i]);
	free(old);
}

static void
wire_add(struct store_acct *a, uint64_t id)
{
	unsigned i;

	/* At most half full: probes stay short. */
	if (2 * (a->nwire + 1) > a->wire_cap)
		wire_grow(a);
	for (i = wire_slot(a, id); a->wire[i] != 0;
	    i = (i + 1) & (a->wire_cap - 1))
		if (a->wire[i] == id)
			return;
	a->wire[i] = id;
	a->nwire++;
}

/* Takes id off the wire: whether it was there. */
static bool
wire_del(struct store_acct *a, uint64_t id)
{
	unsigned mask = a->wire_cap - 1, i, j;

	if (a->nwire == 0)
		return false;
	for (i = wire_slot(a, id); a->wire[i] != id; i = (i + 1) & mask)
		if (a->wire[i] == 0)
			return false;
	/* Shifts back the entries after it that probed past i. */
	for (j = (i + 1) & mask; a->wire[j] != 0; j = (j + 1) & mask) {
		unsigned home = wire_slot(a, a->wire[j]);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			a->wire[i] = a->wire[j];
			i = j;
		}
	}
	a->wire[i] = 0;
	if (--a->nwire == 0) {
		/* The common end of a burst: the memory goes with it. */
		free(a->wire);
		a->wire = NULL;
		a->wire_cap = 0;
	}
	return true;
}

/*
 * Whether id is out: at a session, on the wire to one, or its final
 * state not committed.
 */
bool
store_acct_has_out(const struct store_acct *a, uint64_t id)
{
	if (inflight_has(a, id) || wire_has(a, id))
		return true;
	for (unsigned i = 0; i < a->nmarks; i++)
		if (a->marks[i].m->id == id)
			return true;
	return false;
}

/* Whether a has its share of the shard's bytes in flight. */
static bool
acct_bytes_full(const struct store_acct *a)
{
	return a->inflight_bytes >=
	    S.inflight_bytes_max / STORE_ACCT_BYTES_SHARE;
}

/*
 * m goes out, in flight until its outcome comes back: whether it used up
 * the bytes in flight that the shard or a may have (nothing more goes out
 * until some return). Before m is posted: another thread owns it then.
 */
static bool
inflight_add(struct store_acct *a, const struct msg *m)
{
	uint32_t size = (uint32_t)msg_size(m);

	a->inflight_size[a->ninflight] = size;
	a->inflight[a->ninflight++] = m->id;
	a->inflight_bytes += size;
	S.ninflight++;
	S.inflight_bytes += size;
	return S.inflight_bytes >= S.inflight_bytes_max || acct_bytes_full(a);
}

static bool
inflight_del(struct store_acct *a, uint64_t id)
{
	for (unsigned i = 0; i < a->ninflight; i++)
		if (a->inflight[i] == id) {
			S.inflight_bytes -= a->inflight_size[i];
			a->inflight_bytes -= a->inflight_size[i];
			a->ninflight--;
			a->inflight[i] = a->inflight[a->ninflight];
			a->inflight_size[i] = a->inflight_size[a->ninflight];
			S.ninflight--;
			return true;
		}
	return false;
}

/* Starts the group's transaction if none is open. */
bool
store_txn(bool durable)
{
	if (!S.in_txn) {
		if (S.ops->begin(S.b, durable) < 0)
			return false;
		S.in_txn = true;
		S.durable = durable;
	}
	/* A durable write in a lazy group: commit it with a sync. */
	if (durable && !S.durable)
		S.durable = true;
	return true;
}

static void group_failed(void);

/*
 * What a sender hears when its message could not be stored: the store is
 * full, or (JetStream) the NATS servers cannot take it now: the cluster's
 * temporary error.
 */
static enum msg_verdict
refusal(void)
{
	if (atomic_load_explicit(&S.lost, memory_order_relaxed))
		return MSG_STORE_LOST;
	return S.failing && S.cf->store.jetstream ? MSG_UNAVAILABLE :
	    MSG_FULL;
}

/*
 * A write failed. If it took the group's transaction with it, nothing of
 * the group is stored: its puts are refused now.
 */
void
store_write_error(void)
{
	if (S.in_txn && !S.ops->in_txn(S.b)) {
		S.in_txn = false;
		group_failed();
	}
}

static void
write_failed(const char *what)
{
	if (!S.failing && !S.quiesced)
		log_err("store: %s failed: %s; refusing messages until it "
		    "works again", what, S.cf->store.jetstream ?
		    "JetStream does not take it (NATS down?)" :
		    "cannot write the store file");
	S.failing = true;
}

/*
 * Whether the backend has no room for new messages (the space it keeps
 * for marks and deletes is spent) though it may write those.
 */
static bool
backend_full(void)
{
	return S.ops->full != NULL && S.ops->full(S.b);
}

static void
write_ok(void)
{
	/* Marks written from the reserve do not end the episode. */
	if (!S.failing || backend_full())
		return;
	log_info("store: writing again");
	S.failing = false;
}

/* Adds d (which may be negative) to *v, and to the total t. */
static void
count_add(uint64_t *v, atomic_uint_fast64_t *t, int64_t d)
{
	if (d < 0 && (uint64_t)-d > *v)
		d = -(int64_t)*v;
	*v += (uint64_t)d;
	atomic_fetch_add_explicit(t, (uint64_t)d, memory_order_relaxed);
}

void
store_count(int64_t n, int64_t b)
{
	count_add(&S.nmessages, &total.messages, n);
	count_add(&S.nbytes, &total.bytes, b);
}

/* Sets the shard's final rows, as counted or as last committed. */
static void
finals_set(uint64_t n, uint64_t bytes)
{
	count_add(&S.nfinal, &total.finals, (int64_t)(n - S.nfinal));
	count_add(&S.final_bytes, &total.final_bytes,
	    (int64_t)(bytes - S.final_bytes));
}

/* A message leaves ENROUTE: counts down. */
void
store_acct_leave(struct store_acct *a, const struct msg *m)
{
	uint64_t b = store_msg_bytes(m);

	/*
	 * Not counted (a recount after a failed group found it gone): a
	 * count that wrapped would refuse the account for good.
	 */
	if (a->count == 0)
		return;
	a->count--;
	a->bytes -= b < a->bytes ? b : a->bytes;
	store_count(-1, -(int64_t)b);
	a->oldest_stale = true;
	held_sub(a);
}

/* A message reached a final state and its row stays, smaller. */
void
store_final_add(const char *account, const struct msg *m)
{
	/* A backend that does not count them keeps them its own way. */
	if (S.ops->finals == NULL)
		return;
	count_add(&S.nfinal, &total.finals, 1);
	count_add(&S.final_bytes, &total.final_bytes,
	    (int64_t)store_final_bytes(account, m));
}

void
store_final_sub(uint64_t n, uint64_t bytes)
{
	count_add(&S.nfinal, &total.finals, -(int64_t)n);
	count_add(&S.final_bytes, &total.final_bytes, -(int64_t)bytes);
}

/*
 * Within the open group: deletes the oldest final rows while they and
 * the waiting ones with b more would be over the limits. Waiting
 * messages are never dropped for final ones' sake, nor refused.
 */
static void
make_room(uint64_t b)
{
	const struct store_conf *sc = &S.cf->store;
	uint64_t over = 0, bytes = 0;
	uint64_t msgs = atomic_load(&total.messages) + atomic_load(&total.finals);
	uint64_t size = atomic_load(&total.bytes) +
	    atomic_load(&total.final_bytes);
	int n;

	/* Its own final rows: another shard's go at that shard's tick. */
	if (S.nfinal == 0)
		return;
	if (msgs + 1 > sc->max_messages)
		over = msgs + 1 - sc->max_messages;
	if (size + b > sc->max_bytes) {
		uint64_t rows = (size + b - sc->max_bytes) / STORE_FINAL_ROW + 1;

		over = rows > over ? rows : over;
	}
	if (over == 0)
		return;
	/* In batches: not one scan per message stored. */
	over = over < 256 ? 256 : over > 65536 ? 65536 : over;
	n = S.ops->purge(S.b, UINT64_MAX, &S.evict_cursor, (unsigned)over,
	    &bytes);
	if (n > 0)
		store_final_sub((uint64_t)n, bytes);
	store_write_error();
}

/*
 * Over a limit by other shards' messages, which make room only with
 * their own final rows: this shard's go too, once a second.
 */
static void
limits_keep(void)
{
	const struct store_conf *sc = &S.cf->store;

	if (nshards == 1 || S.nfinal == 0 ||
	    (atomic_load(&total.messages) + atomic_load(&total.finals) <
	    sc->max_messages && atomic_load(&total.bytes) +
	    atomic_load(&total.final_bytes) < sc->max_bytes))
		return;
	if (store_txn(false))
		make_room(0);
}

static uint64_t
next_own_id(void)
{
	return ((atomic_fetch_add(&own_seq, 1) + 1) << 10) |
	    msg_id_low(MSG_ID_STORE);
}

/*
 * Stores m for a (taking m) inside the open group. verdict: answer the
 * sender after the commit. false: refused (m untouched, not taken).
 */
static bool
put_one(struct store_acct *a, struct msg *m)
{
	const struct store_conf *sc = &S.cf->store;
	uint64_t b = store_msg_bytes(m), now = store_wall_now();
	struct store_rec rec;

	if (atomic_load(&total.messages) >= sc->max_messages ||
	    atomic_load(&total.bytes) + b > sc->max_bytes ||
	    a->count >= sc->account_max_messages ||
	    atomic_load_explicit(&S.lost, memory_order_relaxed))
		return false;
	/*
	 * With the disk full only receipts (which wait for nobody) take some
	 * of the reserve: those of the deliveries it lets be marked.
	 */
	if (!(m->flags & MSG_F_NO_VERDICT) && backend_full()) {
		write_failed("a write");
		return false;
	}
	if (store_txn(true))
		make_room(b);
	if (m->submitted == 0)
		m->submitted = now;
	memset(&rec, 0, sizeof(rec));
	rec.m = m;
	str_copy(rec.account, sizeof(rec.account), a->id);
	rec.state = MSG_STATE_ENROUTE;
	rec.due = m->due;
	/*
	 * The default validity counts from when the message is due: a
	 * schedule past it would otherwise expire before its time.
	 */
	rec.expires = m->expires != 0 ? m->expires :
	    (m->due > m->submitted ? m->due : m->submitted) +
	    sc->default_validity;
	if (!store_txn(true) || S.ops->put(S.b, &rec) < 0) {
		write_failed("a write");
		store_write_error();
		return false;
	}
	a->count++;
	a->bytes += b;
	if (a->count == 1)
		a->oldest = m->submitted;
	store_count(1, (int64_t)b);
	/*
	 * Ids from different reactors arrive out of order: one below what
	 * the pump has handed out would wait for the scan to come round,
	 * while later ones of its sender went first. The next scan starts
	 * at it.
	 */
	if (a->cursor >= m->id)
		a->cursor = m->id - 1;
	if (m->due > now && (a->rescan_at == 0 || m->due < a->rescan_at))
		a->rescan_at = m->due;
	store_mark_dirty(a);
	return true;
}

/* Stores a message the store made (a receipt) for its account, if any. */
static void
put_own(struct msg *m)
{
	struct store_acct *a;

	if (m == NULL)
		return;
	if (config_find_account(S.cf, m->to) == NULL) {
		msg_free(m);	/* nobody would come back for it */
		return;
	}
	m->flags |= MSG_F_NO_VERDICT;
	/*
	 * In this shard, whatever the submitter's: in the group that marks
	 * the message it tells of, so that no crash keeps one without the
	 * other. Its account has a backlog here too, then; a receipt keeps
	 * no order with other senders' messages.
	 */
	a = store_acct_get(m->to);
	held_add(a, 1);
	if (!put_one(a, m))
		held_sub(a);
	msg_free(m);
}

void
store_receipt(const struct msg *orig, uint8_t state)
{
	if ((orig->registered_delivery & 0x01) &&
	    http_out_receipt(orig, state, store_wall_now()))
		return;
	put_own(smpp_receipt_make(orig, state, next_own_id(), store_wall_now()));
}

static int
resync_one(const char *account, uint64_t count, uint64_t bytes, void *arg)
{
	struct store_acct *a = store_acct_get(account);

	(void)arg;
	a->oldest_stale = true;
	a->count = count;	/* the held correction was made from 0 */
	a->bytes = bytes;
	held_add(a, count);
	store_count((int64_t)count, (int64_t)bytes);
	return 0;
}

/*
 * After a group was rolled back, the counts are made again from the file:
 * what the group stored is not there, and what it marked delivered or
 * expired is waiting again: the marks are written again (marks_unwrite),
 * the expired go out again (at least once). held keeps
 * what reactors posted since (held - count is just that, whatever the
 * group did), as reactors go on changing it meanwhile.
 */
static void
resync(void)
{
	for (struct store_acct *a = acct_first(); a != NULL; a = a->all) {
		/* held - count posts are on their way; count itself goes. */
		while (a->count > 0) {
			a->count--;
			held_sub(a);
		}
		a->bytes = 0;
		a->cursor = 0;
		a->oldest_stale = true;
		store_mark_dirty(a);
	}
	store_count(-(int64_t)S.nmessages, -(int64_t)S.nbytes);
	if (S.ops->backlogs(S.b, resync_one, NULL) < 0)
		log_err("store: cannot count the backlogs again");
}

static void marks_unwrite(void);
static void marks_committed(void);

/* The group failed: nothing of it is stored; refuse its puts. */
static void
group_failed(void)
{
	struct mailbox_task *t, *next;

	write_failed("a commit");
	marks_unwrite();
	finals_set(S.nfinal_ok, S.final_bytes_ok);
	for (t = S.waiting; t != NULL; t = next) {
		struct msg *m = t->arg;

		next = t->next;
		m->verdict = refusal();
		deliver_answer(m);
	}
	S.waiting = NULL;
	S.nwaiting = 0;
	resync();
}

/* Commits the group, then answers its senders, in the order they came. */
bool
store_group_commit(void)
{
	struct mailbox_task *t, *next, *rev = NULL;
	uint64_t posts = S.posts_kept;

	S.posts_kept = 0;
	if (S.in_txn) {
		S.in_txn = false;
		if (S.ops->commit(S.b) < 0) {
			atomic_fetch_add(&S.st_commit_failures, 1);
			group_failed();
			/* Lost with the group: they go from memory. */
			if (posts != 0)
				http_out_kept(posts);
			return false;
		}
		atomic_fetch_add(&S.st_commits, 1);
		S.nfinal_ok = S.nfinal;
		S.final_bytes_ok = S.final_bytes;
		marks_committed();
		write_ok();
	}
	/* Committed (or rolled back before: then made from memory). */
	if (posts != 0)
		http_out_kept(posts);
	for (t = S.waiting; t != NULL; t = next) {
		next = t->next;
		t->next = rev;
		rev = t;
	}
	S.waiting = NULL;
	if (S.nwaiting > 0)
		S.last_waiting = S.nwaiting;
	S.nwaiting = 0;
	for (t = rev; t != NULL; t = next) {
		struct msg *m = t->arg;

		next = t->next;
		m->verdict = MSG_OK;
		deliver_answer(m);
	}
	return true;
}

static void
put_task(void *owner, void *arg, enum mailbox_status st)
{
	struct msg *m = arg;
	struct store_acct *a = m->store_acct;

	(void)owner;
	if (st == MAILBOX_CANCELLED) {
		/* Never stored and never acknowledged. */
		held_sub(a);
		msg_free(m);
		return;
	}
	if (!put_one(a, m)) {
		held_sub(a);
		m->verdict = refusal();
		deliver_answer(m);
		return;
	}
	/* Answered once committed; a receipt waits for nobody. */
	if (m->flags & MSG_F_NO_VERDICT) {
		msg_free(m);
		return;
	}
	m->task.arg = m;
	m->task.next = S.waiting;
	S.waiting = &m->task;
	S.nwaiting++;
}

void
store_put(struct msg *m, const char *account)
{
	struct store_acct *a = acct_get(account, store_shard_for(account, m));

	held_add(a, 1);
	m->store_acct = a;
	m->task.fn = put_task;
	m->task.arg = m;
	service_post(shards[a->shard].svc, &m->task);
}

/* Whether a's backlog is for a route's upstreams ("upstream:NAME"). */
static bool
acct_is_upstream(const struct store_acct *a)
{
	return id_is_upstream(a->id);
}

/* Hands messages of a to its sessions while there is room. */
struct pump {
	struct store_acct *a;
	uint64_t now;
	unsigned room;
	bool	offline;
	bool	remote;		/* through the cluster: nobody here has it */
	bool	upstream;	/* a route's upstreams ("upstream:NAME") */
};

static int
pump_one(struct store_rec *rec, void *arg)
{
	struct pump *p = arg;
	struct store_acct *a = p->a;
	struct msg *m = rec->m;
	struct route_owner owner;
	struct reactor *r;
	bool full;

	a->cursor = m->id;
	if (store_acct_has_out(a, m->id))
		return 0;
	if (rec->due > p->now) {
		if (a->rescan_at == 0 || rec->due < a->rescan_at)
			a->rescan_at = rec->due;
		return 0;
	}
	if (rec->expires <= p->now)
		return 0;	/* the tick expires it */
	if (p->remote) {
		/*
		 * To the node that holds the account, as a sender's message
		 * would go; its verdict comes back to store_answer once the
		 * recipient there has it (or gave it back: MSG_F_NODE_HELD),
		 * and that node sends the receipt.
		 */
		rec->m = NULL;
		/* (A receipt is stored with nobody waiting: the store is.) */
		m->flags &= ~(uint32_t)MSG_F_NO_VERDICT;
		m->flags |= MSG_F_NODE_HELD;
		m->due = 0;	/* due now: not to be scheduled there again */
		m->sender_kind = MSG_KIND_STORE;
		m->store_acct = a;
		m->attempts = rec->attempts;
		full = inflight_add(a, m);
		deliver_to_kind(MSG_KIND_NODE, NULL, m, a->id);
		p->room--;
		return p->room == 0 || full;
	}
	if (p->upstream) {
		/* The upstream kind picks a session; the outcome comes back. */
		rec->m = NULL;
		m->flags |= MSG_F_STORED | MSG_F_NO_VERDICT;
		m->sender_kind = MSG_KIND_NONE;
		m->store_acct = a;
		m->attempts = rec->attempts;
		full = inflight_add(a, m);
		deliver_to_kind(MSG_KIND_UPSTREAM, NULL, m, a->id);
		p->room--;
		return p->room == 0 || full;
	}
	/*
	 * An address one session holds alone (a router LOGIN) takes its
	 * backlog from one session at a time: what is still in flight (or
	 * on the wire) to one that left comes back (or is acknowledged)
	 * before anything goes to the next, which would otherwise get later
	 * messages first.
	 */
	if (!route_lookup(a->id, &owner) || owner.kind != ROUTE_OWNER_CONN ||
	    (r = reactor_get(owner.conn.reactor)) == NULL ||
	    (a->ninflight + a->nwire > 0 &&
	    !route_owner_eq(&owner, &a->inflight_to) &&
	    route_is_claimed(a->id))) {
		p->offline = true;
		a->cursor = m->id - 1;
		return 1;
	}
	a->inflight_to = owner;
	rec->m = NULL;
	m->flags |= MSG_F_STORED | MSG_F_NO_VERDICT;
	/* Handed out here: its outcome comes back, not another node's verdict. */
	m->sender_kind = MSG_KIND_NONE;
	m->store_acct = a;
	m->attempts = rec->attempts;
	m->recipient = owner;
	full = inflight_add(a, m);
	m->task.fn = deliver_stored_task;
	m->task.arg = m;
	reactor_post_task(r, &m->task);
	p->room--;
	return p->room == 0 || full;
}

static void
pump(struct store_acct *a)
{
	struct pump p = { .a = a, .now = store_wall_now() };

	for (int rounds = 0; rounds < 8; rounds++) {
		unsigned global = S.inflight_max - S.ninflight;
		int n;

		if (S.ninflight >= S.inflight_max ||
		    S.inflight_bytes >= S.inflight_bytes_max)
			S.starved = true;
		/*
		 * Refilled from half empty: one scan hands out a batch, not
		 * a message per answer.
		 */
		if (a->count <= a->ninflight + a->nwire ||
		    mono_ms() < a->resume_ms ||
		    S.ninflight >= S.inflight_max ||
		    S.inflight_bytes >= S.inflight_bytes_max ||
		    acct_bytes_full(a) || a->nunwritten > 0 ||
		    a->ninflight + a->nmarks > STORE_ACCT_INFLIGHT / 2)
			return;
		/*
		 * For upstreams: while any is bound (the kind picks). Held
		 * here, or (in a cluster) perhaps on another node.
		 */
		p.upstream = acct_is_upstream(a);
		p.remote = !p.upstream && !route_is_held(a->id);
		if (p.upstream && !deliver_kind_up(MSG_KIND_UPSTREAM))
			return;
		if (p.remote && !(a->remote && deliver_kind_up(MSG_KIND_NODE)))
			return;
		p.room = STORE_ACCT_INFLIGHT - a->ninflight - a->nmarks;
		if (p.room > global)
			p.room = global;
		n = S.ops->scan(S.b, a->id, a->cursor, p.room + a->ninflight +
		    a->nwire, pump_one, &p);
		if (n <= 0 || p.offline) {
			/* The end: start from the first next time. */
			if (n == 0)
				a->cursor = 0;
			return;
		}
	}
}

/*
 * Accounts that found every place in flight taken wait for no answer of
 * their own: once half the places are free, they are all tried again.
 */
static void
unstarve(void)
{
	if (!S.starved || S.ninflight > S.inflight_max / 2 ||
	    S.inflight_bytes > S.inflight_bytes_max / 2)
		return;
	S.starved = false;
	for (struct store_acct *a = acct_first(); a != NULL; a = a->all)
		if (a->count > a->ninflight + a->nwire)
			store_mark_dirty(a);
}

static void
pump_dirty(void)
{
	struct store_acct *a;

	while ((a = S.dirty) != NULL) {
		S.dirty = a->dirty_next;
		a->dirty = false;
		pump(a);
	}
}

/* The counts for the stats, current after every batch. */
static void
publish_counts(void)
{
	atomic_store(&S.st_messages, S.nmessages);
	atomic_store(&S.st_bytes, S.nbytes);
	atomic_store(&S.st_in_flight, S.ninflight);
	atomic_store(&S.st_in_flight_bytes, S.inflight_bytes);
}

/*
 * Before a commit that senders wait for: the puts still coming join the
 * group (STORE_GATHER_*). Under load a commit (with sync = "full" an
 * fsync) and the answers after it are for more messages at once: with
 * two shards on two CPUs each committed about 2,000 messages, 150
 * commits a second between them, where one shard, busier, committed
 * 8,000; gathering for up to 3 ms took 13 % less CPU a stored message
 * (measured; 8 ms took more again, the senders waiting idle).
 *
 * Only while busy: when this group or the last one with senders had
 * more than one. A client that sends a message at a time (the only one
 * sending) gets its answer without waiting for others who do not come.
 * Only puts keep the group open: deliveries' outcomes, arriving all the
 * time during a drain, do not hold it.
 */
static void
gather(struct service *svc)
{
	uint64_t until;
	unsigned before;

	if (!S.in_txn || S.waiting == NULL ||
	    (S.nwaiting < 2 && S.last_waiting < 2))
		return;
	until = mono_us() + STORE_GATHER_MAX_US;
	while (mono_us() < until) {
		before = S.nwaiting;
		if (service_run_within(svc, STORE_GATHER_GAP_US) == 0 ||
		    !S.in_txn || S.waiting == NULL || S.nwaiting == before)
			break;
	}
}

static void
after_batch(struct service *svc, void *arg)
{
	(void)arg;
	gather(svc);
	store_group_commit();
	unstarve();
	pump_dirty();
	publish_counts();
}

static uint64_t
backoff(uint32_t attempts)
{
	uint64_t s = 1;

	while (attempts-- > 1 && s < STORE_RETRY_MAX_S)
		s *= 2;
	return s < STORE_RETRY_MAX_S ? s : STORE_RETRY_MAX_S;
}

/*
 * Writes k's final state into the open group (and the receipt it makes:
 * not for a message an SMSC took, whose receipt is the SMSC's to give).
 * false: it failed, and the account stays paused.
 */
static bool
mark_write(struct store_acct *a, struct store_mark *k)
{
	struct msg *m = k->m;
	int kept = -1;

	if (!store_txn(false) || (kept = S.ops->mark(S.b, m->id, a->id, k->state,
	    store_wall_now(), 0, m->attempts, store_final_row(m))) < 0) {
		write_failed("a write");
		store_write_error();
		return false;
	}
	k->written = true;
	a->nunwritten--;
	store_acct_leave(a, m);
	if (kept > 0)
		store_final_add(a->id, m);
	if (!(m->flags & MSG_F_VIA_NODE) && !(acct_is_upstream(a) &&
	    k->state == MSG_STATE_DELIVERED))
		store_receipt(m, k->state == MSG_STATE_DELIVERED ?
		    SMPP_STATE_DELIVERED : SMPP_STATE_UNDELIVERABLE);
	return true;
}

/* m (taken) reached a final state: marked in the group, kept till commit. */
static void
mark_add(struct store_acct *a, struct msg *m, uint8_t state)
{
	struct store_mark *k;

	/*
	 * From in flight (pump leaves room for both) or from the wire (a
	 * send queue's worth at once).
	 */
	if (a->nmarks == a->marks_cap) {
		a->marks_cap = a->marks_cap ? a->marks_cap * 2 :
		    STORE_ACCT_INFLIGHT;
		a->marks = xrealloc(a->marks, a->marks_cap * sizeof(*a->marks));
	}
	k = &a->marks[a->nmarks++];
	k->m = m;
	k->state = state;
	k->written = false;
	a->nunwritten++;
	if (!a->marking) {
		a->marking = true;
		a->marking_next = S.marking;
		S.marking = a;
	}
	/*
	 * Behind marks that failed it waits for the tick's retry: a full
	 * disk is not tried once per message.
	 */
	if (a->nunwritten == 1)
		mark_write(a, k);
}

/* The group's commit made its marks durable: they are done. */
static void
marks_committed(void)
{
	struct store_acct **pa = &S.marking, *a;

	while ((a = *pa) != NULL) {
		unsigned j = 0;

		for (unsigned i = 0; i < a->nmarks; i++) {
			if (a->marks[i].written)
				free(a->marks[i].m);
			else
				a->marks[j++] = a->marks[i];
		}
		a->nmarks = j;
		if (j > 0) {
			pa = &a->marking_next;
			continue;
		}
		a->marking = false;
		*pa = a->marking_next;
		store_mark_dirty(a);		/* paused for its marks: go on */
	}
}

/* The group was rolled back: its marks are to be written again. */
static void
marks_unwrite(void)
{
	for (struct store_acct *a = S.marking; a != NULL; a = a->marking_next) {
		for (unsigned i = 0; i < a->nmarks; i++)
			a->marks[i].written = false;
		a->nunwritten = a->nmarks;
	}
}

/* Tries again the marks that could not be written: once a second. */
static void
marks_retry(void)
{
	uint64_t ms = mono_ms();

	if (S.marking == NULL || ms < S.mark_retry_ms)
		return;
	S.mark_retry_ms = ms + 1000;
	for (struct store_acct *a = S.marking; a != NULL; a = a->marking_next)
		for (unsigned i = 0; i < a->nmarks; i++)
			if (!a->marks[i].written &&
			    !mark_write(a, &a->marks[i]))
				return;
}

static void
outcome(struct msg *m, enum msg_outcome o)
{
	struct store_acct *a = m->store_acct;
	uint64_t now = store_wall_now();

	if (!inflight_del(a, m->id) && !wire_del(a, m->id)) {
		msg_free(m);	/* cancelled or expired meanwhile */
		return;
	}
	switch (o) {
	case MSG_OUT_WRITTEN:
		fatalx("store: an outcome 'written' for message %llu",
		    (unsigned long long)m->id);	/* (store_written's) */
	case MSG_OUT_DELIVERED:
	case MSG_OUT_FAILED:
		mark_add(a, m, o == MSG_OUT_DELIVERED ? MSG_STATE_DELIVERED :
		    MSG_STATE_UNDELIVERABLE);
		store_mark_dirty(a);
		return;
	case MSG_OUT_RETRY:
		m->attempts++;
		m->due = now + backoff(m->attempts);
		if (store_txn(false) && S.ops->mark(S.b, m->id, a->id,
		    MSG_STATE_ENROUTE, 0, m->due, m->attempts, false) < 0)
			store_write_error();
		if (a->rescan_at == 0 || m->due < a->rescan_at)
			a->rescan_at = m->due;
		a->cursor = 0;
		break;
	case MSG_OUT_RETURNED:
		/* Sent to the cluster, and no node has it: wait for news. */
		if (m->sender_kind == MSG_KIND_STORE &&
		    m->verdict == MSG_NO_ROUTE)
			a->remote = false;
		/*
		 * No room at its sessions: wait a little. A session that
		 * left: another may take it, but not in a tight loop.
		 */
		a->resume_ms = mono_ms() + (m->verdict == MSG_BUSY ||
		    m->verdict == MSG_REFUSED ? STORE_PAUSE_MS : 20);
		a->cursor = 0;
		break;
	}
	store_mark_dirty(a);
	msg_free(m);
}

#define OUTCOME_TASK(name, o)						\
static void								\
name(void *owner, void *arg, enum mailbox_status st)			\
{									\
	(void)owner;							\
	if (st == MAILBOX_CANCELLED)					\
		free(arg);						\
	else								\
		outcome(arg, o);					\
}
OUTCOME_TASK(delivered_task, MSG_OUT_DELIVERED)
OUTCOME_TASK(retry_task, MSG_OUT_RETRY)
OUTCOME_TASK(returned_task, MSG_OUT_RETURNED)
OUTCOME_TASK(failed_task, MSG_OUT_FAILED)

void
store_outcome(struct msg *m, enum msg_outcome o)
{
	static mailbox_task_fn *const fns[] = {
		[MSG_OUT_DELIVERED] = delivered_task,
		[MSG_OUT_RETRY] = retry_task,
		[MSG_OUT_RETURNED] = returned_task,
		[MSG_OUT_FAILED] = failed_task,
	};

	/* (MSG_OUT_WRITTEN comes through store_written.) */
	if (o == MSG_OUT_WRITTEN) {
		msg_free(m);
		return;
	}
	m->task.fn = fns[o];
	m->task.arg = m;
	service_post(shards[m->store_acct->shard].svc, &m->task);
}

/* MSG_OUT_WRITTEN for a run of one account's messages. */
struct wire_note {
	struct mailbox_task task;
	struct store_acct *a;
	unsigned n;
	uint64_t ids[];
};

static void
written_task(void *owner, void *arg, enum mailbox_status st)
{
	struct wire_note *w = arg;
	struct store_acct *a = w->a;
	bool moved = false;

	(void)owner;
	for (unsigned i = 0; st == MAILBOX_RUN && i < w->n &&
	    a->nwire < STORE_ACCT_WIRE_MAX; i++)
		/* (Not in flight: cancelled or expired meanwhile.) */
		if (inflight_del(a, w->ids[i])) {
			wire_add(a, w->ids[i]);
			moved = true;
		}
	if (moved)
		store_mark_dirty(a);
	free(w);
}

static void
store_written(struct msg *const *ms, unsigned n)
{
	for (unsigned i = 0, j; i < n; i = j) {
		struct store_acct *a = ms[i]->store_acct;
		struct wire_note *w;

		for (j = i + 1; j < n && ms[j]->store_acct == a; j++)
			;
		w = xmalloc(sizeof(*w) + (j - i) * sizeof(w->ids[0]));
		w->a = a;
		w->n = j - i;
		for (unsigned k = i; k < j; k++)
			w->ids[k - i] = ms[k]->id;
		w->task.fn = written_task;
		w->task.arg = w;
		service_post(shards[a->shard].svc, &w->task);
	}
}

/*
 * The verdict another node (or the cluster) gave a stored message the
 * store sent it (its sender of MSG_KIND_STORE): the outcome it means.
 */
static void
remote_verdict(struct msg *m)
{
	m->flags &= ~(uint32_t)MSG_F_NODE_HELD;
	switch (m->verdict) {
	case MSG_OK:
		/*
		 * Its recipient there has it (or that node's store does):
		 * that node sends the receipt.
		 */
		m->flags |= MSG_F_VIA_NODE;
		store_outcome(m, MSG_OUT_DELIVERED);
		break;
	case MSG_UNFIT:
	case MSG_TOO_LONG:
		store_outcome(m, MSG_OUT_FAILED);
		break;
	case MSG_FULL:
		/* (Also a temporary error from its recipient there.) */
		store_outcome(m, MSG_OUT_RETRY);
		break;
	default:
		/*
		 * Nobody, busy, gone, the cluster down or silent, its
		 * session there closed before it had it: later.
		 */
		store_outcome(m, MSG_OUT_RETURNED);
		break;
	}
}

/*
 * The store's answerer (deliver.h): a verdict for a message the store
 * sent through the cluster, or what became of one it handed to a
 * session here (deliver_stored_task; its sender is not the store's).
 */
static void
store_answer(struct reactor_batch *b, struct msg *m)
{
	(void)b;
	if (m->sender_kind == MSG_KIND_STORE)
		remote_verdict(m);
	else if (m->verdict == MSG_OK)
		store_outcome(m, MSG_OUT_DELIVERED);
	else if (m->verdict == MSG_UNFIT || m->verdict == MSG_TOO_LONG)
		store_outcome(m, MSG_OUT_FAILED);
	else
		store_outcome(m, MSG_OUT_RETURNED);
}

static void
store_take(struct reactor_batch *b, struct msg *m, const char *account)
{
	(void)b;
	store_put(m, account);
}

/* The store as a kind of destination and origin (deliver_register). */
static const struct deliver_kind_ops store_kind = {
	.name = "store",
	.on = store_on,
	.holds = store_holds,
	.take = store_take,
	.answer = store_answer,
	.outcome = store_outcome,
	.written = store_written,
	.wake = store_wake,
	.request = store_request,
};

static void
elsewhere_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store_acct *a;

	(void)owner;
	if (st == MAILBOX_RUN && (a = acct_find(arg, S.index)) != NULL) {
		a->remote = true;
		a->resume_ms = 0;
		store_mark_dirty(a);
	}
	free(arg);
}

static void
post_one(struct store_acct *a, void *arg)
{
	service_post_fn(shards[a->shard].svc, (mailbox_task_fn *)arg,
	    xstrdup(a->id));
}

/* Posts fn(account) to each shard where account holds anything. */
static void
post_acct(const char *account, mailbox_task_fn *fn)
{
	if (!store_on() || atomic_load_explicit(&nholding,
	    memory_order_acquire) == 0)
		return;
	acct_each_held(account, post_one, (void *)fn);
}

void
store_held_elsewhere(const char *account)
{
	post_acct(account, elsewhere_task);
}

static void
wake_task(void *owner, void *arg, enum mailbox_status st)
{
	struct store_acct *a;

	(void)owner;
	if (st == MAILBOX_RUN && (a = acct_find(arg, S.index)) != NULL) {
		a->resume_ms = 0;
		store_mark_dirty(a);
	}
	free(arg);
}

void
store_wake(const char *account)
{
	/* Only accounts with something waiting need the store's thread. */
	post_acct(account, wake_task);
}

static void
publish_stats(void)
{
	uint64_t oldest = 0;

	for (struct store_acct *a = acct_first(); a != NULL; a = a->all) {
		if (a->count == 0)
			continue;
		if (a->oldest_stale) {
			a->oldest = S.ops->oldest(S.b, a->id);
			a->oldest_stale = false;
		}
		if (a->oldest != 0 && (oldest == 0 || a->oldest < oldest))
			oldest = a->oldest;
	}
	publish_counts();
	atomic_store(&S.st_oldest, oldest);
}

/*
 * Once a second: the file may have been deleted or replaced under us,
 * and what is acknowledged into a removed file no restart finds.
 */
static void
check_file(void)
{
	if (S.ops->check == NULL || atomic_load(&S.lost) ||
	    S.ops->check(S.b) == 0)
		return;
	atomic_store(&S.lost, true);
	log_err("store: %s was removed or replaced while in use: refusing "
	    "messages until a restart (what it holds is still delivered)",
	    S.path);
}

static void
tick(struct service *svc, void *arg)
{
	uint64_t now = store_wall_now(), ms = mono_ms();

	(void)svc;
	(void)arg;
	/* The backend's own work: what it holds may change (JetStream). */
	if (S.ops->poll != NULL && !S.in_txn && S.ops->poll(S.b) > 0)
		resync();
	for (struct store_acct *a = acct_first(); a != NULL; a = a->all)
		if (a->resume_ms != 0 && ms >= a->resume_ms) {
			a->resume_ms = 0;
			store_mark_dirty(a);
		}
	if (now != S.last_second) {
		S.last_second = now;
		check_file();
		store_expire(now);
		for (struct store_acct *a = acct_first(); a != NULL; a = a->all) {
			if (a->rescan_at != 0 && a->rescan_at <= now) {
				a->rescan_at = 0;
				a->cursor = 0;
				store_mark_dirty(a);
			}
			/* A bind that raced its wake-up, a pause that ended. */
			if (a->count > a->ninflight + a->nwire)
				store_mark_dirty(a);
			/*
			 * Nobody here: now and then, whether another node
			 * has it (a notice of its bind may have been missed).
			 */
			if (a->count > a->ninflight + a->nwire && !a->remote &&
			    now >= a->probe_at &&
			    deliver_kind_up(MSG_KIND_NODE) &&
			    !route_is_held(a->id)) {
				a->probe_at = now + STORE_PROBE_S;
				a->remote = true;
			}
		}
		publish_stats();
		store_purge_old(now);
		limits_keep();
		if (S.index == 0)
			store_rcpt_purge(now);
	}
	marks_retry();
	store_group_commit();
	pump_dirty();
	publish_counts();
}

static void
reload_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	if (st == MAILBOX_RUN) {
		config_unref(S.cf);
		S.cf = arg;
	} else {
		config_unref(arg);
	}
}

void
store_reload(const struct config *cf)
{
	if (!store_on())
		return;
	for (unsigned k = 0; k < nshards; k++)
		service_post_fn(shards[k].svc, reload_task,
		    config_ref((struct config *)cf));
}

static int
backlog_one(const char *account, uint64_t count, uint64_t bytes, void *arg)
{
	struct store_acct *a = store_acct_get(account);

	(void)arg;
	a->count = count;
	a->bytes = bytes;
	a->oldest_stale = true;
	held_add(a, count);
	store_count((int64_t)count, (int64_t)bytes);
	return 0;
}

static void
stop(struct service *svc, void *arg)
{
	(void)svc;
	(void)arg;
	store_group_commit();
}

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned done;			/* shards quiet */
} quiet = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void
quiesce_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	(void)arg;
	(void)st;
	/* What the stores still hold goes first; nothing is written after. */
	store_group_commit();
	S.quiesced = true;
	if (S.ops->quiesce != NULL)
		S.ops->quiesce(S.b);
	pthread_mutex_lock(&quiet.lock);
	quiet.done++;
	pthread_cond_signal(&quiet.cond);
	pthread_mutex_unlock(&quiet.lock);
}

void
store_quiesce(void)
{
	static struct mailbox_task t[CONFIG_SHARDS_MAX];

	if (!store_on() || shards[0].ops->quiesce == NULL)
		return;
	for (unsigned k = 0; k < nshards; k++) {
		t[k].fn = quiesce_task;
		t[k].arg = NULL;
		service_post(shards[k].svc, &t[k]);
	}
	pthread_mutex_lock(&quiet.lock);
	while (quiet.done < nshards)
		pthread_cond_wait(&quiet.cond, &quiet.lock);
	pthread_mutex_unlock(&quiet.lock);
}

/*
 * The backend cf's store names, by name from the table of backends
 * (store_backend.h); NULL and *err when it is not built in.
 */
static const struct store_backend_ops *
backend_pick(const struct config *cf, char **err)
{
	const char *name = cf->store.jetstream ? "jetstream" : "sqlite";
	const struct store_backend_info *bi = store_backend_find(name);

	if (bi != NULL && bi->ops != NULL)
		return bi->ops;
	if (bi == NULL ? asprintf(err, "%s: no store backend \"%s\"",
	    cf->store.path, name) < 0 : asprintf(err, "%s: built without %s "
	    "(%s=no)", cf->store.path, bi->library, bi->option) < 0)
		*err = NULL;
	return NULL;
}

/* Shard k's file: store.path itself for shard 0, "<path>.k" beside it. */
static void
shard_path(const struct config *cf, unsigned k, char *out, size_t len)
{
	if (k == 0)
		snprintf(out, len, "%s", cf->store.path);
	else
		snprintf(out, len, "%s.%u", cf->store.path, k);
}

int
store_check(const struct config *cf, char **err)
{
	const struct store_backend_ops *ops;
	struct store_backend *b;
	char path[4096 + 16];

	if (!cf->store.enabled)
		return 0;
	if ((ops = backend_pick(cf, err)) == NULL)
		return -1;
	/* JetStream: the settings only; -t does not ask the NATS servers. */
	for (unsigned k = 0; k < config_store_shards(cf); k++) {
		shard_path(cf, k, path, sizeof(path));
		if ((b = ops->open(cf, path, true, err)) == NULL)
			return -1;
		ops->close(b);
	}
	return 0;
}

/*
 * A post to keep (url set) or to forget, or (want) a receipt awaited to
 * keep (url set) or forget, on its way to the store.
 */
struct post_op {
	struct mailbox_task task;
	uint64_t id;
	uint64_t unwant;		/* a receipt awaited it ends, or 0 */
	char	*url;
	char	*body;
	bool	want;
	struct http_out_want w;		/* its strings are in buf */
	char	buf[];
};

static void
post_task(void *owner, void *arg, enum mailbox_status st)
{
	struct post_op *p = arg;
	int rc;

	(void)owner;
	if (st == MAILBOX_RUN && !S.quiesced && store_txn(false)) {
		if (p->want)
			rc = p->w.url != NULL ? S.ops->want_put(S.b, &p->w) :
			    S.ops->want_del(S.b, p->id);
		else
			rc = p->url != NULL ? S.ops->post_put(S.b, p->id,
			    p->url, p->body) : S.ops->post_del(S.b, p->id);
		/* In the same group: a restart has the one or the other. */
		if (rc == 0 && p->unwant != 0)
			rc = S.ops->want_del(S.b, p->unwant);
		/* Still posted from memory: only a restart would lose it. */
		if (rc < 0) {
			store_write_error();
			write_failed("keeping an HTTP post");
		}
		/*
		 * Made once the group is committed or failed
		 * (store_group_commit), not before the posts ahead of it.
		 */
		if (!p->want && p->url != NULL)
			S.posts_kept = p->id;
	} else if (!p->want && p->url != NULL) {
		http_out_kept(p->id);	/* not kept: made from memory */
	}
	free(p->url);
	free(p->body);
	free(p);
}

/* Shard 0 keeps them (its thread runs post_task). */
bool
store_keeps_posts(void)
{
	return store_on() && shards[0].ops->post_put != NULL;
}

static void
post_send(uint64_t id, const char *url, const char *body, uint64_t unwant)
{
	struct post_op *p = xcalloc(1, sizeof(*p));

	p->id = id;
	p->unwant = unwant;
	p->url = url != NULL ? xstrdup(url) : NULL;
	p->body = body != NULL ? xstrdup(body) : NULL;
	p->task.fn = post_task;
	p->task.arg = p;
	service_post(shards[0].svc, &p->task);
}

void
store_post_keep(uint64_t id, const char *url, const char *body,
    uint64_t unwant)
{
	if (store_keeps_posts())
		post_send(id, url, body, unwant);
}

void
store_post_done(uint64_t id)
{
	if (store_keeps_posts())
		post_send(id, NULL, NULL, 0);
}

void
store_want_keep(const struct http_out_want *w)
{
	size_t nu = strlen(w->url) + 1, nt = strlen(w->to) + 1;
	size_t nf = strlen(w->from) + 1;
	struct post_op *p;

	if (!store_keeps_posts())
		return;
	p = xcalloc(1, sizeof(*p) + nu + nt + nf);
	p->id = w->id;
	p->want = true;
	p->w = *w;
	p->w.url = memcpy(p->buf, w->url, nu);
	p->w.to = memcpy(p->buf + nu, w->to, nt);
	p->w.from = memcpy(p->buf + nu + nt, w->from, nf);
	p->task.fn = post_task;
	p->task.arg = p;
	service_post(shards[0].svc, &p->task);
}

void
store_want_done(uint64_t id)
{
	struct post_op *p;

	if (!store_keeps_posts())
		return;
	p = xcalloc(1, sizeof(*p));
	p->id = id;
	p->want = true;
	p->task.fn = post_task;
	p->task.arg = p;
	service_post(shards[0].svc, &p->task);
}

int
store_wants_each(store_want_fn *fn, void *arg)
{
	if (!store_keeps_posts())
		return 0;
	return shards[0].ops->wants(shards[0].b, fn, arg);
}

int
store_posts_each(store_post_fn *fn, void *arg)
{
	if (!store_keeps_posts())
		return 0;
	return shards[0].ops->posts(shards[0].b, fn, arg);
}

bool
store_final_of(uint64_t id, uint8_t *state, uint64_t *at)
{
	struct store_rec rec;
	bool found = false;

	for (unsigned k = 0; k < nshards && !found; k++) {
		memset(&rec, 0, sizeof(rec));
		if (shards[k].ops->get(shards[k].b, id, &rec) != 1)
			continue;
		found = true;
		/* Delivered to an SMS centre: the receipt is the centre's. */
		if (rec.state == MSG_STATE_ENROUTE ||
		    (id_is_upstream(rec.account) &&
		    rec.state == MSG_STATE_DELIVERED)) {
			free(rec.m);
			return false;
		}
		*state = rec.state;
		*at = rec.final_date;
		free(rec.m);
	}
	return found;
}

uint64_t
store_id_floor(void)
{
	return atomic_load(&own_seq);
}

static void
open_failed(char **err, const char *path, const char *what)
{
	if (asprintf(err, "%s: %s", path, what) < 0)
		*err = NULL;
}

/*
 * Files of shards a larger store.shards had: their waiting messages go
 * to the shards of now, then the files. Their final rows (query_sm
 * answers) go with them.
 */
static int
absorb_old_shards(const struct config *cf, char **err)
{
	const struct store_backend_ops *ops = shards[0].ops;
	struct store_backend *b;
	char path[4096 + 16];
	long moved;

	for (unsigned k = nshards; k < CONFIG_SHARDS_MAX; k++) {
		shard_path(cf, k, path, sizeof(path));
		if (access(path, F_OK) < 0)
			continue;
		if ((b = ops->open(cf, path, false, err)) == NULL)
			return -1;
		moved = store_move(b, path, k, err);
		ops->close(b);
		if (moved < 0)
			return -1;
		if (ops->remove(path) < 0) {
			open_failed(err, path, "cannot remove it after moving "
			    "its messages");
			return -1;
		}
		log_info("store: %s: %ld waiting messages moved to the %u "
		    "shards of store.shards; removed", path, moved, nshards);
	}
	return 0;
}

/* Each shard's file, and the messages of another shard moved to it. */
static int
open_shards(const struct config *cf, const struct store_backend_ops *ops,
    char **err)
{
	long moved;

	nshards = config_store_shards(cf);
	shards = xcalloc(nshards, sizeof(*shards));
	for (unsigned k = 0; k < nshards; k++) {
		struct store *sh = &shards[k];

		sh->index = k;
		sh->ops = ops;
		shard_path(cf, k, sh->path, sizeof(sh->path));
		sh->inflight_max = STORE_INFLIGHT_MAX / nshards;
		if (sh->inflight_max < 4 * STORE_ACCT_INFLIGHT)
			sh->inflight_max = 4 * STORE_ACCT_INFLIGHT;
		sh->inflight_bytes_max = STORE_INFLIGHT_BYTES / nshards;
		if ((sh->b = ops->open(cf, sh->path, false, err)) == NULL)
			return -1;
	}
	/* One shard (JetStream): nothing to move, nothing to remove. */
	if (ops->del == NULL || ops->remove == NULL)
		return 0;
	if (absorb_old_shards(cf, err) < 0)
		return -1;
	for (unsigned k = 0; k < nshards; k++) {
		if ((moved = store_move(shards[k].b, shards[k].path, k,
		    err)) < 0)
			return -1;
		if (moved > 0)
			log_info("store: %s: %ld waiting messages moved to the "
			    "other shards of store.shards = %u",
			    shards[k].path, moved, nshards);
	}
	return 0;
}

/* Shard k's counts from its file, on the main thread. */
static int
count_shard(const struct config *cf, unsigned k, uint64_t *max)
{
	struct store *sh = &shards[k];
	uint64_t n = 0, bytes = 0;

	cur = sh;
	if (S.ops->backlogs(S.b, backlog_one, NULL) < 0 ||
	    S.ops->max_id(S.b, max) < 0 || (S.ops->finals != NULL &&
	    S.ops->finals(S.b, &n, &bytes) < 0)) {
		cur = NULL;
		return -1;
	}
	finals_set(n, bytes);
	S.nfinal_ok = S.nfinal;
	S.final_bytes_ok = S.final_bytes;
	S.cf = config_ref((struct config *)cf);
	S.last_purge = S.last_second = store_wall_now();
	publish_stats();
	cur = NULL;
	return 0;
}

static void
start(struct service *svc, void *arg)
{
	(void)svc;
	cur = arg;
}

static const struct service_hooks hooks = {
	.start = start,
	.after_batch = after_batch,
	.tick = tick,
	.stop = stop,
	.tick_ms = STORE_TICK_MS,
};

static void
shards_free(void)
{
	for (unsigned k = 0; k < nshards; k++) {
		if (shards[k].b != NULL)
			shards[k].ops->close(shards[k].b);
		config_unref(shards[k].cf);
	}
	free(shards);
	shards = NULL;
	nshards = 0;
}

int
store_open(const struct config *cf, struct service **svcs, unsigned *nsvcs,
    char **err)
{
	const struct store_backend_ops *ops;
	uint64_t max = 0, id = 0, waiting = 0;
	char name[16];

	if (!cf->store.enabled)
		return 0;
	if ((ops = backend_pick(cf, err)) == NULL)
		return -1;
	if (open_shards(cf, ops, err) < 0)
		goto fail;
	for (unsigned k = 0; k < nshards; k++) {
		if (count_shard(cf, k, &id) < 0) {
			open_failed(err, shards[k].path, "cannot read the store");
			goto fail;
		}
		max = id > max ? id : max;
		waiting += shards[k].nmessages;
	}
	/*
	 * Ids go on from the highest stored, and from the clock (see
	 * main.c): the store's own end in its own low bits (deliver.h).
	 */
	atomic_store(&own_seq, max >> 10);
	if (atomic_load(&own_seq) < (store_wall_now() << 20))
		atomic_store(&own_seq, store_wall_now() << 20);
	for (unsigned k = 0; k < nshards; k++) {
		snprintf(name, sizeof(name), k == 0 ? "store" : "store%u", k);
		if ((shards[k].svc = service_new(name, &hooks,
		    &shards[k])) == NULL) {
			open_failed(err, shards[k].path, "cannot make its "
			    "thread");
			goto fail;
		}
		svcs[(*nsvcs)++] = shards[k].svc;
	}
	atomic_store(&on, true);
	deliver_register(MSG_KIND_STORE, &store_kind);
	if (cf->store.jetstream)
		log_info("store: JetStream (node %s's messages): %llu "
		    "waiting", cf->cluster.node, (unsigned long long)waiting);
	else
		log_info("store: %s: %llu messages waiting (%u shard%s)",
		    cf->store.path, (unsigned long long)waiting, nshards,
		    nshards == 1 ? "" : "s");
	return 0;
fail:
	for (unsigned k = 0; k < nshards; k++)
		if (shards[k].svc != NULL) {
			service_free(shards[k].svc);
			(*nsvcs)--;
		}
	shards_free();
	return -1;
}

void
store_close(void)
{
	struct store_acct *a, *next;

	if (!store_on())
		return;
	atomic_store(&on, false);
	deliver_register(MSG_KIND_STORE, NULL);
	for (unsigned k = 0; k < nshards; k++) {
		for (a = atomic_load(&shards[k].all); a != NULL; a = next) {
			next = a->all;
			for (unsigned i = 0; i < a->nmarks; i++)
				free(a->marks[i].m);
			free(a->marks);
			free(a->wire);
			free(a);
		}
	}
	shards_free();
	atomic_store(&nholding, 0);
	memset(&total, 0, sizeof(total));
	memset(buckets, 0, sizeof(buckets));
}
