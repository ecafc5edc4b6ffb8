/* counter.h: every counter, declared once in a table that the stats line, STATUS= and /metrics walk. */
#ifndef ECHOROUTERD_COUNTER_H
#define ECHOROUTERD_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

#include "util.h"

/*
 * One id per time series, in the order of the stats line (counter.c holds
 * the table that says what each means). A labelled family (closed_total
 * by reason) is a run of ids, one per label value.
 */
enum counter_id {
	COUNTER_CONNS,			/* reactors: open now */
	COUNTER_ACCEPTOR_ACCEPTED,	/* acceptor: handed to a reactor */
	COUNTER_REFUSED_MAX,		/* acceptor: closed at once, by limit */
	COUNTER_REFUSED_FD,
	COUNTER_REFUSED_IP,
	COUNTER_REFUSED_RATE,
	COUNTER_REFUSED_HANDSHAKES,	/* TLS: max_handshakes */
	COUNTER_REFUSED_HANDSHAKES_IP,	/* TLS: max_handshakes_per_ip */
	COUNTER_CLOSED_PEER,		/* reactors: closed, by reason */
	COUNTER_CLOSED_RESET,
	COUNTER_CLOSED_IDLE,
	COUNTER_CLOSED_SLOW,
	COUNTER_CLOSED_PROTOCOL,
	COUNTER_CLOSED_QUIT,
	COUNTER_CLOSED_SHUTDOWN,
	COUNTER_CLOSED_TIMEOUT,
	COUNTER_MESSAGES,		/* reactors: whole messages handled */
	COUNTER_BYTES_IN,
	COUNTER_BYTES_OUT,
	COUNTER_ROUTED_LOCAL,		/* delivered on the sender's reactor */
	COUNTER_ROUTED_REMOTE,		/* delivered through a mailbox */
	COUNTER_ROUTED_STORED,		/* handed out by the store */
	COUNTER_ROUTED_NODE,		/* came from another node */
	COUNTER_ERR_400,		/* router error replies, by code */
	COUNTER_ERR_401,
	COUNTER_ERR_403,
	COUNTER_ERR_404,
	COUNTER_ERR_409,
	COUNTER_ERR_413,
	COUNTER_ERR_502,
	COUNTER_ERR_503,
	COUNTER_ACCEPTED,		/* reactors: connections taken on */
	COUNTER_LOOPS,			/* reactors: loop turns (watchdog) */
	COUNTER_MSG_ECHO,		/* messages handled, by protocol */
	COUNTER_MSG_ROUTER,
	COUNTER_MSG_SMPP,
	COUNTER_MSG_METRICS,
	COUNTER_MSG_HTTP,
	COUNTER_SMPP_THROTTLED,		/* submits refused by max_tps */
	COUNTER_HTTP_THROTTLED,		/* http sends refused by max_tps */
	COUNTER_SMPP_WINDOW,		/* deliver_sm awaiting a response */
	COUNTER_SMPP_QUEUED,		/* deliver_sm waiting for the window */
	COUNTER_JOIN_JOINED,		/* router: SMPP parts joined, messages */
	COUNTER_JOIN_HELD,		/* router: parts waiting now */
	COUNTER_JOIN_BYTES,		/* router: the memory they take */
	COUNTER_JOIN_INCOMPLETE,	/* router: parts never all came */
	COUNTER_SMPP_LONG,		/* line texts sent in several parts */
	COUNTER_SMPP_PARTS,		/* and the deliver_sm parts of them */
	COUNTER_HTTP_400,		/* metrics: error answers, by status */
	COUNTER_HTTP_404,
	COUNTER_HTTP_405,
	COUNTER_HTTP_408,
	COUNTER_HTTP_431,
	COUNTER_HTTP_505,
	COUNTER_TLS_OK,			/* TLS handshakes, by result */
	COUNTER_TLS_BAD,
	COUNTER_TLS_CERT,
	COUNTER_TLS_TIMEOUT,
	COUNTER_TLS_HANDSHAKING,	/* TLS handshakes under way now */
	COUNTER_TLS_KTLS_SEND,		/* handshakes done with kernel TLS */
	COUNTER_TLS_KTLS_RECV,
	COUNTER_N
};

enum counter_kind {
	COUNTER_KIND_COUNTER,		/* only goes up */
	COUNTER_KIND_GAUGE,		/* goes up and down */
};

/* Who writes a counter: each reactor its own block, or the acceptor. */
enum counter_scope {
	COUNTER_SCOPE_REACTOR,
	COUNTER_SCOPE_ACCEPTOR,
};

/* The stats line and STATUS= also list each reactor's value. */
#define COUNTER_F_PER_REACTOR	0x1
/* Not a series of its own in /metrics (a family's sum, say). */
#define COUNTER_F_NO_METRIC	0x2

struct counter_info {
	const char *name;	/* Prometheus family: "closed_total" */
	const char *label;	/* its label's name ("reason"), or NULL */
	const char *label_value; /* this series' value ("peer"), or NULL */
	const char *help;	/* one sentence, the same for a family */
	const char *key;	/* in the stats line ("closed_peer"), or NULL */
	const char *status;	/* noun in STATUS= ("connections"), or NULL */
	enum counter_kind kind;
	enum counter_scope scope;
	unsigned flags;		/* COUNTER_F_* */
};

/* What counter id is. Any thread. */
const struct counter_info *counter_info(enum counter_id id);

/*
 * One writer's counters, on cache lines of their own: a reactor's, or the
 * acceptor's. Only the writer changes them (counter_add), so a relaxed load
 * and store is enough, with no lock and no read-modify-write; any thread
 * reads them with relaxed loads. Ids outside the writer's scope stay 0,
 * so summing every block gives each counter's total.
 */
struct counter_block {
	_Atomic uint64_t v[COUNTER_N];
} __attribute__((aligned(CACHE_LINE)));

/* Adds n to id (n may be (uint64_t)-1 for a gauge). The writer only. */
static inline void
counter_add(struct counter_block *b, enum counter_id id, uint64_t n)
{
	atomic_store_explicit(&b->v[id],
	    atomic_load_explicit(&b->v[id], memory_order_relaxed) + n,
	    memory_order_relaxed);
}

/* The value of id in b. Any thread. */
static inline uint64_t
counter_get(const struct counter_block *b, enum counter_id id)
{
	return atomic_load_explicit(&b->v[id], memory_order_relaxed);
}

/*
 * Histograms, each reactor's own like its counters: latencies in
 * nanoseconds, sorted into fixed buckets whose upper bounds are
 * counter_hist_bounds (the last bucket has none: +Inf).
 */
enum counter_hist_id {
	/* the start of the turn that read a SEND or submit_sm -> queued */
	HIST_ROUTE,
	/* turn that sent a deliver_sm -> turn that read its response */
	HIST_DELIVER_SM,
	HIST_TURN,		/* a reactor loop turn, events to sleep */
	HIST_N
};

#define COUNTER_HIST_BOUNDS	20
extern const uint64_t counter_hist_bounds[COUNTER_HIST_BOUNDS];

/* The count is the buckets' sum, so that a reader sees them agree. */
struct counter_hist {
	_Atomic uint64_t bucket[COUNTER_HIST_BOUNDS + 1];
	_Atomic uint64_t sum_ns;
};

/* Sizes of the labelled tables below, checked where they are filled. */
#define COUNTER_LISTENERS_MAX	32	/* listeners a config may have */
#define COUNTER_SMPP_CMDS	24	/* smpp_command_index: 23 + other */
#define COUNTER_SMPP_STATUSES	32	/* smpp_status_index: 31 + other */
#define COUNTER_HTTP_ENDPOINTS	4	/* enum http_endpoint */
#define COUNTER_HTTP_STATUSES	20	/* http_status_index: 19 + other */

/*
 * What a reactor counts beyond its counter_block: histograms and
 * two-label tables. The same rules: the reactor writes, anyone reads.
 */
struct counter_detail {
	struct counter_hist hist[HIST_N];
	/* open connections, by listener (the config's order) */
	_Atomic uint64_t conns[COUNTER_LISTENERS_MAX];
	/* SMPP PDUs: [0] received, [1] sent; by command, by command_status */
	_Atomic uint64_t smpp_pdus[2][COUNTER_SMPP_CMDS][COUNTER_SMPP_STATUSES];
	/* http listener requests answered, by endpoint, by status */
	_Atomic uint64_t http_requests[COUNTER_HTTP_ENDPOINTS]
	    [COUNTER_HTTP_STATUSES];
} __attribute__((aligned(CACHE_LINE)));

/* Counts one observation of ns nanoseconds. The writer only. */
static inline void
counter_observe(struct counter_hist *h, uint64_t ns)
{
	unsigned i = 0;

	while (i < COUNTER_HIST_BOUNDS && ns > counter_hist_bounds[i])
		i++;
	atomic_store_explicit(&h->bucket[i],
	    atomic_load_explicit(&h->bucket[i], memory_order_relaxed) + 1,
	    memory_order_relaxed);
	atomic_store_explicit(&h->sum_ns,
	    atomic_load_explicit(&h->sum_ns, memory_order_relaxed) + ns,
	    memory_order_relaxed);
}

/* Adds n to a counter of a detail table. The writer only. */
static inline void
counter_bump(_Atomic uint64_t *v, uint64_t n)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) +
	    n, memory_order_relaxed);
}

/* A monotonic clock reading in nanoseconds, for the histograms. */
uint64_t counter_now_ns(void);

/* Every counter summed over some blocks: a snapshot to walk or compare. */
struct counter_totals {
	uint64_t v[COUNTER_N];
};

/* Adds b's values into t (zero t first). Any thread. */
void	counter_totals_add(struct counter_totals *t,
	    const struct counter_block *b);

/* id summed over the n blocks in bs. Any thread. */
uint64_t counter_sum(const struct counter_block *const *bs, unsigned n,
	    enum counter_id id);

#endif
