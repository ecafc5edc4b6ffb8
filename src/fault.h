/* fault.h: test-only fault injection, off unless the environment asks. */
#ifndef ECHOROUTERD_FAULT_H
#define ECHOROUTERD_FAULT_H

#include <stdbool.h>

struct reactor;

/*
 * FOR TESTS ONLY. Reads ECHOROUTERD_TEST_STALL (seconds, 1..3600). When it
 * is set, SIGUSR2 makes reactor 0 block for that long so that the watchdog
 * can be seen to stop pinging; without it SIGUSR2 is left alone. Returns
 * whether the hook is armed; logs a warning when it is and an error (and
 * returns false) when the value is not a number in range. Reads
 * ECHOROUTERD_TEST_NATS_STALL and ECHOROUTERD_TEST_CLAIM_STALL too
 * (fault_nats_stall, fault_claim_stall). Main thread, before the signals
 * are blocked.
 */
bool	fault_init(void);

/* Posts the stall to reactor 0 of rs. Main thread, when armed. */
void	fault_stall(struct reactor *const *rs, unsigned n);

/*
 * FOR TESTS ONLY. With ECHOROUTERD_TEST_NATS_STALL (milliseconds,
 * 1..60000, read by fault_init) set, blocks the calling libnats delivery
 * thread that long, as a loaded machine may keep it: called when a
 * cluster name probe arrives. A no-op otherwise. Any thread.
 */
void	fault_nats_stall(void);

/*
 * FOR TESTS ONLY. With ECHOROUTERD_TEST_CLAIM_STALL (milliseconds,
 * 1..60000) set, blocks the key-value thread that long between a LOGIN's
 * claim written to the cluster's bucket and the address taken here, as a
 * loaded machine may: other nodes hear of the claim, and send to this
 * node, before it has the address. A no-op otherwise.
 */
void	fault_claim_stall(void);

#endif
