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
 * returns false) when the value is not a number in range. Main thread,
 * before the signals are blocked.
 */
bool	fault_init(void);

/* Posts the stall to reactor 0 of rs. Main thread, when armed. */
void	fault_stall(struct reactor *const *rs, unsigned n);

#endif
