/* conn.c: generic connection I/O: reads, framing, queued writes, watermarks, close. */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "config.h"
#include "iplimit.h"
#include "log.h"
#include "proto.h"

#define CONN_READ_BUDGET	16	/* reads per wakeup, then others' turn */
#define CONN_IOV_MAX		64
/* Input held for an unfinished message, whatever the protocol allows. */
#define CONN_INPUT_MAX		((size_t)(1 << 20) + 65536)

atomic_uint conn_live;

struct handoff {
	struct reactor_task task;
	int	fd;
	const struct proto *proto;
	struct iplimit_entry *ip;
};

static void conn_on_io(struct reactor *r, struct reactor_io *io,
	    uint32_t events);
static void conn_linger(struct conn *c);

static void
lru_unlink(struct reactor *r, struct conn *c)
{
	if (c->lru_prev != NULL)
		c->lru_prev->lru_next = c->lru_next;
	else
		r->lru_head = c->lru_next;
	if (c->lru_next != NULL)
		c->lru_next->lru_prev = c->lru_prev;
	else
		r->lru_tail = c->lru_prev;
	c->lru_prev = c->lru_next = NULL;
}

static void
lru_append(struct reactor *r, struct conn *c)
{
	c->lru_next = NULL;
	c->lru_prev = r->lru_tail;
	if (r->lru_tail != NULL)
		r->lru_tail->lru_next = c;
	else
		r->lru_head = c;
	r->lru_tail = c;
}

/* Marks activity; the list stays ordered by last_active. */
static void
conn_touch(struct conn *c)
{
	struct reactor *r = c->r;

	if (c->last_active == r->now)
		return;
	c->last_active = r->now;
	if (r->lru_tail != c) {
		lru_unlink(r, c);
		lru_append(r, c);
	}
}

struct conn *
conn_new(struct reactor *r, int fd, const struct proto *proto)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->r = r;
	c->proto = proto;
	c->io.fd = fd;
	c->io.fn = conn_on_io;
	c->last_active = r->now;
	if (reactor_add_io(r, &c->io, EPOLLIN) < 0) {
		log_warn("reactor=%u cannot watch fd %d", r->id, fd);
		close(fd);
		atomic_fetch_sub(&conn_live, 1);
		free(c);
		return NULL;
	}
	c->slot = reactor_slot_add(r, c);
	c->gen = r->gens[c->slot];
	lru_append(r, c);
	REACTOR_STAT_ADD(r->stats.conns, 1);
	REACTOR_STAT_ADD(r->stats.accepted, 1);
	if (proto->on_open != NULL)
		proto->on_open(c);
	return c;
}

static void
handoff_task(struct reactor *r, void *arg)
{
	struct handoff *h = arg;

	struct conn *c = NULL;

	if (!r->stopping)
		c = conn_new(r, h->fd, h->proto);
	else {
		close(h->fd);
		atomic_fetch_sub(&conn_live, 1);
	}
	if (c != NULL)
		c->ip = h->ip;
	else
		iplimit_release(h->ip);
	free(h);
}

void
conn_handoff(struct reactor *r, int fd, const struct proto *proto,
    struct iplimit_entry *ip)
{
	struct handoff *h = xmalloc(sizeof(*h));

	h->fd = fd;
	h->proto = proto;
	h->ip = ip;
	h->task.fn = handoff_task;
	h->task.arg = h;
	reactor_post_task(r, &h->task);
}

static void
conn_update_interest(struct conn *c)
{
	const struct limits *lim = &c->r->cf->limits;
	uint32_t events = 0;

	if (c->flags & CONN_F_CLOSING)
		return;
	if (!(c->flags & CONN_F_PAUSED) &&
	    c->out.bytes >= lim->output_high_watermark) {
		c->flags |= CONN_F_PAUSED;
		c->r->npaused++;
		/* The stall timeout counts from here at the earliest. */
		conn_touch(c);
	} else if ((c->flags & CONN_F_PAUSED) &&
	    c->out.bytes <= lim->output_high_watermark / 2) {
		c->flags &= ~CONN_F_PAUSED;
		c->r->npaused--;
	}
	if (!(c->flags & (CONN_F_PAUSED | CONN_F_DRAIN | CONN_F_HELD |
	    CONN_F_EOF)) || (c->flags & CONN_F_LINGER))
		events |= EPOLLIN;
	/*
	 * Output queued for this turn's flush may well all go: let the flush
	 * decide, rather than arm EPOLLOUT now and disarm it after.
	 */
	if (c->flags & CONN_F_FLUSH_QUEUED)
		events |= c->io.events & EPOLLOUT;
	else if (c->out.bytes > 0)
		events |= EPOLLOUT;
	if (reactor_mod_io(c->r, &c->io, events) < 0)
		conn_close(c, CONN_CLOSE_RESET);
}

/* Answers to commands already read are still to come to c. */
static bool
conn_owes_answers(const struct conn *c)
{
	return c->proto->owes_answers != NULL && c->proto->owes_answers(c);
}

/* After a write: a draining connection all sent lingers; interest. */
static void
conn_flush_done(struct conn *c)
{
	if (c->out.bytes == 0 && (c->flags & CONN_F_DRAIN) &&
	    !conn_owes_answers(c))
		conn_linger(c);
	conn_update_interest(c);
}

/* Accounts n bytes sent. */
static void
conn_sent(struct conn *c, size_t n)
{
	outq_consume(&c->out, &c->r->pool, n);
	REACTOR_STAT_ADD(c->r->stats.bytes_out, (uint64_t)n);
	conn_touch(c);
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
		n = writev(c->io.fd, iov, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
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

static void
conn_queue_flush(struct conn *c)
{
	if (c->flags & CONN_F_FLUSH_QUEUED)
		return;
	c->flags |= CONN_F_FLUSH_QUEUED;
	c->flush_next = c->r->flush_list;
	c->r->flush_list = c;
}

bool
conn_write(struct conn *c, const void *p, size_t n)
{
	const struct limits *lim = &c->r->cf->limits;

	if (c->flags & CONN_F_CLOSING)
		return false;
	outq_append(&c->out, &c->r->pool, p, n);
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
		w = write(c->io.fd, b, n);
		if (w > 0) {
			REACTOR_STAT_ADD(c->r->stats.bytes_out, (uint64_t)w);
			b += w;
			n -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR) {
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
	if (c->r->batch != NULL && c->r->batch->reading)
		return conn_write(c, p, n);
	return conn_write_now(c, p, n);
}

static struct conn *
conn_flush_pop(struct reactor *r)
{
	struct conn *c = r->flush_list;

	if (c != NULL) {
		r->flush_list = c->flush_next;
		c->flush_next = NULL;
		c->flags &= ~CONN_F_FLUSH_QUEUED;
	}
	return c;
}

/*
 * Runs the n requests prepared for b (tags 0..n-1) and puts each result in
 * b->res; a request the ring did not run keeps REACTOR_BATCH_NONE, set by
 * the caller, and is then done with plain system calls.
 */
static void
conn_batch_run(struct reactor *r, struct reactor_batch *b, uint32_t n)
{
	uint64_t tag;
	int32_t res;

	uring_run(&r->ring);
	while (uring_next(&r->ring, &tag, &res))
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
	if (res == REACTOR_BATCH_NONE || more) {
		conn_flush(c);		/* not run, or more to send */
		return;
	}
	if (res < 0 && res != -EAGAIN && res != -EINTR)
		conn_close(c, CONN_CLOSE_RESET);
	conn_flush_done(c);
}

/*
 * One batch of the flush list: the first sendmsg of each connection, up to
 * REACTOR_BATCH of them, in one system call; what one call does not take
 * (more queued than REACTOR_BATCH_IOV chunks) goes by conn_flush.
 */
static void
conn_write_batch(struct reactor *r, struct reactor_batch *b)
{
	uint32_t n = 0;
	struct conn *c;

	while (n < REACTOR_BATCH && uring_room(&r->ring) > 0 &&
	    (c = conn_flush_pop(r)) != NULL) {
		int cnt;

		if (c->out.bytes == 0 || (c->flags & CONN_F_CLOSING)) {
			conn_flush(c);
			continue;
		}
		cnt = outq_iov(&c->out, b->iov[n], REACTOR_BATCH_IOV);
		b->want[n] = 0;
		for (int i = 0; i < cnt; i++)
			b->want[n] += b->iov[n][i].iov_len;
		memset(&b->msg[n], 0, sizeof(b->msg[n]));
		b->msg[n].msg_iov = b->iov[n];
		b->msg[n].msg_iovlen = (size_t)cnt;
		b->wconn[n] = c;
		b->res[n] = REACTOR_BATCH_NONE;
		uring_prep_sendmsg(&r->ring, c->io.fd, &b->msg[n], n);
		n++;
	}
	conn_batch_run(r, b, n);
	for (uint32_t i = 0; i < n; i++)
		conn_write_done(b->wconn[i], b->res[i], b->want[i]);
}

void
conn_flush_queued(struct reactor *r)
{
	struct conn *c;

	if (r->batch != NULL) {
		while (r->flush_list != NULL)
			conn_write_batch(r, r->batch);
		return;
	}
	while ((c = conn_flush_pop(r)) != NULL)
		conn_flush(c);
}

void
conn_close(struct conn *c, enum conn_close_reason reason)
{
	struct reactor *r = c->r;

	if (c->flags & CONN_F_CLOSING)
		return;
	c->flags |= CONN_F_CLOSING;
	c->close_reason = (uint8_t)reason;
	/* Off the activity list and onto the closing list. */
	lru_unlink(r, c);
	c->lru_next = r->closing;
	r->closing = c;
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

/* Feeds whole messages at p to the protocol; returns the bytes consumed. */
static size_t
conn_frames(struct conn *c, const uint8_t *p, size_t n)
{
	const struct limits *lim = &c->r->cf->limits;
	size_t off = 0;

	while (off < n && !conn_is_closing(c) && !(c->flags & CONN_F_HELD)) {
		ssize_t len = c->proto->frame_len(p + off, n - off, lim);

		if (len == 0)
			break;
		if (len < 0) {
			conn_close(c, CONN_CLOSE_PROTOCOL);
			break;
		}
		REACTOR_STAT_ADD(c->r->stats.messages, 1);
		if (c->proto->on_message(c, p + off, (size_t)len) < 0)
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
		off += (size_t)len;
	}
	return off;
}

/* Handles n bytes just read; keeps an unfinished message for later. */
static void
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
	    CONN_F_HELD | CONN_F_EOF));
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

static void
conn_read(struct conn *c)
{
	struct reactor *r = c->r;
	ssize_t n;

	for (int budget = CONN_READ_BUDGET; budget > 0 && conn_can_read(c);
	    budget--) {
		n = read(c->io.fd, r->scratch, REACTOR_SCRATCH_SIZE);
		if (n > 0) {
			REACTOR_STAT_ADD(r->stats.bytes_in, (uint64_t)n);
			conn_touch(c);
			conn_input(c, r->scratch, (size_t)n);
			conn_flush(c);
			/* A short read most likely emptied the socket. */
			if (n < REACTOR_SCRATCH_SIZE)
				break;
		} else if (n == 0) {
			conn_on_eof(c);
			break;
		} else if (errno != EINTR) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(c, CONN_CLOSE_RESET);
			break;
		}
	}
}

/* Reads c now, or with the turn's batch. */
static void
conn_read_soon(struct conn *c)
{
	struct reactor_batch *b = c->r->batch;

	if (b == NULL || b->nread == REACTOR_BATCH)
		conn_read(c);
	else
		b->rconn[b->nread++] = c;
}

/* What the batched read of c gave: res bytes at p, or -errno. */
static void
conn_read_done(struct conn *c, const uint8_t *p, int32_t res)
{
	if (res == REACTOR_BATCH_NONE) {
		/* Not read: unreadable when the batch went, or no ring. */
		if (conn_can_read(c))
			conn_read(c);
	} else if (c->flags & CONN_F_CLOSING) {
		/* Closed since, by another's input: this input goes too. */
		return;
	} else if (res > 0) {
		REACTOR_STAT_ADD(c->r->stats.bytes_in, (uint64_t)res);
		conn_touch(c);
		c->r->batch->reading = true;
		conn_input(c, p, (size_t)res);
		c->r->batch->reading = false;
		conn_queue_flush(c);
		/*
		 * A full buffer: more may be waiting, for plain reads. Their
		 * answers go at once (conn_reply), after this one's.
		 */
		if (res == REACTOR_BATCH_READ && conn_can_read(c)) {
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

void
conn_read_batch(struct reactor *r)
{
	struct reactor_batch *b = r->batch;
	uint32_t n;

	if (b == NULL || b->nread == 0)
		return;
	n = b->nread;
	b->nread = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct conn *c = b->rconn[i];

		b->res[i] = REACTOR_BATCH_NONE;
		if (conn_can_read(c) && uring_room(&r->ring) > 0)
			uring_prep_recv(&r->ring, c->io.fd, b->in[i],
			    REACTOR_BATCH_READ, i);
	}
	conn_batch_run(r, b, n);
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
		ssize_t n = read(c->io.fd, c->r->scratch, REACTOR_SCRATCH_SIZE);

		if (n == 0)
			return DISCARD_END;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? d :
			    DISCARD_END;
		}
		d = DISCARD_SOME;
	}
	return d;
}

/* Bytes we sent that the peer has not acknowledged yet. */
static int
conn_unacked(const struct conn *c)
{
	int n = 0;

	if (ioctl(c->io.fd, SIOCOUTQ, &n) < 0)
		return 0;
	return n;
}

/* A lingering client that sent nothing for this long has stopped. */
#define CONN_LINGER_QUIET_MS	200

/*
 * Drops a lingering connection's input; whether it may close now: the
 * peer has closed, or it has everything we sent and has sent nothing for
 * CONN_LINGER_QUIET_MS. (Input that arrives after the close makes Linux
 * answer with a reset, and the peer's kernel then drops what its client
 * had not read yet.)
 */
static bool
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
		    conn_unacked(c) == 0;
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
	if (conn_linger_done(c) || shutdown(c->io.fd, SHUT_WR) < 0) {
		conn_close(c, c->drain_reason);
		return;
	}
	c->flags |= CONN_F_LINGER;
	c->last_active = c->r->now;
	c->r->nlinger++;
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
	    log_limit_take(&c->r->client_log, c->r->now, "reactor", c->r->id);
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

static void
conn_free(struct conn *c)
{
	struct reactor *r = c->r;

	conn_log_close(c);
	if (c->proto->on_close != NULL)
		c->proto->on_close(c);
	/* Closing the fd also takes it out of the epoll set. */
	close(c->io.fd);
	reactor_slot_del(r, c->slot);
	buf_free(c->in);
	outq_clear(&c->out, &r->pool);
	if (c->flags & CONN_F_PAUSED)
		r->npaused--;
	if (c->flags & CONN_F_LINGER)
		r->nlinger--;
	REACTOR_STAT_ADD(r->stats.conns, -1);
	REACTOR_STAT_ADD(r->stats.closed[c->close_reason], 1);
	atomic_fetch_sub(&conn_live, 1);
	iplimit_release(c->ip);
	free(c);
}

void
conn_reap(struct reactor *r)
{
	struct conn *c;

	/*
	 * Flush first so that no connection being freed is still on the flush
	 * list; on_close may write to or close others, so loop until both
	 * lists are empty.
	 */
	for (;;) {
		conn_flush_queued(r);
		if ((c = r->closing) == NULL)
			break;
		r->closing = c->lru_next;
		conn_free(c);
	}
}

void
conn_sweep_idle(struct reactor *r, unsigned idle_timeout)
{
	struct conn *c;

	/*
	 * Times are whole seconds: a difference of idle_timeout may mean only
	 * a few milliseconds idle, so close only beyond it.
	 */
	while ((c = r->lru_head) != NULL &&
	    r->now - c->last_active > idle_timeout)
		conn_close(c, CONN_CLOSE_IDLE);
}

void
conn_tick_all(struct reactor *r)
{
	for (uint32_t i = 0; i < r->nslots; i++) {
		struct conn *c = r->slots[i];

		if (c != NULL && c->proto->on_tick != NULL &&
		    !conn_is_closing(c))
			c->proto->on_tick(c);
	}
}

void
conn_sweep_linger(struct reactor *r, unsigned timeout)
{
	for (uint32_t i = 0; i < r->nslots && r->nlinger > 0; i++) {
		struct conn *c = r->slots[i];

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

void
conn_sweep_stalled(struct reactor *r, unsigned timeout)
{
	for (uint32_t i = 0; i < r->nslots && r->npaused > 0; i++) {
		struct conn *c = r->slots[i];

		/* Paused connections are not read: activity means output. */
		if (c != NULL && (c->flags & CONN_F_PAUSED) &&
		    !(c->flags & CONN_F_CLOSING) &&
		    r->now - c->last_active > timeout)
			conn_close(c, CONN_CLOSE_SLOW);
	}
}

void
conn_shutdown_all(struct reactor *r)
{
	for (uint32_t i = 0; i < r->nslots; i++) {
		struct conn *c = r->slots[i];

		if (c != NULL && !(c->flags & CONN_F_CLOSING))
			conn_close_after_flush(c, CONN_CLOSE_SHUTDOWN);
	}
}

void
conn_close_all(struct reactor *r)
{
	for (uint32_t i = 0; i < r->nslots; i++) {
		struct conn *c = r->slots[i];

		if (c != NULL)
			conn_close(c, CONN_CLOSE_SHUTDOWN);
	}
	conn_reap(r);
}
