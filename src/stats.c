/* stats.c: formats counter snapshots for the log and for systemd. */
#include "stats.h"

#include <stdarg.h>
#include <stdio.h>

#include "acceptor.h"
#include "reactor.h"

struct out {
	char	*buf;
	size_t	len;
	size_t	used;
};

static void out_add(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
out_add(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->used >= o->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->used += (size_t)n;
}

static void
out_per_reactor(struct out *o, struct reactor *const *rs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		out_add(o, "%s%llu", i ? "," : "",
		    (unsigned long long)REACTOR_STAT_GET(rs[i]->stats.conns));
}

void
stats_format(char *buf, size_t len, struct reactor *const *rs, unsigned n,
    const struct acceptor_stats *as)
{
	unsigned long long conns = 0, in = 0, outb = 0, msgs = 0;
	unsigned long long local = 0, remote = 0;
	unsigned long long closed[CONN_CLOSE_N] = { 0 };
	unsigned long long errs[REACTOR_ERR_N] = { 0 };
	struct out o = { buf, len, 0 };

	buf[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		const struct reactor_stats *s = &rs[i]->stats;

		conns += REACTOR_STAT_GET(s->conns);
		in += REACTOR_STAT_GET(s->bytes_in);
		outb += REACTOR_STAT_GET(s->bytes_out);
		msgs += REACTOR_STAT_GET(s->messages);
		local += REACTOR_STAT_GET(s->routed_local);
		remote += REACTOR_STAT_GET(s->routed_remote);
		for (int k = 0; k < CONN_CLOSE_N; k++)
			closed[k] += REACTOR_STAT_GET(s->closed[k]);
		for (int k = 0; k < REACTOR_ERR_N; k++)
			errs[k] += REACTOR_STAT_GET(s->errors[k]);
	}
	out_add(&o, "stats conns=%llu per_reactor=", conns);
	out_per_reactor(&o, rs, n);
	out_add(&o, " accepted=%llu refused_max=%llu refused_fd=%llu "
	    "refused_ip=%llu refused_rate=%llu",
	    (unsigned long long)as->accepted,
	    (unsigned long long)as->refused_max,
	    (unsigned long long)as->refused_fd,
	    (unsigned long long)as->refused_ip,
	    (unsigned long long)as->refused_rate);
	for (int k = 0; k < CONN_CLOSE_N; k++)
		out_add(&o, " closed_%s=%llu", conn_close_reason_name(k),
		    closed[k]);
	out_add(&o, " messages=%llu bytes_in=%llu bytes_out=%llu", msgs, in,
	    outb);
	out_add(&o, " routed_local=%llu routed_remote=%llu", local, remote);
	for (int k = 0; k < REACTOR_ERR_N; k++)
		out_add(&o, " err_%d=%llu", reactor_err_code(k), errs[k]);
}

void
stats_format_status(char *buf, size_t len, struct reactor *const *rs,
    unsigned n, double msgs_per_sec)
{
	unsigned long long conns = 0;
	struct out o = { buf, len, 0 };

	buf[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		conns += REACTOR_STAT_GET(rs[i]->stats.conns);
	out_add(&o, "%llu connections (per reactor: ", conns);
	out_per_reactor(&o, rs, n);
	out_add(&o, "), %.0f messages/s", msgs_per_sec);
}

unsigned long long
stats_messages(struct reactor *const *rs, unsigned n)
{
	unsigned long long msgs = 0;

	for (unsigned i = 0; i < n; i++)
		msgs += REACTOR_STAT_GET(rs[i]->stats.messages);
	return msgs;
}
