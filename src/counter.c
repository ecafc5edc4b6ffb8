/* counter.c: the counter table (name, label, kind, help, stats key) and its sums. */
#include <time.h>

#include "counter.h"

#define REACTOR_SERIES(nm, lbl, val, k, st, kd, fl, hp) {		\
	.name = nm, .label = lbl, .label_value = val, .help = hp,	\
	.key = k, .status = st, .kind = COUNTER_KIND_##kd,		\
	.scope = COUNTER_SCOPE_REACTOR, .flags = fl }
#define ACCEPTOR_SERIES(nm, lbl, val, k, hp) {				\
	.name = nm, .label = lbl, .label_value = val, .help = hp,	\
	.key = k, .kind = COUNTER_KIND_COUNTER,				\
	.scope = COUNTER_SCOPE_ACCEPTOR }

/* Plain counters of a reactor; keyed in the stats line unless k is NULL. */
#define REACTOR_COUNTER(nm, k, hp)					\
	REACTOR_SERIES(nm, NULL, NULL, k, NULL, COUNTER, 0, hp)

#define REFUSED(why)							\
	ACCEPTOR_SERIES("refused_total", "why", #why, "refused_" #why,	\
	    "Connections the acceptor closed at once, by the limit hit.")
#define CLOSED(reason)							\
	REACTOR_SERIES("closed_total", "reason", reason,		\
	    "closed_" reason, NULL, COUNTER, 0,				\
	    "Connections closed, by reason.")
#define ERR(code)							\
	REACTOR_SERIES("router_errors_total", "code", #code, "err_" #code,	\
	    NULL, COUNTER, 0, "Router error replies sent, by code.")

#define ROUTED(from, k)							\
	REACTOR_SERIES("routed_total", "from", from, k, NULL, COUNTER, 0,	\
	    "Messages handed to a recipient's session, by where they came "	\
	    "from: the sender's reactor, another reactor's mailbox, the "	\
	    "store, another node.")
#define TLS(result, k)							\
	REACTOR_SERIES("tls_handshakes_total", "result", result, k, NULL,	\
	    COUNTER, 0, "TLS handshakes, by result: done, failed (plaintext, "	\
	    "garbage, no common version), client certificate refused, not "	\
	    "done within handshake_timeout.")
#define KTLS(dir, k)							\
	REACTOR_SERIES("tls_ktls_total", "direction", dir, k, NULL,	\
	    COUNTER, 0, "TLS connections whose records the kernel "	\
	    "encrypts (send) or decrypts (receive): kernel TLS.")
#define MESSAGES(proto)							\
	REACTOR_SERIES("messages_total", "protocol", proto, NULL, NULL,	\
	    COUNTER, 0, "Whole messages handled, by protocol.")
#define HTTP(code)							\
	REACTOR_SERIES("http_errors_total", "code", #code, NULL, NULL,	\
	    COUNTER, 0, "Metrics listener error answers, by HTTP status.")

static const struct counter_info table[COUNTER_N] = {
	/* /metrics has them by listener and reactor instead */
	[COUNTER_CONNS] = REACTOR_SERIES("conns", NULL, NULL, "conns",
	    "connections", GAUGE, COUNTER_F_PER_REACTOR | COUNTER_F_NO_METRIC,
	    "Connections open now."),
	[COUNTER_ACCEPTOR_ACCEPTED] = ACCEPTOR_SERIES(
	    "acceptor_accepted_total", NULL, NULL, "accepted",
	    "Connections the acceptor handed to a reactor."),
	[COUNTER_REFUSED_MAX] = REFUSED(max),
	[COUNTER_REFUSED_FD] = REFUSED(fd),
	[COUNTER_REFUSED_IP] = REFUSED(ip),
	[COUNTER_REFUSED_RATE] = REFUSED(rate),
	[COUNTER_REFUSED_HANDSHAKES] = REFUSED(handshakes),
	[COUNTER_REFUSED_HANDSHAKES_IP] = REFUSED(handshakes_ip),
	[COUNTER_CLOSED_PEER] = CLOSED("peer"),
	[COUNTER_CLOSED_RESET] = CLOSED("reset"),
	[COUNTER_CLOSED_IDLE] = CLOSED("idle"),
	[COUNTER_CLOSED_SLOW] = CLOSED("slow-consumer"),
	[COUNTER_CLOSED_PROTOCOL] = CLOSED("protocol"),
	[COUNTER_CLOSED_QUIT] = CLOSED("quit"),
	[COUNTER_CLOSED_SHUTDOWN] = CLOSED("shutdown"),
	[COUNTER_CLOSED_TIMEOUT] = CLOSED("timeout"),
	/* /metrics has them by protocol (COUNTER_MSG_*) instead */
	[COUNTER_MESSAGES] = REACTOR_SERIES("messages_total", NULL, NULL,
	    "messages", "messages", COUNTER, COUNTER_F_NO_METRIC,
	    "Whole messages handled."),
	[COUNTER_BYTES_IN] = REACTOR_COUNTER("bytes_in_total", "bytes_in",
	    "Bytes read from clients."),
	[COUNTER_BYTES_OUT] = REACTOR_COUNTER("bytes_out_total", "bytes_out",
	    "Bytes written to clients."),
	[COUNTER_ROUTED_LOCAL] = ROUTED("same_reactor", "routed_local"),
	[COUNTER_ROUTED_REMOTE] = ROUTED("other_reactor", "routed_remote"),
	[COUNTER_ROUTED_STORED] = ROUTED("store", "routed_stored"),
	[COUNTER_ROUTED_NODE] = ROUTED("other_node", "routed_node"),
	[COUNTER_ERR_400] = ERR(400),
	[COUNTER_ERR_401] = ERR(401),
	[COUNTER_ERR_403] = ERR(403),
	[COUNTER_ERR_404] = ERR(404),
	[COUNTER_ERR_409] = ERR(409),
	[COUNTER_ERR_413] = ERR(413),
	[COUNTER_ERR_502] = ERR(502),
	[COUNTER_ERR_503] = ERR(503),
	[COUNTER_ACCEPTED] = REACTOR_COUNTER("accepted_total", NULL,
	    "Connections reactors took on from the acceptor."),
	[COUNTER_LOOPS] = REACTOR_COUNTER("loops_total", NULL,
	    "Reactor loop turns."),
	[COUNTER_MSG_ECHO] = MESSAGES("echo"),
	[COUNTER_MSG_ROUTER] = MESSAGES("router"),
	[COUNTER_MSG_SMPP] = MESSAGES("smpp"),
	[COUNTER_MSG_METRICS] = MESSAGES("metrics"),
	[COUNTER_MSG_HTTP] = MESSAGES("http"),
	[COUNTER_SMPP_THROTTLED] = REACTOR_COUNTER(
	    "smpp_throttled_total", NULL,
	    "SMPP submits refused with ESME_RTHROTTLED by max_tps."),
	[COUNTER_HTTP_THROTTLED] = REACTOR_COUNTER(
	    "http_throttled_total", NULL,
	    "HTTP sends refused by the account's max_tps."),
	[COUNTER_SMPP_WINDOW] = REACTOR_SERIES("smpp_window", NULL, NULL,
	    NULL, NULL, GAUGE, 0,
	    "deliver_sm sent and not yet answered, over all binds."),
	[COUNTER_SMPP_QUEUED] = REACTOR_SERIES("smpp_queued", NULL, NULL,
	    NULL, NULL, GAUGE, 0,
	    "deliver_sm waiting for room in a window, over all binds."),
	[COUNTER_JOIN_JOINED] = REACTOR_COUNTER("join_joined_total", NULL,
	    "Messages joined from SMPP parts for router clients."),
	[COUNTER_JOIN_HELD] = REACTOR_SERIES("join_parts_held", NULL, NULL,
	    NULL, NULL, GAUGE, 0,
	    "SMPP parts waiting for the rest of their message."),
	[COUNTER_JOIN_BYTES] = REACTOR_SERIES("join_bytes_held", NULL, NULL,
	    NULL, NULL, GAUGE, 0,
	    "Bytes of memory the SMPP parts waiting to be joined take."),
	[COUNTER_JOIN_INCOMPLETE] = REACTOR_COUNTER("join_incomplete_total",
	    NULL,
	    "Messages whose parts did not all come in time (or whose "
	    "recipient left): reported undeliverable."),
	[COUNTER_SMPP_LONG] = REACTOR_COUNTER("smpp_long_messages_total",
	    "smpp_long", "Router clients' texts sent to SMPP binds as more "
	    "than one deliver_sm (or as one message_payload)."),
	[COUNTER_SMPP_PARTS] = REACTOR_COUNTER("smpp_long_parts_total",
	    "smpp_parts", "deliver_sm parts sent of those texts."),
	[COUNTER_HTTP_400] = HTTP(400),
	[COUNTER_HTTP_404] = HTTP(404),
	[COUNTER_HTTP_405] = HTTP(405),
	[COUNTER_HTTP_408] = HTTP(408),
	[COUNTER_HTTP_431] = HTTP(431),
	[COUNTER_HTTP_505] = HTTP(505),
	[COUNTER_TLS_OK] = TLS("ok", "tls_ok"),
	[COUNTER_TLS_BAD] = TLS("bad", "tls_bad"),
	[COUNTER_TLS_CERT] = TLS("certificate", "tls_certificate"),
	[COUNTER_TLS_TIMEOUT] = TLS("timeout", "tls_timeout"),
	[COUNTER_TLS_HANDSHAKING] = REACTOR_SERIES("tls_handshaking", NULL,
	    NULL, "tls_handshaking", NULL, GAUGE, 0,
	    "TLS handshakes begun and not yet done or failed (half-open)."),
	[COUNTER_TLS_KTLS_SEND] = KTLS("send", "tls_ktls_send"),
	[COUNTER_TLS_KTLS_RECV] = KTLS("receive", "tls_ktls_receive"),
};

/* Upper bounds in ns: 5 us to 10 s, about three per decade. */
const uint64_t counter_hist_bounds[COUNTER_HIST_BOUNDS] = {
	5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
	100000000, 250000000, 500000000,
	1000000000, 2500000000, 5000000000, 10000000000,
};

uint64_t
counter_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const struct counter_info *
counter_info(enum counter_id id)
{
	return &table[id];
}

void
counter_totals_add(struct counter_totals *t, const struct counter_block *b)
{
	for (unsigned id = 0; id < COUNTER_N; id++)
		t->v[id] += counter_get(b, id);
}

uint64_t
counter_sum(const struct counter_block *const *bs, unsigned n,
    enum counter_id id)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < n; i++)
		sum += counter_get(bs[i], id);
	return sum;
}
