/*
 * fault.c: the test-only stalls behind ECHOROUTERD_TEST_STALL (reactor 0),
 * ECHOROUTERD_TEST_NATS_STALL (a libnats delivery thread) and
 * ECHOROUTERD_TEST_CLAIM_STALL (the key-value thread, between a claim
 * written and the address taken).
 */
#include "fault.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "reactor.h"

#define FAULT_ENV		"ECHOROUTERD_TEST_STALL"
#define FAULT_STALL_MAX		3600
#define FAULT_NATS_ENV		"ECHOROUTERD_TEST_NATS_STALL"
#define FAULT_NATS_MAX_MS	60000
#define FAULT_CLAIM_ENV		"ECHOROUTERD_TEST_CLAIM_STALL"

static unsigned fault_stall_seconds;
static unsigned fault_nats_ms;
static unsigned fault_claim_ms;

/* The ms in env (1..FAULT_NATS_MAX_MS), or 0: the hook is off. */
static unsigned
fault_ms_init(const char *env, const char *what)
{
	const char *v = getenv(env);
	char *end;
	unsigned long n;

	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < 1 || n > FAULT_NATS_MAX_MS) {
		log_err("%s=%s: not a number of ms in 1..%d; test fault hook "
		    "off", env, v, FAULT_NATS_MAX_MS);
		return 0;
	}
	log_warnx("%s=%lu: TEST ONLY: %s for %lu ms", env, n, what, n);
	return (unsigned)n;
}

/* Blocks the calling thread for ms, said in the log as what. */
static void
fault_ms_stall(unsigned ms, const char *what)
{
	struct timespec ts = { .tv_sec = ms / 1000,
	    .tv_nsec = (long)(ms % 1000) * 1000000 };

	if (ms == 0)
		return;
	log_warnx("cluster: TEST FAULT: %s stalls for %u ms", what, ms);
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
	log_warnx("cluster: TEST FAULT: %s stall over", what);
}

bool
fault_init(void)
{
	const char *v = getenv(FAULT_ENV);
	char *end;
	unsigned long n;

	fault_nats_ms = fault_ms_init(FAULT_NATS_ENV,
	    "a cluster name probe stalls a NATS delivery thread");
	fault_claim_ms = fault_ms_init(FAULT_CLAIM_ENV,
	    "a claim written stalls the key-value thread");
	if (v == NULL || *v == '\0')
		return false;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < 1 || n > FAULT_STALL_MAX) {
		log_err("%s=%s: not a number of seconds in 1..%d; test fault "
		    "hook off", FAULT_ENV, v, FAULT_STALL_MAX);
		return false;
	}
	fault_stall_seconds = (unsigned)n;
	log_warnx("%s=%u: TEST ONLY: SIGUSR2 stalls reactor 0 for %u s",
	    FAULT_ENV, fault_stall_seconds, fault_stall_seconds);
	return true;
}

/*
 * Runs on reactor 0 and deliberately breaks its never-block rule: the
 * whole point is a reactor that stops turning its loop.
 */
static void
fault_stall_task(void *owner, void *arg, enum mailbox_status st)
{
	struct timespec ts = { .tv_sec = fault_stall_seconds };
	struct reactor *r = owner;

	(void)arg;
	if (st == MAILBOX_CANCELLED)
		return;
	log_warnx("reactor=%u TEST FAULT: stalling for %u s", r->id,
	    fault_stall_seconds);
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
	log_warnx("reactor=%u TEST FAULT: stall over", r->id);
}

void
fault_stall(struct reactor *const *rs, unsigned n)
{
	if (fault_stall_seconds == 0 || n == 0)
		return;
	reactor_post(rs[0], fault_stall_task, NULL);
}

void
fault_nats_stall(void)
{
	fault_ms_stall(fault_nats_ms, "a NATS delivery thread");
}

void
fault_claim_stall(void)
{
	fault_ms_stall(fault_claim_ms, "the key-value thread");
}
