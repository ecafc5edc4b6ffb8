/* acceptor.h: the main thread's loop: listeners, signals, round-robin hand-off. */
#ifndef ECHOROUTERD_ACCEPTOR_H
#define ECHOROUTERD_ACCEPTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "counter.h"

struct acceptor;
struct config;
struct reactor;

struct acceptor_hooks {
	void	(*on_signal)(int signo, void *arg);
	void	(*on_tick)(void *arg);	/* every tick_ms */
	void	*arg;
	unsigned tick_ms;		/* 0: once a second */
};

/*
 * An acceptor handing connections round-robin to the n reactors in rs
 * (which it borrows). It holds a reference to cf. Main thread only, as is
 * everything else here.
 */
struct acceptor *acceptor_new(struct config *cf, struct reactor **rs,
	    unsigned n);
void	acceptor_free(struct acceptor *a);

/*
 * Adopts an already listening socket (socket activation) for the listener
 * named name; the acceptor owns fd from then on. -1 with errno ENOENT if cf
 * has no such listener, EEXIST if it already has a socket (fd is then left
 * to the caller).
 */
int	acceptor_adopt(struct acceptor *a, const char *name, int fd);

/*
 * Binds every listener not adopted. 0, or -1 after logging which one failed.
 * Logs each listener's address, port 0 resolved to the port bound.
 */
int	acceptor_listen(struct acceptor *a);

/* Runs until acceptor_stop; signals from sigfd go to hooks->on_signal. */
void	acceptor_run(struct acceptor *a, int sigfd,
	    const struct acceptor_hooks *hooks);

/* Makes acceptor_run return after the current event. */
void	acceptor_stop(struct acceptor *a);

/* Closes every listening socket: no new clients. */
void	acceptor_close_listeners(struct acceptor *a);

/* Takes a new configuration (max_connections applies at once). */
void	acceptor_set_config(struct acceptor *a, struct config *cf);

/*
 * The acceptor's counters (COUNTER_SCOPE_ACCEPTOR: accepted, refused_*),
 * written by the main thread; any thread may read them with counter_get
 * for as long as a lives.
 */
const struct counter_block *acceptor_counters(const struct acceptor *a);

#endif
