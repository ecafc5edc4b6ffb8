/* text_join.h: reassembly of concatenated SMS parts (UDH or SAR), bounded in memory and time. */
#ifndef ECHOROUTERD_TEXT_JOIN_H
#define ECHOROUTERD_TEXT_JOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A concatenation header: which message, how many parts, which one. */
struct text_concat {
	uint16_t ref;		/* 8- or 16-bit reference */
	uint8_t	total;		/* parts in the message, >= 1 */
	uint8_t	seq;		/* this part, 1..total */
	bool	ref16;		/* IE 08 (16-bit), SAR; not IE 00 */
};

/*
 * Reads the UDH at the start of sm[0..n) (the UDHI bit set in esm_class:
 * the first octet is the header's length): *udh_len is the header's size
 * with its length octet, the text starts there. Finds a concatenation IE
 * (00: 8-bit reference, 08: 16-bit) wherever it sits among other IEs; a
 * later one wins, as 3GPP TS 23.040 says of repeated IEs. Returns 1 and
 * fills *c if there is one, 0 if not, -1 with EILSEQ if the header runs
 * past n or an IE past the header, a concatenation IE has the wrong
 * length, or its numbers are out of range (total 0, seq 0 or past
 * total). Pure; any thread.
 */
int	text_udh_concat(const uint8_t *sm, size_t n, struct text_concat *c,
	    size_t *udh_len);

/*
 * The table of messages waiting for parts. Keyed by (owner, sender,
 * recipient, reference, total): owner is who the caps are counted
 * against (e.g. the SMPP account that submits), sender and recipient the
 * message's addresses. Thread context: one thread, normally the reactor
 * that owns the submitting connection; no locking inside.
 */
struct text_join;

struct text_join_limits {
	unsigned max_pending;		/* messages waiting, in all */
	size_t	max_bytes;		/* part octets held, in all */
	unsigned max_pending_owner;	/* messages waiting, per owner */
	size_t	max_bytes_owner;	/* octets held, per owner */
	uint64_t timeout_ms;		/* from a message's first part */
};

/*
 * One part as it arrived, its octets without the UDH; the strings are
 * NUL-terminated and not NULL. Borrowed for the call: the table copies
 * what it keeps.
 */
struct text_join_part {
	const char *owner;
	const char *sender;
	const char *recipient;
	struct text_concat concat;
	uint8_t	data_coding;
	uint64_t id;			/* the caller's, e.g. the message id
					   it answered the part with */
	const uint8_t *data;
	size_t	len;
	/*
	 * The owner's own caps, and the timeout of a message this part
	 * starts: 0 takes the table's (each owner may have its own, and a
	 * reload may change them between parts).
	 */
	unsigned max_pending_owner;
	size_t	max_bytes_owner;
	uint64_t timeout_ms;
};

/*
 * A message complete or expired: the parts' octets in order, joined
 * (complete), or what arrived (expired: ids[i] of a missing part is 0 and
 * its octets are absent). Owned by the receiver; text_join_msg_free.
 */
struct text_join_msg {
	char	*owner;
	char	*sender;
	char	*recipient;
	struct text_concat concat;	/* seq is 0 */
	uint8_t	data_coding;
	unsigned received;		/* parts that arrived */
	uint64_t *ids;			/* concat.total, by seq - 1 */
	uint8_t	*data;
	size_t	len;
};

/* Frees m and what it holds; NULL is a no-op. */
void	text_join_msg_free(struct text_join_msg *m);

/*
 * A table with these limits (each cap at least 1). Never NULL (the x*
 * allocators' policy). text_join_free frees it with every part it holds;
 * NULL is a no-op.
 */
struct text_join *text_join_new(const struct text_join_limits *lim);
void	text_join_free(struct text_join *j);

enum {
	TEXT_JOIN_PENDING = 0,	/* kept; more parts to come */
	TEXT_JOIN_DONE = 1,	/* *done is the whole message */
	TEXT_JOIN_DUP = 2,	/* that part was already here: ignored */
};

/*
 * Adds part p at time now_ms (CLOCK_MONOTONIC ms). Returns
 * TEXT_JOIN_PENDING, TEXT_JOIN_DUP, or TEXT_JOIN_DONE with *done set
 * (a message of one part is done at once), or -1 with errno and nothing
 * kept: EINVAL bad numbers (total 0, seq 0 or past total), EILSEQ a
 * data_coding other than the message's first part's, ENOBUFS a cap
 * reached (the caller refuses the part, e.g. with a throttling status).
 * A duplicate keeps the first copy.
 */
int	text_join_add(struct text_join *j, const struct text_join_part *p,
	    uint64_t now_ms, struct text_join_msg **done);

/* Whether the message p is a part of is waiting here (has parts in). */
bool	text_join_has(const struct text_join *j,
	    const struct text_join_part *p);

/*
 * Called for each message that expired, which it then owns (free it
 * with text_join_msg_free), e.g. to send UNDELIV receipts for m->ids.
 */
typedef void text_join_expired_fn(void *arg, struct text_join_msg *m);

/*
 * Expires the messages whose first part is their timeout old at now_ms
 * (the table's timeout_ms, or the one their first part gave), oldest
 * first, through fn. Returns how many. now_ms = UINT64_MAX
 * expires every one (at shutdown, to report them).
 */
unsigned text_join_expire(struct text_join *j, uint64_t now_ms,
	    text_join_expired_fn *fn, void *arg);

/*
 * When the oldest waiting message expires (for a timer), or UINT64_MAX
 * when none waits.
 */
uint64_t text_join_next_expiry(const struct text_join *j);

/* Messages waiting and octets held, in all. */
unsigned text_join_pending(const struct text_join *j);
size_t	text_join_bytes(const struct text_join *j);

#endif
