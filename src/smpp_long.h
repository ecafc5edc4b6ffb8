/* smpp_long.h: a line client's text for an SMPP recipient, encoded and split into deliver_sm parts, and the one outcome their answers make. */
#ifndef ECHOROUTERD_SMPP_LONG_H
#define ECHOROUTERD_SMPP_LONG_H

#include <stdbool.h>
#include <stdint.h>

#include "text.h"

struct config;
struct msg;
struct smpp_pdu;

/*
 * A message that goes as more than one deliver_sm (or as one
 * message_payload): its parts, which are sent in order and may wait for
 * room in the window between them, and their answers so far. The
 * message's outcome is told once, when every part is sent and answered.
 * Owned by the session that sends it; one reactor only.
 */
struct smpp_long {
	struct msg *m;		/* every part's octets, back to back */
	bool	payload;	/* one part, in message_payload */
	bool	sar;		/* the sar_* TLVs, not a UDH */
	uint16_t ref;		/* sar_msg_ref_num */
	unsigned nparts;
	unsigned next;		/* parts sent */
	unsigned unanswered;	/* parts sent and not answered yet */
	uint32_t status;	/* the answer that decides, so far */
	struct text_part part[];
};

/* What the recipient account asks for (its coding, long, max_parts). */
struct smpp_long_opts {
	int	coding;		/* TEXT_CODING_AUTO or a text_coding */
	enum text_long how;
	unsigned max_parts;	/* 1..TEXT_PARTS_MAX */
	uint16_t ref;		/* the reference for a new set of parts */
};

/*
 * What account id asks for, its own settings (coding, long, max_parts)
 * or the smpp group's where it has none, into o; o->ref is the caller's.
 * Any thread that holds cf.
 */
void	smpp_long_opts_of(const struct config *cf, const char *id,
	    struct smpp_long_opts *o);

/*
 * Encodes m's UTF-8 text for an SMPP recipient as o asks. Sets *d to a
 * copy of m with the encoded text (data_coding set, MSG_F_CODED, the
 * UDHI bit in esm_class when the parts carry a UDH), and *lp to NULL
 * when it goes as one short_message, or to its parts (which point into
 * *d's text) when it goes as several or as one message_payload. Returns
 * the count of parts, or -1 with nothing allocated: EILSEQ, ERANGE (the
 * text cannot be put in the coding asked for), EMSGSIZE (more parts than
 * o->max_parts; *needed then says how many it takes when it is at most
 * TEXT_PARTS_MAX, else 0). Any thread.
 */
int	smpp_long_make(const struct msg *m, const struct smpp_long_opts *o,
	    struct msg **d, struct smpp_long **lp, unsigned *needed);

/*
 * Fills pdu's text fields (short_message or message_payload, esm_class
 * and data_coding from lp->m, the sar_* TLVs) for part i of lp; pdu's
 * other fields are the caller's. The pointers are into lp->m.
 */
void	smpp_long_part(const struct smpp_long *lp, unsigned i,
	    struct smpp_pdu *pdu);

/*
 * Records a part's answer (its command_status). True when that was the
 * last part owed one: every part sent and answered; smpp_long_status
 * then is the message's.
 */
bool	smpp_long_answered(struct smpp_long *lp, uint32_t status);

/*
 * The message's status: ESME_ROK when every part was taken, else the
 * first permanent error of a part, else the first temporary one (retried
 * as a whole), as status_temporary says.
 */
static inline uint32_t
smpp_long_status(const struct smpp_long *lp)
{
	return lp->status;
}

/* Whether a deliver_sm_resp status is a temporary error. */
bool	smpp_status_temporary(uint32_t status);

/* Frees lp, not lp->m. NULL: nothing. */
void	smpp_long_free(struct smpp_long *lp);

#endif
