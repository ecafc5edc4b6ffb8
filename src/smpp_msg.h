/* smpp_msg.h: a message as the SMPP PDU that brings it in says it. */
#ifndef ECHOROUTERD_SMPP_MSG_H
#define ECHOROUTERD_SMPP_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msg;
struct smpp_pdu;

/*
 * The text of a submit_sm, data_sm or deliver_sm: its message_payload
 * when it has one, else its short_message; *len its length. Borrowed from
 * p.
 */
const uint8_t *smpp_msg_text(const struct smpp_pdu *p, size_t *len);

/*
 * An SMPP address (source_addr, destination_addr) as the route table
 * knows it, in out (len bytes): international numbers (TON 1) get their
 * '+'. false if it is not a valid address.
 */
bool	smpp_msg_addr(const char *addr, uint8_t ton, char *out, size_t len);

/*
 * A new message with p's text (smpp_msg_text) and what p says of it: the
 * sender's sequence number and command, the time now as its submit time,
 * the TONs and NPIs, the addresses as sent, esm_class's UDH indicator and
 * reply path, data_coding, and the sar_* fields (MSG_F_SAR) when p has
 * them. from and to are where it goes as the route table knows them. The
 * caller sets the rest (id, flags of its own, reply_to) and owns it. Any
 * thread.
 */
struct msg *smpp_msg_new(const struct smpp_pdu *p, const char *from,
	    const char *to);

/*
 * The flags that tell a line client's edge how to read octets sent in
 * data_coding, 0 in alphabet (a CONFIG_ALPHABET_* value).
 */
uint32_t smpp_msg_coding_flags(unsigned alphabet);

#endif
