/* smpp_receipt.h: SMPP delivery receipts for messages that asked for one. */
#ifndef ECHOROUTERD_SMPP_RECEIPT_H
#define ECHOROUTERD_SMPP_RECEIPT_H

#include <stdint.h>

struct msg;

#define SMPP_ESM_RECEIPT	0x04	/* esm_class of a delivery receipt */
#define SMPP_STATE_DELIVERED	2	/* SMPP message_state values */
#define SMPP_STATE_EXPIRED	3
#define SMPP_STATE_DELETED	4
#define SMPP_STATE_UNDELIVERABLE 5

/*
 * The delivery receipt for orig in state (SMPP message_state), with id,
 * done at done_at (wall clock s), to orig->reply_to; NULL if orig asked
 * for none. The caller owns it. Any thread.
 */
struct msg *smpp_receipt_make(const struct msg *orig,
	    uint8_t state, uint64_t id, uint64_t done_at);

#endif
