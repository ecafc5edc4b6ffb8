/* metrics.h: the Prometheus text exposition of every counter, histogram and gauge. */
#ifndef ECHOROUTERD_METRICS_H
#define ECHOROUTERD_METRICS_H

#include <stdbool.h>

struct buf;
struct config;
struct counter_block;
struct reactor;

/*
 * What a scrape reads: the n reactors rs, the acceptor's counters (NULL:
 * none) and the names of the listeners that run, from cf, the configuration
 * they were bound with (copied; reloads do not change them). Also takes the
 * process's start time. Main thread, before any listener accepts; rs must
 * outlive the reactors.
 */
void	metrics_init(struct reactor *const *rs, unsigned n,
	    const struct counter_block *acceptor, const struct config *cf);

/* A reload was tried: ok, or it failed. Main thread. */
void	metrics_reloaded(bool ok);

/*
 * Appends the exposition (text format 0.0.4) to out: every family with
 * its HELP and TYPE, named echorouterd_... (process_... for the process).
 * Reads other threads' counters without locks; takes the SMPP account
 * lock briefly. Any thread, after metrics_init.
 */
void	metrics_render(struct buf *out);

#endif
