/* systemd.h: systemd glue: notifications, the watchdog, socket activation. */
#ifndef ECHOROUTERD_SYSTEMD_H
#define ECHOROUTERD_SYSTEMD_H

#include <stdint.h>

struct reactor;

/*
 * Each sends one notification to $NOTIFY_SOCKET and is harmless without
 * it. Main thread.
 */
void	systemd_ready(void);
void	systemd_reloading(void);	/* RELOADING=1 with MONOTONIC_USEC */
void	systemd_stopping(void);
void	systemd_status(const char *text);

/* A socket passed by the service manager and the name it was given. */
struct systemd_socket {
	int	fd;
	char	*name;		/* FileDescriptorName=, "unknown" if none */
};

/*
 * Takes the sockets passed by socket activation (LISTEN_FDS, LISTEN_PID,
 * LISTEN_FDNAMES) and clears those variables. Returns how many there are
 * (0 without socket activation), *out then an array the caller frees with
 * systemd_sockets_free; or -1 with errno set, EPROTOTYPE when a passed fd
 * is not a listening stream socket (*bad_name then names it, if given).
 * Main thread, once, before any other thread starts.
 */
int	systemd_listen_fds(struct systemd_socket **out, const char **bad_name);
void	systemd_sockets_free(struct systemd_socket *ss, int n);

/*
 * The watchdog asked for by WATCHDOG_USEC (and WATCHDOG_PID), or NULL when
 * there is none. It borrows the n reactors in rs. Main thread.
 */
struct systemd_watchdog *systemd_watchdog_new(struct reactor *const *rs,
	    unsigned n);
void	systemd_watchdog_free(struct systemd_watchdog *w);

/* How often systemd_watchdog_tick should run, in milliseconds. */
unsigned systemd_watchdog_tick_ms(const struct systemd_watchdog *w);

/*
 * Sends WATCHDOG=1 when half the interval has passed since the last one and
 * every reactor has turned its loop since then; a reactor that has not
 * withholds the ping (logged once per stall), so a stuck reactor lets the
 * service manager's timer run out. Main thread.
 */
void	systemd_watchdog_tick(struct systemd_watchdog *w);

#endif
