/* http.c: HTTP/1.1 request framing and parsing, response heads, form decoding. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util.h"

/*
 * The end of the header block in p[0..n): the length up to and with the
 * empty line (CRLF CRLF, or bare LFs, which RFC 9112 lets servers take),
 * or 0 if it has not come yet.
 */
static size_t
header_end(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n')
			continue;
		if (i + 1 < n && p[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static bool
is_tchar(uint8_t ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || (ch != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* The next line of p[*off..n), without its CR LF; false at the end. */
static bool
next_line(const uint8_t *p, size_t n, size_t *off, const uint8_t **line,
    size_t *len)
{
	size_t i = *off;

	if (i >= n)
		return false;
	while (i < n && p[i] != '\n')
		i++;
	*line = p + *off;
	*len = i - *off;
	if (*len > 0 && (*line)[*len - 1] == '\r')
		(*len)--;
	*off = i + 1;
	return true;
}

/* Whether the comma-separated list v[0..n) has token tok (any case). */
static bool
has_token(const uint8_t *v, size_t n, const char *tok)
{
	size_t tl = strlen(tok), i = 0;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tl && strncasecmp((const char *)v + s, tok,
		    tl) == 0)
			return true;
	}
	return false;
}

/*
 * A Content-Length value v[0..n): digits, blanks around them. -1 when it
 * is not one; a value too large to matter is SIZE_MAX.
 */
static ssize_t
content_length(const uint8_t *v, size_t n, size_t *out)
{
	size_t val = 0;
	bool digits = false;

	for (size_t k = 0; k < n; k++) {
		if (v[k] == ' ' || v[k] == '\t')
			continue;
		if (v[k] < '0' || v[k] > '9' || (digits && (v[k - 1] == ' ' ||
		    v[k - 1] == '\t')))
			return -1;
		digits = true;
		val = val > SIZE_MAX / 20 ? SIZE_MAX / 2 :
		    val * 10 + (size_t)(v[k] - '0');
	}
	if (!digits)
		return -1;
	*out = val;
	return 0;
}

/*
 * The Content-Length that the head p[0..n) gives, 0 without one (or a bad
 * one: http_parse refuses that). A Transfer-Encoding sets *te.
 */
static size_t
head_content_length(const uint8_t *p, size_t n, bool *te)
{
	const uint8_t *l;
	size_t len, off = 0, cl = 0;

	*te = false;
	while (next_line(p, n, &off, &l, &len)) {
		size_t v = 15;

		if (len > 18 && strncasecmp((const char *)l,
		    "transfer-encoding:", 18) == 0)
			*te = true;
		if (len < 15 || strncasecmp((const char *)l,
		    "content-length:", 15) != 0)
			continue;
		if (content_length(l + v, len - v, &cl) < 0)
			return 0;
	}
	return cl;
}

ssize_t
http_frame_len(const uint8_t *p, size_t n, size_t body_max)
{
	size_t end, cl;
	bool te;

	end = header_end(p, n < HTTP_HEADER_MAX + 3 ? n : HTTP_HEADER_MAX + 3);
	if (end == 0 || end > HTTP_HEADER_MAX)
		/* Too long: http_parse sees no end, says 414 or 431. */
		return n > HTTP_HEADER_MAX ? (ssize_t)n : 0;
	cl = head_content_length(p, end, &te);
	if (te || cl > body_max)
		return (ssize_t)end;
	if (n - end < cl)
		return 0;
	return (ssize_t)(end + cl);
}

/*
 * HTTP-version "HTTP/" DIGIT "." DIGIT at l[0..n): 0 for 1.0 and 1.1, 505
 * for another version (RFC 9110 15.6.6), 400 for anything else.
 */
static int
parse_version(const uint8_t *l, size_t n, struct http_req *rq)
{
	if (n != 8 || memcmp(l, "HTTP/", 5) != 0 || l[6] != '.' ||
	    l[5] < '0' || l[5] > '9' || l[7] < '0' || l[7] > '9')
		return 400;
	if (l[5] != '1' || l[7] > '1')
		return 505;
	rq->http10 = l[7] == '0';
	return 0;
}

/* The request line "METHOD SP target SP HTTP/1.x": 0 or a status. */
static int
parse_request_line(const uint8_t *l, size_t n, struct http_req *rq)
{
	size_t i = 0, m;
	int status;

	while (i < n && is_tchar(l[i]))
		i++;
	if (i == 0 || i >= sizeof(rq->method) || i >= n || l[i] != ' ')
		return 400;
	memcpy(rq->method, l, i);
	rq->method[i] = '\0';
	m = ++i;
	while (i < n && l[i] > ' ' && l[i] < 0x7f)
		i++;
	if (i == m || i >= n || l[i] != ' ')
		return 400;
	rq->path = (const char *)l + m;
	rq->pathlen = i - m;
	i++;
	if ((status = parse_version(l + i, n - i, rq)) != 0)
		return status;
	/*
	 * absolute-form: http://host/path; the path is what we serve. It
	 * does not stand in for Host, which HTTP/1.1 still requires
	 * (RFC 9112 3.2).
	 */
	if (rq->pathlen > 7 && strncasecmp(rq->path, "http://", 7) == 0) {
		const char *s = memchr(rq->path + 7, '/', rq->pathlen - 7);
		size_t skip = s != NULL ? (size_t)(s - rq->path) : rq->pathlen;

		rq->path += skip;
		rq->pathlen -= skip;
	}
	return 0;
}

/* Whether ch may stand in a reg-name or an IP-literal (RFC 3986 3.2.2). */
static bool
is_host_char(uint8_t ch, bool literal)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9'))
		return true;
	if (ch == ':')
		return literal;
	return ch != '\0' && strchr("-._~!$&'()*+,;=%", ch) != NULL;
}

/*
 * Whether the Host value v[0..n) is uri-host [ ":" port ]; an empty one
 * is allowed (RFC 9112 3.2). Percent escapes are taken as they come.
 */
static bool
host_is_valid(const uint8_t *v, size_t n)
{
	size_t i;
	bool literal = n > 0 && v[0] == '[';

	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	for (i = literal ? 1 : 0; i < n && is_host_char(v[i], literal); i++)
		;
	if (literal) {
		if (i == 1 || i >= n || v[i] != ']')
			return false;
		i++;
	}
	if (i < n && v[i] == ':')
		for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++)
			;
	return i == n;
}

/* Whether the field name l[0..i) is name (any case). */
static bool
field_is(const uint8_t *l, size_t i, const char *name)
{
	return i == strlen(name) && strncasecmp((const char *)l, name, i) == 0;
}

/* A field's value, trailing blanks off. */
static size_t
value_len(const uint8_t *v, size_t n)
{
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	return n;
}

/* One header field "name: value". */
static bool
parse_field(const uint8_t *l, size_t n, struct http_req *rq)
{
	size_t i = 0, v;

	while (i < n && is_tchar(l[i]))
		i++;
	/* No name, no colon, or space before it (RFC 9112 5.1): refused. */
	if (i == 0 || i >= n || l[i] != ':')
		return false;
	v = i + 1;
	while (v < n && (l[v] == ' ' || l[v] == '\t'))
		v++;
	for (size_t k = v; k < n; k++)
		if ((l[k] < ' ' && l[k] != '\t') || l[k] == 0x7f)
			return false;
	if (field_is(l, i, "host")) {
		rq->hosts++;
		if (!host_is_valid(l + v, n - v))
			rq->bad_host = true;
	} else if (field_is(l, i, "connection")) {
		if (has_token(l + v, n - v, "close"))
			rq->close = true;
		if (has_token(l + v, n - v, "keep-alive"))
			rq->keep_alive = true;
	} else if (field_is(l, i, "content-length")) {
		if (content_length(l + v, n - v, &rq->content_length) < 0)
			return false;
		rq->has_body = rq->content_length > 0;
	} else if (field_is(l, i, "transfer-encoding")) {
		rq->chunked = rq->has_body = true;
	} else if (field_is(l, i, "content-type")) {
		rq->ctype = (const char *)l + v;
		rq->ctypelen = value_len(l + v, n - v);
	} else if (field_is(l, i, "authorization")) {
		rq->auth = (const char *)l + v;
		rq->authlen = value_len(l + v, n - v);
	}
	return true;
}

/* A head that never ended: its request line too long (414), or the rest. */
static int
too_long(const uint8_t *p, size_t n)
{
	size_t lim = n < HTTP_HEADER_MAX ? n : HTTP_HEADER_MAX;

	return memchr(p, '\n', lim) == NULL ? 414 : 431;
}

int
http_parse(const uint8_t *p, size_t n, size_t body_max, struct http_req *rq)
{
	const uint8_t *l;
	size_t len, off = 0, end;
	int status;

	memset(rq, 0, sizeof(*rq));
	end = header_end(p, n < HTTP_HEADER_MAX + 3 ? n : HTTP_HEADER_MAX + 3);
	if (end == 0 || end > HTTP_HEADER_MAX)
		return too_long(p, n);
	/* RFC 9112 2.2: empty lines before the request line are skipped. */
	do {
		if (!next_line(p, end, &off, &l, &len))
			return 400;
	} while (len == 0);
	if ((status = parse_request_line(l, len, rq)) != 0)
		return status;
	while (next_line(p, end, &off, &l, &len) && len > 0) {
		if (l[0] == ' ' || l[0] == '\t')
			return 400;		/* obsolete line folding */
		if (!parse_field(l, len, rq))
			return 400;
	}
	/* RFC 9112 3.2: one valid Host, and HTTP/1.1 must send it. */
	if (rq->hosts > 1 || rq->bad_host || (!rq->http10 && rq->hosts == 0))
		return 400;
	if (rq->http10 && !rq->keep_alive)
		rq->close = true;
	if (rq->chunked)
		return 411;
	if (rq->content_length > body_max)
		return 413;
	if (n - end != rq->content_length)
		return 400;
	rq->body = p + end;
	return 0;
}

const char *
http_status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* The statuses the listeners answer, in http_status_index's order. */
static const int statuses[HTTP_STATUS_INDEXES - 1] = {
	200, 201, 202, 400, 401, 403, 404, 405, 408, 411, 413, 414, 415, 429,
	431, 500, 503, 505, 204,
};

unsigned
http_status_index(int status)
{
	for (unsigned i = 0; i < HTTP_STATUS_INDEXES - 1; i++)
		if (statuses[i] == status)
			return i;
	return HTTP_STATUS_INDEXES - 1;
}

const char *
http_status_label(unsigned index)
{
	static const char *const labels[HTTP_STATUS_INDEXES] = {
		"200", "201", "202", "400", "401", "403", "404", "405", "408",
		"411", "413", "414", "415", "429", "431", "500", "503", "505",
		"204", "other",
	};

	return index < HTTP_STATUS_INDEXES ? labels[index] : "other";
}

const char *
http_endpoint_label(unsigned ep)
{
	static const char *const labels[HTTP_EP_N] = { "sendsms",
	    "messages_post", "messages_get", "other" };

	return ep < HTTP_EP_N ? labels[ep] : "other";
}

size_t
http_head(char *out, size_t outsz, int status, const char *type, size_t len,
    const char *connection, const char *extra)
{
	char date[64];
	struct tm tm;
	time_t now = time(NULL);
	int n;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	n = snprintf(out, outsz, "HTTP/1.1 %d %s\r\n"
	    "Date: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s%s"
	    "\r\n", status, http_status_text(status), date, type, len,
	    connection != NULL ? "Connection: " : "",
	    connection != NULL ? connection : "",
	    connection != NULL ? "\r\n" : "", extra != NULL ? extra : "");
	return n < 0 || (size_t)n >= outsz ? 0 : (size_t)n;
}

bool
http_path_is(const char *path, size_t n, const char *name)
{
	size_t k = strlen(name);

	return n >= k && memcmp(path, name, k) == 0 && (n == k ||
	    path[k] == '?');
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool
http_unhex(const char *h, size_t n, uint8_t *out)
{
	if (n % 2 != 0)
		return false;
	for (size_t i = 0; i < n; i += 2) {
		int a = hexval(h[i]), b = hexval(h[i + 1]);

		if (a < 0 || b < 0)
			return false;
		out[i / 2] = (uint8_t)(a << 4 | b);
	}
	return true;
}

/* Decodes s[0..n) into out (room n + 1): its length, or -1 EILSEQ. */
static ssize_t
form_decode(const char *s, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+')
			out[o++] = ' ';
		else if (s[i] != '%')
			out[o++] = s[i];
		else if (i + 2 < n && hexval(s[i + 1]) >= 0 &&
		    hexval(s[i + 2]) >= 0) {
			out[o++] = (char)(hexval(s[i + 1]) << 4 |
			    hexval(s[i + 2]));
			i += 2;
		} else
			return -1;
	}
	out[o] = '\0';
	return (ssize_t)o;
}

/* Decodes one pair s[0..n) into f at *mem. */
static int
form_pair(const char *s, size_t n, struct http_form *f, char **mem)
{
	const char *eq = memchr(s, '=', n);
	size_t nl = eq != NULL ? (size_t)(eq - s) : n;
	ssize_t k;

	if (f->n >= HTTP_FORM_MAX) {
		errno = E2BIG;
		return -1;
	}
	f->f[f->n].name = *mem;
	if ((k = form_decode(s, nl, *mem)) < 0 ||
	    memchr(*mem, '\0', (size_t)k) != NULL) {
		errno = EILSEQ;
		return -1;
	}
	*mem += k + 1;
	f->f[f->n].value = *mem;
	if (eq == NULL)
		k = 0, **mem = '\0';
	else if ((k = form_decode(eq + 1, n - nl - 1, *mem)) < 0) {
		errno = EILSEQ;
		return -1;
	}
	f->f[f->n++].len = (size_t)k;
	*mem += k + 1;
	return 0;
}

int
http_form_parse(const char *s, size_t n, struct http_form *f)
{
	char *mem;
	size_t i = 0;

	memset(f, 0, sizeof(*f));
	/* Decoding never grows: the text, and a NUL after each of 2 parts. */
	f->mem = mem = xmalloc(n + 2 * HTTP_FORM_MAX + 2);
	while (i < n) {
		const char *amp = memchr(s + i, '&', n - i);
		size_t e = amp != NULL ? (size_t)(amp - s) : n;

		if (e > i && form_pair(s + i, e - i, f, &mem) < 0) {
			int err = errno;

			f->n = 0;
			errno = err;
			return -1;
		}
		i = e + 1;
	}
	return 0;
}

void
http_form_fini(struct http_form *f)
{
	free(f->mem);
	f->mem = NULL;
	f->n = 0;
}

const char *
http_form_get(const struct http_form *f, const char *name, size_t *len)
{
	for (unsigned i = 0; i < f->n; i++)
		if (strcmp(f->f[i].name, name) == 0) {
			if (len != NULL)
				*len = f->f[i].len;
			return f->f[i].value;
		}
	return NULL;
}

bool
http_url_valid(const char *s, size_t n)
{
	size_t i;

	if (n > 7 && strncasecmp(s, "http://", 7) == 0)
		i = 7;
	else if (n > 8 && strncasecmp(s, "https://", 8) == 0)
		i = 8;
	else
		return false;
	/* A host: something before the path, port, query or fragment. */
	if (strchr("/:?#@", s[i]) != NULL)
		return false;
	for (; i < n; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f)
			return false;
	return true;
}

static int
b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 s[0..n) into out (room outsz): its length, or -1. */
static ssize_t
b64_decode(const char *s, size_t n, char *out, size_t outsz)
{
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t o = 0;

	while (n > 0 && s[n - 1] == '=')
		n--;
	for (size_t i = 0; i < n; i++) {
		int v = b64val(s[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= outsz)
				return -1;
			out[o++] = (char)(acc >> bits & 0xff);
		}
	}
	return (ssize_t)o;
}

bool
http_basic_auth(const char *v, size_t n, char *user, size_t usersz,
    char *pass, size_t passsz)
{
	char buf[256], *colon;
	ssize_t k;
	size_t ul;

	if (n < 6 || strncasecmp(v, "basic ", 6) != 0)
		return false;
	v += 6, n -= 6;
	while (n > 0 && *v == ' ')
		v++, n--;
	if ((k = b64_decode(v, n, buf, sizeof(buf) - 1)) < 0)
		return false;
	buf[k] = '\0';
	if ((colon = memchr(buf, ':', (size_t)k)) == NULL ||
	    memchr(buf, '\0', (size_t)k) != NULL)
		return false;
	ul = (size_t)(colon - buf);
	if (ul >= usersz || (size_t)k - ul - 1 >= passsz)
		return false;
	memcpy(user, buf, ul);
	user[ul] = '\0';
	memcpy(pass, colon + 1, (size_t)k - ul - 1);
	pass[(size_t)k - ul - 1] = '\0';
	return true;
}
