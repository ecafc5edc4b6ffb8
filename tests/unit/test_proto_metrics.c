/* test_proto_metrics.c: HTTP framing at a guard page; requests, errors and the exposition on a reactor. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "counter.h"
#include "helpers.h"
#include "metrics.h"
#include "proto.h"
#include "reactor.h"
#include "suites.h"

static const struct limits test_limits = { .max_line = 64 };

/* frame_len on s, placed at a guard page so that a read past it faults. */
static ssize_t
frame(const char *s, size_t n)
{
	struct unit_guard g;
	const uint8_t *p = unit_guarded(s, n, &g);
	ssize_t len = proto_metrics.frame_len(p, n, &test_limits);

	unit_guard_free(&g);
	return len;
}

START_TEST(metrics_frame_byte_by_byte)
{
	static const char *const reqs[] = {
		"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /metrics HTTP/1.1\nHost: a\n\n",
		"HEAD / HTTP/1.0\r\n\r\n",
	};

	for (size_t k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++) {
		size_t n = strlen(reqs[k]);

		for (size_t i = 0; i < n; i++)
			ck_assert_int_eq(frame(reqs[k], i), 0);
		ck_assert_int_eq(frame(reqs[k], n), (ssize_t)n);
	}
}
END_TEST

/* The first of two pipelined requests is framed alone. */
START_TEST(metrics_frame_pipelined)
{
	const char *two = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
	    "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";

	ck_assert_int_eq(frame(two, strlen(two)), (ssize_t)strlen(two) / 2);
}
END_TEST

/* Past 8 KiB without an end, everything is handed over (for a 431). */
START_TEST(metrics_frame_too_long)
{
	char *big = malloc(9000);

	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	memset(big + 19, 'a', 9000 - 19);
	ck_assert_int_eq(frame(big, 8192), 0);
	ck_assert_int_eq(frame(big, 8193), 8193);
	ck_assert_int_eq(frame(big, 9000), 9000);
	free(big);
}
END_TEST

/* A reactor with one metrics connection on a socketpair. */
struct session {
	struct config *cf;
	struct reactor *r;
	int	fd;
};

/*
 * A connected TCP pair on loopback: the daemon's lingering close
 * half-closes and waits on the kernel's send queue, as with real clients.
 */
static void
tcp_pair(int sv[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &alen), 0);
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(sv[0], (struct sockaddr *)&a, sizeof(a)), 0);
	sv[1] = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	ck_assert_int_ge(sv[1], 0);
	close(l);
}

/* A session whose config has extra settings (limits, say). */
static void
session_start_with(struct session *s, const char *extra)
{
	char text[1024];
	int sv[2];

	snprintf(text, sizeof(text), "shutdown_timeout = 1;\n"
	    "listeners = ( { name = \"m\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"metrics\"; } );\n%s", extra);
	s->cf = unit_config(text);
	s->r = reactor_new(0, s->cf);
	ck_assert_ptr_nonnull(s->r);
	metrics_init(&s->r, 1, NULL, s->cf);
	tcp_pair(sv);
	ck_assert_int_eq(reactor_start(s->r), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(s->r, sv[1], &proto_metrics, 0, NULL, NULL);
	s->fd = sv[0];
}

static void
session_start(struct session *s)
{
	session_start_with(s, "");
}

static void
session_end(struct session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	reactor_stop(s->r);
	reactor_join(s->r);
	reactor_free(s->r);
	config_unref(s->cf);
	atomic_store(&conn_live, 0);
}

static void
send_str(int fd, const char *p)
{
	size_t n = strlen(p);

	while (n > 0) {
		ssize_t k = write(fd, p, n);

		ck_assert_msg(k > 0, "write: %s", strerror(errno));
		p += k;
		n -= (size_t)k;
	}
}

/* What came back, read within 5 s: up to cap bytes, until EOF or want. */
struct reply {
	char	buf[262144];
	size_t	len;
	bool	eof;
};

/* Reads until r holds a whole response at off (or EOF); 5 s at most. */
static void
read_more(int fd, struct reply *r)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	ck_assert_msg(poll(&pfd, 1, 5000) == 1, "no answer within 5 s; "
	    "have %zu bytes: %.*s", r->len, (int)r->len, r->buf);
	n = read(fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len);
	ck_assert_int_ge(n, 0);
	if (n == 0)
		r->eof = true;
	r->len += (size_t)n;
	r->buf[r->len] = '\0';
}

/*
 * One response at r->buf + *off: its status, the value of header name
 * (into hv, "" if absent), and its body (Content-Length bytes, or none for
 * HEAD). Reads as needed; moves *off past it.
 */
static int
response(int fd, struct reply *r, size_t *off, bool head, const char *name,
    char *hv, size_t hvlen, const char **body, size_t *blen)
{
	char *end, *p, *cl;
	size_t hlen, clen;
	int status;

	while ((end = strstr(r->buf + *off, "\r\n\r\n")) == NULL) {
		ck_assert_msg(!r->eof, "closed mid-head: %s", r->buf + *off);
		read_more(fd, r);
	}
	p = r->buf + *off;
	hlen = (size_t)(end + 4 - p);
	ck_assert_msg(sscanf(p, "HTTP/1.1 %d ", &status) == 1, "status: %s",
	    p);
	cl = strcasestr(p, "\r\nContent-Length: ");
	ck_assert_msg(cl != NULL && cl < end, "no Content-Length: %s", p);
	clen = strtoul(cl + 18, NULL, 10);
	if (hv != NULL) {
		char pat[64], *h;

		snprintf(pat, sizeof(pat), "\r\n%s: ", name);
		hv[0] = '\0';
		if ((h = strcasestr(p, pat)) != NULL && h < end)
			snprintf(hv, hvlen, "%.*s", (int)strcspn(h +
			    strlen(pat), "\r"), h + strlen(pat));
	}
	if (head)
		clen = 0;
	while (r->len - *off < hlen + clen) {
		ck_assert_msg(!r->eof, "closed mid-body");
		read_more(fd, r);
	}
	if (body != NULL) {
		*body = r->buf + *off + hlen;
		*blen = clen;
	}
	*off += hlen + clen;
	return status;
}

static void
expect_eof(int fd, struct reply *r, size_t off)
{
	while (!r->eof)
		read_more(fd, r);
	ck_assert_msg(r->len == off, "bytes after the last response: %s",
	    r->buf + off);
}

/* Pipelined requests are answered in order; HEAD has no body. */
START_TEST(metrics_pipelined_in_order)
{
	static struct reply r;
	struct session s;
	const char *body;
	char ct[128], allow[64];
	size_t off = 0, blen, hlen;
	int st;

	session_start(&s);
	r.len = 0;
	r.eof = false;
	send_str(s.fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	    "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
	    "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	    "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	st = response(s.fd, &r, &off, false, "Content-Type", ct, sizeof(ct),
	    &body, &blen);
	ck_assert_int_eq(st, 200);
	ck_assert_str_eq(ct, "text/plain; version=0.0.4; charset=utf-8");
	ck_assert_msg(blen > 1000 && strstr(body, "# TYPE ") == body + strcspn(
	    body, "\n") + 1, "body: %.200s", body);
	hlen = off - blen;
	st = response(s.fd, &r, &off, true, "Content-Length", ct, sizeof(ct),
	    NULL, NULL);
	ck_assert_int_eq(st, 200);
	/* HEAD: the same length (within what the counters changed), no body */
	ck_assert_uint_gt(strtoul(ct, NULL, 10), blen - 200);
	(void)hlen;
	ck_assert_int_eq(response(s.fd, &r, &off, false, NULL, NULL, 0, NULL,
	    NULL), 404);
	ck_assert_int_eq(response(s.fd, &r, &off, false, "Allow", allow,
	    sizeof(allow), NULL, NULL), 405);
	ck_assert_str_eq(allow, "GET, HEAD");
	ck_assert_int_eq(response(s.fd, &r, &off, false, "Connection", ct,
	    sizeof(ct), NULL, NULL), 200);
	ck_assert_str_eq(ct, "close");
	expect_eof(s.fd, &r, off);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_HTTP_404), 1);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_HTTP_405), 1);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_MSG_METRICS), 5);
	session_end(&s);
}
END_TEST

/* Each bad request gets its status, then the connection closes. */
static const struct {
	const char *req;
	int	status;
	enum counter_id counter;
} bad_cases[] = {
		{ "GET /metrics HTTP/1.1\r\n\r\n", 400, COUNTER_HTTP_400 },
		{ "GET /metrics\r\nHost: x\r\n\r\n", 400, COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 505,
		    COUNTER_HTTP_505 },
		{ "GET /metrics HTTP/1.9\r\nHost: x\r\n\r\n", 505,
		    COUNTER_HTTP_505 },
		{ "GET /metrics HTTP/1.10\r\nHost: x\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		/* RFC 9112 3.2: absolute-form does not stand in for Host */
		{ "GET http://x/metrics HTTP/1.1\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n",
		    400, COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.0\r\nHost: x\r\nHost: x\r\n\r\n",
		    400, COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: a b\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: a/b\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: a:80x\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: [::1\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
		{ "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n"
		    "\r\n", 400, COUNTER_HTTP_400 },
		{ "\x16\x03\x01\x02\x01\x01\x01\xfc\x03\x03\r\n\r\n", 400,
		    COUNTER_HTTP_400 },
};

START_TEST(metrics_bad_requests)
{
	static struct reply r;
	struct session s;
	size_t off = 0;

	session_start(&s);
	send_str(s.fd, bad_cases[_i].req);
	ck_assert_msg(response(s.fd, &r, &off, false, NULL, NULL, 0, NULL,
	    NULL) == bad_cases[_i].status, "case %d: %.200s", _i, r.buf);
	expect_eof(s.fd, &r, off);
	ck_assert_uint_eq(counter_get(&s.r->counters, bad_cases[_i].counter),
	    1);
	session_end(&s);
}
END_TEST

/* Over 8 KiB of header, ended or not: 431, then close. */
START_TEST(metrics_431)
{
	static struct reply r;
	struct session s;
	char *big = malloc(10000);
	size_t off = 0;

	session_start(&s);
	r.len = 0;
	r.eof = false;
	memcpy(big, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: ", 40);
	memset(big + 40, 'a', 10000 - 41);
	big[9999] = '\0';
	if (_i == 1)		/* ended, but too late: still refused */
		memcpy(big + 9995, "\r\n\r\n", 4);
	send_str(s.fd, big);
	ck_assert_int_eq(response(s.fd, &r, &off, false, NULL, NULL, 0, NULL,
	    NULL), 431);
	expect_eof(s.fd, &r, off);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_HTTP_431), 1);
	session_end(&s);
	free(big);
}
END_TEST

/* HTTP/1.0 with keep-alive stays open, and says so. */
START_TEST(metrics_http10_keep_alive)
{
	static struct reply r;
	struct session s;
	char hv[64];
	size_t off = 0;

	session_start(&s);
	send_str(s.fd, "GET /metrics HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"
	    "GET /nope HTTP/1.0\r\n\r\n");
	ck_assert_int_eq(response(s.fd, &r, &off, false, "Connection", hv,
	    sizeof(hv), NULL, NULL), 200);
	ck_assert_str_eq(hv, "keep-alive");
	ck_assert_int_eq(response(s.fd, &r, &off, false, "Connection", hv,
	    sizeof(hv), NULL, NULL), 404);
	ck_assert_str_eq(hv, "close");
	expect_eof(s.fd, &r, off);
	session_end(&s);
}
END_TEST

START_TEST(metrics_http10_closes)
{
	static struct reply r;
	struct session s;
	size_t off = 0;

	session_start(&s);
	send_str(s.fd, "GET /metrics HTTP/1.0\r\n\r\n");
	ck_assert_int_eq(response(s.fd, &r, &off, false, NULL, NULL, 0, NULL,
	    NULL), 200);
	expect_eof(s.fd, &r, off);
	session_end(&s);
}
END_TEST

/* Host in each form RFC 9112 3.2 allows, absolute-form with it: 200. */
START_TEST(metrics_host_forms_accepted)
{
	static struct reply r;
	struct session s;
	size_t off = 0;

	session_start(&s);
	send_str(s.fd, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9477\r\n\r\n"
	    "GET /metrics HTTP/1.1\r\nHost: [::1]:9477 \r\n\r\n"
	    "GET /metrics HTTP/1.1\r\nHost: metrics.example_1\r\n\r\n"
	    "GET /metrics HTTP/1.1\r\nHost:\r\n\r\n"
	    "GET http://x/metrics HTTP/1.1\r\nHost: x\r\n"
	    "Connection: close\r\n\r\n");
	for (int i = 0; i < 5; i++)
		ck_assert_msg(response(s.fd, &r, &off, false, NULL, NULL, 0,
		    NULL, NULL) == 200, "request %d: %.200s", i, r.buf + off);
	expect_eof(s.fd, &r, off);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_HTTP_400), 0);
	session_end(&s);
}
END_TEST

/*
 * Reads whole responses from fd as they come, keeping only the one being
 * read, until EOF or no byte for 10 s. Each must be a 200 with a body;
 * returns how many came.
 */
static unsigned
read_all_responses(int fd)
{
	const size_t cap = 1 << 20;
	char *b = malloc(cap + 1), *end;
	size_t len = 0, need;
	unsigned count = 0;

	ck_assert_ptr_nonnull(b);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		b[len] = '\0';
		while ((end = strstr(b, "\r\n\r\n")) != NULL) {
			char *cl = strcasestr(b, "\r\nContent-Length: ");

			ck_assert_msg(strncmp(b, "HTTP/1.1 200 ", 13) == 0 &&
			    cl != NULL && cl < end, "response %u: %.200s",
			    count, b);
			need = (size_t)(end + 4 - b) +
			    strtoul(cl + 18, NULL, 10);
			if (len < need)
				break;
			memmove(b, b + need, len - need);
			len -= need;
			b[len] = '\0';
			count++;
		}
		ck_assert_msg(poll(&pfd, 1, 10000) == 1, "stalled after %u "
		    "responses", count);
		n = read(fd, b + len, cap - len);
		ck_assert_msg(n >= 0, "read after %u responses: %s", count,
		    strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
	}
	ck_assert_msg(len == 0, "%zu bytes of a response cut off", len);
	free(b);
	return count;
}

/*
 * 1,000 requests in one write, from a client that reads all the time:
 * each is answered (with a KiB or more), none gets the client closed as a
 * slow consumer. The answers go out as the output drains below
 * output_high_watermark, not all at once against output_limit.
 */
START_TEST(metrics_pipelined_1000_not_slow_consumer)
{
	const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *last = "GET /metrics HTTP/1.1\r\nHost: x\r\n"
	    "Connection: close\r\n\r\n";
	size_t rl = strlen(req), n = 0;
	char *all = malloc(1000 * rl + strlen(last) + 1);
	struct session s;

	session_start_with(&s, "limits = { output_high_watermark = 65536; "
	    "output_limit = 262144; };\n");
	for (int i = 0; i < 999; i++, n += rl)
		memcpy(all + n, req, rl);
	strcpy(all + n, last);
	send_str(s.fd, all);
	ck_assert_uint_eq(read_all_responses(s.fd), 1000);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_CLOSED_SLOW), 0);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_MSG_METRICS),
	    1000);
	free(all);
	session_end(&s);
}
END_TEST

/* A request left unfinished gets 408 and a close within about 11 s. */
START_TEST(metrics_unfinished_request_408)
{
	static struct reply r;
	struct session s;
	size_t off = 0;
	uint64_t t0 = unit_now_ms();

	session_start(&s);
	r.len = 0;
	r.eof = false;
	send_str(s.fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
	while (strstr(r.buf, "\r\n\r\n") == NULL && !r.eof) {
		struct pollfd pfd = { .fd = s.fd, .events = POLLIN };

		ck_assert_msg(unit_now_ms() - t0 < 15000, "no 408 in 15 s");
		if (poll(&pfd, 1, 1000) == 1)
			read_more(s.fd, &r);
	}
	ck_assert_uint_ge(unit_now_ms() - t0, 9000);
	ck_assert_int_eq(response(s.fd, &r, &off, false, NULL, NULL, 0, NULL,
	    NULL), 408);
	expect_eof(s.fd, &r, off);
	ck_assert_uint_eq(counter_get(&s.r->counters, COUNTER_HTTP_408), 1);
	session_end(&s);
}
END_TEST

/* The family a sample belongs to: its name less a histogram suffix. */
static void
sample_family(const char *line, char *fam, size_t len, const char *type)
{
	size_t n = strcspn(line, "{ ");
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };

	snprintf(fam, len, "%.*s", (int)n, line);
	if (strcmp(type, "histogram") != 0)
		return;
	for (size_t i = 0; i < 3; i++) {
		size_t fl = strlen(fam), sl = strlen(sfx[i]);

		if (fl > sl && strcmp(fam + fl - sl, sfx[i]) == 0) {
			fam[fl - sl] = '\0';
			return;
		}
	}
}

/*
 * The exposition's shape: one HELP and one TYPE per family, before its
 * samples, every sample under its family; histogram buckets cumulative
 * and ending with +Inf equal to _count; observations land in the bucket
 * their bound says.
 */
START_TEST(metrics_exposition_shape)
{
	struct config *cf = unit_config("listeners = ( { name = \"m\"; "
	    "address = \"127.0.0.1\"; port = 0; protocol = \"metrics\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	struct buf *out = buf_new();
	char *text, *line, *save, fam[128] = "", type[16] = "";
	char seen[64][128];
	unsigned nseen = 0, nsamples = 0;
	uint64_t last_bucket = 0;
	bool checked_route = false;

	ck_assert_ptr_nonnull(r);
	metrics_init(&r, 1, NULL, cf);
	counter_observe(&r->detail.hist[HIST_ROUTE], 4000);	/* <= 5 us */
	counter_observe(&r->detail.hist[HIST_ROUTE], 5000);	/* <= 5 us */
	counter_observe(&r->detail.hist[HIST_ROUTE], 2000000);	/* <= 2.5 ms */
	counter_observe(&r->detail.hist[HIST_ROUTE], 20000000000ull); /* +Inf */
	metrics_render(out);
	text = strndup((const char *)buf_head(out), out->len);
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char name[128], sfam[128];

		if (strncmp(line, "# HELP ", 7) == 0) {
			snprintf(name, sizeof(name), "%.*s",
			    (int)strcspn(line + 7, " "), line + 7);
			for (unsigned i = 0; i < nseen; i++)
				ck_assert_msg(strcmp(seen[i], name) != 0,
				    "%s: two HELP lines", name);
			ck_assert_uint_lt(nseen, 64);
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", name);
			snprintf(fam, sizeof(fam), "%s", name);
			type[0] = '\0';
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			ck_assert_msg(sscanf(line + 7, "%127s %15s", name,
			    type) == 2 && strcmp(name, fam) == 0,
			    "TYPE not after its HELP: %s", line);
			ck_assert_msg(strcmp(type, "counter") == 0 ||
			    strcmp(type, "gauge") == 0 ||
			    strcmp(type, "histogram") == 0, "%s", line);
			last_bucket = 0;
			continue;
		}
		ck_assert_msg(line[0] != '#', "stray comment: %s", line);
		ck_assert_msg(type[0] != '\0', "sample before TYPE: %s", line);
		sample_family(line, sfam, sizeof(sfam), type);
		ck_assert_msg(strcmp(sfam, fam) == 0, "%s outside its family %s",
		    line, fam);
		if (strcmp(type, "counter") == 0)
			ck_assert_msg(strstr(line, "_total") != NULL, "%s", line);
		if (strstr(line, "_bucket{") != NULL) {
			uint64_t v = strtoull(strrchr(line, ' ') + 1, NULL, 10);

			ck_assert_msg(v >= last_bucket, "not cumulative: %s",
			    line);
			last_bucket = v;
		}
		if (strstr(line, "_count") != NULL)
			ck_assert_uint_eq(strtoull(strrchr(line, ' ') + 1, NULL,
			    10), last_bucket);
		if (strcmp(line, "echorouterd_routing_latency_seconds_bucket"
		    "{le=\"5e-06\"} 2") == 0 || strcmp(line,
		    "echorouterd_routing_latency_seconds_bucket{le=\"0.0025\"}"
		    " 3") == 0 || strcmp(line,
		    "echorouterd_routing_latency_seconds_count 4") == 0)
			checked_route = true;
		nsamples++;
	}
	ck_assert(checked_route);
	ck_assert_ptr_nonnull(strstr((const char *)buf_head(out),
	    "\necho""routerd_routing_latency_seconds_bucket{le=\"10\"} 3\n"));
	ck_assert_ptr_nonnull(strstr((const char *)buf_head(out),
	    "\nprocess_open_fds "));
	ck_assert_ptr_nonnull(strstr((const char *)buf_head(out),
	    "\nechorouterd_build_info{version=\""));
	ck_assert_uint_gt(nsamples, 50);
	free(text);
	buf_free(out);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

Suite *
proto_metrics_suite(void)
{
	Suite *s = suite_create("proto_metrics");
	TCase *fr = tcase_create("frame");
	TCase *io = tcase_create("io");

	tcase_add_test(fr, metrics_frame_byte_by_byte);
	tcase_add_test(fr, metrics_frame_pipelined);
	tcase_add_test(fr, metrics_frame_too_long);
	tcase_add_test(fr, metrics_exposition_shape);
	suite_add_tcase(s, fr);
	tcase_add_test(io, metrics_pipelined_in_order);
	tcase_add_loop_test(io, metrics_bad_requests, 0,
	    sizeof(bad_cases) / sizeof(bad_cases[0]));
	tcase_add_loop_test(io, metrics_431, 0, 2);
	tcase_add_test(io, metrics_http10_closes);
	tcase_add_test(io, metrics_http10_keep_alive);
	tcase_add_test(io, metrics_host_forms_accepted);
	tcase_add_test(io, metrics_pipelined_1000_not_slow_consumer);
	tcase_add_test(io, metrics_unfinished_request_408);
	tcase_set_timeout(io, 60);
	suite_add_tcase(s, io);
	return s;
}
