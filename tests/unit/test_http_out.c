/*
 * test_http_out.c: the http-out thread makes a kept post only once it is
 * kept, and the receipt awaited it ends is forgotten with it.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "http_out.h"
#include "smpp_receipt.h"
#include "suites.h"

#if ER_WITH_CURL
static _Atomic uint64_t kept_id, unwanted;
static _Atomic unsigned kept_n, done_n, unwant_n;

static void
keep(uint64_t id, const char *url, const char *body, uint64_t unwant)
{
	(void)url;
	(void)body;
	atomic_store(&unwanted, unwant);
	atomic_store(&kept_id, id);
	atomic_fetch_add(&kept_n, 1);
}

static void
done(uint64_t id)
{
	(void)id;
	atomic_fetch_add(&done_n, 1);
}

static void
want(const struct http_out_want *w)
{
	(void)w;
}

static void
unwant(uint64_t id)
{
	(void)id;
	atomic_fetch_add(&unwant_n, 1);
}

/* A listener on 127.0.0.1: its fd, and its port in *port. */
static int
listener(unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t n = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Whether a connection comes to fd within ms. */
static bool
called(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/*
 * A receipt's post, kept by the store: not made before the store says it
 * is committed (http_out_kept), made at once after. Otherwise a kill -9
 * just after an attempt could lose a post that was already tried.
 */
START_TEST(kept_before_made)
{
	struct config *cf = unit_config(
	    "dispatchers = 1;\n"
	    "listeners = ( { name = \"h\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"http\"; } );\n"
	    "http = { callback_allow = [ \"127.0.0.0/8\" ]; };\n");
	unsigned port;
	int fd = listener(&port), c;
	char url[128];
	uint64_t t0;

	ck_assert_ptr_nonnull(cf);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/dlr?type=%%d", port);
	ck_assert_int_eq(http_out_open(cf), 0);
	http_out_keep_with(&(struct http_out_keep){ .keep = keep,
	    .done = done, .want = want, .unwant = unwant });
	ck_assert_int_eq(http_out_start(), 0);
	http_out_want(&(struct http_out_want){ .id = 42, .url = url,
	    .mask = 1, .to = "bob", .from = "app" });
	ck_assert(http_out_receipt_of(42, SMPP_STATE_DELIVERED,
	    (uint64_t)time(NULL)));
	for (t0 = unit_now_ms(); atomic_load(&kept_n) == 0 &&
	    unit_now_ms() - t0 < 5000;)
		unit_sleep_ms(5);
	ck_assert_uint_eq(atomic_load(&kept_n), 1);
	/*
	 * Its receipt is no longer awaited: forgotten with the post (one
	 * group in the store), not on its own.
	 */
	ck_assert_uint_eq(atomic_load(&unwanted), 42);
	ck_assert_uint_eq(atomic_load(&unwant_n), 0);
	/* Kept, not yet committed: nobody is called. */
	ck_assert(!called(fd, 300));
	/* An earlier id committed is not this one. */
	http_out_kept(atomic_load(&kept_id) - 1);
	ck_assert(!called(fd, 200));
	http_out_kept(atomic_load(&kept_id));
	ck_assert(called(fd, 5000));
	ck_assert_int_ge(c = accept(fd, NULL, NULL), 0);
	close(c);
	http_out_stop();
	http_out_close();
	close(fd);
	config_unref(cf);
}
END_TEST
#endif

Suite *
http_out_suite(void)
{
	Suite *s = suite_create("http_out");
	TCase *t = tcase_create("core");

#if ER_WITH_CURL
	tcase_add_test(t, kept_before_made);
#endif
	suite_add_tcase(s, t);
	return s;
}
