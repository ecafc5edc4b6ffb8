/*
 * cluster_wire.h: what nodes send each other through NATS, byte for byte:
 * addresses as subject tokens and KV keys, messages, verdicts. No libnats
 * here: any thread, and the unit tests and fuzzers use it alone.
 */
#ifndef ECHOROUTERD_CLUSTER_WIRE_H
#define ECHOROUTERD_CLUSTER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "route.h"

struct deliver_msg;

/* An address's token: each byte outside A-Z a-z 0-9 _ - as =XX. */
#define CLUSTER_TOKEN_MAX	(ROUTE_ADDR_MAX * 3)

/*
 * Writes addr as a subject token and KV key (NATS takes neither ".", "*",
 * ">" nor spaces in a token, and keys only [-/_=.a-zA-Z0-9]) into out,
 * which has room for CLUSTER_TOKEN_MAX + 1 bytes. Returns its length.
 */
size_t	cluster_token_encode(const char *addr, char *out);

/*
 * The address a token names, into out (ROUTE_ADDR_MAX + 1 bytes). false
 * if tok is not the encoding of a valid address.
 */
bool	cluster_token_decode(const char *tok, size_t len, char *out);

/* Bytes cluster_msg_encode writes for m, at most. */
size_t	cluster_msg_size(const struct deliver_msg *m);

/*
 * Writes m (its id, the fields a recipient sees, its text; not who sent
 * it on this node) into out, which has cluster_msg_size(m) bytes.
 * Returns the bytes written.
 */
size_t	cluster_msg_encode(const struct deliver_msg *m, uint8_t *out);

/*
 * A message from n bytes at p, which may come from anyone: NULL unless
 * they are one well-formed message (every string within its field's
 * size). Its sender is left for the caller to set.
 */
struct deliver_msg *cluster_msg_decode(const uint8_t *p, size_t n);

#endif
