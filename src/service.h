/* service.h: systemd glue: notifications, the watchdog, socket activation. */
#ifndef ECHOROUTERD_SERVICE_H
#define ECHOROUTERD_SERVICE_H

#include <stdint.h>

struct reactor;

/*
 * Each sends one notification to $NOTIFY_SOCKET and is harmless without
 * it. Main thread.
 */
void	service_ready(void);
void	service_reloading(void);	/* RELOADING=1 with MONOTONIC_USEC */
void	service_stopping(void);
void	service_status(const char *text);

/* A socket passed by the service manager and the name it was given. */
struct service_socket {
	int	fd;
	char	*name;		/* FileDescriptorName=, "unknown" if none */
};

/*
 * Takes the sockets passed by socket activation (LISTEN_FDS, LISTEN_PID,
 * LISTEN_FDNAMES) and clears those variables. Returns how many there are
 * (0 without socket activation), *out then an array the caller frees with
 * service_sockets_free; or -1 with errno set, EPROTOTYPE when a passed fd
 * is not a listening stream socket (*bad_name then names it, if given).
 * Main thread, once, before any other thread starts.
 */
int	service_listen_fds(struct service_socket **out, const char **bad_name);
void	service_sockets_free(struct service_socket *ss, int n);

/*
 * The watchdog asked for by WATCHDOG_USEC (and WATCHDOG_PID), or NULL when
 * there is none. It borrows the n reactors in rs. Main thread.
 */
struct service_watchdog *service_watchdog_new(struct reactor *const *rs,
	    unsigned n);
void	service_watchdog_free(struct service_watchdog *w);

/* How often service_watchdog_tick should run, in milliseconds. */
unsigned service_watchdog_tick_ms(const struct service_watchdog *w);

/*
 * Sends WATCHDOG=1 when half the interval has passed since the last one and
 * every reactor has turned its loop since then; a reactor that has not
 * withholds the ping (logged once per stall), so a stuck reactor lets the
 * service manager's timer run out. Main thread.
 */
void	service_watchdog_tick(struct service_watchdog *w);

#endif
