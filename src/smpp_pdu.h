/* smpp_pdu.h: a pure SMPP 3.4 PDU codec: bounds-checked, no global state, no I/O. */
#ifndef ECHOROUTERD_SMPP_PDU_H
#define ECHOROUTERD_SMPP_PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SMPP_HEADER_LEN		16
#define SMPP_RESP		0x80000000u

enum smpp_command {
	SMPP_GENERIC_NACK = 0x80000000u,
	SMPP_BIND_RECEIVER = 0x00000001u,
	SMPP_BIND_TRANSMITTER = 0x00000002u,
	SMPP_QUERY_SM = 0x00000003u,
	SMPP_SUBMIT_SM = 0x00000004u,
	SMPP_DELIVER_SM = 0x00000005u,
	SMPP_UNBIND = 0x00000006u,
	SMPP_REPLACE_SM = 0x00000007u,
	SMPP_CANCEL_SM = 0x00000008u,
	SMPP_BIND_TRANSCEIVER = 0x00000009u,
	SMPP_OUTBIND = 0x0000000Bu,
	SMPP_ENQUIRE_LINK = 0x00000015u,
	SMPP_SUBMIT_MULTI = 0x00000021u,
	SMPP_ALERT_NOTIFICATION = 0x00000102u,
	SMPP_DATA_SM = 0x00000103u,
};

/* command_status values (SMPP 3.4 section 5.1.3). */
enum smpp_status {
	SMPP_ESME_ROK = 0x00,
	SMPP_ESME_RINVMSGLEN = 0x01,
	SMPP_ESME_RINVCMDLEN = 0x02,
	SMPP_ESME_RINVCMDID = 0x03,
	SMPP_ESME_RINVBNDSTS = 0x04,
	SMPP_ESME_RALYBND = 0x05,
	SMPP_ESME_RINVREGDLVFLG = 0x07,
	SMPP_ESME_RSYSERR = 0x08,
	SMPP_ESME_RINVSRCADR = 0x0A,
	SMPP_ESME_RINVDSTADR = 0x0B,
	SMPP_ESME_RINVMSGID = 0x0C,
	SMPP_ESME_RBINDFAIL = 0x0D,
	SMPP_ESME_RINVPASWD = 0x0E,
	SMPP_ESME_RINVSYSID = 0x0F,
	SMPP_ESME_RCANCELFAIL = 0x11,
	SMPP_ESME_RREPLACEFAIL = 0x13,
	SMPP_ESME_RMSGQFUL = 0x14,
	SMPP_ESME_RSUBMITFAIL = 0x45,
	SMPP_ESME_RINVSERTYP = 0x15,
	SMPP_ESME_RINVSYSTYP = 0x53,
	SMPP_ESME_RTHROTTLED = 0x58,
	SMPP_ESME_RX_T_APPN = 0x64,
	SMPP_ESME_RINVSCHED = 0x61,
	SMPP_ESME_RINVEXPIRY = 0x62,
	SMPP_ESME_RQUERYFAIL = 0x67,
	SMPP_ESME_RINVOPTPARSTREAM = 0xC0,
	SMPP_ESME_RINVDCS = 0x104,
	SMPP_ESME_RINVPARLEN = 0xC2,
	SMPP_ESME_RINVOPTPARAMVAL = 0xC4,
	SMPP_ESME_RUNKNOWNERR = 0xFF,
};

/* Optional parameter tags we read or write. */
enum smpp_tag {
	SMPP_TAG_RECEIPTED_MESSAGE_ID = 0x001E,
	SMPP_TAG_USER_MESSAGE_REFERENCE = 0x0204,
	SMPP_TAG_SAR_MSG_REF_NUM = 0x020C,
	SMPP_TAG_SAR_TOTAL_SEGMENTS = 0x020E,
	SMPP_TAG_SAR_SEGMENT_SEQNUM = 0x020F,
	SMPP_TAG_SC_INTERFACE_VERSION = 0x0210,
	SMPP_TAG_MESSAGE_PAYLOAD = 0x0424,
	SMPP_TAG_MESSAGE_STATE = 0x0427,
};

/* Which optional parameters a PDU carries. */
enum {
	SMPP_TLV_MESSAGE_PAYLOAD = 1 << 0,
	SMPP_TLV_RECEIPTED_MESSAGE_ID = 1 << 1,
	SMPP_TLV_MESSAGE_STATE = 1 << 2,
	SMPP_TLV_USER_MESSAGE_REFERENCE = 1 << 3,
	SMPP_TLV_SAR = 1 << 4,		/* all three sar_* */
	SMPP_TLV_SC_INTERFACE_VERSION = 1 << 5,
};

/* esm_class bits (section 5.2.12). */
#define SMPP_ESM_DELIVERY_RECEIPT	0x04
/* message_state values (section 5.2.28). */
#define SMPP_STATE_DELIVERED		2
#define SMPP_STATE_UNDELIVERABLE	5

/*
 * One PDU, decoded or to encode. Strings are NUL-terminated copies sized
 * for their SMPP maximum (data_sm's addresses are longer than
 * submit_sm's). short_message and message_payload point into the decoded
 * bytes (or the caller's bytes when encoding): borrowed, not owned.
 */
struct smpp_pdu {
	uint32_t command_id;
	uint32_t command_status;
	uint32_t sequence_number;
	/* bind_* */
	char	system_id[16];
	char	password[9];
	char	system_type[13];
	uint8_t	interface_version;
	uint8_t	addr_ton;
	uint8_t	addr_npi;
	char	address_range[41];
	/* submit_sm, deliver_sm, data_sm, query_sm */
	char	service_type[6];
	uint8_t	source_addr_ton;
	uint8_t	source_addr_npi;
	char	source_addr[65];
	uint8_t	dest_addr_ton;
	uint8_t	dest_addr_npi;
	char	destination_addr[65];
	uint8_t	esm_class;
	uint8_t	protocol_id;
	uint8_t	priority_flag;
	char	schedule_delivery_time[17];
	char	validity_period[17];
	uint8_t	registered_delivery;
	uint8_t	replace_if_present_flag;
	uint8_t	data_coding;
	uint8_t	sm_default_msg_id;
	uint8_t	sm_length;
	const uint8_t *short_message;
	/* *_resp, query_sm */
	char	message_id[65];
	char	final_date[17];
	uint8_t	message_state;
	uint8_t	error_code;
	/* optional parameters, present per tlvs */
	uint32_t tlvs;
	const uint8_t *message_payload;
	uint16_t message_payload_len;
	char	receipted_message_id[65];
	uint8_t	message_state_tlv;
	uint8_t	sc_interface_version;
	uint16_t user_message_reference;
	uint16_t sar_msg_ref_num;
	uint8_t	sar_total_segments;
	uint8_t	sar_segment_seqnum;
};

/*
 * The framing rule for a byte stream: >0 the length of the whole PDU at
 * p, 0 more bytes needed, -1 the length field is absurd (below 16 or
 * above max_len).
 */
ssize_t	smpp_frame_len(const uint8_t *p, size_t n, size_t max_len);

/* The header fields of at least 16 bytes at p. */
void	smpp_peek_header(const uint8_t *p, uint32_t *len, uint32_t *id,
	    uint32_t *status, uint32_t *seq);

/*
 * Decodes the whole PDU p[0..n) (n = its command_length) into pdu.
 * Returns SMPP_ESME_ROK, or the command_status that a response should
 * carry: RINVCMDLEN (length field disagrees, or the body is cut short),
 * RINVCMDID (unknown command), a field's own status for a string without
 * its NUL within the field's maximum (RINVSYSID, RINVPASWD, RINVSRCADR,
 * RINVDSTADR, ...), RINVMSGLEN (sm_length past the end or over 254),
 * RINVOPTPARSTREAM (a TLV runs past the end), RINVPARLEN (a known TLV
 * with the wrong length). Unknown TLVs are skipped. The header fields are
 * filled whenever n >= 16, even on error.
 */
uint32_t smpp_decode(const uint8_t *p, size_t n, struct smpp_pdu *pdu);

/*
 * Encodes pdu into buf[0..cap). Returns the PDU's length, or -1 if it does
 * not fit or the command is not one we encode. Responses with a non-zero
 * command_status carry no body (except generic_nack, which has none).
 */
ssize_t	smpp_encode(const struct smpp_pdu *pdu, uint8_t *buf, size_t cap);

/*
 * The answer every message gets, without a pdu to fill: a submit_sm_resp,
 * deliver_sm_resp or data_sm_resp with message_id (NULL: empty) as its
 * body, none when status is not ESME_ROK; an unbind_resp,
 * enquire_link_resp, cancel_sm_resp, replace_sm_resp or generic_nack with
 * none. The octets smpp_encode writes for a pdu holding only these
 * fields, into buf (SMPP_RESP_MAX octets). Returns the length, or -1 for
 * another command or a message_id of 65 characters or more.
 */
#define SMPP_RESP_MAX	(SMPP_HEADER_LEN + 65)
ssize_t	smpp_encode_resp(uint8_t *buf, uint32_t cmd, uint32_t status,
	    uint32_t seq, const char *message_id);

/* "submit_sm", "bind_transceiver_resp", ...; "unknown" otherwise. */
const char *smpp_command_name(uint32_t id);

/*
 * For the metrics' tables (counter.h): a command_id's index below
 * COUNTER_SMPP_CMDS and a command_status's below COUNTER_SMPP_STATUSES,
 * the last of each standing for any other; and the label of an index
 * ("submit_sm_resp", "other"; "ESME_ROK", "other").
 */
unsigned smpp_command_index(uint32_t id);
const char *smpp_command_label(unsigned i);
unsigned smpp_status_index(uint32_t status);
const char *smpp_status_label(unsigned i);

#endif
