/* upstream.c: each reactor's share of the sessions to upstream SMS centres: connect, back off, follow reloads, count. */
#include "upstream.h"
#include "upstream_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "net.h"
#include "smpp_pdu.h"
#include "transport.h"
#include "util.h"

/* A reactor's sessions. Owning reactor only. */
struct upstream_rs {
	struct reactor *r;
	unsigned n;			/* reactors in all */
	struct upstream_sess *head;
	struct config *seen;		/* the configuration followed last */
	uint64_t pump_at;		/* ms: the soonest session's pump_at */
	bool	stopping;
	bool	detached;		/* upstream_fuzz_attach's: freed with
					   its session */
};

/* Reactors in all: where each link runs (upstream_reactor_of). */
static unsigned nreactors = 1;

/* The reactor's sessions, on its own thread: the kind's take finds them. */
static _Thread_local struct upstream_rs *self_rs;

/* ---- counters ------------------------------------------------------------ */

/*
 * Room for the upstreams of a configuration and of the one before it:
 * a slot nobody uses is taken again by the next new name.
 */
#define UPSTREAM_STATS_MAX	(2 * CONFIG_UPSTREAMS_MAX)

static struct upstream_stat stats[UPSTREAM_STATS_MAX];
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Bumped (under stats_lock) whenever a slot changes hands: a name's slot
 * that a thread found in this generation is still that name's.
 */
static atomic_uint stats_gen;

/* A thread's last finds: each message to an upstream looks its name up. */
#define FIND_CACHE	4
static _Thread_local struct {
	unsigned gen;
	unsigned next;
	struct {
		struct upstream_stat *st;
		char	name[CONFIG_NAME_MAX + 1];
	} e[FIND_CACHE];
} found;

/*
 * Zeroes a slot taken again, field by field with atomic stores: a thread
 * that found the slot's last name a moment before (upstream_stat_find
 * takes no reference) may still count or read there, and a memset under
 * it would be a data race.
 */
static void
stat_reset(struct upstream_stat *st)
{
	for (size_t i = 0; i < UPSTREAM_SLICES; i++) {
		struct upstream_slice *sl = &st->slice[i];

		atomic_store_explicit(&sl->submits, 0, memory_order_relaxed);
		atomic_store_explicit(&sl->resp_ok, 0, memory_order_relaxed);
		atomic_store_explicit(&sl->receipts_matched, 0,
		    memory_order_relaxed);
		atomic_store_explicit(&sl->mo_routed, 0, memory_order_relaxed);
		atomic_store_explicit(&sl->window, 0, memory_order_relaxed);
	}
	atomic_store(&st->bound, 0);
	atomic_store(&st->connects, 0);
	atomic_store(&st->reconnects, 0);
	atomic_store(&st->bind_failures, 0);
	atomic_store(&st->dead_links, 0);
	atomic_store(&st->unbinds, 0);
	atomic_store(&st->deliver_refused, 0);
	atomic_store(&st->receipts_unmatched, 0);
	atomic_store(&st->receipts_late, 0);
	atomic_store(&st->links_tx[0], 0);
	atomic_store(&st->links_tx[1], 0);
	for (size_t i = 0; i < sizeof(st->oldest_at) / sizeof(st->oldest_at[0]);
	    i++)
		atomic_store(&st->oldest_at[i], 0);
	atomic_store(&st->paused_until, 0);
	atomic_store(&st->tps_at, 0);
	atomic_store(&st->resp_throttled, 0);
	atomic_store(&st->resp_failed, 0);
	atomic_store(&st->throttles, 0);
	atomic_store(&st->bad_ids, 0);
}

/* name's counters, one more user; NULL if every slot is in use. */
static struct upstream_stat *
stat_get(const char *name)
{
	struct upstream_stat *st = NULL, *free_slot = NULL;

	pthread_mutex_lock(&stats_lock);
	for (size_t i = 0; i < UPSTREAM_STATS_MAX && st == NULL; i++) {
		unsigned users = atomic_load(&stats[i].users);

		if (users > 0 && strcmp(stats[i].name, name) == 0)
			st = &stats[i];
		else if (users == 0 && free_slot == NULL)
			free_slot = &stats[i];
	}
	if (st == NULL && free_slot != NULL) {
		st = free_slot;
		stat_reset(st);
		snprintf(st->name, sizeof(st->name), "%s", name);
		atomic_fetch_add(&stats_gen, 1);
	}
	if (st != NULL)
		atomic_fetch_add(&st->users, 1);
	pthread_mutex_unlock(&stats_lock);
	return st;
}

struct upstream_stat *
upstream_stat_find(const char *name)
{
	struct upstream_stat *st = NULL;
	unsigned gen = atomic_load(&stats_gen);

	if (found.gen == gen) {
		for (unsigned i = 0; i < FIND_CACHE; i++)
			if (found.e[i].st != NULL &&
			    strcmp(found.e[i].name, name) == 0)
				return found.e[i].st;
	} else {
		memset(&found, 0, sizeof(found));
		found.gen = gen;
	}
	pthread_mutex_lock(&stats_lock);
	for (size_t i = 0; i < UPSTREAM_STATS_MAX && st == NULL; i++)
		if (atomic_load(&stats[i].users) > 0 &&
		    strcmp(stats[i].name, name) == 0)
			st = &stats[i];
	/* Still this generation's: no slot changed hands since gen. */
	if (st != NULL && atomic_load(&stats_gen) == gen) {
		unsigned k = found.next++ % FIND_CACHE;

		found.e[k].st = st;
		snprintf(found.e[k].name, sizeof(found.e[k].name), "%s", name);
	}
	pthread_mutex_unlock(&stats_lock);
	return st;
}

static void
stat_put(struct upstream_stat *st)
{
	pthread_mutex_lock(&stats_lock);
	if (atomic_fetch_sub(&st->users, 1) == 1)
		atomic_fetch_add(&stats_gen, 1);
	pthread_mutex_unlock(&stats_lock);
}

enum slice_ctr { SUBMITS, RESP_OK, RECEIPTS_MATCHED, MO_ROUTED, WINDOW };

/* A counter summed over st's slices (the window: 0 if below). */
static uint64_t
slices_sum(struct upstream_stat *st, enum slice_ctr k)
{
	int64_t sum = 0;

	for (unsigned i = 0; i < UPSTREAM_SLICES; i++) {
		struct upstream_slice *sl = &st->slice[i];

		switch (k) {
		case SUBMITS:
			sum += (int64_t)atomic_load(&sl->submits);
			break;
		case RESP_OK:
			sum += (int64_t)atomic_load(&sl->resp_ok);
			break;
		case RECEIPTS_MATCHED:
			sum += (int64_t)atomic_load(&sl->receipts_matched);
			break;
		case MO_ROUTED:
			sum += (int64_t)atomic_load(&sl->mo_routed);
			break;
		case WINDOW:
			sum += atomic_load(&sl->window);
			break;
		}
	}
	return sum > 0 ? (uint64_t)sum : 0;
}

bool
upstream_stat_unanswered(struct upstream_stat *st)
{
	return slices_sum(st, WINDOW) > 0;
}

void
upstream_stats_each(upstream_stats_fn *fn, void *arg)
{
	uint64_t now = (uint64_t)time(NULL);

	pthread_mutex_lock(&stats_lock);
	for (size_t i = 0; i < UPSTREAM_STATS_MAX; i++) {
		struct upstream_stat *st = &stats[i];
		struct upstream_counts n;

		if (atomic_load(&st->users) == 0)
			continue;
		n = (struct upstream_counts){
			.bound = atomic_load(&st->bound),
			.connects = atomic_load(&st->connects),
			.reconnects = atomic_load(&st->reconnects),
			.bind_failures = atomic_load(&st->bind_failures),
			.dead_links = atomic_load(&st->dead_links),
			.unbinds = atomic_load(&st->unbinds),
			.deliver_refused = atomic_load(&st->deliver_refused),
			.receipts_matched = slices_sum(st, RECEIPTS_MATCHED),
			.receipts_unmatched =
			    atomic_load(&st->receipts_unmatched),
			.receipts_late = atomic_load(&st->receipts_late),
			.mo_routed = slices_sum(st, MO_ROUTED),
			.submits = slices_sum(st, SUBMITS),
			.resp_ok = slices_sum(st, RESP_OK),
			.resp_throttled = atomic_load(&st->resp_throttled),
			.resp_failed = atomic_load(&st->resp_failed),
			.throttles = atomic_load(&st->throttles),
			.bad_ids = atomic_load(&st->bad_ids),
			.window = slices_sum(st, WINDOW),
		};
		for (size_t k = 0; k < 128; k++) {
			uint64_t at = atomic_load(&st->oldest_at[k]);

			if (at != 0 && (n.oldest_at == 0 || at < n.oldest_at))
				n.oldest_at = at;
		}
		if (n.oldest_at != 0 && now > n.oldest_at)
			n.oldest_age = now - n.oldest_at;
		fn(st->name, &n, arg);
	}
	pthread_mutex_unlock(&stats_lock);
}

void
upstream_counts_append(char *buf, size_t len, const char *name,
    const struct upstream_counts *n, bool status)
{
	size_t used = strlen(buf);

	if (used >= len)
		return;
	if (status) {
		/* Short: what an operator looks at first. */
		used += (size_t)snprintf(buf + used, len - used, ", %s %llu "
		    "bound", name, (unsigned long long)n->bound);
		if (used < len && n->window > 0)
			used += (size_t)snprintf(buf + used, len - used,
			    " %llu in flight", (unsigned long long)n->window);
		if (used < len && n->oldest_age > 0)
			snprintf(buf + used, len - used, " oldest %llus",
			    (unsigned long long)n->oldest_age);
		return;
	}
	snprintf(buf + used, len - used, " upstream_%s_bound=%llu "
	    "upstream_%s_reconnects=%llu upstream_%s_bind_failures=%llu"
	    " upstream_%s_submits=%llu upstream_%s_ok=%llu"
	    " upstream_%s_throttled=%llu upstream_%s_refused=%llu"
	    " upstream_%s_window=%llu upstream_%s_oldest_age=%llu"
	    " upstream_%s_receipts_matched=%llu"
	    " upstream_%s_receipts_unmatched=%llu"
	    " upstream_%s_receipts_late=%llu",
	    name, (unsigned long long)n->bound, name,
	    (unsigned long long)n->reconnects, name,
	    (unsigned long long)n->bind_failures, name,
	    (unsigned long long)n->submits, name,
	    (unsigned long long)n->resp_ok, name,
	    (unsigned long long)n->resp_throttled, name,
	    (unsigned long long)n->resp_failed, name,
	    (unsigned long long)n->window, name,
	    (unsigned long long)n->oldest_age, name,
	    (unsigned long long)n->receipts_matched, name,
	    (unsigned long long)n->receipts_unmatched, name,
	    (unsigned long long)n->receipts_late);
}

struct append_arg {
	char	*buf;
	size_t	len;
	bool	status;
};

static void
append_one(const char *name, const struct upstream_counts *n, void *arg)
{
	struct append_arg *a = arg;

	upstream_counts_append(a->buf, a->len, name, n, a->status);
}

void
upstream_stats_append(char *buf, size_t len, bool status)
{
	struct append_arg a = { .buf = buf, .len = len, .status = status };

	upstream_stats_each(append_one, &a);
}

/* ---- names ---------------------------------------------------------------- */

static const struct {
	uint32_t status;
	const char *name, *what;
} statuses[] = {
	{ SMPP_ESME_ROK, "ESME_ROK", "no error" },
	{ SMPP_ESME_RINVMSGLEN, "ESME_RINVMSGLEN", "message length invalid" },
	{ SMPP_ESME_RINVCMDLEN, "ESME_RINVCMDLEN", "command length invalid" },
	{ SMPP_ESME_RINVCMDID, "ESME_RINVCMDID", "invalid command id" },
	{ SMPP_ESME_RINVBNDSTS, "ESME_RINVBNDSTS", "wrong bind status" },
	{ SMPP_ESME_RALYBND, "ESME_RALYBND", "already bound" },
	{ SMPP_ESME_RSYSERR, "ESME_RSYSERR", "system error" },
	{ SMPP_ESME_RBINDFAIL, "ESME_RBINDFAIL", "bind failed" },
	{ SMPP_ESME_RINVPASWD, "ESME_RINVPASWD", "invalid password" },
	{ SMPP_ESME_RINVSYSID, "ESME_RINVSYSID", "invalid system_id" },
	{ SMPP_ESME_RINVSYSTYP, "ESME_RINVSYSTYP", "invalid system_type" },
	{ SMPP_ESME_RMSGQFUL, "ESME_RMSGQFUL", "message queue full" },
	{ SMPP_ESME_RTHROTTLED, "ESME_RTHROTTLED", "throttled" },
	{ SMPP_ESME_RX_T_APPN, "ESME_RX_T_APPN",
	  "temporary application error" },
	{ SMPP_ESME_RUNKNOWNERR, "ESME_RUNKNOWNERR", "unknown error" },
};

const char *
upstream_status_text(uint32_t status, char *buf, size_t n)
{
	for (size_t i = 0; i < ARRAY_LEN(statuses); i++)
		if (statuses[i].status == status) {
			snprintf(buf, n, "%s (%s)", statuses[i].name,
			    statuses[i].what);
			return buf;
		}
	snprintf(buf, n, "command_status 0x%08x", status);
	return buf;
}

const char *
upstream_bind_name(uint32_t bind_cmd)
{
	switch (bind_cmd) {
	case SMPP_BIND_TRANSMITTER:
		return "transmitter";
	case SMPP_BIND_RECEIVER:
		return "receiver";
	default:
		return "transceiver";
	}
}

/* ---- back-off ------------------------------------------------------------- */

uint64_t
upstream_backoff_ms(unsigned min_s, unsigned max_s, unsigned attempt,
    uint32_t rnd)
{
	uint64_t max = (uint64_t)max_s * 1000, d = (uint64_t)min_s * 1000;

	if (attempt == 0)
		attempt = 1;
	for (unsigned i = 1; i < attempt && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	d += rnd % (d / 2 + 1);
	return d < max ? d : max;
}

static uint32_t
sess_random(struct upstream_sess *s)
{
	/* xorshift32: jitter only, so that sessions do not retry in step. */
	s->rnd ^= s->rnd << 13;
	s->rnd ^= s->rnd >> 17;
	s->rnd ^= s->rnd << 5;
	return s->rnd;
}

/* ---- a session's life ----------------------------------------------------- */

static unsigned
links_of(const struct upstream_conf *uc)
{
	return uc->sessions * (uc->bind == UPSTREAM_BIND_PAIR ? 2 : 1);
}

static uint32_t
bind_cmd_of(const struct upstream_conf *uc, unsigned link)
{
	switch (uc->bind) {
	case UPSTREAM_BIND_TRANSMITTER:
		return SMPP_BIND_TRANSMITTER;
	case UPSTREAM_BIND_RECEIVER:
		return SMPP_BIND_RECEIVER;
	case UPSTREAM_BIND_PAIR:
		return link % 2 == 0 ? SMPP_BIND_TRANSMITTER :
		    SMPP_BIND_RECEIVER;
	default:
		return SMPP_BIND_TRANSCEIVER;
	}
}

static unsigned
reactor_of(const char *name, unsigned link, unsigned n)
{
	return (unsigned)((fnv1a_str(name) + link) % n);
}

unsigned
upstream_reactor_of(const char *name, unsigned link)
{
	return reactor_of(name, link, nreactors);
}

unsigned
upstream_nreactors(void)
{
	return nreactors;
}

static const struct upstream_conf *
find_conf(const struct config *cf, const char *name)
{
	for (size_t i = 0; i < cf->nupstreams; i++)
		if (strcmp(cf->upstreams[i].name, name) == 0)
			return &cf->upstreams[i];
	return NULL;
}

void
upstream_sess_fail(struct upstream_sess *s, uint32_t code, const char *fmt,
    ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	s->failed = true;
	if (s->logged == code || s->rs->stopping) {
		log_debug("upstream %s: link %u: %s", s->uc->name, s->link,
		    what);
		return;
	}
	s->logged = code;
	log_warnx("upstream %s: link %u (%s): %s; retrying with back-off "
	    "up to %us", s->uc->name, s->link, upstream_bind_name(s->bind_cmd),
	    what, s->uc->reconnect_max);
}

void
upstream_sess_bound(struct upstream_sess *s)
{
	s->state = UPSTREAM_BOUND;
	s->is_bound = true;
	s->attempt = 0;
	s->logged = 0;
	atomic_fetch_add(&s->stat->bound, 1);
	log_notice("upstream %s: link %u bound as %s to %s:%u", s->uc->name,
	    s->link, upstream_bind_name(s->bind_cmd), s->uc->host,
	    s->uc->port);
	if (s->bind_cmd != SMPP_BIND_RECEIVER)
		upstream_sess_list(s, true);
}

static void
sess_free(struct upstream_sess *s)
{
	struct upstream_sess **pp = &s->rs->head;

	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	upstream_sess_list(s, false);
	upstream_sess_drop(s, s->rs->stopping ? UPSTREAM_DROP_FREE :
	    UPSTREAM_DROP_MOVE);
	free(s->win);
	stat_put(s->stat);
	config_unref(s->cf);
	if (s->rs->detached && s->rs->head == NULL)
		free(s->rs);
	free(s);
}

/* After a failure or a close: the next try, at once or backed off. */
static void
sess_retry(struct upstream_sess *s)
{
	struct reactor *r = s->rs->r;

	s->state = UPSTREAM_IDLE;
	s->pending_cmd = 0;
	if (s->restart) {
		s->restart = false;
		s->attempt = 0;
		s->retry_at = r->now_ms;
		return;
	}
	s->attempt++;
	s->retry_at = r->now_ms + upstream_backoff_ms(s->uc->reconnect_min,
	    s->uc->reconnect_max, s->attempt, sess_random(s));
}

/* A connect that failed or ended before its connection was made. */
static void
sess_connect_failed(struct upstream_sess *s, int err)
{
	reactor_del_io(s->rs->r, &s->dial);
	close(s->dial.fd);
	s->dial.fd = -1;
	upstream_sess_fail(s, UPSTREAM_FAIL_CONNECT | (uint32_t)err,
	    "cannot connect to %s:%u: %s", s->uc->address, s->uc->port,
	    strerror(err));
	sess_retry(s);
}

/* The socket settled: a connection over the upstream's transport. */
static void
sess_on_connected(struct reactor *r, struct reactor_io *io, uint32_t ev)
{
	struct upstream_sess *s = (struct upstream_sess *)io;
	const struct upstream_conf *uc = s->uc;
	struct transport *xp;
	int fd = io->fd;

	(void)ev;
	if (net_connect_result(fd) < 0) {
		sess_connect_failed(s, errno);
		return;
	}
	reactor_del_io(r, io);
	s->dial.fd = -1;
	xp = uc->xp_ctx->type->connect(uc->xp_ctx, r, fd,
	    uc->tls.server_name[0] != '\0' ? uc->tls.server_name : uc->host,
	    r->cf->limits.handshake_timeout);
	if (xp == NULL) {
		close(fd);
		upstream_sess_fail(s, UPSTREAM_FAIL_CONNECT | ENOMEM,
		    "cannot start %s", uc->tls.enabled ? "TLS" : "plain");
		sess_retry(s);
		return;
	}
	atomic_fetch_add(&conn_live, 1);
	if ((s->c = conn_new_with(r, fd, &proto_esme, xp)) == NULL) {
		sess_retry(s);
		return;
	}
	s->c->pdata = s;
	s->failed = false;
	esme_open(s->c);
}

/*
 * Connects s with the configuration its reactor has now; a session whose
 * upstream or link has gone is freed instead. 
 */
static void
sess_connect(struct upstream_sess *s)
{
	struct reactor *r = s->rs->r;
	const struct upstream_conf *uc = find_conf(r->cf, s->uc->name);
	int fd;

	if (uc == NULL || s->link >= links_of(uc)) {
		sess_free(s);
		return;
	}
	if (s->cf != r->cf) {
		config_unref(s->cf);
		s->cf = config_ref(r->cf);
		s->uc = uc;
		s->bind_cmd = bind_cmd_of(uc, s->link);
	}
	atomic_fetch_add(&s->stat->connects, 1);
	if (s->attempt > 0)
		atomic_fetch_add(&s->stat->reconnects, 1);
	if ((fd = net_connect(uc->address, uc->port)) < 0) {
		s->dial.fd = -1;
		upstream_sess_fail(s, UPSTREAM_FAIL_CONNECT | (uint32_t)errno,
		    "cannot connect to %s:%u: %s", uc->address, uc->port,
		    strerror(errno));
		sess_retry(s);
		return;
	}
	s->dial = (struct reactor_io){ .fd = fd, .fn = sess_on_connected };
	s->state = UPSTREAM_CONNECTING;
	s->deadline = r->now_ms + (uint64_t)uc->response_timeout * 1000;
	if (reactor_add_io(r, &s->dial, EPOLLOUT) < 0) {
		close(fd);
		s->dial.fd = -1;
		upstream_sess_fail(s, UPSTREAM_FAIL_CONNECT | (uint32_t)errno,
		    "cannot watch a socket: %s", strerror(errno));
		sess_retry(s);
	}
}

static struct upstream_sess *
sess_new(struct upstream_rs *rs, const struct upstream_conf *uc,
    unsigned link)
{
	struct upstream_sess *s;
	struct upstream_stat *st = stat_get(uc->name);

	if (st == NULL)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->dial.fd = -1;
	s->rs = rs;
	s->r = rs->r;
	s->cf = config_ref(rs->r->cf);
	s->uc = uc;
	s->stat = st;
	s->link = link;
	s->bind_cmd = bind_cmd_of(uc, link);
	s->rnd = (uint32_t)rs->r->now_ms * 2654435761u + link * 40503u + 1;
	s->state = UPSTREAM_IDLE;
	s->retry_at = rs->r->now_ms;
	s->next = rs->head;
	rs->head = s;
	return s;
}

/*
 * Ends s's link: a bound one unbinds first (it closes on the answer or
 * after response_timeout), others close now. removed: s goes with it;
 * otherwise it connects again at once.
 */
static void
sess_end(struct upstream_sess *s, bool removed)
{
	s->removed = removed;
	s->restart = !removed;
	switch (s->state) {
	case UPSTREAM_IDLE:
		if (removed) {
			sess_free(s);
		} else {
			s->restart = false;
			s->attempt = 0;
			s->retry_at = s->rs->r->now_ms;
		}
		break;
	case UPSTREAM_CONNECTING:
		reactor_del_io(s->rs->r, &s->dial);
		close(s->dial.fd);
		s->dial.fd = -1;
		if (removed)
			sess_free(s);
		else
			sess_retry(s);
		break;
	case UPSTREAM_BOUND:
		esme_unbind(s->c);
		break;
	case UPSTREAM_OPENING:
	case UPSTREAM_BINDING:
		s->state = UPSTREAM_CLOSING;
		conn_close(s->c, CONN_CLOSE_QUIT);
		break;
	default:
		break;
	}
}

/* What identifies a link: a change binds it again. */
static bool
same_link(const struct upstream_conf *a, const struct upstream_conf *b)
{
	return strcmp(a->address, b->address) == 0 && a->port == b->port &&
	    strcmp(a->host, b->host) == 0 && a->bind == b->bind &&
	    strcmp(a->system_id, b->system_id) == 0 &&
	    strcmp(a->password, b->password) == 0 &&
	    strcmp(a->system_type, b->system_type) == 0 &&
	    strcmp(a->address_range, b->address_range) == 0 &&
	    memcmp(&a->tls, &b->tls, sizeof(a->tls)) == 0;
}

/* One session against the reactor's new configuration. */
static void
sess_follow(struct upstream_sess *s, struct config *cf)
{
	const struct upstream_conf *uc = find_conf(cf, s->uc->name);

	if (s->removed)
		return;
	if (uc == NULL || s->link >= links_of(uc)) {
		log_notice("upstream %s: link %u removed from the "
		    "configuration: closing it", s->uc->name, s->link);
		sess_end(s, true);
	} else if (!same_link(uc, s->uc)) {
		log_notice("upstream %s: link %u: its settings changed: "
		    "binding again", s->uc->name, s->link);
		sess_end(s, false);
	} else {
		/* Timers and limits apply from now on. */
		config_unref(s->cf);
		s->cf = config_ref(cf);
		s->uc = uc;
	}
}

static bool
has_link(const struct upstream_rs *rs, const char *name, unsigned link)
{
	for (const struct upstream_sess *s = rs->head; s != NULL; s = s->next)
		if (!s->removed && s->link == link &&
		    strcmp(s->uc->name, name) == 0)
			return true;
	return false;
}

/* Follows the reactor's configuration: sessions go, change or come. */
static void
rs_follow(struct upstream_rs *rs)
{
	struct config *cf = rs->r->cf;
	struct upstream_sess *s, *next;

	if (rs->seen == cf)
		return;
	rs->seen = cf;
	for (s = rs->head; s != NULL; s = next) {
		next = s->next;
		sess_follow(s, cf);
	}
	for (size_t i = 0; i < cf->nupstreams; i++) {
		const struct upstream_conf *uc = &cf->upstreams[i];

		for (unsigned l = 0; l < links_of(uc); l++)
			if (reactor_of(uc->name, l, rs->n) == rs->r->id &&
			    !has_link(rs, uc->name, l) &&
			    sess_new(rs, uc, l) == NULL)
				log_warnx("upstream %s: no room for its "
				    "counters: link %u not opened", uc->name,
				    l);
	}
}

/* Connects what is due, and gives up on connects past their time. */
static void
rs_every_second(struct reactor *r, void *arg)
{
	struct upstream_rs *rs = arg;
	struct upstream_sess *s, *next;

	if (rs->stopping)
		return;
	rs_follow(rs);
	for (s = rs->head; s != NULL; s = next) {
		next = s->next;
		if (s->state == UPSTREAM_BOUND)
			upstream_sess_second(s);
		else if (s->state == UPSTREAM_IDLE && s->retry_at <= r->now_ms)
			sess_connect(s);
		else if (s->state == UPSTREAM_CONNECTING &&
		    s->deadline <= r->now_ms)
			sess_connect_failed(s, ETIMEDOUT);
	}
}

static void
rs_start(struct reactor *r, void *arg)
{
	self_rs = arg;
	rs_every_second(r, arg);
}

/* Stopping: no more connects; connections unbind through on_stop. */
static void
rs_stop(struct reactor *r, void *arg)
{
	struct upstream_rs *rs = arg;

	rs->stopping = true;
	for (struct upstream_sess *s = rs->head; s != NULL; s = s->next)
		if (s->state == UPSTREAM_CONNECTING) {
			reactor_del_io(r, &s->dial);
			close(s->dial.fd);
			s->dial.fd = -1;
			s->state = UPSTREAM_IDLE;
		}
}

/* Before the connection set's free: its closes find no session. */
static void
rs_free(struct reactor *r, void *arg)
{
	struct upstream_rs *rs = arg;

	(void)r;
	/* Nobody is left to answer: what the sessions hold is freed. */
	rs->stopping = true;
	while (rs->head != NULL) {
		struct upstream_sess *s = rs->head;

		if (s->c != NULL)
			s->c->pdata = NULL;
		if (s->dial.fd >= 0)
			close(s->dial.fd);
		if (s->is_bound)
			atomic_fetch_sub(&s->stat->bound, 1);
		sess_free(s);
	}
	free(rs);
}

/*
 * The first session goes last: the next round starts with the next one,
 * so that the parts a saturated max_tps lets go are taken in turn, not
 * all by the session that happens to be first.
 */
static void
rotate(struct upstream_rs *rs)
{
	struct upstream_sess *first = rs->head, *last;

	if (first == NULL || first->next == NULL)
		return;
	for (last = first; last->next != NULL; last = last->next)
		;
	rs->head = first->next;
	first->next = NULL;
	last->next = first;
}

/* Pumps the sessions whose pace or pause ended; wakes for the next. */
static void
rs_after_events(struct reactor *r, void *arg)
{
	struct upstream_rs *rs = arg;
	uint64_t next = 0;

	if (rs->pump_at == 0)
		return;
	if (rs->pump_at > r->now_ms) {
		reactor_wake_within(r, (int)(rs->pump_at - r->now_ms));
		return;
	}
	for (struct upstream_sess *s = rs->head; s != NULL; s = s->next) {
		if (s->pump_at == 0)
			continue;
		if (s->pump_at <= r->now_ms) {
			s->pump_at = 0;
			upstream_sess_pump(s);	/* may wait again */
		}
		if (s->pump_at != 0 && (next == 0 || s->pump_at < next))
			next = s->pump_at;
	}
	rotate(rs);
	rs->pump_at = next;
	if (next != 0)
		reactor_wake_within(r, next > r->now_ms ?
		    (int)(next - r->now_ms) : 0);
}

void
upstream_sess_pump_at(struct upstream_sess *s, uint64_t at_ms)
{
	struct upstream_rs *rs = s->rs;

	if (s->pump_at == 0 || at_ms < s->pump_at)
		s->pump_at = at_ms;
	if (rs->pump_at == 0 || at_ms < rs->pump_at)
		rs->pump_at = at_ms;
	reactor_wake_within(s->r, at_ms > s->r->now_ms ?
	    (int)(at_ms - s->r->now_ms) : 0);
}

static const struct reactor_hooks upstream_hooks = {
	.start = rs_start,
	.after_events = rs_after_events,
	.every_second = rs_every_second,
	.stop = rs_stop,
	.free = rs_free,
};

void
upstream_attach(struct reactor *r, unsigned n)
{
	struct upstream_rs *rs = xcalloc(1, sizeof(*rs));

	rs->r = r;
	rs->n = n;
	nreactors = n;
	upstream_kind_register();
	esme_receipts_attach();
	/* Hooked after the connection set, so freed before it. */
	(void)conn_set_of(r);
	if (reactor_hook_add(r, &upstream_hooks, rs) < 0)
		fatal("reactor=%u cannot hook in its upstream sessions", r->id);
}

struct upstream_sess *
upstream_sess_find(struct reactor *r, const char *name, unsigned link)
{
	struct upstream_rs *rs = reactor_hook_arg(r, &upstream_hooks);

	if (rs == NULL)
		return NULL;
	for (struct upstream_sess *s = rs->head; s != NULL; s = s->next)
		if (!s->removed && s->link == link &&
		    strcmp(s->uc->name, name) == 0)
			return s;
	return NULL;
}

struct reactor *
upstream_self(void)
{
	return self_rs != NULL ? self_rs->r : NULL;
}

/* ---- from the connection (proto_esme.c) ----------------------------------- */

void
upstream_conn_closed(struct conn *c)
{
	struct upstream_sess *s = c->pdata;

	if (s == NULL)
		return;
	s->c = NULL;
	atomic_store(&s->stat->oldest_at[s->link], 0);	/* its jobs move */
	if (s->is_bound)
		atomic_fetch_sub(&s->stat->bound, 1);
	s->is_bound = false;
	upstream_sess_list(s, false);
	upstream_sess_drop(s, s->rs->stopping ? UPSTREAM_DROP_ANSWER :
	    UPSTREAM_DROP_MOVE);
	if (!s->failed && !s->removed && !s->restart && !s->rs->stopping)
		upstream_sess_fail(s, UPSTREAM_FAIL_CLOSED | c->close_reason,
		    "connection closed (%s)",
		    conn_close_reason_name(c->close_reason));
	if (s->removed) {
		sess_free(s);
		return;
	}
	if (s->rs->stopping) {
		s->state = UPSTREAM_IDLE;
		return;
	}
	sess_retry(s);
}

void
upstream_fuzz_attach(struct conn *c, const struct upstream_conf *uc)
{
	struct upstream_rs *rs = xcalloc(1, sizeof(*rs));
	struct upstream_sess *s;

	rs->r = c->r;
	rs->n = 1;
	rs->detached = true;
	/* Stopping: a close frees the session rather than retrying. */
	rs->stopping = true;
	if ((s = sess_new(rs, uc, 0)) == NULL)
		abort();
	s->removed = true;
	s->c = c;
	c->pdata = s;
	esme_open(c);
}
