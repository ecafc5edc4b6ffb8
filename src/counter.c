/* counter.c: the counter table (name, label, kind, help, stats key) and its sums. */
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
	REACTOR_SERIES("errors_total", "code", #code, "err_" #code,	\
	    NULL, COUNTER, 0, "Router error replies sent, by code.")

static const struct counter_info table[COUNTER_N] = {
	[COUNTER_CONNS] = REACTOR_SERIES("conns", NULL, NULL, "conns",
	    "connections", GAUGE, COUNTER_F_PER_REACTOR,
	    "Connections open now."),
	[COUNTER_ACCEPTOR_ACCEPTED] = ACCEPTOR_SERIES(
	    "acceptor_accepted_total", NULL, NULL, "accepted",
	    "Connections the acceptor handed to a reactor."),
	[COUNTER_REFUSED_MAX] = REFUSED(max),
	[COUNTER_REFUSED_FD] = REFUSED(fd),
	[COUNTER_REFUSED_IP] = REFUSED(ip),
	[COUNTER_REFUSED_RATE] = REFUSED(rate),
	[COUNTER_CLOSED_PEER] = CLOSED("peer"),
	[COUNTER_CLOSED_RESET] = CLOSED("reset"),
	[COUNTER_CLOSED_IDLE] = CLOSED("idle"),
	[COUNTER_CLOSED_SLOW] = CLOSED("slow-consumer"),
	[COUNTER_CLOSED_PROTOCOL] = CLOSED("protocol"),
	[COUNTER_CLOSED_QUIT] = CLOSED("quit"),
	[COUNTER_CLOSED_SHUTDOWN] = CLOSED("shutdown"),
	[COUNTER_CLOSED_TIMEOUT] = CLOSED("timeout"),
	[COUNTER_MESSAGES] = REACTOR_SERIES("messages_total", NULL, NULL,
	    "messages", "messages", COUNTER, 0,
	    "Whole messages handled."),
	[COUNTER_BYTES_IN] = REACTOR_COUNTER("bytes_in_total", "bytes_in",
	    "Bytes read from clients."),
	[COUNTER_BYTES_OUT] = REACTOR_COUNTER("bytes_out_total", "bytes_out",
	    "Bytes written to clients."),
	[COUNTER_ROUTED_LOCAL] = REACTOR_COUNTER("routed_local_total",
	    "routed_local", "Messages delivered on the sender's reactor."),
	[COUNTER_ROUTED_REMOTE] = REACTOR_COUNTER("routed_remote_total",
	    "routed_remote",
	    "Messages delivered through another reactor's mailbox."),
	[COUNTER_ROUTED_STORED] = REACTOR_COUNTER("routed_stored_total",
	    "routed_stored",
	    "Messages from the store handed to a recipient's session."),
	[COUNTER_ROUTED_NODE] = REACTOR_COUNTER("routed_node_total",
	    "routed_node",
	    "Messages from another node handed to a recipient's session."),
	[COUNTER_ERR_400] = ERR(400),
	[COUNTER_ERR_401] = ERR(401),
	[COUNTER_ERR_403] = ERR(403),
	[COUNTER_ERR_404] = ERR(404),
	[COUNTER_ERR_409] = ERR(409),
	[COUNTER_ERR_413] = ERR(413),
	[COUNTER_ERR_503] = ERR(503),
	[COUNTER_ACCEPTED] = REACTOR_COUNTER("accepted_total", NULL,
	    "Connections reactors took on from the acceptor."),
	[COUNTER_LOOPS] = REACTOR_COUNTER("loops_total", NULL,
	    "Reactor loop turns."),
};

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
