/* service.h: the systemd contract: readiness, status, stopping notifications. */
#ifndef ECHOROUTERD_SERVICE_H
#define ECHOROUTERD_SERVICE_H

/*
 * Each sends one notification to $NOTIFY_SOCKET and is harmless without
 * it. Main thread.
 */
void	service_ready(void);
void	service_reloading(void);	/* RELOADING=1 with MONOTONIC_USEC */
void	service_stopping(void);
void	service_status(const char *text);

#endif
