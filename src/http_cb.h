/*
 * http_cb.h: what the callbacks an HTTP application asks for are made of:
 * address blocks (http.callback_allow), the host of a URL, Kannel's
 * dlr-url escapes, the JSON receipt, and the retry schedule. Pure code,
 * no I/O: any thread.
 */
#ifndef ECHOROUTERD_HTTP_CB_H
#define ECHOROUTERD_HTTP_CB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

/* Kannel's dlr-mask bits, and the %d a receipt of each type carries. */
enum {
	HTTP_DLR_DELIVERED = 1,
	HTTP_DLR_UNDELIVERED = 2,
	HTTP_DLR_BUFFERED = 4,
	HTTP_DLR_SMSC_ACK = 8,
	HTTP_DLR_SMSC_REJECT = 16,
};

/* A dlr-url once expanded, at most. */
#define HTTP_CB_URL_MAX		4096

/* The longest wait between two attempts, s. */
#define HTTP_CB_BACKOFF_MAX	300

/* One receipt, as the escapes and the JSON body see it. */
struct http_dlr {
	int	type;			/* HTTP_DLR_* */
	uint64_t id;			/* our message id */
	uint64_t at;			/* wall clock s of the event */
	const char *to;
	const char *from;
	const char *upstream_id;	/* "" none */
};

/*
 * Reads "a.b.c.d/n", "x::y/n" or an address alone (all its bits) into c.
 * 0, or -1 with errno EINVAL.
 */
int	http_cidr_parse(const char *s, struct config_cidr *c);

/* Whether sa (AF_INET or AF_INET6) is in one of the n blocks of c. */
bool	http_cidr_any(const struct config_cidr *c, unsigned n,
	    const struct sockaddr *sa);

/*
 * The host of url (an http:// or https:// URL) into host (size n, IPv6
 * without its brackets) and its port (the scheme's when none). 0, or -1
 * with errno EINVAL.
 */
int	http_cb_url_host(const char *url, char *host, size_t n, unsigned *port);

/*
 * tmpl with Kannel's escapes expanded from d into out (size n): %d type,
 * %A answer (DELIVRD, UNDELIV, BUFFRED, ACK, REJECTD), %F upstream id,
 * %p to, %P from, %t time (YYYY-MM-DD HH:MM:SS, UTC), %T time (Unix),
 * %I our id, %% a %; values URL-encoded. Any other escape is kept as it
 * is. 0, or -1 with errno E2BIG when it does not fit.
 */
int	http_cb_expand(const char *tmpl, const struct http_dlr *d, char *out,
	    size_t n);

/*
 * The JSON receipt for d: {"id", "status", "to", "from", "at"}; status
 * "delivered", "undeliverable", "buffered", "accepted" or "rejected", at
 * "YYYY-MM-DDTHH:MM:SSZ". malloc'd.
 */
char	*http_cb_receipt_json(const struct http_dlr *d);

/*
 * The JSON body posted to an account's mo_url: {"id", "from", "to",
 * "text", "at"}, or "hex" (the octets) in place of "text" when text is
 * NULL. malloc'd.
 */
char	*http_cb_mo_json(uint64_t id, const char *from, const char *to,
	    const char *text, const uint8_t *octets, size_t n, uint64_t at);

/* Kannel's dlr type for an SMPP message_state (smpp_receipt.h). */
int	http_cb_dlr_type(uint8_t state);

/*
 * Seconds before retry attempt (1: the first retry): 1, 2, 4, ... up to
 * HTTP_CB_BACKOFF_MAX.
 */
unsigned http_cb_backoff(unsigned attempt);

#endif
