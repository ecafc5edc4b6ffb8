/* loadgen.c: the benchmark's load generator: echo, line, router, pub/sub. */
/*
 * One process, T epoll threads. All connections are made first by the main
 * thread (bounded concurrent non-blocking connects, retried, source
 * addresses rotated over 127.0.0.2.. so that tens of thousands of
 * connections do not run out of ephemeral ports), then handed to the
 * threads. After a set-up step per connection (LOGIN, SUBSCRIBE, ...) the
 * traffic runs for a warm-up and a measured period, then no new request is
 * sent and every outstanding one must be answered within the drain time.
 *
 * Modes:
 *   echo    D messages of S bytes in flight per connection; every byte of
 *           the reply is checked against what was sent.
 *   line    D one-line requests (-q) in flight per connection; each reply
 *           line must start with -e (redis "PING", memcached "version", ...).
 *   router  P sender->receiver pairs on echorouterd's router protocol, W
 *           messages in flight per pair; every MSG is checked for sender,
 *           content and per-pair order. -x same|cross places the pairs on
 *           one reactor or on two (round-robin placement, -R reactors).
 *   redis   the same pair traffic over redis-server PUBLISH/SUBSCRIBE.
 *   nats    the same pair traffic over nats-server PUB/SUB.
 *   smpp    the same pair traffic as submit_sm -> deliver_sm between a
 *           transmitter and a receiver bind. With -g the senders are
 *           router line clients instead (LOGIN, SEND on -p; receivers
 *           bind on -r): a line client's text at an SMPP recipient; with
 *           -H as well, HTTP clients (Kannel's sendsms GET on -p, one
 *           keep-alive connection each). With
 *           -u that text needs UCS-2 (-s characters, the last a Cyrillic
 *           letter): the receiver joins its UDH parts, checks their
 *           numbers and decodes them, and RESULT counts parts=.
 *
 * With -H line mode speaks HTTP/1.1: -q is the path of a keep-alive GET,
 * and a 2xx response (Content-Length honoured) is the answer.
 *
 * With -I SECS (echo and line) each connection does one request, then all
 * stay open and idle for SECS: the caller measures the server's memory.
 *
 * With -S PID the RESULT line gets srv_cpu_us=: that process's user +
 * system CPU (/proc/PID/stat) over the measured period, read at its start
 * and end (clock ticks: 10 ms).
 *
 * Prints one line "RESULT key=value ..." on stdout; exits 0 only when no
 * reply was wrong or missing, 1 otherwise, 2 on bad usage, 3 on the hard
 * time limit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"	/* xcalloc, u64_to_dec: the daemon's own */

#if LG_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define LG_RBUF		8192	/* per-connection input for line modes */
#define LG_SCRATCH	65536
#define LG_MAX_EVENTS	512
#define LG_HIST_SUB	32
#define LG_HIST_N	(64 + 40 * LG_HIST_SUB)

enum lg_mode { LG_ECHO, LG_LINE, LG_ROUTER, LG_REDIS, LG_NATS, LG_SMPP,
    LG_HANDSHAKE };

static const char *const mode_names[] = {
	[LG_ECHO] = "echo", [LG_LINE] = "line", [LG_ROUTER] = "router",
	[LG_REDIS] = "redis", [LG_NATS] = "nats", [LG_SMPP] = "smpp",
	[LG_HANDSHAKE] = "handshake",
};

struct lg_opts {
	enum lg_mode mode;
	const char *host;
	const char *label;
	const char *req;	/* line mode request, without CRLF */
	const char *expect;	/* line mode reply prefix */
	const char *setup;	/* line mode: first line per conn (-l) */
	unsigned targets;	/* line mode: %u in -q rotates over K (-K) */
	int	port;
	unsigned n;		/* connections (echo, line) */
	unsigned pairs;		/* pairs (router, redis, nats, smpp) */
	unsigned depth;		/* in flight per connection or pair */
	unsigned size;
	unsigned threads;
	int	nsrc;		/* source addresses; -1 = automatic */
	unsigned conc;		/* concurrent connects */
	unsigned reactors;
	bool	same;		/* router: same-reactor pairs */
	double	warm, dur, hold, ctimeout, drain;
	long	srv_pid;	/* -S: report this process's CPU; 0 = none */
	int	scrape_port;	/* -M: GET /metrics there every 100 ms */
	int	rport;		/* -r: receivers connect here (another node) */
	bool	tls;		/* -Y: every connection over TLS */
	bool	resume;		/* -Z: handshake mode resumes sessions */
	bool	req_set;	/* -q given */
	bool	line_senders;	/* -g: smpp pairs' senders are line clients */
	bool	ucs2;		/* -u: their text needs UCS-2 */
	const char *addr_prefix; /* -A: pair addresses start with it */
	bool	receipts;	/* -E: line senders ask for RCPT lines */
	bool	http;		/* -H: line mode, or -g senders, over HTTP */
};

static struct lg_opts opt = {
	.mode = LG_ECHO, .host = "127.0.0.1", .label = "-", .req = "PING",
	.expect = "+PONG", .port = 0, .n = 100, .pairs = 100, .depth = 1,
	.size = 64, .threads = 2, .nsrc = -1, .conc = 256, .reactors = 2,
	.same = false, .warm = 2, .dur = 5, .hold = 0, .ctimeout = 60,
	.drain = 5,
};

enum lg_role { LG_PLAIN, LG_SENDER, LG_RECEIVER };

struct lg_conn {
	int	fd;
	uint8_t	role;
	bool	ready;		/* set-up done */
	bool	want_out;	/* EPOLLOUT armed */
	uint32_t id;		/* connection index, or pair index */
	struct lg_conn *peer;	/* the other end of a pair */
	char	addr[48];	/* pair modes: this end's address (LOGIN, SEND) */
	uint8_t	addrlen;
	char	req[320];	/* sender: what precedes each message's text */
	uint16_t reqlen;
	uint64_t sent;		/* messages (or echo bytes) sent */
	uint64_t done;		/* messages answered or delivered */
	uint64_t acked;		/* router: OKs; echo: bytes received */
	uint64_t *ts;		/* send times, ring of depth entries */
	char	*rbuf;		/* unparsed input (line modes) */
	size_t	rlen;
	char	*wbuf;		/* output the socket did not take yet */
	size_t	wlen, woff;
	char	*part;		/* -u receiver: the parts so far, as UTF-8 */
	size_t	partlen;
	unsigned partseq;	/* the last part's number; 0 none */
	unsigned parttotal;
	uint8_t	partref;
};

struct lg_thread {
	pthread_t tid;
	unsigned idx;
	int	epfd;
	struct lg_conn **conns;
	size_t	nconns;
	char	*scratch;	/* requests being built */
	char	*inbuf;		/* what read() returned */
	uint64_t hist[LG_HIST_N];
	uint64_t nlat;
	uint64_t now;		/* clock at the last read (one per read) */
	_Alignas(64) atomic_uint_fast64_t done;
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t parts;	/* smpp: deliver_sm with a UDH */
	atomic_uint_fast64_t joined;	/* and the texts they made */
	atomic_uint_fast64_t rcpts;	/* -E: RCPT lines while measuring */
	atomic_uint nready;
	atomic_bool finished;
	char	first_error[160];
};

static struct lg_thread *thr;
static char line_req[1024];	/* line mode: the request with CRLF */
static size_t line_req_len, line_expect_len;
static atomic_int phase;	/* 0 set-up, 1 run, 2 measure, 3 stop, 4 abort */
static char run_tag[32];

enum { PH_SETUP, PH_RUN, PH_MEASURE, PH_STOP, PH_ABORT };

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static _Noreturn void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static _Noreturn void
die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "loadgen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static void
on_alarm(int sig)
{
	static const char m[] = "loadgen: hard time limit hit, giving up\n";

	(void)sig;
	(void)!write(2, m, sizeof(m) - 1);
	_exit(3);
}

/* Records a verification error; the first one is kept for the report. */
static void lg_error(struct lg_thread *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
lg_error(struct lg_thread *t, const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&t->errors, 1) == 0) {
		va_start(ap, fmt);
		vsnprintf(t->first_error, sizeof(t->first_error), fmt, ap);
		va_end(ap);
	}
}

/* --- latency histogram: 32 sub-buckets per power of two, in ns --------- */

static unsigned
hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < 64)
		return (unsigned)v;
	msb = 63 - (unsigned)__builtin_clzll(v);
	if (msb > 45)
		return LG_HIST_N - 1;
	shift = msb - 5;
	return 64 + (msb - 6) * LG_HIST_SUB +
	    (unsigned)((v >> shift) & (LG_HIST_SUB - 1));
}

static uint64_t
hist_value(unsigned idx)
{
	unsigned msb, sub;

	if (idx < 64)
		return idx;
	msb = (idx - 64) / LG_HIST_SUB + 6;
	sub = (idx - 64) % LG_HIST_SUB;
	return ((uint64_t)(LG_HIST_SUB + sub) << (msb - 5)) +
	    ((uint64_t)1 << (msb - 5)) / 2;
}

static void
hist_add(struct lg_thread *t, uint64_t sent_ns)
{
	if (atomic_load_explicit(&phase, memory_order_relaxed) != PH_MEASURE)
		return;
	t->hist[hist_index(t->now - sent_ns)]++;
	t->nlat++;
}

static double
hist_pct(const uint64_t *h, uint64_t total, double pct)
{
	uint64_t want = (uint64_t)ceil((double)total * pct / 100.0), seen = 0;

	if (total == 0)
		return 0;
	for (unsigned i = 0; i < LG_HIST_N; i++) {
		seen += h[i];
		if (seen >= want)
			return (double)hist_value(i) / 1000.0;
	}
	return 0;
}

/* --- payloads ----------------------------------------------------------- */

/*
 * Echo stream byte at offset off of connection id: 'a' + (7 off + id) mod 26,
 * printable, never LF. As 15 is 7's inverse mod 26, that is
 * echo_pat[(off + 15 id) mod 26] with echo_pat[k] = 'a' + 7k mod 26, so a
 * run of stream bytes is a slice of the repeating echo_pat: requests are
 * made with memcpy and replies checked with memcmp.
 */
static char echo_pat[26 + LG_SCRATCH];

static void
echo_pat_init(void)
{
	for (size_t k = 0; k < sizeof(echo_pat); k++)
		echo_pat[k] = (char)('a' + (k * 7) % 26);
}

static inline const char *
echo_stream(uint32_t id, uint64_t off)
{
	return echo_pat + (off + 15 * (uint64_t)id) % 26;
}

static inline char
echo_byte(uint32_t id, uint64_t off)
{
	return (char)('a' + (off * 7 + id) % 26);
}

/* Router text for message seq of a pair: "<seq>.<filler>", size bytes. */
static size_t
pair_text(char *p, uint64_t seq, unsigned size)
{
	unsigned n = (unsigned)u64_to_dec(p, seq);

	p[n++] = '.';
	for (unsigned i = (unsigned)n; i < size; i++)
		p[i] = (char)('a' + (seq + i) % 26);
	return size > n ? size : n;
}

/*
 * Message seq's text as its sender sends it: pair_text, or with -u the
 * same -s characters ending in U+0416 (ZHE), which GSM 03.38 lacks.
 */
static size_t
msg_text(char *p, uint64_t seq)
{
	size_t n;

	if (!opt.ucs2)
		return pair_text(p, seq, opt.size);
	n = pair_text(p, seq, opt.size - 1);
	p[n++] = (char)0xD0;
	p[n++] = (char)0x96;
	return n;
}

/* Checks a delivered text; returns its sequence number or -1. */
static int64_t
pair_check(const char *p, size_t len)
{
	char want[LG_RBUF];
	char *end;
	unsigned long long seq;

	errno = 0;
	seq = strtoull(p, &end, 10);
	if (errno != 0 || end == p || (size_t)(end - p) >= len || *end != '.')
		return -1;
	if (len != msg_text(want, seq) || memcmp(want, p, len) != 0)
		return -1;
	return (int64_t)seq;
}

static void
pair_addr(char *buf, size_t len, const struct lg_conn *c)
{
	snprintf(buf, len, "%s%c%u", run_tag,
	    c->role == LG_SENDER ? 's' : 'r', c->id);
}

/* Keeps c's pair address in c, for the requests built per message. */
static void
pair_addr_cache(struct lg_conn *c)
{
	pair_addr(c->addr, sizeof(c->addr), c);
	c->addrlen = (uint8_t)strlen(c->addr);
}

/*
 * Keeps what a sender puts before each message's text ("SEND <to> ",
 * "PUBLISH <channel> ", "PUB <subject> <size>\r\n"), so that requests to
 * every server are built the same way, without printf.
 */
static void
pair_req_cache(struct lg_conn *s)
{
	int n = 0;

	switch (opt.mode) {
	case LG_SMPP:
		if (!opt.line_senders)
			break;
		/* -H: Kannel's sendsms, the text last (URL-safe: digits, '.', a-z). */
		if (opt.http) {
			n = snprintf(s->req, sizeof(s->req), "GET /cgi-bin/sendsms"
			    "?username=%s&password=&to=%s%s&text=", s->addr,
			    s->peer->addr, opt.req_set ? opt.req : "");
			break;
		}
		/* FALLTHROUGH */
	case LG_ROUTER:
		n = snprintf(s->req, sizeof(s->req), "SEND %s ", s->peer->addr);
		break;
	case LG_REDIS:
		n = snprintf(s->req, sizeof(s->req), "PUBLISH %sc%u ", run_tag,
		    s->id);
		break;
	case LG_NATS:
		n = snprintf(s->req, sizeof(s->req), "PUB %s.%u %u\r\n",
		    run_tag, s->id, opt.size);
		break;
	default:
		break;
	}
	if (n < 0 || (size_t)n >= sizeof(s->req))
		die("internal: request prefix too long");
	s->reqlen = (uint16_t)n;
}

/* Appends p to c's pending output without writing (see conn_flush). */
static bool
conn_queue(struct lg_thread *t, struct lg_conn *c, const char *p, size_t n)
{
	if (c->wbuf == NULL)
		c->wbuf = xcalloc(1, LG_SCRATCH);
	if (c->wlen + n > LG_SCRATCH && c->woff > 0) {
		memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
		c->wlen -= c->woff;
		c->woff = 0;
	}
	if (c->wlen + n > LG_SCRATCH) {
		lg_error(t, "conn %u: output backlog overflow", c->id);
		return false;
	}
	memcpy(c->wbuf + c->wlen, p, n);
	c->wlen += n;
	return true;
}

/* --- output ------------------------------------------------------------- */

static void
conn_want_out(struct lg_thread *t, struct lg_conn *c, bool on)
{
	struct epoll_event ev = {
		.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c,
	};

	if (c->want_out == on)
		return;
	c->want_out = on;
	if (epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		lg_error(t, "epoll_ctl: %s", strerror(errno));
}

/* --- TLS (-Y): the same traffic through OpenSSL ------------------------- */

#define LG_TLS_CHUNK	256	/* -Y: connections handshaken at a time */

#if LG_TLS
static SSL_CTX *tls_ctx;
static SSL **tls_by_fd;		/* each connection's session, by fd */
static int tls_nfd;

/* OpenSSL's answer as read(2)/write(2) would give it. */
static ssize_t
tls_result(SSL *ssl, int r, size_t done)
{
	if (r == 1)
		return (ssize_t)done;
	switch (SSL_get_error(ssl, r)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		ERR_clear_error();
		errno = errno != 0 ? errno : EIO;
		return -1;
	}
}
#endif

static ssize_t
lg_read(int fd, void *p, size_t n)
{
#if LG_TLS
	if (opt.tls) {
		size_t got = 0;
		int r = SSL_read_ex(tls_by_fd[fd], p, n, &got);

		return tls_result(tls_by_fd[fd], r, got);
	}
#endif
	return read(fd, p, n);
}

static ssize_t
lg_write(int fd, const void *p, size_t n)
{
#if LG_TLS
	if (opt.tls) {
		size_t done = 0;
		int r = SSL_write_ex(tls_by_fd[fd], p, n, &done);

		return tls_result(tls_by_fd[fd], r, done);
	}
#endif
	return write(fd, p, n);
}

/* Decrypted input OpenSSL holds, which epoll will not announce. */
static bool
lg_pending(int fd)
{
#if LG_TLS
	return opt.tls && SSL_pending(tls_by_fd[fd]) > 0;
#else
	(void)fd;
	return false;
#endif
}

/* Writes what is pending; returns false if the connection failed. */
static bool
conn_flush(struct lg_thread *t, struct lg_conn *c)
{
	while (c->woff < c->wlen) {
		ssize_t n = lg_write(c->fd, c->wbuf + c->woff,
		    c->wlen - c->woff);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			conn_want_out(t, c, true);
			return true;
		}
		if (n <= 0) {
			lg_error(t, "conn %u: write: %s", c->id,
			    strerror(errno));
			return false;
		}
		c->woff += (size_t)n;
	}
	c->woff = c->wlen = 0;
	conn_want_out(t, c, false);
	return true;
}

/* Queues p behind pending output, then writes as much as the socket takes. */
static bool
conn_send(struct lg_thread *t, struct lg_conn *c, const char *p, size_t n)
{
	if (c->wlen == 0) {
		ssize_t w;

		while ((w = lg_write(c->fd, p, n)) < 0 && errno == EINTR)
			;
		if (w < 0 && errno != EAGAIN) {
			lg_error(t, "conn %u: write: %s", c->id,
			    strerror(errno));
			return false;
		}
		if (w == (ssize_t)n)
			return true;
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		}
	}
	return conn_queue(t, c, p, n) && conn_flush(t, c);
}

static bool
sending_allowed(void)
{
	int ph = atomic_load_explicit(&phase, memory_order_relaxed);

	return ph == PH_RUN || ph == PH_MEASURE;
}

/* --- requests ----------------------------------------------------------- */

static size_t smpp_submit(char *p, const struct lg_conn *c, uint64_t seq);

/* What ends an HTTP sender's GET after its text. */
#define HTTP_REQ_END	" HTTP/1.1\r\nHost: loadgen\r\n\r\n"

/* Sends requests on c (or pair sender c) up to the window. */
static void
pump(struct lg_thread *t, struct lg_conn *c, bool force_one)
{
	char *p = t->scratch;
	size_t len = 0;
	uint64_t now = t->now;
	uint64_t limit = opt.depth;

	if (!force_one && !sending_allowed())
		return;
	if (force_one)
		limit = 1;
	while (c->sent - c->done < limit && len + 1024 + opt.size < LG_SCRATCH) {
		uint64_t seq = c->sent;

		switch (opt.mode) {
		case LG_ECHO:
			memcpy(p + len, echo_stream(c->id, seq * opt.size),
			    opt.size);
			len += opt.size;
			break;
		case LG_LINE:
			if (opt.targets > 0) {
				/* Each connection walks its own order. */
				len += (size_t)snprintf(p + len, 1024, line_req,
				    (unsigned)((c->id * 7919u + seq) %
				    opt.targets));
				break;
			}
			memcpy(p + len, line_req, line_req_len);
			len += line_req_len;
			break;
		case LG_SMPP:
			if (!opt.line_senders) {
				len += smpp_submit(p + len, c, seq);
				break;
			}
			/* FALLTHROUGH */
		case LG_ROUTER:
		case LG_REDIS:
		case LG_NATS:
			/* The same work for each server: prefix, text, end. */
			memcpy(p + len, c->req, c->reqlen);
			len += c->reqlen;
			len += msg_text(p + len, seq);
			if (opt.http) {
				memcpy(p + len, HTTP_REQ_END, sizeof(HTTP_REQ_END) - 1);
				len += sizeof(HTTP_REQ_END) - 1;
				break;
			}
			if (opt.mode == LG_REDIS || opt.mode == LG_NATS)
				p[len++] = '\r';
			p[len++] = '\n';
			break;
		case LG_HANDSHAKE:	/* handshake_run: no connections here */
			break;
		}
		c->ts[seq % opt.depth] = now;
		c->sent++;
		if (force_one)
			break;
	}
	if (len > 0)
		conn_send(t, c, p, len);
}

/* --- SMPP --------------------------------------------------------------- */

static void
put32(char *p, uint32_t v)
{
	p[0] = (char)(v >> 24);
	p[1] = (char)(v >> 16);
	p[2] = (char)(v >> 8);
	p[3] = (char)v;
}

static uint32_t
get32(const char *p)
{
	const uint8_t *u = (const uint8_t *)p;

	return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 |
	    (uint32_t)u[2] << 8 | u[3];
}

/* Writes a PDU header for a body of blen bytes; returns 16. */
static size_t
smpp_header(char *p, size_t blen, uint32_t id, uint32_t seq)
{
	put32(p, (uint32_t)(16 + blen));
	put32(p + 4, id);
	put32(p + 8, 0);
	put32(p + 12, seq);
	return 16;
}

/* A bind_transmitter (sender) or bind_receiver as the pair address. */
static size_t
smpp_bind(char *p, const struct lg_conn *c)
{
	char *b = p + 16, addr[48];
	size_t n;

	pair_addr(addr, sizeof(addr), c);
	n = strlen(addr);
	if (n > 15)
		die("system_id %s: longer than 15", addr);
	memcpy(b, addr, n + 1);
	n++;
	b[n++] = '\0';		/* password */
	b[n++] = '\0';		/* system_type */
	b[n++] = 0x34;
	b[n++] = 0;
	b[n++] = 0;
	b[n++] = '\0';		/* address_range */
	smpp_header(p, n, c->role == LG_SENDER ? 0x2 : 0x1, 1);
	return 16 + n;
}

/* A submit_sm to the pair's receiver carrying message seq. */
static size_t
smpp_submit(char *p, const struct lg_conn *c, uint64_t seq)
{
	char *b = p + 16;
	size_t n = 0, tl;

	b[n++] = '\0';		/* service_type */
	b[n++] = 0;
	b[n++] = 0;
	b[n++] = '\0';		/* source_addr: the system_id is used */
	b[n++] = 5;
	b[n++] = 0;
	memcpy(b + n, c->peer->addr, c->peer->addrlen + 1u);
	n += c->peer->addrlen + 1u;
	memset(b + n, 0, 3);	/* esm_class, protocol_id, priority_flag */
	n += 3;
	b[n++] = '\0';		/* schedule_delivery_time */
	b[n++] = '\0';		/* validity_period */
	memset(b + n, 0, 4);	/* registered_delivery .. sm_default_msg_id */
	n += 4;
	tl = pair_text(b + n + 1, seq, opt.size);
	b[n] = (char)tl;
	n += 1 + tl;
	smpp_header(p, n, 0x4, (uint32_t)(seq % 0x7FFFFFFF) + 2);
	return 16 + n;
}

/* Skips a C-octet string within [p, end); NULL if unterminated. */
static const char *
skip_cstr(const char *p, const char *end)
{
	const char *z = memchr(p, '\0', (size_t)(end - p));

	return z == NULL ? NULL : z + 1;
}

static void pair_deliver(struct lg_thread *t, struct lg_conn *c,
    const char *text, size_t len);
static void setup_done(struct lg_thread *t, struct lg_conn *c);

/*
 * A deliver_sm's short_message, esm_class and data_coding; false if the
 * body is malformed.
 */
static bool
smpp_text(const char *b, const char *end, const char **text, size_t *len,
    uint8_t *esm, uint8_t *dc)
{
	const char *p = skip_cstr(b, end);		/* service_type */

	if (p == NULL || end - p < 2 || !(p = skip_cstr(p + 2, end)) ||
	    end - p < 2 || !(p = skip_cstr(p + 2, end)) || end - p < 3)
		return false;
	*esm = (uint8_t)p[0];
	if (!(p = skip_cstr(p + 3, end)) || !(p = skip_cstr(p, end)) ||
	    end - p < 5)
		return false;
	*dc = (uint8_t)p[2];
	*len = (uint8_t)p[4];
	*text = p + 5;
	return *text + *len <= end;
}

/* UCS-2 (big-endian, no surrogates here) at u as UTF-8 at out. */
static size_t
ucs2_to_utf8(const char *u, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i + 1 < n; i += 2) {
		unsigned v = (unsigned)(uint8_t)u[i] << 8 | (uint8_t)u[i + 1];

		if (v < 0x80) {
			out[o++] = (char)v;
		} else if (v < 0x800) {
			out[o++] = (char)(0xC0 | v >> 6);
			out[o++] = (char)(0x80 | (v & 0x3F));
		} else {
			out[o++] = (char)(0xE0 | v >> 12);
			out[o++] = (char)(0x80 | ((v >> 6) & 0x3F));
			out[o++] = (char)(0x80 | (v & 0x3F));
		}
	}
	return o;
}

/*
 * A part (UDH 05 00 03 ref total seq) of a long text at receiver c: its
 * text joins the earlier parts', in order, under one reference; the last
 * delivers the whole. false if the header or its numbers are wrong.
 */
static bool
smpp_part(struct lg_thread *t, struct lg_conn *c, const char *p, size_t n,
    uint8_t dc)
{
	const uint8_t *h = (const uint8_t *)p;

	if (n < 6 || h[0] != 5 || h[1] != 0 || h[2] != 3 || h[4] < 2 ||
	    h[5] != c->partseq + 1 || (c->partseq > 0 &&
	    (h[3] != c->partref || h[4] != c->parttotal)))
		return false;
	if (c->part == NULL)
		c->part = xcalloc(1, LG_RBUF);
	if (c->partlen + 3 * (n - 6) > LG_RBUF)
		return false;
	c->partref = h[3];
	c->parttotal = h[4];
	c->partseq = h[5];
	if (dc == 8)
		c->partlen += ucs2_to_utf8(p + 6, n - 6, c->part + c->partlen);
	else {
		memcpy(c->part + c->partlen, p + 6, n - 6);
		c->partlen += n - 6;
	}
	atomic_fetch_add_explicit(&t->parts, 1, memory_order_relaxed);
	if (c->partseq == c->parttotal) {
		atomic_fetch_add_explicit(&t->joined, 1, memory_order_relaxed);
		pair_deliver(t, c, c->part, c->partlen);
		c->partlen = 0;
		c->partseq = 0;
	}
	return true;
}

/* A deliver_sm's text at receiver c: whole, or a part of one. */
static void
smpp_delivered(struct lg_thread *t, struct lg_conn *c, const char *text,
    size_t tl, uint8_t esm, uint8_t dc)
{
	char utf8[3 * 256];

	if (esm & 0x40) {
		if (!smpp_part(t, c, text, tl, dc))
			lg_error(t, "pair %u: bad part (seq %u of %u)", c->id,
			    tl >= 6 ? (uint8_t)text[5] : 0, c->parttotal);
		return;
	}
	if (dc == 8) {
		pair_deliver(t, c, utf8, ucs2_to_utf8(text, tl, utf8));
		return;
	}
	pair_deliver(t, c, text, tl);
}

static void
smpp_pdu(struct lg_thread *t, struct lg_conn *c, const char *p, size_t n)
{
	uint32_t id = get32(p + 4), st = get32(p + 8), seq = get32(p + 12);
	const char *text;
	size_t tl;
	uint8_t esm, dc;
	char resp[17];

	if ((id == 0x80000001 || id == 0x80000002) && !c->ready) {
		if (st != 0)
			lg_error(t, "conn %u: bind refused, status %u", c->id,
			    st);
		else
			setup_done(t, c);
	} else if (id == 0x80000004 && c->role == LG_SENDER) {
		if (st != 0)
			lg_error(t, "pair %u: submit_sm status 0x%x", c->id, st);
		else if (++c->acked > c->sent)
			lg_error(t, "pair %u: submit_sm_resp nobody asked for",
			    c->id);
	} else if (id == 0x5 && c->role == LG_RECEIVER) {
		smpp_header(resp, 1, 0x80000005, seq);
		resp[16] = '\0';
		conn_queue(t, c, resp, sizeof(resp));
		if (!smpp_text(p + 16, p + n, &text, &tl, &esm, &dc))
			lg_error(t, "pair %u: bad deliver_sm", c->id);
		else
			smpp_delivered(t, c, text, tl, esm, dc);
	} else if (id == 0x15) {
		smpp_header(resp, 0, 0x80000015, seq);
		conn_queue(t, c, resp, 16);
	} else {
		lg_error(t, "conn %u: unexpected PDU 0x%x status 0x%x", c->id,
		    id, st);
	}
}

/* Handles whole PDUs in c's buffer; returns the bytes used. */
static size_t
smpp_input(struct lg_thread *t, struct lg_conn *c, char *buf, size_t len)
{
	size_t off = 0;

	while (len - off >= 16) {
		uint32_t n = get32(buf + off);

		if (n < 16 || n > LG_RBUF) {
			lg_error(t, "conn %u: command_length %u", c->id, n);
			return len;
		}
		if (len - off < n)
			break;
		smpp_pdu(t, c, buf + off, n);
		off += n;
	}
	return off;
}

/* One request or message answered: count it, time it, send the next. */
static void
complete(struct lg_thread *t, struct lg_conn *sender)
{
	hist_add(t, sender->ts[sender->done % opt.depth]);
	sender->done++;
	atomic_fetch_add_explicit(&t->done, 1, memory_order_relaxed);
}

/* --- input: echo -------------------------------------------------------- */

static void
echo_input(struct lg_thread *t, struct lg_conn *c, const char *p, size_t n)
{
	uint64_t want = c->sent * opt.size, before = c->acked / opt.size;

	if (n > want - c->acked) {
		lg_error(t, "conn %u: %" PRIu64 " bytes nobody asked for",
		    c->id, n - (want - c->acked));
		return;
	}
	if (memcmp(p, echo_stream(c->id, c->acked), n) != 0) {
		size_t i = 0;

		while (p[i] == echo_byte(c->id, c->acked + i))
			i++;
		lg_error(t, "conn %u: byte %" PRIu64 " differs", c->id,
		    c->acked + i);
		return;
	}
	c->acked += n;
	for (uint64_t k = c->acked / opt.size; before < k; before++)
		complete(t, c);
}

/* --- input: line protocols ---------------------------------------------- */

static void
setup_done(struct lg_thread *t, struct lg_conn *c)
{
	if (!c->ready) {
		c->ready = true;
		atomic_fetch_add(&t->nready, 1);
	}
}

static void
line_reply(struct lg_thread *t, struct lg_conn *c, const char *l, size_t n)
{
	size_t el = line_expect_len;

	/* The answer to the set-up line (-l): an error is fatal. */
	if (opt.setup != NULL && !c->ready) {
		if (n >= 3 && memcmp(l, "ERR", 3) == 0)
			lg_error(t, "conn %u: set-up refused \"%.*s\"", c->id,
			    (int)(n > 60 ? 60 : n), l);
		setup_done(t, c);
		return;
	}

	if (c->done >= c->sent) {
		lg_error(t, "conn %u: reply nobody asked for", c->id);
		return;
	}
	if (n < el || memcmp(l, opt.expect, el) != 0) {
		lg_error(t, "conn %u: unexpected reply \"%.*s\"", c->id,
		    (int)(n > 60 ? 60 : n), l);
		return;
	}
	complete(t, c);
	if (!c->ready && opt.hold > 0)
		setup_done(t, c);
}

/* A MSG (router), message (redis) or MSG (nats) delivered to receiver c. */
static void
pair_deliver(struct lg_thread *t, struct lg_conn *c, const char *text,
    size_t len)
{
	struct lg_conn *s = c->peer;
	int64_t seq = pair_check(text, len);

	if (seq < 0) {
		lg_error(t, "pair %u: bad text \"%.*s\"", c->id,
		    (int)(len > 60 ? 60 : len), text);
		return;
	}
	if ((uint64_t)seq != s->done || s->done >= s->sent) {
		lg_error(t, "pair %u: got #%" PRId64 " expected #%" PRIu64
		    " (sent %" PRIu64 ")", c->id, seq, s->done, s->sent);
		return;
	}
	complete(t, s);
}

/*
 * -E: a sender's "OK RECEIPTS ON" and "RCPT <id> DELIVRD <err> <done>"
 * lines, counted while measuring; true if l was one.
 */
static bool
sender_receipt(struct lg_thread *t, struct lg_conn *c, const char *l)
{
	const char *stat;

	if (strcmp(l, "OK RECEIPTS ON") == 0)
		return true;
	if (strncmp(l, "RCPT ", 5) != 0)
		return false;
	stat = strchr(l + 5, ' ');
	if (stat == NULL || strncmp(stat + 1, "DELIVRD ", 8) != 0)
		lg_error(t, "pair %u: receipt not DELIVRD: %.80s", c->id, l);
	else if (atomic_load_explicit(&phase, memory_order_relaxed) ==
	    PH_MEASURE)
		atomic_fetch_add_explicit(&t->rcpts, 1, memory_order_relaxed);
	return true;
}

static void
router_line(struct lg_thread *t, struct lg_conn *c, char *l, size_t n)
{
	char addr[48];
	size_t al;

	l[n] = '\0';
	if (!c->ready) {
		pair_addr(addr, sizeof(addr), c);
		if (strncmp(l, "OK LOGIN ", 9) != 0 || strcmp(l + 9, addr))
			lg_error(t, "conn %u: LOGIN answered \"%.60s\"",
			    c->id, l);
		else
			setup_done(t, c);
		return;
	}
	if (c->role == LG_SENDER && opt.receipts && sender_receipt(t, c, l))
		return;
	if (c->role == LG_SENDER && strncmp(l, "OK ", 3) == 0) {
		if (++c->acked > c->sent)
			lg_error(t, "pair %u: OK nobody asked for", c->id);
		return;
	}
	if (c->role == LG_RECEIVER && strncmp(l, "MSG ", 4) == 0) {
		char *from = memchr(l + 4, ' ', n - 4), *text;

		al = c->peer->addrlen;
		if (from == NULL || (size_t)(l + n - from) < al + 2 ||
		    memcmp(from + 1, c->peer->addr, al) != 0 ||
		    from[1 + al] != ' ') {
			lg_error(t, "pair %u: MSG from wrong sender: %.60s",
			    c->id, l);
			return;
		}
		text = from + 2 + al;
		pair_deliver(t, c, text, (size_t)(l + n - text));
		return;
	}
	lg_error(t, "conn %u: unexpected \"%.80s\"", c->id, l);
}

/*
 * One RESP value at p: a simple line, or an array of up to 4 bulk strings
 * or integers. Returns the bytes it takes, 0 if incomplete, -1 if bad.
 */
static ssize_t
resp_parse(char *p, size_t n, char **el, size_t *ell, unsigned *nel)
{
	char *q = p, *end = p + n, *lf;
	long cnt = 1;
	bool array = false;

	*nel = 0;
	if (n > 0 && *p == '*') {
		if ((lf = memchr(q, '\n', (size_t)(end - q))) == NULL)
			return 0;
		cnt = strtol(q + 1, NULL, 10);
		if (cnt < 0 || cnt > 4)
			return -1;
		q = lf + 1;
		array = true;
	}
	for (long i = 0; i < cnt; i++) {
		if (q >= end || (lf = memchr(q, '\n', (size_t)(end - q))) ==
		    NULL)
			return 0;
		if (*q == '$') {
			long bl = strtol(q + 1, NULL, 10);

			if (bl < 0 || bl > LG_RBUF)
				return -1;
			if ((size_t)(end - (lf + 1)) < (size_t)bl + 2)
				return 0;
			el[*nel] = lf + 1;
			ell[(*nel)++] = (size_t)bl;
			q = lf + 1 + bl + 2;
		} else if (*q == ':' || *q == '+' || *q == '-' || !array) {
			el[*nel] = q;
			ell[(*nel)++] = (size_t)(lf - q) - (lf > q &&
			    lf[-1] == '\r');
			q = lf + 1;
		} else {
			return -1;
		}
	}
	return q - p;
}

static void
redis_value(struct lg_thread *t, struct lg_conn *c, char **el, size_t *ell,
    unsigned nel)
{
	if (c->role == LG_SENDER) {
		if (!c->ready && nel == 1 && ell[0] == 5 &&
		    memcmp(el[0], "+PONG", 5) == 0)
			setup_done(t, c);
		else if (nel == 1 && ell[0] == 2 && memcmp(el[0], ":1", 2) ==
		    0 && c->acked < c->sent)
			c->acked++;
		else
			lg_error(t, "pair %u: PUBLISH answered \"%.*s\"",
			    c->id, (int)(ell[0] > 60 ? 60 : ell[0]), el[0]);
		return;
	}
	if (nel == 3 && ell[0] == 9 && memcmp(el[0], "subscribe", 9) == 0) {
		setup_done(t, c);
	} else if (nel == 3 && ell[0] == 7 &&
	    memcmp(el[0], "message", 7) == 0) {
		pair_deliver(t, c, el[2], ell[2]);
	} else {
		lg_error(t, "pair %u: unexpected RESP value (%u elements)",
		    c->id, nel);
	}
}

/* Handles whole RESP values in c's buffer; returns the bytes used. */
static size_t
redis_input(struct lg_thread *t, struct lg_conn *c, char *buf, size_t len)
{
	size_t off = 0;

	for (;;) {
		char *el[4];
		size_t ell[4];
		unsigned nel;
		ssize_t k = resp_parse(buf + off, len - off, el, ell, &nel);

		if (k == 0)
			break;
		if (k < 0) {
			lg_error(t, "conn %u: bad RESP", c->id);
			return len;
		}
		redis_value(t, c, el, ell, nel);
		off += (size_t)k;
	}
	return off;
}

/* Handles whole NATS protocol lines (and MSG payloads); returns bytes used. */
static size_t
nats_input(struct lg_thread *t, struct lg_conn *c, char *buf, size_t len)
{
	size_t off = 0;

	for (;;) {
		char *l = buf + off, *lf = memchr(l, '\n', len - off);
		unsigned long plen;
		char *sp;

		if (lf == NULL)
			break;
		if (strncmp(l, "MSG ", 4) == 0) {
			sp = memrchr(l, ' ', (size_t)(lf - l));
			plen = strtoul(sp + 1, NULL, 10);
			if ((size_t)(buf + len - (lf + 1)) < plen + 2)
				break;
			if (c->role != LG_RECEIVER)
				lg_error(t, "conn %u: MSG to a sender", c->id);
			else
				pair_deliver(t, c, lf + 1, plen);
			off = (size_t)(lf + 1 + plen + 2 - buf);
			continue;
		}
		off = (size_t)(lf + 1 - buf);
		if (strncmp(l, "PING", 4) == 0)
			conn_queue(t, c, "PONG\r\n", 6);
		else if (strncmp(l, "PONG", 4) == 0)
			setup_done(t, c);
		else if (strncmp(l, "INFO ", 5) != 0 &&
		    strncmp(l, "+OK", 3) != 0)
			lg_error(t, "conn %u: nats said \"%.*s\"", c->id,
			    (int)(lf - l > 80 ? 80 : lf - l), l);
	}
	return off;
}

/* Handles whole lines in c's buffer; returns the bytes used. */
static size_t
lines_input(struct lg_thread *t, struct lg_conn *c, char *buf, size_t len)
{
	size_t off = 0;
	char *lf;

	while ((lf = memchr(buf + off, '\n', len - off)) != NULL) {
		char *l = buf + off;
		size_t n = (size_t)(lf - l);

		if (n > 0 && l[n - 1] == '\r')
			n--;
		if (opt.mode == LG_LINE)
			line_reply(t, c, l, n);
		else
			router_line(t, c, l, n);
		off = (size_t)(lf + 1 - buf);
	}
	return off;
}

/* --- input: HTTP (-H) ----------------------------------------------------- */

/*
 * One HTTP/1.1 response at p (n bytes, NUL after): its length, 0 while
 * incomplete, -1 if it is not one; *status its code.
 */
static ssize_t
http_parse(const char *p, size_t n, int *status)
{
	const char *end = memmem(p, n, "\r\n\r\n", 4), *h;
	unsigned long long clen = 0;

	if (end == NULL)
		return n > LG_RBUF / 2 ? -1 : 0;
	if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0)
		return -1;
	*status = atoi(p + 9);
	for (h = p; h < end; h++) {
		if (*h != '\n' || strncasecmp(h + 1, "content-length:", 15) != 0)
			continue;
		clen = strtoull(h + 16, NULL, 10);
		break;
	}
	if (clen > LG_RBUF / 2)
		return -1;
	if ((size_t)(end + 4 - p) + clen > n)
		return 0;
	return (ssize_t)((size_t)(end + 4 - p) + clen);
}

/*
 * Responses: a 2xx answers the oldest request (line mode: done; an HTTP
 * sender: acknowledged, done once delivered); anything else is an error.
 */
static size_t
http_input(struct lg_thread *t, struct lg_conn *c, char *buf, size_t len)
{
	size_t off = 0;
	ssize_t k;
	int status = 0;

	while (off < len && (k = http_parse(buf + off, len - off, &status)) != 0) {
		if (k < 0) {
			lg_error(t, "conn %u: not an HTTP response \"%.40s\"",
			    c->id, buf + off);
			return len;
		}
		if (status < 200 || status > 299) {
			const char *body = memmem(buf + off, (size_t)k,
			    "\r\n\r\n", 4);

			lg_error(t, "conn %u: HTTP %d %.60s", c->id, status,
			    body != NULL ? body + 4 : "");
		} else if (opt.mode == LG_LINE) {
			if (c->done >= c->sent)
				lg_error(t, "conn %u: reply nobody asked for",
				    c->id);
			else
				complete(t, c);
		} else if (++c->acked > c->sent) {
			lg_error(t, "pair %u: answer nobody asked for", c->id);
		}
		off += (size_t)k;
	}
	return off;
}

static size_t
parse_input(struct lg_thread *t, struct lg_conn *c, char *buf, size_t len)
{
	buf[len] = '\0';
	if (opt.mode == LG_REDIS)
		return redis_input(t, c, buf, len);
	if (opt.mode == LG_NATS)
		return nats_input(t, c, buf, len);
	if (opt.mode == LG_SMPP && !(opt.line_senders &&
	    c->role == LG_SENDER))
		return smpp_input(t, c, buf, len);
	if (opt.http)
		return http_input(t, c, buf, len);
	return lines_input(t, c, buf, len);
}

/*
 * Parses replies straight from the read buffer (p has room for a NUL after
 * n); only an unfinished tail is kept, so idle connections hold no buffer.
 */
static void
buffered_input(struct lg_thread *t, struct lg_conn *c, char *p, size_t n)
{
	bool fresh = c->rlen == 0;
	size_t used;

	if (fresh) {
		used = parse_input(t, c, p, n);
		p += used;
		n -= used;
		if (n == 0)
			return;
	}
	if (c->rbuf == NULL)
		c->rbuf = xcalloc(1, LG_RBUF + 1);
	if (c->rlen + n > LG_RBUF) {
		lg_error(t, "conn %u: reply longer than %d bytes", c->id,
		    LG_RBUF);
		c->rlen = 0;
		return;
	}
	memcpy(c->rbuf + c->rlen, p, n);
	c->rlen += n;
	if (fresh)
		return;	/* already parsed: nothing whole in this tail */
	used = parse_input(t, c, c->rbuf, c->rlen);
	memmove(c->rbuf, c->rbuf + used, c->rlen - used);
	c->rlen -= used;
}

/* --- the worker threads -------------------------------------------------- */

static void
conn_readable(struct lg_thread *t, struct lg_conn *c)
{
	for (int budget = 16; budget > 0 || lg_pending(c->fd); budget--) {
		ssize_t n = lg_read(c->fd, t->inbuf, LG_SCRATCH);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			if (atomic_load(&phase) < PH_ABORT)
				lg_error(t, "conn %u: %s", c->id, n == 0 ?
				    "closed by the server" : strerror(errno));
			epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
			return;
		}
		/* Every reply this read returned arrived by now. */
		t->now = now_ns();
		if (opt.mode == LG_ECHO) {
			echo_input(t, c, t->inbuf, (size_t)n);
			if (!c->ready && opt.hold > 0 && c->done == 1)
				setup_done(t, c);
			pump(t, c, false);
		} else {
			buffered_input(t, c, t->inbuf, (size_t)n);
			if (opt.mode == LG_LINE)
				pump(t, c, false);
			/*
			 * Answers queued while parsing (deliver_sm_resp, PONG)
			 * go out in one write, and a receiver's deliveries
			 * refill its sender's window with one write, not one
			 * per message.
			 */
			if (c->wlen > c->woff && !c->want_out &&
			    !conn_flush(t, c))
				return;
			if (c->role == LG_RECEIVER)
				pump(t, c->peer, false);
		}
		if (n < LG_SCRATCH)
			break;
	}
}

/* The set-up request of a connection, sent when its thread starts. */
static void
conn_setup(struct lg_thread *t, struct lg_conn *c)
{
	char buf[256], addr[48];
	int n = 0;

	switch (opt.mode) {
	case LG_LINE:
		if (opt.setup != NULL) {
			n = snprintf(buf, sizeof(buf) - 2, opt.setup, c->id);
			if (n < 0 || (size_t)n >= sizeof(buf) - 2)
				die("set-up line too long");
			buf[n++] = '\r';
			buf[n++] = '\n';
			break;
		}
		/* FALLTHROUGH */
	case LG_ECHO:
	case LG_HANDSHAKE:
		if (opt.hold > 0)
			pump(t, c, true);
		else
			setup_done(t, c);
		return;
	case LG_ROUTER:
		pair_addr(addr, sizeof(addr), c);
		n = snprintf(buf, sizeof(buf), "LOGIN %s\n", addr);
		break;
	case LG_REDIS:
		if (c->role == LG_RECEIVER)
			n = snprintf(buf, sizeof(buf), "SUBSCRIBE %sc%u\r\n",
			    run_tag, c->id);
		else
			n = snprintf(buf, sizeof(buf), "PING\r\n");
		break;
	case LG_NATS:
		n = snprintf(buf, sizeof(buf), "CONNECT {\"verbose\":false,"
		    "\"pedantic\":false,\"echo\":false}\r\n");
		if (c->role == LG_RECEIVER)
			n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			    "SUB %s.%u 1\r\n", run_tag, c->id);
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "PING\r\n");
		break;
	case LG_SMPP:
		/* An HTTP sender is whoever its requests say. */
		if (opt.http && c->role == LG_SENDER) {
			setup_done(t, c);
			return;
		}
		if (opt.line_senders && c->role == LG_SENDER) {
			pair_addr(addr, sizeof(addr), c);
			n = snprintf(buf, sizeof(buf), "LOGIN %s\n%s", addr,
			    opt.receipts ? "RECEIPTS ON\n" : "");
			break;
		}
		n = (int)smpp_bind(buf, c);
		break;
	}
	conn_send(t, c, buf, (size_t)n);
}

static bool
thread_quiet(struct lg_thread *t)
{
	for (size_t i = 0; i < t->nconns; i++) {
		struct lg_conn *c = t->conns[i];

		if (c->role != LG_RECEIVER && c->done < c->sent)
			return false;
		if (c->role == LG_SENDER && opt.mode != LG_NATS &&
		    c->acked < c->sent)
			return false;
	}
	return true;
}

static void *
thread_main(void *arg)
{
	struct lg_thread *t = arg;
	struct epoll_event *evs = xcalloc(LG_MAX_EVENTS, sizeof(*evs));
	int last = PH_SETUP;

	t->now = now_ns();
	for (size_t i = 0; i < t->nconns; i++)
		conn_setup(t, t->conns[i]);
	for (;;) {
		int ph = atomic_load(&phase), n;

		if (ph == PH_ABORT)
			break;
		t->now = now_ns();
		if ((ph == PH_RUN || ph == PH_MEASURE) && last == PH_SETUP)
			for (size_t i = 0; i < t->nconns; i++)
				if (t->conns[i]->role != LG_RECEIVER)
					pump(t, t->conns[i], false);
		last = ph;
		if (ph == PH_STOP && thread_quiet(t))
			break;
		n = epoll_wait(t->epfd, evs, LG_MAX_EVENTS, 20);
		for (int i = 0; i < n; i++) {
			struct lg_conn *c = evs[i].data.ptr;

			if ((evs[i].events & EPOLLOUT) && !conn_flush(t, c))
				continue;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_readable(t, c);
		}
	}
	atomic_store(&t->finished, true);
	free(evs);
	return NULL;
}

/* --- connecting --------------------------------------------------------- */

struct pending {
	int	fd;
	unsigned idx;
	unsigned tries;
};

static int
connect_one(const struct sockaddr_in *dst, unsigned idx)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (opt.nsrc > 0) {
		struct sockaddr_in src = { .sin_family = AF_INET };

		/* 127.0.0.2 .. 127.0.0.(1 + nsrc); the port at connect(). */
		src.sin_addr.s_addr = htonl(0x7f000002u + idx % (unsigned)
		    opt.nsrc);
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
		    sizeof(one));
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
			close(fd);
			return -1;
		}
	}
	if (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) < 0 &&
	    errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static bool
retryable(int e)
{
	return e == ECONNREFUSED || e == ETIMEDOUT || e == EADDRNOTAVAIL ||
	    e == ECONNRESET || e == EAGAIN || e == EADDRINUSE;
}

/* Starts connection idx in slot p; false if it failed for good. */
static bool
start_connect(int ep, const struct sockaddr_in *dst, struct pending *p)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = p };

	for (;;) {
		p->fd = connect_one(dst, p->idx);
		if (p->fd >= 0)
			break;
		if (!retryable(errno) || ++p->tries > 50) {
			fprintf(stderr, "loadgen: connect #%u: %s\n", p->idx,
			    strerror(errno));
			return false;
		}
		usleep(10000);
	}
	if (epoll_ctl(ep, EPOLL_CTL_ADD, p->fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
	return true;
}

/*
 * Opens total connections to dst with at most conc connects in progress;
 * returns the fds in connect order (the order the server accepts them when
 * conc is 1), or exits.
 */
/*
 * Where connection idx goes: with -r, a cross pair's receiver (the odd
 * ones, see make_pairs) to the other node's port.
 */
static const struct sockaddr_in *
dst_of(const struct sockaddr_in *dst, unsigned idx)
{
	static struct sockaddr_in other;

	if (opt.rport == 0 || !(idx & 1))
		return dst;
	other = *dst;
	other.sin_port = htons((uint16_t)opt.rport);
	return &other;
}

static int *
connect_all(const struct sockaddr_in *dst, unsigned total, unsigned conc)
{
	int *fds = xcalloc(total, sizeof(int));
	struct pending *slots = xcalloc(conc, sizeof(*slots));
	struct epoll_event evs[256];
	uint64_t deadline = now_ns() + (uint64_t)(opt.ctimeout * 1e9);
	unsigned next = 0, done = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		die("epoll_create1: %s", strerror(errno));
	while (done < total) {
		for (unsigned i = 0; i < conc && next < total; i++) {
			if (slots[i].fd > 0)
				continue;
			slots[i] = (struct pending){ .idx = next++ };
			if (!start_connect(ep, dst_of(dst, slots[i].idx),
			    &slots[i]))
				exit(1);
		}
		if (now_ns() > deadline)
			die("connect: %u of %u after %.0f s", done, total,
			    opt.ctimeout);
		int n = epoll_wait(ep, evs, 256, 50);
		for (int i = 0; i < n; i++) {
			struct pending *p = evs[i].data.ptr;
			int err = 0;
			socklen_t el = sizeof(err);

			getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el);
			epoll_ctl(ep, EPOLL_CTL_DEL, p->fd, NULL);
			if (err == 0) {
				fds[p->idx] = p->fd;
				p->fd = 0;
				done++;
				continue;
			}
			close(p->fd);
			if (!retryable(err) || ++p->tries > 50) {
				fprintf(stderr, "loadgen: connect #%u: %s\n",
				    p->idx, strerror(err));
				exit(1);
			}
			if (!start_connect(ep, dst_of(dst, p->idx), p))
				exit(1);
		}
	}
	close(ep);
	free(slots);
	return fds;
}

/* --- set-up, phases and the report -------------------------------------- */

static struct lg_conn *
conn_new(int fd, uint32_t id, uint8_t role)
{
	struct lg_conn *c = xcalloc(1, sizeof(*c));

	c->fd = fd;
	c->id = id;
	c->role = role;
	if (role != LG_RECEIVER)
		c->ts = xcalloc(opt.depth, sizeof(uint64_t));
	if (role != LG_PLAIN)
		pair_addr_cache(c);
	return c;
}

static void
thread_add(struct lg_thread *t, struct lg_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	t->conns[t->nconns++] = c;
	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
}

/*
 * Pairs connections made in order. The server places connection i on
 * reactor i mod M, so cross pairs are (2k, 2k+1) and same-reactor pairs
 * take a sender and a receiver M connections apart in blocks of 2M.
 */
static void
make_pairs(int *fds, unsigned total)
{
	unsigned m = opt.reactors;

	for (unsigned k = 0; k < opt.pairs; k++) {
		unsigned si, ri;
		struct lg_conn *s, *r;
		struct lg_thread *t = &thr[k % opt.threads];

		if (opt.same) {
			unsigned b = k / m, j = k % m;

			si = b * 2 * m + j;
			ri = si + m;
		} else {
			si = 2 * k;
			ri = 2 * k + 1;
		}
		if (si >= total || ri >= total)
			die("internal: pair %u out of range", k);
		s = conn_new(fds[si], k, LG_SENDER);
		r = conn_new(fds[ri], k, LG_RECEIVER);
		s->peer = r;
		r->peer = s;
		pair_req_cache(s);
		thread_add(t, s);
		thread_add(t, r);
	}
}

static void
threads_init(int *fds, unsigned total)
{
	thr = xcalloc(opt.threads, sizeof(*thr));
	for (unsigned i = 0; i < opt.threads; i++) {
		thr[i].idx = i;
		thr[i].epfd = epoll_create1(EPOLL_CLOEXEC);
		thr[i].conns = xcalloc(total / opt.threads + 2,
		    sizeof(struct lg_conn *));
		thr[i].scratch = xcalloc(1, LG_SCRATCH + 1);
		thr[i].inbuf = xcalloc(1, LG_SCRATCH + 1);
		if (thr[i].epfd < 0)
			die("epoll_create1: %s", strerror(errno));
	}
	if (opt.mode == LG_ECHO || opt.mode == LG_LINE) {
		for (unsigned i = 0; i < total; i++)
			thread_add(&thr[i % opt.threads],
			    conn_new(fds[i], i, LG_PLAIN));
	} else {
		make_pairs(fds, total);
	}
}

static uint64_t
sum_done(void)
{
	uint64_t s = 0;

	for (unsigned i = 0; i < opt.threads; i++)
		s += atomic_load_explicit(&thr[i].done, memory_order_relaxed);
	return s;
}

/* Parts received over the whole run, and the texts joined from them. */
static uint64_t
sum_parts(uint64_t *joined)
{
	uint64_t s = 0;

	*joined = 0;
	for (unsigned i = 0; i < opt.threads; i++) {
		s += atomic_load(&thr[i].parts);
		*joined += atomic_load(&thr[i].joined);
	}
	return s;
}

static uint64_t
sum_errors(void)
{
	uint64_t s = 0;

	for (unsigned i = 0; i < opt.threads; i++)
		s += atomic_load(&thr[i].errors);
	return s;
}

static unsigned
sum_ready(void)
{
	unsigned s = 0;

	for (unsigned i = 0; i < opt.threads; i++)
		s += atomic_load(&thr[i].nready);
	return s;
}

static bool
all_finished(void)
{
	for (unsigned i = 0; i < opt.threads; i++)
		if (!atomic_load(&thr[i].finished))
			return false;
	return true;
}

static void
sleep_until(uint64_t t)
{
	uint64_t now = now_ns();

	if (t > now) {
		struct timespec ts = { (time_t)((t - now) / 1000000000u),
		    (long)((t - now) % 1000000000u) };

		nanosleep(&ts, NULL);
	}
}

/* Waits until every connection has done its set-up, or exits. */
static void
wait_ready(unsigned total)
{
	uint64_t deadline = now_ns() + (uint64_t)(opt.ctimeout * 1e9);

	while (sum_ready() < total) {
		if (sum_errors() > 0 || now_ns() > deadline) {
			atomic_store(&phase, PH_ABORT);
			fprintf(stderr, "loadgen: set-up: %u of %u ready, "
			    "%" PRIu64 " errors\n", sum_ready(), total,
			    sum_errors());
			for (unsigned i = 0; i < opt.threads; i++)
				if (thr[i].first_error[0] != '\0')
					fprintf(stderr, "loadgen: %s\n",
					    thr[i].first_error);
			exit(1);
		}
		usleep(2000);
	}
}

/* -S: the server's CPU (user + system) over the measured period, in
 * clock ticks read from /proc/PID/stat at its start and end. */
static long long srv_ticks0 = -1, srv_ticks1 = -1;

/* utime + stime of process PID in clock ticks, or -1. */
static long long
proc_cpu_ticks(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* After "pid (comm) ", whose comm may hold spaces: field 3 on;
	 * utime and stime are fields 14 and 15. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
	    "%llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* Runs warm-up and measurement; returns the measured seconds. */
static double
run_phases(uint64_t *measured)
{
	uint64_t t0 = now_ns(), tm, tend, d0 = 0, last = 0;
	bool progress = opt.warm + opt.dur > 4;

	atomic_store(&phase, PH_RUN);
	tm = t0 + (uint64_t)(opt.warm * 1e9);
	tend = tm + (uint64_t)(opt.dur * 1e9);
	for (unsigned s = 1;; s++) {
		uint64_t at = t0 + (uint64_t)s * 1000000000u, d;

		if (at >= tm && atomic_load(&phase) == PH_RUN) {
			sleep_until(tm);
			d0 = sum_done();
			atomic_store(&phase, PH_MEASURE);
			if (opt.srv_pid > 0)
				srv_ticks0 = proc_cpu_ticks(opt.srv_pid);
		}
		if (at >= tend) {
			sleep_until(tend);
			*measured = sum_done() - d0;
			atomic_store(&phase, PH_STOP);
			if (opt.srv_pid > 0)
				srv_ticks1 = proc_cpu_ticks(opt.srv_pid);
			return (double)(now_ns() - tm) / 1e9;
		}
		sleep_until(at);
		d = sum_done();
		if (progress)
			fprintf(stderr, "loadgen: %s t=%us %s rate=%" PRIu64
			    "/s errors=%" PRIu64 "\n", opt.label, s,
			    atomic_load(&phase) == PH_MEASURE ? "measure" :
			    "warm-up", d - last, sum_errors());
		last = d;
	}
}

/* Stops sending and waits for every outstanding reply; returns the lost. */
static uint64_t
drain(void)
{
	uint64_t deadline = now_ns() + (uint64_t)(opt.drain * 1e9), lost = 0;

	while (!all_finished() && now_ns() < deadline)
		usleep(5000);
	atomic_store(&phase, PH_ABORT);
	for (unsigned i = 0; i < opt.threads; i++) {
		pthread_join(thr[i].tid, NULL);
		for (size_t k = 0; k < thr[i].nconns; k++) {
			struct lg_conn *c = thr[i].conns[k];

			if (c->role != LG_RECEIVER)
				lost += c->sent - c->done;
			if (c->role == LG_SENDER && opt.mode != LG_NATS)
				lost += c->sent - c->acked;
		}
	}
	return lost;
}

/* -M's scraper: what it saw (see scrape_main). */
static struct {
	pthread_t tid;
	atomic_bool run;
	uint64_t n;		/* whole 200 answers read */
	uint64_t max_ns;	/* the slowest, request sent to body read */
	char	error[128];	/* the first failure; the scraper stops */
} scr;

static void
report(unsigned total, uint64_t msgs, double secs, uint64_t lost)
{
	uint64_t *h = xcalloc(LG_HIST_N, sizeof(uint64_t)), n = 0;
	uint64_t errors = sum_errors();

	for (unsigned i = 0; i < opt.threads; i++) {
		for (unsigned k = 0; k < LG_HIST_N; k++)
			h[k] += thr[i].hist[k];
		n += thr[i].nlat;
		if (thr[i].first_error[0] != '\0')
			fprintf(stderr, "loadgen: first error: %s\n",
			    thr[i].first_error);
	}
	if (lost > 0)
		fprintf(stderr, "loadgen: %" PRIu64 " replies lost\n", lost);
	printf("RESULT label=%s mode=%s conns=%u n=%u pairs=%u d=%u size=%u "
	    "threads=%u secs=%.2f msgs=%" PRIu64 " rate=%.0f p50_us=%.1f "
	    "p99_us=%.1f p999_us=%.1f errors=%" PRIu64 " lost=%" PRIu64,
	    opt.label, opt.hold > 0 ? "idle" : mode_names[opt.mode], total,
	    opt.n, (opt.mode >= LG_ROUTER ? opt.pairs : 0), opt.depth,
	    opt.size, opt.threads, secs, msgs, secs > 0 ? msgs / secs : 0,
	    hist_pct(h, n, 50), hist_pct(h, n, 99), hist_pct(h, n, 99.9),
	    errors, lost);
	if (opt.mode == LG_SMPP) {
		uint64_t joined, parts = sum_parts(&joined);

		printf(" parts=%" PRIu64 " parts_per_msg=%.2f", parts,
		    joined > 0 ? (double)parts / (double)joined : 0.0);
	}
	if (opt.receipts) {
		uint64_t r = 0;

		for (unsigned i = 0; i < opt.threads; i++)
			r += atomic_load(&thr[i].rcpts);
		printf(" receipts=%" PRIu64 " receipt_rate=%.0f", r,
		    secs > 0 ? (double)r / secs : 0.0);
	}
	/* -S: one field more, the server's CPU over the measured period
	 * (-1 when its /proc/PID/stat could not be read). */
	if (opt.srv_pid > 0 && opt.hold == 0)
		printf(" srv_cpu_us=%.0f", srv_ticks0 >= 0 &&
		    srv_ticks1 >= srv_ticks0 ? (double)(srv_ticks1 -
		    srv_ticks0) * 1e6 / (double)sysconf(_SC_CLK_TCK) : -1.0);
	if (opt.scrape_port > 0)
		printf(" scrapes=%" PRIu64 " scrape_max_ms=%.1f", scr.n,
		    (double)scr.max_ns / 1e6);
	printf("\n");
	fflush(stdout);
	free(h);
}

/* --- -M: a Prometheus-like scraper beside the load ----------------------- */

/* One GET /metrics on fd, answered 200 with a whole body: 0, or -1. */
static int
scrape_once(int fd, char *buf, size_t cap)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: lg\r\n\r\n";
	size_t have = 0, need = 0;
	char *end;

	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		return -1;
	for (;;) {
		ssize_t n = read(fd, buf + have, cap - 1 - have);

		if (n <= 0)
			return -1;
		have += (size_t)n;
		buf[have] = '\0';
		if (need == 0 && (end = strstr(buf, "\r\n\r\n")) != NULL) {
			char *cl = strstr(buf, "Content-Length: ");

			if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0 || cl == NULL)
				return -1;
			need = (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL,
			    10);
			if (need >= cap)
				return -1;
		}
		if (need > 0 && have >= need)
			return have == need ? 0 : -1;
	}
}

static void *
scrape_main(void *arg)
{
	struct sockaddr_in dst = *(struct sockaddr_in *)arg;
	size_t cap = 4 << 20;
	char *buf = xcalloc(1, cap);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = 5 };

	dst.sin_port = htons((uint16_t)opt.scrape_port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		snprintf(scr.error, sizeof(scr.error), "connect: %s",
		    strerror(errno));
		goto out;
	}
	while (atomic_load(&scr.run)) {
		uint64_t t0 = now_ns(), dt;

		if (scrape_once(fd, buf, cap) < 0) {
			snprintf(scr.error, sizeof(scr.error), "scrape %" PRIu64
			    " failed", scr.n + 1);
			break;
		}
		dt = now_ns() - t0;
		if (dt > scr.max_ns)
			scr.max_ns = dt;
		scr.n++;
		sleep_until(t0 + 100000000);
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* --- options ------------------------------------------------------------ */

static void
usage(void)
{
	fprintf(stderr,
	    "usage: loadgen -m echo|line|router|redis|nats|smpp -p PORT [options]\n"
	    "  -h HOST      server address (127.0.0.1)\n"
	    "  -n N         connections (echo, line)          [100]\n"
	    "  -P P         sender->receiver pairs            [100]\n"
	    "  -d D         requests in flight per conn/pair  [1]\n"
	    "  -s BYTES     message size (echo, pair modes)   [64]\n"
	    "  -t T         threads                           [2]\n"
	    "  -w SECS      warm-up                           [2]\n"
	    "  -D SECS      measured duration                 [5]\n"
	    "  -I SECS      one request per conn, then hold idle SECS\n"
	    "  -q TEXT      line request  [PING]   -e TEXT  reply prefix [+PONG]\n"
	    "  -l FMT       line: a set-up line first, %%u the connection\n"
	    "  -K K         line: %%u in -q walks 0..K-1 (a target per message)\n"
	    "  -x same|cross  router/smpp pair placement       [cross]\n"
	    "  -R M         server reactors (for placement)   [2]\n"
	    "  -a K         rotate sources over 127.0.0.2..+K (0: none; "
	    "auto: 16 if N>=4000)\n"
	    "  -c C         concurrent connects               [256]\n"
	    "  -C SECS      connect + set-up time limit       [60]\n"
	    "  -T SECS      drain time limit                  [5]\n"
	    "  -L LABEL     label echoed in the RESULT line\n"
	    "  -S PID       also report PID's user+system CPU over the measured\n"
	    "               period (srv_cpu_us=, from /proc/PID/stat)\n"
	    "  -M PORT      meanwhile GET /metrics on PORT every 100 ms, on one\n"
	    "               keep-alive connection (scrapes=, scrape_max_ms=)\n"
	    "  -r PORT      router -x cross: receivers connect to PORT (another\n"
	    "               node of a cluster), senders to -p\n"
	    "  -g           smpp: senders are router line clients (LOGIN,\n"
	    "               SEND) on -p; receivers bind on -r\n"
	    "  -u           -g: a text that needs UCS-2 (-s characters), the\n"
	    "               receivers join and check its UDH parts (parts=)\n"
	    "  -E           -g: senders send RECEIPTS ON and count RCPT lines\n"
	    "  -H           HTTP/1.1 keep-alive: line mode GETs -q (a path), a\n"
	    "               2xx is the answer; with -g the senders GET Kannel's\n"
	    "               /cgi-bin/sendsms (username=sender, to=receiver,\n"
	    "               then -q: more fields, \"&dlr-mask=1&...\")\n"
	    "               (receipts=, receipt_rate=; each must be DELIVRD)\n"
	    "  -A PREFIX    pair addresses start with PREFIX (a route's prefix,\n"
	    "               such as +351 for an upstream), not lg<pid>\n"
	    "  -Y           every connection over TLS (echo and line modes)\n"
	    "  -m handshake -Y: per thread, connect, handshake, one request\n"
	    "               (-q/-e, or 16 echoed bytes without -q), close;\n"
	    "               rate = such cycles per second; -Z resumes sessions\n");
	exit(2);
}

static unsigned
num(const char *s, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		die("bad number \"%s\" (want %u..%u)", s, lo, hi);
	return (unsigned)v;
}

static double
secs(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || v < 0 || v > 3600)
		die("bad duration \"%s\"", s);
	return v;
}

static enum lg_mode
mode_of(const char *s)
{
	for (unsigned i = 0; i < sizeof(mode_names) / sizeof(*mode_names); i++)
		if (strcmp(s, mode_names[i]) == 0)
			return (enum lg_mode)i;
	die("unknown mode \"%s\"", s);
}

static void
parse_opts(int argc, char **argv)
{
	int ch;

	while ((ch = getopt(argc, argv, "m:h:p:n:P:d:s:t:w:D:I:q:e:x:R:a:c:M:r:YZ"
	    "C:T:L:S:l:K:guA:EH")) != -1) {
		switch (ch) {
		case 'm': opt.mode = mode_of(optarg); break;
		case 'h': opt.host = optarg; break;
		case 'p': opt.port = (int)num(optarg, 1, 65535); break;
		case 'n': opt.n = num(optarg, 1, 1000000); break;
		case 'P': opt.pairs = num(optarg, 1, 500000); break;
		case 'd': opt.depth = num(optarg, 1, 1024); break;
		case 's': opt.size = num(optarg, 8, 4000); break;
		case 't': opt.threads = num(optarg, 1, 256); break;
		case 'w': opt.warm = secs(optarg); break;
		case 'D': opt.dur = secs(optarg); break;
		case 'I': opt.hold = secs(optarg); break;
		case 'q': opt.req = optarg; opt.req_set = true; break;
		case 'e': opt.expect = optarg; break;
		case 'x':
			if (strcmp(optarg, "same") && strcmp(optarg, "cross"))
				usage();
			opt.same = strcmp(optarg, "same") == 0;
			break;
		case 'R': opt.reactors = num(optarg, 1, 1024); break;
		case 'a': opt.nsrc = (int)num(optarg, 0, 250); break;
		case 'c': opt.conc = num(optarg, 1, 65536); break;
		case 'C': opt.ctimeout = secs(optarg); break;
		case 'T': opt.drain = secs(optarg); break;
		case 'L': opt.label = optarg; break;
		case 'S': opt.srv_pid = (long)num(optarg, 1, 4194304); break;
		case 'M': opt.scrape_port = (int)num(optarg, 1, 65535); break;
		case 'r': opt.rport = (int)num(optarg, 1, 65535); break;
		case 'Y': opt.tls = true; break;
		case 'Z': opt.resume = true; break;
		case 'l': opt.setup = optarg; break;
		case 'K': opt.targets = num(optarg, 1, 1000000); break;
		case 'g': opt.line_senders = true; break;
		case 'u': opt.ucs2 = true; break;
		case 'A': opt.addr_prefix = optarg; break;
		case 'E': opt.receipts = true; break;
		case 'H': opt.http = true; break;
		default: usage();
		}
	}
	if (optind != argc || opt.port == 0)
		usage();
	if (opt.hold > 0 && opt.mode != LG_ECHO && opt.mode != LG_LINE)
		die("-I works with echo and line modes only");
	if ((opt.setup != NULL || opt.targets > 0) && opt.mode != LG_LINE)
		die("-l and -K work with line mode only");
	if (opt.setup != NULL && opt.hold > 0)
		die("-l and -I do not mix");
	if (opt.mode == LG_SMPP && opt.size > 254 && !opt.line_senders)
		die("smpp: -s at most 254 (short_message)");
	if (opt.line_senders && (opt.mode != LG_SMPP || opt.rport == 0 ||
	    opt.same))
		die("-g works with -m smpp -x cross -r PORT only");
	if (opt.ucs2 && !opt.line_senders)
		die("-u works with -g only");
	if (opt.receipts && !opt.line_senders)
		die("-E works with -g only");
	if (opt.http && ((opt.mode != LG_LINE && !opt.line_senders) ||
	    opt.setup != NULL || opt.receipts || opt.ucs2 || opt.tls))
		die("-H works with -m line (no -l) or -m smpp -g (no -E, -u) "
		    "only, without -Y");
	if ((opt.mode == LG_ROUTER || opt.mode == LG_SMPP) && opt.same &&
	    opt.pairs % opt.reactors)
		die("same-reactor pairs: -P must be a multiple of -R");
	if (opt.tls && opt.mode != LG_ECHO && opt.mode != LG_LINE &&
	    opt.mode != LG_HANDSHAKE)
		die("-Y works with echo, line and handshake modes only");
	if (opt.mode == LG_HANDSHAKE && !opt.tls)
		die("-m handshake needs -Y");
	if (opt.rport != 0 && ((opt.mode != LG_ROUTER && !opt.line_senders) ||
	    opt.same))
		die("-r works with -m router (or smpp -g) -x cross only");
	if ((opt.mode == LG_ROUTER || opt.mode == LG_SMPP) && !opt.same &&
	    opt.reactors < 2)
		die("cross-reactor pairs need -R 2 or more");
}

/* -Y: a client context (no verification: a benchmark, on loopback). */
static void
tls_init(void)
{
#if LG_TLS
	struct rlimit rl;

	if (!opt.tls)
		return;
	if ((tls_ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		die("SSL_CTX_new failed");
	SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	getrlimit(RLIMIT_NOFILE, &rl);
	tls_nfd = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : (int)rl.rlim_cur;
	tls_by_fd = xcalloc((size_t)tls_nfd, sizeof(*tls_by_fd));
#else
	if (opt.tls)
		die("-Y: this loadgen was built without OpenSSL");
#endif
}

/* -Y: every connection's handshake, one after another (bounded). */
static void
tls_handshake_all(const int *fds, unsigned total)
{
#if LG_TLS
	uint64_t deadline = now_ns() + (uint64_t)(opt.ctimeout * 1e9);

	if (!opt.tls)
		return;
	for (unsigned i = 0; i < total; i++) {
		SSL *ssl = SSL_new(tls_ctx);
		int r;

		if (ssl == NULL || fds[i] >= tls_nfd ||
		    SSL_set_fd(ssl, fds[i]) != 1)
			die("TLS: cannot set up connection %u", i);
		tls_by_fd[fds[i]] = ssl;
		while ((r = SSL_connect(ssl)) != 1) {
			int e = SSL_get_error(ssl, r);
			struct pollfd pfd = { .fd = fds[i],
			    .events = e == SSL_ERROR_WANT_WRITE ? POLLOUT :
			    POLLIN };

			if ((e != SSL_ERROR_WANT_READ &&
			    e != SSL_ERROR_WANT_WRITE) || now_ns() > deadline)
				die("TLS handshake %u of %u failed", i + 1, total);
			poll(&pfd, 1, 100);
		}
	}
#else
	(void)fds;
	(void)total;
#endif
}

/* --- -m handshake: new TLS connections per second ---------------------- */

#if LG_TLS
struct hs_thread {
	pthread_t tid;
	struct sockaddr_in dst;
	uint64_t done;		/* cycles finished in the measured period */
	uint64_t resumed;	/* of them, with a resumed session */
	char	error[160];
};

/* One cycle: connect, handshake, one request and its answer, close. */
static int
hs_cycle(struct hs_thread *h, SSL_SESSION **sess)
{
	char req[64], buf[256];
	size_t want, got = 0, n;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok = -1;
	struct timeval tv = { .tv_sec = 5 };
	SSL *ssl = NULL;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&h->dst, sizeof(h->dst)) < 0 ||
	    (ssl = SSL_new(tls_ctx)) == NULL || SSL_set_fd(ssl, fd) != 1)
		goto out;
	if (opt.resume && *sess != NULL)
		SSL_set_session(ssl, *sess);
	if (SSL_connect(ssl) != 1)
		goto out;
	if (SSL_session_reused(ssl))
		h->resumed++;
	/* A line request (-q, answered by -e) or 16 bytes of echo. */
	if (opt.req_set) {
		memcpy(req, line_req, line_req_len);
		n = line_req_len;
		want = strlen(opt.expect);
	} else {
		memset(req, 'x', 16);
		n = 16;
		want = 16;
	}
	if (SSL_write_ex(ssl, req, n, &got) != 1)
		goto out;
	for (got = 0; got < want;) {
		size_t k = 0;

		if (SSL_read_ex(ssl, buf + got, sizeof(buf) - got, &k) != 1)
			goto out;
		got += k;
	}
	/* TLS 1.3 tickets come after the handshake: now we have one. */
	if (opt.resume) {
		SSL_SESSION *s = SSL_get1_session(ssl);

		if (s != NULL) {
			SSL_SESSION_free(*sess);
			*sess = s;
		}
	}
	/* close_notify: a session freed without it cannot be resumed. */
	SSL_shutdown(ssl);
	ok = 0;
out:
	if (ok < 0 && h->error[0] == '\0')
		snprintf(h->error, sizeof(h->error), "cycle failed: %s",
		    strerror(errno));
	ERR_clear_error();
	SSL_free(ssl);
	close(fd);
	return ok;
}

static void *
hs_main(void *arg)
{
	struct hs_thread *h = arg;
	SSL_SESSION *sess = NULL;
	uint64_t start = now_ns(), measure = start + (uint64_t)(opt.warm * 1e9),
	    end = measure + (uint64_t)(opt.dur * 1e9);

	while (now_ns() < end) {
		if (hs_cycle(h, &sess) < 0)
			break;
		if (now_ns() >= measure)
			h->done++;
	}
	SSL_SESSION_free(sess);
	return NULL;
}
#endif

static int
handshake_run(void)
{
#if LG_TLS
	struct hs_thread *hs = xcalloc(opt.threads, sizeof(*hs));
	uint64_t done = 0, resumed = 0, errors = 0;

	tls_init();
	line_req_len = (size_t)snprintf(line_req, sizeof(line_req), "%s\r\n",
	    opt.req);
	for (unsigned i = 0; i < opt.threads; i++) {
		hs[i].dst.sin_family = AF_INET;
		hs[i].dst.sin_port = htons((uint16_t)opt.port);
		if (inet_pton(AF_INET, opt.host, &hs[i].dst.sin_addr) != 1)
			die("bad IPv4 address \"%s\"", opt.host);
		if (pthread_create(&hs[i].tid, NULL, hs_main, &hs[i]))
			die("pthread_create failed");
	}
	for (unsigned i = 0; i < opt.threads; i++) {
		pthread_join(hs[i].tid, NULL);
		done += hs[i].done;
		resumed += hs[i].resumed;
		if (hs[i].error[0] != '\0') {
			fprintf(stderr, "loadgen: %s\n", hs[i].error);
			errors++;
		}
	}
	printf("RESULT label=%s mode=handshake threads=%u secs=%.2f msgs=%"
	    PRIu64 " rate=%.0f resumed=%" PRIu64 " p99_us=0 errors=%" PRIu64
	    " lost=0\n", opt.label, opt.threads, opt.dur, done,
	    done / opt.dur, resumed, errors);
	return errors > 0 ? 1 : 0;
#else
	die("-m handshake: this loadgen was built without OpenSSL");
#endif
}

/* Raises the open-file limit to the hard one; checks that total fits. */
static void
raise_nofile(unsigned total)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY && (rlim_t)total + 32 > rl.rlim_cur)
		die("%u connections need %u open files; the limit is %llu",
		    total, total + 32, (unsigned long long)rl.rlim_cur);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	unsigned total;
	uint64_t msgs = 0, lost;
	double measured = 0;
	int *fds;

	parse_opts(argc, argv);
	if (opt.mode == LG_HANDSHAKE)
		return handshake_run();
	total = opt.mode >= LG_ROUTER ? 2 * opt.pairs : opt.n;
	if (opt.nsrc < 0)
		opt.nsrc = total >= 4000 ? 16 : 0;
	if (opt.threads > total)
		opt.threads = total;
	if (inet_pton(AF_INET, opt.host, &dst.sin_addr) != 1)
		die("bad IPv4 address \"%s\"", opt.host);
	dst.sin_port = htons((uint16_t)opt.port);
	raise_nofile(total);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm((unsigned)(2 * opt.ctimeout + opt.warm + opt.dur + opt.hold +
	    opt.drain + 15));
	echo_pat_init();
	/* -H: a keep-alive HTTP/1.1 GET of the request target -q. */
	line_req_len = (size_t)snprintf(line_req, sizeof(line_req),
	    opt.http ? "GET %s HTTP/1.1\r\nHost: loadgen\r\n\r\n" :
	    "%s\r\n", opt.req);
	if (line_req_len >= sizeof(line_req))
		die("request longer than %zu bytes", sizeof(line_req) - 3);
	line_expect_len = strlen(opt.expect);
	/*
	 * The pid keeps a run's addresses apart from a previous run's that
	 * the server may not have dropped yet; a prefix (-A) keeps short
	 * enough for an SMPP system_id (15).
	 */
	if (opt.addr_prefix != NULL) {
		if (strlen(opt.addr_prefix) > 6)
			die("-A %s: longer than 6", opt.addr_prefix);
		snprintf(run_tag, sizeof(run_tag), "%s%ld", opt.addr_prefix,
		    (long)getpid() % 10000);
	} else
		snprintf(run_tag, sizeof(run_tag), "lg%ld", (long)getpid());

	/* Router placement follows connect order: one connect at a time. */
	tls_init();
	if (!opt.tls) {
		fds = connect_all(&dst, total, opt.mode == LG_ROUTER ||
		    opt.mode == LG_SMPP ? 1 : opt.conc);
	} else {
		/*
		 * In chunks, each handshaken before the next connects: a
		 * server closes a client that sits on its handshake (as
		 * echorouterd does at handshake_timeout).
		 */
		fds = xcalloc(total, sizeof(*fds));
		for (unsigned at = 0; at < total; at += LG_TLS_CHUNK) {
			unsigned k = total - at < LG_TLS_CHUNK ? total - at :
			    LG_TLS_CHUNK;
			int *part = connect_all(&dst, k, opt.conc);

			tls_handshake_all(part, k);
			memcpy(fds + at, part, k * sizeof(*fds));
			free(part);
		}
	}
	threads_init(fds, total);
	free(fds);
	for (unsigned i = 0; i < opt.threads; i++)
		if (pthread_create(&thr[i].tid, NULL, thread_main, &thr[i]))
			die("pthread_create failed");
	wait_ready(total);
	if (opt.scrape_port > 0) {
		atomic_store(&scr.run, true);
		if (pthread_create(&scr.tid, NULL, scrape_main, &dst))
			die("pthread_create failed");
	}
	if (opt.hold > 0) {
		printf("IDLE conns=%u\n", total);
		fflush(stdout);
		sleep_until(now_ns() + (uint64_t)(opt.hold * 1e9));
		atomic_store(&phase, PH_STOP);
	} else {
		measured = run_phases(&msgs);
	}
	if (opt.scrape_port > 0) {
		atomic_store(&scr.run, false);
		pthread_join(scr.tid, NULL);
		if (scr.error[0] != '\0')
			fprintf(stderr, "loadgen: -M: %s\n", scr.error);
	}
	lost = drain();
	report(total, msgs, measured, lost);
	return sum_errors() > 0 || lost > 0 || scr.error[0] != '\0' ? 1 : 0;
}
