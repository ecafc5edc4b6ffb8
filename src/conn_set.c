/* conn_set.c: each reactor's set of connections: its hooks into the loop, the end-of-turn reap, the sweeps, closing them all. */
#include "conn_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "proto.h"
#include "transport.h"
#include "uring.h"

#define CONN_LINGER_TIMEOUT	5	/* s a closing connection may linger */
#define CONN_POOL_CHUNKS	64	/* spare output chunks kept: 1 MiB */
/* With batched writes a turn holds a chunk per client written: 5 MiB. */
#define CONN_POOL_CHUNKS_BATCH	(CONN_BATCH + CONN_POOL_CHUNKS)

/* Sends what the turn queued and tears down the connections closed. */
static void
conn_reap(struct conn_set *set)
{
	struct conn *c;

	/*
	 * Flush first so that no connection being freed is still on the flush
	 * list; on_close may write to or close others, so loop until both
	 * lists are empty.
	 */
	for (;;) {
		conn_flush_queued(set);
		if ((c = set->closing) == NULL)
			break;
		set->closing = c->lru_next;
		conn_free(c);
	}
}

static void
conn_sweep_idle(struct conn_set *set, unsigned idle_timeout)
{
	uint32_t now = set->r->now;
	struct conn *c;

	/*
	 * Times are whole seconds: a difference of idle_timeout may mean only
	 * a few milliseconds idle, so close only beyond it.
	 */
	while ((c = set->lru_head) != NULL &&
	    now - c->last_active > idle_timeout)
		conn_close(c, CONN_CLOSE_IDLE);
}

/* Calls each connection's protocol on_tick. */
static void
conn_tick_all(struct conn_set *set)
{
	for (uint32_t i = 0; i < set->nslots; i++) {
		struct conn *c = set->slots[i];

		if (c != NULL && c->xp->ops->tick != NULL &&
		    !conn_is_closing(c)) {
			c->xp->ops->tick(c);
			conn_xp_failed(c);
		}
		if (c != NULL && c->proto->on_tick != NULL &&
		    !conn_is_closing(c))
			c->proto->on_tick(c);
	}
}

/*
 * Closes lingering connections whose peer has taken everything, or that
 * have lingered for timeout seconds.
 */
static void
conn_sweep_linger(struct conn_set *set, unsigned timeout)
{
	struct reactor *r = set->r;

	for (uint32_t i = 0; i < set->nslots && set->nlinger > 0; i++) {
		struct conn *c = set->slots[i];

		if (c == NULL || !(c->flags & CONN_F_LINGER) ||
		    (c->flags & CONN_F_CLOSING))
			continue;
		/* Not quiet long enough: not worth a look yet. */
		if ((uint32_t)r->now_ms - c->linger_input <
		    CONN_LINGER_QUIET_MS && r->now - c->last_active <= timeout)
			continue;
		if (conn_linger_done(c) || r->now - c->last_active > timeout)
			conn_close(c, c->drain_reason);
	}
}

/* Closes connections paused on output that sent nothing for timeout s. */
static void
conn_sweep_stalled(struct conn_set *set, unsigned timeout)
{
	uint32_t now = set->r->now;

	for (uint32_t i = 0; i < set->nslots && set->npaused > 0; i++) {
		struct conn *c = set->slots[i];

		/* Paused connections are not read: activity means output. */
		if (c != NULL && (c->flags & CONN_F_PAUSED) &&
		    !(c->flags & CONN_F_CLOSING) &&
		    now - c->last_active > timeout)
			conn_close(c, CONN_CLOSE_SLOW);
	}
}

/* Closes every connection at once and frees them. */
static void
conn_set_close_all(struct conn_set *set)
{
	for (uint32_t i = 0; i < set->nslots; i++) {
		struct conn *c = set->slots[i];

		if (c != NULL)
			conn_close(c, CONN_CLOSE_SHUTDOWN);
	}
	conn_reap(set);
}

void
conn_close_all(struct reactor *r)
{
	struct conn_set *set = reactor_hook_arg(r, &conn_set_hooks);

	if (set != NULL)
		conn_set_close_all(set);
}

/*
 * The set's hooks into the reactor's loop. Each turn: the batched reads,
 * then (before sleeping) the reads a transport owes, lingering closes,
 * and the flush and teardown of the turn's output and closes.
 */

/* Makes the ring on the reactor's own thread, the only one that may use
 * it. Without it (old kernel, io_uring disabled or filtered out) every
 * read and write is its own system call, as with io_uring = false. */
static void
conn_set_start(struct reactor *r, void *arg)
{
	static atomic_bool told;
	struct conn_set *set = arg;

	if (!set->use_uring || set->batch != NULL)
		return;
	if (uring_init(&set->ring, CONN_BATCH) < 0) {
		if (!atomic_exchange(&told, true))
			log_notice("io_uring unavailable (%s): one system call "
			    "per read and per write", strerror(errno));
		return;
	}
	set->batch = xmalloc(sizeof(*set->batch));
	set->batch->nread = 0;
	set->batch->reading = false;
	set->pool.max = CONN_POOL_CHUNKS_BATCH;
	log_debug("reactor=%u batches reads and writes with io_uring", r->id);
}

static void
conn_set_after_events(struct reactor *r, void *arg)
{
	(void)r;
	conn_read_batch(arg);
}

/* Reads what transports hold; true if some still hold more. */
static bool
conn_read_pending(struct conn_set *set)
{
	struct conn **list = set->pending;
	uint32_t n = set->npending;

	/*
	 * A read may leave more pending: that goes on a new list, for the
	 * next turn. Nothing is freed before conn_reap, so list holds.
	 */
	set->pending = NULL;
	set->npending = set->pending_cap = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct conn *c = list[i];

		c->flags &= ~CONN_F_PENDING;
		if (conn_backlog_ready(c)) {
			conn_input(c, NULL, 0);
			conn_queue_flush(c);
		}
		if (conn_xp_pending(c))
			conn_read(c);
		if (!(c->flags & CONN_F_CLOSING))
			conn_update_interest(c);
	}
	free(list);
	return set->npending > 0;
}

static bool
conn_set_before_sleep(struct reactor *r, void *arg)
{
	struct conn_set *set = arg;
	bool busy = conn_read_pending(set);

	(void)r;
	/*
	 * Stopping: every turn (100 ms), not once a second, so that exit
	 * waits no longer than the lingering connections need.
	 */
	if (set->nlinger > 0 && set->draining)
		conn_sweep_linger(set, CONN_LINGER_TIMEOUT);
	if (set->nackwait > 0)
		conn_poll_acked(set);
	conn_reap(set);
	/* A flush in the reap may have made room for kept messages. */
	return busy || set->npending > 0;
}

static void
conn_set_every_second(struct reactor *r, void *arg)
{
	struct conn_set *set = arg;
	const struct config *cf = r->cf;

	log_limit_report(&set->client_log, r->now, "reactor", r->id);
	if (!set->draining && cf->idle_timeout > 0)
		conn_sweep_idle(set, cf->idle_timeout);
	if (set->npaused > 0 && cf->limits.output_stall_timeout > 0)
		conn_sweep_stalled(set, cf->limits.output_stall_timeout);
	if (!set->draining)
		conn_tick_all(set);
	if (set->nlinger > 0)
		conn_sweep_linger(set, CONN_LINGER_TIMEOUT);
}

/*
 * Stop: no new clients; every connection closes once its output is out,
 * or (on_stop) once the answers its client owes are in.
 */
static void
conn_set_stop(struct reactor *r, void *arg)
{
	struct conn_set *set = arg;

	(void)r;
	set->draining = true;
	for (uint32_t i = 0; i < set->nslots; i++) {
		struct conn *c = set->slots[i];

		if (c == NULL || conn_is_closing(c))
			continue;
		if (c->proto->on_stop == NULL || !c->proto->on_stop(c))
			conn_close_after_flush(c, CONN_CLOSE_SHUTDOWN);
	}
}

static bool
conn_set_drained(struct reactor *r, void *arg)
{
	(void)r;
	return ((struct conn_set *)arg)->nconns == 0;
}

static void
conn_set_finish(struct reactor *r, void *arg)
{
	struct conn_set *set = arg;

	conn_set_close_all(set);
	/* What this second dropped: as if it were over. */
	log_limit_report(&set->client_log, set->client_log.second + 1,
	    "reactor", r->id);
}

/* At reactor_free, after its thread: the last flush by plain calls. */
static void
conn_set_free(struct reactor *r, void *arg)
{
	struct conn_set *set = arg;

	(void)r;
	uring_fini(&set->ring);
	free(set->batch);
	set->batch = NULL;
	set->draining = true;
	conn_set_close_all(set);
	free(set->slots);
	free(set->gens);
	free(set->free_slots);
	free(set->pending);
	free(set->ackwait);
	buf_pool_fini(&set->pool);
	free(set->scratch);
	free(set);
}

const struct reactor_hooks conn_set_hooks = {
	.start = conn_set_start,
	.after_events = conn_set_after_events,
	.every_second = conn_set_every_second,
	.before_sleep = conn_set_before_sleep,
	.stop = conn_set_stop,
	.drained = conn_set_drained,
	.finish = conn_set_finish,
	.free = conn_set_free,
};

struct conn_set *
conn_set_of(struct reactor *r)
{
	struct conn_set *set = reactor_hook_arg(r, &conn_set_hooks);

	if (set != NULL)
		return set;
	set = xcalloc(1, sizeof(*set));
	set->r = r;
	set->use_uring = r->cf->io_uring;
	set->ring.fd = -1;
	buf_pool_init(&set->pool, CONN_POOL_CHUNKS);
	set->scratch = xmalloc(CONN_SCRATCH_SIZE);
	if (reactor_hook_add(r, &conn_set_hooks, set) < 0)
		fatal("reactor=%u cannot hook in its connections", r->id);
	return set;
}
