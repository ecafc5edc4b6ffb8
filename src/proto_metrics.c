/* proto_metrics.c: the metrics protocol: HTTP/1.1 GET /metrics for Prometheus. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "conn.h"
#include "counter.h"
#include "http.h"
#include "metrics.h"
#include "proto.h"

/*
 * A request is a header block only: GET and HEAD carry no body, and a
 * request that says it has one is answered and the connection closed (we
 * never read bodies, so we could not find the next request). Requests are
 * answered in the order they came, one at a time, so pipelining works.
 */
#define REQUEST_TIMEOUT		10	/* s for an unfinished request */

#define CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

static ssize_t
metrics_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	(void)lim;
	return http_frame_len(p, n, 0);
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
	char head[512], text[64];
	size_t n;

	count_status(c, status);
	if (body == NULL) {
		snprintf(text, sizeof(text), "%d %s\n", status,
		    http_status_text(status));
		body = text;
		len = strlen(text);
	}
	n = http_head(head, sizeof(head), status, type, len, connection,
	    status == 405 ? "Allow: GET, HEAD\r\n" : NULL);
	conn_write(c, head, n);
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
	struct http_req rq;
	int status = http_parse(msg, len, 0, &rq);
	const char *connection;
	bool head;

	c->pdata = NULL;
	/* A body (or chunks) we will not read: answer, then close. */
	if (status == 411 || status == 413) {
		status = 0;
		rq.close = true;
	}
	if (status != 0) {
		respond(c, status, "text/plain; charset=utf-8", NULL, 0, false,
		    "close");
		conn_close_after_flush(c, CONN_CLOSE_PROTOCOL);
		return 0;
	}
	head = strcmp(rq.method, "HEAD") == 0;
	connection = rq.close ? "close" : rq.http10 ? "keep-alive" : NULL;
	if (!head && strcmp(rq.method, "GET") != 0)
		respond(c, 405, "text/plain; charset=utf-8", NULL, 0, false,
		    connection);
	else if (http_path_is(rq.path, rq.pathlen, "/metrics")) {
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
