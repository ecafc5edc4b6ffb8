/* acceptor.c: listening sockets, accept4 until EAGAIN, round-robin hand-off. */
#include "acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "http_out.h"
#include "iplimit.h"
#include "log.h"
#include "net.h"
#include "proto.h"
#include "reactor.h"
#include "transport.h"
#include "util.h"

#define ACCEPT_BUDGET	1024		/* accepts per wakeup per listener */
#define ACCEPT_BACKLOG	4096
#define PAUSE_MS	100		/* listeners off after fd exhaustion */
#define SIGFD_TAG	UINT64_MAX

struct listener {
	int	fd;
	bool	adopted;		/* passed by systemd */
	char	name[CONFIG_NAME_MAX + 1];
	const struct proto *proto;
	/*
	 * A reference to the transport context new clients get (its type's:
	 * plain, TLS). The type is fixed at start; its context (a TLS pair)
	 * follows reloads (acceptor_set_config).
	 */
	struct transport_ctx *xp;
};

struct acceptor {
	struct config *cf;
	struct reactor **rs;
	unsigned nrs;
	unsigned next;			/* round-robin position */
	int	epfd;
	int	spare_fd;		/* given up to shed clients on EMFILE */
	bool	running;
	bool	paused;
	uint64_t resume_ms;
	uint64_t last_refuse_log_ms;
	struct listener *ls;
	size_t	nls;
	struct iplimit *ips;
	uint64_t last_gc_ms;
	struct counter_block counters;	/* read by any thread */
};


struct acceptor *
acceptor_new(struct config *cf, struct reactor **rs, unsigned n)
{
	/* Aligned for its counters, which have cache lines of their own. */
	struct acceptor *a = xzalloc_aligned(CACHE_LINE, sizeof(*a));

	a->cf = config_ref(cf);
	a->rs = rs;
	a->nrs = n;
	a->nls = cf->nlisteners;
	a->ls = xcalloc(a->nls, sizeof(*a->ls));
	for (size_t i = 0; i < a->nls; i++) {
		a->ls[i].fd = -1;
		memcpy(a->ls[i].name, cf->listeners[i].name,
		    sizeof(a->ls[i].name));
		a->ls[i].proto = cf->listeners[i].proto;
		a->ls[i].xp = transport_ctx_ref(cf->listeners[i].xp_ctx);
	}
	a->ips = iplimit_new();
	a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if ((a->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		fatal("epoll_create1");
	return a;
}

void
acceptor_free(struct acceptor *a)
{
	if (a == NULL)
		return;
	acceptor_close_listeners(a);
	if (a->spare_fd >= 0)
		close(a->spare_fd);
	close(a->epfd);
	for (size_t i = 0; i < a->nls; i++)
		transport_ctx_unref(a->ls[i].xp);
	free(a->ls);
	iplimit_free(a->ips);
	config_unref(a->cf);
	free(a);
}

int
acceptor_adopt(struct acceptor *a, const char *name, int fd)
{
	for (size_t i = 0; i < a->nls; i++) {
		if (strcmp(a->ls[i].name, name) != 0)
			continue;
		if (a->ls[i].fd >= 0) {
			errno = EEXIST;
			return -1;
		}
		if (net_set_nonblock_cloexec(fd) < 0)
			return -1;
		a->ls[i].fd = fd;
		a->ls[i].adopted = true;
		return 0;
	}
	errno = ENOENT;
	return -1;
}

static int
listener_watch(struct acceptor *a, size_t i, int op)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = i };

	return epoll_ctl(a->epfd, op, a->ls[i].fd, &ev);
}

int
acceptor_listen(struct acceptor *a)
{
	char where[80];

	for (size_t i = 0; i < a->nls; i++) {
		struct listener *l = &a->ls[i];
		const struct listener_conf *lc = &a->cf->listeners[i];

		if (l->fd < 0 &&
		    (l->fd = net_listen(lc->address, lc->port,
		    ACCEPT_BACKLOG)) < 0) {
			log_warn("listener %s: cannot listen on %s port %u",
			    l->name, lc->address, lc->port);
			return -1;
		}
		if (listener_watch(a, i, EPOLL_CTL_ADD) < 0) {
			log_warn("listener %s: epoll_ctl", l->name);
			return -1;
		}
		if (net_local_name(l->fd, where, sizeof(where)) < 0)
			strcpy(where, "?");
		http_out_own_port((unsigned)net_local_port(l->fd));
		log_info("listening name=%s protocol=%s on=%s port=%d%s",
		    l->name, l->proto->name, where, net_local_port(l->fd),
		    l->adopted ? " (socket activation)" : "");
	}
	return 0;
}

void
acceptor_close_listeners(struct acceptor *a)
{
	for (size_t i = 0; i < a->nls; i++) {
		if (a->ls[i].fd >= 0) {
			close(a->ls[i].fd);
			a->ls[i].fd = -1;
		}
	}
}

/* Logs a refusal at most once a second. */
static void
acceptor_log_refusal(struct acceptor *a, const char *why)
{
	const struct counter_block *k = &a->counters;
	uint64_t now = mono_ms();

	if (now - a->last_refuse_log_ms < 1000)
		return;
	a->last_refuse_log_ms = now;
	log_warnx("refusing clients: %s (refused so far: %llu at "
	    "max_connections, %llu out of descriptors, %llu per address, "
	    "%llu by rate)", why,
	    (unsigned long long)counter_get(k, COUNTER_REFUSED_MAX),
	    (unsigned long long)counter_get(k, COUNTER_REFUSED_FD),
	    (unsigned long long)counter_get(k, COUNTER_REFUSED_IP),
	    (unsigned long long)counter_get(k, COUNTER_REFUSED_RATE));
}

/*
 * Stops watching the listeners for PAUSE_MS. Also when already paused: a
 * resume that could not watch every listener leaves the others watched.
 */
static void
acceptor_pause(struct acceptor *a)
{
	for (size_t i = 0; i < a->nls; i++)
		if (a->ls[i].fd >= 0)
			epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->ls[i].fd, NULL);
	a->paused = true;
	a->resume_ms = mono_ms() + PAUSE_MS;
}

/*
 * Watches the listeners again. One that cannot be watched is logged and
 * tried again PAUSE_MS later, so that no listener stays off silently.
 */
static void
acceptor_resume(struct acceptor *a)
{
	bool failed = false;

	for (size_t i = 0; i < a->nls; i++) {
		if (a->ls[i].fd < 0 || listener_watch(a, i, EPOLL_CTL_ADD) == 0 ||
		    errno == EEXIST)
			continue;
		log_warn("listener %s: cannot watch it again, retrying in %d ms",
		    a->ls[i].name, PAUSE_MS);
		failed = true;
	}
	a->paused = failed;
	if (failed)
		a->resume_ms = mono_ms() + PAUSE_MS;
}

/*
 * Out of descriptors: give up the spare one to accept the waiting client
 * and close it at once, so it is told rather than left hanging and the
 * listener does not stay readable in a busy loop. Without a spare, stop
 * watching the listeners for a moment.
 */
static void
acceptor_shed(struct acceptor *a, struct listener *l)
{
	int fd;

	counter_add(&a->counters, COUNTER_REFUSED_FD, 1);
	acceptor_log_refusal(a, "out of file descriptors");
	if (a->spare_fd >= 0) {
		close(a->spare_fd);
		fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close(fd);
		a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (a->spare_fd < 0) {
		a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		acceptor_pause(a);
	}
}

/* Whether l's clients handshake first, in limited numbers (TLS). */
static bool
acceptor_handshakes(const struct listener *l)
{
	return l->xp != NULL && l->xp->type->admit != NULL;
}

/* Checks the per-address limits; false: refused (and fd closed). */
static bool
acceptor_admit(struct acceptor *a, int fd, const struct sockaddr *sa,
    bool tls, struct iplimit_entry **ip)
{
	const struct limits *lim = &a->cf->limits;
	unsigned max = lim->max_connections_per_ip;
	enum iplimit_verdict v;

	/* A cap on an address's handshakes needs its entry: count, no cap. */
	if (tls && max == 0 && lim->max_handshakes_per_ip > 0)
		max = UINT_MAX;
	v = iplimit_admit(a->ips, sa, max, lim->connection_rate_per_ip,
	    mono_ms(), ip);
	if (v == IPLIMIT_OK)
		return true;
	close(fd);
	if (v == IPLIMIT_TOO_MANY) {
		counter_add(&a->counters, COUNTER_REFUSED_IP, 1);
		acceptor_log_refusal(a, "max_connections_per_ip reached");
	} else {
		counter_add(&a->counters, COUNTER_REFUSED_RATE, 1);
		acceptor_log_refusal(a, "connection_rate_per_ip exceeded");
	}
	return false;
}

/*
 * Takes a half-open handshake's place for a client of l's transport (one
 * with a handshake: TLS) from ip; false: refused (fd closed, ip
 * released), so that clients that never finish their handshakes cannot
 * take the memory of as many as they like.
 */
static bool
acceptor_admit_handshake(struct acceptor *a, struct listener *l, int fd,
    struct iplimit_entry *ip)
{
	const struct limits *lim = &a->cf->limits;
	int v;

	if (!acceptor_handshakes(l))
		return true;
	v = l->xp->type->admit(ip, lim->max_handshakes,
	    lim->max_handshakes_per_ip);
	if (v == TRANSPORT_ADMIT_OK)
		return true;
	close(fd);
	iplimit_release(ip);
	if (v == TRANSPORT_ADMIT_TOO_MANY) {
		counter_add(&a->counters, COUNTER_REFUSED_HANDSHAKES, 1);
		acceptor_log_refusal(a, "max_handshakes reached");
	} else {
		counter_add(&a->counters, COUNTER_REFUSED_HANDSHAKES_IP, 1);
		acceptor_log_refusal(a, "max_handshakes_per_ip reached");
	}
	return false;
}

/*
 * The kernel memory one client may hold: limits.socket_send_buffer and
 * socket_receive_buffer (the kernel doubles them for its bookkeeping,
 * and caps them at net.core.wmem_max / rmem_max).
 */
static void
acceptor_socket_buffers(struct acceptor *a, int fd)
{
	const struct limits *l = &a->cf->limits;
	int v;

	if (l->socket_send_buffer != 0) {
		v = (int)l->socket_send_buffer;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	}
	if (l->socket_receive_buffer != 0) {
		v = (int)l->socket_receive_buffer;
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	}
}

static void
acceptor_hand_off(struct acceptor *a, struct listener *l, int fd,
    const struct sockaddr *sa)
{
	struct iplimit_entry *ip;
	int one = 1;

	if (atomic_load_explicit(&conn_live, memory_order_relaxed) >=
	    a->cf->max_connections) {
		close(fd);
		counter_add(&a->counters, COUNTER_REFUSED_MAX, 1);
		acceptor_log_refusal(a, "max_connections reached");
		return;
	}
	if (!acceptor_admit(a, fd, sa, acceptor_handshakes(l), &ip) ||
	    !acceptor_admit_handshake(a, l, fd, ip))
		return;
	/* Replies are small and already batched: send them at once. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	acceptor_socket_buffers(a, fd);
	atomic_fetch_add_explicit(&conn_live, 1, memory_order_relaxed);
	counter_add(&a->counters, COUNTER_ACCEPTOR_ACCEPTED, 1);
	conn_handoff(a->rs[a->next], fd, l->proto, (unsigned)(l - a->ls),
	    transport_ctx_ref(l->xp), ip);
	a->next = (a->next + 1) % a->nrs;
}

static void
acceptor_accept(struct acceptor *a, struct listener *l)
{
	for (int i = 0; i < ACCEPT_BUDGET && l->fd >= 0; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			acceptor_hand_off(a, l, fd, (struct sockaddr *)&ss);
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
			continue;
		case EAGAIN:
			return;
		case EMFILE:
		case ENFILE:
			acceptor_shed(a, l);
			return;
		default:
			log_warn("listener %s: accept", l->name);
			acceptor_pause(a);
			return;
		}
	}
}

static void
acceptor_signal(struct acceptor *a, int sigfd,
    const struct acceptor_hooks *hooks)
{
	struct signalfd_siginfo si;

	(void)a;
	while (read(sigfd, &si, sizeof(si)) == sizeof(si))
		hooks->on_signal((int)si.ssi_signo, hooks->arg);
}

void
acceptor_run(struct acceptor *a, int sigfd, const struct acceptor_hooks *hooks)
{
	struct epoll_event evs[16], sev = { .events = EPOLLIN };
	unsigned tick_ms = hooks->tick_ms ? hooks->tick_ms : 1000;
	uint64_t next_tick = mono_ms() + tick_ms;

	sev.data.u64 = SIGFD_TAG;
	if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, sigfd, &sev) < 0)
		fatal("epoll_ctl signalfd");
	a->running = true;
	while (a->running) {
		uint64_t now = mono_ms(), wake = next_tick;
		int n;

		if (a->paused && a->resume_ms < wake)
			wake = a->resume_ms;
		n = epoll_wait(a->epfd, evs, 16, wake > now ?
		    (int)(wake - now) : 0);
		if (n < 0 && errno != EINTR)
			fatal("acceptor epoll_wait");
		for (int i = 0; i < n && a->running; i++) {
			if (evs[i].data.u64 == SIGFD_TAG)
				acceptor_signal(a, sigfd, hooks);
			else if (!a->paused)
				acceptor_accept(a, &a->ls[evs[i].data.u64]);
		}
		now = mono_ms();
		if (a->paused && now >= a->resume_ms)
			acceptor_resume(a);
		if (now - a->last_gc_ms >= 1000) {
			a->last_gc_ms = now;
			iplimit_gc(a->ips, a->cf->limits.connection_rate_per_ip,
			    now);
		}
		if (now >= next_tick) {
			next_tick = now + tick_ms;
			if (hooks->on_tick != NULL)
				hooks->on_tick(hooks->arg);
		}
	}
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, sigfd, NULL);
}

void
acceptor_stop(struct acceptor *a)
{
	a->running = false;
}

void
acceptor_set_config(struct acceptor *a, struct config *cf)
{
	/* New clients of a TLS listener get the reloaded pair. */
	for (size_t i = 0; i < a->nls; i++) {
		const struct listener_conf *lc =
		    config_find_listener(cf, a->ls[i].name);

		if (a->ls[i].xp == NULL || lc == NULL || lc->xp_ctx == NULL ||
		    lc->xp_ctx->type != a->ls[i].xp->type)
			continue;
		transport_ctx_unref(a->ls[i].xp);
		a->ls[i].xp = transport_ctx_ref(lc->xp_ctx);
	}
	config_unref(a->cf);
	a->cf = config_ref(cf);
}

const struct counter_block *
acceptor_counters(const struct acceptor *a)
{
	return &a->counters;
}
