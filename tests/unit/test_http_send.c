/* test_http_send.c: Kannel's sendsms fields and the JSON API's bodies, read and checked. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_send.h"
#include "suites.h"

#define NOW	1700000000ull

/* Kannel's fields q into s: the status. */
static int
form(const char *q, struct http_send *s)
{
	struct http_form f;
	int st;

	ck_assert_int_eq(http_form_parse(q, strlen(q), &f), 0);
	st = http_send_form(&f, NOW, s);
	http_form_fini(&f);
	return st;
}

static int
json(const char *body, struct http_send *s)
{
	return http_send_json(body, strlen(body), NOW, s);
}

/* playSMS's query, word for word but the values. */
START_TEST(send_playsms)
{
	struct http_send s;

	ck_assert_int_eq(form("username=app&password=pw&from=%2B35191&to="
	    "%2B35192+%2B35193&text=Hi+there%21&dlr-mask=31&dlr-url="
	    "http%3A%2F%2F127.0.0.1%2Fplaysms%2Findex.php%3Fapp%3Dcall%26"
	    "type%3D%25d%26smsc%3D%25i", &s), 0);
	ck_assert_str_eq(s.user, "app");
	ck_assert_str_eq(s.pass, "pw");
	ck_assert_str_eq(s.from, "+35191");
	ck_assert_uint_eq(s.nto, 2);
	ck_assert_str_eq(s.to[0], "+35192");
	ck_assert_str_eq(s.to[1], "+35193");
	ck_assert_uint_eq(s.len, 9);
	ck_assert_int_eq(memcmp(s.text, "Hi there!", 9), 0);
	ck_assert(!s.coded);
	ck_assert_int_eq(s.dlr_mask, 31);
	ck_assert_str_eq(s.url, "http://127.0.0.1/playsms/index.php?app=call"
	    "&type=%d&smsc=%i");
	http_send_fini(&s);
}
END_TEST

/* playSMS's Unicode: coding=2, the text in UTF-16BE: UTF-8 here. */
START_TEST(send_utf16be)
{
	struct http_send s;

	/* U+0645 U+0631, and U+1F600 as a surrogate pair. */
	ck_assert_int_eq(form("user=app&pass=pw&to=1&coding=2&charset="
	    "UTF-16BE&text=%06E%061%D8%3D%DE%00", &s), 0);
	ck_assert_str_eq(s.user, "app");
	ck_assert_int_eq(s.coding, 2);
	ck_assert(!s.coded);
	ck_assert_str_eq((char *)s.text, "\xd9\x85\xd8\xb1\xf0\x9f\x98\x80");
	http_send_fini(&s);
	ck_assert_int_eq(form("user=app&to=1&charset=ISO-8859-1&text=%E9t%E9",
	    &s), 0);
	ck_assert_str_eq((char *)s.text, "\xc3\xa9t\xc3\xa9");
	http_send_fini(&s);
	/* A lone high surrogate is no text. */
	ck_assert_int_eq(form("user=app&to=1&charset=UTF-16BE&text=%D8%3D",
	    &s), 400);
	ck_assert_str_eq(s.err, "Charset or body misformed, rejected");
	http_send_fini(&s);
	ck_assert_int_eq(form("user=app&to=1&text=%C3", &s), 400);
	ck_assert_str_eq(s.err, "Charset or body misformed, rejected");
	http_send_fini(&s);
	ck_assert_int_eq(form("user=app&to=1&text=a&charset=KOI8-R", &s), 400);
	http_send_fini(&s);
}
END_TEST

/* udh in hex or %-escaped: the octets go as they are, UDHI set. */
START_TEST(send_udh)
{
	struct http_send s;

	ck_assert_int_eq(form("user=a&to=1&udh=050003A70201&text=%01%02",
	    &s), 0);
	ck_assert(s.coded && s.udhi);
	ck_assert_uint_eq(s.data_coding, 4);
	ck_assert_uint_eq(s.len, 8);
	ck_assert_int_eq(memcmp(s.text, "\x05\x00\x03\xa7\x02\x01\x01\x02", 8),
	    0);
	http_send_fini(&s);
	ck_assert_int_eq(form("user=a&to=1&udh=%05%00%03%A7%02%01&coding=2&"
	    "text=ab", &s), 0);
	ck_assert_uint_eq(s.data_coding, 8);
	ck_assert_uint_eq(s.len, 10);
	ck_assert_int_eq(memcmp(s.text + 6, "\x00" "a\x00" "b", 4), 0);
	http_send_fini(&s);
	ck_assert_int_eq(form("user=a&to=1&udh=0500&text=x", &s), 400);
	ck_assert_str_eq(s.err, "UDH field misformed, rejected");
	http_send_fini(&s);
	/* coding=1 without a UDH: 8-bit octets, the charset unused. */
	ck_assert_int_eq(form("user=a&to=1&coding=1&text=%FF%00", &s), 0);
	ck_assert(s.coded && !s.udhi);
	ck_assert_uint_eq(s.len, 2);
	http_send_fini(&s);
}
END_TEST

/* Each missing or bad field gets Kannel's words. */
START_TEST(send_kannel_errors)
{
	static const struct { const char *q, *err; } cases[] = {
		{ "user=a&text=x", "Missing receiver number, rejected" },
		{ "user=a&to=+&text=x",
		  "Empty receiver number not allowed, rejected" },
		{ "user=a&to=1", "Missing text, rejected" },
		{ "user=a&to=1&text=x&coding=3",
		  "Coding field misformed, rejected" },
		{ "user=a&to=1&text=x&coding=x",
		  "Coding field misformed, rejected" },
		{ "user=a&to=1&text=x&validity=-1",
		  "Validity field misformed, rejected" },
		{ "user=a&to=1&text=x&deferred=1.5",
		  "Deferred field misformed, rejected" },
		{ "user=a&to=1&text=x&dlr-mask=64",
		  "DLR-Mask field misformed, rejected" },
		{ "user=a&to=1&text=x&dlr-url=ftp%3A%2F%2Fh",
		  "DLR-URL field misformed, rejected" },
		{ "user=a&to=1&text=x&dlr-url=http%3A%2F%2F",
		  "DLR-URL field misformed, rejected" },
		{ "user=a&to=a%2Fb&text=x", "Invalid receiver number, rejected" },
		{ "user=a&to=1&from=a+b&text=x", "Invalid sender, rejected" },
	};
	struct http_send s;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(form(cases[i].q, &s), 400);
		/* The credentials are read whatever else is wrong. */
		ck_assert_str_eq(s.user, "a");
		ck_assert_str_eq(s.err, cases[i].err);
		http_send_fini(&s);
	}
}
END_TEST

/* deferred and validity are minutes from now; validity counts from due. */
START_TEST(send_times)
{
	struct http_send s;

	ck_assert_int_eq(form("user=a&to=1&text=x&deferred=2&validity=10",
	    &s), 0);
	ck_assert_uint_eq(s.due, NOW + 120);
	ck_assert_uint_eq(s.expires, NOW + 120 + 600);
	http_send_fini(&s);
	ck_assert_int_eq(form("user=a&to=1&text=x", &s), 0);
	ck_assert_uint_eq(s.due, 0);
	ck_assert_uint_eq(s.expires, 0);
	ck_assert_int_eq(s.dlr_mask, -1);
	http_send_fini(&s);
}
END_TEST

/* Recipients: at most HTTP_SEND_TO_MAX, extra spaces skipped. */
START_TEST(send_many_to)
{
	char q[2048] = "user=a&text=x&to=";
	struct http_send s;

	for (int i = 0; i < HTTP_SEND_TO_MAX; i++)
		strcat(q, "+1");
	ck_assert_int_eq(form(q, &s), 0);
	ck_assert_uint_eq(s.nto, HTTP_SEND_TO_MAX);
	http_send_fini(&s);
	strcat(q, "+2");
	ck_assert_int_eq(form(q, &s), 400);
	http_send_fini(&s);
}
END_TEST

START_TEST(json_good)
{
	struct http_send s;

	ck_assert_int_eq(json("{\"to\":\"+351\",\"from\":\"shop\",\"text\":"
	    "\"Ol\\u00e1\",\"validity\":60,\"schedule\":1700000100,"
	    "\"receipt_url\":\"https://app/r?id=%I\"}", &s), 0);
	ck_assert_uint_eq(s.nto, 1);
	ck_assert_str_eq(s.to[0], "+351");
	ck_assert_str_eq(s.from, "shop");
	ck_assert_str_eq((char *)s.text, "Ol\xc3\xa1");
	ck_assert_uint_eq(s.due, NOW + 100);
	ck_assert_uint_eq(s.expires, NOW + 160);
	ck_assert_str_eq(s.url, "https://app/r?id=%I");
	ck_assert_int_eq(http_send_parts(&s), 1);
	http_send_fini(&s);
	ck_assert_int_eq(json("{\"to\":[\"1\",\"2\"],\"hex\":\"00ff\","
	    "\"schedule\":\"2023-11-14T22:15:00Z\"}", &s), 0);
	ck_assert_uint_eq(s.nto, 2);
	ck_assert(s.coded);
	ck_assert_uint_eq(s.data_coding, 4);
	ck_assert_uint_eq(s.len, 2);
	ck_assert_uint_eq(s.due, 1700000100);
	http_send_fini(&s);
}
END_TEST

/* 161 GSM characters take 2 parts; 71 in UCS-2 too. */
START_TEST(json_parts)
{
	char body[512];
	struct http_send s;

	snprintf(body, sizeof(body), "{\"to\":\"1\",\"text\":\"%0161d\"}", 0);
	ck_assert_int_eq(json(body, &s), 0);
	ck_assert_int_eq(http_send_parts(&s), 2);
	http_send_fini(&s);
	snprintf(body, sizeof(body), "{\"to\":\"1\",\"coding\":2,\"text\":"
	    "\"%070d\"}", 0);
	ck_assert_int_eq(json(body, &s), 0);
	ck_assert_int_eq(http_send_parts(&s), 1);
	http_send_fini(&s);
	snprintf(body, sizeof(body), "{\"to\":\"1\",\"coding\":2,\"text\":"
	    "\"%071d\"}", 0);
	ck_assert_int_eq(json(body, &s), 0);
	ck_assert_int_eq(http_send_parts(&s), 2);
	http_send_fini(&s);
}
END_TEST

START_TEST(json_bad)
{
	static const char *const bad[] = {
		"", "[1]", "{\"to\":\"1\"", "{\"text\":\"x\"}",
		"{\"to\":\"1\",\"text\":\"x\",\"hex\":\"00\"}",
		"{\"to\":\"1\"}", "{\"to\":\"1\",\"text\":\"\"}",
		"{\"to\":\"1\",\"text\":1}", "{\"to\":1,\"text\":\"x\"}",
		"{\"to\":[],\"text\":\"x\"}", "{\"to\":[1],\"text\":\"x\"}",
		"{\"to\":\"a/b\",\"text\":\"x\"}",
		"{\"to\":\"1\",\"txt\":\"x\"}",
		"{\"to\":\"1\",\"to\":\"2\",\"text\":\"x\"}",
		"{\"to\":\"1\",\"hex\":\"0\"}", "{\"to\":\"1\",\"hex\":\"zz\"}",
		"{\"to\":\"1\",\"text\":\"x\",\"coding\":3}",
		"{\"to\":\"1\",\"text\":\"x\",\"coding\":\"2\"}",
		"{\"to\":\"1\",\"text\":\"x\",\"validity\":0}",
		"{\"to\":\"1\",\"text\":\"x\",\"schedule\":1}",
		"{\"to\":\"1\",\"text\":\"x\",\"schedule\":\"tomorrow\"}",
		"{\"to\":\"1\",\"text\":\"x\",\"receipt_url\":\"ftp://h\"}",
		"{\"to\":\"1\",\"text\":\"x\",\"receipt_url\":5}",
		"{\"to\":\"1\",\"text\":\"x\",\"from\":5}",
		"{\"to\":\"1\",\"text\":\"x\",\"from\":\"a b\"}",
	};
	struct http_send s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(json(bad[i], &s) == 400, "accepted: %s", bad[i]);
		ck_assert_msg(s.err[0] != '\0', "no reason: %s", bad[i]);
		http_send_fini(&s);
	}
}
END_TEST

Suite *
http_send_suite(void)
{
	Suite *s = suite_create("http_send");
	TCase *t = tcase_create("core");

	tcase_add_test(t, send_playsms);
	tcase_add_test(t, send_utf16be);
	tcase_add_test(t, send_udh);
	tcase_add_test(t, send_kannel_errors);
	tcase_add_test(t, send_times);
	tcase_add_test(t, send_many_to);
	tcase_add_test(t, json_good);
	tcase_add_test(t, json_parts);
	tcase_add_test(t, json_bad);
	suite_add_tcase(s, t);
	return s;
}
