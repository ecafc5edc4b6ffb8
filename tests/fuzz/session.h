/* session.h: drives one real connection of a protocol through a reactor, for fuzzers. */
#ifndef ECHOROUTERD_FUZZ_SESSION_H
#define ECHOROUTERD_FUZZ_SESSION_H

#include <stddef.h>
#include <stdint.h>

struct proto;

/*
 * Feeds data to a fresh connection speaking proto on a reactor (never
 * started; run on this thread) with a small-limits configuration, in
 * segments whose sizes come from the data itself, then half-closes and
 * runs the reactor until the connection is gone. Replies are read and
 * dropped. Aborts on a broken invariant.
 */
void	fuzz_session(const struct proto *proto, const uint8_t *data,
	    size_t size);

#endif
