/* main.c: options, start-up order, signals, reload and shutdown. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "acceptor.h"
#include "cluster.h"
#include "config.h"
#include "counter.h"
#include "fault.h"
#include "http_out.h"
#include "log.h"
#include "metrics.h"
#include "proto.h"
#include "transport_tls.h"
#include "deliver.h"
#include "reactor.h"
#include "service.h"
#include "store.h"
#include "systemd.h"
#include "upstream.h"
#include "stats.h"
#include "util.h"
#include "version.h"

#ifndef VERSION
#define VERSION "0.1.0"
#endif

#define STATUS_INTERVAL	5	/* seconds between STATUS= updates */
/* Service threads the daemon may run: the store's shards and the cluster's. */
#define DAEMON_SERVICES_MAX (CONFIG_SHARDS_MAX + 4)

struct options {
	const char *config_path;
	bool	check_only;
	bool	debug;
};

struct daemon {
	struct options opt;
	struct config *cf;
	struct reactor **rs;
	unsigned nrs;
	/* Service threads (the store, the cluster bridge), in start order. */
	struct service *svcs[DAEMON_SERVICES_MAX];
	unsigned nsvcs;
	struct acceptor *acc;
	struct systemd_watchdog *wd;	/* NULL: no watchdog asked for */
	bool	fault_hook;		/* test-only SIGUSR2 stall armed */
	struct systemd_socket *socks;	/* passed by socket activation */
	int	nsocks;
	int	sigfd;
	struct counter_totals last_totals;	/* at the last STATUS= */
	struct timespec last_status;
	/* Giving freed memory back after a burst (give_back_memory). */
	uint64_t trim_bytes;		/* bytes in + out at the last tick */
	uint64_t trim_conns;		/* connections open then */
	uint64_t trim_ms;		/* when */
	uint64_t trimmed_ms;		/* the last trim */
	bool	trim_busy;		/* a busy tick since the last trim */
	bool	trim_left;		/* clients left since the last trim */
	bool	trim_burst;		/* the last trim ended a burst */
};

static _Noreturn void
usage(FILE *f, int status)
{
	fprintf(f, "usage: echorouterd [-dhtV] [-c file]\n"
	    "  -c file  configuration file (default %s)\n"
	    "  -d       debug logging\n"
	    "  -h       this help\n"
	    "  -t       check the configuration and exit\n"
	    "  -V       print the version and build features, and exit\n",
	    CONFIG_DEFAULT_PATH);
	exit(status);
}

static void
parse_options(int argc, char **argv, struct options *opt)
{
	int ch;

	opt->config_path = CONFIG_DEFAULT_PATH;
	while ((ch = getopt(argc, argv, "c:dhtV")) != -1) {
		switch (ch) {
		case 'c':
			opt->config_path = optarg;
			break;
		case 'd':
			opt->debug = true;
			break;
		case 'h':
			usage(stdout, 0);
		case 't':
			opt->check_only = true;
			break;
		case 'V':
			printf("%s\n", version_line());
			exit(0);
		default:
			usage(stderr, 1);
		}
	}
	if (optind != argc)
		usage(stderr, 1);
}

/* Logs each line of a config_load error text. */
static void
log_config_errors(char *errors)
{
	char *line, *save = NULL;

	for (line = strtok_r(errors, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		log_err("%s", line);
}

static struct config *
load_config_or_exit(const char *path)
{
	char *errors = NULL;
	struct config *cf = config_load(path, &errors);

	if (cf == NULL) {
		log_config_errors(errors);
		free(errors);
		exit(1);
	}
	return cf;
}

static int
block_signals(bool fault_hook)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	if (fault_hook)
		sigaddset(&set, SIGUSR2);
	/* Blocked before threads start, so every thread inherits it. */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		fatalx("cannot block signals");
	if ((fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		fatal("signalfd");
	return fd;
}

static void
start_reactors(struct daemon *d)
{
	d->nrs = d->cf->dispatchers;
	d->rs = xcalloc(d->nrs, sizeof(*d->rs));
	/*
	 * Message ids go on from the clock, about a million a second per
	 * reactor, and from the highest the store holds: unique across
	 * restarts, so that a receipt or a query after one finds its own.
	 */
	uint64_t base = (uint64_t)time(NULL) << 20;

	if (base < store_id_floor())
		base = store_id_floor();
	for (unsigned i = 0; i < d->nrs; i++) {
		if ((d->rs[i] = reactor_new(i, d->cf)) == NULL)
			fatal("reactor %u", i);
		msg_set_id_base(d->rs[i], base);
		upstream_attach(d->rs[i], d->nrs);
	}
	for (unsigned i = 0; i < d->nrs; i++)
		if (reactor_start(d->rs[i]) < 0)
			fatal("cannot start reactor %u", i);
}

static void
nudge_task(void *owner, void *arg, enum mailbox_status st)
{
	(void)owner;
	(void)arg;
	(void)st;
}

/*
 * Waits until every reactor thread has turned its loop once, so that READY=1
 * means they all run. An empty task through each mailbox wakes them at once.
 */
static void
wait_reactors_running(struct daemon *d)
{
	struct timespec pause = { .tv_nsec = 1000000 };

	for (unsigned i = 0; i < d->nrs; i++)
		reactor_post(d->rs[i], nudge_task, NULL);
	for (unsigned i = 0; i < d->nrs; i++) {
		for (unsigned ms = 0;
		    counter_get(&d->rs[i]->counters, COUNTER_LOOPS) == 0;
		    ms++) {
			if (ms >= 10000)
				fatalx("reactor %u did not start within 10 s",
				    i);
			nanosleep(&pause, NULL);
		}
	}
}

/* Takes the passed sockets while the environment is still ours alone. */
static void
take_passed_sockets(struct daemon *d)
{
	const char *bad = "?";

	d->nsocks = systemd_listen_fds(&d->socks, &bad);
	if (d->nsocks < 0 && errno == EPROTOTYPE)
		fatalx("socket activation: the socket named \"%s\" is not a "
		    "listening stream socket", bad);
	if (d->nsocks < 0)
		fatal("socket activation");
	if (d->nsocks > 0)
		log_info("socket activation: %d socket%s passed", d->nsocks,
		    d->nsocks == 1 ? "" : "s");
}

/*
 * Hands the sockets systemd passed to the listeners of the same name. A
 * socket that no listener claims is a start-up error: it would otherwise
 * sit there accepting clients nobody serves.
 */
static void
adopt_passed_sockets(struct daemon *d)
{
	struct systemd_socket *ss = d->socks;

	for (int i = 0; i < d->nsocks; i++) {
		if (acceptor_adopt(d->acc, ss[i].name, ss[i].fd) == 0)
			continue;
		if (errno == ENOENT)
			fatalx("socket activation: passed socket \"%s\" "
			    "matches no listener in %s", ss[i].name,
			    d->opt.config_path);
		if (errno == EEXIST)
			fatalx("socket activation: more than one socket named "
			    "\"%s\" passed", ss[i].name);
		fatal("socket activation: socket \"%s\"", ss[i].name);
	}
	systemd_sockets_free(ss, d->nsocks);
	d->socks = NULL;
	d->nsocks = 0;
}

/*
 * A receipt awaited before a restart. A kill -9 may have come after its
 * message's final state was committed and before its post was: posted
 * now, then. Not in a cluster, whose stored message another node took
 * is final here before the receipt that node gives comes back.
 */
static int
adopt_want(const struct http_out_want *w, void *arg)
{
	const struct config *cf = arg;
	uint8_t state;
	uint64_t at;

	http_out_adopt_want(w, NULL);
	if (!cf->cluster.enabled && store_final_of(w->id, &state, &at))
		http_out_receipt_of(w->id, state, at);
	return 0;
}

/*
 * Opens what the service threads own and makes them, in start order: the
 * store first. A store that cannot be opened, is not a store or fails its
 * check ends the start (exit 1), naming the file: never start empty over
 * it.
 */
static void
open_services(struct daemon *d)
{
	char *err = NULL;

	if (http_out_open(d->cf) < 0)
		fatal("http-out: cannot start");
	if (store_open(d->cf, d->svcs, &d->nsvcs, &err) < 0) {
		log_err("store: %s", err != NULL ? err : "cannot open");
		free(err);
		exit(1);
	}
	/* Posts a kill -9 left pending are posted again. */
	if (store_keeps_posts()) {
		http_out_keep_with(&(struct http_out_keep){
		    .keep = store_post_keep, .done = store_post_done,
		    .want = store_want_keep, .unwant = store_want_done });
		if (store_posts_each(http_out_adopt, NULL) < 0 ||
		    store_wants_each(adopt_want, d->cf) < 0)
			log_warnx("store: cannot read the HTTP posts kept");
	}
	/* The cluster after the store: it stores what no node takes. */
	if (cluster_open(d->cf, d->svcs, &d->nsvcs, &err) < 0) {
		log_err("cluster: %s", err != NULL ? err : "cannot start");
		free(err);
		exit(1);
	}
}

static void
start_services(struct daemon *d)
{
	if (http_out_start() < 0)
		fatal("cannot start service http-out");
	for (unsigned i = 0; i < d->nsvcs; i++)
		if (service_start(d->svcs[i]) < 0)
			fatal("cannot start service %s",
			    service_name(d->svcs[i]));
}

/*
 * Runs what each was posted, in reverse start order, and then frees them
 * all: a service still running may post to one that stopped before it
 * (the cluster thread to the key-value thread), and such a task is then
 * cancelled when its mailbox goes, not pushed onto freed memory.
 */
static void
stop_services(struct daemon *d)
{
	for (unsigned i = d->nsvcs; i-- > 0;)
		service_stop(d->svcs[i]);
	for (unsigned i = d->nsvcs; i-- > 0;)
		service_free(d->svcs[i]);
	d->nsvcs = 0;
}

/* Lets every reactor drain for up to shutdown_timeout, then waits for it. */
static void
stop_reactors(struct daemon *d)
{
	reactor_stop_all(d->rs, d->nrs);
	for (unsigned i = 0; i < d->nrs; i++)
		reactor_join(d->rs[i]);
}

static void
free_reactors(struct daemon *d)
{
	for (unsigned i = 0; i < d->nrs; i++)
		reactor_free(d->rs[i]);
	free(d->rs);
	d->rs = NULL;
}

static void
log_stats(struct daemon *d)
{
	char line[4096];

	stats_format(line, sizeof(line), d->rs, d->nrs,
	    acceptor_counters(d->acc));
	store_stats_append(line, sizeof(line), false);
	cluster_stats_append(line, sizeof(line), false);
	upstream_stats_append(line, sizeof(line), false);
	log_notice("%s", line);
}

/* Says which changed settings only a restart applies. */
static void
warn_restart_needed(const struct config *old, const struct config *cf)
{
	unsigned changed = config_restart_changes(cf, old);

	if (changed & CONFIG_RESTART_DISPATCHERS)
		log_warnx("reload: dispatchers changed (%u -> %u): applies "
		    "after a restart", old->dispatchers, cf->dispatchers);
	if (changed & CONFIG_RESTART_CPU_AFFINITY)
		log_warnx("reload: cpu_affinity changed: applies after a "
		    "restart");
	if (changed & CONFIG_RESTART_IO_URING)
		log_warnx("reload: io_uring changed: applies after a restart");
	if (changed & CONFIG_RESTART_SCHED_BATCH)
		log_warnx("reload: sched_batch changed: applies after a "
		    "restart");
	if (changed & CONFIG_RESTART_LISTENERS)
		log_warnx("reload: listeners changed: apply after a restart "
		    "(a TLS listener's certificate, key and settings reload)");
}

/*
 * Keeps the store that runs: its file, its sync mode, and whether there is
 * one change only with a restart. Says so when the new file asks for more.
 */
static void
keep_start_only(const struct config *old, struct config *cf)
{
	unsigned kept = config_keep_start_only(cf, old);

	if (kept & CONFIG_KEPT_STORE_ADDED)
		log_warnx("reload: store added: starts after a restart");
	if (kept & CONFIG_KEPT_STORE_REMOVED)
		log_warnx("reload: store removed: %s stays in use until a "
		    "restart", old->store.path);
	if (kept & CONFIG_KEPT_STORE_PATH)
		log_warnx("reload: store.path changed: applies after a "
		    "restart (%s stays in use)", old->store.path);
	if (kept & CONFIG_KEPT_CLUSTER_ADDED)
		log_warnx("reload: cluster added: joins after a restart");
	if (kept & CONFIG_KEPT_CLUSTER_REMOVED)
		log_warnx("reload: cluster removed: stays a node (%s) until a "
		    "restart", old->cluster.node);
	if (kept & CONFIG_KEPT_CLUSTER_NODE)
		log_warnx("reload: cluster.node, servers or credentials "
		    "changed: apply after a restart");
	if (kept & CONFIG_KEPT_STORE_BACKEND)
		log_warnx("reload: store.backend or store.replicas changed: "
		    "applies after a restart");
	if (kept & CONFIG_KEPT_STORE_SHARDS)
		log_warnx("reload: store.shards changed: applies after a "
		    "restart");
	if (kept & CONFIG_KEPT_STORE_SYNC)
		log_warnx("reload: store.sync changed: applies after a "
		    "restart (\"%s\" stays)", old->store.sync_full ? "full" :
		    "normal");
}

static void
reload(struct daemon *d)
{
	char *errors = NULL;
	struct config *cf;

	systemd_reloading();
	log_notice("reloading %s", d->opt.config_path);
	if ((cf = config_load(d->opt.config_path, &errors)) == NULL) {
		log_config_errors(errors);
		free(errors);
		log_err("reload failed: the running configuration stays");
		metrics_reloaded(false);
		systemd_ready();
		return;
	}
	warn_restart_needed(d->cf, cf);
	keep_start_only(d->cf, cf);
	if (!d->opt.debug)
		log_set_level(cf->log_level);
	acceptor_set_config(d->acc, cf);
	for (unsigned i = 0; i < d->nrs; i++)
		reactor_set_config(d->rs[i], cf);
	store_reload(cf);
	http_out_reload(cf);
	cluster_reload(cf);
	config_unref(d->cf);
	d->cf = cf;
	log_notice("reloaded %s", d->opt.config_path);
	metrics_reloaded(true);
	systemd_ready();
}

static void
on_signal(int signo, void *arg)
{
	struct daemon *d = arg;

	switch (signo) {
	case SIGTERM:
	case SIGINT:
		log_notice("%s: shutting down", strsignal(signo));
		acceptor_stop(d->acc);
		break;
	case SIGHUP:
		reload(d);
		break;
	case SIGUSR1:
		log_stats(d);
		break;
	case SIGUSR2:
		if (d->fault_hook)
			fault_stall(d->rs, d->nrs);
		break;
	}
}

/* Sends STATUS= every STATUS_INTERVAL seconds (force: now). */
static void
refresh_status(struct daemon *d, bool force)
{
	struct timespec now;
	double secs;
	char status[512];

	clock_gettime(CLOCK_MONOTONIC, &now);
	secs = (double)(now.tv_sec - d->last_status.tv_sec) +
	    (double)(now.tv_nsec - d->last_status.tv_nsec) / 1e9;
	if (secs < STATUS_INTERVAL && !force)
		return;
	d->last_status = now;
	stats_format_status(status, sizeof(status), d->rs, d->nrs,
	    &d->last_totals, secs);
	store_stats_append(status, sizeof(status), true);
	cluster_stats_append(status, sizeof(status), true);
	upstream_stats_append(status, sizeof(status), true);
	systemd_status(status);
}

/*
 * Busy and quiet, in bytes read and written a second by all the reactors.
 * Keep-alives and scrapes stay under QUIET; a burst of messages is above
 * BUSY within its first second.
 */
#define TRIM_BUSY_BPS	(1u << 20)
#define TRIM_QUIET_BPS	(64u << 10)
/* After clients left, with no busy tick: a trim at most this often. */
#define TRIM_LEFT_MS	10000

/*
 * Gives the memory freed after a burst back to the system, once traffic
 * has gone quiet. The heaps keep what they freed (HEAP_KEEP, below), so
 * that a busy daemon does not shrink and regrow them thousands of times a
 * second; but a daemon that took a million messages for the store and then
 * rested held on to the burst's buffers: a third of its RSS, for as long
 * as it ran. malloc_trim walks every thread's heap and returns the free
 * pages in them: at the first quiet tick after a busy one, or after one
 * where clients left (their buffers are freed as they go, which may be
 * well after the traffic stopped: the first time after a burst at once,
 * then at most every TRIM_LEFT_MS, as clients come and go all day), not
 * at every quiet tick: a trim locks each heap in turn while it walks it.
 */
static void
give_back_memory(struct daemon *d)
{
	struct counter_totals t;
	uint64_t now = mono_ms(), bytes, bps;
	double secs;

	stats_totals(&t, d->rs, d->nrs);
	bytes = t.v[COUNTER_BYTES_IN] + t.v[COUNTER_BYTES_OUT];
	secs = (double)(now - d->trim_ms) / 1000.0;
	bps = secs > 0 ? (uint64_t)((double)(bytes - d->trim_bytes) / secs) : 0;
	if (t.v[COUNTER_CONNS] < d->trim_conns)
		d->trim_left = true;
	d->trim_bytes = bytes;
	d->trim_conns = t.v[COUNTER_CONNS];
	d->trim_ms = now;
	if (bps >= TRIM_BUSY_BPS) {
		d->trim_busy = true;
	} else if (bps < TRIM_QUIET_BPS && (d->trim_busy || (d->trim_left &&
	    (d->trim_burst || now - d->trimmed_ms >= TRIM_LEFT_MS)))) {
		d->trim_burst = d->trim_busy;
		d->trim_busy = d->trim_left = false;
		d->trimmed_ms = now;
#ifdef __GLIBC__
		malloc_trim(0);
		log_debug("quiet after a burst: freed memory given back");
#endif
	}
}

static void
on_tick(void *arg)
{
	struct daemon *d = arg;

	if (d->wd != NULL)
		systemd_watchdog_tick(d->wd);
	refresh_status(d, false);
	give_back_memory(d);
}

/*
 * Free memory glibc keeps at the top of a heap before giving it back. Its
 * default, 128 KiB, is far below the swing of routed messages in flight
 * (1,000 pairs with 16 each in flight are 7 MiB): the reactors' heaps shrank
 * and grew back thousands of times a second, each shrink a TLB shootdown
 * across CPUs and each regrowth page faults, and cross-reactor routing ran
 * about a quarter slower. What is kept is bounded by the busiest moment,
 * and given back once traffic goes quiet (give_back_memory).
 */
#define HEAP_KEEP	(64 << 20)

static void
tune_malloc(void)
{
#ifdef M_TRIM_THRESHOLD
	mallopt(M_TRIM_THRESHOLD, HEAP_KEEP);
#endif
}

/*
 * Binds or adopts every listener, then tells the service manager it is
 * ready (with a first STATUS=) once every reactor runs.
 */
static void
start_accepting(struct daemon *d)
{
	d->acc = acceptor_new(d->cf, d->rs, d->nrs);
	metrics_init(d->rs, d->nrs, acceptor_counters(d->acc), d->cf);
	adopt_passed_sockets(d);
	for (size_t i = 0; i < d->cf->nlisteners; i++)
		if (d->cf->listeners[i].tls.enabled) {
			tls_log_kernel();
			break;
		}
	if (acceptor_listen(d->acc) < 0)
		exit(1);
	wait_reactors_running(d);
	clock_gettime(CLOCK_MONOTONIC, &d->last_status);
	stats_totals(&d->last_totals, d->rs, d->nrs);
	log_notice("echorouterd %s started: %u dispatchers%s, config %s",
	    VERSION, d->nrs, d->cf->cpu_affinity ? " pinned per core" : "",
	    d->opt.config_path);
	systemd_ready();
	refresh_status(d, true);
	d->wd = systemd_watchdog_new(d->rs, d->nrs);
}

/*
 * The order of start and stop follows who posts to whom. Service threads
 * start first, since reactors post to them; then the reactors, since the
 * acceptor hands them clients; then the acceptor, and READY=1. On stop,
 * the reverse: the acceptor stops taking clients, the reactors drain
 * (still posting to the service threads and waiting for their answers),
 * and only then do the service threads run what is left and end. The
 * reactors are freed after the services: by then every connection was
 * closed on its reactor's thread (the finish hook), so nothing left to
 * free there posts to a service thread.
 */
int
main(int argc, char **argv)
{
	struct daemon d = { .sigfd = -1 };
	struct acceptor_hooks hooks = {
		.on_signal = on_signal, .on_tick = on_tick, .arg = &d,
	};

	log_init(LOG_LEVEL_INFO);
	parse_options(argc, argv, &d.opt);
	proto_builtin_register();
	d.cf = load_config_or_exit(d.opt.config_path);
	if (d.opt.check_only) {
		char *err = NULL;

		if (store_check(d.cf, &err) < 0) {
			log_err("store: %s", err != NULL ? err : "cannot open");
			free(err);
			config_unref(d.cf);
			return 1;
		}
		fprintf(stderr, "%s: configuration OK\n", d.opt.config_path);
		config_unref(d.cf);
		return 0;
	}
	log_set_level(d.opt.debug ? LOG_LEVEL_DEBUG : d.cf->log_level);
	log_info("%s", version_line());
	tune_malloc();
	d.fault_hook = fault_init();
	d.sigfd = block_signals(d.fault_hook);
	take_passed_sockets(&d);
	open_services(&d);
	start_services(&d);
	start_reactors(&d);
	start_accepting(&d);
	if (d.wd != NULL)
		hooks.tick_ms = systemd_watchdog_tick_ms(d.wd);
	acceptor_run(d.acc, d.sigfd, &hooks);
	systemd_stopping();
	acceptor_close_listeners(d.acc);
	stop_reactors(&d);
	/* Before the store, which keeps its posts: nothing more to keep. */
	http_out_stop();
	/* The store lets go of NATS before the cluster closes the library. */
	store_quiesce();
	stop_services(&d);
	log_stats(&d);
	cluster_close();
	store_close();
	/* Last: what the store posted to it as it stopped is cancelled. */
	http_out_close();
	systemd_watchdog_free(d.wd);
	/* Reactors first: a connection may still hold the acceptor's entries. */
	free_reactors(&d);
	acceptor_free(d.acc);
	close(d.sigfd);
	config_unref(d.cf);
	log_notice("stopped");
	return 0;
}
