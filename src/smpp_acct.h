/*
 * smpp_acct.h: what SMPP accounts share across reactors: the binds each
 * holds (max_binds, and /metrics' bind counts) and the max_tps token
 * bucket. Few accounts, short critical sections under one lock.
 */
#ifndef ECHOROUTERD_SMPP_ACCT_H
#define ECHOROUTERD_SMPP_ACCT_H

#include <stdbool.h>
#include <stdint.h>

/* A bind's type as the table counts it: 0 tx, 1 rx, 2 trx. */
unsigned smpp_bind_type(uint32_t command_id);

/*
 * Counts one more bind of type for account id unless it holds max
 * already: false then. Any thread.
 */
bool	smpp_acct_bind(const char *id, unsigned max, unsigned type);

/* One bind of type for id is gone. Any thread. */
void	smpp_acct_unbind(const char *id, unsigned type);

/*
 * Takes one token from id's bucket, which refills at tps per second and
 * holds at most tps (a second's burst). false: over the limit. An account
 * with no bind has no bucket: true. Any thread.
 */
bool	smpp_acct_take_token(const char *id, unsigned tps);

/*
 * The same for a sender that holds no bind (the http listeners): the
 * bucket is made at first use, full, and kept, so that id's SMPP binds
 * and HTTP requests share one max_tps. Any thread.
 */
bool	smpp_acct_take_token_any(const char *id, unsigned tps);

/* For smpp_binds_each: n binds of type ("receiver", ...) for account. */
typedef void smpp_binds_fn(const char *account, const char *type,
	    unsigned n, void *arg);

/* Calls fn for each account's SMPP binds now, by type. Any thread. */
void	smpp_binds_each(smpp_binds_fn *fn, void *arg);

#endif
