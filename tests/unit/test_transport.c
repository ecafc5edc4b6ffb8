/* test_transport.c: transport types by name, their lifecycle under conn.c, and TLS client against server. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "counter.h"
#include "helpers.h"
#include "net.h"
#include "proto.h"
#include "reactor.h"
#include "suites.h"
#include "transport.h"
#include "version.h"

/* ---- a fake type: every call noted, in order -------------------------- */

static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;
static char notes[512];

/* Notes a call; the reactor's thread and the test's both do. */
static void
note(const char *what)
{
	pthread_mutex_lock(&note_mu);
	strncat(notes, what, sizeof(notes) - strlen(notes) - 2);
	strcat(notes, ",");
	pthread_mutex_unlock(&note_mu);
}

static bool
notes_are(const char *want)
{
	bool same;

	pthread_mutex_lock(&note_mu);
	same = strcmp(notes, want) == 0;
	pthread_mutex_unlock(&note_mu);
	return same;
}

/* What prepare makes: freed by release, or ASan reports the leak. */
struct fake_ctx {
	struct transport_ctx base;
	char	*made;
};

struct fake_xp {
	struct transport xp;
	_Atomic unsigned reads;
	_Atomic unsigned writes;
	bool	expire;			/* its tick wants a close */
};

static const struct transport_type fake_type;

/* Set by the test before a handoff: the transports accepted expire. */
static _Atomic bool fake_expiring;
static struct fake_xp *_Atomic fake_last;

/* Plain reads, except that a '!' breaks the fake's rules. */
static ssize_t
fake_read(struct conn *c, void *p, size_t n)
{
	struct fake_xp *f = (struct fake_xp *)c->xp;
	ssize_t r = read(c->io.fd, p, n);

	f->reads++;
	if (r > 0 && memchr(p, '!', (size_t)r) != NULL) {
		f->xp.fail = TRANSPORT_FAIL_PROTOCOL;
		errno = EPROTO;
		return -1;
	}
	return r;
}

static ssize_t
fake_writev(struct conn *c, const struct iovec *iov, int cnt)
{
	((struct fake_xp *)c->xp)->writes++;
	return writev(c->io.fd, iov, cnt);
}

static void
fake_tick(struct conn *c)
{
	struct fake_xp *f = (struct fake_xp *)c->xp;

	if (f->expire)
		f->xp.fail = TRANSPORT_FAIL_TIMEOUT;
}

static void
fake_close(struct conn *c)
{
	note("close");
	free(c->xp);
}

static const struct transport_ops fake_ops = {
	.name = "fake",
	.read = fake_read,
	.writev = fake_writev,
	.shutdown = transport_socket_shutdown,
	.unsent = transport_socket_unsent,
	.tick = fake_tick,
	.close = fake_close,
};

static struct transport_ctx *
fake_prepare(const struct listener_conf *lc, char *err, size_t len)
{
	struct fake_ctx *ctx;

	if (strcmp(lc->name, "bad") == 0) {
		snprintf(err, len, "fake: listener %s refused", lc->name);
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	ctx->made = strdup(lc->name);
	transport_ctx_init(&ctx->base, &fake_type);
	note("prepare");
	return &ctx->base;
}

static void
fake_release(struct transport_ctx *base)
{
	struct fake_ctx *ctx = (struct fake_ctx *)base;

	note("release");
	free(ctx->made);
	free(ctx);
}

static int
fake_admit(struct iplimit_entry *ip, unsigned max, unsigned max_per_ip)
{
	(void)ip;
	(void)max;
	(void)max_per_ip;
	note("admit");
	return TRANSPORT_ADMIT_OK;
}

static void
fake_unadmit(struct iplimit_entry *ip)
{
	(void)ip;
	note("unadmit");
}

static struct transport *
fake_accept(struct transport_ctx *ctx, struct reactor *r, int fd,
    unsigned timeout, struct iplimit_entry *ip)
{
	struct fake_xp *f = calloc(1, sizeof(*f));

	(void)r;
	(void)fd;
	(void)timeout;
	(void)ip;
	ck_assert_ptr_eq(ctx->type, &fake_type);
	f->xp.ops = &fake_ops;
	f->expire = fake_expiring;
	fake_last = f;
	note("accept");
	return &f->xp;
}

static const struct transport_type fake_type = {
	.name = "fake",
	.prepare = fake_prepare,
	.release = fake_release,
	.admit = fake_admit,
	.unadmit = fake_unadmit,
	.accept = fake_accept,
};

/* Registers the fake (again, where the runner does not fork: as before). */
static void
fake_register(void)
{
	if (transport_find("fake") == &fake_type)
		return;
	ck_assert_int_eq(transport_register(&fake_type), 0);
}

static struct transport_ctx *
fake_ctx_new(void)
{
	struct listener_conf lc = { .name = "f" };
	char err[128] = "";
	struct transport_ctx *ctx = fake_type.prepare(&lc, err, sizeof(err));

	ck_assert_ptr_nonnull(ctx);
	return ctx;
}

/* The types by name: built-ins from the start, one more registered once. */
START_TEST(transport_registry_by_name)
{
	struct listener_conf lc = { .name = "bad" };
	struct transport_ctx *ctx;
	char err[128] = "";

	ck_assert_ptr_eq(transport_find("plain"), &transport_type_plain);
	ck_assert_ptr_null(transport_find("fake"));
	ck_assert_ptr_null(transport_find("nope"));
#if ER_WITH_TLS
	ck_assert_ptr_eq(transport_find("tls"), &transport_type_tls);
#endif
	fake_register();
	ck_assert_ptr_eq(transport_find("fake"), &fake_type);
	errno = 0;
	ck_assert_int_eq(transport_register(&fake_type), -1);
	ck_assert_int_eq(errno, EEXIST);
	/* A prepare that fails says why. */
	ck_assert_ptr_null(transport_find("fake")->prepare(&lc, err,
	    sizeof(err)));
	ck_assert_str_eq(err, "fake: listener bad refused");
	/* A listener without a tls group is plain's. */
	ck_assert_str_eq(transport_name(&lc), "plain");
	ctx = transport_prepare(&lc, err, sizeof(err));
	ck_assert_ptr_nonnull(ctx);
	ck_assert_ptr_eq(ctx->type, &transport_type_plain);
	ck_assert_ptr_eq(transport_ctx_ref(ctx), ctx);
	transport_ctx_unref(ctx);
	transport_ctx_unref(ctx);
	transport_ctx_unref(NULL);
	/* One with a tls group is tls's, which reads its files now. */
	lc.tls.enabled = true;
	snprintf(lc.tls.certificate, sizeof(lc.tls.certificate),
	    "/nonexistent/c.pem");
	ck_assert_str_eq(transport_name(&lc), "tls");
	ck_assert_ptr_null(transport_prepare(&lc, err, sizeof(err)));
#if ER_WITH_TLS
	ck_assert_msg(strstr(err, "tls.certificate /nonexistent/c.pem") !=
	    NULL, "%s", err);
#else
	ck_assert_str_eq(err, "no transport \"tls\" in this build");
#endif
}
END_TEST

/* Waits up to ms for fd to be ready for events. */
static void
wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	(void)poll(&p, 1, ms);
}

/* Reads from fd until n bytes came (within 10 s). */
static void
read_all(int fd, char *buf, size_t n)
{
	uint64_t deadline = unit_now_ms() + 10000;
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(fd, buf + got, n - got);

		ck_assert_msg(k != 0, "closed after %zu bytes", got);
		if (k > 0)
			got += (size_t)k;
		else
			wait_fd(fd, POLLIN, 100);
		ck_assert_msg(unit_now_ms() < deadline, "read %zu of %zu",
		    got, n);
	}
}

/* Waits (10 s at most) until no connection is left in the process. */
static void
wait_no_conns(void)
{
	uint64_t deadline = unit_now_ms() + 10000;

	while (atomic_load(&conn_live) != 0 && unit_now_ms() < deadline)
		unit_sleep_ms(5);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
}

static const char *const conf_echo =
    "shutdown_timeout = 1;\n"
    "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"echo\"; } );\n";

/*
 * Under conn.c: prepare, accept for the handed-off socket, its ops for
 * every byte, close when the connection goes, release with the last
 * reference; the transport's fail closes the connection for its reason.
 */
START_TEST(transport_lifecycle_under_conn)
{
	struct config *cf = unit_config(conf_echo);
	struct reactor *r = reactor_new(0, cf);
	struct transport_ctx *ctx;
	char buf[8];
	int sv[2];

	fake_register();
	notes[0] = '\0';
	ctx = fake_ctx_new();
	ck_assert_int_eq(reactor_start(r), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_echo, 0, transport_ctx_ref(ctx), NULL);
	ck_assert_int_eq(write(sv[0], "hello", 5), 5);
	read_all(sv[0], buf, 5);
	ck_assert_mem_eq(buf, "hello", 5);
	ck_assert_uint_ge(fake_last->reads, 1);
	ck_assert_uint_ge(fake_last->writes, 1);
	/* Its rules broken: conn.c closes it, reason protocol. */
	ck_assert_int_eq(write(sv[0], "!", 1), 1);
	wait_no_conns();
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CLOSED_PROTOCOL),
	    1);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CLOSED_RESET), 0);
	close(sv[0]);
	ck_assert(notes_are("prepare,accept,close,"));
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	/* The handoff's reference went with it: this one is the last. */
	transport_ctx_unref(ctx);
	ck_assert(notes_are("prepare,accept,close,release,"));
	config_unref(cf);
}
END_TEST

/* A transport's tick that wants its connection closed: reason timeout. */
START_TEST(transport_tick_fail_closes_for_timeout)
{
	struct config *cf = unit_config(conf_echo);
	struct reactor *r = reactor_new(0, cf);
	struct transport_ctx *ctx;
	int sv[2];

	fake_register();
	ctx = fake_ctx_new();
	fake_expiring = true;
	ck_assert_int_eq(reactor_start(r), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_echo, 0, transport_ctx_ref(ctx), NULL);
	wait_no_conns();
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CLOSED_TIMEOUT),
	    1);
	close(sv[0]);
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	transport_ctx_unref(ctx);
	config_unref(cf);
}
END_TEST

/* A handoff never adopted gives its handshake place back through the type. */
START_TEST(transport_dropped_handoff_unadmits)
{
	struct config *cf = unit_config(conf_echo);
	struct reactor *r = reactor_new(0, cf);
	struct transport_ctx *ctx;
	int sv[2];

	fake_register();
	notes[0] = '\0';
	ctx = fake_ctx_new();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_echo, 0, transport_ctx_ref(ctx), NULL);
	/* Never started: the handoff is cancelled when r is freed. */
	reactor_free(r);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	ck_assert(notes_are("prepare,unadmit,"));
	transport_ctx_unref(ctx);
	ck_assert(notes_are("prepare,unadmit,release,"));
	close(sv[0]);
	config_unref(cf);
}
END_TEST

#if ER_WITH_TLS
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "transport_tls.h"

/* ---- a throwaway PKI, made with OpenSSL's API in a temporary dir ------- */

static char pki[64];

static void
cert_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	ck_assert_ptr_nonnull(ext);
	ck_assert_int_eq(X509_add_ext(x, ext, -1), 1);
	X509_EXTENSION_free(ext);
}

/* A certificate for key named cn: self-signed CA, or a leaf for san. */
static X509 *
cert_new(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ikey,
    const char *san)
{
	static long serial = 1;
	X509 *x = X509_new();

	ck_assert_ptr_nonnull(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN",
	    MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(issuer != NULL ?
	    issuer : x));
	if (san == NULL) {
		cert_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
		cert_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		cert_ext(x, issuer, NID_basic_constraints, "CA:FALSE");
		cert_ext(x, issuer, NID_subject_alt_name, san);
	}
	ck_assert_int_gt(X509_sign(x, ikey != NULL ? ikey : key,
	    EVP_sha256()), 0);
	return x;
}

static void
pem_write(const char *name, X509 *x, EVP_PKEY *key)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", pki, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	if (x != NULL)
		ck_assert_int_eq(PEM_write_X509(f, x), 1);
	else
		ck_assert_int_eq(PEM_write_PrivateKey(f, key, NULL, NULL, 0,
		    NULL, NULL), 1);
	fclose(f);
}

/*
 * ca.pem signs server.pem (key server.key) for DNS:echo.test; other.pem
 * is a CA that signed nothing.
 */
static void
pki_make(void)
{
	EVP_PKEY *cak = EVP_EC_gen("P-256"), *sk = EVP_EC_gen("P-256");
	EVP_PKEY *ok = EVP_EC_gen("P-256");
	X509 *ca, *srv, *other;

	snprintf(pki, sizeof(pki), "/tmp/er-transport-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(pki));
	ck_assert(cak != NULL && sk != NULL && ok != NULL);
	ca = cert_new(cak, "test ca", NULL, NULL, NULL);
	other = cert_new(ok, "other ca", NULL, NULL, NULL);
	srv = cert_new(sk, "echo.test", ca, cak, "DNS:echo.test");
	pem_write("ca.pem", ca, NULL);
	pem_write("other.pem", other, NULL);
	pem_write("server.pem", srv, NULL);
	pem_write("server.key", NULL, sk);
	X509_free(ca);
	X509_free(other);
	X509_free(srv);
	EVP_PKEY_free(cak);
	EVP_PKEY_free(sk);
	EVP_PKEY_free(ok);
}

static void
pki_remove(void)
{
	static const char *const files[] = { "ca.pem", "other.pem",
	    "server.pem", "server.key" };
	char path[128];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", pki, files[i]);
		unlink(path);
	}
	rmdir(pki);
}

/* ---- a client and a server side over loopback TCP ----------------------- */

/* One side: its own reactor (never started: counters, clock, turns). */
struct side {
	struct config *cf;
	struct reactor *r;
	struct transport_ctx *ctx;
	struct conn c;
};

struct pair {
	struct side cl;
	struct side sv;
};

static void
side_init(struct side *s, unsigned id, int fd, struct transport_ctx *ctx)
{
	s->cf = unit_config(conf_echo);
	s->r = reactor_new(id, s->cf);
	ck_assert_ptr_nonnull(s->r);
	s->ctx = ctx;
	memset(&s->c, 0, sizeof(s->c));
	s->c.r = s->r;
	s->c.io.fd = fd;
	s->c.close_reason = CONN_CLOSE_QUIT;
}

/* Closes the transport (if not already), then the socket. */
static void
side_fini(struct side *s)
{
	if (s->c.xp != NULL)
		s->c.xp->ops->close(&s->c);
	close(s->c.io.fd);
	transport_ctx_unref(s->ctx);
	reactor_free(s->r);
	config_unref(s->cf);
}

/*
 * A listen or connect that fails says why in errno and leaves no socket
 * open: the next descriptor is the one that was next before.
 */
START_TEST(net_failures_keep_errno_close_socket)
{
	int lfd, next, fd;

	ck_assert_int_ge(lfd = net_listen("127.0.0.1", 0, 4), 0);
	ck_assert_int_ge(next = dup(0), 0);
	close(next);
	errno = 0;
	ck_assert_int_eq(net_listen("127.0.0.1",
	    (uint16_t)net_local_port(lfd), 4), -1);
	ck_assert_int_eq(errno, EADDRINUSE);
	errno = 0;
	ck_assert_int_eq(net_connect("not-an-address", 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(fd = dup(0), next);
	close(fd);
	close(lfd);
}
END_TEST

/* A TCP connection over loopback: net_connect's end and the accepted one. */
static void
tcp_pair(int *cfd, int *sfd)
{
	int lfd;

	ck_assert_int_ge(lfd = net_listen("127.0.0.1", 0, 4), 0);
	*cfd = net_connect("127.0.0.1", (uint16_t)net_local_port(lfd));
	ck_assert_int_ge(*cfd, 0);
	wait_fd(lfd, POLLIN, 10000);
	ck_assert_int_ge(*sfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK |
	    SOCK_CLOEXEC), 0);
	close(lfd);
	wait_fd(*cfd, POLLOUT, 10000);
	ck_assert_int_eq(net_connect_result(*cfd), 0);
}

/* The server context from server.pem, and a client one trusting ca. */
static void
ctx_pair(const char *ca, struct transport_ctx **sctx,
    struct transport_ctx **cctx)
{
	struct listener_conf lc = { .name = "t", .tls = { .enabled = true,
	    .min_version = 12 } };
	struct tls_conf tc = { .min_version = 12 };
	char err[256] = "";

	snprintf(lc.tls.certificate, sizeof(lc.tls.certificate),
	    "%s/server.pem", pki);
	snprintf(lc.tls.key, sizeof(lc.tls.key), "%s/server.key", pki);
	snprintf(tc.ca, sizeof(tc.ca), "%s/%s", pki, ca);
	ck_assert_ptr_nonnull(transport_find("tls"));
	*sctx = transport_prepare(&lc, err, sizeof(err));
	ck_assert_msg(*sctx != NULL, "server: %s", err);
	*cctx = transport_find("tls")->prepare_client(&tc, err, sizeof(err));
	ck_assert_msg(*cctx != NULL, "client: %s", err);
}

/*
 * A client context trusting ca, connected by net_connect to a server
 * side from server.pem; the client's transport is for host.
 */
static void
pair_open(struct pair *p, const char *ca, const char *host)
{
	const struct transport_type *tls = transport_find("tls");
	struct transport_ctx *sctx, *cctx;
	int cfd, sfd;

	ctx_pair(ca, &sctx, &cctx);
	tcp_pair(&cfd, &sfd);
	side_init(&p->cl, 0, cfd, cctx);
	side_init(&p->sv, 1, sfd, sctx);
	/* The server side's handshake place, as the acceptor takes it. */
	ck_assert_int_eq(tls->admit(NULL, 0, 0), TRANSPORT_ADMIT_OK);
	p->sv.c.xp = tls->accept(sctx, p->sv.r, sfd, 10, NULL);
	p->cl.c.xp = tls->connect(cctx, p->cl.r, cfd, host, 10);
	ck_assert_ptr_nonnull(p->sv.c.xp);
	ck_assert_ptr_nonnull(p->cl.c.xp);
}

static void
pair_close(struct pair *p)
{
	side_fini(&p->cl);
	side_fini(&p->sv);
}

/* A new loop turn for both: each turn has its handshake budget. */
static void
pair_turn(struct pair *p)
{
	p->cl.r->turn_ns++;
	p->sv.r->turn_ns++;
}

static ssize_t
xp_write(struct side *s, const char *text)
{
	struct iovec iov = { .iov_base = (void *)text,
	    .iov_len = strlen(text) };

	return s->c.xp->ops->writev(&s->c, &iov, 1);
}

/*
 * Sends text from one side to the other through the transports' writev
 * and read, moving both handshakes as it goes: true once it came whole;
 * false as soon as either side fails (errno other than EAGAIN).
 */
static bool
pass(struct pair *p, struct side *from, struct side *to, const char *text)
{
	uint64_t deadline = unit_now_ms() + 10000;
	size_t n = strlen(text), got = 0;
	char buf[256];
	bool sent = false;

	while (got < n) {
		ssize_t w = 0, k;

		ck_assert_msg(unit_now_ms() < deadline, "passed %zu of %zu",
		    got, n);
		pair_turn(p);
		if (!sent && (w = xp_write(from, text)) < 0 &&
		    errno != EAGAIN)
			return false;
		if (w > 0) {
			ck_assert_int_eq(w, (ssize_t)n);
			sent = true;
		}
		k = to->c.xp->ops->read(&to->c, buf + got, sizeof(buf) - got);
		if (k > 0)
			got += (size_t)k;
		else if (k == 0 || errno != EAGAIN)
			return false;
		if (w <= 0 && k < 0)
			wait_fd(to->c.io.fd, POLLIN, 20);
	}
	ck_assert_mem_eq(buf, text, n);
	return true;
}

/* Handshake with the right name; data both ways through the ops. */
START_TEST(tls_client_handshake_and_round_trip)
{
	struct pair p;

	pki_make();
	pair_open(&p, "ca.pem", "echo.test");
	ck_assert(pass(&p, &p.cl, &p.sv, "ping from the client"));
	ck_assert(pass(&p, &p.sv, &p.cl, "pong from the server"));
	ck_assert(pass(&p, &p.cl, &p.sv, "and again"));
	/* The server heard the name the client asked for (SNI). */
	ck_assert_str_eq(tls_server_name(p.sv.c.xp), "echo.test");
	ck_assert_ptr_null(tls_server_name(&transport_plain));
	ck_assert_uint_eq(counter_get(&p.cl.r->counters, COUNTER_TLS_OK), 1);
	ck_assert_uint_eq(counter_get(&p.sv.r->counters, COUNTER_TLS_OK), 1);
	ck_assert_int_eq(p.cl.c.xp->fail, TRANSPORT_OK);
	ck_assert_int_eq(p.sv.c.xp->fail, TRANSPORT_OK);
	pair_close(&p);
	pki_remove();
}
END_TEST

/*
 * A client that cannot verify the server: its transport fails with a
 * certificate error (counted tls_certificate, not tls_bad), for conn.c
 * to close; no byte reaches the server.
 */
static void
check_verify_fails(const char *ca, const char *host)
{
	struct pair p;
	char buf[64];

	pki_make();
	pair_open(&p, ca, host);
	ck_assert(!pass(&p, &p.cl, &p.sv, "must not arrive"));
	/* Either side may fail first: drive the client to its verdict. */
	for (int i = 0; i < 100 && p.cl.c.xp->fail == TRANSPORT_OK; i++) {
		pair_turn(&p);
		if (xp_write(&p.cl, "x") < 0 && errno != EAGAIN)
			break;
		(void)p.sv.c.xp->ops->read(&p.sv.c, buf, sizeof(buf));
		wait_fd(p.cl.c.io.fd, POLLIN, 20);
	}
	ck_assert_int_eq(p.cl.c.xp->fail, TRANSPORT_FAIL_PROTOCOL);
	ck_assert_uint_eq(counter_get(&p.cl.r->counters, COUNTER_TLS_CERT), 1);
	ck_assert_uint_eq(counter_get(&p.cl.r->counters, COUNTER_TLS_OK), 0);
	ck_assert_uint_eq(counter_get(&p.sv.r->counters, COUNTER_TLS_OK), 0);
	pair_close(&p);
	pki_remove();
}

START_TEST(tls_client_refuses_wrong_name)
{
	check_verify_fails("ca.pem", "wrong.test");
}
END_TEST

START_TEST(tls_client_refuses_other_ca)
{
	check_verify_fails("other.pem", "echo.test");
}
END_TEST

/*
 * Whether the client's close said goodbye: after it, a raw 'M' on the
 * socket. What the server finds first is the close_notify record, or
 * the 'M' if none was sent; with one, the server's read says closed.
 */
static void
check_close_notify(enum conn_close_reason why, bool notify)
{
	uint64_t deadline;
	struct pair p;
	char first = 0;
	ssize_t k;

	pki_make();
	pair_open(&p, "ca.pem", "echo.test");
	ck_assert(pass(&p, &p.cl, &p.sv, "hello"));
	ck_assert(pass(&p, &p.sv, &p.cl, "hello back"));
	p.cl.c.close_reason = why;
	p.cl.c.xp->ops->close(&p.cl.c);
	p.cl.c.xp = NULL;
	ck_assert_int_eq(write(p.cl.c.io.fd, "M", 1), 1);
	wait_fd(p.sv.c.io.fd, POLLIN, 10000);
	ck_assert_int_eq(recv(p.sv.c.io.fd, &first, 1, MSG_PEEK), 1);
	if (!notify) {
		ck_assert_int_eq(first, 'M');
		pair_close(&p);
		pki_remove();
		return;
	}
	ck_assert_int_ne(first, 'M');
	deadline = unit_now_ms() + 10000;
	while ((k = p.sv.c.xp->ops->read(&p.sv.c, &first, 1)) < 0 &&
	    errno == EAGAIN && unit_now_ms() < deadline)
		wait_fd(p.sv.c.io.fd, POLLIN, 20);
	ck_assert_int_eq(k, 0);
	pair_close(&p);
	pki_remove();
}

START_TEST(tls_close_notify_on_graceful_close)
{
	check_close_notify(CONN_CLOSE_QUIT, true);
}
END_TEST

START_TEST(tls_no_close_notify_on_reset)
{
	check_close_notify(CONN_CLOSE_RESET, false);
}
END_TEST

/* ---- the client side under conn.c, against a server side under conn.c -- */

static pthread_mutex_t heard_mu = PTHREAD_MUTEX_INITIALIZER;
static char heard[128];
static struct conn *probe;		/* the reactor's thread only */

static ssize_t
probe_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	const uint8_t *lf = memchr(p, '\n', n);

	(void)lim;
	return lf != NULL ? lf - p + 1 : 0;
}

static int
probe_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	(void)c;
	pthread_mutex_lock(&heard_mu);
	strncat(heard, (const char *)msg, len < sizeof(heard) -
	    strlen(heard) - 1 ? len : sizeof(heard) - strlen(heard) - 1);
	pthread_mutex_unlock(&heard_mu);
	return 0;
}

static void
probe_on_close(struct conn *c)
{
	(void)c;
	probe = NULL;
}

static const struct proto probe_proto = {
	.name = "test-probe",
	.frame_len = probe_frame_len,
	.on_message = probe_on_message,
	.on_close = probe_on_close,
};

struct probe_start {
	struct transport_ctx *ctx;
	int	fd;
};

/* On the reactor: a client connection over the TLS client side. */
static void
probe_connect(void *owner, void *arg, enum mailbox_status st)
{
	struct reactor *r = owner;
	struct probe_start *ps = arg;
	struct transport *xp;

	if (st != MAILBOX_RUN || (xp = ps->ctx->type->connect(ps->ctx, r,
	    ps->fd, "echo.test", 10)) == NULL) {
		close(ps->fd);
		atomic_fetch_sub(&conn_live, 1);
		return;
	}
	probe = conn_new_with(r, ps->fd, &probe_proto, xp);
}

static void
probe_say(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	if (st == MAILBOX_RUN && probe != NULL)
		conn_write(probe, arg, strlen(arg));
}

static bool
heard_is(const char *want)
{
	bool same;

	pthread_mutex_lock(&heard_mu);
	same = strcmp(heard, want) == 0;
	pthread_mutex_unlock(&heard_mu);
	return same;
}

/*
 * A client connection made with the type's connect and conn_new_with
 * speaks first on its own (nothing written yet), both handshakes finish
 * under conn.c, and a line goes to an echo server and back.
 */
START_TEST(tls_client_under_conn)
{
	struct config *cf = unit_config(conf_echo);
	struct reactor *r = reactor_new(0, cf);
	struct transport_ctx *sctx, *cctx;
	struct probe_start ps;
	uint64_t deadline;
	int cfd, sfd;

	pki_make();
	ctx_pair("ca.pem", &sctx, &cctx);
	tcp_pair(&cfd, &sfd);
	ck_assert_int_eq(reactor_start(r), 0);
	/* The server side's handshake place, as the acceptor takes it. */
	ck_assert_int_eq(sctx->type->admit(NULL, 0, 0), TRANSPORT_ADMIT_OK);
	atomic_fetch_add(&conn_live, 2);
	conn_handoff(r, sfd, &proto_echo, 0, transport_ctx_ref(sctx), NULL);
	ps.ctx = cctx;
	ps.fd = cfd;
	reactor_post(r, probe_connect, &ps);
	deadline = unit_now_ms() + 10000;
	while (counter_get(&r->counters, COUNTER_TLS_OK) < 2 &&
	    unit_now_ms() < deadline)
		unit_sleep_ms(5);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_TLS_OK), 2);
	reactor_post(r, probe_say, "ping over tls\n");
	while (!heard_is("ping over tls\n") && unit_now_ms() < deadline)
		unit_sleep_ms(5);
	ck_assert_msg(heard_is("ping over tls\n"), "heard \"%s\"", heard);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_TLS_BAD), 0);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_TLS_CERT), 0);
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	transport_ctx_unref(sctx);
	transport_ctx_unref(cctx);
	config_unref(cf);
	pki_remove();
}
END_TEST

/* A client context must have a CA to verify the server by. */
START_TEST(tls_client_needs_ca)
{
	struct tls_conf tc = { .min_version = 12 };
	char err[256] = "";

	ck_assert_ptr_null(transport_find("tls")->prepare_client(&tc, err,
	    sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "tls.ca"));
	snprintf(tc.ca, sizeof(tc.ca), "/nonexistent/ca.pem");
	ck_assert_ptr_null(transport_find("tls")->prepare_client(&tc, err,
	    sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/ca.pem"));
}
END_TEST
#endif

Suite *
transport_suite(void)
{
	Suite *s = suite_create("transport");
	TCase *ty = tcase_create("type");
#if ER_WITH_TLS
	TCase *tls = tcase_create("tls");
#endif

	tcase_add_test(ty, transport_registry_by_name);
	tcase_add_test(ty, net_failures_keep_errno_close_socket);
	tcase_add_test(ty, transport_lifecycle_under_conn);
	tcase_add_test(ty, transport_tick_fail_closes_for_timeout);
	tcase_add_test(ty, transport_dropped_handoff_unadmits);
	tcase_set_timeout(ty, 30);
	suite_add_tcase(s, ty);
#if ER_WITH_TLS
	tcase_add_test(tls, tls_client_handshake_and_round_trip);
	tcase_add_test(tls, tls_client_refuses_wrong_name);
	tcase_add_test(tls, tls_client_refuses_other_ca);
	tcase_add_test(tls, tls_close_notify_on_graceful_close);
	tcase_add_test(tls, tls_no_close_notify_on_reset);
	tcase_add_test(tls, tls_client_needs_ca);
	tcase_add_test(tls, tls_client_under_conn);
	tcase_set_timeout(tls, 60);
	suite_add_tcase(s, tls);
#endif
	return s;
}
