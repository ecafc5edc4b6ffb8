/* test_http.c: HTTP framing with bodies, request parsing, form decoding, URLs and Basic credentials. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "http.h"
#include "suites.h"

/* http_frame_len on s[0..n) at a guard page: a read past it faults. */
static ssize_t
frame(const char *s, size_t n, size_t body_max)
{
	struct unit_guard g;
	const uint8_t *p = unit_guarded(s, n, &g);
	ssize_t len = http_frame_len(p, n, body_max);

	unit_guard_free(&g);
	return len;
}

static int
parse(const char *s, size_t body_max, struct http_req *rq)
{
	return http_parse((const uint8_t *)s, strlen(s), body_max, rq);
}

/* A POST is whole only with its body: 0 until its last byte. */
START_TEST(http_frame_body_byte_by_byte)
{
	const char *req = "POST /x HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 7\r\n\r\na=1&b=2";
	size_t n = strlen(req);

	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(frame(req, i, 100), 0);
	ck_assert_int_eq(frame(req, n, 100), (ssize_t)n);
}
END_TEST

/* Two pipelined POSTs: the first is framed alone, body and all. */
START_TEST(http_frame_pipelined_bodies)
{
	const char *one = "POST /x HTTP/1.1\r\nHost: a\r\ncontent-length:  3 "
	    "\r\n\r\nabc";
	char two[256];

	snprintf(two, sizeof(two), "%s%s", one, one);
	ck_assert_int_eq(frame(two, strlen(two), 100), (ssize_t)strlen(one));
}
END_TEST

/* A body over the limit: only the head is framed, and parsing says 413. */
START_TEST(http_body_too_large)
{
	const char *req = "POST /x HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 101\r\n\r\n";
	struct http_req rq;

	ck_assert_int_eq(frame(req, strlen(req), 100), (ssize_t)strlen(req));
	ck_assert_int_eq(parse(req, 100, &rq), 413);
	ck_assert_int_eq(parse("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-"
	    "Encoding: chunked\r\n\r\n", 100, &rq), 411);
	ck_assert_int_eq(parse("POST /x HTTP/1.1\r\nHost: a\r\nContent-"
	    "Length: 1x\r\n\r\n", 100, &rq), 400);
}
END_TEST

/* A request line of 100 KiB is 414; long fields are 431. */
START_TEST(http_too_long)
{
	size_t n = 100 * 1024;
	char *big = malloc(n + 1);
	struct http_req rq;

	memcpy(big, "GET /cgi-bin/sendsms?text=", 26);
	memset(big + 26, 'a', n - 26);
	big[n] = '\0';
	ck_assert_int_eq(frame(big, HTTP_HEADER_MAX, 0), 0);
	ck_assert_int_eq(frame(big, n, 0), (ssize_t)n);
	ck_assert_int_eq(parse(big, 0, &rq), 414);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	ck_assert_int_eq(parse(big, 0, &rq), 431);
	free(big);
}
END_TEST

/* The fields the http protocol uses, and the body where it is. */
START_TEST(http_parse_fields)
{
	const char *req = "POST /api/v1/messages?x HTTP/1.1\r\nHost: h:80\r\n"
	    "Content-Type: application/json; charset=utf-8  \r\n"
	    "Authorization: Basic YXBwOnB3\r\nContent-Length: 2\r\n\r\n{}";
	struct http_req rq;

	ck_assert_int_eq(parse(req, 100, &rq), 0);
	ck_assert_str_eq(rq.method, "POST");
	ck_assert(http_path_is(rq.path, rq.pathlen, "/api/v1/messages"));
	ck_assert(!http_path_is(rq.path, rq.pathlen, "/api/v1/message"));
	ck_assert_uint_eq(rq.ctypelen, strlen("application/json; "
	    "charset=utf-8"));
	ck_assert_int_eq(strncmp(rq.auth, "Basic YXBwOnB3", rq.authlen), 0);
	ck_assert_uint_eq(rq.content_length, 2);
	ck_assert_int_eq(memcmp(rq.body, "{}", 2), 0);
}
END_TEST

/* '+' is a space, %XX an octet (NUL included, in a value). */
START_TEST(http_form_decodes)
{
	const char *q = "text=Hello+world%21+%C3%A9&to=%2B351+2&e=&n&z=%00x";
	struct http_form f;
	size_t len;
	const char *v;

	ck_assert_int_eq(http_form_parse(q, strlen(q), &f), 0);
	ck_assert_uint_eq(f.n, 5);
	ck_assert_str_eq(http_form_get(&f, "text", NULL), "Hello world! \xc3\xa9");
	ck_assert_str_eq(http_form_get(&f, "to", NULL), "+351 2");
	ck_assert_str_eq(http_form_get(&f, "e", &len), "");
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(http_form_get(&f, "n", NULL), "");
	v = http_form_get(&f, "z", &len);
	ck_assert_uint_eq(len, 2);
	ck_assert_int_eq(memcmp(v, "\0x", 2), 0);
	ck_assert_ptr_null(http_form_get(&f, "absent", NULL));
	http_form_fini(&f);
}
END_TEST

/* A repeated key: the first value counts, as in Kannel. */
START_TEST(http_form_repeated)
{
	const char *q = "to=1&&to=2&text=a";
	struct http_form f;

	ck_assert_int_eq(http_form_parse(q, strlen(q), &f), 0);
	ck_assert_uint_eq(f.n, 3);
	ck_assert_str_eq(http_form_get(&f, "to", NULL), "1");
	http_form_fini(&f);
}
END_TEST

/* Bad escapes: a lone '%', one hex digit, non-hex, a NUL in a name. */
START_TEST(http_form_bad_escapes)
{
	static const char *const bad[] = { "a=%", "a=%4", "a=%zz", "a=b%",
	    "%00=1", "a=1&b=%g1" };
	struct http_form f;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_int_eq(http_form_parse(bad[i], strlen(bad[i]), &f),
		    -1);
		ck_assert_int_eq(errno, EILSEQ);
		ck_assert_uint_eq(f.n, 0);
		http_form_fini(&f);
	}
}
END_TEST

/* Over HTTP_FORM_MAX fields: E2BIG, not a longer table. */
START_TEST(http_form_too_many)
{
	char q[1024] = "";
	struct http_form f;

	for (int i = 0; i <= HTTP_FORM_MAX; i++)
		strcat(q, "a=1&");
	ck_assert_int_eq(http_form_parse(q, strlen(q), &f), -1);
	ck_assert_int_eq(errno, E2BIG);
	http_form_fini(&f);
}
END_TEST

/* Kannel's udh and binary texts in hex: either case, whole octets only. */
START_TEST(http_unhex_octets)
{
	uint8_t out[8];

	memset(out, 0xEE, sizeof(out));
	ck_assert(http_unhex("0500a3Ff", 8, out));
	ck_assert_uint_eq(out[0], 0x05);
	ck_assert_uint_eq(out[1], 0x00);
	ck_assert_uint_eq(out[2], 0xA3);
	ck_assert_uint_eq(out[3], 0xFF);
	ck_assert_uint_eq(out[4], 0xEE);	/* nothing past n / 2 */
	ck_assert(http_unhex("", 0, out));
	ck_assert(!http_unhex("050", 3, out));	/* half an octet */
	ck_assert(!http_unhex("0g", 2, out));
	ck_assert(!http_unhex("%0", 2, out));
	ck_assert(!http_unhex(" 5", 2, out));
	ck_assert(!http_unhex("\xc3\xa9", 2, out));
}
END_TEST

START_TEST(http_urls)
{
	static const char *const good[] = { "http://h", "HTTPS://h:8/p?x=%d",
	    "http://127.0.0.1:9/dlr?s=%d&a=%A" };
	static const char *const bad[] = { "", "http://", "ftp://h", "http:/h",
	    "http:///p", "http://h/a b", "http://h/\x7f", "h/p", "https://:80/" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(http_url_valid(good[i], strlen(good[i])), "%s",
		    good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!http_url_valid(bad[i], strlen(bad[i])), "%s",
		    bad[i]);
}
END_TEST

START_TEST(http_basic)
{
	char u[8], p[8];

	ck_assert(http_basic_auth("Basic YXBwOnB3", 14, u, sizeof(u), p,
	    sizeof(p)));
	ck_assert_str_eq(u, "app");
	ck_assert_str_eq(p, "pw");
	/* "app:a:b": the password holds the second colon. */
	ck_assert(http_basic_auth("basic  YXBwOmE6Yg==", 19, u, sizeof(u), p,
	    sizeof(p)));
	ck_assert_str_eq(p, "a:b");
	ck_assert(!http_basic_auth("Bearer YXBwOnB3", 15, u, sizeof(u), p,
	    sizeof(p)));
	ck_assert(!http_basic_auth("Basic YXBw", 10, u, sizeof(u), p,
	    sizeof(p)));			/* no colon */
	ck_assert(!http_basic_auth("Basic !!!!", 10, u, sizeof(u), p,
	    sizeof(p)));
	/* "toolongname:pw" does not fit 8 bytes: refused, not cut. */
	ck_assert(!http_basic_auth("Basic dG9vbG9uZ25hbWU6cHc=", 26, u,
	    sizeof(u), p, sizeof(p)));
}
END_TEST

Suite *
http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *t = tcase_create("core");

	tcase_add_test(t, http_frame_body_byte_by_byte);
	tcase_add_test(t, http_frame_pipelined_bodies);
	tcase_add_test(t, http_body_too_large);
	tcase_add_test(t, http_too_long);
	tcase_add_test(t, http_parse_fields);
	tcase_add_test(t, http_form_decodes);
	tcase_add_test(t, http_form_repeated);
	tcase_add_test(t, http_form_bad_escapes);
	tcase_add_test(t, http_form_too_many);
	tcase_add_test(t, http_unhex_octets);
	tcase_add_test(t, http_urls);
	tcase_add_test(t, http_basic);
	suite_add_tcase(s, t);
	return s;
}
