/* tls.c: TLS listeners: contexts from the tls group, and a non-blocking OpenSSL transport. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "config.h"
#include "conn.h"
#include "counter.h"
#include "log.h"
#include "tls.h"
#include "transport.h"
#include "util.h"

struct tls_ctx {
	SSL_CTX	*ssl;
	atomic_uint refs;
};

/* OpenSSL's first queued error as text (and the queue emptied). */
static const char *
ssl_error(char *buf, size_t len)
{
	unsigned long code = ERR_get_error();

	if (code == 0)
		snprintf(buf, len, "unknown error");
	else
		ERR_error_string_n(code, buf, len);
	ERR_clear_error();
	return buf;
}

/* err = "what path: OpenSSL's reason"; returns false. */
static bool
fail(char *err, size_t len, const char *what, const char *path)
{
	char why[256];

	snprintf(err, len, "%s %s: %s", what, path, ssl_error(why,
	    sizeof(why)));
	return false;
}

static bool
ctx_setup(SSL_CTX *ssl, const struct tls_conf *tc, char *err, size_t len)
{
	static const unsigned char sid[] = "echorouterd";

	SSL_CTX_set_min_proto_version(ssl, tc->min_version == 13 ?
	    TLS1_3_VERSION : TLS1_2_VERSION);
	/*
	 * Buffers go back while a connection is idle (an idle TLS client
	 * costs little); partial writes as from a socket; renegotiation,
	 * a way to make a server work for nothing, refused. Read-ahead:
	 * one read(2) takes what the socket holds, not a record header
	 * and then its body in two (what is left over is SSL_has_pending,
	 * which tls_has_pending reports).
	 */
	SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS |
	    SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ssl, 1);
	SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_ENABLE_KTLS);
	/* Resumption: a session cache for TLS 1.2 ids; tickets are on. */
	SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_SERVER);
	SSL_CTX_set_session_id_context(ssl, sid, sizeof(sid) - 1);
	if (SSL_CTX_use_certificate_chain_file(ssl, tc->certificate) != 1)
		return fail(err, len, "tls.certificate", tc->certificate);
	if (SSL_CTX_use_PrivateKey_file(ssl, tc->key, SSL_FILETYPE_PEM) != 1)
		return fail(err, len, "tls.key", tc->key);
	if (SSL_CTX_check_private_key(ssl) != 1)
		return fail(err, len, "tls.key does not match tls.certificate;",
		    tc->key);
	if (tc->ciphers[0] != '\0' &&
	    SSL_CTX_set_cipher_list(ssl, tc->ciphers) != 1)
		return fail(err, len, "tls.ciphers", tc->ciphers);
	if (tc->ca[0] != '\0') {
		STACK_OF(X509_NAME) *names;

		if (SSL_CTX_load_verify_locations(ssl, tc->ca, NULL) != 1)
			return fail(err, len, "tls.ca", tc->ca);
		/* Clients are told which CAs their certificate may come from. */
		if ((names = SSL_load_client_CA_file(tc->ca)) != NULL)
			SSL_CTX_set_client_CA_list(ssl, names);
	}
	SSL_CTX_set_verify(ssl, tc->verify_client ? SSL_VERIFY_PEER |
	    SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_NONE, NULL);
	return true;
}

void
tls_log_kernel(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");
	char ulp[256] = "";
	bool tls = false;

	if (f != NULL) {
		if (fgets(ulp, sizeof(ulp), f) != NULL)
			ulp[strcspn(ulp, "\n")] = '\0';
		fclose(f);
	}
	for (char *p = strtok(ulp, " "); p != NULL; p = strtok(NULL, " "))
		tls = tls || strcmp(p, "tls") == 0;
	if (tls)
		log_notice("TLS: kernel TLS available: records go through "
		    "the kernel where the cipher allows (tls_ktls in the "
		    "stats line)");
	else
		log_notice("TLS: no kernel TLS (no \"tls\" in "
		    "net.ipv4.tcp_available_ulp; modprobe tls): OpenSSL "
		    "encrypts in the reactors");
}

struct tls_ctx *
tls_ctx_new(const struct tls_conf *tc, char *err, size_t len)
{
	struct tls_ctx *ctx;
	SSL_CTX *ssl;

	ERR_clear_error();
	if ((ssl = SSL_CTX_new(TLS_server_method())) == NULL) {
		char why[256];

		snprintf(err, len, "TLS: %s", ssl_error(why, sizeof(why)));
		return NULL;
	}
	if (!ctx_setup(ssl, tc, err, len)) {
		SSL_CTX_free(ssl);
		return NULL;
	}
	ctx = xcalloc(1, sizeof(*ctx));
	ctx->ssl = ssl;
	atomic_init(&ctx->refs, 1);
	return ctx;
}

struct tls_ctx *
tls_ctx_ref(struct tls_ctx *ctx)
{
	if (ctx != NULL)
		atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
	return ctx;
}

void
tls_ctx_unref(struct tls_ctx *ctx)
{
	if (ctx == NULL || atomic_fetch_sub_explicit(&ctx->refs, 1,
	    memory_order_acq_rel) != 1)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

/* ---- the transport: one per connection, on its reactor ---------------- */

/*
 * A connection's TLS. OpenSSL may want to write while the connection
 * reads (the handshake, a TLS 1.3 key update) or read while it writes:
 * want_write is what the socket must say before we try again, and the
 * interest conn.c asks for is adjusted to it (tls_events).
 */
struct tls_xp {
	struct transport xp;		/* first: c->xp is this */
	SSL	*ssl;
	unsigned deadline;		/* reactor seconds: handshake done by */
	bool	handshaken;
	bool	want_write;		/* OpenSSL waits for a writable socket */
	bool	want_read;		/* a write waits for input (handshake) */
	bool	failed;
	bool	deferred;		/* the turn's handshake budget was spent */
	int	reason;			/* OpenSSL's reason for the failure */
};

/*
 * Handshake steps a reactor takes per loop turn. A step can cost a
 * signature (a millisecond): a flood of new clients waits its turn, in
 * the order they came, rather than stall the clients already served.
 * Each reactor is a thread: the budget is the thread's.
 */
#define TLS_HANDSHAKES_PER_TURN	8

static __thread struct {
	uint64_t turn;			/* the reactor's turn_ns it is for */
	unsigned used;
} hs_budget;

static inline struct tls_xp *
tls_of(struct conn *c)
{
	return (struct tls_xp *)c->xp;
}

/*
 * Maps an OpenSSL result to the transport's: EAGAIN for WANT_*, 0 for the
 * peer's close, -1 (errno EPROTO or the socket's) for a failure.
 */
static ssize_t
tls_result(struct tls_xp *t, int ret)
{
	int e = SSL_get_error(t->ssl, ret), saved = errno;

	t->want_write = e == SSL_ERROR_WANT_WRITE;
	t->want_read = e == SSL_ERROR_WANT_READ;
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;		/* close_notify */
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		/* EOF without close_notify: a close like any other. */
		if (saved == 0)
			return 0;
		errno = saved;
		t->failed = true;
		return -1;
	default:
		t->reason = ERR_GET_REASON(ERR_peek_error());
		ERR_clear_error();
		t->failed = true;
		errno = EPROTO;
		return -1;
	}
}

/*
 * Moves the handshake on: true once it is done. A failure closes c,
 * counted by why (the closed reason is "protocol").
 */
static bool
tls_handshake(struct conn *c, struct tls_xp *t, ssize_t *res)
{
	enum counter_id why = COUNTER_TLS_BAD;
	int r;

	if (t->handshaken)
		return true;
	if (hs_budget.turn != c->r->turn_ns) {
		hs_budget.turn = c->r->turn_ns;
		hs_budget.used = 0;
	}
	/* Spent: again next turn (has_pending keeps the reactor awake). */
	if ((t->deferred = hs_budget.used >= TLS_HANDSHAKES_PER_TURN)) {
		errno = EAGAIN;
		*res = -1;
		return false;
	}
	hs_budget.used++;
	ERR_clear_error();
	if ((r = SSL_do_handshake(t->ssl)) == 1) {
		t->handshaken = true;
		t->want_read = t->want_write = false;
		counter_add(&c->r->counters, COUNTER_TLS_OK, 1);
		/* Kernel TLS where the kernel and the cipher allow it. */
		if (BIO_get_ktls_send(SSL_get_wbio(t->ssl)))
			counter_add(&c->r->counters, COUNTER_TLS_KTLS_SEND, 1);
		if (BIO_get_ktls_recv(SSL_get_rbio(t->ssl)))
			counter_add(&c->r->counters, COUNTER_TLS_KTLS_RECV, 1);
		return true;
	}
	*res = tls_result(t, r);
	if (*res < 0 && errno == EAGAIN)
		return false;
	/* A handshake that ends with the peer gone is a failure, not EOF. */
	if (*res == 0) {
		errno = ECONNRESET;
		*res = -1;
	}
	if (t->reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
	    t->reason == SSL_R_CERTIFICATE_VERIFY_FAILED ||
	    SSL_get_verify_result(t->ssl) != X509_V_OK)
		why = COUNTER_TLS_CERT;
	counter_add(&c->r->counters, why, 1);
	conn_close(c, CONN_CLOSE_PROTOCOL);
	return false;
}

static ssize_t
tls_read(struct conn *c, void *p, size_t n)
{
	struct tls_xp *t = tls_of(c);
	ssize_t res = -1;
	size_t got = 0;
	int r;

	if (!tls_handshake(c, t, &res))
		return res;
	ERR_clear_error();
	if ((r = SSL_read_ex(t->ssl, p, n, &got)) == 1) {
		t->want_read = t->want_write = false;
		return (ssize_t)got;
	}
	return tls_result(t, r);
}

/*
 * One record at a time from a gathered copy: OpenSSL writes a buffer, and
 * a write it could not finish is retried with the same bytes (the queue
 * only grows at its tail, so gathering again gives them back).
 */
static ssize_t
tls_writev(struct conn *c, const struct iovec *iov, int cnt)
{
	struct tls_xp *t = tls_of(c);
	uint8_t buf[16384];
	size_t n = 0, done = 0;
	ssize_t res = -1;
	int r;

	if (!tls_handshake(c, t, &res))
		return res;
	for (int i = 0; i < cnt && n < sizeof(buf); i++) {
		size_t k = iov[i].iov_len < sizeof(buf) - n ?
		    iov[i].iov_len : sizeof(buf) - n;

		memcpy(buf + n, iov[i].iov_base, k);
		n += k;
	}
	ERR_clear_error();
	if ((r = SSL_write_ex(t->ssl, buf, n, &done)) == 1) {
		t->want_read = t->want_write = false;
		return (ssize_t)done;
	}
	res = tls_result(t, r);
	return res == 0 ? (errno = EPIPE, -1) : res;
}

static int
tls_shutdown(struct conn *c)
{
	struct tls_xp *t = tls_of(c);

	/* close_notify, if the session is sound; the socket's buffer takes it. */
	if (t->handshaken && !t->failed) {
		ERR_clear_error();
		SSL_shutdown(t->ssl);
		ERR_clear_error();
	}
	return shutdown(c->io.fd, SHUT_WR);
}

static size_t
tls_unsent(struct conn *c)
{
	int n = 0;

	if (ioctl(c->io.fd, SIOCOUTQ, &n) < 0 || n < 0)
		return 0;
	return (size_t)n;
}

/*
 * What the socket must tell us, whatever conn.c wants: while OpenSSL
 * waits to write, writable; while a write waits for input (mid-
 * handshake), not writable, or the reactor would spin on it.
 */
static uint32_t
tls_events(struct conn *c, uint32_t events)
{
	struct tls_xp *t = tls_of(c);

	if (t->want_write)
		events |= EPOLLOUT;
	else if (!t->handshaken || t->want_read)
		events = (events & ~EPOLLOUT) | EPOLLIN;
	return events;
}

static bool
tls_has_pending(struct conn *c)
{
	struct tls_xp *t = tls_of(c);

	return t->deferred || (t->handshaken && SSL_has_pending(t->ssl));
}

/* A handshake not done by its deadline: closed (reason timeout). */
static void
tls_tick(struct conn *c)
{
	struct tls_xp *t = tls_of(c);

	if (!t->handshaken && c->r->now >= t->deadline) {
		counter_add(&c->r->counters, COUNTER_TLS_TIMEOUT, 1);
		conn_close(c, CONN_CLOSE_TIMEOUT);
	}
}

static void
tls_close(struct conn *c)
{
	struct tls_xp *t = tls_of(c);

	SSL_free(t->ssl);
	free(t);
}

static const struct transport_ops tls_ops = {
	.name = "tls",
	.read = tls_read,
	.writev = tls_writev,
	.shutdown = tls_shutdown,
	.unsent = tls_unsent,
	.events = tls_events,
	.has_pending = tls_has_pending,
	.tick = tls_tick,
	.batchable = false,
	.close = tls_close,
};

struct transport *
tls_transport_new(struct tls_ctx *ctx, int fd, unsigned now,
    unsigned timeout)
{
	struct tls_xp *t = xcalloc(1, sizeof(*t));

	if ((t->ssl = SSL_new(ctx->ssl)) == NULL ||
	    SSL_set_fd(t->ssl, fd) != 1) {
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	SSL_set_accept_state(t->ssl);
	t->xp.ops = &tls_ops;
	t->deadline = now + timeout;
	return &t->xp;
}
