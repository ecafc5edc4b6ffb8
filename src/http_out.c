/* http_out.c: the http-out thread: receipts posted to HTTP applications' URLs with libcurl's multi interface. */
#include "http_out.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <curl/curl.h>

#include "config.h"
#include "http_cb.h"
#include "log.h"
#include "mailbox.h"
#include "msg.h"
#include "reactor.h"
#include "smpp_receipt.h"
#include "text.h"
#include "util.h"
#include "version.h"

#define OWN_PORTS_MAX	64	/* listeners whose ports we know */
#define OWN_ADDRS_MAX	64	/* this host's addresses */
#define ACTIVE_MAX	256	/* requests at once, all hosts together */
#define WANT_BUCKETS	65536	/* receipts awaited, by message id */
#define WANT_TTL	86400	/* s a receipt is awaited past its validity */
#define SWEEP_MS	10000	/* how often expired waits are looked for */
#define WAIT_MAX_MS	1000	/* the longest the thread sleeps */

/* A receipt awaited: what its send asked. */
struct want {
	struct want *next;		/* in its bucket */
	uint64_t id;
	uint64_t deadline;		/* wall clock s: forgotten after it */
	int	mask;
	bool	json;
	char	to[ROUTE_ADDR_MAX + 1];
	char	from[ROUTE_ADDR_MAX + 1];
	char	smsc_id[HTTP_OUT_SMSC_ID_MAX + 1];	/* %F; "" none yet */
	char	url[];
};

/*
 * A host posted to: how many of its posts are in transfer, and those
 * waiting, in order. Made on a post's first queueing, freed once it has
 * neither: as many as hosts with posts pending.
 */
struct host {
	struct host *next;
	unsigned active;
	struct job *head, *tail;
	char	name[256];
};

/* One post: a URL, a body (NULL: GET), and its attempts. */
struct job {
	struct job *next;		/* in its host's queue, or active */
	struct host *h;
	CURL	*easy;
	struct curl_slist *hdrs;
	char	*url;
	char	*body;
	char	host[256];
	unsigned attempts;		/* made so far */
	uint64_t due_ms;		/* mono_ms: not before */
	bool	refused;		/* its address is not one we call */
	uint64_t kept;			/* its id where it is kept; 0 none */
	/* A message posted to a mo_url: its receipt follows the answer. */
	struct msg *mo;
	unsigned reactor;		/* whose turn makes the receipt */
	mailbox_task_fn *receipt;	/* which makes it there */
};

/* What a poster hands the thread. */
struct op {
	struct mailbox_task task;
	uint64_t id;
	uint64_t at;
	int	type;			/* HTTP_DLR_* */
	bool	ok, stored;
	char	smsc_id[HTTP_OUT_SMSC_ID_MAX + 1];
	struct want *w;
	struct config *cf;
};

static struct {
	/* Any thread. */
	struct mailbox mb;
	_Atomic uint64_t sent, failed, retried, dropped, pending;
	_Atomic uint64_t awaited;	/* wants, and wants posted */
	_Atomic unsigned queue_limit;	/* http.callback_queue now */
	_Atomic unsigned nports;
	_Atomic unsigned ports[OWN_PORTS_MAX];
	/* Posts kept with ids up to this one are durable: they may go. */
	_Atomic uint64_t kept_upto;
	/* Set by http_out_open, read-only after. */
	struct config_cidr own[OWN_ADDRS_MAX];
	unsigned nown;
	bool	open;
	/* The main thread. */
	pthread_t thread;
	bool	started;
	/* Set before the thread starts. */
	struct http_out_keep keep;
	uint64_t next_kept;
	/* The thread's own. */
	struct config *cf;
	CURLM	*multi;
	struct want **buckets;
	struct host *hosts;		/* with posts active or waiting */
	struct job *active;
	unsigned nactive;
	bool	stopping;
	uint64_t next_sweep;
	struct log_limit lim;
} O;

/* The listeners' ports: callbacks to them on this host are refused. */
void
http_out_own_port(unsigned port)
{
	unsigned i = atomic_load(&O.nports);

	if (i < OWN_PORTS_MAX) {
		atomic_store(&O.ports[i], port);
		atomic_store(&O.nports, i + 1);
	}
}

static bool
own_port(unsigned port)
{
	unsigned n = atomic_load(&O.nports);

	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&O.ports[i]) == port)
			return true;
	return false;
}

/* Loopback, "any" and every interface's address: this host. */
static void
own_addrs_init(void)
{
	static const char *const fixed[] = { "127.0.0.0/8", "::1", "0.0.0.0",
	    "::" };
	struct ifaddrs *ifs, *i;

	for (size_t k = 0; k < ARRAY_LEN(fixed); k++)
		http_cidr_parse(fixed[k], &O.own[O.nown++]);
	if (getifaddrs(&ifs) < 0)
		return;
	for (i = ifs; i != NULL && O.nown < OWN_ADDRS_MAX; i = i->ifa_next) {
		struct config_cidr *c = &O.own[O.nown];
		const struct sockaddr *sa = i->ifa_addr;

		if (sa == NULL || (sa->sa_family != AF_INET &&
		    sa->sa_family != AF_INET6))
			continue;
		c->family = sa->sa_family;
		c->bits = c->family == AF_INET ? 32 : 128;
		if (c->family == AF_INET)
			memcpy(c->addr, &((const struct sockaddr_in *)
			    (const void *)sa)->sin_addr, 4);
		else
			memcpy(c->addr, &((const struct sockaddr_in6 *)
			    (const void *)sa)->sin6_addr, 16);
		O.nown++;
	}
	freeifaddrs(ifs);
}

/* Why sa may not be called back under cf, or NULL when it may. */
static const char *
refusal(const struct config *cf, const struct sockaddr *sa)
{
	unsigned port = sa->sa_family == AF_INET ?
	    ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port) :
	    ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);

	if (!http_cidr_any(cf->http.callback_allow, cf->http.ncallback_allow,
	    sa))
		return "outside http.callback_allow";
	if (own_port(port) && http_cidr_any(O.own, O.nown, sa))
		return "one of this daemon's own listeners";
	return NULL;
}

int
http_out_check(const struct config *cf, const char *url, char *why, size_t n)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)&ss;
	char host[256];
	unsigned port;
	const char *r;

	memset(&ss, 0, sizeof(ss));
	if (http_cb_url_host(url, host, sizeof(host), &port) < 0) {
		snprintf(why, n, "not an http:// or https:// URL with a host");
		return -1;
	}
	/* A name is checked once it is resolved, before it is called. */
	if (strcasecmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
	} else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
	} else
		return 0;
	if ((r = refusal(cf, (struct sockaddr *)&ss)) == NULL)
		return 0;
	snprintf(why, n, "%s:%u is %s", host, port, r);
	return -1;
}

bool
http_out_admit(const struct config *cf, unsigned n)
{
	uint64_t was = atomic_fetch_add(&O.awaited, n);

	if (!O.open || was + n > cf->http.callback_queue) {
		atomic_fetch_sub(&O.awaited, n);
		return false;
	}
	return true;
}

void
http_out_get_stats(struct http_out_stats *st)
{
	st->sent = atomic_load(&O.sent);
	st->failed = atomic_load(&O.failed);
	st->retried = atomic_load(&O.retried);
	st->dropped = atomic_load(&O.dropped);
	st->pending = atomic_load(&O.pending);
	st->awaited = atomic_load(&O.awaited);
}

/* The bucket of id. */
static struct want **
want_slot(uint64_t id)
{
	struct want **p = &O.buckets[(id ^ (id >> 16)) & (WANT_BUCKETS - 1)];

	while (*p != NULL && (*p)->id != id)
		p = &(*p)->next;
	return p;
}

/* Ends the wait for *p; forget: also where it is kept (not at a stop). */
static void
want_drop(struct want **p, bool forget)
{
	struct want *w = *p;

	if (forget && O.keep.unwant != NULL)
		O.keep.unwant(w->id);
	*p = w->next;
	free(w);
	atomic_fetch_sub(&O.awaited, 1);
}

static void
job_free(struct job *j)
{
	free(j->mo);
	curl_slist_free_all(j->hdrs);
	free(j->url);
	free(j->body);
	free(j);
}

/* The host called name, made if new. */
static struct host *
host_get(const char *name)
{
	struct host *h;

	for (h = O.hosts; h != NULL; h = h->next)
		if (strcmp(h->name, name) == 0)
			return h;
	h = xcalloc(1, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->next = O.hosts;
	O.hosts = h;
	return h;
}

/* At the end of its host's queue. */
static void
job_queue(struct job *j)
{
	struct host *h = j->h != NULL ? j->h : (j->h = host_get(j->host));

	j->next = NULL;
	if (h->tail != NULL)
		h->tail->next = j;
	else
		h->head = j;
	h->tail = j;
}

/*
 * A new post: kept (with a store) until it is answered or given up; with
 * it, the receipt awaited unwant (0 none) is forgotten where it is kept.
 */
static void
job_made(struct job *j, uint64_t unwant)
{
	if (O.keep.keep != NULL && j->kept == 0) {
		j->kept = O.next_kept++;
		O.keep.keep(j->kept, j->url, j->body, unwant);
	}
	j->due_ms = mono_ms();
	job_queue(j);
}

/*
 * The post that tells w's application of an event of type at at; ends:
 * the wait for w ends with it (forgotten where it is kept, with the
 * post). Whether a post was made.
 */
static bool
want_post(const struct want *w, int type, uint64_t at, bool ends)
{
	struct http_dlr d = { .type = type, .id = w->id, .at = at,
	    .to = w->to, .from = w->from, .upstream_id = w->smsc_id };
	char url[HTTP_CB_URL_MAX + 1];
	unsigned port;
	struct job *j;

	if (atomic_load(&O.pending) >= O.cf->http.callback_queue) {
		atomic_fetch_add(&O.dropped, 1);
		if (log_limit_take(&O.lim, mono_ms() / 1000, "http-out", 0))
			log_warnx("http-out: receipt for %" PRIu64 " dropped: "
			    "%u posts pending (http.callback_queue)", w->id,
			    O.cf->http.callback_queue);
		return false;
	}
	if (!w->json && http_cb_expand(w->url, &d, url, sizeof(url)) < 0) {
		atomic_fetch_add(&O.failed, 1);
		log_warnx("http-out: receipt for %" PRIu64 " not posted: its "
		    "dlr-url is too long once expanded", w->id);
		return false;
	}
	j = xcalloc(1, sizeof(*j));
	j->url = xstrdup(w->json ? w->url : url);
	if (w->json) {
		j->body = http_cb_receipt_json(&d);
		j->hdrs = curl_slist_append(NULL,
		    "Content-Type: application/json");
	}
	if (http_cb_url_host(j->url, j->host, sizeof(j->host), &port) < 0)
		j->host[0] = '\0';
	atomic_fetch_add(&O.pending, 1);
	job_made(j, ends ? w->id : 0);
	return true;
}

/*
 * An event of type for message id: posted when its mask asks, and the
 * wait ends once nothing more is to come.
 */
static void
want_event(uint64_t id, int type, uint64_t at)
{
	struct want **p = want_slot(id);
	int finals = HTTP_DLR_DELIVERED | HTTP_DLR_UNDELIVERED |
	    HTTP_DLR_SMSC_REJECT;
	bool ends, posted;

	if (*p == NULL) {
		/* Its send came before a restart, or gave up waiting. */
		log_info("http-out: receipt for %" PRIu64 " awaited by "
		    "nobody: not posted", id);
		return;
	}
	ends = (type & finals) || !((*p)->mask & finals);
	posted = ((*p)->mask & type) && want_post(*p, type, at, ends);
	/* Posted: forgotten in the store with the post, in one group. */
	if (ends)
		want_drop(p, !(posted && O.keep.keep != NULL));
}

static void
op_want(void *owner, void *arg, enum mailbox_status st)
{
	struct op *o = arg;
	struct want **p;

	(void)owner;
	if (st == MAILBOX_RUN && *(p = want_slot(o->w->id)) == NULL) {
		*p = o->w;
		o->w = NULL;
		if (O.keep.want != NULL)
			O.keep.want(&(struct http_out_want){ .id = (*p)->id,
			    .url = (*p)->url, .json = (*p)->json,
			    .mask = (*p)->mask, .to = (*p)->to,
			    .from = (*p)->from, .deadline = (*p)->deadline });
	}
	if (o->w != NULL) {
		free(o->w);
		atomic_fetch_sub(&O.awaited, 1);
	}
	free(o);
}

static void
op_verdict(void *owner, void *arg, enum mailbox_status st)
{
	struct op *o = arg;
	struct want **p;

	(void)owner;
	if (st == MAILBOX_RUN && *(p = want_slot(o->id)) != NULL) {
		if (o->stored)
			want_event(o->id, HTTP_DLR_BUFFERED, o->at);
		else if (!o->ok)
			want_drop(p, true);
	}
	free(o);
}

static void
op_receipt(void *owner, void *arg, enum mailbox_status st)
{
	struct op *o = arg;

	(void)owner;
	if (st == MAILBOX_RUN)
		want_event(o->id, o->type, o->at);
	free(o);
}

/* What an SMS centre said: its id is kept for this and later receipts. */
static void
op_smsc(void *owner, void *arg, enum mailbox_status st)
{
	struct op *o = arg;
	struct want **p;

	(void)owner;
	if (st == MAILBOX_RUN && *(p = want_slot(o->id)) != NULL) {
		if (o->smsc_id[0] != '\0')
			snprintf((*p)->smsc_id, sizeof((*p)->smsc_id), "%s",
			    o->smsc_id);
		want_event(o->id, o->type, o->at);
	}
	free(o);
}

static void
op_config(void *owner, void *arg, enum mailbox_status st)
{
	struct op *o = arg;

	(void)owner;
	if (st == MAILBOX_RUN) {
		config_unref(O.cf);
		O.cf = o->cf;
		atomic_store(&O.queue_limit, O.cf->http.callback_queue);
	} else
		config_unref(o->cf);
	free(o);
}

static void
op_stop(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	(void)arg;
	(void)st;
	O.stopping = true;
}

static struct want *
want_new(const struct http_out_want *w)
{
	size_t ulen = strlen(w->url);
	struct want *x = xcalloc(1, sizeof(*x) + ulen + 1);

	x->id = w->id;
	x->mask = w->mask;
	x->json = w->json;
	x->deadline = w->deadline != 0 ? w->deadline :
	    (uint64_t)time(NULL) + WANT_TTL;
	snprintf(x->to, sizeof(x->to), "%s", w->to);
	snprintf(x->from, sizeof(x->from), "%s", w->from);
	memcpy(x->url, w->url, ulen + 1);
	return x;
}

void
http_out_want(const struct http_out_want *w)
{
	struct op *o = xcalloc(1, sizeof(*o));

	o->w = want_new(w);
	mailbox_post_fn(&O.mb, op_want, o);
}

void
http_out_verdict(uint64_t id, bool ok, bool stored)
{
	struct op *o = xcalloc(1, sizeof(*o));

	o->id = id;
	o->ok = ok;
	o->stored = stored;
	o->at = (uint64_t)time(NULL);
	mailbox_post_fn(&O.mb, op_verdict, o);
}

bool
http_out_receipt(const struct msg *orig, uint8_t state, uint64_t at)
{
	if (!(orig->flags & MSG_F_HTTP_RCPT))
		return false;
	return http_out_receipt_of(orig->id, state, at);
}

bool
http_out_receipt_of(uint64_t id, uint8_t state, uint64_t at)
{
	struct op *o;

	if (!O.open)
		return false;
	o = xcalloc(1, sizeof(*o));
	o->id = id;
	o->type = http_cb_dlr_type(state);
	o->at = at;
	mailbox_post_fn(&O.mb, op_receipt, o);
	return true;
}

void
http_out_smsc(uint64_t id, bool accepted, const char *smsc_id, uint64_t at)
{
	struct op *o;

	if (!O.open)
		return;
	o = xcalloc(1, sizeof(*o));
	o->id = id;
	o->type = accepted ? HTTP_DLR_SMSC_ACK : HTTP_DLR_SMSC_REJECT;
	o->at = at;
	snprintf(o->smsc_id, sizeof(o->smsc_id), "%s", smsc_id);
	mailbox_post_fn(&O.mb, op_smsc, o);
}

bool
http_out_on(void)
{
	return O.open;
}

/* m's text as UTF-8 (malloc'd), or NULL when it is not text. */
static char *
mo_text(const struct msg *m)
{
	const uint8_t *p;
	size_t n;
	int coding;
	char *out;
	ssize_t k;

	if (!(m->flags & MSG_F_CODED))
		return strndup((const char *)m->text, m->len);
	p = msg_text_after_udh(m, &n);
	coding = text_coding_of(m->data_coding, m->flags & MSG_F_DC0_LATIN1 ?
	    TEXT_LATIN1 : m->flags & MSG_F_DC0_IA5 ? TEXT_IA5 : TEXT_GSM);
	if (coding < 0)
		return NULL;
	out = xmalloc(TEXT_UTF8_MAX(n) + 1);
	if ((k = text_decode((enum text_coding)coding, p, n, out,
	    TEXT_UTF8_MAX(n) + 1)) < 0) {
		free(out);
		return NULL;
	}
	out[k] = '\0';
	return out;
}

static void
op_mo(void *owner, void *arg, enum mailbox_status st)
{
	struct job *j = arg;

	(void)owner;
	if (st == MAILBOX_RUN) {
		job_made(j, 0);
		return;
	}
	atomic_fetch_add(&O.dropped, 1);
	atomic_fetch_sub(&O.pending, 1);
	job_free(j);
}

int
http_out_mo(struct msg *m, const char *url, mailbox_task_fn *receipt)
{
	struct job *j;
	char *text;
	unsigned port;

	if (!O.open || atomic_fetch_add(&O.pending, 1) >=
	    O.queue_limit) {
		if (O.open)
			atomic_fetch_sub(&O.pending, 1);
		msg_free(m);
		return MSG_FULL;
	}
	j = xcalloc(1, sizeof(*j));
	j->url = xstrdup(url);
	text = mo_text(m);
	j->body = http_cb_mo_json(m->id, m->from, m->to, text, m->text,
	    m->len, m->submitted != 0 ? m->submitted :
	    (uint64_t)time(NULL));
	free(text);
	j->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (http_cb_url_host(url, j->host, sizeof(j->host), &port) < 0)
		j->host[0] = '\0';
	j->reactor = m->sender_kind == MSG_KIND_CONN ? m->sender.reactor :
	    UINT32_MAX;
	j->mo = m;
	j->receipt = receipt;
	mailbox_post_fn(&O.mb, op_mo, j);
	return MSG_OK;
}

void
http_out_reload(const struct config *cf)
{
	struct op *o;

	if (!O.open)
		return;
	o = xcalloc(1, sizeof(*o));
	o->cf = config_ref((struct config *)cf);
	mailbox_post_fn(&O.mb, op_config, o);
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* Every connection is checked where the name resolved to. */
static curl_socket_t
open_checked(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct job *j = arg;

	if (purpose == CURLSOCKTYPE_IPCXN && refusal(O.cf, &a->addr) != NULL) {
		j->refused = true;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void
job_start(struct job *j)
{
	CURL *e = curl_easy_init();
	long t = (long)O.cf->http.callback_timeout;
	char ua[48];

	j->easy = e;
	j->refused = false;
	curl_easy_setopt(e, CURLOPT_URL, j->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, j);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, t);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, t);
	/* No proxy, no redirect: only the address checked is called. */
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	/* (libcurl copies the string.) */
	snprintf(ua, sizeof(ua), "echorouterd/%s", version_number());
	curl_easy_setopt(e, CURLOPT_USERAGENT, ua);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_checked);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, j);
	if (j->body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->body);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, j->hdrs);
	}
	j->attempts++;
	j->next = O.active;
	O.active = j;
	O.nactive++;
	j->h->active++;
	curl_multi_add_handle(O.multi, e);
}

/*
 * The first post of h due by now, taken off its queue; NULL if none (then
 * *next is lowered to the earliest not yet due). Those not due are
 * retries, which are few.
 */
static struct job *
host_take_due(struct host *h, uint64_t now, uint64_t *next)
{
	struct job **p = &h->head, *j, *prev = NULL;

	for (; (j = *p) != NULL; prev = j, p = &j->next) {
		/* Not before it is kept: http_out_kept wakes the thread. */
		if (j->kept > atomic_load(&O.kept_upto))
			continue;
		if (j->due_ms > now) {
			if (j->due_ms < *next)
				*next = j->due_ms;
			continue;
		}
		*p = j->next;
		if (h->tail == j)
			h->tail = prev;
		return j;
	}
	return NULL;
}

/*
 * Starts what is due, each host's in order, as far as the limits allow
 * (per host: http.callback_concurrency); returns the ms until the next
 * one not yet due (WAIT_MAX_MS at most). Hosts with nothing left go.
 */
static int
start_due(uint64_t now)
{
	struct host **hp = &O.hosts, *h;
	uint64_t next = now + WAIT_MAX_MS;
	struct job *j;

	/* Once every slot is busy, a transfer's end wakes the thread. */
	while ((h = *hp) != NULL) {
		while (O.nactive < ACTIVE_MAX &&
		    h->active < O.cf->http.callback_concurrency &&
		    (j = host_take_due(h, now, &next)) != NULL)
			job_start(j);
		if (h->active == 0 && h->head == NULL) {
			*hp = h->next;
			free(h);
			continue;
		}
		hp = &h->next;
	}
	return (int)(next - now);
}

static void
active_remove(struct job *j)
{
	struct job **p = &O.active;

	while (*p != j)
		p = &(*p)->next;
	*p = j->next;
	O.nactive--;
	j->h->active--;
}

/* j's message is delivered (2xx) or given up: its sender may hear. */
static void
mo_done(struct job *j, uint8_t state)
{
	struct msg *m = j->mo;
	struct reactor *r;

	j->mo = NULL;
	if (!(m->registered_delivery & 0x01) ||
	    (r = reactor_get(j->reactor)) == NULL) {
		msg_free(m);
		return;
	}
	m->message_state = state;
	m->task.fn = j->receipt;
	m->task.arg = m;
	reactor_post_task(r, &m->task);
}

/* One finished attempt: done, again later, or given up. */
static void
job_done(struct job *j, CURLcode rc)
{
	long code = 0;

	curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
	curl_multi_remove_handle(O.multi, j->easy);
	curl_easy_cleanup(j->easy);
	j->easy = NULL;
	active_remove(j);
	if (rc == CURLE_OK && code >= 200 && code < 300) {
		atomic_fetch_add(&O.sent, 1);
		if (j->mo != NULL)
			mo_done(j, SMPP_STATE_DELIVERED);
	} else if (!j->refused && j->attempts <= O.cf->http.callback_retries) {
		atomic_fetch_add(&O.retried, 1);
		j->due_ms = mono_ms() + 1000ull * http_cb_backoff(j->attempts);
		job_queue(j);
		return;
	} else {
		atomic_fetch_add(&O.failed, 1);
		if (log_limit_take(&O.lim, mono_ms() / 1000, "http-out", 0))
			log_warnx("http-out: %s: given up after %u attempts: "
			    "%s", j->host, j->attempts, j->refused ?
			    "its address is refused" : rc != CURLE_OK ?
			    curl_easy_strerror(rc) : "not answered 2xx");
		if (j->mo != NULL)
			mo_done(j, SMPP_STATE_UNDELIVERABLE);
	}
	if (j->kept != 0)
		O.keep.done(j->kept);
	atomic_fetch_sub(&O.pending, 1);
	job_free(j);
}

/* The transfers that ended: how many. */
static unsigned
reap(void)
{
	CURLMsg *m;
	int left;
	unsigned n = 0;

	while ((m = curl_multi_info_read(O.multi, &left)) != NULL) {
		struct job *j = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
		job_done(j, m->data.result);
		n++;
	}
	return n;
}

/* Forgets the receipts awaited past their deadline. */
static void
sweep(uint64_t now_ms)
{
	uint64_t now = (uint64_t)time(NULL);

	if (now_ms < O.next_sweep)
		return;
	O.next_sweep = now_ms + SWEEP_MS;
	for (size_t i = 0; i < WANT_BUCKETS; i++)
		for (struct want **p = &O.buckets[i]; *p != NULL;)
			if ((*p)->deadline < now)
				want_drop(p, true);
			else
				p = &(*p)->next;
}

/* What is left at the stop is lost (no store keeps it): counted. */
static void
drop_all(void)
{
	struct job *j;
	struct host *h;

	while ((j = O.active) != NULL) {
		curl_multi_remove_handle(O.multi, j->easy);
		curl_easy_cleanup(j->easy);
		O.active = j->next;
		atomic_fetch_add(&O.dropped, 1);
		atomic_fetch_sub(&O.pending, 1);
		job_free(j);
	}
	while ((h = O.hosts) != NULL) {
		while ((j = h->head) != NULL) {
			h->head = j->next;
			atomic_fetch_add(&O.dropped, 1);
			atomic_fetch_sub(&O.pending, 1);
			job_free(j);
		}
		O.hosts = h->next;
		free(h);
	}
	O.nactive = 0;
	for (size_t i = 0; i < WANT_BUCKETS; i++)
		while (O.buckets[i] != NULL)
			want_drop(&O.buckets[i], false);
}

static void *
out_main(void *arg)
{
	struct curl_waitfd wfd = { .fd = mailbox_fd(&O.mb),
	    .events = CURL_WAIT_POLLIN };
	int running, ms;

	(void)arg;
	pthread_setname_np(pthread_self(), "http-out");
	while (!O.stopping) {
		uint64_t now = mono_ms();

		mailbox_drain(&O.mb, NULL, MAILBOX_RUN);
		sweep(now);
		ms = start_due(now);
		curl_multi_perform(O.multi, &running);
		/*
		 * Ended transfers free places: the next posts start now, not
		 * after a poll that nothing else may end for a second.
		 */
		if (reap() > 0)
			continue;
		if (O.stopping)
			break;
		curl_multi_poll(O.multi, &wfd, 1, ms, NULL);
	}
	drop_all();
	return NULL;
}

int
http_out_open(const struct config *cf)
{
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK) {
		errno = EIO;
		return -1;
	}
	if (mailbox_init(&O.mb) < 0)
		return -1;
	if ((O.multi = curl_multi_init()) == NULL) {
		mailbox_fini(&O.mb, NULL);
		errno = ENOMEM;
		return -1;
	}
	O.buckets = xcalloc(WANT_BUCKETS, sizeof(*O.buckets));
	O.cf = config_ref((struct config *)cf);
	atomic_store(&O.queue_limit, cf->http.callback_queue);
	own_addrs_init();
	O.open = true;
	return 0;
}

int
http_out_adopt_want(const struct http_out_want *w, void *arg)
{
	struct want **p;

	(void)arg;
	if (!O.open || *(p = want_slot(w->id)) != NULL)
		return 0;
	*p = want_new(w);
	atomic_fetch_add(&O.awaited, 1);
	return 0;
}

void
http_out_keep_with(const struct http_out_keep *k)
{
	uint64_t floor = (uint64_t)time(NULL) << 20;

	O.keep = *k;
	if (O.next_kept < floor)
		O.next_kept = floor;
}

static void
op_wake(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	(void)arg;
	(void)st;
}

void
http_out_kept(uint64_t upto)
{
	uint64_t was = atomic_load(&O.kept_upto);

	while (was < upto &&
	    !atomic_compare_exchange_weak(&O.kept_upto, &was, upto))
		;
	if (O.open)
		mailbox_post_fn(&O.mb, op_wake, NULL);
}

int
http_out_adopt(uint64_t id, const char *url, const char *body, void *arg)
{
	struct job *j;
	unsigned port;

	(void)arg;
	if (!O.open)
		return 0;
	j = xcalloc(1, sizeof(*j));
	j->kept = id;
	j->url = xstrdup(url);
	if (body != NULL) {
		j->body = xstrdup(body);
		j->hdrs = curl_slist_append(NULL,
		    "Content-Type: application/json");
	}
	if (http_cb_url_host(url, j->host, sizeof(j->host), &port) < 0)
		j->host[0] = '\0';
	if (O.next_kept <= id)
		O.next_kept = id + 1;
	if (atomic_load(&O.kept_upto) < id)
		atomic_store(&O.kept_upto, id);
	atomic_fetch_add(&O.pending, 1);
	j->due_ms = mono_ms();
	job_queue(j);
	return 0;
}

int
http_out_start(void)
{
	int err;

	if (!O.open)
		return 0;
	if ((err = pthread_create(&O.thread, NULL, out_main, NULL)) != 0) {
		errno = err;
		return -1;
	}
	O.started = true;
	return 0;
}

void
http_out_stop(void)
{
	if (!O.started)
		return;
	mailbox_post_fn(&O.mb, op_stop, NULL);
	pthread_join(O.thread, NULL);
	O.started = false;
}

void
http_out_close(void)
{
	if (!O.open)
		return;
	http_out_stop();
	drop_all();
	O.open = false;
	mailbox_fini(&O.mb, NULL);
	curl_multi_cleanup(O.multi);
	free(O.buckets);
	O.buckets = NULL;
	config_unref(O.cf);
	O.cf = NULL;
	curl_global_cleanup();
}
