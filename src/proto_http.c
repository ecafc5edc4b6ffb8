/* proto_http.c: the http protocol: Kannel's /cgi-bin/sendsms and the JSON API /api/v1/messages. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "config.h"
#include "conn.h"
#include "deliver.h"
#include "http.h"
#include "http_cb.h"
#include "http_out.h"
#include "http_send.h"
#include "proto.h"
#include "route.h"
#include "smpp_acct.h"
#include "util.h"

/*
 * Requests are answered in the order they came (HTTP/1.1 pipelining): a
 * send waits for every recipient's verdict, which may come from another
 * reactor, the store or another node, and the answers to later requests
 * queue behind it. Past HTTP_MAX_QUEUED answers not yet written, input is
 * held. A body is at most HTTP_BODY_MAX bytes (413, then close).
 */
#define HTTP_BODY_MAX		65536
#define HTTP_MAX_QUEUED		32
#define REQUEST_TIMEOUT		10	/* s for an unfinished request */

#define TEXT_PLAIN	"text/plain; charset=utf-8"
#define APP_JSON	"application/json"
#define FORM_TYPE	"application/x-www-form-urlencoded"

/* Kannel's answers (gw/smsbox.c), word for word. */
#define K_ACCEPTED	"0: Accepted for delivery"
#define K_QUEUED	"3: Queued for later delivery"
#define K_AUTH		"Authorization failed for sendsms"
#define K_NOROUTE	"Not routable. Do not try again."
#define K_TEMP		"Temporal failure, try again later."

enum http_kind {
	HK_DONE,		/* answer ready */
	HK_SENDSMS,		/* Kannel's: waits for verdicts */
	HK_SEND_JSON,		/* the JSON API's send: the same */
	HK_QUERY,		/* the JSON API's GET: waits for the store */
};

/* One request's answer, in request order. */
struct answer {
	struct answer *next;
	enum http_kind kind;
	enum http_endpoint endpoint;
	bool	close;			/* close once it is written */
	bool	http10_ka;		/* "Connection: keep-alive" */
	int	status;
	char	*body;
	size_t	len;
	const char *type;
	const char *extra;		/* more header lines, or NULL */
	/* sends: one verdict per recipient */
	unsigned n, waiting, parts;
	uint64_t *ids;
	uint8_t	*verdicts;		/* enum msg_verdict */
	bool	*stored;
	char	(*to)[ROUTE_ADDR_MAX + 1];
	uint32_t token;			/* HK_QUERY: its request */
	bool	receipts;		/* http-out awaits the receipts */
};

struct http_sess {
	struct answer *head;
	struct answer *tail;
	unsigned nqueued;
	unsigned npending;		/* answers awaiting verdicts */
	uint32_t next_token;
	uint32_t partial_since;		/* reactor second + 1; 0 none */
	bool	eof;
	bool	closing;		/* an answer that closes is queued */
};

static struct http_sess *
sess_of(struct conn *c)
{
	if (c->pdata == NULL)
		c->pdata = xcalloc(1, sizeof(struct http_sess));
	return c->pdata;
}

static void
answer_free(struct answer *a)
{
	free(a->body);
	free(a->ids);
	free(a->verdicts);
	free(a->stored);
	free(a->to);
	free(a);
}

/* Writes a's head and body. */
static void
answer_write(struct conn *c, const struct answer *a)
{
	char head[768];
	size_t n;

	counter_bump(&c->r->detail.http_requests[a->endpoint]
	    [http_status_index(a->status)], 1);
	n = http_head(head, sizeof(head), a->status, a->type, a->len,
	    a->close ? "close" : a->http10_ka ? "keep-alive" : NULL, a->extra);
	conn_write(c, head, n);
	if (a->len > 0)
		conn_write(c, a->body, a->len);
}

/* Holds input while too much is queued; releases it when it drains. */
static void
sess_update_hold(struct conn *c, struct http_sess *s)
{
	if (s->closing)
		return;
	if (s->nqueued >= HTTP_MAX_QUEUED)
		conn_hold(c);
	else if (s->nqueued < HTTP_MAX_QUEUED / 2)
		conn_release(c);
}

/* Writes the answers at the head of the queue that are ready. */
static void
sess_drain(struct conn *c, struct http_sess *s)
{
	struct answer *a;

	while ((a = s->head) != NULL && a->kind == HK_DONE) {
		s->head = a->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->nqueued--;
		answer_write(c, a);
		if (a->close)
			conn_close_after_flush(c, CONN_CLOSE_QUIT);
		answer_free(a);
	}
	sess_update_hold(c, s);
	if (s->eof && s->head == NULL && !conn_is_closing(c))
		conn_close_after_flush(c, CONN_CLOSE_PEER);
}

/* Queues a (ready or awaited) behind what is queued. */
static void
sess_append(struct conn *c, struct http_sess *s, struct answer *a)
{
	if (s->tail != NULL)
		s->tail->next = a;
	else
		s->head = a;
	s->tail = a;
	s->nqueued++;
	if (a->close) {
		s->closing = true;
		conn_hold(c);
	}
	sess_drain(c, s);
}

/* Sets a's body (copied) and type. */
static void
answer_set(struct answer *a, int status, const char *type, const char *body,
    size_t len)
{
	free(a->body);
	a->status = status;
	a->type = type;
	a->body = xmalloc(len + 1);
	memcpy(a->body, body, len);
	a->body[len] = '\0';
	a->len = len;
}

/* A plain text answer: the text and a line feed. */
static void
answer_text(struct answer *a, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
answer_text(struct answer *a, int status, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	answer_set(a, status, TEXT_PLAIN, buf, (size_t)n);
}

/* A JSON answer: o, which this takes. */
static void
answer_json(struct answer *a, int status, json_t *o)
{
	char *t = json_dumps(o, JSON_COMPACT);
	size_t n = t != NULL ? strlen(t) : 0;

	answer_set(a, status, APP_JSON, t != NULL ? t : "", n);
	if (a->len > 0)
		a->body[a->len] = '\n', a->len++;
	free(t);
	json_decref(o);
}

static void
answer_error(struct answer *a, int status, const char *why)
{
	answer_json(a, status, json_pack("{s:s}", "error", why));
}

/*
 * Whether the account may send as from ("": its id): its own id always,
 * but with no accounts to prove who it is, not while someone has logged
 * in with it; never another account or an address someone else holds;
 * its source_addrs prefixes only, when it lists some.
 */
static bool
from_allowed(const struct config *cf, const struct account_conf *acct,
    const char *from)
{
	if (from[0] == '\0' || strcmp(from, acct->id) == 0)
		return cf->naccounts > 0 || !route_is_claimed(acct->id);
	if (config_find_account(cf, from) != NULL || route_is_held(from))
		return false;
	if (acct->nsource_addrs == 0)
		return true;
	for (unsigned i = 0; i < acct->nsource_addrs; i++)
		if (strncmp(from, acct->source_addrs[i],
		    strlen(acct->source_addrs[i])) == 0)
			return true;
	return false;
}

/*
 * The account user/pass name, if it may use the API; NULL otherwise.
 * With no accounts configured, as for LOGIN and binds, any user name
 * that is a valid address sends as itself, without a password: anon is
 * filled in for it.
 */
static const struct account_conf *
http_account(const struct config *cf, const char *user, const char *pass,
    bool *no_http, struct account_conf *anon)
{
	const struct account_conf *acct;

	*no_http = false;
	if (cf->naccounts == 0) {
		if (!route_addr_valid(user, strlen(user)))
			return NULL;
		memset(anon, 0, sizeof(*anon));
		snprintf(anon->id, sizeof(anon->id), "%s", user);
		anon->http = true;
		return anon;
	}
	acct = config_find_account(cf, user);
	if (acct == NULL || !secret_eq(pass, acct->password))
		return NULL;
	if (!acct->http) {
		*no_http = true;
		return NULL;
	}
	return acct;
}

/* The receipts s asks for: Kannel's dlr-mask, or every final one (JSON). */
static int
receipt_mask(const struct http_send *s)
{
	if (s->dlr_mask < 0)
		return HTTP_DLR_DELIVERED | HTTP_DLR_UNDELIVERED |
		    HTTP_DLR_SMSC_REJECT;
	return s->dlr_mask;
}

/* Whether s asks for receipts: a URL, and (Kannel) a dlr-mask not 0. */
static bool
receipts_wanted(const struct http_send *s)
{
	return s->url[0] != '\0' && receipt_mask(s) != 0;
}

/*
 * Whether s's receipt URL may be called back, and there is room to await
 * its receipts; else a answered (Kannel's text or JSON), false.
 */
static bool
receipts_ok(struct conn *c, struct answer *a, const struct http_send *s,
    bool json)
{
	char why[200];

	if (!receipts_wanted(s))
		return true;
	if (http_out_check(c->r->cf, s->url, why, sizeof(why)) < 0) {
		char msg[260];

		snprintf(msg, sizeof(msg), "%s refused: %s", json ?
		    "\"receipt_url\"" : "dlr-url", why);
		if (json)
			answer_error(a, 403, msg);
		else
			answer_text(a, 403, "%s", msg);
		return false;
	}
	if (!http_out_admit(c->r->cf, s->nto)) {
		if (json)
			answer_error(a, 503, "too many receipts awaited, try "
			    "again later");
		else
			answer_text(a, 503, K_TEMP);
		return false;
	}
	a->receipts = true;
	return true;
}

/* One message of s for recipient to, from acct. */
static struct msg *
send_msg(struct conn *c, const struct account_conf *acct,
    const struct http_send *s, const char *to, uint64_t now)
{
	const char *from = s->from[0] != '\0' ? s->from : acct->id;
	struct msg *m = msg_new(s->len);

	memcpy(m->text, s->text, s->len);
	m->len = s->len;
	m->id = msg_next_id(c->r);
	m->read_ns = c->r->turn_ns;
	m->flags = MSG_F_PREFIX_FIRST | (s->coded ? MSG_F_CODED : 0);
	if (receipts_wanted(s)) {
		m->flags |= MSG_F_HTTP_RCPT;
		/* Final receipts come from the recipient's edge. */
		if (receipt_mask(s) & (HTTP_DLR_DELIVERED |
		    HTTP_DLR_UNDELIVERED | HTTP_DLR_SMSC_REJECT))
			m->registered_delivery = 0x01;
	}
	m->submitted = now;
	/* Times are kept by the store; without one there is nothing to. */
	if (deliver_kind_on(MSG_KIND_STORE)) {
		m->due = s->due;
		m->expires = s->expires;
	}
	m->esm_class = s->udhi ? 0x40 : 0;
	m->data_coding = s->data_coding;
	snprintf(m->src_addr, sizeof(m->src_addr), "%.20s", from);
	snprintf(m->dst_addr, sizeof(m->dst_addr), "%.20s", to);
	snprintf(m->reply_to, sizeof(m->reply_to), "%s", acct->id);
	snprintf(m->from, sizeof(m->from), "%s", from);
	snprintf(m->to, sizeof(m->to), "%s", to);
	return m;
}

/* Takes a max_tps token per recipient; false when over the limit. */
static bool
take_tokens(const struct account_conf *acct, unsigned n)
{
	if (acct->max_tps == 0)
		return true;
	for (unsigned i = 0; i < n; i++)
		if (!smpp_acct_take_token_any(acct->id, acct->max_tps))
			return false;
	return true;
}

/* Whether a verdict is a temporary failure: the client may try again. */
static bool
verdict_temporary(enum msg_verdict v)
{
	return v == MSG_BUSY || v == MSG_REFUSED || v == MSG_FULL ||
	    v == MSG_UNAVAILABLE || v == MSG_STORE_LOST || v == MSG_STORE;
}

/*
 * The recipient whose failure the answer tells: the first permanent
 * one, else the first temporary one; -1 when every one is OK.
 */
static int
worst_recipient(const struct answer *a)
{
	int temp = -1;

	for (unsigned i = 0; i < a->n; i++) {
		if (a->verdicts[i] == MSG_OK)
			continue;
		if (!verdict_temporary(a->verdicts[i]))
			return (int)i;
		if (temp < 0)
			temp = (int)i;
	}
	return temp;
}

static bool
any_stored(const struct answer *a)
{
	for (unsigned i = 0; i < a->n; i++)
		if (a->stored[i])
			return true;
	return false;
}

/* Kannel's answer once every verdict is in. */
static void
sendsms_finish(struct answer *a)
{
	int w = worst_recipient(a);
	char failed[1024] = "";
	size_t off = 0;

	if (w < 0) {
		answer_text(a, 202, "%s", any_stored(a) ? K_QUEUED :
		    K_ACCEPTED);
		return;
	}
	/* Several recipients: which failed, as Kannel says it. */
	if (a->n > 1) {
		off = (size_t)snprintf(failed, sizeof(failed),
		    " Failed receivers are:");
		for (unsigned i = 0; i < a->n && off < sizeof(failed); i++)
			if (a->verdicts[i] != MSG_OK)
				off += (size_t)snprintf(failed + off,
				    sizeof(failed) - off, " %s", a->to[i]);
	}
	switch (a->verdicts[w]) {
	case MSG_NO_ROUTE:
		answer_text(a, 403, K_NOROUTE "%s", failed);
		break;
	case MSG_TOO_LONG:
		answer_text(a, 400, "Message over the recipient's max_parts, "
		    "rejected%s", failed);
		break;
	case MSG_UNFIT:
		answer_text(a, 400, "Charset or body misformed, rejected%s",
		    failed);
		break;
	case MSG_REJECTED:
		/* For good: a client that tried again would fail again. */
		answer_text(a, 400, "Rejected by the SMS centre%s", failed);
		break;
	default:
		answer_text(a, 503, K_TEMP "%s", failed);
		break;
	}
}

/* The JSON API's answer once every verdict is in. */
static void
json_finish(struct answer *a)
{
	int w = worst_recipient(a);
	char id[24], why[160];
	json_t *o, *ids;

	if (w >= 0) {
		enum msg_verdict v = a->verdicts[w];

		snprintf(why, sizeof(why), "%s: %s", a->to[w],
		    v == MSG_TOO_LONG ? "over the recipient's max_parts" :
		    v == MSG_UNFIT ? "the recipient cannot take this text" :
		    msg_verdict_name(v));
		answer_error(a, v == MSG_NO_ROUTE ? 404 : verdict_temporary(v) ?
		    503 : 400, why);
		return;
	}
	snprintf(id, sizeof(id), "%" PRIu64, a->ids[0]);
	o = json_pack("{s:s,s:i,s:s}", "id", id, "parts", (int)a->parts,
	    "state", any_stored(a) ? "queued" : "accepted");
	if (a->n > 1) {
		ids = json_array();
		for (unsigned i = 0; i < a->n; i++) {
			snprintf(id, sizeof(id), "%" PRIu64, a->ids[i]);
			json_array_append_new(ids, json_string(id));
		}
		json_object_set_new(o, "ids", ids);
	}
	answer_json(a, 201, o);
}

/* A verdict for recipient i of a is in; the answer when all are. */
static void
answer_verdict(struct http_sess *s, struct answer *a, unsigned i,
    enum msg_verdict v, bool stored)
{
	a->verdicts[i] = (uint8_t)v;
	a->stored[i] = stored;
	if (a->receipts)
		http_out_verdict(a->ids[i], v == MSG_OK, stored);
	if (--a->waiting > 0)
		return;
	if (a->kind == HK_SENDSMS)
		sendsms_finish(a);
	else
		json_finish(a);
	a->kind = HK_DONE;
	s->npending--;
}

/*
 * Sends s's message to each recipient, answering a when every verdict is
 * in (now, or later through on_verdict).
 */
static void
send_all(struct conn *c, struct http_sess *hs, struct answer *a,
    const struct account_conf *acct, const struct http_send *s)
{
	uint64_t now = (uint64_t)time(NULL);

	a->n = a->waiting = s->nto;
	a->ids = xcalloc(s->nto, sizeof(*a->ids));
	a->verdicts = xcalloc(s->nto, sizeof(*a->verdicts));
	a->stored = xcalloc(s->nto, sizeof(*a->stored));
	a->to = xcalloc(s->nto, sizeof(*a->to));
	hs->npending++;
	for (unsigned i = 0; i < s->nto; i++) {
		struct msg *m = send_msg(c, acct, s, s->to[i], now);
		enum msg_verdict v;

		a->ids[i] = m->id;
		memcpy(a->to[i], s->to[i], sizeof(a->to[i]));
		/* Before it leaves: its receipt finds what it asked. */
		if (a->receipts)
			http_out_want(&(struct http_out_want){ .id = m->id,
			    .url = s->url, .json = a->kind == HK_SEND_JSON,
			    .mask = receipt_mask(s), .to = m->to,
			    .from = m->from });
		if ((v = deliver_send(c, m)) != MSG_PENDING)
			answer_verdict(hs, a, i, v, false);
	}
}

/* Kannel's sendsms, its fields in f. */
static void
sendsms(struct conn *c, struct http_sess *hs, struct answer *a,
    const struct http_form *f)
{
	const struct config *cf = c->r->cf;
	const struct account_conf *acct;
	struct http_send *s = xmalloc(sizeof(*s));
	struct account_conf *anon = xmalloc(sizeof(*anon));
	bool no_http;
	int st = http_send_form(f, (uint64_t)time(NULL), s);

	acct = http_account(cf, s->user, s->pass, &no_http, anon);
	if (acct == NULL)
		answer_text(a, 403, K_AUTH);
	else if (st != 0)
		answer_text(a, st, "%s", s->err);
	else if (!from_allowed(cf, acct, s->from))
		answer_text(a, 403, "Sender not allowed for this account, "
		    "rejected");
	else if (!take_tokens(acct, s->nto)) {
		counter_add(&c->r->counters, COUNTER_HTTP_THROTTLED, 1);
		answer_text(a, 503, K_TEMP);
	} else if (receipts_ok(c, a, s, false)) {
		a->kind = HK_SENDSMS;
		send_all(c, hs, a, acct, s);
	}
	http_send_fini(s);
	free(s);
	free(anon);
}

/* Whether the content type v[0..n) is type, parameters aside. */
static bool
ctype_is(const char *v, size_t n, const char *type)
{
	size_t k = strlen(type);

	return v != NULL && n >= k && strncasecmp(v, type, k) == 0 &&
	    (n == k || v[k] == ';' || v[k] == ' ');
}

/* GET with a query, or POST with a form: the fields, then sendsms. */
static void
route_sendsms(struct conn *c, struct http_sess *hs, struct answer *a,
    const struct http_req *rq)
{
	struct http_form f;
	const char *q = memchr(rq->path, '?', rq->pathlen);
	bool post = strcmp(rq->method, "POST") == 0;
	int rc;

	if (post && !ctype_is(rq->ctype, rq->ctypelen, FORM_TYPE)) {
		answer_text(a, 400, "Invalid content-type");
		return;
	}
	if (post)
		rc = http_form_parse((const char *)rq->body,
		    rq->content_length, &f);
	else
		rc = http_form_parse(q != NULL ? q + 1 : "", q != NULL ?
		    rq->pathlen - (size_t)(q + 1 - rq->path) : 0, &f);
	if (rc < 0)
		answer_text(a, 400, "%s", errno == E2BIG ?
		    "Too many fields, rejected" :
		    "Malformed %-escape in the fields, rejected");
	else
		sendsms(c, hs, a, &f);
	http_form_fini(&f);
}

/*
 * The account of a JSON API request's Basic credentials, or NULL with a
 * answered: 401 (none or wrong), 403 (the account has no http).
 */
static const struct account_conf *
json_auth(struct conn *c, struct answer *a, const struct http_req *rq,
    struct account_conf *anon)
{
	char user[HTTP_SEND_CRED_MAX + 1], pass[HTTP_SEND_CRED_MAX + 1];
	const struct account_conf *acct = NULL;
	bool no_http = false;

	if (rq->auth != NULL && http_basic_auth(rq->auth, rq->authlen, user,
	    sizeof(user), pass, sizeof(pass)))
		acct = http_account(c->r->cf, user, pass, &no_http, anon);
	if (acct != NULL)
		return acct;
	if (no_http)
		answer_error(a, 403, "this account may not use the HTTP API "
		    "(http = false)");
	else {
		answer_error(a, 401, "bad credentials");
		a->extra = "WWW-Authenticate: Basic realm=\"echorouterd\"\r\n";
	}
	return NULL;
}

/* POST /api/v1/messages */
static void
json_send(struct conn *c, struct http_sess *hs, struct answer *a,
    const struct http_req *rq)
{
	struct account_conf *anon = xmalloc(sizeof(*anon));
	const struct account_conf *acct;
	struct http_send *s;
	int st;

	if ((acct = json_auth(c, a, rq, anon)) == NULL) {
		free(anon);
		return;
	}
	if (!ctype_is(rq->ctype, rq->ctypelen, APP_JSON)) {
		answer_error(a, 415, "the body must be application/json");
		free(anon);
		return;
	}
	s = xmalloc(sizeof(*s));
	st = http_send_json((const char *)rq->body, rq->content_length,
	    (uint64_t)time(NULL), s);
	if (st != 0)
		answer_error(a, st, s->err);
	else if (!from_allowed(c->r->cf, acct, s->from))
		answer_error(a, 403, "\"from\" is not this account's to use");
	else if ((a->parts = (unsigned)http_send_parts(s)) == (unsigned)-1)
		answer_error(a, 400, "the text cannot be sent");
	else if (!take_tokens(acct, s->nto)) {
		counter_add(&c->r->counters, COUNTER_HTTP_THROTTLED, 1);
		answer_error(a, 429, "over the account's max_tps, try again "
		    "later");
	} else if (receipts_ok(c, a, s, true)) {
		a->kind = HK_SEND_JSON;
		send_all(c, hs, a, acct, s);
	}
	http_send_fini(s);
	free(s);
	free(anon);
}

static const char *
state_name(uint8_t state)
{
	switch (state) {
	case MSG_STATE_ENROUTE: return "enroute";
	case MSG_STATE_DELIVERED: return "delivered";
	case MSG_STATE_EXPIRED: return "expired";
	case MSG_STATE_DELETED: return "deleted";
	case MSG_STATE_UNDELIVERABLE: return "undeliverable";
	default: return "unknown";
	}
}

/* On the session's reactor: the store answered a GET. */
static void
query_done(void *owner, void *arg, enum mailbox_status st)
{
	struct msg_req *q = arg;
	struct http_sess *s;
	struct answer *a;
	struct conn *c;
	char id[24];

	if (st != MAILBOX_RUN || owner == NULL ||
	    (c = conn_resolve(owner, &q->conn)) == NULL ||
	    (s = c->pdata) == NULL) {
		free(q);
		return;
	}
	for (a = s->head; a != NULL && !(a->kind == HK_QUERY &&
	    a->token == q->seq); a = a->next)
		;
	if (a != NULL) {
		snprintf(id, sizeof(id), "%" PRIu64, q->id);
		if (!q->ok)
			answer_error(a, 404, "no such message of this account");
		else
			answer_json(a, 200, json_pack("{s:s,s:s,s:I}", "id", id,
			    "state", state_name(q->state), "final_date",
			    (json_int_t)q->final_date));
		a->kind = HK_DONE;
		s->npending--;
		sess_drain(c, s);
	}
	free(q);
}

/* GET /api/v1/messages/<id>: what the store knows. */
static void
json_query(struct conn *c, struct http_sess *hs, struct answer *a,
    const struct http_req *rq, const char *idp, size_t idlen)
{
	struct account_conf anon;
	const struct account_conf *acct;
	struct msg_req *q;
	uint64_t id = 0;
	size_t i;

	if ((acct = json_auth(c, a, rq, &anon)) == NULL)
		return;
	for (i = 0; i < idlen && i < 20 && idp[i] >= '0' && idp[i] <= '9'; i++)
		id = id * 10 + (uint64_t)(idp[i] - '0');
	if (i == 0 || i != idlen || i == 20 || id == 0) {
		answer_error(a, 404, "no such message");
		return;
	}
	if (!deliver_kind_on(MSG_KIND_STORE)) {
		answer_error(a, 404, "no store: messages are not kept, so "
		    "there is nothing to tell");
		return;
	}
	q = xcalloc(1, sizeof(*q) + 1);
	q->kind = MSG_REQ_QUERY;
	q->conn = conn_handle(c);
	q->done = query_done;
	q->seq = a->token = ++hs->next_token;
	q->id = id;
	snprintf(q->submitter, sizeof(q->submitter), "%s", acct->id);
	if (deliver_request(MSG_KIND_STORE, q) < 0) {
		free(q);
		answer_error(a, 503, "the store cannot be asked now");
		return;
	}
	a->kind = HK_QUERY;
	hs->npending++;
}

#define API_PATH	"/api/v1/messages"

_Static_assert(HTTP_EP_N == COUNTER_HTTP_ENDPOINTS &&
    HTTP_STATUS_INDEXES == COUNTER_HTTP_STATUSES,
    "/metrics' http table fits the endpoints and statuses");

/* Dispatches by path and method. */
static void
route_request(struct conn *c, struct http_sess *hs, struct answer *a,
    const struct http_req *rq)
{
	/* (HEAD would send, or ask the store, for nothing: 405.) */
	bool get = strcmp(rq->method, "GET") == 0;
	bool post = strcmp(rq->method, "POST") == 0;
	size_t k = strlen(API_PATH);

	if (http_path_is(rq->path, rq->pathlen, "/cgi-bin/sendsms")) {
		a->endpoint = HTTP_EP_SENDSMS;
		if (get || post)
			route_sendsms(c, hs, a, rq);
		else {
			answer_text(a, 405, "405 Method Not Allowed");
			a->extra = "Allow: GET, POST\r\n";
		}
	} else if (http_path_is(rq->path, rq->pathlen, API_PATH)) {
		a->endpoint = HTTP_EP_SEND;
		if (post)
			json_send(c, hs, a, rq);
		else {
			answer_error(a, 405, "POST a message here");
			a->extra = "Allow: POST\r\n";
		}
	} else if (rq->pathlen > k + 1 && memcmp(rq->path, API_PATH, k) == 0 &&
	    rq->path[k] == '/') {
		const char *id = rq->path + k + 1, *qm;
		size_t n = rq->pathlen - k - 1;

		if ((qm = memchr(id, '?', n)) != NULL)
			n = (size_t)(qm - id);
		a->endpoint = HTTP_EP_QUERY;
		if (get)
			json_query(c, hs, a, rq, id, n);
		else {
			answer_error(a, 405, "GET a message's state here");
			a->extra = "Allow: GET\r\n";
		}
	} else
		answer_text(a, 404, "Unknown request.");
}

static ssize_t
http_proto_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	(void)lim;
	return http_frame_len(p, n, HTTP_BODY_MAX);
}

static int
http_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	struct http_sess *hs = sess_of(c);
	struct answer *a = xcalloc(1, sizeof(*a));
	struct http_req rq;

	a->endpoint = HTTP_EP_OTHER;
	int status = http_parse(msg, len, HTTP_BODY_MAX, &rq);

	hs->partial_since = 0;
	a->kind = HK_DONE;
	if (status != 0) {
		/* What it was cannot be told: answer, then close. */
		answer_text(a, status, "%d %s", status,
		    http_status_text(status));
		a->close = true;
	} else {
		a->close = rq.close;
		a->http10_ka = rq.http10 && !rq.close;
		route_request(c, hs, a, &rq);
	}
	sess_append(c, hs, a);
	return 0;
}

static void
http_on_verdict(struct conn *c, const struct msg *m)
{
	struct http_sess *s = c->pdata;
	struct answer *a;

	if (s == NULL)
		return;
	for (a = s->head; a != NULL; a = a->next) {
		if (a->kind != HK_SENDSMS && a->kind != HK_SEND_JSON)
			continue;
		for (unsigned i = 0; i < a->n; i++)
			if (a->ids[i] == m->id) {
				answer_verdict(s, a, i, m->verdict,
				    m->verdict == MSG_OK &&
				    m->store_acct != NULL);
				sess_drain(c, s);
				return;
			}
	}
}

/* A request begun and not finished within REQUEST_TIMEOUT: 408, close. */
static void
http_on_tick(struct conn *c)
{
	struct http_sess *s = c->pdata;
	uint32_t now = c->r->now;
	struct answer *a;

	if (conn_is_closing(c) || (s != NULL && s->closing))
		return;
	if (conn_input_pending(c) == 0 || conn_is_held(c)) {
		if (s != NULL)
			s->partial_since = 0;
		return;
	}
	/* (The first request of a connection has no session yet.) */
	s = sess_of(c);
	if (s->partial_since == 0) {
		s->partial_since = now + 1;
		return;
	}
	if (now + 1 - s->partial_since >= REQUEST_TIMEOUT) {
		a = xcalloc(1, sizeof(*a));
		a->endpoint = HTTP_EP_OTHER;
		answer_text(a, 408, "408 Request Timeout");
		a->close = true;
		sess_append(c, s, a);
	}
}

/* The client half-closed: answer what it sent before closing. */
static bool
http_on_eof(struct conn *c)
{
	struct http_sess *s = c->pdata;

	if (s == NULL || s->head == NULL)
		return false;
	s->eof = true;
	return true;
}

static bool
http_owes_answers(const struct conn *c)
{
	const struct http_sess *s = c->pdata;

	return s != NULL && s->npending > 0;
}

static void
http_on_close(struct conn *c)
{
	struct http_sess *s = c->pdata;
	struct answer *a;

	if (s == NULL)
		return;
	while ((a = s->head) != NULL) {
		s->head = a->next;
		answer_free(a);
	}
	free(s);
	c->pdata = NULL;
}

const struct proto proto_http = {
	.name = "http",
	.frame_len = http_proto_frame_len,
	.on_message = http_on_message,
	.on_eof = http_on_eof,
	.on_close = http_on_close,
	.owes_answers = http_owes_answers,
	.on_verdict = http_on_verdict,
	.on_tick = http_on_tick,
	.messages_counter = COUNTER_MSG_HTTP,
};
