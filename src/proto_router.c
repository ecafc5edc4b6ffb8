/* proto_router.c: the router line protocol (LOGIN, SEND, MSG, RECEIPTS, RCPT, PING, QUIT). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "conn.h"
#include "deliver.h"
#include "proto.h"
#include "route.h"
#include "router_join.h"
#include "smpp_receipt.h"
#include "text.h"
#include "util.h"

/* Unanswered SENDs, and replies queued behind them, before input is held. */
#define ROUTER_MAX_PENDING	256
#define ROUTER_MAX_QUEUED	1024

/*
 * One reply in command order. A SEND routed to another reactor waits here
 * (done false) for its verdict; replies to later commands queue behind it.
 */
struct reply {
	struct reply *next;
	uint64_t id;
	bool	spare;		/* REPLY_ROOM: the reactor's spares take it */
	bool	done;
	bool	bye;		/* QUIT: close once this is written */
	bool	claim;		/* LOGIN awaiting the cluster's claim */
	struct msg *stored;	/* its MSG line's, from the store: tracked once
				   written (stored_wait), else handed back */
	size_t	len;
	char	text[];
};

/*
 * A message from the store whose MSG line is queued: once the socket has
 * taken the line (conn_out_sent reaches end) the store is told it is on
 * the wire, and sends the next; it leaves the store once the peer's TCP
 * has acknowledged the line (conn_out_acked reaches end). Written is not
 * enough: a line in the kernel's send queue is lost when the connection
 * is reset or the daemon killed.
 */
struct stored_wait {
	struct msg *m;
	uint64_t end;
};

struct router_sess {
	struct route_owner me;
	bool	logged_in;
	bool	skipping;	/* inside a line over max_line */
	bool	quitting;
	bool	eof;		/* the client half-closed: close when answered */
	bool	claiming;	/* LOGIN: the cluster is asked for addr */
	bool	receipts;	/* RECEIPTS ON: SENDs ask for RCPT lines */
	struct reply *head;
	struct reply *tail;
	unsigned npending;
	unsigned nqueued;
	struct stored_wait *sw;		/* ring, oldest at swhead */
	unsigned swhead;
	unsigned swlen;
	unsigned swwritten;		/* the first swlen told to be written */
	unsigned swcap;
	struct router_join *join;	/* SMPP parts waiting; NULL none */
	size_t	addrlen;
	char	addr[ROUTE_ADDR_MAX + 1];
};

static void
count_err(struct conn *c, enum counter_id e)
{
	counter_add(&c->r->counters, e, 1);
}

static struct router_sess *
sess_of(struct conn *c)
{
	if (c->pdata == NULL)
		c->pdata = xcalloc(1, sizeof(struct router_sess));
	return c->pdata;
}

/* Room for the longest verdict text when a reply waits for one. */
#define REPLY_ROOM	64

static struct reply *
reply_new(struct conn *c, const char *text, size_t len)
{
	struct reply *rp;

	/* One a SEND: the reactor keeps spares of the usual size. */
	if (len <= REPLY_ROOM) {
		rp = spares_get(&c->r->spares[REACTOR_SPARE_REPLY],
		    sizeof(*rp) + REPLY_ROOM);
		rp->spare = true;
	} else {
		rp = xcalloc(1, sizeof(*rp) + len);
	}
	memcpy(rp->text, text, len);
	rp->len = len;
	return rp;
}

static void
reply_free(struct conn *c, struct reply *rp)
{
	if (rp->spare)
		spares_put(&c->r->spares[REACTOR_SPARE_REPLY], rp);
	else
		free(rp);
}

static void
reply_append(struct router_sess *s, struct reply *rp)
{
	if (s->tail != NULL)
		s->tail->next = rp;
	else
		s->head = rp;
	s->tail = rp;
	s->nqueued++;
}

/* Holds input while too much is unanswered; releases it when it drains. */
static void
sess_update_hold(struct conn *c, struct router_sess *s)
{
	if (s->quitting)
		return;
	if (s->npending >= ROUTER_MAX_PENDING ||
	    s->nqueued >= ROUTER_MAX_QUEUED || s->claiming)
		conn_hold(c);
	else if (s->npending < ROUTER_MAX_PENDING / 2 &&
	    s->nqueued < ROUTER_MAX_QUEUED / 2)
		conn_release(c);
}

/* Sends a reply now, or queues it behind replies still awaited. */
static void
reply_emit(struct conn *c, const char *text, size_t len)
{
	struct router_sess *s = sess_of(c);

	if (s->head == NULL)
		conn_write(c, text, len);
	else {
		struct reply *rp = reply_new(c, text, len);

		rp->done = true;
		reply_append(s, rp);
		/* Bounded too: hold input once too much waits. */
		sess_update_hold(c, s);
	}
}

static void reply_printf(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
reply_printf(struct conn *c, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	reply_emit(c, line, (size_t)n);
}

/* "PONG <token>", the token whole: lines are bounded by max_line. */
static void
reply_pong(struct conn *c, const char *token)
{
	size_t n = strlen(token) + 6;	/* "PONG ", the token, LF */
	char small[256], *line = n < sizeof(small) ? small : xmalloc(n + 1);

	snprintf(line, n + 1, "PONG %s\n", token);
	reply_emit(c, line, n);
	if (line != small)
		free(line);
}

/* Writes the replies at the head of the queue that are ready. */
static void stored_wait_own(struct conn *c, struct router_sess *s,
    struct msg *m);

static void
sess_drain(struct conn *c, struct router_sess *s)
{
	struct reply *rp;

	while ((rp = s->head) != NULL && rp->done) {
		s->head = rp->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->nqueued--;
		conn_write(c, rp->text, rp->len);
		if (rp->stored != NULL)
			stored_wait_own(c, s, rp->stored);
		if (rp->bye)
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
		reply_free(c, rp);
	}
	sess_update_hold(c, s);
	/* Half-closed and every command answered (or none can complete). */
	if (s->eof && s->head == NULL && !conn_is_held(c))
		conn_close_after_flush(c, CONN_CLOSE_PEER);
}

/* "OK <id>" or the error, for a SEND's verdict. */
static int
verdict_text(struct conn *c, enum msg_verdict v, uint64_t id,
    uint32_t status, char *buf, size_t len)
{
	size_t n;

	switch (v) {
	case MSG_OK:
		/* The one per message: no snprintf. len is at least 24. */
		memcpy(buf, "OK ", 3);
		n = 3 + u64_to_dec(buf + 3, id);
		buf[n++] = '\n';
		return (int)n;
	case MSG_FULL:
		count_err(c, COUNTER_ERR_503);
		return snprintf(buf, len, "ERR 503 %llu store full\n",
		    (unsigned long long)id);
	case MSG_UNAVAILABLE:
		count_err(c, COUNTER_ERR_503);
		return snprintf(buf, len, "ERR 503 %llu cluster unavailable\n",
		    (unsigned long long)id);
	case MSG_STORE_LOST:
		count_err(c, COUNTER_ERR_503);
		return snprintf(buf, len, "ERR 503 %llu store unavailable\n",
		    (unsigned long long)id);
	case MSG_BUSY:
	case MSG_REFUSED:
		count_err(c, COUNTER_ERR_503);
		return snprintf(buf, len, "ERR 503 %llu recipient busy\n",
		    (unsigned long long)id);
	case MSG_UNFIT:
		count_err(c, COUNTER_ERR_400);
		return snprintf(buf, len, "ERR 400 %llu recipient cannot take "
		    "this text\n", (unsigned long long)id);
	case MSG_UPSTREAM_DOWN:
		count_err(c, COUNTER_ERR_503);
		return snprintf(buf, len, "ERR 503 %llu upstream unavailable\n",
		    (unsigned long long)id);
	case MSG_REJECTED:
		count_err(c, COUNTER_ERR_502);
		return snprintf(buf, len, "ERR 502 %llu upstream refused "
		    "0x%08x\n", (unsigned long long)id, status);
	case MSG_TOO_LONG:
		count_err(c, COUNTER_ERR_400);
		/* 60 bytes with a 20-digit id: a verdict has 64. */
		return snprintf(buf, len, "ERR 400 %llu over the recipient's "
		    "max_parts\n", (unsigned long long)id);
	default:
		count_err(c, COUNTER_ERR_404);
		return snprintf(buf, len, "ERR 404 %llu no route\n",
		    (unsigned long long)id);
	}
}

static ssize_t
router_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	const uint8_t *lf = memchr(p, '\n', n);

	if (lf != NULL)
		return lf - p + 1;
	/*
	 * No LF yet. Past max_line (plus CR LF) the line is too long: hand
	 * over what we have so that it is skipped, not buffered.
	 */
	if (n >= lim->max_line + 2)
		return (ssize_t)n;
	return 0;
}

/* Splits the first space-separated word off *line. */
static char *
next_word(char **line)
{
	char *w = *line, *sp;

	while (*w == ' ')
		w++;
	if (*w == '\0')
		return NULL;
	if ((sp = strchr(w, ' ')) != NULL) {
		*sp = '\0';
		*line = sp + 1;
	} else {
		*line = w + strlen(w);
	}
	return w;
}

/* The address is ours: OK, then its backlog, if it has one. */
static void
login_done(struct conn *c, struct router_sess *s)
{
	s->logged_in = true;
	reply_printf(c, "OK LOGIN %s", s->addr);
	deliver_wake(s->addr);
}

/* On the reactor: the cluster's answer to a LOGIN's claim. */
static void
login_claimed(void *owner, void *arg, enum mailbox_status st)
{
	struct route_claim *q = arg;
	struct router_sess *s;
	struct reply *rp;
	struct conn *c;

	/* Closed meanwhile: router_on_close gave the claim back. */
	if (st != MAILBOX_RUN || (c = conn_resolve(owner, &q->conn)) == NULL ||
	    (s = c->pdata) == NULL || !s->claiming) {
		free(q);
		return;
	}
	s->claiming = false;
	for (rp = s->head; rp != NULL && !(rp->claim && !rp->done);
	    rp = rp->next)
		;
	if (q->result == ROUTE_CLAIMED) {
		/* (The cluster confirmed the route: found here already.) */
		s->logged_in = true;
		rp->len = (size_t)snprintf(rp->text, ROUTE_ADDR_MAX + 16,
		    "OK LOGIN %s\n", s->addr);
		deliver_wake(s->addr);
	} else {
		route_release(s->addr, &s->me);
		count_err(c, q->result == ROUTE_IN_USE ? COUNTER_ERR_409 :
		    COUNTER_ERR_503);
		rp->len = (size_t)snprintf(rp->text, ROUTE_ADDR_MAX + 16, "%s\n",
		    q->result == ROUTE_IN_USE ? "ERR 409 address in use" :
		    "ERR 503 cluster unavailable");
	}
	free(q);
	rp->done = true;
	s->npending--;
	sess_drain(c, s);
}

/*
 * In a cluster the address must be free on every node: the LOGIN waits
 * (its reply in order, further input held) for the cluster's claim.
 */
static void
login_claim(struct conn *c, struct router_sess *s)
{
	char room[ROUTE_ADDR_MAX + 16];
	struct route_claim *q;
	struct reply *rp;

	q = xcalloc(1, sizeof(*q));
	q->done = login_claimed;
	q->conn = conn_handle(c);
	memcpy(q->addr, s->addr, s->addrlen + 1);
	/* (The answer comes through this reactor's mailbox: after this.) */
	if (!route_wide_up() || route_wide_claim(q) < 0) {
		free(q);
		route_release(s->addr, &s->me);
		count_err(c, COUNTER_ERR_503);
		reply_printf(c, "ERR 503 cluster unavailable");
		return;
	}
	memset(room, 0, sizeof(room));
	rp = reply_new(c, room, sizeof(room));
	rp->len = 0;
	rp->claim = true;
	reply_append(s, rp);
	s->npending++;
	s->claiming = true;
	sess_update_hold(c, s);
}

static void
cmd_login(struct conn *c, struct router_sess *s, char *args)
{
	const struct config *cf = c->r->cf;
	char *addr = next_word(&args), *pass = next_word(&args);
	const struct account_conf *acct;

	if (addr == NULL || next_word(&args) != NULL) {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 usage: LOGIN <address> [<password>]");
	} else if (s->logged_in) {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 already logged in as %s", s->addr);
	} else if (!route_addr_valid(addr, strlen(addr))) {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 bad address");
	} else if (cf->naccounts > 0 &&
	    ((acct = config_find_account(cf, addr)) == NULL ||
	    pass == NULL || !secret_eq(pass, acct->password))) {
		count_err(c, COUNTER_ERR_401);
		reply_printf(c, "ERR 401 bad credentials");
	} else {
		s->me = route_owner_conn(conn_handle(c));
		/*
		 * In a cluster, taken here (no other session may have it) but
		 * not found here until the cluster agrees: were it elsewhere,
		 * a message for it must not come to this session.
		 */
		if ((route_wide_on() ? route_claim_pending(addr, &s->me) :
		    route_claim(addr, &s->me)) < 0) {
			count_err(c, COUNTER_ERR_409);
			reply_printf(c, "ERR 409 address in use");
			return;
		}
		s->addrlen = strlen(addr);
		memcpy(s->addr, addr, s->addrlen + 1);
		if (route_wide_on()) {
			login_claim(c, s);
			return;
		}
		login_done(c, s);
	}
}

static void
cmd_send(struct conn *c, struct router_sess *s, char *args)
{
	char *to = next_word(&args), buf[96];
	struct msg *m;
	enum msg_verdict v;
	size_t len, tolen;

	if (!s->logged_in) {
		count_err(c, COUNTER_ERR_403);
		reply_printf(c, "ERR 403 login first");
		return;
	}
	if (to == NULL || *args == '\0') {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 usage: SEND <to> <text>");
		return;
	}
	tolen = strlen(to);
	len = strlen(args);
	if (!route_addr_valid(to, tolen) ||
	    !text_line_valid((const uint8_t *)args, len)) {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 bad %s",
		    text_line_valid((const uint8_t *)args, len) ?
		    "address" : "text");
		return;
	}
	m = msg_new(len);
	m->id = msg_next_id(c->r);
	m->read_ns = c->r->turn_ns;
	m->flags = MSG_F_LINE_TEXT | MSG_F_LINE_CLIENT;	/* text checked */
	memcpy(m->from, s->addr, s->addrlen + 1);
	memcpy(m->to, to, tolen + 1);
	memcpy(m->text, args, len);
	m->len = len;
	if (s->receipts) {
		memcpy(m->reply_to, s->addr, s->addrlen + 1);
		m->registered_delivery = 1;
	}
	uint64_t id = m->id;
	if ((v = deliver_send(c, m)) != MSG_PENDING) {
		int n = verdict_text(c, v, id, 0, buf, sizeof(buf));

		reply_emit(c, buf, (size_t)n);
		return;
	}
	struct reply *rp = reply_new(c, "", 0);

	rp->id = id;
	reply_append(s, rp);
	s->npending++;
	sess_update_hold(c, s);
}

/*
 * Gives the address back at once: a client that logs in again on a new
 * connection must not wait for this one's close (lingering, flushing).
 */
static void
sess_logout(struct router_sess *s)
{
	if (!s->logged_in && !s->claiming)
		return;
	route_release(s->addr, &s->me);
	if (route_wide_on())
		route_wide_release(s->addr);
	s->logged_in = s->claiming = false;
}

/* RECEIPTS ON|OFF: whether this session's SENDs ask for receipts. */
static void
cmd_receipts(struct conn *c, struct router_sess *s, char *args)
{
	char *how = next_word(&args);

	if (how == NULL || next_word(&args) != NULL ||
	    (strcasecmp(how, "ON") != 0 && strcasecmp(how, "OFF") != 0)) {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 usage: RECEIPTS ON|OFF");
		return;
	}
	s->receipts = strcasecmp(how, "ON") == 0;
	reply_printf(c, "OK RECEIPTS %s", s->receipts ? "ON" : "OFF");
}

static int
cmd_quit(struct conn *c, struct router_sess *s)
{
	struct reply *rp;

	sess_logout(s);
	if (s->head == NULL) {
		conn_write(c, "OK BYE\n", 7);
		return -1;
	}
	/* Say goodbye after the replies still awaited; take no more input. */
	rp = reply_new(c, "OK BYE\n", 7);
	rp->done = rp->bye = true;
	reply_append(s, rp);
	s->quitting = true;
	conn_hold(c);
	return 0;
}

static int
router_command(struct conn *c, struct router_sess *s, char *line)
{
	char *args = line, *verb = next_word(&args);

	if (verb == NULL)
		return 0;	/* an empty line is no command */
	if (strcasecmp(verb, "SEND") == 0)
		cmd_send(c, s, args);
	else if (strcasecmp(verb, "PING") == 0) {
		char *token = next_word(&args);

		if (token != NULL)
			reply_pong(c, token);
		else
			reply_printf(c, "PONG");
	} else if (strcasecmp(verb, "LOGIN") == 0)
		cmd_login(c, s, args);
	else if (strcasecmp(verb, "RECEIPTS") == 0)
		cmd_receipts(c, s, args);
	else if (strcasecmp(verb, "QUIT") == 0)
		return cmd_quit(c, s);
	else {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 unknown command");
	}
	return 0;
}

static int
router_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	const struct limits *lim = &c->r->cf->limits;
	struct router_sess *s = sess_of(c);
	bool whole = msg[len - 1] == '\n';
	char small[512], *line;
	int rc;

	if (s->skipping) {
		/* The rest of a line already answered ERR 413. */
		s->skipping = !whole;
		return 0;
	}
	if (whole)
		len--;
	if (len > 0 && msg[len - 1] == '\r')
		len--;
	if (!whole || len > lim->max_line) {
		s->skipping = !whole;
		count_err(c, COUNTER_ERR_413);
		reply_printf(c, "ERR 413 line too long");
		return 0;
	}
	if (memchr(msg, '\0', len) != NULL) {
		count_err(c, COUNTER_ERR_400);
		reply_printf(c, "ERR 400 unknown command");
		return 0;
	}
	/* Parsed in a copy: the frame is borrowed and read-only. */
	line = len < sizeof(small) ? small : xmalloc(len + 1);
	memcpy(line, msg, len);
	line[len] = '\0';
	rc = router_command(c, s, line);
	if (line != small)
		free(line);
	return rc;
}

/* "MSG <id> <from> " into out (at least 26 + flen bytes); its length. */
static size_t
msg_head(char *out, const struct msg *m, size_t flen)
{
	size_t n;

	memcpy(out, "MSG ", 4);
	n = 4 + u64_to_dec(out + 4, m->id);
	out[n++] = ' ';
	memcpy(out + n, m->from, flen);
	n += flen;
	out[n++] = ' ';
	return n;
}

/*
 * The cluster agreed to this session's LOGIN, whose OK is still on its
 * way to the reactor: a line for m that comes first (head, then body, then
 * a line feed) waits behind it, so that OK LOGIN stays the first line the
 * client reads. So does one from the store, which has seen the address
 * held since the cluster agreed: were it refused, a later one could come
 * after the OK and before it. Its copy goes with its line, to be tracked
 * once written. Busy past ROUTER_MAX_QUEUED lines.
 */
static int
line_behind_login(struct conn *c, struct router_sess *s, const struct msg *m,
    const char *head, size_t hn, const uint8_t *body, size_t bn)
{
	struct reply *rp;

	if (s->nqueued >= ROUTER_MAX_QUEUED)
		return MSG_BUSY;
	rp = xcalloc(1, sizeof(*rp) + hn + bn + 1);
	memcpy(rp->text, head, hn);
	if (bn > 0)
		memcpy(rp->text + hn, body, bn);
	rp->text[hn + bn] = '\n';
	rp->len = hn + bn + 1;
	rp->done = true;
	if (m->flags & MSG_F_STORED)
		rp->stored = msg_dup(m);
	reply_append(s, rp);
	sess_update_hold(c, s);
	return MSG_OK;
}

static int
msg_behind_login(struct conn *c, struct router_sess *s,
    const struct msg *m, size_t flen)
{
	char head[4 + 20 + 1 + sizeof(m->from) + 1];

	return line_behind_login(c, s, m, head, msg_head(head, m, flen),
	    m->text, m->len);
}

/*
 * Keeps m, a copy of a stored message whose line was just written, until
 * the peer has acknowledged the line.
 */
static void
stored_wait_own(struct conn *c, struct router_sess *s, struct msg *m)
{
	if (s->swlen == s->swcap) {
		unsigned cap = s->swcap ? s->swcap * 2 : 16;
		struct stored_wait *sw = xcalloc(cap, sizeof(*sw));

		for (unsigned i = 0; i < s->swlen; i++)
			sw[i] = s->sw[(s->swhead + i) % s->swcap];
		free(s->sw);
		s->sw = sw;
		s->swcap = cap;
		s->swhead = 0;
	}
	s->sw[(s->swhead + s->swlen++) % s->swcap] = (struct stored_wait){
	    .m = m, .end = conn_out_end(c) };
}

/*
 * The stored messages whose lines the peer has acknowledged leave the
 * store; at close (gone), the others go back to it, to come again (the
 * client may then see one twice: never none). Lines written and not yet
 * acknowledged are looked at again soon.
 */
static void
stored_wait_done(struct conn *c, struct router_sess *s, bool gone)
{
	uint64_t sent = conn_out_sent(c), acked = conn_out_acked(c);

	while (s->swlen > 0) {
		struct stored_wait *w = &s->sw[s->swhead];

		if (!gone && w->end > acked)
			break;
		deliver_outcome(w->m, w->end > acked ?
		    MSG_OUT_RETURNED : MSG_OUT_DELIVERED);
		s->swhead = (s->swhead + 1) % s->swcap;
		s->swlen--;
		if (s->swwritten > 0)
			s->swwritten--;
	}
	if (s->swlen == 0)
		return;
	/*
	 * Written, not yet acknowledged: the store sends the next meanwhile
	 * (a peer that delays its acknowledgements would otherwise hold each
	 * window of the backlog for its delay), and the kernel is asked
	 * again soon.
	 */
	while (s->swwritten < s->swlen) {
		struct msg *ms[64];
		unsigned n = 0;

		for (; n < 64 && s->swwritten < s->swlen; n++, s->swwritten++) {
			struct stored_wait *w =
			    &s->sw[(s->swhead + s->swwritten) % s->swcap];

			if (w->end > sent)
				break;
			ms[n] = w->m;
		}
		deliver_written(ms, n);
		if (n < 64)
			break;
	}
	if (s->sw[s->swhead].end <= sent)
		conn_watch_acked(c);
}

static void
router_on_sent(struct conn *c)
{
	struct router_sess *s = c->pdata;

	if (s != NULL && s->swlen > 0)
		stored_wait_done(c, s, false);
}

/* The MSG line for m, queued on c: MSG_OK, or why not. */
static int
msg_write(struct conn *c, const struct msg *m, size_t flen)
{
	char line[1024];
	size_t n;

	/* "MSG <id> <from> <text>\n", built without snprintf. */
	n = msg_head(line, m, flen);
	if (n + m->len + 1 <= sizeof(line)) {
		memcpy(line + n, m->text, m->len);
		n += m->len;
		line[n++] = '\n';
		return conn_write(c, line, n) ? MSG_OK : MSG_NO_ROUTE;
	}
	if (!conn_write(c, line, n) || !conn_write(c, m->text, m->len) ||
	    !conn_write(c, "\n", 1))
		return MSG_NO_ROUTE;
	return MSG_OK;
}

/* Delivers m, UTF-8 text, to c's client. */
static int
router_put(struct conn *c, const struct msg *m)
{
	struct router_sess *s = c->pdata;
	size_t flen = strlen(m->from);
	int v;

	/*
	 * A MSG line carries text: a message from SMPP with a line break,
	 * NUL, other control or bytes that are not UTF-8 would forge or
	 * break lines. And nothing more for a client that said goodbye.
	 */
	if (!(m->flags & MSG_F_LINE_TEXT) && !text_line_valid(m->text, m->len))
		return MSG_UNFIT;
	if (s != NULL && s->quitting)
		return MSG_NO_ROUTE;
	if (s != NULL && s->claiming)
		return msg_behind_login(c, s, m, flen);
	v = msg_write(c, m, flen);
	if (v == MSG_OK && (m->flags & MSG_F_STORED))
		stored_wait_own(c, sess_of(c), msg_dup(m));
	return v;
}

/*
 * An SMPP client's octets as UTF-8 text for a line: decoded from their
 * data_coding, 0 in the sender's account's alphabet. NULL for a binary
 * or unknown coding, a UDH (esm_class UDHI: router_join takes it off
 * first) and octets that are not text in their coding or not fit for a
 * line.
 */
static struct msg *
line_copy(const struct msg *m)
{
	enum text_coding dc0 = (m->flags & MSG_F_DC0_LATIN1) ? TEXT_LATIN1 :
	    (m->flags & MSG_F_DC0_IA5) ? TEXT_IA5 : TEXT_GSM;
	int coding = text_coding_of(m->data_coding, dc0);
	size_t cap = TEXT_UTF8_MAX(m->len);
	struct msg *d;
	ssize_t n;

	if (coding < 0 || (m->esm_class & 0x40))
		return NULL;
	d = msg_new(cap);
	memcpy(d, m, offsetof(struct msg, len));
	n = text_decode((enum text_coding)coding, m->text, m->len,
	    (char *)d->text, cap);
	if (n < 0 || !text_line_valid(d->text, (size_t)n)) {
		msg_free(d);
		return NULL;
	}
	d->len = (size_t)n;
	d->text[n] = '\0';
	d->flags = (d->flags & ~(uint32_t)MSG_F_CODING) | MSG_F_LINE_TEXT;
	return d;
}

/* An SMPP client's text without a UDH, decoded and delivered to c. */
static int
router_put_coded(struct conn *c, const struct msg *m)
{
	struct msg *d;
	int v;

	if ((d = line_copy(m)) == NULL)
		return MSG_UNFIT;
	v = router_put(c, d);
	msg_free(d);
	return v;
}

/* A stored part of a joined message whose line is queued. */
static void
router_keep_part(struct conn *c, const struct msg *part)
{
	stored_wait_own(c, sess_of(c), msg_dup(part));
}

/* Whether the store keeps messages for this session's address. */
static bool
router_durable(struct conn *c)
{
	const struct router_sess *s = c->pdata;

	return s != NULL && deliver_kind_on(MSG_KIND_STORE) &&
	    config_find_account(c->r->cf, s->addr) != NULL;
}

static const struct router_join_ops router_join_ops = {
	.put = router_put_coded,
	.keep = router_keep_part,
	.durable = router_durable,
};

/* A receipt's field for a RCPT line: letters and digits only, else "-". */
static const char *
rcpt_field(const char *v)
{
	if (v[0] == '\0')
		return "-";
	for (const char *p = v; *p != '\0'; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= 'a' && *p <= 'z')))
			return "-";
	return v;
}

/*
 * A receipt for a session that asked for them: "RCPT <id> <stat> <err>
 * <done date>", the id that SEND's OK gave.
 */
static int
router_put_receipt(struct conn *c, struct router_sess *s, const struct msg *m)
{
	struct smpp_receipt_text f;
	/* Each field fits its array: 24 + 8 + 4 + 13 bytes at most. */
	char line[64];
	const char *part[4];
	size_t n = 4;

	if (s->quitting)
		return MSG_NO_ROUTE;
	smpp_receipt_outcome(m->text, m->len, &f);
	memcpy(line, "RCPT", 4);
	part[0] = rcpt_field(m->receipted_id);
	part[1] = rcpt_field(f.stat);
	part[2] = rcpt_field(f.err);
	part[3] = rcpt_field(f.done_date);
	for (size_t k = 0; k < ARRAY_LEN(part); k++) {
		line[n++] = ' ';
		n += str_copy(line + n, sizeof(line) - 1 - n, part[k]);
	}
	if (s->claiming)
		return line_behind_login(c, s, m, line, n, NULL, 0);
	line[n++] = '\n';
	if (!conn_write(c, line, n))
		return MSG_NO_ROUTE;
	if (m->flags & MSG_F_STORED)
		stored_wait_own(c, s, msg_dup(m));
	return MSG_OK;
}

/*
 * Converted once, here at the recipient's edge: an SMPP client's text
 * (receipts are made as text) becomes UTF-8, or the message is unfit.
 * Parts of a longer message are joined first (router_join.c).
 */
static int
router_on_deliver(struct conn *c, const struct msg *m)
{
	struct router_sess *s = c->pdata;

	if ((m->flags & MSG_F_RECEIPT) && s != NULL && s->receipts)
		return router_put_receipt(c, s, m);
	if (!(m->flags & MSG_F_CODED) || (m->flags & MSG_F_RECEIPT))
		return router_put(c, m);
	if (router_join_wants(m))
		return router_join_deliver(&sess_of(c)->join, c, m,
		    &router_join_ops);
	return router_put_coded(c, m);
}

/* Once a second: parts that waited too long for the rest are given up. */
static void
router_on_tick(struct conn *c)
{
	struct router_sess *s = c->pdata;

	if (s != NULL)
		router_join_tick(s->join, c);
}

static void
router_on_verdict(struct conn *c, const struct msg *m)
{
	struct router_sess *s = sess_of(c);
	struct reply *rp;
	int n;

	for (rp = s->head; rp != NULL; rp = rp->next)
		if (!rp->done && rp->id == m->id)
			break;
	if (rp == NULL)
		return;
	n = verdict_text(c, m->verdict, m->id, m->status, rp->text,
	    REPLY_ROOM);
	/* snprintf says what it would have written: a line cut short
	 * still ends with its LF, never past the room. */
	if (n < 0 || n >= REPLY_ROOM) {
		n = REPLY_ROOM - 1;
		rp->text[REPLY_ROOM - 2] = '\n';
	}
	rp->len = (size_t)n;
	rp->done = true;
	s->npending--;
	sess_drain(c, s);
}

/* The client half-closed: answer what it sent before closing. */
static bool
router_on_eof(struct conn *c)
{
	struct router_sess *s = c->pdata;

	if (s == NULL || s->head == NULL)
		return false;
	s->eof = true;
	return true;
}

static bool
router_owes_answers(const struct conn *c)
{
	const struct router_sess *s = c->pdata;

	return s != NULL && s->npending > 0;
}

/*
 * The session's address is another node's now (it claimed it while this
 * one was cut off): the client hears why, and the session ends.
 */
static void
router_on_evict(struct conn *c, enum proto_evict why)
{
	static const char bye[] = "ERR 409 address taken by another node "
	    "while this one was cut off\n";

	(void)why;
	conn_write(c, bye, sizeof(bye) - 1);
	conn_close_after_flush(c, CONN_CLOSE_QUIT);
}

static void
router_on_close(struct conn *c)
{
	struct router_sess *s = c->pdata;
	struct reply *rp;

	if (s == NULL)
		return;
	sess_logout(s);
	stored_wait_done(c, s, true);
	router_join_free(s->join, c);
	free(s->sw);
	while ((rp = s->head) != NULL) {
		s->head = rp->next;
		/* Never written: it waits in the store for the next time. */
		if (rp->stored != NULL)
			deliver_outcome(rp->stored, MSG_OUT_RETURNED);
		reply_free(c, rp);
	}
	free(s);
	c->pdata = NULL;
}

const struct proto proto_router = {
	.name = "router",
	.frame_len = router_frame_len,
	.on_message = router_on_message,
	.on_eof = router_on_eof,
	.on_close = router_on_close,
	.owes_answers = router_owes_answers,
	.on_deliver = router_on_deliver,
	.on_verdict = router_on_verdict,
	.on_sent = router_on_sent,
	.on_tick = router_on_tick,
	.on_evict = router_on_evict,
	.reports_stored = true,
	.messages_counter = COUNTER_MSG_ROUTER,
};
