/* metrics.c: the Prometheus text exposition of every counter, histogram and gauge. */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cluster.h"
#include "config.h"
#include "counter.h"
#include "http.h"
#include "http_out.h"
#include "metrics.h"
#include "proto.h"
#include "smpp_acct.h"
#include "reactor.h"
#include "smpp_pdu.h"
#include "store.h"
#include "upstream.h"
#include "version.h"

#define PREFIX	"echorouterd_"

static struct {
	struct reactor *const *rs;
	unsigned nrs;
	const struct counter_block *acceptor;
	double	start_time;		/* wall clock s */
	atomic_uint_fast64_t reloads_ok;
	atomic_uint_fast64_t reloads_failed;
	_Atomic double last_reload;	/* wall clock s of the last good */
	/* The running listeners, by the index connections count under. */
	char	listeners[COUNTER_LISTENERS_MAX][CONFIG_NAME_MAX + 1];
	size_t	nlisteners;
} M;

static double
wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
metrics_init(struct reactor *const *rs, unsigned n,
    const struct counter_block *acceptor, const struct config *cf)
{
	M.rs = rs;
	M.nrs = n;
	M.acceptor = acceptor;
	/*
	 * A reload may reorder, rename or drop listeners, but those bound at
	 * start run until a restart: label by them, not by the new file.
	 */
	M.nlisteners = 0;
	for (size_t l = 0; l < cf->nlisteners && l < COUNTER_LISTENERS_MAX;
	    l++)
		snprintf(M.listeners[M.nlisteners++], sizeof(M.listeners[0]),
		    "%s", cf->listeners[l].name);
	M.start_time = wall_now();
	atomic_store(&M.last_reload, M.start_time);
}

void
metrics_reloaded(bool ok)
{
	if (ok) {
		atomic_fetch_add(&M.reloads_ok, 1);
		atomic_store(&M.last_reload, wall_now());
	} else
		atomic_fetch_add(&M.reloads_failed, 1);
}

static void __attribute__((format(printf, 2, 3)))
out_printf(struct buf *out, const char *fmt, ...)
{
	va_list ap;
	size_t room = 256;
	int n;

	for (;;) {
		char *p = (char *)buf_reserve(out, room);

		va_start(ap, fmt);
		n = vsnprintf(p, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room) {
			out->len += (size_t)n;
			return;
		}
		room = (size_t)n + 1;
	}
}

/* A label value, escaped as the text format wants (\\, \", \n). */
static void
out_label_value(struct buf *out, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			out_printf(out, "\\%c", *s);
		else if (*s == '\n')
			out_printf(out, "\\n");
		else
			buf_append(out, s, 1);
	}
}

static void
out_family(struct buf *out, const char *name, const char *type,
    const char *help)
{
	out_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* A family of one series without labels: its HELP, TYPE and value. */
static void
out_one(struct buf *out, const char *name, const char *type,
    const char *help, uint64_t v)
{
	out_family(out, name, type, help);
	out_printf(out, "%s %llu\n", name, (unsigned long long)v);
}

/* The counter table's series: totals over the reactors, or the acceptor's. */
static void
render_table(struct buf *out)
{
	const char *family = NULL;

	for (unsigned id = 0; id < COUNTER_N; id++) {
		const struct counter_info *ci = counter_info(id);
		uint64_t v = 0;

		if (ci->flags & COUNTER_F_NO_METRIC)
			continue;
		if (family == NULL || strcmp(family, ci->name) != 0) {
			char name[128];

			snprintf(name, sizeof(name), PREFIX "%s", ci->name);
			out_family(out, name, ci->kind == COUNTER_KIND_GAUGE ?
			    "gauge" : "counter", ci->help);
			family = ci->name;
		}
		if (ci->scope == COUNTER_SCOPE_ACCEPTOR) {
			if (M.acceptor != NULL)
				v = counter_get(M.acceptor, id);
		} else
			for (unsigned i = 0; i < M.nrs; i++)
				v += counter_get(&M.rs[i]->counters, id);
		out_printf(out, PREFIX "%s", ci->name);
		if (ci->label != NULL) {
			out_printf(out, "{%s=\"", ci->label);
			out_label_value(out, ci->label_value);
			out_printf(out, "\"}");
		}
		out_printf(out, " %llu\n", (unsigned long long)v);
	}
}

static void
render_connections(struct buf *out)
{
	out_family(out, PREFIX "connections", "gauge",
	    "Connections open now, by listener and reactor.");
	for (size_t l = 0; l < M.nlisteners; l++)
		for (unsigned i = 0; i < M.nrs; i++) {
			uint64_t v = atomic_load_explicit(
			    &M.rs[i]->detail.conns[l], memory_order_relaxed);

			out_printf(out, PREFIX "connections{listener=\"");
			out_label_value(out, M.listeners[l]);
			/* A gauge summed from +1/-1 on one thread: signed. */
			out_printf(out, "\",reactor=\"%u\"} %lld\n", i,
			    (long long)v);
		}
}

/*
 * One histogram: summed over the reactors, or (per_reactor) a series set
 * per reactor, labelled reactor="i".
 */
static void
render_hist(struct buf *out, const char *name, const char *help,
    enum counter_hist_id h, bool per_reactor)
{
	unsigned groups = per_reactor ? M.nrs : 1;

	out_family(out, name, "histogram", help);
	for (unsigned g = 0; g < groups; g++) {
		uint64_t b[COUNTER_HIST_BOUNDS + 1] = { 0 }, sum = 0, cum = 0;
		char lbl[32] = "";

		for (unsigned i = 0; i < M.nrs; i++) {
			const struct counter_hist *ch;

			if (per_reactor && i != g)
				continue;
			ch = &M.rs[i]->detail.hist[h];
			for (unsigned k = 0; k <= COUNTER_HIST_BOUNDS; k++)
				b[k] += atomic_load_explicit(&ch->bucket[k],
				    memory_order_relaxed);
			sum += atomic_load_explicit(&ch->sum_ns,
			    memory_order_relaxed);
		}
		if (per_reactor)
			snprintf(lbl, sizeof(lbl), "reactor=\"%u\",", g);
		for (unsigned k = 0; k <= COUNTER_HIST_BOUNDS; k++) {
			cum += b[k];
			if (k < COUNTER_HIST_BOUNDS)
				out_printf(out, "%s_bucket{%sle=\"%g\"} %llu\n",
				    name, lbl,
				    (double)counter_hist_bounds[k] / 1e9,
				    (unsigned long long)cum);
			else
				out_printf(out, "%s_bucket{%sle=\"+Inf\"} "
				    "%llu\n", name, lbl,
				    (unsigned long long)cum);
		}
		if (per_reactor)
			lbl[strlen(lbl) - 1] = '\0';	/* its trailing comma */
		out_printf(out, "%s_sum%s%s%s %.9f\n", name, *lbl ? "{" : "",
		    lbl, *lbl ? "}" : "", (double)sum / 1e9);
		out_printf(out, "%s_count%s%s%s %llu\n", name, *lbl ? "{" : "",
		    lbl, *lbl ? "}" : "", (unsigned long long)cum);
	}
}

static void
render_smpp_pdus(struct buf *out)
{
	static const char *const dirs[2] = { "received", "sent" };

	out_family(out, PREFIX "smpp_pdus_total", "counter",
	    "SMPP PDUs received and sent, by command and command_status.");
	for (unsigned d = 0; d < 2; d++)
		for (unsigned c = 0; c < COUNTER_SMPP_CMDS; c++)
			for (unsigned st = 0; st < COUNTER_SMPP_STATUSES;
			    st++) {
				uint64_t v = 0;

				for (unsigned i = 0; i < M.nrs; i++) {
					const struct counter_detail *dt =
					    &M.rs[i]->detail;

					v += atomic_load_explicit(
					    &dt->smpp_pdus[d][c][st],
					    memory_order_relaxed);
				}
				if (v == 0)
					continue;
				out_printf(out, PREFIX "smpp_pdus_total{"
				    "direction=\"%s\",command=\"%s\","
				    "status=\"%s\"} %llu\n", dirs[d],
				    smpp_command_label(c),
				    smpp_status_label(st),
				    (unsigned long long)v);
			}
}

/* The http listeners' requests, by endpoint and status. */
static void
render_http_requests(struct buf *out)
{
	out_family(out, PREFIX "http_requests_total", "counter",
	    "Requests the http listeners answered, by endpoint and status.");
	for (unsigned e = 0; e < COUNTER_HTTP_ENDPOINTS; e++)
		for (unsigned st = 0; st < COUNTER_HTTP_STATUSES; st++) {
			uint64_t v = 0;

			for (unsigned i = 0; i < M.nrs; i++)
				v += atomic_load_explicit(
				    &M.rs[i]->detail.http_requests[e][st],
				    memory_order_relaxed);
			if (v == 0)
				continue;
			out_printf(out, PREFIX "http_requests_total{"
			    "endpoint=\"%s\",status=\"%s\"} %llu\n",
			    http_endpoint_label(e), http_status_label(st),
			    (unsigned long long)v);
		}
}

/* Receipts posted to HTTP applications (http_out.h). */
static void
render_callbacks(struct buf *out)
{
	struct http_out_stats st;
	static const char *const results[] = { "sent", "failed", "retried",
	    "dropped" };
	uint64_t v[4];

	http_out_get_stats(&st);
	v[0] = st.sent;
	v[1] = st.failed;
	v[2] = st.retried;
	v[3] = st.dropped;
	out_family(out, PREFIX "http_callbacks_total", "counter",
	    "Callbacks to HTTP applications (receipts to a dlr-url or "
	    "receipt_url): answered 2xx (sent), given up (failed), tried "
	    "again (retried), not posted for want of room (dropped).");
	for (unsigned i = 0; i < 4; i++)
		out_printf(out, PREFIX "http_callbacks_total{result=\"%s\"} "
		    "%llu\n", results[i], (unsigned long long)v[i]);
	out_family(out, PREFIX "http_callbacks_pending", "gauge",
	    "Callbacks not yet answered, and messages whose receipt is "
	    "awaited.");
	out_printf(out, PREFIX "http_callbacks_pending{what=\"posts\"} %llu\n",
	    (unsigned long long)st.pending);
	out_printf(out, PREFIX "http_callbacks_pending{what=\"receipts\"} "
	    "%llu\n", (unsigned long long)st.awaited);
}

static void
bind_line(const char *account, const char *type, unsigned n, void *arg)
{
	struct buf *out = arg;

	out_printf(out, PREFIX "smpp_binds{account=\"");
	out_label_value(out, account);
	out_printf(out, "\",type=\"%s\"} %u\n", type, n);
}

/* The series of family fam (render_upstreams) for one upstream. */
struct upstream_lines {
	struct buf *out;
	unsigned fam;
};

static void
upstream_line(const char *name, const struct upstream_counts *n, void *arg)
{
	struct upstream_lines *u = arg;
	static const char *const fam[8] = { "upstream_sessions_bound",
	    "upstream_reconnects_total", "upstream_bind_failures_total",
	    "upstream_deliver_refused_total", "upstream_mo_routed_total",
	    "upstream_receipts_matched_total",
	    "upstream_receipts_unmatched_total",
	    "upstream_receipts_late_total" };
	const uint64_t v[8] = { n->bound, n->reconnects, n->bind_failures,
	    n->deliver_refused, n->mo_routed, n->receipts_matched,
	    n->receipts_unmatched, n->receipts_late };

	out_printf(u->out, PREFIX "%s{upstream=\"", fam[u->fam]);
	out_label_value(u->out, name);
	out_printf(u->out, "\"} %llu\n", (unsigned long long)v[u->fam]);
}

/* Per upstream SMS centre: its sessions and how they fared. */
static void
render_upstreams(struct buf *out)
{
	static const char *const fam[8][3] = {
		{ PREFIX "upstream_sessions_bound", "gauge",
		  "Sessions bound to the upstream SMS centre now." },
		{ PREFIX "upstream_reconnects_total", "counter",
		  "Connections to the upstream started again after a failure "
		  "or a close." },
		{ PREFIX "upstream_bind_failures_total", "counter",
		  "Binds the upstream refused." },
		{ PREFIX "upstream_deliver_refused_total", "counter",
		  "Messages (deliver_sm, data_sm) from the upstream answered "
		  "with an error: no route, or the recipient could not take "
		  "them." },
		{ PREFIX "upstream_mo_routed_total", "counter",
		  "Messages from the upstream that their recipient took." },
		{ PREFIX "upstream_receipts_matched_total", "counter",
		  "Receipts from the upstream matched to a message of ours." },
		{ PREFIX "upstream_receipts_unmatched_total", "counter",
		  "Receipts from the upstream for no message of ours "
		  "(dropped)." },
		{ PREFIX "upstream_receipts_late_total", "counter",
		  "Receipts from the upstream for an id not known yet while "
		  "submits to it were unanswered, looked for again "
		  "(upstream_receipts.wait); those that never match count "
		  "as unmatched too." },
	};

	for (unsigned i = 0; i < 8; i++) {
		struct upstream_lines u = { .out = out, .fam = i };

		out_family(out, fam[i][0], fam[i][1], fam[i][2]);
		upstream_stats_each(upstream_line, &u);
	}
	out_family(out, PREFIX "upstream_receipt_ids", "gauge",
	    "SMS centres' message ids kept for their receipts "
	    "(upstream_receipts.limit bounds them).");
	out_printf(out, PREFIX "upstream_receipt_ids %zu\n",
	    upstream_receipt_ids());
}

/* The series of family fam (render_submits) for one upstream. */
static void
submit_line(const char *name, const struct upstream_counts *n, void *arg)
{
	struct upstream_lines *u = arg;
	static const char *const fam[4] = { "upstream_submits_total",
	    "upstream_throttles_total", "upstream_window",
	    "upstream_bad_message_ids_total" };
	const uint64_t v[4] = { n->submits, n->throttles, n->window,
	    n->bad_ids };
	const char *const st[3] = { "ok", "throttled", "error" };
	const uint64_t r[3] = { n->resp_ok, n->resp_throttled, n->resp_failed };

	for (unsigned i = 0; i < (u->fam == 4 ? 3u : 1u); i++) {
		out_printf(u->out, PREFIX "%s{upstream=\"", u->fam == 4 ?
		    "upstream_responses_total" : fam[u->fam]);
		out_label_value(u->out, name);
		if (u->fam == 4)
			out_printf(u->out, "\",status=\"%s\"} %llu\n", st[i],
			    (unsigned long long)r[i]);
		else
			out_printf(u->out, "\"} %llu\n",
			    (unsigned long long)v[u->fam]);
	}
}

/* Per upstream: the messages submitted to it and its answers. */
static void
render_submits(struct buf *out)
{
	static const char *const fam[5][3] = {
		{ PREFIX "upstream_submits_total", "counter",
		  "submit_sm sent to the upstream (one per part)." },
		{ PREFIX "upstream_throttles_total", "counter",
		  "Pauses of the upstream's submits after ESME_RTHROTTLED or "
		  "ESME_RMSGQFUL." },
		{ PREFIX "upstream_window", "gauge",
		  "submit_sm sent to the upstream and not answered yet." },
		{ PREFIX "upstream_bad_message_ids_total", "counter",
		  "submit_sm_resp ESME_ROK with an empty or over-long "
		  "message_id." },
		{ PREFIX "upstream_responses_total", "counter",
		  "submit_sm_resp from the upstream, by status: ok, throttled "
		  "(ESME_RTHROTTLED, ESME_RMSGQFUL), error (any other)." },
	};

	for (unsigned i = 0; i < 5; i++) {
		struct upstream_lines u = { .out = out, .fam = i };

		out_family(out, fam[i][0], fam[i][1], fam[i][2]);
		upstream_stats_each(submit_line, &u);
	}
}

/* The series of upstream_oldest_age_seconds for one upstream. */
static void
oldest_line(const char *name, const struct upstream_counts *n, void *arg)
{
	struct buf *out = arg;
	double now = wall_now(), age = 0;

	if (n->oldest_at != 0 && now > (double)n->oldest_at)
		age = now - (double)n->oldest_at;
	out_printf(out, PREFIX "upstream_oldest_age_seconds{upstream=\"");
	out_label_value(out, name);
	out_printf(out, "\"} %.0f\n", age);
}

/* Per upstream: how long its oldest message in a session has waited. */
static void
render_upstream_oldest(struct buf *out)
{
	out_family(out, PREFIX "upstream_oldest_age_seconds", "gauge",
	    "Seconds since the oldest message waiting in the upstream's "
	    "sessions (queued or unanswered) was submitted; 0 none. "
	    "Messages waiting in the store count in "
	    "echorouterd_store_oldest_age_seconds.");
	upstream_stats_each(oldest_line, out);
}

static void
render_store(struct buf *out)
{
	struct store_stats st;
	double now = wall_now();

	if (!store_on())
		return;
	store_get_stats(&st);
	out_one(out, PREFIX "store_messages", "gauge",
	    "Messages waiting in the store.", st.messages);
	out_one(out, PREFIX "store_bytes", "gauge",
	    "Bytes of the messages waiting in the store.", st.bytes);
	out_family(out, PREFIX "store_oldest_age_seconds", "gauge",
	    "Age of the oldest message waiting in the store; 0 if none.");
	out_printf(out, PREFIX "store_oldest_age_seconds %.0f\n",
	    st.oldest != 0 && now > (double)st.oldest ?
	    now - (double)st.oldest : 0.0);
	out_family(out, PREFIX "store_commits_total", "counter",
	    "Store group commits, by result.");
	out_printf(out, PREFIX "store_commits_total{result=\"ok\"} %llu\n",
	    (unsigned long long)st.commits);
	out_printf(out, PREFIX "store_commits_total{result=\"failed\"} %llu\n",
	    (unsigned long long)st.commit_failures);
	out_one(out, PREFIX "store_in_flight_messages", "gauge",
	    "Stored messages handed to sessions, not yet written out or "
	    "answered for.", st.in_flight);
	out_one(out, PREFIX "store_in_flight_bytes", "gauge",
	    "Memory those messages take.", st.in_flight_bytes);
	out_family(out, PREFIX "store_shard_messages", "gauge",
	    "Messages waiting in each shard of the store (store.shards).");
	for (unsigned k = 0; store_get_shard_stats(k, &st); k++)
		out_printf(out, PREFIX "store_shard_messages{shard=\"%u\"} "
		    "%llu\n", k, (unsigned long long)st.messages);
}

static void
render_cluster(struct buf *out)
{
	struct cluster_stats st;

	if (!cluster_on())
		return;
	cluster_get_stats(&st);
	out_family(out, PREFIX "cluster_connected", "gauge",
	    "1 while connected to a NATS server of the cluster.");
	out_printf(out, PREFIX "cluster_connected %d\n", st.connected);
	out_one(out, PREFIX "cluster_nodes", "gauge",
	    "Nodes alive in the cluster, this one included.", st.nodes);
	out_family(out, PREFIX "cluster_messages_total", "counter",
	    "Messages exchanged with other nodes, by direction.");
	out_printf(out, PREFIX "cluster_messages_total{direction=\"sent\"} "
	    "%llu\n", (unsigned long long)st.to_nodes);
	out_printf(out, PREFIX "cluster_messages_total{direction=\"received\"}"
	    " %llu\n", (unsigned long long)st.from_nodes);
	out_one(out, PREFIX "cluster_errors_total", "counter",
	    "Cluster requests that failed or timed out.", st.errors);
}

/*
 * Open fds: /proc/self/fd's size where the kernel gives it (Linux 6.2 and
 * later: one stat, whatever the count), else by listing it.
 */
static long
open_fds(void)
{
	struct stat st;
	struct dirent *de;
	long n = 0;
	DIR *d;

	if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0)
		return (long)st.st_size;
	if ((d = opendir("/proc/self/fd")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;			/* the listing's own fd */
}

/* Resident and virtual memory from /proc/self/statm, in bytes. */
static void
memory(double *rss, double *vsz)
{
	unsigned long pages = 0, resident = 0;
	long page = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "re");

	*rss = *vsz = 0;
	if (f == NULL)
		return;
	if (fscanf(f, "%lu %lu", &pages, &resident) == 2) {
		*vsz = (double)pages * (double)page;
		*rss = (double)resident * (double)page;
	}
	fclose(f);
}

static void
render_process(struct buf *out)
{
	struct rusage ru;
	struct rlimit rl;
	double rss, vsz, cpu = 0;
	long fds = open_fds();

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		    ((double)ru.ru_utime.tv_usec +
		    (double)ru.ru_stime.tv_usec) / 1e6;
	memory(&rss, &vsz);
	out_family(out, "process_cpu_seconds_total", "counter",
	    "Total user and system CPU time spent in seconds.");
	out_printf(out, "process_cpu_seconds_total %.6f\n", cpu);
	out_family(out, "process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.");
	out_printf(out, "process_resident_memory_bytes %.0f\n", rss);
	out_family(out, "process_virtual_memory_bytes", "gauge",
	    "Virtual memory size in bytes.");
	out_printf(out, "process_virtual_memory_bytes %.0f\n", vsz);
	if (fds >= 0) {
		out_family(out, "process_open_fds", "gauge",
		    "Number of open file descriptors.");
		out_printf(out, "process_open_fds %ld\n", fds);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		out_family(out, "process_max_fds", "gauge",
		    "Maximum number of open file descriptors.");
		out_printf(out, "process_max_fds %llu\n",
		    (unsigned long long)rl.rlim_cur);
	}
	out_family(out, "process_start_time_seconds", "gauge",
	    "Start time of the process since unix epoch in seconds.");
	out_printf(out, "process_start_time_seconds %.3f\n", M.start_time);
}

void
metrics_render(struct buf *out)
{
	render_table(out);
	render_connections(out);
	render_hist(out, PREFIX "routing_latency_seconds",
	    "From the reactor turn that read a SEND or submit_sm to the "
	    "message queued on its recipient's connection (not through the "
	    "store or other nodes).",
	    HIST_ROUTE, false);
	render_hist(out, PREFIX "smpp_deliver_sm_seconds",
	    "From the reactor turn that sent a deliver_sm to the one that "
	    "read its response.", HIST_DELIVER_SM,
	    false);
	render_hist(out, PREFIX "reactor_turn_seconds",
	    "Reactor loop turns, from the wait's end to the next wait: "
	    "the rate of the sum is the reactor's busy share.", HIST_TURN,
	    true);
	render_smpp_pdus(out);
	render_http_requests(out);
	render_callbacks(out);
	out_family(out, PREFIX "smpp_binds", "gauge",
	    "SMPP binds now, by account and bind type.");
	smpp_binds_each(bind_line, out);
	render_upstreams(out);
	render_submits(out);
	render_upstream_oldest(out);
	render_store(out);
	render_cluster(out);
	out_family(out, PREFIX "config_reloads_total", "counter",
	    "Configuration reloads (SIGHUP), by result.");
	out_printf(out, PREFIX "config_reloads_total{result=\"ok\"} %llu\n",
	    (unsigned long long)atomic_load(&M.reloads_ok));
	out_printf(out, PREFIX "config_reloads_total{result=\"failed\"} "
	    "%llu\n", (unsigned long long)atomic_load(&M.reloads_failed));
	out_family(out, PREFIX "config_last_reload_success_timestamp_seconds",
	    "gauge", "When the configuration in use was loaded.");
	out_printf(out, PREFIX "config_last_reload_success_timestamp_seconds "
	    "%.3f\n", atomic_load(&M.last_reload));
	out_family(out, PREFIX "build_info", "gauge",
	    "Always 1; the labels say which build runs.");
	out_printf(out, PREFIX "build_info{version=\"%s\"} 1\n",
	    version_number());
	render_process(out);
}
