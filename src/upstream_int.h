/* upstream_int.h: one upstream session, shared by upstream.c (its life) and proto_esme.c (its PDUs). */
#ifndef ECHOROUTERD_UPSTREAM_INT_H
#define ECHOROUTERD_UPSTREAM_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "msg.h"
#include "reactor.h"
#include "text.h"

struct conn;
struct msg;
struct smpp_pdu;

enum upstream_state {
	UPSTREAM_IDLE,			/* waiting to connect (retry_at) */
	UPSTREAM_CONNECTING,		/* the TCP connect is under way */
	UPSTREAM_OPENING,		/* connected: the TLS handshake runs */
	UPSTREAM_BINDING,		/* bind_* sent */
	UPSTREAM_BOUND,
	UPSTREAM_UNBINDING,		/* unbind sent: closes on its answer */
	UPSTREAM_CLOSING,		/* closes once its output is out */
};

/*
 * The counters every message moves, one slice per reactor (by id, modulo
 * UPSTREAM_SLICES), each on a cache line of its own: reactors that run
 * links of one upstream do not take turns owning one line per message.
 * Readers sum the slices.
 */
#define UPSTREAM_SLICES		16

struct upstream_slice {
	_Atomic uint64_t submits;	/* submit_sm sent (parts) */
	_Atomic uint64_t resp_ok;
	_Atomic uint64_t receipts_matched, mo_routed;
	_Atomic int64_t window;		/* submit_sm unanswered now */
} __attribute__((aligned(64)));

/*
 * One upstream's counters, shared by the reactors that run its links,
 * and what submits share across them: which links can take submit_sm
 * now, a pause after a throttle and the max_tps
 * pace.
 */
struct upstream_stat {
	/* (A slot taken again is zeroed by stat_reset: each field there.) */
	struct upstream_slice slice[UPSTREAM_SLICES];
	char	name[CONFIG_NAME_MAX + 1];
	atomic_uint users;		/* sessions that count here */
	_Atomic uint64_t bound, connects, reconnects, bind_failures;
	_Atomic uint64_t dead_links, unbinds, deliver_refused;
	_Atomic uint64_t receipts_unmatched, receipts_late;
	_Atomic uint64_t links_tx[2];	/* bound links that submit: bit each */
	/*
	 * Per link, the wall clock s its oldest message waiting (queued or
	 * unanswered) was submitted; 0 none. Its reactor's, each second.
	 */
	_Atomic uint64_t oldest_at[128];
	_Atomic uint64_t paused_until;	/* ms, reactor clock: none before */
	_Atomic uint64_t tps_at;	/* ns: the max_tps pace (GCRA) */
	_Atomic uint64_t resp_throttled, resp_failed;
	_Atomic uint64_t throttles;	/* pauses after a throttle */
	_Atomic uint64_t bad_ids;	/* ESME_ROK with no usable message_id */
};

/* Reactor r's slice of st's counters. */
static inline struct upstream_slice *
upstream_slice(struct upstream_stat *st, const struct reactor *r)
{
	return &st->slice[r->id % UPSTREAM_SLICES];
}

/*
 * Adds n to a slice's counter: an atomic add, but one that other reactors
 * seldom contend (only with more than UPSTREAM_SLICES of them).
 */
#define UPSTREAM_COUNT(ctr, n)						\
	atomic_fetch_add_explicit(&(ctr), (n), memory_order_relaxed)

/* A part's state in a job. */
enum { UPJ_WAIT, UPJ_SENT, UPJ_DONE };

/*
 * A message on its way to an upstream: it moves between reactors (task)
 * until a bound session of the route's upstreams takes it, which encodes
 * it for that upstream and sends its parts as submit_sm. Owned by
 * whoever holds it: a mailbox, or one session.
 */
struct upstream_job {
	struct mailbox_task task;
	struct upstream_job *next;	/* in a session's queue */
	struct msg *m;			/* its verdict goes back in m */
	struct msg *d;			/* m for this upstream; NULL not yet */
	struct smpp_long *lp;		/* d's parts; NULL: one */
	char	upstream[CONFIG_NAME_MAX + 1];
	unsigned link;
	unsigned nparts;
	unsigned moves;			/* sessions it was handed to */
	uint32_t status;		/* the first permanent error, 0 none */
	uint32_t throttled;		/* the last temporary one's, 0 none */
	char	smsc_id[65];		/* the SMSC's id of its first part */
	uint64_t since_ms;		/* its session took it, or a part */
	int	home;			/* the reactor that made it; -1 none */
	enum msg_verdict verdict;	/* on its way home: the answer */
	bool	queued;
	uint8_t	part[TEXT_PARTS_MAX];	/* UPJ_* */
};

/* A submit_sm sent and not answered yet. */
struct upstream_slot {
	struct upstream_job *job;	/* NULL: free */
	uint32_t seq;
	uint32_t sent_at;		/* reactor seconds */
	unsigned part;
};

struct upstream_rs;

/*
 * One link to an SMS centre: a bind of one type, kept open by one
 * reactor. The session outlives its connections; the connection's pdata
 * is the session while it has one. Owning reactor only.
 */
struct upstream_sess {
	struct reactor_io dial;		/* first: the socket while it connects */
	struct upstream_rs *rs;
	struct reactor *r;		/* its reactor */
	struct upstream_sess *next;
	struct config *cf;		/* a reference: uc lives in it */
	const struct upstream_conf *uc;
	struct upstream_stat *stat;
	struct conn *c;			/* from connected to closed */
	unsigned link;			/* among its upstream's links */
	uint32_t bind_cmd;		/* SMPP_BIND_* */
	enum upstream_state state;
	uint64_t retry_at;		/* ms, IDLE */
	uint64_t deadline;		/* ms, CONNECTING */
	unsigned attempt;		/* failures since the last bind */
	uint32_t rnd;			/* the back-off's jitter */
	uint32_t seq;			/* the last sequence_number sent */
	uint32_t pending_seq;		/* a request awaiting its answer */
	uint32_t pending_cmd;		/* its command_id; 0 none */
	uint32_t pending_since;		/* reactor seconds */
	uint32_t last_enquire;		/* reactor seconds */
	uint32_t logged;		/* the failure this episode logged */
	uint64_t pump_at;		/* ms: pump then (a pace, a pause); 0 */
	unsigned mo_pending;		/* messages from it awaiting verdicts */
	unsigned late;			/* of those, receipts looked for again */
	struct upstream_job *qhead, *qtail;	/* waiting to be sent */
	unsigned qlen;
	struct upstream_slot *win;	/* wincap slots */
	unsigned wincap;
	unsigned inflight;		/* slots in use */
	uint16_t next_ref;		/* the next long text's reference */
	bool	listed;			/* in stat->links_tx */
	bool	is_bound;		/* counted in stat->bound */
	bool	failed;			/* this close was logged already */
	bool	removed;		/* free once closed */
	bool	centre_unbound;		/* UNBINDING: the centre's unbind */
	bool	restart;		/* reconnect at once once closed */
};

/* Failures that are logged once per episode (upstream_sess_fail). */
#define UPSTREAM_FAIL_CONNECT	0x10000000u	/* | errno */
#define UPSTREAM_FAIL_BIND	0x20000000u	/* | command_status */
#define UPSTREAM_FAIL_DEAD	0x30000000u
#define UPSTREAM_FAIL_UNBIND	0x40000000u
#define UPSTREAM_FAIL_CLOSED	0x50000000u	/* | close reason */

extern const struct proto proto_esme;

/*
 * Logs why s failed, as a warning the first time in an episode (since
 * the last bind) that this code is seen, at debug after that; counts it.
 */
void	upstream_sess_fail(struct upstream_sess *s, uint32_t code,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* s bound: back-off and episode start over. */
void	upstream_sess_bound(struct upstream_sess *s);

/* c closed: its session waits to connect again, or goes. */
void	upstream_conn_closed(struct conn *c);

/*
 * Makes c, a connection speaking proto_esme that no session made, the
 * connection of a session of uc of its own, and sends its bind: for the
 * fuzz target. The session goes when c closes. Owning reactor only.
 */
void	upstream_fuzz_attach(struct conn *c, const struct upstream_conf *uc);

/*
 * The submit path (upstream_submit.c). Owning reactor of s, except where
 * said.
 */

/* s bound, or stopped taking submits: in or out of stat->links_tx. */
void	upstream_sess_list(struct upstream_sess *s, bool on);

/* Sends what s's window, the upstream's pause and max_tps allow. */
void	upstream_sess_pump(struct upstream_sess *s);

/*
 * A submit_sm_resp (or a generic_nack) for seq: false when no submit of
 * s has that sequence number. id: its message_id, "" when it had none
 * or none that decoded.
 */
bool	upstream_sess_answer(struct upstream_sess *s, uint32_t seq,
	    uint32_t status, const char *id);

/* A submit unanswered for response_timeout: the link is dead. */
bool	upstream_sess_overdue(const struct upstream_sess *s, uint32_t now);
/*
 * The session's input is held (unread): the submits in its window count
 * as sent at now, their answers not late while they wait to be read.
 */
void	upstream_sess_unread(struct upstream_sess *s, uint32_t now);

/* What becomes of a session's jobs when its link goes. */
enum upstream_drop {
	UPSTREAM_DROP_MOVE,	/* to another session (or back, none up) */
	UPSTREAM_DROP_ANSWER,	/* back to their senders: stopping */
	UPSTREAM_DROP_FREE,	/* freed unanswered: the reactors are gone */
};

/* s's link is gone (closed, or its session freed): its jobs go. */
void	upstream_sess_drop(struct upstream_sess *s, enum upstream_drop how);

/* Each second: jobs waiting past response_timeout go back; pumps. */
void	upstream_sess_second(struct upstream_sess *s);

/* The reactor that runs link of upstream name. Any thread. */
unsigned upstream_reactor_of(const char *name, unsigned link);

/*
 * One more part within tps parts a second (a second's worth may go at
 * once), now (ns, monotonic); *at is the pace, 0 at first. Any thread.
 */
bool	upstream_tps_take(_Atomic uint64_t *at, unsigned tps, uint64_t now);

/*
 * How long (ns) from now until upstream_tps_take would allow a part; 0:
 * it would now. Any thread.
 */
uint64_t upstream_tps_wait(_Atomic uint64_t *at, unsigned tps, uint64_t now);

/*
 * s waits for a pace or a pause that ends at at_ms (the reactor's clock):
 * its reactor wakes then and pumps it. Owning reactor only.
 */
void	upstream_sess_pump_at(struct upstream_sess *s, uint64_t at_ms);

/* Reactors in all. Any thread. */
unsigned upstream_nreactors(void);

/* name's counters (no reference taken), or NULL. Any thread. */
struct upstream_stat *upstream_stat_find(const char *name);

/* Whether any submit_sm of st's upstream is unanswered now. Any thread. */
bool	upstream_stat_unanswered(struct upstream_stat *st);

/* The session of name's link on r, or NULL. Owning reactor only. */
struct upstream_sess *upstream_sess_find(struct reactor *r,
	    const char *name, unsigned link);

/* The reactor whose thread this is, or NULL for another thread. */
struct reactor *upstream_self(void);

/*
 * Queues a message of text (UTF-8) on c's session, bound, as a route
 * would (nobody waits for its verdict): for the fuzz target. Owning
 * reactor only.
 */
void	upstream_fuzz_submit(struct conn *c, const char *text);

/* Registers the upstream kind with deliver. Main thread, at start. */
void	upstream_kind_register(void);

/* The bind type's name ("transceiver") of a bind command. */
const char *upstream_bind_name(uint32_t bind_cmd);

/*
 * The ESME side (proto_esme.c): sends c's bind once its transport is
 * ready (esme_open), or an unbind (ends the
 * session: it closes on the answer or after response_timeout). Owning
 * reactor only.
 */
void	esme_open(struct conn *c);
void	esme_unbind(struct conn *c);

/*
 * Handles one decoded PDU from the SMS centre on c (for the fuzz
 * target: on_message decodes, then calls this). Owning reactor only.
 */
void	esme_handle(struct conn *c, const struct smpp_pdu *p);

/*
 * A deliver_sm or data_sm from the SMS centre on c (esme_in.c): a
 * receipt goes to its submitter with our id, another message is routed
 * by its destination; answered once handed on. Owning reactor only.
 */
void	esme_deliver(struct conn *c, const struct smpp_pdu *p);
/* Lets the cluster ask this node about receipts other nodes got. */
void	esme_receipts_attach(void);

/* The verdict on a message from the SMS centre: its answer. */
void	esme_verdict(struct conn *c, const struct msg *m);

/*
 * Files the SMS centre's id (len bytes at id, from a submit_sm_resp
 * ESME_ROK on an upstream of uc) of m, our message, for its receipt,
 * within cf's upstream_receipts. Any thread.
 */
void	esme_receipt_record(const struct config *cf,
	    const struct upstream_conf *uc, const char *id, size_t len,
	    const struct msg *m);

#endif
