/* transport_tls.c: the "tls" transport type: contexts from a tls group, and non-blocking OpenSSL connections, server and client side. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "config.h"
#include "conn.h"
#include "counter.h"
#include "iplimit.h"
#include "log.h"
#include "transport.h"
#include "transport_tls.h"
#include "util.h"

/* A type's context (transport.h): one SSL_CTX, server or client side. */
struct tls_ctx {
	struct transport_ctx base;	/* first: a transport_ctx is this */
	SSL_CTX	*ssl;
};

/*
 * The longest handshake message a client may send, its 4-byte header
 * aside: what fits the 16 KiB OpenSSL keeps for a handshake message.
 * OpenSSL would take a ClientHello of 128 KiB, and allocate (and zero)
 * what the header announces as soon as it has read 9 bytes; real ones,
 * post-quantum key shares included, are a few KiB.
 */
#define TLS_MSG_MAX		(16384 - 4)

/* Half-open handshakes in the process: the acceptor adds, reactors take. */
static atomic_uint tls_handshaking;

/* The BIO that checks handshake messages (tls_watch), made once. */
static BIO_METHOD *watch_method;
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;
static void watch_method_new(void);

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
ctx_setup_server(SSL_CTX *ssl, const struct tls_conf *tc, char *err,
    size_t len)
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
	if (SSL_CTX_set_cipher_list(ssl, tc->ciphers[0] != '\0' ?
	    tc->ciphers : TLS_CIPHERS_DEFAULT) != 1)
		return fail(err, len, "tls.ciphers", tc->ciphers);
	/* A client's certificate chain (TLS 1.3: encrypted, out of sight). */
	SSL_CTX_set_max_cert_list(ssl, TLS_MSG_MAX);
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

/*
 * The client side: the server is verified against tc->ca (its name
 * against the host each connection is for: tls_connect) unless
 * tc->no_verify, and our own certificate is shown if tc has
 * one. Modes as the server's.
 */
static bool
ctx_setup_client(SSL_CTX *ssl, const struct tls_conf *tc, char *err,
    size_t len)
{
	SSL_CTX_set_min_proto_version(ssl, tc->min_version == 13 ?
	    TLS1_3_VERSION : TLS1_2_VERSION);
	SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS |
	    SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ssl, 1);
	SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_ENABLE_KTLS);
	if (tc->ca[0] == '\0' && !tc->no_verify) {
		snprintf(err, len, "tls.ca: required to verify a server");
		return false;
	}
	if (tc->ca[0] != '\0' &&
	    SSL_CTX_load_verify_locations(ssl, tc->ca, NULL) != 1)
		return fail(err, len, "tls.ca", tc->ca);
	if (tc->certificate[0] != '\0' &&
	    SSL_CTX_use_certificate_chain_file(ssl, tc->certificate) != 1)
		return fail(err, len, "tls.certificate", tc->certificate);
	if (tc->key[0] != '\0' &&
	    SSL_CTX_use_PrivateKey_file(ssl, tc->key, SSL_FILETYPE_PEM) != 1)
		return fail(err, len, "tls.key", tc->key);
	if (SSL_CTX_set_cipher_list(ssl, tc->ciphers[0] != '\0' ?
	    tc->ciphers : TLS_CIPHERS_DEFAULT) != 1)
		return fail(err, len, "tls.ciphers", tc->ciphers);
	SSL_CTX_set_max_cert_list(ssl, TLS_MSG_MAX);
	/* An operator's choice for a test SMS centre: said in the man page. */
	SSL_CTX_set_verify(ssl, tc->no_verify ? SSL_VERIFY_NONE :
	    SSL_VERIFY_PEER, NULL);
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

/* A context of either side, its files read now; NULL and why in err. */
static struct transport_ctx *
tls_ctx_new(const struct tls_conf *tc, bool server, char *err, size_t len)
{
	struct tls_ctx *ctx;
	SSL_CTX *ssl;

	ERR_clear_error();
	pthread_once(&watch_once, watch_method_new);
	if (watch_method == NULL) {
		snprintf(err, len, "TLS: cannot make the handshake's BIO");
		return NULL;
	}
	if ((ssl = SSL_CTX_new(server ? TLS_server_method() :
	    TLS_client_method())) == NULL) {
		char why[256];

		snprintf(err, len, "TLS: %s", ssl_error(why, sizeof(why)));
		return NULL;
	}
	if (!(server ? ctx_setup_server(ssl, tc, err, len) :
	    ctx_setup_client(ssl, tc, err, len))) {
		SSL_CTX_free(ssl);
		return NULL;
	}
	ctx = xcalloc(1, sizeof(*ctx));
	ctx->ssl = ssl;
	transport_ctx_init(&ctx->base, &transport_type_tls);
	return &ctx->base;
}

static struct transport_ctx *
tls_prepare(const struct listener_conf *lc, char *err, size_t len)
{
	return tls_ctx_new(&lc->tls, true, err, len);
}

static struct transport_ctx *
tls_prepare_client(const struct tls_conf *tc, char *err, size_t len)
{
	return tls_ctx_new(tc, false, err, len);
}

static void
tls_ctx_release(struct transport_ctx *base)
{
	struct tls_ctx *ctx = (struct tls_ctx *)base;

	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

static int
tls_admit(struct iplimit_entry *ip, unsigned max, unsigned max_per_ip)
{
	/* Only the acceptor adds: what it reads can only have gone down. */
	if (max > 0 && atomic_load_explicit(&tls_handshaking,
	    memory_order_relaxed) >= max)
		return TRANSPORT_ADMIT_TOO_MANY;
	if (ip != NULL && max_per_ip > 0 && atomic_load_explicit(
	    &ip->handshakes, memory_order_relaxed) >= max_per_ip)
		return TRANSPORT_ADMIT_TOO_MANY_IP;
	if (ip != NULL)
		atomic_fetch_add_explicit(&ip->handshakes, 1,
		    memory_order_relaxed);
	atomic_fetch_add_explicit(&tls_handshaking, 1, memory_order_relaxed);
	return TRANSPORT_ADMIT_OK;
}

static void
tls_unadmit(struct iplimit_entry *ip)
{
	if (ip != NULL)
		atomic_fetch_sub_explicit(&ip->handshakes, 1,
		    memory_order_relaxed);
	atomic_fetch_sub_explicit(&tls_handshaking, 1, memory_order_relaxed);
}

/* ---- the transport: one per connection, on its reactor ---------------- */

/*
 * What the BIO in front of the socket has seen of the client's records
 * during the handshake. The header of each handshake message in the
 * clear (a second ClientHello after a HelloRetryRequest; TLS 1.2's
 * Certificate, ClientKeyExchange) is checked before OpenSSL reads it.
 */
struct tls_watch {
	uint8_t	rec[5];			/* a record's header, as it comes */
	uint8_t	nrec;
	uint8_t	hs[4];			/* a handshake message's header */
	uint8_t	nhs;
	uint32_t rec_left;		/* body bytes of the record to come */
	uint32_t hs_left;		/* body bytes of the message to come */
	bool	blind;			/* TLS 1.2 after ChangeCipherSpec */
	bool	refused;		/* a message over TLS_MSG_MAX */
};

/*
 * A connection's TLS. OpenSSL may want to write while the connection
 * reads (the handshake, a TLS 1.3 key update) or read while it writes:
 * want_write is what the socket must say before we try again, and the
 * interest conn.c asks for is adjusted to it (tls_events).
 */
struct tls_xp {
	struct transport xp;		/* first: c->xp is this */
	SSL	*ssl;
	BIO	*watch_bio;		/* before the socket's until handshaken */
	struct iplimit_entry *ip;	/* whose place it holds (tls_admit) */
	unsigned deadline;		/* reactor seconds: handshake done by */
	size_t	peeked;			/* bytes of a ClientHello seen waiting */
	bool	hello;			/* the first ClientHello is all there */
	bool	placed;			/* holds a half-open handshake's place */
	bool	lowat;			/* SO_RCVLOWAT raised while waiting */
	bool	handshaken;
	bool	want_write;		/* OpenSSL waits for a writable socket */
	bool	want_read;		/* a write waits for input (handshake) */
	bool	failed;			/* unsound: no close_notify */
	bool	deferred;		/* the turn's handshake budget was spent */
	int	reason;			/* OpenSSL's reason for the failure */
	struct tls_watch watch;
};

/* ---- the handshake's watch: message sizes before OpenSSL sees them ---- */

/* Checks the handshake bytes of one record's body; false: refused. */
static bool
watch_handshake(struct tls_watch *w, const uint8_t *p, size_t n)
{
	while (n > 0) {
		if (w->hs_left > 0) {
			size_t k = n < w->hs_left ? n : w->hs_left;

			w->hs_left -= (uint32_t)k;
			p += k;
			n -= k;
			continue;
		}
		w->hs[w->nhs++] = *p++;
		n--;
		if (w->nhs == sizeof(w->hs)) {
			w->nhs = 0;
			w->hs_left = (uint32_t)w->hs[1] << 16 |
			    (uint32_t)w->hs[2] << 8 | w->hs[3];
			if (w->hs_left > TLS_MSG_MAX)
				return false;
		}
	}
	return true;
}

/*
 * A record's header is in. TLS 1.2 encrypts what follows the client's
 * ChangeCipherSpec (its Finished, a handshake record all the same);
 * TLS 1.3 sends its encrypted handshake as application data records, so
 * a handshake record there is in the clear.
 */
static void
watch_record(struct tls_xp *t, struct tls_watch *w)
{
	w->rec_left = (uint32_t)w->rec[3] << 8 | w->rec[4];
	if (w->rec[0] == SSL3_RT_CHANGE_CIPHER_SPEC &&
	    SSL_version(t->ssl) <= TLS1_2_VERSION)
		w->blind = true;
	if (w->rec_left == 0)
		w->nrec = 0;
}

/* Follows n bytes of the client's records; false: refused. */
static bool
watch_scan(struct tls_xp *t, const uint8_t *p, size_t n)
{
	struct tls_watch *w = &t->watch;
	size_t k;

	while (n > 0 && !w->blind) {
		if (w->nrec < sizeof(w->rec)) {
			w->rec[w->nrec++] = *p++;
			n--;
			if (w->nrec == sizeof(w->rec))
				watch_record(t, w);
			continue;
		}
		k = n < w->rec_left ? n : w->rec_left;
		if (w->rec[0] == SSL3_RT_HANDSHAKE &&
		    !watch_handshake(w, p, k))
			return false;
		p += k;
		n -= k;
		if ((w->rec_left -= (uint32_t)k) == 0)
			w->nrec = 0;
	}
	return true;
}

static int
watch_read(BIO *b, char *out, int len)
{
	struct tls_xp *t = BIO_get_data(b);
	int n;

	if (BIO_next(b) == NULL || out == NULL)
		return 0;
	n = BIO_read(BIO_next(b), out, len);
	BIO_clear_retry_flags(b);
	BIO_copy_next_retry(b);
	if (n > 0 && !watch_scan(t, (const uint8_t *)out, (size_t)n)) {
		t->watch.refused = true;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

static int
watch_write(BIO *b, const char *in, int len)
{
	int n;

	if (BIO_next(b) == NULL)
		return 0;
	n = BIO_write(BIO_next(b), in, len);
	BIO_clear_retry_flags(b);
	BIO_copy_next_retry(b);
	return n;
}

/* Everything else is the socket's (kernel TLS included). */
static long
watch_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	return BIO_next(b) != NULL ? BIO_ctrl(BIO_next(b), cmd, num, ptr) : 0;
}

static int
watch_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void
watch_method_new(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER,
	    "echorouterd handshake watch");

	if (m == NULL || BIO_meth_set_read(m, watch_read) != 1 ||
	    BIO_meth_set_write(m, watch_write) != 1 ||
	    BIO_meth_set_ctrl(m, watch_ctrl) != 1 ||
	    BIO_meth_set_create(m, watch_create) != 1) {
		BIO_meth_free(m);
		return;
	}
	watch_method = m;
}

/* Puts the watch before the socket's BIO for reads; false if it cannot. */
static bool
watch_start(struct tls_xp *t)
{
	BIO *sock = SSL_get_rbio(t->ssl), *w;

	if (watch_method == NULL || (w = BIO_new(watch_method)) == NULL)
		return false;
	BIO_set_data(w, t);
	/* The chain's reference; SSL_set0_rbio drops the one it held. */
	BIO_up_ref(sock);
	BIO_push(w, sock);
	SSL_set0_rbio(t->ssl, w);
	t->watch_bio = w;
	return true;
}

/* Handshaken: reads go straight to the socket's BIO again. */
static void
watch_stop(struct tls_xp *t)
{
	BIO *sock;

	if (t->watch_bio == NULL)
		return;
	/* The chain's reference to the socket's BIO becomes the SSL's. */
	sock = BIO_pop(t->watch_bio);
	SSL_set0_rbio(t->ssl, sock);
	t->watch_bio = NULL;
}

static inline struct tls_xp *
tls_of(struct conn *c)
{
	return (struct tls_xp *)c->xp;
}

/* Bytes peeked for a ClientHello: the largest, in a few records. */
#define TLS_PEEK_MAX	(5 + 4 + TLS_MSG_MAX + 64 * 5)

enum hello {
	HELLO_WAIT,			/* not all there yet */
	HELLO_READY,			/* all there, or not one: OpenSSL's */
	HELLO_TOO_BIG,
};

/* What n bytes from the client's first say of its ClientHello. */
static enum hello
hello_scan(const uint8_t *p, size_t n)
{
	size_t off = 0, got = 0, need = 0;
	uint8_t hs[4];

	if (n > 0 && p[0] != SSL3_RT_HANDSHAKE)
		return HELLO_READY;
	while (off + 5 <= n) {
		size_t len = (size_t)p[off + 3] << 8 | p[off + 4], k;

		if (p[off] != SSL3_RT_HANDSHAKE || len == 0)
			return HELLO_READY;
		off += 5;
		k = len < n - off ? len : n - off;
		for (size_t i = 0; i < k && got + i < sizeof(hs); i++)
			hs[got + i] = p[off + i];
		got += k;
		off += k;
		if (need == 0 && got >= sizeof(hs)) {
			if (hs[0] != SSL3_MT_CLIENT_HELLO)
				return HELLO_READY;
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 |
			    hs[3]);
			if (need > 4 + TLS_MSG_MAX)
				return HELLO_TOO_BIG;
		}
		if (need != 0 && got >= need)
			return HELLO_READY;
		if (k < len)
			break;
	}
	return HELLO_WAIT;
}

/*
 * Refuses a ClientHello over TLS_MSG_MAX: a fatal alert in the clear
 * (nothing is encrypted yet), and the bytes read, so that the close is
 * a FIN that lets the alert arrive rather than a reset.
 */
static void
hello_refuse(struct conn *c, uint8_t *buf, size_t n)
{
	static const uint8_t alert[] = { SSL3_RT_ALERT, 3, 3, 0, 2,
	    SSL3_AL_FATAL, SSL_AD_ILLEGAL_PARAMETER };

	(void)send(c->io.fd, alert, sizeof(alert), MSG_NOSIGNAL |
	    MSG_DONTWAIT);
	(void)recv(c->io.fd, buf, n, MSG_DONTWAIT);
	counter_add(&c->r->counters, COUNTER_TLS_BAD, 1);
	tls_of(c)->xp.fail = TRANSPORT_FAIL_PROTOCOL;
}

/* Until more than n bytes are in, the socket is not readable (or EOF). */
static void
hello_lowat(struct conn *c, struct tls_xp *t, size_t n)
{
	int v = n + 1 < (size_t)TLS_PEEK_MAX ? (int)n + 1 : TLS_PEEK_MAX;

	if (setsockopt(c->io.fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
		t->lowat = v > 1;
}

/*
 * Whether the client's first ClientHello is all in the socket: OpenSSL
 * reads nothing before, so a client that stops short holds no more than
 * this transport, and one that connects and closes without a byte is a
 * peer's close (*res 0), not a failed handshake. A ClientHello announced
 * over TLS_MSG_MAX is refused. Not yet: *res -1, errno EAGAIN, and the
 * socket reads as readable only once more has come (SO_RCVLOWAT).
 */
static bool
tls_hello(struct conn *c, struct tls_xp *t, ssize_t *res)
{
	uint8_t buf[TLS_PEEK_MAX];
	ssize_t n = recv(c->io.fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	enum hello h;

	if (n <= 0) {
		*res = n;
		return false;
	}
	h = hello_scan(buf, (size_t)n);
	if (h == HELLO_WAIT && (size_t)n == sizeof(buf))
		h = HELLO_TOO_BIG;	/* cut into implausibly many records */
	/* Woken with nothing new: the peer closed; OpenSSL says how. */
	if (h == HELLO_WAIT && (size_t)n == t->peeked)
		h = HELLO_READY;
	t->peeked = (size_t)n;
	if (h == HELLO_WAIT) {
		hello_lowat(c, t, (size_t)n);
		errno = EAGAIN;
		*res = -1;
		return false;
	}
	if (t->lowat)
		hello_lowat(c, t, 0);
	if (h == HELLO_TOO_BIG) {
		hello_refuse(c, buf, (size_t)n);
		errno = EPROTO;
		*res = -1;
		return false;
	}
	t->hello = true;
	return true;
}

/* The handshake is over, or the connection: its place is given back. */
static void
tls_unplace(struct conn *c, struct tls_xp *t)
{
	if (!t->placed)
		return;
	t->placed = false;
	tls_unadmit(t->ip);
	counter_add(&c->r->counters, COUNTER_TLS_HANDSHAKING, (uint64_t)-1);
}

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
 * Moves the handshake on: true once it is done. A failure is counted by
 * why and sets the transport's fail: conn.c closes c (reason "protocol").
 */
static bool
tls_handshake(struct conn *c, struct tls_xp *t, ssize_t *res)
{
	enum counter_id why = COUNTER_TLS_BAD;
	int r;

	if (t->handshaken)
		return true;
	if (!t->hello && !tls_hello(c, t, res))
		return false;
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
		watch_stop(t);
		tls_unplace(c, t);
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
	t->xp.fail = TRANSPORT_FAIL_PROTOCOL;
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

	/* Before the handshake, only the read side hears of a peer's close. */
	if (!tls_handshake(c, t, &res))
		return res == 0 ? (errno = EAGAIN, -1) : res;
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
	return transport_socket_shutdown(c);
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

/* A handshake not done by its deadline: to be closed (reason timeout). */
static void
tls_tick(struct conn *c)
{
	struct tls_xp *t = tls_of(c);

	if (!t->handshaken && t->xp.fail == TRANSPORT_OK &&
	    c->r->now >= t->deadline) {
		counter_add(&c->r->counters, COUNTER_TLS_TIMEOUT, 1);
		t->xp.fail = TRANSPORT_FAIL_TIMEOUT;
	}
}

/* Closes that end a sound session on purpose rather than on a fault. */
static bool
tls_is_graceful(const struct conn *c)
{
	switch (c->close_reason) {
	case CONN_CLOSE_PEER:
	case CONN_CLOSE_IDLE:
	case CONN_CLOSE_QUIT:
	case CONN_CLOSE_SHUTDOWN:
	case CONN_CLOSE_TIMEOUT:
		return true;
	default:
		return false;
	}
}

/*
 * A graceful close says so with close_notify (unless tls_shutdown has),
 * also after the peer's own: without it a client cannot tell our end
 * from a cut connection. Before the socket closes, its buffer takes it.
 */
static void
tls_close(struct conn *c)
{
	struct tls_xp *t = tls_of(c);

	if (t->handshaken && !t->failed && tls_is_graceful(c) &&
	    !(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
		ERR_clear_error();
		SSL_shutdown(t->ssl);
		ERR_clear_error();
	}
	tls_unplace(c, t);
	SSL_free(t->ssl);
	free(t);
}

static const struct transport_ops tls_ops = {
	.name = "tls",
	.read = tls_read,
	.writev = tls_writev,
	.shutdown = tls_shutdown,
	.unsent = transport_socket_unsent,
	/* A record: up to 16 KiB of plaintext, sent whole or not at all. */
	.ack_slack = SSL3_RT_MAX_PLAIN_LENGTH,
	.events = tls_events,
	.has_pending = tls_has_pending,
	.tick = tls_tick,
	.batchable = false,
	.close = tls_close,
};

/* A session on fd for either side, or NULL (OpenSSL's queue emptied). */
static struct tls_xp *
tls_xp_new(struct transport_ctx *base, int fd)
{
	struct tls_ctx *ctx = (struct tls_ctx *)base;
	struct tls_xp *t = xcalloc(1, sizeof(*t));

	if ((t->ssl = SSL_new(ctx->ssl)) == NULL ||
	    SSL_set_fd(t->ssl, fd) != 1) {
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	t->xp.ops = &tls_ops;
	return t;
}

static struct transport *
tls_accept(struct transport_ctx *ctx, struct reactor *r, int fd,
    unsigned timeout, struct iplimit_entry *ip)
{
	struct tls_xp *t = tls_xp_new(ctx, fd);

	if (t == NULL)
		return NULL;
	if (!watch_start(t)) {
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	SSL_set_accept_state(t->ssl);
	t->deadline = r->now + timeout;
	t->ip = ip;
	t->placed = true;
	counter_add(&r->counters, COUNTER_TLS_HANDSHAKING, 1);
	return &t->xp;
}

/*
 * The client side speaks first: its ClientHello waits for a writable
 * socket (want_write), names host (SNI), and the server's certificate
 * must name host too, by a chain to the context's CA.
 */
static struct transport *
tls_connect(struct transport_ctx *ctx, struct reactor *r, int fd,
    const char *host, unsigned timeout)
{
	struct tls_xp *t = tls_xp_new(ctx, fd);

	if (t == NULL)
		return NULL;
	if (SSL_set_tlsext_host_name(t->ssl, host) != 1 ||
	    SSL_set1_host(t->ssl, host) != 1) {
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	SSL_set_connect_state(t->ssl);
	t->hello = true;		/* ours: nothing to wait for */
	t->want_write = true;
	t->deadline = r->now + timeout;
	return &t->xp;
}

const char *
tls_server_name(const struct transport *xp)
{
	const struct tls_xp *t = (const struct tls_xp *)xp;

	if (xp->ops != &tls_ops)
		return NULL;
	return SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);
}

bool
tls_is_handshaken(const struct transport *xp)
{
	return xp->ops != &tls_ops || ((const struct tls_xp *)xp)->handshaken;
}

const struct transport_type transport_type_tls = {
	.name = "tls",
	.label = "TLS",
	.prepare = tls_prepare,
	.prepare_client = tls_prepare_client,
	.release = tls_ctx_release,
	.admit = tls_admit,
	.unadmit = tls_unadmit,
	.accept = tls_accept,
	.connect = tls_connect,
};
