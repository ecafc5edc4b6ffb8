/* stats.h: the stats line and STATUS=, written by walking the counter table. */
#ifndef ECHOROUTERD_STATS_H
#define ECHOROUTERD_STATS_H

#include <stddef.h>

struct reactor;
struct counter_block;
struct counter_totals;

/*
 * Writes the stats line into buf, truncated to len: "stats", then
 * " key=value" for every counter with a stats key, in the table's order
 * (the reactors' summed, the acceptor's from acceptor, which may be NULL),
 * with " per_reactor=a,b,c" after a counter listed per reactor. Reads the
 * counters without locks. Any thread.
 */
void	stats_format(char *buf, size_t len, struct reactor *const *rs,
	    unsigned n, const struct counter_block *acceptor);

/* Sets t to the n reactors' counters summed. Any thread. */
void	stats_totals(struct counter_totals *t, struct reactor *const *rs,
	    unsigned n);

/*
 * Writes systemd's STATUS= text into buf, truncated to len: for each
 * reactor counter with a status noun, in the table's order and joined by
 * ", ", a gauge as "N noun" and a counter as its rate since *last, secs
 * seconds ago, "R noun/s"; then " (per reactor: a,b,c)" if it is listed
 * per reactor. Sets *last to the totals now. Any thread.
 */
void	stats_format_status(char *buf, size_t len, struct reactor *const *rs,
	    unsigned n, struct counter_totals *last, double secs);

#endif
