/* smpp_pdu.c: SMPP 3.4 PDU decoding and encoding, bounds-checked throughout. */
#include "counter.h"
#include "smpp_pdu.h"

#include <string.h>

/* A read cursor over one PDU; status is the first error met. */
struct rd {
	const uint8_t *p;
	size_t	n;
	size_t	off;
	uint32_t status;
};

/* A write cursor; overflow makes it fail. */
struct wr {
	uint8_t	*p;
	size_t	cap;
	size_t	off;
	bool	overflow;
};

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
rd_fail(struct rd *r, uint32_t status)
{
	if (r->status == SMPP_ESME_ROK)
		r->status = status;
}

static uint8_t
rd_u8(struct rd *r)
{
	if (r->status != SMPP_ESME_ROK || r->off + 1 > r->n) {
		rd_fail(r, SMPP_ESME_RINVCMDLEN);
		return 0;
	}
	return r->p[r->off++];
}

/*
 * A C-octet string of at most max bytes with its NUL. No NUL within max
 * (or before the end) fails with status.
 */
static void
rd_cstr(struct rd *r, char *dst, size_t max, uint32_t status)
{
	size_t avail, len;
	const uint8_t *nul;

	dst[0] = '\0';
	if (r->status != SMPP_ESME_ROK)
		return;
	avail = r->n - r->off;
	/* Most of a submit_sm's strings are empty: no search for those. */
	if (avail > 0 && r->p[r->off] == '\0') {
		r->off++;
		return;
	}
	nul = memchr(r->p + r->off, '\0', avail < max ? avail : max);
	if (nul == NULL) {
		rd_fail(r, avail < max ? SMPP_ESME_RINVCMDLEN : status);
		return;
	}
	len = (size_t)(nul - (r->p + r->off));
	memcpy(dst, r->p + r->off, len);
	dst[len] = '\0';
	r->off += len + 1;
}

static void
rd_tlv(struct rd *r, uint16_t tag, const uint8_t *v, uint16_t len,
    struct smpp_pdu *pdu)
{
	switch (tag) {
	case SMPP_TAG_MESSAGE_PAYLOAD:
		pdu->tlvs |= SMPP_TLV_MESSAGE_PAYLOAD;
		pdu->message_payload = v;
		pdu->message_payload_len = len;
		return;
	case SMPP_TAG_RECEIPTED_MESSAGE_ID:
		if (len == 0 || len > sizeof(pdu->receipted_message_id))
			break;
		/* Its NUL is in the value; take at most 64 characters. */
		memcpy(pdu->receipted_message_id, v, len < 64 ? len : 64);
		pdu->receipted_message_id[len < 64 ? len : 64] = '\0';
		pdu->tlvs |= SMPP_TLV_RECEIPTED_MESSAGE_ID;
		return;
	case SMPP_TAG_MESSAGE_STATE:
		if (len != 1)
			break;
		pdu->message_state_tlv = v[0];
		pdu->tlvs |= SMPP_TLV_MESSAGE_STATE;
		return;
	case SMPP_TAG_SC_INTERFACE_VERSION:
		if (len != 1)
			break;
		pdu->sc_interface_version = v[0];
		pdu->tlvs |= SMPP_TLV_SC_INTERFACE_VERSION;
		return;
	case SMPP_TAG_USER_MESSAGE_REFERENCE:
		if (len != 2)
			break;
		pdu->user_message_reference = (uint16_t)(v[0] << 8 | v[1]);
		pdu->tlvs |= SMPP_TLV_USER_MESSAGE_REFERENCE;
		return;
	case SMPP_TAG_SAR_MSG_REF_NUM:
		if (len != 2)
			break;
		pdu->sar_msg_ref_num = (uint16_t)(v[0] << 8 | v[1]);
		pdu->tlvs |= SMPP_TLV_SAR;
		return;
	case SMPP_TAG_SAR_TOTAL_SEGMENTS:
	case SMPP_TAG_SAR_SEGMENT_SEQNUM:
		if (len != 1)
			break;
		if (tag == SMPP_TAG_SAR_TOTAL_SEGMENTS)
			pdu->sar_total_segments = v[0];
		else
			pdu->sar_segment_seqnum = v[0];
		pdu->tlvs |= SMPP_TLV_SAR;
		return;
	default:
		return;		/* unknown optional parameters are skipped */
	}
	rd_fail(r, SMPP_ESME_RINVPARLEN);
}

static void
rd_tlvs(struct rd *r, struct smpp_pdu *pdu)
{
	while (r->status == SMPP_ESME_ROK && r->off < r->n) {
		const uint8_t *h = r->p + r->off;
		uint16_t tag, len;

		if (r->n - r->off < 4) {
			rd_fail(r, SMPP_ESME_RINVOPTPARSTREAM);
			return;
		}
		tag = (uint16_t)(h[0] << 8 | h[1]);
		len = (uint16_t)(h[2] << 8 | h[3]);
		if (r->n - r->off - 4 < len) {
			rd_fail(r, SMPP_ESME_RINVOPTPARSTREAM);
			return;
		}
		rd_tlv(r, tag, h + 4, len, pdu);
		r->off += 4 + (size_t)len;
	}
}

static void
rd_bind(struct rd *r, struct smpp_pdu *pdu)
{
	rd_cstr(r, pdu->system_id, sizeof(pdu->system_id), SMPP_ESME_RINVSYSID);
	rd_cstr(r, pdu->password, sizeof(pdu->password), SMPP_ESME_RINVPASWD);
	rd_cstr(r, pdu->system_type, sizeof(pdu->system_type),
	    SMPP_ESME_RINVSYSTYP);
	pdu->interface_version = rd_u8(r);
	pdu->addr_ton = rd_u8(r);
	pdu->addr_npi = rd_u8(r);
	rd_cstr(r, pdu->address_range, sizeof(pdu->address_range),
	    SMPP_ESME_RINVPARLEN);
}

/* source_addr_ton, source_addr_npi and source_addr (max with its NUL). */
static void
rd_src(struct rd *r, struct smpp_pdu *pdu, size_t max)
{
	pdu->source_addr_ton = rd_u8(r);
	pdu->source_addr_npi = rd_u8(r);
	rd_cstr(r, pdu->source_addr, max, SMPP_ESME_RINVSRCADR);
}

/* dest_addr_ton, dest_addr_npi and destination_addr. */
static void
rd_dst(struct rd *r, struct smpp_pdu *pdu, size_t max)
{
	pdu->dest_addr_ton = rd_u8(r);
	pdu->dest_addr_npi = rd_u8(r);
	rd_cstr(r, pdu->destination_addr, max, SMPP_ESME_RINVDSTADR);
}

/* sm_length and short_message; false when it failed. */
static bool
rd_short_message(struct rd *r, struct smpp_pdu *pdu)
{
	pdu->sm_length = rd_u8(r);
	if (r->status != SMPP_ESME_ROK)
		return false;
	if (pdu->sm_length > 254 || r->n - r->off < pdu->sm_length) {
		rd_fail(r, SMPP_ESME_RINVMSGLEN);
		return false;
	}
	pdu->short_message = r->p + r->off;
	r->off += pdu->sm_length;
	return true;
}

/* submit_sm and deliver_sm share their layout. */
static void
rd_sm(struct rd *r, struct smpp_pdu *pdu)
{
	rd_cstr(r, pdu->service_type, 6, SMPP_ESME_RINVSERTYP);
	rd_src(r, pdu, 21);
	rd_dst(r, pdu, 21);
	pdu->esm_class = rd_u8(r);
	pdu->protocol_id = rd_u8(r);
	pdu->priority_flag = rd_u8(r);
	rd_cstr(r, pdu->schedule_delivery_time, 17, SMPP_ESME_RINVSCHED);
	rd_cstr(r, pdu->validity_period, 17, SMPP_ESME_RINVEXPIRY);
	pdu->registered_delivery = rd_u8(r);
	pdu->replace_if_present_flag = rd_u8(r);
	pdu->data_coding = rd_u8(r);
	pdu->sm_default_msg_id = rd_u8(r);
	if (!rd_short_message(r, pdu))
		return;
	rd_tlvs(r, pdu);
	if (r->status == SMPP_ESME_ROK && pdu->sm_length > 0 &&
	    (pdu->tlvs & SMPP_TLV_MESSAGE_PAYLOAD))
		rd_fail(r, SMPP_ESME_RINVMSGLEN);	/* one or the other */
}

/* cancel_sm (section 4.9.1). */
static void
rd_cancel_sm(struct rd *r, struct smpp_pdu *pdu)
{
	rd_cstr(r, pdu->service_type, 6, SMPP_ESME_RINVSERTYP);
	rd_cstr(r, pdu->message_id, 65, SMPP_ESME_RINVMSGID);
	rd_src(r, pdu, 21);
	rd_dst(r, pdu, 21);
}

/* replace_sm (section 4.10.1). */
static void
rd_replace_sm(struct rd *r, struct smpp_pdu *pdu)
{
	rd_cstr(r, pdu->message_id, 65, SMPP_ESME_RINVMSGID);
	rd_src(r, pdu, 21);
	rd_cstr(r, pdu->schedule_delivery_time, 17, SMPP_ESME_RINVSCHED);
	rd_cstr(r, pdu->validity_period, 17, SMPP_ESME_RINVEXPIRY);
	pdu->registered_delivery = rd_u8(r);
	pdu->sm_default_msg_id = rd_u8(r);
	rd_short_message(r, pdu);
}

static void
rd_data_sm(struct rd *r, struct smpp_pdu *pdu)
{
	rd_cstr(r, pdu->service_type, 6, SMPP_ESME_RINVSERTYP);
	rd_src(r, pdu, 65);
	rd_dst(r, pdu, 65);
	pdu->esm_class = rd_u8(r);
	pdu->registered_delivery = rd_u8(r);
	pdu->data_coding = rd_u8(r);
	rd_tlvs(r, pdu);
}

/* Responses: a body is optional when the status is an error. */
static void
rd_resp(struct rd *r, struct smpp_pdu *pdu, bool tlvs)
{
	if (r->off == r->n)
		return;
	rd_cstr(r, pdu->message_id, sizeof(pdu->message_id),
	    SMPP_ESME_RINVMSGID);
	if (tlvs)
		rd_tlvs(r, pdu);
}

static void
rd_body(struct rd *r, struct smpp_pdu *pdu)
{
	switch (pdu->command_id) {
	case SMPP_BIND_RECEIVER:
	case SMPP_BIND_TRANSMITTER:
	case SMPP_BIND_TRANSCEIVER:
		rd_bind(r, pdu);
		break;
	case SMPP_BIND_RECEIVER | SMPP_RESP:
	case SMPP_BIND_TRANSMITTER | SMPP_RESP:
	case SMPP_BIND_TRANSCEIVER | SMPP_RESP:
		if (r->off < r->n) {
			rd_cstr(r, pdu->system_id, sizeof(pdu->system_id),
			    SMPP_ESME_RINVSYSID);
			rd_tlvs(r, pdu);
		}
		break;
	case SMPP_SUBMIT_SM:
	case SMPP_DELIVER_SM:
		rd_sm(r, pdu);
		break;
	case SMPP_DATA_SM:
		rd_data_sm(r, pdu);
		break;
	case SMPP_SUBMIT_SM | SMPP_RESP:
	case SMPP_DELIVER_SM | SMPP_RESP:
		rd_resp(r, pdu, false);
		break;
	case SMPP_DATA_SM | SMPP_RESP:
		rd_resp(r, pdu, true);
		break;
	case SMPP_QUERY_SM:
		rd_cstr(r, pdu->message_id, 65, SMPP_ESME_RINVMSGID);
		rd_src(r, pdu, 21);
		break;
	case SMPP_QUERY_SM | SMPP_RESP:
		if (r->off < r->n) {
			rd_cstr(r, pdu->message_id, 65, SMPP_ESME_RINVMSGID);
			rd_cstr(r, pdu->final_date, 17, SMPP_ESME_RINVPARLEN);
			pdu->message_state = rd_u8(r);
			pdu->error_code = rd_u8(r);
		}
		break;
	case SMPP_CANCEL_SM:
		rd_cancel_sm(r, pdu);
		break;
	case SMPP_REPLACE_SM:
		rd_replace_sm(r, pdu);
		break;
	case SMPP_CANCEL_SM | SMPP_RESP:
	case SMPP_REPLACE_SM | SMPP_RESP:
	case SMPP_UNBIND:
	case SMPP_UNBIND | SMPP_RESP:
	case SMPP_ENQUIRE_LINK:
	case SMPP_ENQUIRE_LINK | SMPP_RESP:
	case SMPP_GENERIC_NACK:
		break;
	default:
		rd_fail(r, SMPP_ESME_RINVCMDID);
		return;
	}
	/* Bytes left over in a PDU without optional parameters. */
	if (r->status == SMPP_ESME_ROK && r->off != r->n)
		rd_fail(r, SMPP_ESME_RINVCMDLEN);
}

ssize_t
smpp_frame_len(const uint8_t *p, size_t n, size_t max_len)
{
	uint32_t len;

	if (n < 4)
		return 0;
	len = be32(p);
	if (len < SMPP_HEADER_LEN || len > max_len)
		return -1;
	return n >= len ? (ssize_t)len : 0;
}

void
smpp_peek_header(const uint8_t *p, uint32_t *len, uint32_t *id,
    uint32_t *status, uint32_t *seq)
{
	*len = be32(p);
	*id = be32(p + 4);
	*status = be32(p + 8);
	*seq = be32(p + 12);
}

uint32_t
smpp_decode(const uint8_t *p, size_t n, struct smpp_pdu *pdu)
{
	struct rd r = { p, n, SMPP_HEADER_LEN, SMPP_ESME_ROK };
	uint32_t len;

	memset(pdu, 0, sizeof(*pdu));
	if (n < SMPP_HEADER_LEN)
		return SMPP_ESME_RINVCMDLEN;
	smpp_peek_header(p, &len, &pdu->command_id, &pdu->command_status,
	    &pdu->sequence_number);
	if (len != n)
		return SMPP_ESME_RINVCMDLEN;
	rd_body(&r, pdu);
	return r.status;
}

static void
wr_bytes(struct wr *w, const void *p, size_t n)
{
	if (w->overflow || w->cap - w->off < n) {
		w->overflow = true;
		return;
	}
	memcpy(w->p + w->off, p, n);
	w->off += n;
}

static void
wr_u8(struct wr *w, uint8_t v)
{
	wr_bytes(w, &v, 1);
}

static void
wr_u32(struct wr *w, uint32_t v)
{
	uint8_t b[4] = { v >> 24, v >> 16, v >> 8, v };

	wr_bytes(w, b, 4);
}

/* A C-octet string; longer than max - 1 characters fails the encoding. */
static void
wr_cstr(struct wr *w, const char *s, size_t max)
{
	size_t n;

	if (s[0] == '\0') {	/* most of a submit_sm's strings */
		wr_bytes(w, s, 1);
		return;
	}
	if ((n = strnlen(s, max)) >= max) {
		w->overflow = true;
		return;
	}
	wr_bytes(w, s, n + 1);
}

static void
wr_tlv(struct wr *w, uint16_t tag, const void *v, uint16_t len)
{
	uint8_t h[4] = { tag >> 8, tag, len >> 8, len };

	wr_bytes(w, h, 4);
	wr_bytes(w, v, len);
}

static void
wr_tlvs(struct wr *w, const struct smpp_pdu *pdu)
{
	uint8_t b[2];

	if (pdu->tlvs & SMPP_TLV_USER_MESSAGE_REFERENCE) {
		b[0] = pdu->user_message_reference >> 8;
		b[1] = (uint8_t)pdu->user_message_reference;
		wr_tlv(w, SMPP_TAG_USER_MESSAGE_REFERENCE, b, 2);
	}
	if (pdu->tlvs & SMPP_TLV_SAR) {
		b[0] = pdu->sar_msg_ref_num >> 8;
		b[1] = (uint8_t)pdu->sar_msg_ref_num;
		wr_tlv(w, SMPP_TAG_SAR_MSG_REF_NUM, b, 2);
		wr_tlv(w, SMPP_TAG_SAR_TOTAL_SEGMENTS,
		    &pdu->sar_total_segments, 1);
		wr_tlv(w, SMPP_TAG_SAR_SEGMENT_SEQNUM,
		    &pdu->sar_segment_seqnum, 1);
	}
	if (pdu->tlvs & SMPP_TLV_RECEIPTED_MESSAGE_ID)
		wr_tlv(w, SMPP_TAG_RECEIPTED_MESSAGE_ID,
		    pdu->receipted_message_id,
		    (uint16_t)(strnlen(pdu->receipted_message_id, 64) + 1));
	if (pdu->tlvs & SMPP_TLV_MESSAGE_STATE)
		wr_tlv(w, SMPP_TAG_MESSAGE_STATE, &pdu->message_state_tlv, 1);
	if (pdu->tlvs & SMPP_TLV_SC_INTERFACE_VERSION)
		wr_tlv(w, SMPP_TAG_SC_INTERFACE_VERSION,
		    &pdu->sc_interface_version, 1);
	if (pdu->tlvs & SMPP_TLV_MESSAGE_PAYLOAD)
		wr_tlv(w, SMPP_TAG_MESSAGE_PAYLOAD, pdu->message_payload,
		    pdu->message_payload_len);
}

/* source_addr_ton, source_addr_npi and source_addr (max with its NUL). */
static void
wr_src(struct wr *w, const struct smpp_pdu *pdu, size_t max)
{
	wr_u8(w, pdu->source_addr_ton);
	wr_u8(w, pdu->source_addr_npi);
	wr_cstr(w, pdu->source_addr, max);
}

/* dest_addr_ton, dest_addr_npi and destination_addr. */
static void
wr_dst(struct wr *w, const struct smpp_pdu *pdu, size_t max)
{
	wr_u8(w, pdu->dest_addr_ton);
	wr_u8(w, pdu->dest_addr_npi);
	wr_cstr(w, pdu->destination_addr, max);
}

static void
wr_short_message(struct wr *w, const struct smpp_pdu *pdu)
{
	wr_u8(w, pdu->sm_length);
	if (pdu->sm_length > 0)
		wr_bytes(w, pdu->short_message, pdu->sm_length);
}

static void
wr_sm(struct wr *w, const struct smpp_pdu *pdu)
{
	wr_cstr(w, pdu->service_type, 6);
	wr_src(w, pdu, 21);
	wr_dst(w, pdu, 21);
	wr_u8(w, pdu->esm_class);
	wr_u8(w, pdu->protocol_id);
	wr_u8(w, pdu->priority_flag);
	wr_cstr(w, pdu->schedule_delivery_time, 17);
	wr_cstr(w, pdu->validity_period, 17);
	wr_u8(w, pdu->registered_delivery);
	wr_u8(w, pdu->replace_if_present_flag);
	wr_u8(w, pdu->data_coding);
	wr_u8(w, pdu->sm_default_msg_id);
	wr_short_message(w, pdu);
	wr_tlvs(w, pdu);
}

static bool
wr_body(struct wr *w, const struct smpp_pdu *pdu)
{
	bool error_resp = (pdu->command_id & SMPP_RESP) &&
	    pdu->command_status != SMPP_ESME_ROK;

	switch (pdu->command_id) {
	case SMPP_BIND_RECEIVER:
	case SMPP_BIND_TRANSMITTER:
	case SMPP_BIND_TRANSCEIVER:
		wr_cstr(w, pdu->system_id, sizeof(pdu->system_id));
		wr_cstr(w, pdu->password, sizeof(pdu->password));
		wr_cstr(w, pdu->system_type, sizeof(pdu->system_type));
		wr_u8(w, pdu->interface_version);
		wr_u8(w, pdu->addr_ton);
		wr_u8(w, pdu->addr_npi);
		wr_cstr(w, pdu->address_range, sizeof(pdu->address_range));
		return true;
	case SMPP_BIND_RECEIVER | SMPP_RESP:
	case SMPP_BIND_TRANSMITTER | SMPP_RESP:
	case SMPP_BIND_TRANSCEIVER | SMPP_RESP:
		if (!error_resp) {
			wr_cstr(w, pdu->system_id, sizeof(pdu->system_id));
			wr_tlvs(w, pdu);
		}
		return true;
	case SMPP_SUBMIT_SM:
	case SMPP_DELIVER_SM:
		wr_sm(w, pdu);
		return true;
	case SMPP_DATA_SM:
		wr_cstr(w, pdu->service_type, 6);
		wr_src(w, pdu, 65);
		wr_dst(w, pdu, 65);
		wr_u8(w, pdu->esm_class);
		wr_u8(w, pdu->registered_delivery);
		wr_u8(w, pdu->data_coding);
		wr_tlvs(w, pdu);
		return true;
	case SMPP_SUBMIT_SM | SMPP_RESP:
	case SMPP_DELIVER_SM | SMPP_RESP:
		if (!error_resp)
			wr_cstr(w, pdu->message_id, sizeof(pdu->message_id));
		return true;
	case SMPP_DATA_SM | SMPP_RESP:
		/* data_sm_resp may carry optional parameters; decode reads them. */
		if (!error_resp) {
			wr_cstr(w, pdu->message_id, sizeof(pdu->message_id));
			wr_tlvs(w, pdu);
		}
		return true;
	case SMPP_QUERY_SM:
		wr_cstr(w, pdu->message_id, 65);
		wr_src(w, pdu, 21);
		return true;
	case SMPP_QUERY_SM | SMPP_RESP:
		if (!error_resp) {
			wr_cstr(w, pdu->message_id, 65);
			wr_cstr(w, pdu->final_date, 17);
			wr_u8(w, pdu->message_state);
			wr_u8(w, pdu->error_code);
		}
		return true;
	case SMPP_CANCEL_SM:
		wr_cstr(w, pdu->service_type, 6);
		wr_cstr(w, pdu->message_id, 65);
		wr_src(w, pdu, 21);
		wr_dst(w, pdu, 21);
		return true;
	case SMPP_REPLACE_SM:
		wr_cstr(w, pdu->message_id, 65);
		wr_src(w, pdu, 21);
		wr_cstr(w, pdu->schedule_delivery_time, 17);
		wr_cstr(w, pdu->validity_period, 17);
		wr_u8(w, pdu->registered_delivery);
		wr_u8(w, pdu->sm_default_msg_id);
		wr_short_message(w, pdu);
		return true;
	case SMPP_CANCEL_SM | SMPP_RESP:
	case SMPP_REPLACE_SM | SMPP_RESP:
	case SMPP_UNBIND:
	case SMPP_UNBIND | SMPP_RESP:
	case SMPP_ENQUIRE_LINK:
	case SMPP_ENQUIRE_LINK | SMPP_RESP:
	case SMPP_GENERIC_NACK:
		return true;
	default:
		return false;
	}
}

ssize_t
smpp_encode(const struct smpp_pdu *pdu, uint8_t *buf, size_t cap)
{
	struct wr w = { buf, cap, 0, false };

	wr_u32(&w, 0);		/* command_length, filled in below */
	wr_u32(&w, pdu->command_id);
	wr_u32(&w, pdu->command_status);
	wr_u32(&w, pdu->sequence_number);
	if (!wr_body(&w, pdu) || w.overflow)
		return -1;
	buf[0] = (uint8_t)(w.off >> 24);
	buf[1] = (uint8_t)(w.off >> 16);
	buf[2] = (uint8_t)(w.off >> 8);
	buf[3] = (uint8_t)w.off;
	return (ssize_t)w.off;
}

static void
put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * Two of these go out for each message a daemon routes, where zeroing a
 * pdu of a kilobyte for smpp_encode cost more than the answer.
 */
ssize_t
smpp_encode_resp(uint8_t *buf, uint32_t cmd, uint32_t status, uint32_t seq,
    const char *message_id)
{
	size_t n = SMPP_HEADER_LEN, len;

	switch (cmd) {
	case SMPP_SUBMIT_SM | SMPP_RESP:
	case SMPP_DELIVER_SM | SMPP_RESP:
	case SMPP_DATA_SM | SMPP_RESP:
		if (status != SMPP_ESME_ROK)
			break;
		if (message_id == NULL)
			message_id = "";
		if ((len = strnlen(message_id, 65)) >= 65)
			return -1;
		memcpy(buf + n, message_id, len + 1);
		n += len + 1;
		break;
	case SMPP_CANCEL_SM | SMPP_RESP:
	case SMPP_REPLACE_SM | SMPP_RESP:
	case SMPP_UNBIND | SMPP_RESP:
	case SMPP_ENQUIRE_LINK | SMPP_RESP:
	case SMPP_GENERIC_NACK:
		break;
	default:
		return -1;
	}
	put_u32(buf, (uint32_t)n);
	put_u32(buf + 4, cmd);
	put_u32(buf + 8, status);
	put_u32(buf + 12, seq);
	return (ssize_t)n;
}

static const struct {
	uint32_t id;
	const char *name;
} command_names[] = {
	{ SMPP_GENERIC_NACK, "generic_nack" },
	{ SMPP_BIND_RECEIVER, "bind_receiver" },
	{ SMPP_BIND_RECEIVER | SMPP_RESP, "bind_receiver_resp" },
	{ SMPP_BIND_TRANSMITTER, "bind_transmitter" },
	{ SMPP_BIND_TRANSMITTER | SMPP_RESP, "bind_transmitter_resp" },
	{ SMPP_QUERY_SM, "query_sm" },
	{ SMPP_QUERY_SM | SMPP_RESP, "query_sm_resp" },
	{ SMPP_CANCEL_SM, "cancel_sm" },
	{ SMPP_CANCEL_SM | SMPP_RESP, "cancel_sm_resp" },
	{ SMPP_REPLACE_SM, "replace_sm" },
	{ SMPP_REPLACE_SM | SMPP_RESP, "replace_sm_resp" },
	{ SMPP_SUBMIT_SM, "submit_sm" },
	{ SMPP_SUBMIT_SM | SMPP_RESP, "submit_sm_resp" },
	{ SMPP_DELIVER_SM, "deliver_sm" },
	{ SMPP_DELIVER_SM | SMPP_RESP, "deliver_sm_resp" },
	{ SMPP_UNBIND, "unbind" },
	{ SMPP_UNBIND | SMPP_RESP, "unbind_resp" },
	{ SMPP_BIND_TRANSCEIVER, "bind_transceiver" },
	{ SMPP_BIND_TRANSCEIVER | SMPP_RESP, "bind_transceiver_resp" },
	{ SMPP_ENQUIRE_LINK, "enquire_link" },
	{ SMPP_ENQUIRE_LINK | SMPP_RESP, "enquire_link_resp" },
	{ SMPP_DATA_SM, "data_sm" },
	{ SMPP_DATA_SM | SMPP_RESP, "data_sm_resp" },
};
#define NCOMMANDS	(sizeof(command_names) / sizeof(command_names[0]))
_Static_assert(NCOMMANDS + 1 == COUNTER_SMPP_CMDS,
    "counter.h: COUNTER_SMPP_CMDS is the commands named here, and other");

/*
 * By a switch, not a search: four PDUs of every message are counted. The
 * table holds generic_nack, then each request and its response.
 */
unsigned
smpp_command_index(uint32_t id)
{
	unsigned req;

	switch (id & ~SMPP_RESP) {
	case SMPP_BIND_RECEIVER: req = 1; break;
	case SMPP_BIND_TRANSMITTER: req = 3; break;
	case SMPP_QUERY_SM: req = 5; break;
	case SMPP_CANCEL_SM: req = 7; break;
	case SMPP_REPLACE_SM: req = 9; break;
	case SMPP_SUBMIT_SM: req = 11; break;
	case SMPP_DELIVER_SM: req = 13; break;
	case SMPP_UNBIND: req = 15; break;
	case SMPP_BIND_TRANSCEIVER: req = 17; break;
	case SMPP_ENQUIRE_LINK: req = 19; break;
	case SMPP_DATA_SM: req = 21; break;
	default:
		return id == SMPP_GENERIC_NACK ? 0 : NCOMMANDS;
	}
	return req + ((id & SMPP_RESP) != 0);
}

const char *
smpp_command_label(unsigned i)
{
	return i < NCOMMANDS ? command_names[i].name : "other";
}

const char *
smpp_command_name(uint32_t id)
{
	unsigned i = smpp_command_index(id);

	return i < NCOMMANDS ? command_names[i].name : "unknown";
}

static const struct {
	uint32_t status;
	const char *name;
} status_names[] = {
	{ SMPP_ESME_ROK, "ESME_ROK" },
	{ SMPP_ESME_RINVMSGLEN, "ESME_RINVMSGLEN" },
	{ SMPP_ESME_RINVCMDLEN, "ESME_RINVCMDLEN" },
	{ SMPP_ESME_RINVCMDID, "ESME_RINVCMDID" },
	{ SMPP_ESME_RINVBNDSTS, "ESME_RINVBNDSTS" },
	{ SMPP_ESME_RALYBND, "ESME_RALYBND" },
	{ SMPP_ESME_RINVREGDLVFLG, "ESME_RINVREGDLVFLG" },
	{ SMPP_ESME_RSYSERR, "ESME_RSYSERR" },
	{ SMPP_ESME_RINVSRCADR, "ESME_RINVSRCADR" },
	{ SMPP_ESME_RINVDSTADR, "ESME_RINVDSTADR" },
	{ SMPP_ESME_RINVMSGID, "ESME_RINVMSGID" },
	{ SMPP_ESME_RBINDFAIL, "ESME_RBINDFAIL" },
	{ SMPP_ESME_RINVPASWD, "ESME_RINVPASWD" },
	{ SMPP_ESME_RINVSYSID, "ESME_RINVSYSID" },
	{ SMPP_ESME_RCANCELFAIL, "ESME_RCANCELFAIL" },
	{ SMPP_ESME_RREPLACEFAIL, "ESME_RREPLACEFAIL" },
	{ SMPP_ESME_RMSGQFUL, "ESME_RMSGQFUL" },
	{ SMPP_ESME_RINVSERTYP, "ESME_RINVSERTYP" },
	{ SMPP_ESME_RSUBMITFAIL, "ESME_RSUBMITFAIL" },
	{ SMPP_ESME_RINVSYSTYP, "ESME_RINVSYSTYP" },
	{ SMPP_ESME_RTHROTTLED, "ESME_RTHROTTLED" },
	{ SMPP_ESME_RINVSCHED, "ESME_RINVSCHED" },
	{ SMPP_ESME_RINVEXPIRY, "ESME_RINVEXPIRY" },
	{ SMPP_ESME_RX_T_APPN, "ESME_RX_T_APPN" },
	{ SMPP_ESME_RQUERYFAIL, "ESME_RQUERYFAIL" },
	{ SMPP_ESME_RINVOPTPARSTREAM, "ESME_RINVOPTPARSTREAM" },
	{ SMPP_ESME_RINVPARLEN, "ESME_RINVPARLEN" },
	{ SMPP_ESME_RINVOPTPARAMVAL, "ESME_RINVOPTPARAMVAL" },
	{ SMPP_ESME_RINVDCS, "ESME_RINVDCS" },
	{ SMPP_ESME_RUNKNOWNERR, "ESME_RUNKNOWNERR" },
};
#define NSTATUSES	(sizeof(status_names) / sizeof(status_names[0]))
_Static_assert(NSTATUSES < COUNTER_SMPP_STATUSES,
    "counter.h: COUNTER_SMPP_STATUSES has room for these and other");

unsigned
smpp_status_index(uint32_t status)
{
	for (unsigned i = 0; i < NSTATUSES; i++)
		if (status_names[i].status == status)
			return i;
	return COUNTER_SMPP_STATUSES - 1;
}

const char *
smpp_status_label(unsigned i)
{
	return i < NSTATUSES ? status_names[i].name : "other";
}
