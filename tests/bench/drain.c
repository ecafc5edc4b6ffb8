/*
 * drain.c: the store's drain for make bench: N router clients log in as
 * accounts that have backlogs (-l FMT: the LOGIN line, %u the client)
 * and count the MSG lines that arrive until -N have or -T seconds pass
 * with none, on -t threads (1: a machine with many cores drains faster
 * than one thread reads), each with its share of the clients. Prints
 *
 *   RESULT label=L mode=drain conns=N msgs=M secs=S rate=R srv_cpu_us=C
 *
 * rate is messages per second from the first LOGIN sent to the last MSG
 * read; srv_cpu_us (with -S PID) that process's CPU over the same time.
 * Exit 1 if fewer than -N arrived.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime of pid in microseconds, or -1. */
static long long
cpu_us(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return -1;
	return (long long)(ut + st) * 1000000 / sysconf(_SC_CLK_TCK);
}

static void
die(const char *m)
{
	fprintf(stderr, "drain: %s: %s\n", m, strerror(errno));
	exit(2);
}

struct client {
	int	fd;
	size_t	len;		/* bytes of a line carried over */
	char	tail[16];	/* its start, enough to see "MSG " */
};

/* One reading thread: clients [from, to) on its own epoll. */
struct reader {
	pthread_t thread;
	struct client *cs;
	unsigned from, to;
	double	last;		/* when it last read something */
};

static unsigned long long want;
static double idle = 5;
static atomic_ullong got;

/* Counts the MSG lines in buf[0, r) for c; the count. */
static unsigned long long
count_lines(struct client *c, const char *buf, size_t r)
{
	unsigned long long n = 0;
	const char *p = buf, *end = buf + r;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t k = (size_t)((nl != NULL ? nl : end) - p);

		if (c->len < sizeof(c->tail))
			memcpy(c->tail + c->len, p, k < sizeof(c->tail) -
			    c->len ? k : sizeof(c->tail) - c->len);
		c->len += k;
		if (nl == NULL)
			break;
		if (c->len > 4 && memcmp(c->tail, "MSG ", 4) == 0)
			n++;
		c->len = 0;
		p = nl + 1;
	}
	return n;
}

static void *
reader_main(void *arg)
{
	struct reader *rd = arg;
	static _Thread_local char buf[1 << 16];
	int ep = epoll_create1(0);

	if (ep < 0)
		die("epoll_create1");
	for (unsigned i = rd->from; i < rd->to; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, rd->cs[i].fd, &ev) < 0)
			die("epoll_ctl");
	}
	while (atomic_load(&got) < want && now_s() - rd->last < idle) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 100);

		for (int e = 0; e < k; e++) {
			struct client *c = &rd->cs[evs[e].data.u32];
			ssize_t r;

			while ((r = read(c->fd, buf, sizeof(buf))) > 0) {
				atomic_fetch_add(&got,
				    count_lines(c, buf, (size_t)r));
				rd->last = now_s();
			}
		}
	}
	close(ep);
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *fmt = "LOGIN acct%04u p", *label = "drain";
	unsigned n = 1000, port = 0, nt = 1;
	double t0, last;
	long pid = 0;
	long long c0 = -1, c1;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct client *cs;
	struct reader *rds;
	struct rlimit rl;
	int ch;

	while ((ch = getopt(argc, argv, "p:n:l:N:T:L:S:t:")) != -1) {
		switch (ch) {
		case 'p': port = (unsigned)atoi(optarg); break;
		case 'n': n = (unsigned)atoi(optarg); break;
		case 'l': fmt = optarg; break;
		case 'N': want = strtoull(optarg, NULL, 10); break;
		case 'T': idle = atof(optarg); break;
		case 'L': label = optarg; break;
		case 'S': pid = atol(optarg); break;
		case 't': nt = (unsigned)atoi(optarg); break;
		default:
			fprintf(stderr, "usage: drain -p PORT -N MSGS [-n CLIENTS]"
			    " [-l \"LOGIN acct%%04u p\"] [-T IDLE] [-L LABEL]"
			    " [-S PID] [-t THREADS]\n");
			return 2;
		}
	}
	if (port == 0 || want == 0 || n == 0)
		return fprintf(stderr, "drain: -p and -N are needed\n"), 2;
	if (nt == 0 || nt > n)
		nt = nt == 0 ? 1 : n;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cs = calloc(n, sizeof(*cs));
	rds = calloc(nt, sizeof(*rds));
	if (cs == NULL || rds == NULL)
		die("calloc");
	if (pid > 0)
		c0 = cpu_us(pid);
	t0 = now_s();
	for (unsigned i = 0; i < n; i++) {
		char line[128];
		int len = snprintf(line, sizeof(line) - 1, fmt, i);

		line[len++] = '\n';
		if ((cs[i].fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			die("socket");
		if (connect(cs[i].fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			die("connect");
		if (write(cs[i].fd, line, (size_t)len) != len)
			die("write");
		fcntl(cs[i].fd, F_SETFL, O_NONBLOCK);
	}
	last = t0;
	for (unsigned t = 0; t < nt; t++) {
		rds[t].cs = cs;
		rds[t].from = (unsigned)((unsigned long long)n * t / nt);
		rds[t].to = (unsigned)((unsigned long long)n * (t + 1) / nt);
		rds[t].last = now_s();
		if ((errno = pthread_create(&rds[t].thread, NULL, reader_main,
		    &rds[t])) != 0)
			die("pthread_create");
	}
	for (unsigned t = 0; t < nt; t++) {
		pthread_join(rds[t].thread, NULL);
		if (rds[t].last > last)
			last = rds[t].last;
	}
	c1 = pid > 0 ? cpu_us(pid) : -1;
	printf("RESULT label=%s mode=drain conns=%u msgs=%llu secs=%.2f "
	    "rate=%.0f srv_cpu_us=%lld\n", label, n, atomic_load(&got),
	    last - t0, (double)atomic_load(&got) / (last - t0),
	    c0 >= 0 && c1 >= 0 ? c1 - c0 : -1);
	return atomic_load(&got) >= want ? 0 : 1;
}
