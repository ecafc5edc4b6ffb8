/* http_send.c: Kannel's sendsms fields and the JSON API's body, read into one checked send request. */
#include "http_send.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http.h"
#include "text.h"
#include "util.h"

#define UDH_MAX		140	/* a UDH fills one SMS at most */
#define MINUTES_MAX	(60u * 24 * 366)	/* validity, deferred */

/* Fails the request: status 400 with why (Kannel's words where it has). */
static int
refuse(struct http_send *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
refuse(struct http_send *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return 400;
}

static void
send_init(struct http_send *s)
{
	memset(s, 0, offsetof(struct http_send, to));
	s->coding = -1;
	s->dlr_mask = -1;
	s->due = s->expires = 0;
	s->url[0] = s->err[0] = '\0';
	s->text = NULL;
	s->len = 0;
	s->coded = s->udhi = false;
	s->data_coding = 0;
}

/* A whole decimal number v in [0, max]; false otherwise. */
static bool
parse_uint(const char *v, unsigned max, unsigned *out)
{
	unsigned long long x = 0;

	if (*v == '\0')
		return false;
	for (; *v != '\0'; v++) {
		if (*v < '0' || *v > '9')
			return false;
		x = x * 10 + (unsigned)(*v - '0');
		if (x > max)
			return false;
	}
	*out = (unsigned)x;
	return true;
}

/* Splits to[0..n) at spaces into s->to. 0 or 400. */
static int
split_to(struct http_send *s, const char *to, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t b;

		while (i < n && to[i] == ' ')
			i++;
		for (b = i; i < n && to[i] != ' '; i++)
			;
		if (i == b)
			break;
		if (!route_addr_valid(to + b, i - b))
			return refuse(s, "Invalid receiver number, rejected");
		if (s->nto == HTTP_SEND_TO_MAX)
			return refuse(s, "Too many receivers (over %d), rejected",
			    HTTP_SEND_TO_MAX);
		memcpy(s->to[s->nto], to + b, i - b);
		s->to[s->nto++][i - b] = '\0';
	}
	if (s->nto == 0)
		return refuse(s, "Empty receiver number not allowed, rejected");
	return 0;
}

/* Copies a valid sender into s->from. 0 or 400. */
static int
set_from(struct http_send *s, const char *from, size_t n)
{
	if (n == 0)
		return 0;
	if (!route_addr_valid(from, n))
		return refuse(s, "Invalid sender, rejected");
	memcpy(s->from, from, n);
	s->from[n] = '\0';
	return 0;
}

static int
set_url(struct http_send *s, const char *url, size_t n, const char *what)
{
	if (n == 0)
		return 0;
	if (n > HTTP_SEND_URL_MAX || !http_url_valid(url, n))
		return refuse(s, "%s", what);
	memcpy(s->url, url, n);
	s->url[n] = '\0';
	return 0;
}

/* The text_coding of a Kannel charset name; -1 for one not taken. */
static int
charset_coding(const char *cs)
{
	if (cs == NULL || strcasecmp(cs, "UTF-8") == 0 ||
	    strcasecmp(cs, "UTF8") == 0)
		return -2;		/* as it is */
	if (strcasecmp(cs, "UTF-16BE") == 0 || strcasecmp(cs, "UTF-16") == 0 ||
	    strcasecmp(cs, "UCS-2") == 0 || strcasecmp(cs, "UCS-2BE") == 0)
		return TEXT_UCS2;
	if (strcasecmp(cs, "ISO-8859-1") == 0 ||
	    strcasecmp(cs, "ISO8859-1") == 0 || strcasecmp(cs, "LATIN1") == 0)
		return TEXT_LATIN1;
	if (strcasecmp(cs, "US-ASCII") == 0 || strcasecmp(cs, "ASCII") == 0)
		return TEXT_IA5;
	return -1;
}

/* t[0..n) in charset cs as UTF-8 in s->text; false if it is not. */
static bool
to_utf8(struct http_send *s, const char *cs, const uint8_t *t, size_t n)
{
	int coding = charset_coding(cs);
	ssize_t k;

	if (coding == -1)
		return false;
	if (coding == -2) {
		if (text_ucs2_units((const char *)t, n) < 0)
			return false;
		s->text = xmalloc(n + 1);
		memcpy(s->text, t, n);
		k = (ssize_t)n;
	} else {
		s->text = xmalloc(TEXT_UTF8_MAX(n) + 1);
		k = text_decode((enum text_coding)coding, t, n,
		    (char *)s->text, TEXT_UTF8_MAX(n));
		if (k < 0)
			return false;
	}
	s->text[k] = '\0';
	s->len = (size_t)k;
	return true;
}

/*
 * Coded octets: udh[0..ulen) then the text: 8-bit as given (coding 1),
 * or text (UTF-8 by now) in GSM 03.38 septets (0) or UCS-2 (2). 0 or 400.
 */
static int
make_coded(struct http_send *s, const uint8_t *udh, size_t ulen)
{
	size_t cap = ulen + TEXT_ENC_MAX(s->len) + 1;
	uint8_t *o = xmalloc(cap);
	ssize_t k = (ssize_t)s->len;

	memcpy(o, udh, ulen);
	if (s->coding == 1 || s->coding == -1) {
		memcpy(o + ulen, s->text, s->len);
		s->data_coding = 4;
	} else {
		k = text_encode(s->coding == 0 ? TEXT_GSM : TEXT_UCS2,
		    (const char *)s->text, s->len, o + ulen, cap - ulen - 1);
		s->data_coding = s->coding == 0 ? TEXT_GSM : TEXT_UCS2;
	}
	free(s->text);
	s->text = o;
	if (k < 0)
		return refuse(s, "Charset or body misformed, rejected");
	s->len = ulen + (size_t)k;
	s->text[s->len] = '\0';
	s->coded = true;
	s->udhi = ulen > 0;
	return 0;
}

/*
 * Kannel's udh: the octets %-escaped (decoded by now), or hex digits,
 * which the first octet's length tells apart. Its length must be the
 * first octet plus one.
 */
static int
get_udh(struct http_send *s, const char *v, size_t n, uint8_t *udh,
    size_t *ulen)
{
	if (n > 0 && n == (size_t)(uint8_t)v[0] + 1 && n <= UDH_MAX) {
		memcpy(udh, v, n);
		*ulen = n;
		return 0;
	}
	if (n / 2 <= UDH_MAX && http_unhex(v, n, udh) && n > 0 &&
	    n / 2 == (size_t)udh[0] + 1) {
		*ulen = n / 2;
		return 0;
	}
	if (n > UDH_MAX)
		return refuse(s, "UDH field is too long, rejected");
	return refuse(s, "UDH field misformed, rejected");
}

/* An optional whole number field of f in [0, max]. 0 or 400. */
static int
form_uint(struct http_send *s, const struct http_form *f, const char *name,
    unsigned max, unsigned *out, const char *bad)
{
	const char *v = http_form_get(f, name, NULL);

	if (v != NULL && !parse_uint(v, max, out))
		return refuse(s, "%s", bad);
	return 0;
}

/* validity, deferred, coding, dlr-mask, dlr-url. 0 or 400. */
static int
form_options(struct http_send *s, const struct http_form *f, uint64_t now)
{
	unsigned validity = 0, deferred = 0, coding = 0, mask = 0;
	const char *v;
	size_t n;
	int st;

	if ((st = form_uint(s, f, "coding", 2, &coding,
	    "Coding field misformed, rejected")) != 0 ||
	    (st = form_uint(s, f, "validity", MINUTES_MAX, &validity,
	    "Validity field misformed, rejected")) != 0 ||
	    (st = form_uint(s, f, "deferred", MINUTES_MAX, &deferred,
	    "Deferred field misformed, rejected")) != 0 ||
	    (st = form_uint(s, f, "dlr-mask", 63, &mask,
	    "DLR-Mask field misformed, rejected")) != 0)
		return st;
	if (http_form_get(f, "coding", NULL) != NULL)
		s->coding = (int)coding;
	if (http_form_get(f, "dlr-mask", NULL) != NULL)
		s->dlr_mask = (int)mask;
	if (deferred > 0)
		s->due = now + deferred * 60ull;
	if (validity > 0)
		s->expires = (s->due != 0 ? s->due : now) + validity * 60ull;
	if ((v = http_form_get(f, "dlr-url", &n)) != NULL)
		return set_url(s, v, n, "DLR-URL field misformed, rejected");
	return 0;
}

/* The credentials, in either of Kannel's spellings. */
static void
form_creds(struct http_send *s, const struct http_form *f)
{
	const char *u = http_form_get(f, "username", NULL);
	const char *p = http_form_get(f, "password", NULL);

	if (u == NULL)
		u = http_form_get(f, "user", NULL);
	if (p == NULL)
		p = http_form_get(f, "pass", NULL);
	s->has_user = u != NULL;
	snprintf(s->user, sizeof(s->user), "%s", u != NULL ? u : "");
	snprintf(s->pass, sizeof(s->pass), "%s", p != NULL ? p : "");
}

/* The text with charset, coding and udh. 0 or 400. */
static int
form_text(struct http_send *s, const struct http_form *f)
{
	uint8_t udh[UDH_MAX];
	size_t n = 0, ulen = 0, un;
	const char *t = http_form_get(f, "text", &n);
	const char *u = http_form_get(f, "udh", &un);
	const char *cs = http_form_get(f, "charset", NULL);
	int st;

	if (u != NULL && un > 0 && (st = get_udh(s, u, un, udh, &ulen)) != 0)
		return st;
	if ((t == NULL || n == 0) && ulen == 0)
		return refuse(s, "Missing text, rejected");
	if (t == NULL)
		t = "";
	/* 8-bit octets are taken as they are, whatever the charset says. */
	if (s->coding == 1 || (s->coding == -1 && ulen > 0)) {
		s->text = xmalloc(n + 1);
		memcpy(s->text, t, n);
		s->len = n;
		return make_coded(s, udh, ulen);
	}
	if (!to_utf8(s, cs, (const uint8_t *)t, n))
		return refuse(s, "Charset or body misformed, rejected");
	return ulen > 0 ? make_coded(s, udh, ulen) : 0;
}

int
http_send_form(const struct http_form *f, uint64_t now, struct http_send *s)
{
	const char *to, *from;
	size_t n, fn;
	int st;

	send_init(s);
	form_creds(s, f);
	if ((to = http_form_get(f, "to", &n)) == NULL)
		return refuse(s, "Missing receiver number, rejected");
	if ((st = split_to(s, to, n)) != 0)
		return st;
	if ((from = http_form_get(f, "from", &fn)) != NULL &&
	    (st = set_from(s, from, fn)) != 0)
		return st;
	if ((st = form_options(s, f, now)) != 0)
		return st;
	return form_text(s, f);
}

/* "to": a string, or an array of 1 to HTTP_SEND_TO_MAX. 0 or 400. */
static int
json_to(struct http_send *s, json_t *to)
{
	size_t i;
	json_t *v;

	if (json_is_string(to))
		return json_string_length(to) == 0 ? refuse(s, "\"to\" is empty")
		    : split_to(s, json_string_value(to), json_string_length(to));
	if (!json_is_array(to) || json_array_size(to) == 0)
		return refuse(s, "\"to\" must be a number or a list of them");
	if (json_array_size(to) > HTTP_SEND_TO_MAX)
		return refuse(s, "\"to\": over %d recipients",
		    HTTP_SEND_TO_MAX);
	json_array_foreach(to, i, v) {
		const char *a = json_string_value(v);

		if (a == NULL || !route_addr_valid(a, json_string_length(v)))
			return refuse(s, "\"to\": item %zu is not a valid "
			    "address", i);
		snprintf(s->to[s->nto++], sizeof(s->to[0]), "%s", a);
	}
	return 0;
}

/* "schedule": Unix time, or "YYYY-MM-DDTHH:MM:SSZ". 0 or 400. */
static int
json_schedule(struct http_send *s, json_t *v, uint64_t now)
{
	long long t = -1;

	if (json_is_integer(v))
		t = json_integer_value(v);
	else if (json_is_string(v)) {
		struct tm tm;
		const char *end;

		memset(&tm, 0, sizeof(tm));
		end = strptime(json_string_value(v), "%Y-%m-%dT%H:%M:%SZ", &tm);
		if (end != NULL && *end == '\0')
			t = (long long)timegm(&tm);
	}
	if (t < 0)
		return refuse(s, "\"schedule\": a Unix time or "
		    "\"YYYY-MM-DDTHH:MM:SSZ\"");
	if ((uint64_t)t + 1 < now)
		return refuse(s, "\"schedule\" is in the past");
	s->due = (uint64_t)t > now ? (uint64_t)t : 0;
	return 0;
}

/* Whether every key of o is one of the API's. */
static const char *
json_unknown_key(json_t *o)
{
	static const char *const known[] = { "to", "from", "text", "hex",
	    "coding", "validity", "schedule", "receipt_url", NULL };
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		size_t i;

		for (i = 0; known[i] != NULL && strcmp(known[i], k) != 0; i++)
			;
		if (known[i] == NULL)
			return k;
	}
	return NULL;
}

/* "coding", "validity", "schedule", "receipt_url". 0 or 400. */
static int
json_options(struct http_send *s, json_t *o, uint64_t now)
{
	json_t *v;
	int st;

	if ((v = json_object_get(o, "coding")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 2)
			return refuse(s, "\"coding\": 0 (GSM), 1 (8-bit) or "
			    "2 (UCS-2)");
		s->coding = (int)json_integer_value(v);
	}
	if ((v = json_object_get(o, "schedule")) != NULL &&
	    (st = json_schedule(s, v, now)) != 0)
		return st;
	if ((v = json_object_get(o, "validity")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
		    json_integer_value(v) > MINUTES_MAX * 60ll)
			return refuse(s, "\"validity\": seconds, 1 to %u",
			    MINUTES_MAX * 60);
		s->expires = (s->due != 0 ? s->due : now) +
		    (uint64_t)json_integer_value(v);
	}
	if ((v = json_object_get(o, "receipt_url")) != NULL &&
	    (!json_is_string(v) || set_url(s, json_string_value(v),
	    json_string_length(v), "\"receipt_url\" is not an http(s) URL")))
		return refuse(s, "\"receipt_url\" is not an http(s) URL");
	return 0;
}

/* "text" (UTF-8) or "hex" (octets). 0 or 400. */
static int
json_text(struct http_send *s, json_t *o)
{
	json_t *t = json_object_get(o, "text"), *h = json_object_get(o, "hex");
	size_t n;

	if ((t == NULL) == (h == NULL))
		return refuse(s, "give \"text\" or \"hex\", one of them");
	if (t != NULL) {
		if (!json_is_string(t) || (n = json_string_length(t)) == 0)
			return refuse(s, "\"text\" must be a non-empty string");
		if (!to_utf8(s, NULL, (const uint8_t *)json_string_value(t),
		    n))
			return refuse(s, "\"text\" is not UTF-8");
		return s->coding == 1 ? make_coded(s, NULL, 0) : 0;
	}
	if (!json_is_string(h) || (n = json_string_length(h)) == 0)
		return refuse(s, "\"hex\" must be a non-empty string");
	s->text = xmalloc(n / 2 + 1);
	if (!http_unhex(json_string_value(h), n, s->text))
		return refuse(s, "\"hex\": an even count of hex digits");
	s->len = n / 2;
	s->coded = true;
	s->data_coding = s->coding == 0 ? TEXT_GSM : s->coding == 2 ?
	    TEXT_UCS2 : 4;
	return 0;
}

int
http_send_json(const char *body, size_t n, uint64_t now, struct http_send *s)
{
	json_error_t je;
	json_t *o, *v;
	const char *k;
	int st;

	send_init(s);
	if ((o = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je)) == NULL)
		return refuse(s, "not JSON: %s", je.text);
	if (!json_is_object(o))
		st = refuse(s, "the body must be a JSON object");
	else if ((k = json_unknown_key(o)) != NULL)
		st = refuse(s, "unknown field \"%.64s\"", k);
	else if ((v = json_object_get(o, "to")) == NULL)
		st = refuse(s, "\"to\" is missing");
	else if ((st = json_to(s, v)) != 0)
		;
	else if ((v = json_object_get(o, "from")) != NULL &&
	    !json_is_string(v))
		st = refuse(s, "\"from\" must be a string");
	else if (v != NULL && (st = set_from(s, json_string_value(v),
	    json_string_length(v))) != 0)
		;
	else if ((st = json_options(s, o, now)) == 0)
		st = json_text(s, o);
	json_decref(o);
	return st;
}

int
http_send_parts(const struct http_send *s)
{
	struct text_split_opts o = {
		.coding = s->coding == 2 ? TEXT_UCS2 : TEXT_CODING_AUTO,
		.how = TEXT_LONG_UDH, .max_parts = TEXT_PARTS_MAX,
	};
	struct text_split *sp;
	size_t cap;
	uint8_t *out;
	int n;

	if (s->coded)
		return 1;
	cap = TEXT_SPLIT_MAX(s->len, TEXT_PARTS_MAX);
	out = xmalloc(cap);
	sp = xmalloc(sizeof(*sp));
	n = text_split((const char *)s->text, s->len, &o, out, cap, sp);
	free(sp);
	free(out);
	return n;
}

void
http_send_fini(struct http_send *s)
{
	free(s->text);
	s->text = NULL;
}
