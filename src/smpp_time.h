/* smpp_time.h: SMPP 3.4 time strings (section 7.1.1): absolute and relative. */
#ifndef ECHOROUTERD_SMPP_TIME_H
#define ECHOROUTERD_SMPP_TIME_H

#include <stdint.h>

/*
 * Reads an SMPP time: "" (none: *out = 0), absolute "YYMMDDhhmmsstnnp"
 * (local time nn quarter hours ahead of UTC for p '+', behind for '-'),
 * or relative "YYMMDDhhmmss000R" (added to now; months and years by the
 * calendar). *out is wall clock seconds (UTC). 0, or -1 if malformed.
 */
int	smpp_time_parse(const char *s, uint64_t now, uint64_t *out);

/* t as "YYMMDDhhmmss000+" (UTC); "" for 0. out has room for 17. */
void	smpp_time_format(uint64_t t, char *out);

#endif
