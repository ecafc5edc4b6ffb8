/* smpp_msg.c: a message as the SMPP PDU that brings it in says it. */
#include "smpp_msg.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "msg.h"
#include "route.h"
#include "smpp_pdu.h"
#include "util.h"

const uint8_t *
smpp_msg_text(const struct smpp_pdu *p, size_t *len)
{
	if (p->tlvs & SMPP_TLV_MESSAGE_PAYLOAD) {
		*len = p->message_payload_len;
		return p->message_payload;
	}
	*len = p->sm_length;
	return p->short_message;
}

bool
smpp_msg_addr(const char *addr, uint8_t ton, char *out, size_t len)
{
	if (ton == 1 && addr[0] != '+' && len > 1) {
		out[0] = '+';
		str_copy(out + 1, len - 1, addr);
	} else {
		str_copy(out, len, addr);
	}
	return route_addr_valid(out, strlen(out));
}

struct msg *
smpp_msg_new(const struct smpp_pdu *p, const char *from, const char *to)
{
	size_t len;
	const uint8_t *t = smpp_msg_text(p, &len);
	struct msg *m = msg_new(len);

	if (len > 0)
		memcpy(m->text, t, len);
	m->len = len;
	m->sender_ref = p->sequence_number;
	m->sender_cmd = p->command_id;
	m->submitted = (uint64_t)time(NULL);
	m->src_ton = p->source_addr_ton;
	m->src_npi = p->source_addr_npi;
	m->dst_ton = p->dest_addr_ton;
	m->dst_npi = p->dest_addr_npi;
	/* The UDH indicator and reply path travel with the message. */
	m->esm_class = p->esm_class & 0xC0;
	m->data_coding = p->data_coding;
	/* Each cut where the arrays end (21 and 65 bytes). */
	str_copy(m->src_addr, sizeof(m->src_addr), p->source_addr);
	str_copy(m->dst_addr, sizeof(m->dst_addr), p->destination_addr);
	str_copy(m->from, sizeof(m->from), from);
	str_copy(m->to, sizeof(m->to), to);
	if (p->tlvs & SMPP_TLV_SAR) {
		m->flags |= MSG_F_SAR;
		m->sar_ref = p->sar_msg_ref_num;
		m->sar_total = p->sar_total_segments;
		m->sar_seq = p->sar_segment_seqnum;
	}
	return m;
}

uint32_t
smpp_msg_coding_flags(unsigned alphabet)
{
	switch (alphabet) {
	case CONFIG_ALPHABET_LATIN1:
		return MSG_F_CODED | MSG_F_DC0_LATIN1;
	case CONFIG_ALPHABET_ASCII:
		return MSG_F_CODED | MSG_F_DC0_IA5;
	default:
		return MSG_F_CODED;
	}
}
