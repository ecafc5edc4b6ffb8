/*
 * receipt_map.h: which of our messages an SMS centre's receipt is about:
 * the keys its message ids are filed and looked up under, in the forms
 * SMS centres write them, and the bounded map from those to our ids and
 * submitters.
 */
#ifndef ECHOROUTERD_RECEIPT_MAP_H
#define ECHOROUTERD_RECEIPT_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "route.h"

#define RECEIPT_ID_MAX		64	/* an SMPP message_id's characters */
#define RECEIPT_KEYS_MAX	3

enum receipt_key_kind {
	RECEIPT_KEY_STR,		/* the id's text */
	RECEIPT_KEY_VAL,		/* a number it stands for */
};

/* One key an id is filed or looked up under. */
struct receipt_key {
	enum receipt_key_kind kind;
	uint64_t val;			/* RECEIPT_KEY_VAL */
	size_t	len;			/* RECEIPT_KEY_STR: str's */
	char	str[RECEIPT_ID_MAX + 1];
};

/*
 * The keys of an SMS centre's message id (len bytes at id) for an
 * upstream's receipt_id form (enum upstream_receipt_id), into keys
 * (RECEIPT_KEYS_MAX of them): filed, as the submit_sm_resp gave it
 * (receipt false), or looked up, as a receipt gives it (receipt true):
 *   same: the text, exactly;
 *   hex:  filed by its decimal value, looked up by its hexadecimal one;
 *   dec:  filed by its hexadecimal value, looked up by its decimal one;
 *   auto: the text in lower case, its decimal value, its hexadecimal
 *         value, each where it parses (within 64 bits).
 * Values ignore leading zeros and the case of hex digits. An id that has
 * no value in the form's sense falls back to its text. A lookup tries
 * the keys in order; the first that finds an entry wins. Returns how
 * many keys, 0 for an empty id or one over RECEIPT_ID_MAX. Pure.
 */
unsigned receipt_id_keys(unsigned form, bool receipt, const char *id,
	    size_t len, struct receipt_key *keys);

/* What a message submitted to an upstream leaves for its receipt. */
struct receipt_orig {
	uint64_t id;			/* our message id */
	uint64_t submitted;		/* wall clock s */
	char	reply_to[ROUTE_ADDR_MAX + 1];	/* the submitter */
	char	to[ROUTE_ADDR_MAX + 1];		/* its recipient */
	char	src_addr[21];		/* as submitted */
	char	dst_addr[21];
	uint8_t	src_ton, src_npi, dst_ton, dst_npi;
	uint8_t	registered_delivery;	/* what receipts it asked for */
	bool	http;			/* an HTTP send: its receipt is posted
					   to its URL (MSG_F_HTTP_RCPT) */
};

/*
 * The map's bounds: at most limit entries (the oldest go first), none
 * older than expiry seconds.
 */
struct receipt_limits {
	uint64_t limit;
	unsigned expiry;
};

struct receipt_map;

/* An empty map. receipt_map_free(NULL) is a no-op. */
struct receipt_map *receipt_map_new(void);
void	receipt_map_free(struct receipt_map *map);

/*
 * Files o under upstream's id by its n keys (receipt_id_keys of the id
 * as the submit_sm_resp gave it), at now (s, any steady clock the caller
 * keeps), within lim: the oldest entries go to make room, and expired
 * ones as it passes. 0, or -1 with errno EINVAL when n is 0 (an id
 * receipt_id_keys has no key for). Any thread.
 */
int	receipt_map_add(struct receipt_map *map, const char *upstream,
	    const struct receipt_key *keys, unsigned n,
	    const struct receipt_orig *o, uint64_t now,
	    const struct receipt_limits *lim);

/*
 * Looks up the entry a receipt from upstream names (by the n keys of its
 * id, receipt_id_keys with receipt true) at now: true and its record in
 * *o, false when there is none (or only an expired one). A final receipt
 * (final) takes the entry out; an intermediate one leaves it for the
 * final one. Any thread.
 */
bool	receipt_map_find(struct receipt_map *map, const char *upstream,
	    const struct receipt_key *keys, unsigned n, bool final,
	    uint64_t now, const struct receipt_limits *lim,
	    struct receipt_orig *o);

/* The entries in map now. Any thread. */
size_t	receipt_map_count(struct receipt_map *map);

#endif
