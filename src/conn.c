/* conn.c: a connection: I/O through a transport, framing, queued writes, watermarks, close (its reactor's set of them is conn_set.c's). */
#include "conn.h"
#include "conn_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "iplimit.h"
#include "log.h"
#include "proto.h"
#include "transport.h"
#include "uring.h"

#define CONN_READ_BUDGET	16	/* reads per wakeup, then others' turn */
#define CONN_IOV_MAX		64
/* Input held for an unfinished message, whatever the protocol allows. */
#define CONN_INPUT_MAX		((size_t)(1 << 20) + 65536)
#define CONN_BATCH_NONE		INT32_MIN /* the ring did not run it */

atomic_uint conn_live;

/* Each close reason's counter, whose label is also the reason's name. */
static const enum counter_id close_counter[CONN_CLOSE_N] = {
	[CONN_CLOSE_PEER] = COUNTER_CLOSED_PEER,
	[CONN_CLOSE_RESET] = COUNTER_CLOSED_RESET,
	[CONN_CLOSE_IDLE] = COUNTER_CLOSED_IDLE,
	[CONN_CLOSE_SLOW] = COUNTER_CLOSED_SLOW,
	[CONN_CLOSE_PROTOCOL] = COUNTER_CLOSED_PROTOCOL,
	[CONN_CLOSE_QUIT] = COUNTER_CLOSED_QUIT,
	[CONN_CLOSE_SHUTDOWN] = COUNTER_CLOSED_SHUTDOWN,
	[CONN_CLOSE_TIMEOUT] = COUNTER_CLOSED_TIMEOUT,
};

const char *
conn_close_reason_name(enum conn_close_reason reason)
{
	if (reason >= CONN_CLOSE_N)
		return "?";
	return counter_info(close_counter[reason])->label_value;
}

struct handoff {
	struct mailbox_task task;
	int	fd;
	const struct proto *proto;
	struct iplimit_entry *ip;
	struct transport_ctx *xp;	/* a reference, or NULL: plain */
	uint8_t	listener;
};

static void conn_on_io(struct reactor *r, struct reactor_io *io,
	    uint32_t events);
static void conn_linger(struct conn *c);
static void conn_check_pending(struct conn *c);

/*
 * c's set: found through its reactor rather than kept in every
 * connection (an idle one is 8 bytes smaller for it).
 */
static inline struct conn_set *
set_of(const struct conn *c)
{
	return reactor_hook_arg(c->r, &conn_set_hooks);
}

static void
lru_unlink(struct conn_set *set, struct conn *c)
{
	if (c->lru_prev != NULL)
		c->lru_prev->lru_next = c->lru_next;
	else
		set->lru_head = c->lru_next;
	if (c->lru_next != NULL)
		c->lru_next->lru_prev = c->lru_prev;
	else
		set->lru_tail = c->lru_prev;
	c->lru_prev = c->lru_next = NULL;
}

static void
lru_append(struct conn_set *set, struct conn *c)
{
	c->lru_next = NULL;
	c->lru_prev = set->lru_tail;
	if (set->lru_tail != NULL)
		set->lru_tail->lru_next = c;
	else
		set->lru_head = c;
	set->lru_tail = c;
}

/* Marks activity; the list stays ordered by last_active. */
static void
conn_touch(struct conn *c)
{
	struct conn_set *set = set_of(c);

	if (c->last_active == c->r->now)
		return;
	c->last_active = c->r->now;
	if (set->lru_tail != c) {
		lru_unlink(set, c);
		lru_append(set, c);
	}
}

static uint32_t
slot_add(struct conn_set *set, struct conn *c)
{
	uint32_t slot;

	if (set->nfree > 0) {
		slot = set->free_slots[--set->nfree];
	} else {
		uint32_t n = set->nslots ? set->nslots * 2 : 64;

		set->slots = xrealloc(set->slots, n * sizeof(*set->slots));
		set->gens = xrealloc(set->gens, n * sizeof(*set->gens));
		set->free_slots = xrealloc(set->free_slots,
		    n * sizeof(*set->free_slots));
		/* Hand out low slots first: push the new ones high to low. */
		for (uint32_t i = n; i-- > set->nslots + 1;) {
			set->gens[i] = 0;
			set->slots[i] = NULL;
			set->free_slots[set->nfree++] = i;
		}
		slot = set->nslots;
		set->gens[slot] = 0;
		set->nslots = n;
	}
	set->slots[slot] = c;
	set->nconns++;
	return slot;
}

static void
slot_del(struct conn_set *set, uint32_t slot)
{
	set->slots[slot] = NULL;
	set->gens[slot]++;
	set->free_slots[set->nfree++] = slot;
	set->nconns--;
}

struct conn *
conn_new_with(struct reactor *r, int fd, const struct proto *proto,
    struct transport *xp)
{
	struct conn_set *set = conn_set_of(r);
	struct conn *c = xcalloc(1, sizeof(*c));

	c->r = r;
	c->proto = proto;
	c->xp = xp;
	c->listener = CONN_NO_LISTENER;
	c->io.fd = fd;
	c->io.fn = conn_on_io;
	c->last_active = r->now;
	/* A transport may speak first (a TLS client): it says so here. */
	if (reactor_add_io(r, &c->io, xp->ops->events != NULL ?
	    xp->ops->events(c, EPOLLIN) : EPOLLIN) < 0) {
		log_warn("reactor=%u cannot watch fd %d", r->id, fd);
		if (xp->ops->close != NULL)
			xp->ops->close(c);
		close(fd);
		atomic_fetch_sub(&conn_live, 1);
		free(c);
		return NULL;
	}
	c->slot = slot_add(set, c);
	c->gen = set->gens[c->slot];
	lru_append(set, c);
	counter_add(&r->counters, COUNTER_CONNS, 1);
	counter_add(&r->counters, COUNTER_ACCEPTED, 1);
	if (proto->on_open != NULL)
		proto->on_open(c);
	return c;
}

struct conn *
conn_new(struct reactor *r, int fd, const struct proto *proto)
{
	return conn_new_with(r, fd, proto, &transport_plain);
}

struct conn_handle
conn_handle(const struct conn *c)
{
	return (struct conn_handle){ .reactor = c->r->id, .slot = c->slot,
	    .gen = c->gen };
}

struct conn *
conn_resolve(struct reactor *r, const struct conn_handle *h)
{
	struct conn_set *set = reactor_hook_arg(r, &conn_set_hooks);
	struct conn *c;

	if (set == NULL || h->reactor != r->id || h->slot >= set->nslots ||
	    set->gens[h->slot] != h->gen)
		return NULL;
	c = set->slots[h->slot];
	return c != NULL && !(c->flags & CONN_F_CLOSING) ? c : NULL;
}

uint32_t
conn_count(struct reactor *r)
{
	struct conn_set *set = reactor_hook_arg(r, &conn_set_hooks);

	return set != NULL ? set->nconns : 0;
}

/* A client not adopted: its fd closed, its handshake place given back. */
static void
handoff_drop(struct handoff *h)
{
	if (h->xp != NULL && h->xp->type->unadmit != NULL)
		h->xp->type->unadmit(h->ip);
	close(h->fd);
	atomic_fetch_sub(&conn_live, 1);
}

/*
 * A client the acceptor handed over. Adopted unless the reactor is
 * draining (it takes no new clients) or is freed at exit (cancelled).
 * A client's handshake place (its type's admit) goes to its transport,
 * or back if none is made.
 */
static void
handoff_task(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct handoff *h = arg;
	struct transport *xp;
	struct conn *c = NULL;

	if (st == MAILBOX_RUN && !conn_set_of(r)->draining) {
		if (h->xp == NULL)
			c = conn_new(r, h->fd, h->proto);
		else if ((xp = h->xp->type->accept(h->xp, r, h->fd,
		    r->cf->limits.handshake_timeout, h->ip)) != NULL)
			c = conn_new_with(r, h->fd, h->proto, xp);
		else {
			log_warnx("reactor=%u cannot start %s on fd %d",
			    r->id, h->xp->type->label != NULL ?
			    h->xp->type->label : h->xp->type->name, h->fd);
			handoff_drop(h);
		}
	} else
		handoff_drop(h);
	if (c != NULL) {
		c->ip = h->ip;
		c->listener = h->listener;
		counter_bump(&r->detail.conns[c->listener], 1);
	} else
		iplimit_release(h->ip);
	transport_ctx_unref(h->xp);
	free(h);
}

void
conn_handoff(struct reactor *r, int fd, const struct proto *proto,
    unsigned listener, struct transport_ctx *xp, struct iplimit_entry *ip)
{
	struct handoff *h = xmalloc(sizeof(*h));

	h->xp = xp;
	h->fd = fd;
	h->proto = proto;
	h->listener = (uint8_t)listener;
	h->ip = ip;
	h->task.fn = handoff_task;
	h->task.arg = h;
	reactor_post_task(r, &h->task);
}

void
conn_update_interest(struct conn *c)
{
	const struct limits *lim = &c->r->cf->limits;
	uint32_t events = 0;

	if (c->flags & CONN_F_CLOSING)
		return;
	if (!(c->flags & CONN_F_PAUSED) &&
	    c->out.bytes >= lim->output_high_watermark) {
		c->flags |= CONN_F_PAUSED;
		set_of(c)->npaused++;
		/* The stall timeout counts from here at the earliest. */
		conn_touch(c);
	} else if ((c->flags & CONN_F_PAUSED) &&
	    c->out.bytes <= lim->output_high_watermark / 2) {
		c->flags &= ~CONN_F_PAUSED;
		set_of(c)->npaused--;
		conn_check_pending(c);
	} else if (c->flags & CONN_F_BACKLOG)
		conn_check_pending(c);
	if (!(c->flags & (CONN_F_PAUSED | CONN_F_DRAIN | CONN_F_HELD |
	    CONN_F_EOF | CONN_F_BACKLOG)) || (c->flags & CONN_F_LINGER))
		events |= EPOLLIN;
	/*
	 * Output queued for this turn's flush may well all go: let the flush
	 * decide, rather than arm EPOLLOUT now and disarm it after.
	 */
	if (c->flags & CONN_F_FLUSH_QUEUED)
		events |= c->io.events & EPOLLOUT;
	else if (c->out.bytes > 0)
		events |= EPOLLOUT;
	if (c->xp->ops->events != NULL)
		events = c->xp->ops->events(c, events);
	if (reactor_mod_io(c->r, &c->io, events) < 0)
		conn_close(c, CONN_CLOSE_RESET);
}

/* Answers to commands already read are still to come to c. */
static bool
conn_owes_answers(const struct conn *c)
{
	return c->proto->owes_answers != NULL && c->proto->owes_answers(c);
}

/*
 * After a write: the protocol hears what was sent, a draining connection
 * all sent lingers; interest.
 */
static void
conn_flush_done(struct conn *c)
{
	if (c->proto->on_sent != NULL && !(c->flags & CONN_F_CLOSING))
		c->proto->on_sent(c);
	if (c->out.bytes == 0 && (c->flags & CONN_F_DRAIN) &&
	    !conn_owes_answers(c))
		conn_linger(c);
	conn_update_interest(c);
}

/* Accounts n bytes sent. */
static void
conn_sent(struct conn *c, size_t n)
{
	outq_consume(&c->out, &set_of(c)->pool, n);
	c->out_sent += n;
	counter_add(&c->r->counters, COUNTER_BYTES_OUT, (uint64_t)n);
	conn_touch(c);
}

/*
 * A transport never closes its connection: when it wants c closed (a
 * handshake refused or too late) it says why in its fail, and c is
 * closed here for that reason, before any other (a reset) can be given.
 * errno is kept for the caller.
 */
void
conn_xp_failed(struct conn *c)
{
	int saved = errno;

	if (c->xp->fail == TRANSPORT_FAIL_PROTOCOL)
		conn_close(c, CONN_CLOSE_PROTOCOL);
	else if (c->xp->fail == TRANSPORT_FAIL_TIMEOUT)
		conn_close(c, CONN_CLOSE_TIMEOUT);
	errno = saved;
}

static ssize_t
conn_xp_read(struct conn *c, void *p, size_t n)
{
	ssize_t r = c->xp->ops->read(c, p, n);

	if (r < 0)
		conn_xp_failed(c);
	return r;
}

static ssize_t
conn_xp_writev(struct conn *c, const struct iovec *iov, int cnt)
{
	ssize_t r = c->xp->ops->writev(c, iov, cnt);

	if (r < 0)
		conn_xp_failed(c);
	return r;
}

/* Sends what is queued until done or the socket is full. */
static void
conn_flush(struct conn *c)
{
	struct iovec iov[CONN_IOV_MAX];
	ssize_t n;

	while (c->out.bytes > 0 && !(c->flags & CONN_F_CLOSING)) {
		int cnt = outq_iov(&c->out, iov, CONN_IOV_MAX);
		size_t want = 0;

		for (int i = 0; i < cnt; i++)
			want += iov[i].iov_len;
		n = conn_xp_writev(c, iov, cnt);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(c, CONN_CLOSE_RESET);
			break;
		}
		conn_sent(c, (size_t)n);
		if ((size_t)n < want)
			break;
	}
	conn_flush_done(c);
}

void
conn_queue_flush(struct conn *c)
{
	if (c->flags & CONN_F_FLUSH_QUEUED)
		return;
	c->flags |= CONN_F_FLUSH_QUEUED;
	c->flush_next = set_of(c)->flush_list;
	set_of(c)->flush_list = c;
}

bool
conn_write(struct conn *c, const void *p, size_t n)
{
	const struct limits *lim = &c->r->cf->limits;

	if (c->flags & CONN_F_CLOSING)
		return false;
	outq_append(&c->out, &set_of(c)->pool, p, n);
	if (c->out.bytes > lim->output_limit) {
		conn_close(c, CONN_CLOSE_SLOW);
		return false;
	}
	if (!(c->flags & CONN_F_CORK))
		conn_queue_flush(c);
	return true;
}

bool
conn_write_now(struct conn *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	ssize_t w;

	if (c->out.bytes == 0 && !(c->flags & CONN_F_CLOSING)) {
		struct iovec iov = { .iov_base = (void *)b, .iov_len = n };

		w = conn_xp_writev(c, &iov, 1);
		if (w > 0) {
			counter_add(&c->r->counters, COUNTER_BYTES_OUT,
			    (uint64_t)w);
			b += w;
			n -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			conn_close(c, CONN_CLOSE_RESET);
			return false;
		}
		if (n == 0)
			return true;
	}
	return conn_write(c, b, n);
}

bool
conn_reply(struct conn *c, const void *p, size_t n)
{
	/*
	 * The answer to a batched read (2 KiB at most) goes with the turn's
	 * batched writes; a bigger one from a plain read goes now, so that
	 * it never sits whole in the queue against output_limit.
	 */
	if (set_of(c)->batch != NULL && set_of(c)->batch->reading)
		return conn_write(c, p, n);
	return conn_write_now(c, p, n);
}

static struct conn *
conn_flush_pop(struct conn_set *set)
{
	struct conn *c = set->flush_list;

	if (c != NULL) {
		set->flush_list = c->flush_next;
		c->flush_next = NULL;
		c->flags &= ~CONN_F_FLUSH_QUEUED;
	}
	return c;
}

/*
 * Runs the n requests prepared for b (tags 0..n-1) and puts each result in
 * b->res; a request the ring did not run keeps CONN_BATCH_NONE, set by
 * the caller, and is then done with plain system calls.
 */
static void
conn_batch_run(struct conn_set *set, struct conn_batch *b, uint32_t n)
{
	uint64_t tag;
	int32_t res;

	uring_run(&set->ring);
	while (uring_next(&set->ring, &tag, &res))
		if (tag < n)
			b->res[tag] = res;
}

/* What one batched sendmsg did for c: res bytes of want, or -errno. */
static void
conn_write_done(struct conn *c, int32_t res, size_t want)
{
	bool more = res > 0 && (size_t)res == want && c->out.bytes > want;

	if (res > 0)
		conn_sent(c, (size_t)res);
	if (res == CONN_BATCH_NONE || more) {
		conn_flush(c);		/* not run, or more to send */
		return;
	}
	if (res < 0 && res != -EAGAIN && res != -EINTR)
		conn_close(c, CONN_CLOSE_RESET);
	conn_flush_done(c);
}

/*
 * One batch of the flush list: the first sendmsg of each connection, up to
 * CONN_BATCH of them, in one system call; what one call does not take
 * (more queued than CONN_BATCH_IOV chunks) goes by conn_flush, and so
 * does a connection whose transport cannot join a batch.
 */
static void
conn_write_batch(struct conn_set *set, struct conn_batch *b)
{
	uint32_t n = 0;
	struct conn *c;

	while (n < CONN_BATCH && uring_room(&set->ring) > 0 &&
	    (c = conn_flush_pop(set)) != NULL) {
		int cnt;

		if (c->out.bytes == 0 || (c->flags & CONN_F_CLOSING) ||
		    !c->xp->ops->batchable || c->xp->ops->batch_write == NULL) {
			conn_flush(c);
			continue;
		}
		cnt = outq_iov(&c->out, b->iov[n], CONN_BATCH_IOV);
		b->want[n] = 0;
		for (int i = 0; i < cnt; i++)
			b->want[n] += b->iov[n][i].iov_len;
		memset(&b->msg[n], 0, sizeof(b->msg[n]));
		b->msg[n].msg_iov = b->iov[n];
		b->msg[n].msg_iovlen = (size_t)cnt;
		b->wconn[n] = c;
		b->res[n] = CONN_BATCH_NONE;
		c->xp->ops->batch_write(c, &set->ring, &b->msg[n], n);
		n++;
	}
	conn_batch_run(set, b, n);
	for (uint32_t i = 0; i < n; i++)
		conn_write_done(b->wconn[i], b->res[i], b->want[i]);
}

/* Sends what the turn queued. */
void
conn_flush_queued(struct conn_set *set)
{
	struct conn *c;

	if (set->batch != NULL) {
		while (set->flush_list != NULL)
			conn_write_batch(set, set->batch);
		return;
	}
	while ((c = conn_flush_pop(set)) != NULL)
		conn_flush(c);
}

void
conn_close(struct conn *c, enum conn_close_reason reason)
{
	struct conn_set *set = set_of(c);

	if (c->flags & CONN_F_CLOSING)
		return;
	c->flags |= CONN_F_CLOSING;
	c->close_reason = (uint8_t)reason;
	/* Off the activity list and onto the closing list. */
	lru_unlink(set, c);
	c->lru_next = set->closing;
	set->closing = c;
}

void
conn_close_after_flush(struct conn *c, enum conn_close_reason reason)
{
	if (c->flags & (CONN_F_CLOSING | CONN_F_DRAIN))
		return;
	c->flags |= CONN_F_DRAIN;
	c->drain_reason = (uint8_t)reason;
	if (c->out.bytes == 0 && !conn_owes_answers(c))
		conn_linger(c);
	else
		conn_update_interest(c);
}

/*
 * Feeds whole messages at p to the protocol; returns the bytes consumed.
 * Stops while the output is over the high watermark: one read can hold
 * hundreds of requests (pipelined GET /metrics, each answered with KiBs),
 * and answering all of them at once would pass output_limit however fast
 * the client reads. What is left is kept (CONN_F_BACKLOG) and handled once
 * the output has drained.
 */
static size_t
conn_frames(struct conn *c, const uint8_t *p, size_t n)
{
	const struct limits *lim = &c->r->cf->limits;
	size_t off = 0;

	c->flags &= ~CONN_F_BACKLOG;
	while (off < n && !conn_is_closing(c) && !(c->flags & CONN_F_HELD)) {
		ssize_t len;

		if (c->out.bytes >= lim->output_high_watermark) {
			c->flags |= CONN_F_BACKLOG;
			break;
		}
		len = c->proto->frame_len(p + off, n - off, lim);
		if (len == 0)
			break;
		if (len < 0) {
			conn_close(c, CONN_CLOSE_PROTOCOL);
			break;
		}
		counter_add(&c->r->counters, COUNTER_MESSAGES, 1);
		if (c->proto->messages_counter != 0)
			counter_add(&c->r->counters,
			    c->proto->messages_counter, 1);
		if (c->proto->on_message(c, p + off, (size_t)len) < 0)
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
		off += (size_t)len;
	}
	return off;
}

/* Handles n bytes just read; keeps an unfinished message for later. */
void
conn_input(struct conn *c, const uint8_t *p, size_t n)
{
	size_t used;

	c->flags |= CONN_F_CORK;
	if (c->in == NULL) {
		used = conn_frames(c, p, n);
		if (used < n && !conn_is_closing(c)) {
			c->in = buf_new();
			buf_append(c->in, p + used, n - used);
		}
	} else {
		if (n > 0)
			buf_append(c->in, p, n);
		used = conn_frames(c, buf_head(c->in), c->in->len);
		buf_consume(c->in, used);
	}
	c->flags &= ~CONN_F_CORK;
	if (c->in != NULL && (c->in->len == 0 || conn_is_closing(c))) {
		buf_free(c->in);
		c->in = NULL;
	}
	if (c->in != NULL && c->in->len > CONN_INPUT_MAX)
		conn_close(c, CONN_CLOSE_PROTOCOL);
}

static bool
conn_can_read(const struct conn *c)
{
	return !(c->flags & (CONN_F_CLOSING | CONN_F_DRAIN | CONN_F_PAUSED |
	    CONN_F_HELD | CONN_F_EOF | CONN_F_BACKLOG));
}

size_t
conn_input_pending(const struct conn *c)
{
	if (c->flags & CONN_F_BACKLOG)
		return 0;
	return c->in != NULL ? c->in->len : 0;
}

/* Whether c's kept messages may be handled now: its output has room. */
bool
conn_backlog_ready(const struct conn *c)
{
	return (c->flags & CONN_F_BACKLOG) && !(c->flags & (CONN_F_CLOSING |
	    CONN_F_DRAIN | CONN_F_PAUSED | CONN_F_HELD)) &&
	    c->out.bytes < c->r->cf->limits.output_high_watermark;
}

bool
conn_can_take(const struct conn *c)
{
	return !conn_is_closing(c) && !(c->flags & CONN_F_PAUSED) &&
	    c->out.bytes < c->r->cf->limits.output_high_watermark;
}

bool
conn_is_held(const struct conn *c)
{
	return (c->flags & CONN_F_HELD) != 0;
}

/* Whether the transport holds input the socket will not announce. */
bool
conn_xp_pending(struct conn *c)
{
	return c->xp->ops->has_pending != NULL && conn_can_read(c) &&
	    c->xp->ops->has_pending(c);
}

/*
 * After a read or a flush: if the transport still holds input, or kept
 * messages may now be handled, see to c again before the reactor sleeps:
 * neither is announced by the socket.
 */
static void
conn_check_pending(struct conn *c)
{
	struct conn_set *set;

	if ((c->flags & CONN_F_PENDING) ||
	    (!conn_backlog_ready(c) && !conn_xp_pending(c)))
		return;
	set = set_of(c);
	if (set->npending == set->pending_cap) {
		set->pending_cap = set->pending_cap ? set->pending_cap * 2 : 16;
		set->pending = xrealloc(set->pending,
		    set->pending_cap * sizeof(*set->pending));
	}
	c->flags |= CONN_F_PENDING;
	set->pending[set->npending++] = c;
}

void
conn_hold(struct conn *c)
{
	c->flags |= CONN_F_HELD;
}

void
conn_release(struct conn *c)
{
	if (!(c->flags & CONN_F_HELD))
		return;
	c->flags &= ~CONN_F_HELD;
	/* Inside c's own input handling the frame loop simply goes on. */
	if (c->flags & CONN_F_CORK)
		return;
	/* Input kept while held is handled now, not at the next read. */
	if (c->in != NULL && !conn_is_closing(c))
		conn_input(c, NULL, 0);
	if (!(c->flags & CONN_F_CLOSING)) {
		conn_queue_flush(c);
		conn_update_interest(c);
		/* And what the transport holds: the socket will not say. */
		conn_check_pending(c);
	}
}

static void
conn_on_eof(struct conn *c)
{
	c->flags |= CONN_F_EOF;
	if (c->proto->on_eof != NULL && c->proto->on_eof(c))
		return;		/* it closes once its answers are out */
	conn_close_after_flush(c, CONN_CLOSE_PEER);
}

void
conn_read(struct conn *c)
{
	struct conn_set *set = set_of(c);
	ssize_t n;

	for (int budget = CONN_READ_BUDGET; budget > 0 && conn_can_read(c);
	    budget--) {
		n = conn_xp_read(c, set->scratch, CONN_SCRATCH_SIZE);
		if (n > 0) {
			counter_add(&c->r->counters, COUNTER_BYTES_IN,
			    (uint64_t)n);
			conn_touch(c);
			conn_input(c, set->scratch, (size_t)n);
			conn_flush(c);
			/* A short read most likely emptied the socket. */
			if (n < CONN_SCRATCH_SIZE)
				break;
		} else if (n == 0) {
			conn_on_eof(c);
			break;
		} else {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(c, CONN_CLOSE_RESET);
			break;
		}
	}
	conn_check_pending(c);
}

/* Reads c now, or with the turn's batch. */
static void
conn_read_soon(struct conn *c)
{
	struct conn_batch *b = set_of(c)->batch;

	if (b == NULL || b->nread == CONN_BATCH || !c->xp->ops->batchable ||
	    c->xp->ops->batch_read == NULL)
		conn_read(c);
	else
		b->rconn[b->nread++] = c;
}

/* What the batched read of c gave: res bytes at p, or -errno. */
static void
conn_read_done(struct conn *c, const uint8_t *p, int32_t res)
{
	if (res == CONN_BATCH_NONE) {
		/* Not read: unreadable when the batch went, or no ring. */
		if (conn_can_read(c))
			conn_read(c);
	} else if (c->flags & CONN_F_CLOSING) {
		/* Closed since, by another's input: this input goes too. */
		return;
	} else if (res > 0) {
		counter_add(&c->r->counters, COUNTER_BYTES_IN, (uint64_t)res);
		conn_touch(c);
		set_of(c)->batch->reading = true;
		conn_input(c, p, (size_t)res);
		set_of(c)->batch->reading = false;
		conn_queue_flush(c);
		/*
		 * A full buffer: more may be waiting, for plain reads. Their
		 * answers go at once (conn_reply), after this one's.
		 */
		if (res == CONN_BATCH_READ && conn_can_read(c)) {
			conn_flush(c);
			if (conn_can_read(c))
				conn_read(c);
		}
	} else if (res == 0) {
		conn_on_eof(c);
	} else if (res != -EAGAIN && res != -EINTR) {
		conn_close(c, CONN_CLOSE_RESET);
	}
	if (!(c->flags & CONN_F_CLOSING))
		conn_update_interest(c);
}

/* The reads the turn's handlers asked for, all in one system call. */
void
conn_read_batch(struct conn_set *set)
{
	struct conn_batch *b = set->batch;
	uint32_t n;

	if (b == NULL || b->nread == 0)
		return;
	n = b->nread;
	b->nread = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct conn *c = b->rconn[i];

		b->res[i] = CONN_BATCH_NONE;
		if (conn_can_read(c) && uring_room(&set->ring) > 0)
			c->xp->ops->batch_read(c, &set->ring, b->in[i],
			    CONN_BATCH_READ, i);
	}
	conn_batch_run(set, b, n);
	for (uint32_t i = 0; i < n; i++)
		conn_read_done(b->rconn[i], b->in[i], b->res[i]);
}

/*
 * Reads and drops input until nothing more is there for now: whether there
 * was none, some, or the peer has closed (or the socket failed).
 */
enum conn_discarded {
	DISCARD_NONE,
	DISCARD_SOME,
	DISCARD_END,
};

static enum conn_discarded
conn_discard(struct conn *c)
{
	enum conn_discarded d = DISCARD_NONE;

	for (int budget = CONN_READ_BUDGET; budget > 0; budget--) {
		ssize_t n = conn_xp_read(c, set_of(c)->scratch,
		    CONN_SCRATCH_SIZE);

		if (n == 0)
			return DISCARD_END;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? d :
			    DISCARD_END;
		d = DISCARD_SOME;
	}
	return d;
}

/*
 * Drops a lingering connection's input; whether it may close now: the
 * peer has closed, or it has everything we sent and has sent nothing for
 * CONN_LINGER_QUIET_MS. (Input that arrives after the close makes Linux
 * answer with a reset, and the peer's kernel then drops what its client
 * had not read yet.)
 */
bool
conn_linger_done(struct conn *c)
{
	uint32_t now = (uint32_t)c->r->now_ms;

	switch (conn_discard(c)) {
	case DISCARD_END:
		return true;
	case DISCARD_SOME:
		c->linger_input = now;
		return false;
	default:
		return now - c->linger_input >= CONN_LINGER_QUIET_MS &&
		    c->xp->ops->unsent(c) == 0;
	}
}

/*
 * All output is written: close gracefully. Closing with unread input, or
 * with data still in the kernel's send queue, makes Linux send a reset
 * and throw that queue away: the client would lose replies it was owed.
 * So drop the input, and unless the peer has taken everything and is not
 * sending, half-close and keep dropping input until it has and is not, or
 * closes too (lingering close), bounded in time.
 */
static void
conn_linger(struct conn *c)
{
	if (c->flags & (CONN_F_LINGER | CONN_F_CLOSING))
		return;
	/* After the peer's EOF there is no input left to turn close into RST. */
	if ((c->flags & CONN_F_EOF) || c->drain_reason == CONN_CLOSE_PEER) {
		conn_close(c, c->drain_reason);
		return;
	}
	/*
	 * Nothing there and everything taken: a client that is not sending,
	 * the usual case, is closed at once.
	 */
	c->linger_input = (uint32_t)c->r->now_ms - CONN_LINGER_QUIET_MS;
	if (conn_linger_done(c) || c->xp->ops->shutdown(c) < 0) {
		conn_close(c, c->drain_reason);
		return;
	}
	c->flags |= CONN_F_LINGER;
	c->last_active = c->r->now;
	set_of(c)->nlinger++;
	conn_update_interest(c);
}

static void
conn_on_io(struct reactor *r, struct reactor_io *io, uint32_t events)
{
	struct conn *c = (struct conn *)((char *)io - offsetof(struct conn, io));

	(void)r;
	if (c->flags & CONN_F_CLOSING)
		return;
	if (c->flags & CONN_F_LINGER) {
		if (conn_linger_done(c))
			conn_close(c, c->drain_reason);
		return;
	}
	if (events & EPOLLOUT)
		conn_flush(c);
	/*
	 * Writable with nothing to send: the transport asked for it (a TLS
	 * handshake to move on), and a read moves it.
	 */
	if ((events & EPOLLOUT) && c->out.bytes == 0 &&
	    c->xp->ops->events != NULL && conn_can_read(c))
		events |= EPOLLIN;
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && conn_can_read(c))
		conn_read_soon(c);
	else if (events & (EPOLLHUP | EPOLLERR))
		conn_close(c, CONN_CLOSE_RESET);
	if (!(c->flags & CONN_F_CLOSING))
		conn_update_interest(c);
}

bool
conn_log_allowed(struct conn *c)
{
	/* Below info these records are not written: nothing to count. */
	if (log_get_level() < LOG_LEVEL_INFO)
		return false;
	return log_is_debug() ||
	    log_limit_take(&set_of(c)->client_log, c->r->now, "reactor", c->r->id);
}

static void
conn_log_close(struct conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (c->close_reason != CONN_CLOSE_SLOW &&
	    c->close_reason != CONN_CLOSE_PROTOCOL && !log_is_debug())
		return;
	if (!conn_log_allowed(c))
		return;
	if (getpeername(c->io.fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
			port = ntohs(s4->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
			port = ntohs(s6->sin6_port);
		}
	}
	if (c->close_reason == CONN_CLOSE_SLOW ||
	    c->close_reason == CONN_CLOSE_PROTOCOL)
		log_info("conn=%u.%u peer=%s:%u closed reason=%s pending=%zu",
		    c->r->id, c->slot, host, port,
		    conn_close_reason_name(c->close_reason), c->out.bytes);
	else
		log_debug("conn=%u.%u peer=%s:%u closed reason=%s", c->r->id,
		    c->slot, host, port,
		    conn_close_reason_name(c->close_reason));
}

uint64_t
conn_out_acked(struct conn *c)
{
	size_t q = c->xp->ops->unsent != NULL ? c->xp->ops->unsent(c) : 0;

	/* Once half-closed, the kernel counts our FIN in the queue. */
	if (q > 0 && (c->flags & CONN_F_LINGER))
		q--;
	if (q == 0)
		c->out_acked = c->out_sent;
	else if ((q += c->xp->ops->ack_slack) < c->out_sent &&
	    c->out_sent - q > c->out_acked)
		c->out_acked = c->out_sent - q;
	return c->out_acked;
}

/* The first poll soon after; later ones slower while nothing moves. */
#define CONN_ACK_POLL_MIN_MS	1
#define CONN_ACK_POLL_MAX_MS	100

void
conn_watch_acked(struct conn *c)
{
	struct conn_set *set = set_of(c);

	if (c->flags & (CONN_F_ACKWAIT | CONN_F_CLOSING))
		return;
	if (set->nackwait == set->ackwait_cap) {
		set->ackwait_cap = set->ackwait_cap ? set->ackwait_cap * 2 : 16;
		set->ackwait = xrealloc(set->ackwait,
		    set->ackwait_cap * sizeof(*set->ackwait));
	}
	/*
	 * A new list: polled soon (the reactor may be about to sleep its
	 * full tick). Not while a poll runs: the poll sets its interval.
	 */
	if (set->nackwait == 0 && !set->ack_polling) {
		set->ack_poll_ms = CONN_ACK_POLL_MIN_MS;
		set->ack_polled_ms = c->r->now_ms;
		reactor_wake_within(c->r, CONN_ACK_POLL_MIN_MS);
	}
	c->flags |= CONN_F_ACKWAIT;
	set->ackwait[set->nackwait++] = c;
}

/*
 * Before the reactor sleeps: once the poll interval has passed, each
 * watched connection's on_sent looks again (and asks again if it still
 * waits); the interval doubles while no acknowledgement moves. The reactor
 * wakes for the next poll.
 */
void
conn_poll_acked(struct conn_set *set)
{
	uint64_t now = set->r->now_ms, due;

	if (now - set->ack_polled_ms >= set->ack_poll_ms) {
		struct conn **list = set->ackwait;
		uint32_t n = set->nackwait;

		set->ackwait = NULL;
		set->nackwait = set->ackwait_cap = 0;
		bool moved = false;

		set->ack_polling = true;
		for (uint32_t i = 0; i < n; i++) {
			struct conn *c = list[i];
			uint64_t before = c->out_acked;

			c->flags &= ~CONN_F_ACKWAIT;
			if (!(c->flags & CONN_F_CLOSING) &&
			    c->proto->on_sent != NULL)
				c->proto->on_sent(c);
			moved |= c->out_acked != before;
		}
		set->ack_polling = false;
		free(list);
		if (moved)
			set->ack_poll_ms = CONN_ACK_POLL_MIN_MS;
		else if (set->ack_poll_ms < CONN_ACK_POLL_MAX_MS)
			set->ack_poll_ms *= 2;
		set->ack_polled_ms = now;
	}
	if (set->nackwait == 0)
		return;
	due = set->ack_polled_ms + set->ack_poll_ms;
	reactor_wake_within(set->r, due > now ? (int)(due - now) : 0);
}

/* Takes c off the list of connections whose transport holds input. */
static void
pending_unlink(struct conn_set *set, struct conn *c)
{
	for (uint32_t i = 0; i < set->npending; i++)
		if (set->pending[i] == c) {
			set->pending[i] = set->pending[--set->npending];
			break;
		}
	c->flags &= ~CONN_F_PENDING;
}

static void
ackwait_unlink(struct conn_set *set, struct conn *c)
{
	for (uint32_t i = 0; i < set->nackwait; i++)
		if (set->ackwait[i] == c) {
			set->ackwait[i] = set->ackwait[--set->nackwait];
			break;
		}
	c->flags &= ~CONN_F_ACKWAIT;
}

void
conn_free(struct conn *c)
{
	struct conn_set *set = set_of(c);

	conn_log_close(c);
	if (c->proto->on_close != NULL)
		c->proto->on_close(c);
	if (c->xp->ops->close != NULL)
		c->xp->ops->close(c);
	if (c->flags & CONN_F_PENDING)
		pending_unlink(set, c);
	if (c->flags & CONN_F_ACKWAIT)
		ackwait_unlink(set, c);
	/* Closing the fd also takes it out of the epoll set. */
	close(c->io.fd);
	slot_del(set, c->slot);
	buf_free(c->in);
	outq_clear(&c->out, &set->pool);
	if (c->flags & CONN_F_PAUSED)
		set->npaused--;
	if (c->flags & CONN_F_LINGER)
		set->nlinger--;
	counter_add(&c->r->counters, COUNTER_CONNS, (uint64_t)-1);
	counter_add(&c->r->counters, close_counter[c->close_reason], 1);
	if (c->listener != CONN_NO_LISTENER)
		counter_bump(&c->r->detail.conns[c->listener], (uint64_t)-1);
	atomic_fetch_sub(&conn_live, 1);
	iplimit_release(c->ip);
	free(c);
}
