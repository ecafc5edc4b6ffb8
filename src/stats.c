/* stats.c: the stats line and STATUS=, written by walking the counter table. */
#include "stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "counter.h"
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
out_per_reactor(struct out *o, struct reactor *const *rs, unsigned n,
    enum counter_id id)
{
	for (unsigned i = 0; i < n; i++)
		out_add(o, "%s%llu", i ? "," : "",
		    (unsigned long long)counter_get(&rs[i]->counters, id));
}

void
stats_totals(struct counter_totals *t, struct reactor *const *rs,
    unsigned n)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < n; i++)
		counter_totals_add(t, &rs[i]->counters);
}

void
stats_format(char *buf, size_t len, struct reactor *const *rs, unsigned n,
    const struct counter_block *acceptor)
{
	struct counter_totals t;
	struct out o = { buf, len, 0 };

	buf[0] = '\0';
	stats_totals(&t, rs, n);
	if (acceptor != NULL)
		counter_totals_add(&t, acceptor);
	out_add(&o, "stats");
	for (unsigned id = 0; id < COUNTER_N; id++) {
		const struct counter_info *ci = counter_info(id);

		if (ci->key == NULL)
			continue;
		out_add(&o, " %s=%llu", ci->key, (unsigned long long)t.v[id]);
		if (ci->flags & COUNTER_F_PER_REACTOR) {
			out_add(&o, " per_reactor=");
			out_per_reactor(&o, rs, n, id);
		}
	}
}

void
stats_format_status(char *buf, size_t len, struct reactor *const *rs,
    unsigned n, struct counter_totals *last, double secs)
{
	struct counter_totals t;
	struct out o = { buf, len, 0 };
	const char *sep = "";

	buf[0] = '\0';
	stats_totals(&t, rs, n);
	for (unsigned id = 0; id < COUNTER_N; id++) {
		const struct counter_info *ci = counter_info(id);
		double rate;

		if (ci->status == NULL)
			continue;
		if (ci->kind == COUNTER_KIND_GAUGE) {
			out_add(&o, "%s%llu %s", sep,
			    (unsigned long long)t.v[id], ci->status);
		} else {
			rate = secs > 0 ?
			    (double)(t.v[id] - last->v[id]) / secs : 0;
			out_add(&o, "%s%.0f %s/s", sep, rate, ci->status);
		}
		if (ci->flags & COUNTER_F_PER_REACTOR) {
			out_add(&o, " (per reactor: ");
			out_per_reactor(&o, rs, n, id);
			out_add(&o, ")");
		}
		sep = ", ";
	}
	*last = t;
}
