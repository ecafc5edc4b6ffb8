/* smpp_receipt.h: SMPP delivery receipts for messages that asked for one. */
#ifndef ECHOROUTERD_SMPP_RECEIPT_H
#define ECHOROUTERD_SMPP_RECEIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msg;

#define SMPP_ESM_RECEIPT	0x04	/* esm_class of a delivery receipt */
#define SMPP_STATE_DELIVERED	2	/* SMPP message_state values */
#define SMPP_STATE_EXPIRED	3
#define SMPP_STATE_DELETED	4
#define SMPP_STATE_UNDELIVERABLE 5
#define SMPP_STATE_ENROUTE	1
#define SMPP_STATE_ACCEPTED	6
#define SMPP_STATE_UNKNOWN	7
#define SMPP_STATE_REJECTED	8

/*
 * The delivery receipt for orig in state (SMPP message_state), with id,
 * done at done_at (wall clock s), to orig->reply_to; NULL if orig asked
 * for none. The caller owns it. Any thread.
 */
struct msg *smpp_receipt_make(const struct msg *orig,
	    uint8_t state, uint64_t id, uint64_t done_at);

/*
 * t (wall clock s) as receipts write dates, "YYMMDDhhmm" in UTC, in buf
 * (len bytes, 11 for all of it). Any thread.
 */
void	smpp_receipt_date(uint64_t t, char *buf, size_t len);

/* The ends of a message a receipt is about: a receipt goes the other way. */
struct smpp_receipt_ends {
	const char *id;			/* the message's, in decimal */
	const char *to, *reply_to;	/* its recipient, its submitter */
	const char *src_addr, *dst_addr;	/* as submitted, 21 bytes each */
	uint8_t	src_ton, src_npi, dst_ton, dst_npi;
};

/*
 * The values of a receipt's text, each NUL-terminated but text (tl
 * bytes). The id is our message's, in decimal: a receipt's maker writes
 * it once, for the text and for receipted_message_id.
 */
struct smpp_receipt_parts {
	const char	*id;
	const char	*sub, *dlvrd, *submit_date, *done_date, *stat, *err;
	const char	*text;
	size_t		 tl;
};

/*
 * Writes the text of a receipt ("id:IIII sub:001 dlvrd:001 submit
 * date:... done date:... stat:DELIVRD err:000 text:...") into out (cap
 * bytes, cut at cap - 1), NUL-terminated; returns its length. Pure.
 */
size_t	smpp_receipt_write(char *out, size_t cap,
	    const struct smpp_receipt_parts *p);

/*
 * A receipt message with text (n bytes), id, made at (wall clock s), in
 * state, for the message e names: from its recipient to its submitter.
 * The caller owns it. Any thread.
 */
struct msg *smpp_receipt_msg(const char *text, size_t n, uint64_t id,
	    uint64_t at, uint8_t state, const struct smpp_receipt_ends *e);

/*
 * The fields of a receipt's text, as SMS centres write it ("id:IIII
 * sub:001 dlvrd:001 submit date:YYMMDDhhmm done date:YYMMDDhhmm
 * stat:DDDDDDD err:EEE text:..."), each "" where absent or too long.
 */
struct smpp_receipt_text {
	char	id[65];
	char	sub[4];
	char	dlvrd[4];
	char	submit_date[13];	/* YYMMDDhhmm[ss] */
	char	done_date[13];
	char	stat[8];
	char	err[4];
	char	text[21];
};

/*
 * Reads the fields of a receipt's text t[0..n) into f; labels in any
 * case. 0, or -1 when it has no id. Pure.
 */
int	smpp_receipt_parse(const uint8_t *t, size_t n,
	    struct smpp_receipt_text *f);

/*
 * The same, read only as far as the outcome: f's stat, err and done_date
 * (the fields before them where they come first; others ""). For a
 * receipt's reader that needs no more, as a line client's RCPT. Pure.
 */
void	smpp_receipt_outcome(const uint8_t *t, size_t n,
	    struct smpp_receipt_text *f);

/*
 * A stat field's SMPP message_state ("DELIVRD": 2); 0 for one it does
 * not know. Pure.
 */
uint8_t	smpp_receipt_state(const char *stat);

/* The stat field of a message_state: "DELIVRD", ..., "UNKNOWN". Pure. */
const char *smpp_receipt_stat(uint8_t state);

/*
 * Whether a receipt in state is the last one for its message: not while
 * it is en route, accepted or unknown (more may follow). Pure.
 */
bool	smpp_receipt_final(uint8_t state);

#endif
