/* test_http_cb.c: callback_allow's blocks, URL hosts, Kannel's dlr-url escapes, the JSON receipt and the retry schedule. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_cb.h"
#include "smpp_receipt.h"
#include "suites.h"

/* 2023-11-14 22:13:20 UTC */
#define AT	1700000000ull

static struct sockaddr_storage
addr(const char *s, unsigned port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)&ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, s, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, s, &s6->sin6_addr), 1);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
	}
	return ss;
}

static bool
in(const char *blocks, const char *a)
{
	struct config_cidr c[8];
	char buf[256], *save = NULL;
	unsigned n = 0;
	struct sockaddr_storage ss = addr(a, 80);

	snprintf(buf, sizeof(buf), "%s", blocks);
	for (char *t = strtok_r(buf, " ", &save); t != NULL;
	    t = strtok_r(NULL, " ", &save))
		ck_assert_int_eq(http_cidr_parse(t, &c[n++]), 0);
	return http_cidr_any(c, n, (struct sockaddr *)&ss);
}

START_TEST(cidr_match)
{
	ck_assert(in("127.0.0.0/8", "127.1.2.3"));
	ck_assert(!in("127.0.0.0/8", "128.0.0.1"));
	ck_assert(in("10.0.0.0/8 192.168.1.0/24", "192.168.1.200"));
	ck_assert(!in("10.0.0.0/8 192.168.1.0/24", "192.168.2.1"));
	/* A prefix that ends inside a byte. */
	ck_assert(in("172.16.0.0/12", "172.31.255.255"));
	ck_assert(!in("172.16.0.0/12", "172.32.0.0"));
	ck_assert(in("0.0.0.0/0", "8.8.8.8"));
	ck_assert(in("203.0.113.7", "203.0.113.7"));
	ck_assert(!in("203.0.113.7", "203.0.113.8"));
	ck_assert(in("2001:db8::/32", "2001:db8:1::5"));
	ck_assert(!in("2001:db8::/32", "2001:db9::5"));
	/* A family is not the other's: ::/0 does not let IPv4 in. */
	ck_assert(!in("::/0", "10.0.0.1"));
	/* An IPv4-mapped address is its IPv4 address. */
	ck_assert(in("10.0.0.0/8", "::ffff:10.1.2.3"));
	ck_assert(!in("127.0.0.0/8", "::ffff:10.1.2.3"));
	ck_assert(!in("", "127.0.0.1"));
}
END_TEST

START_TEST(cidr_bad)
{
	static const char *const bad[] = { "", "10.0.0.0/", "10.0.0.0/33",
	    "::/129", "10.0.0/8", "10.0.0.0/8x", "example.com/8", "/8",
	    "10.0.0.0/-1", "1.2.3.4/ 8" };
	struct config_cidr c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_msg(http_cidr_parse(bad[i], &c) == -1, "took %s",
		    bad[i]);
		ck_assert_int_eq(errno, EINVAL);
	}
}
END_TEST

START_TEST(url_host)
{
	char h[64];
	unsigned port;

	ck_assert_int_eq(http_cb_url_host("http://127.0.0.1:8080/dlr?x=1", h,
	    sizeof(h), &port), 0);
	ck_assert_str_eq(h, "127.0.0.1");
	ck_assert_uint_eq(port, 8080);
	ck_assert_int_eq(http_cb_url_host("https://Example.com?q", h,
	    sizeof(h), &port), 0);
	ck_assert_str_eq(h, "Example.com");
	ck_assert_uint_eq(port, 443);
	ck_assert_int_eq(http_cb_url_host("http://[::1]:99/", h, sizeof(h),
	    &port), 0);
	ck_assert_str_eq(h, "::1");
	ck_assert_uint_eq(port, 99);
	/* The user's part is not the host it goes to. */
	ck_assert_int_eq(http_cb_url_host("http://evil.com@10.0.0.1/", h,
	    sizeof(h), &port), 0);
	ck_assert_str_eq(h, "10.0.0.1");
	ck_assert_uint_eq(port, 80);
	ck_assert_int_eq(http_cb_url_host("ftp://x/", h, sizeof(h), &port),
	    -1);
	ck_assert_int_eq(http_cb_url_host("http:///x", h, sizeof(h), &port),
	    -1);
	ck_assert_int_eq(http_cb_url_host("http://x:70000/", h, sizeof(h),
	    &port), -1);
	ck_assert_int_eq(http_cb_url_host("http://x:8a/", h, sizeof(h),
	    &port), -1);
	ck_assert_int_eq(http_cb_url_host("http://[::1/", h, sizeof(h),
	    &port), -1);
}
END_TEST

START_TEST(expand_kannel)
{
	struct http_dlr d = { .type = HTTP_DLR_DELIVERED, .id = 42,
	    .at = AT, .to = "+35192", .from = "shop & co", .upstream_id = "" };
	char out[512];

	ck_assert_int_eq(http_cb_expand("http://h/dlr?type=%d&id=%I&to=%p"
	    "&from=%P&a=%A&t=%t&T=%T&f=%F&p=100%%", &d, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "http://h/dlr?type=1&id=42&to=%2B35192"
	    "&from=shop%20%26%20co&a=DELIVRD&t=2023-11-14%2022%3A13%3A20"
	    "&T=1700000000&f=&p=100%");
	/* Escapes Kannel has and we do not fill stay as they are. */
	ck_assert_int_eq(http_cb_expand("x?s=%i&b=%b&end=%", &d, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "x?s=%i&b=%b&end=%");
	d.type = http_cb_dlr_type(SMPP_STATE_UNDELIVERABLE);
	ck_assert_int_eq(http_cb_expand("%d %A", &d, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "2 UNDELIV");
	d.type = http_cb_dlr_type(SMPP_STATE_EXPIRED);
	ck_assert_int_eq(d.type, HTTP_DLR_UNDELIVERED);
	d.type = HTTP_DLR_BUFFERED;
	ck_assert_int_eq(http_cb_expand("%d %A", &d, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "4 BUFFRED");
}
END_TEST

START_TEST(expand_full)
{
	struct http_dlr d = { .type = 1, .id = 1234567, .at = AT, .to = "abc",
	    .from = "x", .upstream_id = "" };
	char out[10];

	/* One byte over; then exactly 9 bytes and the NUL. */
	ck_assert_int_eq(http_cb_expand("id=%I", &d, out, sizeof(out)), -1);
	ck_assert_int_eq(errno, E2BIG);
	ck_assert_int_eq(http_cb_expand("i=%I", &d, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "i=1234567");
}
END_TEST

START_TEST(receipt_json)
{
	struct http_dlr d = { .type = HTTP_DLR_DELIVERED, .id = 42, .at = AT,
	    .to = "bob", .from = "sh\"op", .upstream_id = "" };
	char *s = http_cb_receipt_json(&d);

	ck_assert_str_eq(s, "{\"id\":\"42\",\"status\":\"delivered\","
	    "\"to\":\"bob\",\"from\":\"sh\\\"op\","
	    "\"at\":\"2023-11-14T22:13:20Z\"}");
	free(s);
	d.type = HTTP_DLR_UNDELIVERED;
	s = http_cb_receipt_json(&d);
	ck_assert_ptr_nonnull(strstr(s, "\"status\":\"undeliverable\""));
	free(s);
}
END_TEST

START_TEST(mo_json)
{
	static const uint8_t bin[] = { 0x00, 0xff, 0x10 };
	char *s = http_cb_mo_json(7, "+35191", "app", "ol\xc3\xa1", NULL, 0,
	    AT);

	ck_assert_str_eq(s, "{\"id\":\"7\",\"from\":\"+35191\","
	    "\"to\":\"app\",\"at\":\"2023-11-14T22:13:20Z\","
	    "\"text\":\"ol\xc3\xa1\"}");
	free(s);
	/* Octets that are no text go as hex, and no "text" is made up. */
	s = http_cb_mo_json(7, "a", "b", NULL, bin, sizeof(bin), AT);
	ck_assert_ptr_nonnull(strstr(s, "\"hex\":\"00ff10\""));
	ck_assert_ptr_null(strstr(s, "\"text\""));
	free(s);
}
END_TEST

START_TEST(backoff)
{
	static const unsigned want[] = { 0, 1, 2, 4, 8, 16, 32, 64, 128, 256,
	    300, 300 };

	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_uint_eq(http_cb_backoff(i), want[i]);
	ck_assert_uint_eq(http_cb_backoff(1000), HTTP_CB_BACKOFF_MAX);
	ck_assert_uint_eq(http_cb_backoff(4000000000u), HTTP_CB_BACKOFF_MAX);
}
END_TEST

Suite *
http_cb_suite(void)
{
	Suite *s = suite_create("http_cb");
	TCase *t = tcase_create("core");

	tcase_add_test(t, cidr_match);
	tcase_add_test(t, cidr_bad);
	tcase_add_test(t, url_host);
	tcase_add_test(t, expand_kannel);
	tcase_add_test(t, expand_full);
	tcase_add_test(t, receipt_json);
	tcase_add_test(t, mo_json);
	tcase_add_test(t, backoff);
	suite_add_tcase(s, t);
	return s;
}
