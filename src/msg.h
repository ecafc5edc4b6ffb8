/*
 * msg.h: a message on its way through the daemon: its fields, its text,
 * the verdict it carries back, who sent it, and message ids. Codecs,
 * store backends and receipts depend on this, not on the routing engine
 * (deliver.h), which moves messages between kinds of destination.
 */
#ifndef ECHOROUTERD_MSG_H
#define ECHOROUTERD_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handle.h"
#include "mailbox.h"
#include "route.h"

struct reactor;
struct store_acct;

enum msg_verdict {
	MSG_PENDING = 0,	/* posted to another reactor; answer follows */
	MSG_OK,			/* queued on the recipient's connection */
	MSG_NO_ROUTE,		/* nobody owns the address (or it left) */
	MSG_BUSY,	/* the recipient's output is over its watermark */
	MSG_REFUSED,		/* the recipient's queue for it is full */
	MSG_UNFIT,		/* the recipient's protocol cannot carry it */
	MSG_FULL,		/* the store is full (or cannot write) */
	/*
	 * The recipient would only hold it in memory (behind a full SMPP
	 * window): its account's store takes it. Never reaches a sender.
	 */
	MSG_STORE,
	/*
	 * It needs another node and the cluster cannot be reached (or did not
	 * answer in time): a temporary error, as a full store is.
	 */
	MSG_UNAVAILABLE,
	/*
	 * The store's file was removed or replaced under the daemon: nothing
	 * is stored until a restart.
	 */
	MSG_STORE_LOST,
	/*
	 * The recipient's protocol keeps it (one part of a message it joins
	 * before delivery) and reports on it itself: its receipt, or (from
	 * the store) its outcome. The sender hears MSG_OK; only
	 * on_deliver returns it.
	 */
	MSG_HELD,
	/*
	 * Text the recipient would take as more parts than its max_parts
	 * allows: refused, as MSG_UNFIT is, with its own reason.
	 */
	MSG_TOO_LONG,
	/*
	 * An upstream SMS centre refused it for good: its command_status is
	 * the message's status.
	 */
	MSG_REJECTED,
	/*
	 * It is for an upstream that has no session to take it now (none
	 * bound, or the message waited past response_timeout): a temporary
	 * error.
	 */
	MSG_UPSTREAM_DOWN,
};

/* A message's flags (struct msg's flags; deliver_send reads most). */
enum {
	MSG_F_PREFIX_FIRST = 1 << 0,	/* routes before logged-in owners */
	MSG_F_EXACT = 1 << 1,		/* only the owner of the address */
	MSG_F_NO_VERDICT = 1 << 2,	/* nobody waits for the verdict */
	MSG_F_RECEIPT = 1 << 3,		/* a delivery receipt */
	MSG_F_UMR = 1 << 4,		/* user_message_reference is set */
	MSG_F_SAR = 1 << 5,		/* the sar_* fields are set */
	MSG_F_LINE_TEXT = 1 << 6,	/* text checked fit for a line */
	MSG_F_STORED = 1 << 7,	/* from the store: tell it the outcome */
	/* The store's, delivered by another node: that node sends receipts. */
	MSG_F_VIA_NODE = 1 << 8,
	/*
	 * The text is the octets an SMPP client sent, in data_coding (with
	 * its UDH when esm_class says so), not UTF-8: a line client's edge
	 * decodes it. Data coding 0 is the sender account's alphabet: GSM
	 * 03.38, or what the next two say.
	 */
	MSG_F_CODED = 1 << 9,
	MSG_F_DC0_LATIN1 = 1 << 10,
	MSG_F_DC0_IA5 = 1 << 11,
	/* An HTTP send whose receipt goes to its URL (http_out.h). */
	MSG_F_HTTP_RCPT = 1 << 12,
	/*
	 * Sent by a line client: the router protocol has no query, so the
	 * store keeps no final state for it (store_final_kept).
	 */
	MSG_F_LINE_CLIENT = 1 << 13,
	/*
	 * Held in another node's store, which waits for its verdict: it goes
	 * as a stored message would (MSG_F_STORED here too), and its verdict
	 * waits for what its recipient made of it (deliver_outcome), so that
	 * it leaves that store only once the recipient has it.
	 */
	MSG_F_NODE_HELD = 1 << 14,
};

/* The flags that tell how to read a message's text. */
#define MSG_F_CODING	(MSG_F_CODED | MSG_F_DC0_LATIN1 | MSG_F_DC0_IA5)

#define MSG_NODE_MAX	32	/* a node name's bytes (cluster.node) */

/*
 * Kinds of place a message comes from or goes to (deliver.h): who sent it,
 * and so who hears its verdict, is a kind plus that kind's own address in
 * the message. A route owner's kind (route.h) is one of these too.
 */
enum msg_kind {
	MSG_KIND_CONN = 0,	/* a connection of ours: sender (a handle) */
	MSG_KIND_NONE,		/* nobody waits for a verdict */
	MSG_KIND_STORE,		/* this node's store: store_acct */
	MSG_KIND_NODE,		/* another node: remote_node, remote_req */
	MSG_KIND_UPSTREAM,	/* an upstream SMS centre (upstream.h) */
	MSG_KIND_MAX = 8,	/* room for kinds to come */
};

/*
 * What became of a message a kind handed out to a session here (the
 * store's, MSG_F_STORED, or another node's store's, MSG_F_NODE_HELD), as
 * the recipient's protocol tells it back (deliver_outcome).
 */
enum msg_outcome {
	MSG_OUT_DELIVERED = 0,	/* the recipient has it: it leaves the store */
	MSG_OUT_RETRY,		/* a temporary error: again later, backing off */
	MSG_OUT_RETURNED,	/* not tried (no room, session gone): again soon */
	MSG_OUT_FAILED,		/* a permanent error: it leaves, UNDELIV receipt */
	/*
	 * Written to the socket, not yet acknowledged by the peer's TCP: out
	 * of the account's window (the next go out), still kept; DELIVERED
	 * or RETURNED follows.
	 */
	MSG_OUT_WRITTEN,
};

/* A held message's state: SMPP message_state (SMPP 3.4 section 5.2.28). */
enum msg_state {
	MSG_STATE_ENROUTE = 1,
	MSG_STATE_DELIVERED = 2,
	MSG_STATE_EXPIRED = 3,
	MSG_STATE_DELETED = 4,
	MSG_STATE_UNDELIVERABLE = 5,
};

/* SMPP query_sm, cancel_sm, replace_sm on held messages. */
enum msg_req_kind {
	MSG_REQ_QUERY,
	MSG_REQ_CANCEL,
	MSG_REQ_REPLACE,
};

/*
 * A request from a session on messages a kind holds (deliver_request): the
 * kind fills in the answer and posts it back to conn's reactor, where
 * done(owner reactor, req, status) runs (MAILBOX_CANCELLED: nobody is left
 * to answer; free only). The caller allocates it (with room for text) and
 * done frees it.
 */
struct msg_req {
	struct mailbox_task task;
	enum msg_req_kind kind;
	struct conn_handle conn;
	mailbox_task_fn *done;
	uint32_t seq;			/* the request's sequence_number */
	char	submitter[65];		/* the binder's system_id */
	uint64_t id;			/* message_id; 0: cancel by address */
	char	dst[65];		/* cancel: the destination (normalised) */
	char	src[65];		/* cancel, query: source_addr given */
	/* replace: what changes (0 / NULL: unchanged) */
	uint64_t due;
	uint64_t expires;
	uint8_t	registered_delivery;
	bool	has_text;
	unsigned shard;			/* the store's shard asked now */
	/* the answer */
	bool	ok;
	uint8_t	state;			/* enum msg_state */
	uint64_t final_date;		/* wall clock s; 0 none */
	size_t	len;
	uint8_t	text[];			/* replace: the new text */
};

/*
 * A message on its way. It travels from the sender's reactor to the
 * recipient's and back (for the verdict) as one allocation, posted through
 * the mailboxes; whoever holds it owns it. msg_new zeroes what comes
 * before src_addr and empties the strings: keep every number field above
 * src_addr.
 */
struct msg {
	struct mailbox_task task;
	uint64_t id;
	struct conn_handle sender;	/* MSG_KIND_CONN: the connection */
	uint32_t sender_kind;		/* enum msg_kind */
	struct route_owner recipient;
	enum msg_verdict verdict;
	uint32_t flags;
	uint32_t sender_ref;		/* the sender's own reference */
	uint32_t sender_cmd;		/* and what it was answering */
	uint64_t submitted;		/* wall clock seconds, for receipts */
	uint64_t due;			/* scheduled: not before (s); 0 now */
	uint64_t expires;		/* validity: not after (s); 0 default */
	struct store_acct *store_acct;	/* MSG_F_STORED: whose it is */
	uint32_t attempts;		/* MSG_F_STORED: failures so far */
	uint64_t remote_req;		/* MSG_KIND_NODE: its request */
	uint64_t read_ns;		/* turn_ns of the turn that read it; 0 none */
	uint32_t status;		/* MSG_REJECTED: the SMSC's status */
	/* SMPP details, carried through untouched; zero from line clients. */
	uint8_t	src_ton, src_npi;
	uint8_t	dst_ton, dst_npi;
	uint8_t	esm_class;
	uint8_t	data_coding;
	uint8_t	registered_delivery;
	uint8_t	message_state;		/* receipts */
	uint16_t umr;
	uint16_t sar_ref;
	uint8_t	sar_total;
	uint8_t	sar_seq;
	char	src_addr[21];		/* as submitted, without normalising */
	char	dst_addr[21];
	char	reply_to[ROUTE_ADDR_MAX + 1];	/* receipts go here */
	char	receipted_id[24];
	char	from[ROUTE_ADDR_MAX + 1];
	char	to[ROUTE_ADDR_MAX + 1];
	char	remote_node[MSG_NODE_MAX + 1];	/* MSG_KIND_NODE */
	size_t	len;
	uint8_t	text[];
};

/*
 * A message with room for len bytes of text (and a NUL after them): its
 * numbers zero, its strings empty, the text for the caller to fill. Any
 * thread. On a reactor's thread, one of up to MSG_SPARE_BYTES (an SMS,
 * a usual line) comes from the reactor's spares.
 */
struct msg *msg_new(size_t len);

/*
 * Frees m (NULL: nothing): on a reactor's thread, one of the spares'
 * size is kept for the next msg_new there. Any thread; a message from
 * anywhere (a spare is a plain malloc chunk, and free() takes one too).
 */
void	msg_free(struct msg *m);

/* From reactor_main: the spares this thread's messages come from. */
struct spares;
void	msg_spares_use(struct spares *s);

#define MSG_SPARE_BYTES	768

/* The bytes m takes: its fields, its text, the NUL after. */
static inline size_t
msg_size(const struct msg *m)
{
	return sizeof(*m) + m->len + 1;
}

/* A copy of m (text included) that the caller owns. Any thread. */
struct msg *msg_dup(const struct msg *m);

/*
 * m's text without the user data header a part of a long message starts
 * with (esm_class UDHI: the SMS's, not the text's); its length in *len.
 */
static inline const uint8_t *
msg_text_after_udh(const struct msg *m, size_t *len)
{
	const uint8_t *p = m->text;

	*len = m->len;
	if ((m->esm_class & 0x40) && *len > 0 && (size_t)p[0] + 1 <= *len) {
		*len -= (size_t)p[0] + 1;
		p += p[0] + 1;
	}
	return p;
}

/* The verdict's name: "ok", "no route", ... Any thread. */
const char *msg_verdict_name(enum msg_verdict v);

/*
 * A message id unique within the run (and, in a cluster, across nodes once
 * msg_set_id_low has run). Owning reactor only.
 */
uint64_t msg_next_id(struct reactor *r);

#define MSG_ID_LOW_MAX	1023
/* The id maker that is not a reactor: the store (its receipts). */
#define MSG_ID_STORE	MSG_ID_LOW_MAX

/*
 * An id's low 10 bits tell who made it: reactor i's end in i, the store's
 * in MSG_ID_STORE, until a cluster hands each of them a slot of its
 * own (low), unique among the nodes. Any thread; maker is a reactor id or
 * MSG_ID_STORE, low at most MSG_ID_LOW_MAX.
 */
void	msg_set_id_low(unsigned maker, unsigned low);
uint64_t msg_id_low(unsigned maker);

/* Message ids start above base (see main.c): unique across restarts. */
void	msg_set_id_base(struct reactor *r, uint64_t base);

#endif
