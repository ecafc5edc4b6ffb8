/* systemd.c: systemd glue: sd_notify, the watchdog, socket activation. */
#include "systemd.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "reactor.h"
#include "util.h"

struct systemd_watchdog {
	struct reactor *const *rs;
	unsigned n;
	uint64_t half_usec;		/* ping at half the interval */
	uint64_t last_ping;		/* CLOCK_MONOTONIC, usec */
	uint64_t *loops;		/* each reactor's turns at the last ping */
	bool	withheld;		/* a ping is overdue: logged once */
};

static uint64_t
mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/*
 * Sends text to the service manager, waiting at most wait_ms for room.
 * sd_notify waits as long as the manager's queue is full (ten datagrams
 * by default, net.unix.max_dgram_qlen), and the thread that notifies
 * also takes the signals and the new connections: a manager slow to read
 * would freeze both, SIGTERM included. So the socket is non-blocking: a
 * STATUS= or WATCHDOG=1 that finds no room is dropped (the next follows
 * soon), READY=1 and the like wait a bounded time. A NOTIFY_SOCKET that
 * is not a path or an abstract name (vsock) goes to sd_notify as is.
 */
static void
notify_send(const char *text, int wait_ms)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pollfd pfd = { .events = POLLOUT };
	size_t n;

	if (path == NULL || path[0] == '\0')
		return;
	if (path[0] != '/' && path[0] != '@') {
		sd_notify(0, text);
		return;
	}
	if ((n = strlen(path)) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	pfd.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (pfd.fd < 0)
		return;
	if (connect(pfd.fd, (struct sockaddr *)&sa,
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) == 0 &&
	    send(pfd.fd, text, strlen(text), MSG_NOSIGNAL) < 0 &&
	    errno == EAGAIN && wait_ms > 0 && poll(&pfd, 1, wait_ms) > 0)
		(void)send(pfd.fd, text, strlen(text), MSG_NOSIGNAL);
	close(pfd.fd);
}

/* READY=1 and the like: the manager acts on them, worth a wait. */
#define NOTIFY_WAIT_MS	1000

void
systemd_ready(void)
{
	notify_send("READY=1", NOTIFY_WAIT_MS);
}

void
systemd_reloading(void)
{
	char text[64];

	snprintf(text, sizeof(text), "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
	    mono_usec());
	notify_send(text, NOTIFY_WAIT_MS);
}

void
systemd_stopping(void)
{
	notify_send("STOPPING=1", NOTIFY_WAIT_MS);
}

void
systemd_status(const char *text)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), "STATUS=%s", text);
	notify_send(buf, 0);
}

int
systemd_listen_fds(struct systemd_socket **out, const char **bad_name)
{
	char **names = NULL;
	struct systemd_socket *ss;
	int n, err = 0;

	*out = NULL;
	if ((n = sd_listen_fds_with_names(1, &names)) <= 0) {
		if (n < 0)
			errno = -n;
		return n < 0 ? -1 : 0;
	}
	ss = xcalloc((size_t)n, sizeof(*ss));
	for (int i = 0; i < n; i++) {
		ss[i].fd = SD_LISTEN_FDS_START + i;
		ss[i].name = names[i];	/* taken over */
		if (err == 0 &&
		    sd_is_socket(ss[i].fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			err = EPROTOTYPE;
			if (bad_name != NULL)
				*bad_name = ss[i].name;
		}
	}
	free(names);
	*out = ss;
	if (err != 0) {
		errno = err;
		return -1;
	}
	return n;
}

void
systemd_sockets_free(struct systemd_socket *ss, int n)
{
	if (ss == NULL)
		return;
	for (int i = 0; i < n; i++)
		free(ss[i].name);
	free(ss);
}

/* Makes a reactor turn its loop: an empty task through its mailbox. */
static void
watchdog_nudge_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	(void)arg;
	(void)st;
}

/* Remembers each reactor's turns and asks every one to turn again. */
static void
watchdog_snapshot(struct systemd_watchdog *w)
{
	for (unsigned i = 0; i < w->n; i++) {
		w->loops[i] = counter_get(&w->rs[i]->counters, COUNTER_LOOPS);
		reactor_post(w->rs[i], watchdog_nudge_task, NULL);
	}
}

struct systemd_watchdog *
systemd_watchdog_new(struct reactor *const *rs, unsigned n)
{
	struct systemd_watchdog *w;
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return NULL;
	w = xcalloc(1, sizeof(*w));
	w->rs = rs;
	w->n = n;
	w->half_usec = usec / 2;
	w->loops = xcalloc(n, sizeof(*w->loops));
	w->last_ping = mono_usec();
	watchdog_snapshot(w);
	log_info("watchdog: interval %.3f s, pinging every %.3f s while "
	    "every reactor turns", (double)usec / 1e6,
	    (double)w->half_usec / 1e6);
	return w;
}

void
systemd_watchdog_free(struct systemd_watchdog *w)
{
	if (w == NULL)
		return;
	free(w->loops);
	free(w);
}

unsigned
systemd_watchdog_tick_ms(const struct systemd_watchdog *w)
{
	uint64_t ms = w->half_usec / 4000;

	/* A quarter of the ping period, so a ping is never late by much. */
	return ms < 10 ? 10 : ms > 1000 ? 1000 : (unsigned)ms;
}

/* The first reactor that has not turned since the last ping, or -1. */
static int
watchdog_stuck_reactor(const struct systemd_watchdog *w)
{
	for (unsigned i = 0; i < w->n; i++)
		if (counter_get(&w->rs[i]->counters, COUNTER_LOOPS) ==
		    w->loops[i])
			return (int)i;
	return -1;
}

void
systemd_watchdog_tick(struct systemd_watchdog *w)
{
	uint64_t now = mono_usec();
	int stuck;

	if (now - w->last_ping < w->half_usec)
		return;
	if ((stuck = watchdog_stuck_reactor(w)) >= 0) {
		if (!w->withheld)
			log_err("watchdog: reactor=%d has not turned its loop "
			    "for %.1f s: withholding WATCHDOG=1", stuck,
			    (double)(now - w->last_ping) / 1e6);
		w->withheld = true;
		return;
	}
	if (w->withheld)
		log_warnx("watchdog: every reactor turns again: WATCHDOG=1 "
		    "resumes after %.1f s", (double)(now - w->last_ping) / 1e6);
	w->withheld = false;
	notify_send("WATCHDOG=1", 0);
	w->last_ping = now;
	watchdog_snapshot(w);
}
