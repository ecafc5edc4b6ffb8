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

struct msg;

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
size_t	cluster_msg_size(const struct msg *m);

/*
 * Writes m (its id, the fields a recipient sees, its text; not who sent
 * it on this node) into out, which has cluster_msg_size(m) bytes.
 * Returns the bytes written.
 */
size_t	cluster_msg_encode(const struct msg *m, uint8_t *out);

/*
 * A message from n bytes at p, which may come from anyone: NULL unless
 * they are one well-formed message (every string within its field's
 * size). Its sender is left for the caller to set.
 */
struct msg *cluster_msg_decode(const uint8_t *p, size_t n);

/*
 * A bundle: messages for one address that one node sends another in one
 * NATS message (a byte saying so, then each message as a 4-byte length
 * and its encoding). At most CLUSTER_BUNDLE_MAX messages.
 */
#define CLUSTER_BUNDLE_MAX	512
#define CLUSTER_BUNDLE_HEAD	1

/* Writes a bundle's first byte into out; returns CLUSTER_BUNDLE_HEAD. */
size_t	cluster_bundle_head(uint8_t *out);

/* Bytes cluster_bundle_put writes for m, at most. */
size_t	cluster_bundle_item_size(const struct msg *m);

/* Appends m to a bundle at out; returns the bytes written. */
size_t	cluster_bundle_put(const struct msg *m, uint8_t *out);

/*
 * The messages of the bundle in n bytes at p, which may come from anyone,
 * into ms[0..max - 1]: how many, or 0 (and nothing left allocated) unless
 * the whole is well-formed and holds 1 to max messages.
 */
size_t	cluster_bundle_decode(const uint8_t *p, size_t n,
	    struct msg **ms, size_t max);

/*
 * Verdicts: a byte saying so, then for each a request id (8 bytes) and
 * the verdict (a byte), for one node: every verdict a node has for
 * another in one NATS message.
 */
#define CLUSTER_VERDICTS_HEAD	1
#define CLUSTER_VERDICT_SIZE	9

/* Writes a batch's first byte into out; returns CLUSTER_VERDICTS_HEAD. */
size_t	cluster_verdicts_head(uint8_t *out);

/* Appends one verdict; returns CLUSTER_VERDICT_SIZE. */
size_t	cluster_verdict_put(uint64_t req, uint8_t v, uint8_t *out);

/*
 * How many verdicts the n bytes at p hold, or -1 if they are not a
 * batch. The i-th is then read with cluster_verdict_get.
 */
long	cluster_verdicts_count(const uint8_t *p, size_t n);
void	cluster_verdict_get(const uint8_t *p, size_t i, uint64_t *req,
	    uint8_t *v);

/*
 * The first byte of the n bytes at p when they are a bundle or a batch of
 * verdicts in another version's format (0xB?, 0xA?, not this version's);
 * 0 otherwise. Such a node's traffic cannot be read here.
 */
unsigned cluster_wire_foreign(const uint8_t *p, size_t n);

/* This version's format of the kind of foreign (a cluster_wire_foreign). */
unsigned cluster_wire_format(unsigned foreign);

/*
 * url as it may be shown (logs, the stats line, STATUS=, errors), into out
 * (n bytes, truncated to fit): without its userinfo, "nats://user:pw@h:p"
 * as "nats://h:p", since a password or token there is a secret.
 */
void	cluster_url_shown(const char *url, char *out, size_t n);

#endif
