/*
 * http_out.h: the "http-out" service thread, which posts what HTTP
 * applications asked to be told (receipts to a dlr-url or receipt_url)
 * and the messages for an HTTP-only account (its mo_url) with libcurl's
 * multi interface. Reactors and the store never call
 * libcurl: they post to its mailbox through these functions, and it
 * keeps every receipt awaited and every post pending, bounded by
 * http.callback_queue. Built with WITH_CURL; without it no callback is
 * taken (http_out_check refuses every URL).
 */
#ifndef ECHOROUTERD_HTTP_OUT_H
#define ECHOROUTERD_HTTP_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mailbox.h"

struct config;
struct msg;

/* What /metrics shows. */
struct http_out_stats {
	uint64_t sent;		/* answered 2xx */
	uint64_t failed;	/* given up: retries spent, or refused */
	uint64_t retried;	/* attempts after a failed one */
	uint64_t dropped;	/* not posted: over callback_queue */
	uint64_t pending;	/* posts not yet answered */
	uint64_t awaited;	/* messages whose receipt is awaited */
};

/* A receipt request for message id, as an HTTP send asked. */
struct http_out_want {
	uint64_t id;
	const char *url;	/* dlr-url (escapes) or receipt_url (JSON) */
	bool	json;
	int	mask;		/* Kannel's dlr-mask */
	const char *to;
	const char *from;
	uint64_t deadline;	/* wall clock s: forgotten after; 0 a day */
};

/*
 * Where pending posts are kept so that a restart posts them (the store):
 * keep(id, url, body, unwant) once a post is made (unwant: the receipt
 * awaited it ends, forgotten with it, else 0), done(id) once it was
 * answered or given up. The main thread, before http_out_start.
 */
struct http_out_keep {
	void	(*keep)(uint64_t id, const char *url, const char *body,
		    uint64_t unwant);
	void	(*done)(uint64_t id);
	/* The same for receipts awaited, by message id. */
	void	(*want)(const struct http_out_want *w);
	void	(*unwant)(uint64_t id);
};

#if ER_WITH_CURL
/*
 * Makes the thread with cf's settings (a reference is taken). 0, or -1
 * with errno. The main thread, before any reactor runs.
 */
int	http_out_open(const struct config *cf);
/* Starts it. 0, or -1 with errno. */
int	http_out_start(void);
/* Keeps what is pending with k (the store). Before http_out_start. */
void	http_out_keep_with(const struct http_out_keep *k);

/*
 * Takes a post kept before a restart (id, url, body NULL: a GET), to post
 * again. 0. The main thread, before http_out_start.
 */
int	http_out_adopt(uint64_t id, const char *url, const char *body,
	    void *arg);
/* The same for a receipt awaited (room is taken, past the bound too). */
int	http_out_adopt_want(const struct http_out_want *w, void *arg);

/*
 * The posts kept (http_out_keep.keep) with ids up to upto are committed,
 * or could not be written and go from memory: they may be made now. A
 * kept post is not made before, so that one made is one a kill -9 keeps.
 * The store thread that keeps them; until http_out_close.
 */
void	http_out_kept(uint64_t upto);

/*
 * Ends the thread: posts still pending are dropped (counted), and stay
 * kept (http_out_keep_with) for the next start. Tasks posted after it
 * wait for http_out_close, which cancels them. The main thread, before
 * what it keeps posts in stops.
 */
void	http_out_stop(void);
/* Frees what is left. The main thread, once nothing posts to it. */
void	http_out_close(void);
/* A new configuration for the thread's settings. The main thread. */
void	http_out_reload(const struct config *cf);
/* A port this daemon listens on: callbacks to it here are refused. */
void	http_out_own_port(unsigned port);

/*
 * Whether url may be called back now: an http(s) URL whose host, when it
 * is an address, is in cf's http.callback_allow and not one of this
 * daemon's listeners (a host name is checked when it is resolved). 0, or
 * -1 with why (size n) saying why. Any thread.
 */
int	http_out_check(const struct config *cf, const char *url, char *why,
	    size_t n);

/*
 * Takes room for n receipts awaited: false when http.callback_queue is
 * reached (then nothing is taken). Each room is given back by the
 * thread once the receipt went or was forgotten. Any thread.
 */
bool	http_out_admit(const struct config *cf, unsigned n);

/* Awaits receipts for w->id (room taken by http_out_admit). Any thread. */
void	http_out_want(const struct http_out_want *w);

/*
 * The verdict for message id, which has a receipt awaited: stored (mask
 * 4: "buffered"), or refused (nothing will come: forgotten). Any thread.
 */
void	http_out_verdict(uint64_t id, bool ok, bool stored);

/*
 * orig's receipt (SMPP message_state state at wall clock at), when orig
 * is an HTTP send that awaits one (MSG_F_HTTP_RCPT): posted, and true;
 * false otherwise. Any thread.
 */
bool	http_out_receipt(const struct msg *orig, uint8_t state, uint64_t at);

/*
 * The same for our message id, known to be an HTTP send that awaits a
 * receipt (the receipt map's entry says so). Any thread.
 */
bool	http_out_receipt_of(uint64_t id, uint8_t state, uint64_t at);

/* The longest SMSC message id kept for a receipt's %F. */
#define HTTP_OUT_SMSC_ID_MAX	64

/*
 * An SMS centre took (accepted) or refused for good message id, an HTTP
 * send that awaits a receipt (MSG_F_HTTP_RCPT), at wall clock at: dlr-mask
 * 8 ("SMSC ack") or 16 ("SMSC reject"); smsc_id is the centre's id for it
 * (Kannel's %F, in this and later receipts; "" none). Any thread.
 */
void	http_out_smsc(uint64_t id, bool accepted, const char *smsc_id,
	    uint64_t at);

/*
 * Posts m, a message for an account with no session but a mo_url, to
 * url as JSON. Once the application answered 2xx, or the post was given
 * up, m (m->message_state the SMPP state: delivered, undeliverable) goes
 * back to its sender's reactor as the task receipt (which makes the
 * sender's receipt, if it asked for one). Takes m. MSG_OK once queued;
 * MSG_FULL past http.callback_queue. The reactor that sends m.
 */
int	http_out_mo(struct msg *m, const char *url, mailbox_task_fn *receipt);

/* Whether the thread is there to take posts. Any thread. */
bool	http_out_on(void);

void	http_out_get_stats(struct http_out_stats *st);
#else
static inline int http_out_open(const struct config *cf)
{ (void)cf; return 0; }
static inline int http_out_start(void) { return 0; }
static inline void http_out_stop(void) { }
static inline void http_out_keep_with(const struct http_out_keep *k)
{ (void)k; }
static inline int http_out_adopt(uint64_t id, const char *url,
    const char *body, void *arg)
{ (void)id; (void)url; (void)body; (void)arg; return 0; }
static inline int http_out_adopt_want(const struct http_out_want *w,
    void *arg)
{ (void)w; (void)arg; return 0; }
static inline void http_out_kept(uint64_t upto) { (void)upto; }
static inline void http_out_close(void) { }
static inline void http_out_reload(const struct config *cf) { (void)cf; }
static inline void http_out_own_port(unsigned port) { (void)port; }
static inline int http_out_check(const struct config *cf, const char *url,
    char *why, size_t n)
{
	(void)cf;
	(void)url;
	snprintf(why, n, "this build posts no callbacks (WITH_CURL=no)");
	return -1;
}
static inline bool http_out_admit(const struct config *cf, unsigned n)
{ (void)cf; (void)n; return false; }
static inline void http_out_want(const struct http_out_want *w) { (void)w; }
static inline bool
http_out_receipt_of(uint64_t id, uint8_t state, uint64_t at)
{
	(void)id;
	(void)state;
	(void)at;
	return false;
}
static inline void http_out_verdict(uint64_t id, bool ok, bool stored)
{ (void)id; (void)ok; (void)stored; }
static inline void http_out_smsc(uint64_t id, bool accepted,
    const char *smsc_id, uint64_t at)
{ (void)id; (void)accepted; (void)smsc_id; (void)at; }
static inline bool http_out_receipt(const struct msg *orig, uint8_t state,
    uint64_t at)
{ (void)orig; (void)state; (void)at; return false; }
static inline int http_out_mo(struct msg *m, const char *url,
    mailbox_task_fn *receipt)
{ (void)url; (void)receipt; free(m); return -1; }
static inline bool http_out_on(void) { return false; }
static inline void http_out_get_stats(struct http_out_stats *st)
{ memset(st, 0, sizeof(*st)); }
#endif

#endif
