/* test_nats_link.c: NATS connections' settings, connect, reconnect and bucket names, without a NATS server. */
#include <check.h>
#include <string.h>

#include "suites.h"

#if ER_WITH_NATS

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/nats_link.h"
#include "helpers.h"

/* A cluster group with servers s (NULL-terminated) and credentials. */
static void
conf_with(struct cluster_conf *cl, const char *const *s, const char *creds)
{
	memset(cl, 0, sizeof(*cl));
	cl->enabled = true;
	snprintf(cl->node, sizeof(cl->node), "n1");
	snprintf(cl->subject_prefix, sizeof(cl->subject_prefix), "erd");
	for (; *s != NULL; s++)
		snprintf(cl->servers[cl->nservers++], sizeof(cl->servers[0]),
		    "%s", *s);
	snprintf(cl->credentials, sizeof(cl->credentials), "%s", creds);
}

/* A loopback port nothing listens on (bound, then closed). */
static unsigned
closed_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/*
 * A NATS server of the smallest kind, on a thread: it says INFO, answers
 * every PING with PONG, and drops the connection it has when told to
 * (then takes the next one).
 */
struct fake_nats {
	pthread_t th;
	int	lfd;
	unsigned port;
	atomic_bool stop;
	atomic_bool drop;
	atomic_uint accepted;
};

static void
fake_serve(struct fake_nats *f, int fd)
{
	static const char info[] = "INFO {\"server_id\":\"fake\","
	    "\"version\":\"2.9.0\",\"proto\":1,\"max_payload\":1048576}\r\n";
	char buf[4096];
	size_t have = 0;

	if (write(fd, info, sizeof(info) - 1) < 0)
		return;
	while (!atomic_load(&f->stop) && !atomic_exchange(&f->drop, false)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		char *ping;

		if (poll(&p, 1, 20) <= 0)
			continue;
		if ((n = read(fd, buf + have, sizeof(buf) - 1 - have)) <= 0)
			return;
		have += (size_t)n;
		buf[have] = '\0';
		while ((ping = strstr(buf, "PING\r\n")) != NULL) {
			if (write(fd, "PONG\r\n", 6) < 0)
				return;
			have -= (size_t)(ping + 6 - buf);
			memmove(buf, ping + 6, have + 1);
		}
		/* Anything else (CONNECT, SUB) is only read. */
		if (have > sizeof(buf) / 2)
			have = 0, buf[0] = '\0';
	}
}

static void *
fake_main(void *arg)
{
	struct fake_nats *f = arg;

	while (!atomic_load(&f->stop)) {
		struct pollfd p = { .fd = f->lfd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 20) <= 0 || (fd = accept(f->lfd, NULL,
		    NULL)) < 0)
			continue;
		atomic_fetch_add(&f->accepted, 1);
		fake_serve(f, fd);
		close(fd);
	}
	return NULL;
}

static void
fake_start(struct fake_nats *f)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);

	memset(f, 0, sizeof(*f));
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(f->lfd, 8), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&sa, &len),
	    0);
	f->port = ntohs(sa.sin_port);
	ck_assert_int_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void
fake_stop(struct fake_nats *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->lfd);
}

/* Both roles reconnect alike, for ever; only the cluster pings often. */
START_TEST(settings_by_role)
{
	static const char *const s[] = { "nats://a:4222", "nats://b:4222",
	    NULL };
	struct nats_link_settings c, st;
	struct cluster_conf cl;

	conf_with(&cl, s, "");
	nats_link_settings(&c, &cl, NATS_LINK_CLUSTER, "n1 0123");
	nats_link_settings(&st, &cl, NATS_LINK_STORE, NULL);
	ck_assert_uint_eq(c.nservers, 2);
	ck_assert_ptr_eq(c.servers[0], cl.servers[0]);
	ck_assert_ptr_eq(c.servers[1], cl.servers[1]);
	ck_assert_str_eq(c.name, "n1 0123");
	ck_assert_str_eq(st.name, "echorouterd store");
	ck_assert_ptr_null(c.credentials);
	ck_assert_ptr_null(st.credentials);
	ck_assert_int_eq(c.max_reconnect, -1);
	ck_assert_int_eq(st.max_reconnect, c.max_reconnect);
	ck_assert_int_eq(c.reconnect_wait_ms, 500);
	ck_assert_int_eq(st.reconnect_wait_ms, c.reconnect_wait_ms);
	ck_assert_int_eq(c.timeout_ms, 2000);
	ck_assert_int_eq(st.timeout_ms, c.timeout_ms);
	ck_assert_int_eq(c.ping_ms, 2000);
	ck_assert_int_eq(st.ping_ms, 0);
	ck_assert(c.global_delivery);
	ck_assert(!st.global_delivery);
	ck_assert_ptr_null(c.on_link);
	ck_assert_ptr_null(c.on_error);
}
END_TEST

/* A credentials file is passed on; user:password@ counts as credentials. */
START_TEST(credentials_decided)
{
	static const char *const plain[] = { "nats://a:4222", NULL };
	static const char *const user[] = { "nats://a:4222",
	    "nats://erd:s3cret@b:4222", NULL };
	static const char *const token[] = { "tok@b:4222", NULL };
	struct nats_link_settings ls;
	struct cluster_conf cl;

	conf_with(&cl, plain, "");
	ck_assert(!nats_link_has_credentials(&cl));
	conf_with(&cl, plain, "/etc/echorouterd/n1.creds");
	ck_assert(nats_link_has_credentials(&cl));
	nats_link_settings(&ls, &cl, NATS_LINK_STORE, NULL);
	ck_assert_ptr_eq(ls.credentials, cl.credentials);
	conf_with(&cl, user, "");
	ck_assert(nats_link_has_credentials(&cl));
	nats_link_settings(&ls, &cl, NATS_LINK_CLUSTER, NULL);
	ck_assert_ptr_null(ls.credentials);
	conf_with(&cl, token, "");
	ck_assert(nats_link_has_credentials(&cl));
}
END_TEST

/* One naming for the cluster's and the store's buckets. */
START_TEST(bucket_names)
{
	char b[NATS_LINK_BUCKET_MAX], st[NATS_LINK_STREAM_MAX], subj[256];
	char small[8];

	nats_link_bucket(b, sizeof(b), "erd", "claims");
	ck_assert_str_eq(b, "erd-claims");
	nats_link_bucket(b, sizeof(b), "acme.sms.eu", "nodes");
	ck_assert_str_eq(b, "acme_sms_eu-nodes");
	nats_link_kv_names("acme.sms", "claims", "k_1", st, sizeof(st), subj,
	    sizeof(subj));
	ck_assert_str_eq(st, "KV_acme_sms-claims");
	ck_assert_str_eq(subj, "$KV.acme_sms-claims.k_1");
	nats_link_kv_names("erd", "store", "", st, sizeof(st), subj,
	    sizeof(subj));
	ck_assert_str_eq(st, "KV_erd-store");
	ck_assert_str_eq(subj, "$KV.erd-store.");
	/* Cut to fit, never past the end. */
	nats_link_bucket(small, sizeof(small), "a.b.c.d", "slots");
	ck_assert_str_eq(small, "a_b_c_d");
}
END_TEST

/* Nothing listens: a clear reason, soon, and no retrying unless asked. */
START_TEST(connect_refused_says_why)
{
	char url[64], why[256];
	const char *s[] = { url, NULL };
	struct nats_link_settings ls;
	struct cluster_conf cl;
	natsConnection *nc = NULL;
	natsOptions *opts = NULL;
	uint64_t t0;
	natsStatus st;

	snprintf(url, sizeof(url), "nats://127.0.0.1:%u", closed_port());
	conf_with(&cl, s, "");
	nats_link_settings(&ls, &cl, NATS_LINK_CLUSTER, "n1 test");
	ck_assert_int_eq(nats_link_options(&opts, &ls), NATS_OK);
	t0 = unit_now_ms();
	st = nats_link_connect_once(&nc, opts, why, sizeof(why));
	ck_assert_int_ne(st, NATS_OK);
	ck_assert_ptr_null(nc);
	/* One attempt, bounded by the connect timeout, not a retry loop. */
	ck_assert_uint_lt(unit_now_ms() - t0, 10000);
	ck_assert_uint_gt(strlen(why), 0);
	/* libnats's words, without its "(conn.c:1905): " */
	ck_assert_msg(why[0] != '(', "why: %s", why);
	natsOptions_Destroy(opts);
}
END_TEST

static atomic_uint connected;

static void
count_connected(natsConnection *nc, void *closure)
{
	(void)nc;
	(void)closure;
	atomic_fetch_add(&connected, 1);
}

/* Asked to retry: it does so in the background, and says it is not yet in. */
START_TEST(connect_retry_in_background)
{
	char url[64], why[256];
	const char *s[] = { url, NULL };
	struct nats_link_settings ls;
	struct cluster_conf cl;
	natsConnection *nc = NULL;
	natsOptions *opts = NULL;

	snprintf(url, sizeof(url), "nats://127.0.0.1:%u", closed_port());
	conf_with(&cl, s, "");
	nats_link_settings(&ls, &cl, NATS_LINK_STORE, NULL);
	ck_assert_int_eq(nats_link_options(&opts, &ls), NATS_OK);
	ck_assert_int_ne(nats_link_connect_once(&nc, opts, why, sizeof(why)),
	    NATS_OK);
	ck_assert_int_eq(nats_link_connect_retry(&nc, opts, count_connected),
	    NATS_NOT_YET_CONNECTED);
	ck_assert_ptr_nonnull(nc);
	ck_assert_int_eq(natsConnection_Status(nc),
	    NATS_CONN_STATUS_RECONNECTING);
	natsConnection_Close(nc);
	natsConnection_Destroy(nc);
	natsOptions_Destroy(opts);
	ck_assert_uint_eq(atomic_load(&connected), 0);
}
END_TEST

static atomic_uint links;

static void
count_links(natsConnection *nc, void *closure)
{
	(void)nc;
	(void)closure;
	atomic_fetch_add(&links, 1);
}

/* Waits up to 10 s for links to reach n. */
static bool
links_reach(unsigned n)
{
	for (int i = 0; i < 1000 && atomic_load(&links) < n; i++)
		unit_sleep_ms(10);
	return atomic_load(&links) >= n;
}

/*
 * The options as applied: connected, the server drops us, the link
 * callback hears the loss, libnats reconnects by itself (max_reconnect)
 * and the callback hears that, and then the close.
 */
START_TEST(reconnects_and_tells)
{
	char url[64], why[256];
	const char *s[] = { url, NULL };
	struct nats_link_settings ls;
	struct cluster_conf cl;
	struct fake_nats f;
	natsConnection *nc = NULL;
	natsOptions *opts = NULL;
	unsigned accepted;

	fake_start(&f);
	snprintf(url, sizeof(url), "nats://127.0.0.1:%u", f.port);
	conf_with(&cl, s, "");
	nats_link_settings(&ls, &cl, NATS_LINK_CLUSTER, "n1 test");
	ls.on_link = count_links;
	ck_assert_int_eq(nats_link_options(&opts, &ls), NATS_OK);
	ck_assert_int_eq(nats_link_connect_once(&nc, opts, why, sizeof(why)),
	    NATS_OK);
	ck_assert_str_eq(why, "");
	ck_assert_uint_eq(atomic_load(&links), 0);
	atomic_store(&f.drop, true);
	ck_assert_msg(links_reach(1), "no disconnected callback");
	ck_assert_msg(links_reach(2), "no reconnected callback");
	accepted = atomic_load(&f.accepted);
	ck_assert_msg(accepted >= 2, "connected %u times, not again", accepted);
	ck_assert_int_eq(natsConnection_Status(nc), NATS_CONN_STATUS_CONNECTED);
	natsConnection_Close(nc);
	ck_assert_msg(links_reach(3), "no closed callback");
	natsConnection_Destroy(nc);
	natsOptions_Destroy(opts);
	fake_stop(&f);
}
END_TEST

/* A credentials file that cannot be read: refused, saying so. */
START_TEST(credentials_unreadable_says_why)
{
	char url[64], why[256];
	const char *s[] = { url, NULL };
	struct nats_link_settings ls;
	struct cluster_conf cl;
	struct fake_nats f;
	natsConnection *nc = NULL;
	natsOptions *opts = NULL;

	fake_start(&f);
	snprintf(url, sizeof(url), "nats://127.0.0.1:%u", f.port);
	conf_with(&cl, s, "/nonexistent/echorouterd-test.creds");
	nats_link_settings(&ls, &cl, NATS_LINK_STORE, NULL);
	ck_assert_int_eq(nats_link_options(&opts, &ls), NATS_OK);
	ck_assert_int_ne(nats_link_connect_once(&nc, opts, why, sizeof(why)),
	    NATS_OK);
	ck_assert_ptr_null(nc);
	ck_assert_uint_gt(strlen(why), 0);
	ck_assert_msg(why[0] != '(', "why: %s", why);
	natsOptions_Destroy(opts);
	fake_stop(&f);
}
END_TEST

Suite *
nats_link_suite(void)
{
	Suite *s = suite_create("nats_link");
	TCase *tc = tcase_create("decided");
	TCase *net = tcase_create("connect");

	tcase_add_test(tc, settings_by_role);
	tcase_add_test(tc, credentials_decided);
	tcase_add_test(tc, bucket_names);
	suite_add_tcase(s, tc);
	tcase_set_timeout(net, 30);
	tcase_add_test(net, connect_refused_says_why);
	tcase_add_test(net, connect_retry_in_background);
	tcase_add_test(net, reconnects_and_tells);
	tcase_add_test(net, credentials_unreadable_says_why);
	suite_add_tcase(s, net);
	return s;
}

#else

/* Built without libnats: nothing to test. */
Suite *
nats_link_suite(void)
{
	return suite_create("nats_link");
}

#endif
