/*
 * http.h: HTTP/1.1 requests as the daemon's listeners read them (the
 * metrics and http protocols): framing, the request line and the fields we
 * use, response heads, and form (query string) decoding. Pure code, no
 * I/O, no global state: any thread.
 */
#ifndef ECHOROUTERD_HTTP_H
#define ECHOROUTERD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A request's head (request line and fields) at most; over it 431/414. */
#define HTTP_HEADER_MAX		8192

/* What a request asked, as far as we care. Pointers are into the frame. */
struct http_req {
	char	method[16];
	bool	http10;
	unsigned hosts;			/* Host fields */
	bool	bad_host;		/* a Host value that is no uri-host */
	bool	close;			/* close after answering */
	bool	keep_alive;		/* Connection: keep-alive */
	bool	chunked;		/* Transfer-Encoding: we take none */
	bool	has_body;		/* Content-Length over 0, or chunked */
	size_t	content_length;
	const char *path;		/* the target, query included */
	size_t	pathlen;
	const char *ctype;		/* Content-Type's value; NULL none */
	size_t	ctypelen;
	const char *auth;		/* Authorization's value; NULL none */
	size_t	authlen;
	const uint8_t *body;		/* content_length bytes, in the frame */
};

/*
 * The length of the first request in p[0..n): its head and, when it says
 * so, a body of Content-Length bytes up to body_max. 0 while more is
 * needed. A head over HTTP_HEADER_MAX hands over everything there is, and
 * a body over body_max (or a Transfer-Encoding) only the head: http_parse
 * then gives the status to refuse the request with, and the caller
 * closes the connection after answering. Never -1: every refusal is an
 * answer.
 */
ssize_t	http_frame_len(const uint8_t *p, size_t n, size_t body_max);

/*
 * Parses a frame that http_frame_len(p, n, body_max) gave. Returns 0, or
 * the HTTP status to refuse the request with: 400 malformed, 411 a
 * Transfer-Encoding (chunked bodies are not taken), 413 a body over
 * body_max, 414 a request line over HTTP_HEADER_MAX, 431 a head over it,
 * 505 another HTTP version. After a refusal the connection must close.
 */
int	http_parse(const uint8_t *p, size_t n, size_t body_max,
	    struct http_req *rq);

/*
 * What /metrics counts the http listener's requests by: the endpoint
 * (enum http_endpoint) and the status (http_status_index), and their
 * labels.
 */
enum http_endpoint {
	HTTP_EP_SENDSMS,		/* /cgi-bin/sendsms */
	HTTP_EP_SEND,			/* POST /api/v1/messages */
	HTTP_EP_QUERY,			/* GET /api/v1/messages/<id> */
	HTTP_EP_OTHER,			/* anything else, and bad requests */
	HTTP_EP_N
};

#define HTTP_STATUS_INDEXES	20	/* 19 statuses, then "other" */

const char *http_endpoint_label(unsigned ep);
unsigned http_status_index(int status);
/* The status of an index, as text ("202"; "other" for the last). */
const char *http_status_label(unsigned index);

/* The reason phrase for status ("Not Found"), "Error" when unknown. */
const char *http_status_text(int status);

/*
 * Writes the head of a response of len body bytes at out (room outsz,
 * 512 is plenty): status line, Date, Content-Type, Content-Length, then
 * "Connection: <connection>" unless connection is NULL, then extra (whole
 * header lines with their CR LF, or NULL), then the empty line. Returns
 * its length, or 0 when it did not fit.
 */
size_t	http_head(char *out, size_t outsz, int status, const char *type,
	    size_t len, const char *connection, const char *extra);

/* Whether the target path[0..n) is name, with or without a query. */
bool	http_path_is(const char *path, size_t n, const char *name);

/*
 * Hex digits h[0..n) (either case) as octets at out (room n / 2): false
 * when n is odd or one is not a hex digit (out then partly written).
 */
bool	http_unhex(const char *h, size_t n, uint8_t *out);

/*
 * Decoded form fields: application/x-www-form-urlencoded, as a query
 * string or a body. Owns one allocation for every name and value.
 */
#define HTTP_FORM_MAX	64		/* fields at most */

struct http_form {
	unsigned n;
	struct {
		const char *name;
		const char *value;	/* NUL-terminated; may hold NULs */
		size_t	len;		/* value's bytes */
	} f[HTTP_FORM_MAX];
	char	*mem;
};

/*
 * Decodes s[0..n) ('&'-separated name=value pairs, '+' a space, %XX an
 * octet) into f. An empty pair is skipped; a name without '=' has an
 * empty value. 0, or -1 with errno EILSEQ (a '%' not followed by two hex
 * digits, or a NUL in a name), E2BIG (over HTTP_FORM_MAX fields). f is
 * empty after a failure; http_form_fini frees it either way.
 */
int	http_form_parse(const char *s, size_t n, struct http_form *f);
void	http_form_fini(struct http_form *f);

/*
 * The value of the first field called name (a later repetition is
 * ignored, as Kannel does), with its length in *len; NULL when absent.
 */
const char *http_form_get(const struct http_form *f, const char *name,
	    size_t *len);

/*
 * Whether s[0..n) is an http or https URL with a host: "http://" or
 * "https://" (any case), a host of at least one character, then
 * anything printable ASCII but space. What the daemon will post to
 * later; an application's %-escapes (Kannel's %d, ...) pass.
 */
bool	http_url_valid(const char *s, size_t n);

/*
 * Decodes an Authorization "Basic" value v[0..n) into user and pass
 * (NUL-terminated, at most usersz-1 and passsz-1 bytes). false when it
 * is not Basic, not base64, has no ':' or does not fit.
 */
bool	http_basic_auth(const char *v, size_t n, char *user, size_t usersz,
	    char *pass, size_t passsz);

#endif
