/*
 * http_send.h: a request to send a message over HTTP, read from Kannel's
 * sendsms fields or from the JSON API's body, checked and with its text
 * converted, before anything is sent. Pure code: any thread.
 */
#ifndef ECHOROUTERD_HTTP_SEND_H
#define ECHOROUTERD_HTTP_SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "route.h"

struct http_form;

#define HTTP_SEND_TO_MAX	100	/* recipients of one request */
#define HTTP_SEND_URL_MAX	2048	/* dlr-url, receipt_url */
#define HTTP_SEND_CRED_MAX	64	/* user name, password */

/*
 * What to send. text is UTF-8 (the recipient's edge converts it) unless
 * coded: then it is octets in data_coding, a UDH first when udhi, as an
 * SMPP client would send them.
 */
struct http_send {
	char	user[HTTP_SEND_CRED_MAX + 1];
	char	pass[HTTP_SEND_CRED_MAX + 1];
	bool	has_user;		/* user given (Kannel's fields) */
	char	from[ROUTE_ADDR_MAX + 1];	/* "": the account's id */
	unsigned nto;
	char	to[HTTP_SEND_TO_MAX][ROUTE_ADDR_MAX + 1];
	uint8_t	*text;			/* malloc'd; len bytes, a NUL after */
	size_t	len;
	bool	coded;
	bool	udhi;
	uint8_t	data_coding;
	int	coding;			/* 0, 1, 2 as asked; -1 not given */
	uint64_t due;			/* wall clock s; 0 now */
	uint64_t expires;		/* wall clock s; 0 the default */
	int	dlr_mask;		/* -1 not given */
	char	url[HTTP_SEND_URL_MAX + 1];	/* dlr-url / receipt_url */
	char	err[160];		/* why it was refused */
};

/*
 * Reads Kannel's sendsms fields from f into s (zeroed first), now being
 * the wall clock. username/user and password/pass are read first, whatever
 * else is wrong, for the caller to check before anything else (Kannel
 * answers bad credentials first). Returns 0, or the HTTP status (400) to
 * refuse the request with, s->err then Kannel's text for it.
 */
int	http_send_form(const struct http_form *f, uint64_t now,
	    struct http_send *s);

/*
 * Reads the JSON API's body[0..n) into s (zeroed first): an object with
 * "to" (a string or an array of them), "from", "text" or "hex", and
 * optionally "coding", "validity" (s), "schedule" (Unix time or
 * "YYYY-MM-DDTHH:MM:SSZ") and "receipt_url". Returns 0, or the HTTP status
 * (400) with s->err saying why.
 */
int	http_send_json(const char *body, size_t n, uint64_t now,
	    struct http_send *s);

/*
 * The SMS parts s's text takes at a recipient with the default splitting
 * (GSM 03.38 when it fits, else UCS-2; 153 septets / 67 units a part);
 * coded octets go as they are: 1. -1 with errno EILSEQ if not text.
 */
int	http_send_parts(const struct http_send *s);

/* Frees what s holds (its text); s itself is the caller's. */
void	http_send_fini(struct http_send *s);

#endif
