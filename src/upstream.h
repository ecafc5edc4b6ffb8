/* upstream.h: sessions to upstream SMS centres: each reactor's share, their back-off and their counters. */
#ifndef ECHOROUTERD_UPSTREAM_H
#define ECHOROUTERD_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct msg;
struct reactor;
struct upstream_conf;

/*
 * How long to wait before connecting again after the attempt-th failure
 * in a row (1: the first), in milliseconds: reconnect_min seconds doubled
 * for each failure after the first, at most reconnect_max, plus up to a
 * half of that again from rnd (any random value), never past
 * reconnect_max. Pure.
 */
uint64_t upstream_backoff_ms(unsigned min_s, unsigned max_s,
	    unsigned attempt, uint32_t rnd);

/*
 * Hooks r, one of n reactors, into the upstream sessions: from its
 * first turn it keeps open its share of the links of every upstream in
 * its configuration (a link goes to reactor (hash(name) + link) mod n),
 * and follows each configuration it is handed (reactor_set_config).
 * Main thread, before r starts.
 */
void	upstream_attach(struct reactor *r, unsigned n);

/* What one upstream has counted, summed over the reactors. */
struct upstream_counts {
	uint64_t bound;			/* sessions bound now */
	uint64_t connects;		/* connections started */
	uint64_t reconnects;		/* of those, after a failure or close */
	uint64_t bind_failures;		/* bind_*_resp with an error */
	uint64_t dead_links;		/* no answer within response_timeout */
	uint64_t unbinds;		/* unbind from the SMS centre */
	uint64_t deliver_refused;	/* deliver_sm and data_sm not taken */
	uint64_t receipts_matched;	/* receipts passed to the submitter */
	uint64_t receipts_unmatched;	/* receipts for no id of ours */
	uint64_t receipts_late;		/* receipts before their id was filed,
					   looked for again */
	uint64_t mo_routed;		/* other messages taken by a recipient */
	uint64_t submits;		/* submit_sm sent (parts) */
	uint64_t resp_ok;		/* submit_sm_resp: ESME_ROK */
	uint64_t resp_throttled;	/* ESME_RTHROTTLED, ESME_RMSGQFUL */
	uint64_t resp_failed;		/* any other error */
	uint64_t throttles;		/* pauses after a throttle */
	uint64_t bad_ids;		/* ESME_ROK without a usable id */
	uint64_t window;		/* submit_sm unanswered now */
	uint64_t oldest_at;		/* wall clock s of the oldest message
					   waiting in a session; 0 none */
	uint64_t oldest_age;		/* s since then, when the counts were
					   read; 0 none */
};

typedef void upstream_stats_fn(const char *name,
    const struct upstream_counts *n, void *arg);

/*
 * Calls fn for each upstream that has sessions now (or is configured on
 * any reactor). Any thread; takes a lock briefly.
 */
void	upstream_stats_each(upstream_stats_fn *fn, void *arg);

/*
 * Appends one upstream's counts to buf (len bytes, holding a string):
 * for the stats line " upstream_NAME_bound=B upstream_NAME_reconnects=R
 * upstream_NAME_bind_failures=F upstream_NAME_submits=S ..." (submits,
 * answers ok, throttled and refused, window, oldest_age, receipts
 * matched and unmatched), or, status, for STATUS= ", NAME B bound[ W in
 * flight][ oldest As]". Cut short where buf ends. Pure.
 */
void	upstream_counts_append(char *buf, size_t len, const char *name,
	    const struct upstream_counts *n, bool status);

/*
 * Appends every upstream's counts (upstream_counts_append); nothing
 * without upstreams. Any thread.
 */
void	upstream_stats_append(char *buf, size_t len, bool status);

/*
 * The SMS centres' message ids kept now for their receipts, of every
 * upstream (upstream_receipts.limit bounds them). Any thread.
 */
size_t	upstream_receipt_ids(void);

/*
 * A command_status as a log names it: "ESME_RINVPASWD (invalid
 * password)"; for one without a name, its hex value. buf holds n bytes.
 */
const char *upstream_status_text(uint32_t status, char *buf, size_t n);

/*
 * The SMS centre of up (in cf) took m (submit_sm_resp ESME_ROK) as
 * smsc_id (smsc_id_len octets, 1 to 64, not NUL-ended): the one place
 * that learns which id a receipt will name, filed for it in the receipt
 * map. For a long text, once per part. The reactor that runs the session.
 */
void	upstream_submitted(const struct config *cf,
	    const struct upstream_conf *up, const char *smsc_id,
	    size_t smsc_id_len, const struct msg *m);

#endif
