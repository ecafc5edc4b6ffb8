/* http_cb.c: address blocks, URL hosts, Kannel's escapes and the retry schedule of callbacks. */
#include "http_cb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "smpp_receipt.h"

int
http_cidr_parse(const char *s, struct config_cidr *c)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	unsigned long bits;

	if (strlen(s) >= sizeof(buf))
		goto bad;
	memcpy(buf, s, strlen(s) + 1);
	memset(c, 0, sizeof(*c));
	if ((slash = strchr(buf, '/')) != NULL)
		*slash = '\0';
	if (inet_pton(AF_INET, buf, c->addr) == 1)
		c->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, c->addr) == 1)
		c->family = AF_INET6;
	else
		goto bad;
	c->bits = c->family == AF_INET ? 32 : 128;
	if (slash != NULL) {
		errno = 0;
		bits = strtoul(slash + 1, &end, 10);
		if (slash[1] < '0' || slash[1] > '9' || *end != '\0' ||
		    errno != 0 || bits > c->bits)
			goto bad;
		c->bits = (unsigned)bits;
	}
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

/* Whether the first bits of a and b are the same. */
static bool
prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	return rest == 0 ||
	    ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool
http_cidr_any(const struct config_cidr *c, unsigned n,
    const struct sockaddr *sa)
{
	const uint8_t *a;
	uint8_t v4[4];
	int fam = sa->sa_family;

	if (fam == AF_INET)
		a = (const uint8_t *)&((const struct sockaddr_in *)
		    (const void *)sa)->sin_addr;
	else if (fam == AF_INET6)
		a = ((const struct sockaddr_in6 *)(const void *)sa)->
		    sin6_addr.s6_addr;
	else
		return false;
	/* ::ffff:a.b.c.d is a.b.c.d: an IPv4 block must cover it. */
	if (fam == AF_INET6 && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)
	    (const void *)a)) {
		memcpy(v4, a + 12, 4);
		a = v4;
		fam = AF_INET;
	}
	for (unsigned i = 0; i < n; i++)
		if (c[i].family == fam && prefix_eq(c[i].addr, a, c[i].bits))
			return true;
	return false;
}

int
http_cb_url_host(const char *url, char *host, size_t n, unsigned *port)
{
	const char *p, *end, *at, *colon = NULL;
	size_t len;

	if (strncasecmp(url, "http://", 7) == 0) {
		p = url + 7;
		*port = 80;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		p = url + 8;
		*port = 443;
	} else
		goto bad;
	end = p + strcspn(p, "/?#");
	/* user:password@ is not part of the host. */
	for (at = end; at > p && at[-1] != '@'; at--)
		;
	if (at > p)
		p = at;
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(end - p));

		if (rb == NULL)
			goto bad;
		len = (size_t)(rb - p - 1);
		p++;
		colon = rb + 1 < end ? rb + 1 : NULL;
		if (colon != NULL && *colon != ':')
			goto bad;
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		len = (size_t)((colon != NULL ? colon : end) - p);
	}
	if (len == 0 || len >= n)
		goto bad;
	memcpy(host, p, len);
	host[len] = '\0';
	if (colon != NULL && colon + 1 < end) {
		unsigned v = 0;

		for (const char *q = colon + 1; q < end; q++) {
			if (*q < '0' || *q > '9' || (v = v * 10 +
			    (unsigned)(*q - '0')) > 65535)
				goto bad;
		}
		*port = v;
	}
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

int
http_cb_dlr_type(uint8_t state)
{
	return state == SMPP_STATE_DELIVERED ? HTTP_DLR_DELIVERED :
	    HTTP_DLR_UNDELIVERED;
}

static const char *
dlr_answer(int type)
{
	switch (type) {
	case HTTP_DLR_DELIVERED: return "DELIVRD";
	case HTTP_DLR_BUFFERED: return "BUFFRED";
	case HTTP_DLR_SMSC_ACK: return "ACK";
	case HTTP_DLR_SMSC_REJECT: return "REJECTD";
	default: return "UNDELIV";
	}
}

static const char *
dlr_status(int type)
{
	switch (type) {
	case HTTP_DLR_DELIVERED: return "delivered";
	case HTTP_DLR_BUFFERED: return "buffered";
	case HTTP_DLR_SMSC_ACK: return "accepted";
	case HTTP_DLR_SMSC_REJECT: return "rejected";
	default: return "undeliverable";
	}
}

/* Appends v URL-encoded (RFC 3986 unreserved kept) at *o; false if full. */
static bool
put_escaped(char **o, const char *end, const char *v)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *v != '\0'; v++) {
		unsigned char ch = (unsigned char)*v;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch) != NULL) {
			if (end - *o < 2)
				return false;
			*(*o)++ = (char)ch;
		} else {
			if (end - *o < 4)
				return false;
			*(*o)++ = '%';
			*(*o)++ = hex[ch >> 4];
			*(*o)++ = hex[ch & 15];
		}
	}
	return true;
}

/* What escape e stands for in buf, or NULL if it is none of Kannel's. */
static const char *
escape_value(char e, const struct http_dlr *d, char *buf, size_t n)
{
	time_t t = (time_t)d->at;
	struct tm tm;

	switch (e) {
	case 'd': snprintf(buf, n, "%d", d->type); return buf;
	case 'A': return dlr_answer(d->type);
	case 'F': return d->upstream_id;
	case 'p': return d->to;
	case 'P': return d->from;
	case 'I': snprintf(buf, n, "%" PRIu64, d->id); return buf;
	case 'T': snprintf(buf, n, "%" PRIu64, d->at); return buf;
	case 't':
		gmtime_r(&t, &tm);
		strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
		return buf;
	case '%': return "%";
	default: return NULL;
	}
}

int
http_cb_expand(const char *tmpl, const struct http_dlr *d, char *out,
    size_t n)
{
	char *o = out, *end = out + n, buf[32];
	const char *v;

	for (const char *p = tmpl; *p != '\0'; p++) {
		if (*p == '%' && p[1] != '\0' &&
		    (v = escape_value(p[1], d, buf, sizeof(buf))) != NULL) {
			/* %% is the one escape whose value is not encoded. */
			if (p[1] == '%' ? end - o < 2 : !put_escaped(&o, end, v))
				goto full;
			if (p[1] == '%')
				*o++ = '%';
			p++;
			continue;
		}
		if (end - o < 2)
			goto full;
		*o++ = *p;
	}
	*o = '\0';
	return 0;
full:
	errno = E2BIG;
	return -1;
}

char *
http_cb_receipt_json(const struct http_dlr *d)
{
	char id[24], at[32];
	time_t t = (time_t)d->at;
	struct tm tm;
	json_t *o;
	char *s;

	snprintf(id, sizeof(id), "%" PRIu64, d->id);
	gmtime_r(&t, &tm);
	strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", id, "status",
	    dlr_status(d->type), "to", d->to, "from", d->from, "at", at);
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

char *
http_cb_mo_json(uint64_t id, const char *from, const char *to,
    const char *text, const uint8_t *octets, size_t n, uint64_t at)
{
	char sid[24], when[32], *hex = NULL, *s;
	time_t t = (time_t)at;
	struct tm tm;
	json_t *o;

	snprintf(sid, sizeof(sid), "%" PRIu64, id);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_pack("{s:s,s:s,s:s,s:s}", "id", sid, "from", from, "to", to,
	    "at", when);
	if (text != NULL)
		json_object_set_new(o, "text", json_string(text));
	else {
		hex = malloc(2 * n + 1);
		for (size_t i = 0; hex != NULL && i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", octets[i]);
		if (hex != NULL) {
			hex[2 * n] = '\0';
			json_object_set_new(o, "hex", json_string(hex));
		}
	}
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(hex);
	return s;
}

unsigned
http_cb_backoff(unsigned attempt)
{
	if (attempt == 0)
		return 0;
	if (attempt > 9)
		return HTTP_CB_BACKOFF_MAX;
	return 1u << (attempt - 1) < HTTP_CB_BACKOFF_MAX ? 1u << (attempt - 1)
	    : HTTP_CB_BACKOFF_MAX;
}
