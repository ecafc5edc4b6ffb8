/* stats.h: one-line summaries of the reactors' and acceptor's counters. */
#ifndef ECHOROUTERD_STATS_H
#define ECHOROUTERD_STATS_H

#include <stddef.h>

struct reactor;
struct acceptor_stats;

/*
 * Writes the stats line ("conns=.. per_reactor=a,b,c accepted=.. ...")
 * into buf, truncated to len. Reads the counters without locks. Any thread.
 */
void	stats_format(char *buf, size_t len, struct reactor *const *rs,
	    unsigned n, const struct acceptor_stats *as);

/* "conns=N (a,b,c) msgs/s=R": short, for systemd's STATUS=. */
void	stats_format_status(char *buf, size_t len, struct reactor *const *rs,
	    unsigned n, double msgs_per_sec);

/* Messages handled so far by all reactors. */
unsigned long long stats_messages(struct reactor *const *rs, unsigned n);

#endif
