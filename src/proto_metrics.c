/* proto_metrics.c: the metrics protocol: HTTP/1.1 GET /metrics for Prometheus. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "conn.h"
#include "counter.h"
#include "metrics.h"
#include "proto.h"

/*
 * A request is a header block only: GET and HEAD carry no body, and a
 * request that says it has one is answered and the connection closed (we
 * never read bodies, so we could not find the next request). Requests are
 * answered in the order they came, one at a time, so pipelining works.
 */
#define HEADER_MAX		8192	/* over it: 431, then close */
#define REQUEST_TIMEOUT		10	/* s for an unfinished request */

#define CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

/*
 * The end of the header block in p[0..n): the length up to and with the
 * empty line (CRLF CRLF, or bare LFs, which RFC 9112 lets servers take),
 * or 0 if it has not come yet.
 */
static size_t
header_end(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n')
			continue;
		if (i + 1 < n && p[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static ssize_t
metrics_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	size_t end;

	(void)lim;
	end = header_end(p, n < HEADER_MAX + 3 ? n : HEADER_MAX + 3);
	if (end > 0 && end <= HEADER_MAX)
		return (ssize_t)end;
	/* Too long: on_message sees no end, answers 431 and closes. */
	if (n > HEADER_MAX)
		return (ssize_t)n;
	return 0;
}

/* What a request asked, as far as we care. */
struct request {
	char	method[16];
	bool	http10;
	unsigned hosts;			/* Host fields, absolute-form aside */
	bool	bad_host;		/* a Host value that is no uri-host */
	bool	close;			/* close after answering */
	bool	keep_alive;		/* Connection: keep-alive */
	bool	has_body;
	const char *path;		/* in the message; no NUL */
	size_t	pathlen;
};

static bool
is_tchar(uint8_t ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || (ch != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* The next line of p[*off..n), without its CR LF; false at the end. */
static bool
next_line(const uint8_t *p, size_t n, size_t *off, const uint8_t **line,
    size_t *len)
{
	size_t i = *off;

	if (i >= n)
		return false;
	while (i < n && p[i] != '\n')
		i++;
	*line = p + *off;
	*len = i - *off;
	if (*len > 0 && (*line)[*len - 1] == '\r')
		(*len)--;
	*off = i + 1;
	return true;
}

/* Whether the comma-separated list v[0..n) has token tok (any case). */
static bool
has_token(const uint8_t *v, size_t n, const char *tok)
{
	size_t tl = strlen(tok), i = 0;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tl && strncasecmp((const char *)v + s, tok,
		    tl) == 0)
			return true;
	}
	return false;
}

/*
 * HTTP-version "HTTP/" DIGIT "." DIGIT at l[0..n): 0 for 1.0 and 1.1, 505
 * for another version (RFC 9110 15.6.6), 400 for anything else.
 */
static int
parse_version(const uint8_t *l, size_t n, struct request *rq)
{
	if (n != 8 || memcmp(l, "HTTP/", 5) != 0 || l[6] != '.' ||
	    l[5] < '0' || l[5] > '9' || l[7] < '0' || l[7] > '9')
		return 400;
	if (l[5] != '1' || l[7] > '1')
		return 505;
	rq->http10 = l[7] == '0';
	return 0;
}

/* The request line "METHOD SP target SP HTTP/1.x": 0 or a status. */
static int
parse_request_line(const uint8_t *l, size_t n, struct request *rq)
{
	size_t i = 0, m;
	int status;

	while (i < n && is_tchar(l[i]))
		i++;
	if (i == 0 || i >= sizeof(rq->method) || i >= n || l[i] != ' ')
		return 400;
	memcpy(rq->method, l, i);
	rq->method[i] = '\0';
	m = ++i;
	while (i < n && l[i] > ' ' && l[i] < 0x7f)
		i++;
	if (i == m || i >= n || l[i] != ' ')
		return 400;
	rq->path = (const char *)l + m;
	rq->pathlen = i - m;
	i++;
	if ((status = parse_version(l + i, n - i, rq)) != 0)
		return status;
	/*
	 * absolute-form: http://host/path; the path is what we serve. It
	 * does not stand in for Host, which HTTP/1.1 still requires
	 * (RFC 9112 3.2).
	 */
	if (rq->pathlen > 7 && strncasecmp(rq->path, "http://", 7) == 0) {
		const char *s = memchr(rq->path + 7, '/', rq->pathlen - 7);
		size_t skip = s != NULL ? (size_t)(s - rq->path) : rq->pathlen;

		rq->path += skip;
		rq->pathlen -= skip;
	}
	return 0;
}

/* Whether ch may stand in a reg-name or an IP-literal (RFC 3986 3.2.2). */
static bool
is_host_char(uint8_t ch, bool literal)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9'))
		return true;
	if (ch == ':')
		return literal;
	return ch != '\0' && strchr("-._~!$&'()*+,;=%", ch) != NULL;
}

/*
 * Whether the Host value v[0..n) is uri-host [ ":" port ]; an empty one
 * is allowed (RFC 9112 3.2). Percent escapes are taken as they come.
 */
static bool
host_is_valid(const uint8_t *v, size_t n)
{
	size_t i;
	bool literal = n > 0 && v[0] == '[';

	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	for (i = literal ? 1 : 0; i < n && is_host_char(v[i], literal); i++)
		;
	if (literal) {
		if (i == 1 || i >= n || v[i] != ']')
			return false;
		i++;
	}
	if (i < n && v[i] == ':')
		for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++)
			;
	return i == n;
}

/* One header field "name: value". */
static bool
parse_field(const uint8_t *l, size_t n, struct request *rq)
{
	size_t i = 0, v;

	while (i < n && is_tchar(l[i]))
		i++;
	/* No name, no colon, or space before it (RFC 9112 5.1): refused. */
	if (i == 0 || i >= n || l[i] != ':')
		return false;
	v = i + 1;
	while (v < n && (l[v] == ' ' || l[v] == '\t'))
		v++;
	for (size_t k = v; k < n; k++)
		if ((l[k] < ' ' && l[k] != '\t') || l[k] == 0x7f)
			return false;
	if (i == 4 && strncasecmp((const char *)l, "host", 4) == 0) {
		rq->hosts++;
		if (!host_is_valid(l + v, n - v))
			rq->bad_host = true;
	}
	else if (i == 10 && strncasecmp((const char *)l, "connection", 10) ==
	    0) {
		if (has_token(l + v, n - v, "close"))
			rq->close = true;
		if (has_token(l + v, n - v, "keep-alive"))
			rq->keep_alive = true;
	} else if (i == 14 && strncasecmp((const char *)l, "content-length",
	    14) == 0) {
		bool digits = v < n, nonzero = false;

		for (size_t k = v; k < n; k++) {
			if (l[k] == ' ' || l[k] == '\t')
				continue;
			if (l[k] < '0' || l[k] > '9')
				digits = false;
			else if (l[k] != '0')
				nonzero = true;
		}
		if (!digits)
			return false;
		if (nonzero)
			rq->has_body = true;
	} else if (i == 17 && strncasecmp((const char *)l, "transfer-encoding",
	    17) == 0)
		rq->has_body = true;
	return true;
}

/* Parses a whole header block: 0, or the HTTP status to refuse it with. */
static int
parse_request(const uint8_t *p, size_t n, struct request *rq)
{
	const uint8_t *l;
	size_t len, off = 0;
	int status;

	memset(rq, 0, sizeof(*rq));
	/* frame_len hands over more than HEADER_MAX only when it is too long */
	if (n > HEADER_MAX || header_end(p, n) != n)
		return 431;
	/* RFC 9112 2.2: empty lines before the request line are skipped. */
	do {
		if (!next_line(p, n, &off, &l, &len))
			return 400;
	} while (len == 0);
	if ((status = parse_request_line(l, len, rq)) != 0)
		return status;
	while (next_line(p, n, &off, &l, &len) && len > 0) {
		if (l[0] == ' ' || l[0] == '\t')
			return 400;		/* obsolete line folding */
		if (!parse_field(l, len, rq))
			return 400;
	}
	/* RFC 9112 3.2: one valid Host, and HTTP/1.1 must send it. */
	if (rq->hosts > 1 || rq->bad_host || (!rq->http10 && rq->hosts == 0))
		return 400;
	if (rq->http10 && !rq->keep_alive)
		rq->close = true;
	return 0;
}

static const char *
status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

static void
count_status(struct conn *c, int status)
{
	enum counter_id id;

	switch (status) {
	case 400: id = COUNTER_HTTP_400; break;
	case 404: id = COUNTER_HTTP_404; break;
	case 405: id = COUNTER_HTTP_405; break;
	case 408: id = COUNTER_HTTP_408; break;
	case 431: id = COUNTER_HTTP_431; break;
	case 505: id = COUNTER_HTTP_505; break;
	default: return;
	}
	counter_add(&c->r->counters, id, 1);
}

/*
 * Writes the response head and (unless head_only) body. A body given as
 * NULL is the status line's text. connection: the Connection header's
 * value ("close"; "keep-alive" for HTTP/1.0), or NULL for none.
 */
static void
respond(struct conn *c, int status, const char *type, const void *body,
    size_t len, bool head_only, const char *connection)
{
	char head[512], date[64], text[64];
	struct tm tm;
	time_t now = time(NULL);
	int n;

	count_status(c, status);
	if (body == NULL) {
		snprintf(text, sizeof(text), "%d %s\n", status,
		    status_text(status));
		body = text;
		len = strlen(text);
	}
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n"
	    "Date: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s%s"
	    "\r\n", status, status_text(status), date, type, len,
	    status == 405 ? "Allow: GET, HEAD\r\n" : "",
	    connection != NULL ? "Connection: " : "",
	    connection != NULL ? connection : "",
	    connection != NULL ? "\r\n" : "");
	conn_write(c, head, (size_t)n);
	if (!head_only)
		conn_write(c, body, len);
}

/* The second an unfinished request was first seen, in pdata (0: none). */
static inline uintptr_t
partial_since(const struct conn *c)
{
	return (uintptr_t)c->pdata;
}

static int
metrics_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	struct request rq;
	int status = parse_request(msg, len, &rq);
	const char *connection;
	bool head;

	c->pdata = NULL;
	if (status != 0) {
		respond(c, status, "text/plain; charset=utf-8", NULL, 0, false,
		    "close");
		conn_close_after_flush(c, CONN_CLOSE_PROTOCOL);
		return 0;
	}
	head = strcmp(rq.method, "HEAD") == 0;
	/* A body we will not read: answer, then close. */
	if (rq.has_body)
		rq.close = true;
	connection = rq.close ? "close" : rq.http10 ? "keep-alive" : NULL;
	if (!head && strcmp(rq.method, "GET") != 0)
		respond(c, 405, "text/plain; charset=utf-8", NULL, 0, false,
		    connection);
	else if ((rq.pathlen == 8 || (rq.pathlen > 8 && rq.path[8] == '?')) &&
	    memcmp(rq.path, "/metrics", 8) == 0) {
		struct buf *body = buf_new();

		metrics_render(body);
		respond(c, 200, CONTENT_TYPE, buf_head(body), body->len, head,
		    connection);
		buf_free(body);
	} else
		respond(c, 404, "text/plain; charset=utf-8", NULL, 0, head,
		    connection);
	return rq.close ? -1 : 0;
}

/* A request begun and not finished within REQUEST_TIMEOUT: 408, close. */
static void
metrics_on_tick(struct conn *c)
{
	uint32_t now = c->r->now;

	if (conn_is_closing(c))
		return;
	if (conn_input_pending(c) == 0) {
		c->pdata = NULL;
		return;
	}
	if (partial_since(c) == 0) {
		c->pdata = (void *)(uintptr_t)(now + 1);
		return;
	}
	if (now + 1 - partial_since(c) >= REQUEST_TIMEOUT) {
		respond(c, 408, "text/plain; charset=utf-8", NULL, 0, false,
		    "close");
		conn_close_after_flush(c, CONN_CLOSE_TIMEOUT);
	}
}

const struct proto proto_metrics = {
	.name = "metrics",
	.frame_len = metrics_frame_len,
	.on_message = metrics_on_message,
	.on_tick = metrics_on_tick,
	.messages_counter = COUNTER_MSG_METRICS,
};
