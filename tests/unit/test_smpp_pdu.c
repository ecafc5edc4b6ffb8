/* test_smpp_pdu.c: the SMPP codec: round trips, framing, and every kind of bad PDU. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "counter.h"
#include "helpers.h"
#include "smpp_pdu.h"
#include "suites.h"

static uint8_t buf[70000];

/* Encodes p, decodes the bytes, and checks the decoder agrees. */
static size_t
round_trip(const struct smpp_pdu *p, struct smpp_pdu *out)
{
	ssize_t n = smpp_encode(p, buf, sizeof(buf));

	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(smpp_decode(buf, (size_t)n, out), SMPP_ESME_ROK);
	ck_assert_uint_eq(out->command_id, p->command_id);
	ck_assert_uint_eq(out->command_status, p->command_status);
	ck_assert_uint_eq(out->sequence_number, p->sequence_number);
	return (size_t)n;
}

static void
fill_sm(struct smpp_pdu *p, uint32_t id)
{
	static const uint8_t text[] = "hello\0world";

	memset(p, 0, sizeof(*p));
	p->command_id = id;
	p->sequence_number = 77;
	strcpy(p->service_type, "CMT");
	p->source_addr_ton = 1;
	p->source_addr_npi = 1;
	strcpy(p->source_addr, "447700900001");
	p->dest_addr_ton = 5;
	strcpy(p->destination_addr, "esmeB");
	p->esm_class = 0x40;
	p->protocol_id = 3;
	p->priority_flag = 1;
	strcpy(p->validity_period, "000001000000000R");
	p->registered_delivery = 1;
	p->data_coding = 8;
	p->sm_length = sizeof(text);
	p->short_message = text;
	p->tlvs = SMPP_TLV_USER_MESSAGE_REFERENCE | SMPP_TLV_SAR;
	p->user_message_reference = 0xBEEF;
	p->sar_msg_ref_num = 0x1234;
	p->sar_total_segments = 3;
	p->sar_segment_seqnum = 2;
}

START_TEST(test_round_trip_bind)
{
	static const uint32_t ids[] = {
		SMPP_BIND_RECEIVER, SMPP_BIND_TRANSMITTER, SMPP_BIND_TRANSCEIVER
	};
	struct smpp_pdu p, q;

	for (size_t i = 0; i < 3; i++) {
		memset(&p, 0, sizeof(p));
		p.command_id = ids[i];
		p.sequence_number = 1;
		strcpy(p.system_id, "0123456789abcde");	/* 15: the maximum */
		strcpy(p.password, "secret12");		/* 8 */
		strcpy(p.system_type, "VMS");
		p.interface_version = 0x34;
		p.addr_ton = 1;
		p.addr_npi = 1;
		strcpy(p.address_range, "^44");
		round_trip(&p, &q);
		ck_assert_str_eq(q.system_id, p.system_id);
		ck_assert_str_eq(q.password, p.password);
		ck_assert_str_eq(q.system_type, "VMS");
		ck_assert_uint_eq(q.interface_version, 0x34);
		ck_assert_str_eq(q.address_range, "^44");
		/* And the response, with sc_interface_version. */
		memset(&p, 0, sizeof(p));
		p.command_id = ids[i] | SMPP_RESP;
		p.sequence_number = 2;
		strcpy(p.system_id, "echorouterd");
		p.tlvs = SMPP_TLV_SC_INTERFACE_VERSION;
		p.sc_interface_version = 0x34;
		round_trip(&p, &q);
		ck_assert_str_eq(q.system_id, "echorouterd");
		ck_assert(q.tlvs & SMPP_TLV_SC_INTERFACE_VERSION);
		ck_assert_uint_eq(q.sc_interface_version, 0x34);
	}
}
END_TEST

START_TEST(test_round_trip_submit_deliver)
{
	static const uint32_t ids[] = { SMPP_SUBMIT_SM, SMPP_DELIVER_SM };
	struct smpp_pdu p, q;

	for (size_t i = 0; i < 2; i++) {
		fill_sm(&p, ids[i]);
		round_trip(&p, &q);
		ck_assert_str_eq(q.service_type, "CMT");
		ck_assert_str_eq(q.source_addr, "447700900001");
		ck_assert_uint_eq(q.source_addr_ton, 1);
		ck_assert_str_eq(q.destination_addr, "esmeB");
		ck_assert_uint_eq(q.dest_addr_ton, 5);
		ck_assert_uint_eq(q.esm_class, 0x40);
		ck_assert_uint_eq(q.protocol_id, 3);
		ck_assert_str_eq(q.validity_period, "000001000000000R");
		ck_assert_uint_eq(q.registered_delivery, 1);
		ck_assert_uint_eq(q.data_coding, 8);
		ck_assert_uint_eq(q.sm_length, p.sm_length);
		ck_assert_mem_eq(q.short_message, p.short_message, p.sm_length);
		ck_assert_uint_eq(q.tlvs, p.tlvs);
		ck_assert_uint_eq(q.user_message_reference, 0xBEEF);
		ck_assert_uint_eq(q.sar_msg_ref_num, 0x1234);
		ck_assert_uint_eq(q.sar_total_segments, 3);
		ck_assert_uint_eq(q.sar_segment_seqnum, 2);
	}
}
END_TEST

START_TEST(test_round_trip_payload_and_receipt)
{
	static uint8_t big[60000];
	struct smpp_pdu p, q;

	memset(big, 'z', sizeof(big));
	fill_sm(&p, SMPP_DELIVER_SM);
	p.sm_length = 0;
	p.short_message = NULL;
	p.tlvs = SMPP_TLV_MESSAGE_PAYLOAD | SMPP_TLV_RECEIPTED_MESSAGE_ID |
	    SMPP_TLV_MESSAGE_STATE;
	p.message_payload = big;
	p.message_payload_len = sizeof(big);
	strcpy(p.receipted_message_id, "123456789");
	p.message_state_tlv = SMPP_STATE_DELIVERED;
	round_trip(&p, &q);
	ck_assert_uint_eq(q.message_payload_len, sizeof(big));
	ck_assert_mem_eq(q.message_payload, big, sizeof(big));
	ck_assert_str_eq(q.receipted_message_id, "123456789");
	ck_assert_uint_eq(q.message_state_tlv, SMPP_STATE_DELIVERED);
}
END_TEST

START_TEST(test_round_trip_others)
{
	static const uint32_t bare[] = {
		SMPP_UNBIND, SMPP_UNBIND | SMPP_RESP, SMPP_ENQUIRE_LINK,
		SMPP_ENQUIRE_LINK | SMPP_RESP, SMPP_GENERIC_NACK,
	};
	struct smpp_pdu p, q;

	for (size_t i = 0; i < sizeof(bare) / sizeof(bare[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.command_id = bare[i];
		p.sequence_number = (uint32_t)i + 100;
		ck_assert_uint_eq(round_trip(&p, &q), 16);
	}
	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_SUBMIT_SM | SMPP_RESP;
	strcpy(p.message_id, "42");
	round_trip(&p, &q);
	ck_assert_str_eq(q.message_id, "42");
	/* An error response carries no body. */
	p.command_status = SMPP_ESME_RINVDSTADR;
	ck_assert_uint_eq(round_trip(&p, &q), 16);
	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_DATA_SM;
	strcpy(p.source_addr, "a-source-address-longer-than-twenty-characters");
	strcpy(p.destination_addr, "dest");
	p.tlvs = SMPP_TLV_MESSAGE_PAYLOAD;
	p.message_payload = (const uint8_t *)"data";
	p.message_payload_len = 4;
	round_trip(&p, &q);
	ck_assert_str_eq(q.source_addr, p.source_addr);
	ck_assert_uint_eq(q.message_payload_len, 4);
	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_QUERY_SM;
	strcpy(p.message_id, "9");
	strcpy(p.source_addr, "src");
	round_trip(&p, &q);
	ck_assert_str_eq(q.message_id, "9");
	ck_assert_str_eq(q.source_addr, "src");
}
END_TEST

START_TEST(test_encode_refuses)
{
	struct smpp_pdu p;

	fill_sm(&p, SMPP_SUBMIT_SM);
	ck_assert_int_eq(smpp_encode(&p, buf, 20), -1);	/* no room */
	strcpy(p.source_addr, "012345678901234567890");	/* 21 > 20 */
	ck_assert_int_eq(smpp_encode(&p, buf, sizeof(buf)), -1);
	memset(&p, 0, sizeof(p));
	p.command_id = 0x12345;
	ck_assert_int_eq(smpp_encode(&p, buf, sizeof(buf)), -1);
}
END_TEST

START_TEST(test_frame_bytewise)
{
	struct smpp_pdu p;
	ssize_t n;
	uint8_t copy[512];

	fill_sm(&p, SMPP_SUBMIT_SM);
	n = smpp_encode(&p, copy, sizeof(copy));
	ck_assert_int_gt(n, 0);
	for (ssize_t k = 0; k <= n; k++) {
		struct unit_guard map;
		uint8_t *at = unit_guarded(copy, (size_t)k, &map);
		struct smpp_pdu q;

		ck_assert_int_eq(smpp_frame_len(at, (size_t)k, 65536),
		    k < n ? 0 : n);
		/* Decoding any prefix reads nothing past it either. */
		if (k >= 16 && k < n)
			ck_assert_uint_ne(smpp_decode(at, (size_t)k, &q),
			    SMPP_ESME_ROK);
		unit_guard_free(&map);
	}
}
END_TEST

START_TEST(test_frame_absurd_lengths)
{
	uint8_t h[16] = { 0 };

	h[3] = 15;			/* below the header */
	ck_assert_int_eq(smpp_frame_len(h, 16, 65536), -1);
	h[3] = 16;
	ck_assert_int_eq(smpp_frame_len(h, 16, 65536), 16);
	h[1] = 0x01;			/* 65552: above the maximum */
	ck_assert_int_eq(smpp_frame_len(h, 16, 65536), -1);
	h[0] = 0xFF;
	ck_assert_int_eq(smpp_frame_len(h, 4, 65536), -1);
	ck_assert_int_eq(smpp_frame_len(h, 3, 65536), 0);
}
END_TEST

/* Encodes a submit_sm, then lets fn damage the bytes. */
static size_t
damaged(void (*fn)(uint8_t *b, size_t *n))
{
	struct smpp_pdu p;
	size_t n;

	fill_sm(&p, SMPP_SUBMIT_SM);
	n = (size_t)smpp_encode(&p, buf, sizeof(buf));
	fn(buf, &n);
	buf[0] = (uint8_t)(n >> 24);
	buf[1] = (uint8_t)(n >> 16);
	buf[2] = (uint8_t)(n >> 8);
	buf[3] = (uint8_t)n;
	return n;
}

static void
cut_body(uint8_t *b, size_t *n)
{
	(void)b;
	*n = 30;		/* inside source_addr */
}

static void
bad_tlv_len(uint8_t *b, size_t *n)
{
	/* Append message_state with length 2 (it must be 1). */
	static const uint8_t t[] = { 0x04, 0x27, 0x00, 0x02, 0x01, 0x02 };

	memcpy(b + *n, t, sizeof(t));
	*n += sizeof(t);
}

static void
tlv_past_end(uint8_t *b, size_t *n)
{
	static const uint8_t t[] = { 0x04, 0x24, 0x01, 0x00, 'x' };

	memcpy(b + *n, t, sizeof(t));
	*n += sizeof(t);
}

static void
tlv_short_header(uint8_t *b, size_t *n)
{
	b[*n] = 0x04;
	b[*n + 1] = 0x24;
	*n += 2;
}

static void
sm_length_past_end(uint8_t *b, size_t *n)
{
	/* Drop the 22 bytes of TLVs (umr 6, sar 16); then sm_length is the
	 * byte before the 12-byte text: make it run off the end. */
	*n -= 22;
	b[*n - 13] = 200;
}

START_TEST(test_decode_damage)
{
	struct smpp_pdu q;
	size_t n;

	/* Cut inside source_addr: the body is short, not the address. */
	n = damaged(cut_body);
	ck_assert_uint_eq(smpp_decode(buf, n, &q), SMPP_ESME_RINVCMDLEN);
	n = damaged(bad_tlv_len);
	ck_assert_uint_eq(smpp_decode(buf, n, &q), SMPP_ESME_RINVPARLEN);
	n = damaged(tlv_past_end);
	ck_assert_uint_eq(smpp_decode(buf, n, &q), SMPP_ESME_RINVOPTPARSTREAM);
	n = damaged(tlv_short_header);
	ck_assert_uint_eq(smpp_decode(buf, n, &q), SMPP_ESME_RINVOPTPARSTREAM);
	n = damaged(sm_length_past_end);
	ck_assert_uint_eq(smpp_decode(buf, n, &q), SMPP_ESME_RINVMSGLEN);
	/* The length field must match the bytes given. */
	n = damaged(cut_body);
	buf[3]++;
	ck_assert_uint_eq(smpp_decode(buf, n, &q), SMPP_ESME_RINVCMDLEN);
}
END_TEST

START_TEST(test_decode_unterminated_strings)
{
	uint8_t b[64];
	struct smpp_pdu q;
	size_t n = 16;

	/* bind_transceiver whose system_id runs 16 bytes without a NUL. */
	memset(b, 0, sizeof(b));
	b[7] = 0x09;
	memset(b + 16, 'A', 16);
	n = 16 + 16 + 9 + 13 + 3 + 1;
	b[3] = (uint8_t)n;
	ck_assert_uint_eq(smpp_decode(b, n, &q), SMPP_ESME_RINVSYSID);
	/* system_id fine, password of 9 characters. */
	memset(b + 16, 0, sizeof(b) - 16);
	strcpy((char *)b + 16, "sys");
	memset(b + 20, 'p', 9);
	n = 16 + 4 + 9 + 1 + 3 + 1 + 10;
	b[3] = (uint8_t)n;
	ck_assert_uint_eq(smpp_decode(b, n, &q), SMPP_ESME_RINVPASWD);
	/* Nothing but an unterminated string to the end: cut short. */
	memset(b + 16, 'x', 8);
	n = 24;
	b[3] = (uint8_t)n;
	ck_assert_uint_eq(smpp_decode(b, n, &q), SMPP_ESME_RINVCMDLEN);
}
END_TEST

START_TEST(test_decode_unknown_and_skipped)
{
	uint8_t b[64];
	struct smpp_pdu p, q;
	ssize_t n;

	memset(b, 0, 16);
	b[3] = 16;
	b[6] = 0x09;
	b[7] = 0x99;
	ck_assert_uint_eq(smpp_decode(b, 16, &q), SMPP_ESME_RINVCMDID);
	ck_assert_uint_eq(q.command_id, 0x999);
	/* An unknown optional parameter is skipped, not an error. */
	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_SUBMIT_SM;
	strcpy(p.destination_addr, "x");
	n = smpp_encode(&p, buf, sizeof(buf));
	memcpy(buf + n, "\x14\x00\x00\x03xyz", 7);
	n += 7;
	buf[3] = (uint8_t)n;
	ck_assert_uint_eq(smpp_decode(buf, (size_t)n, &q), SMPP_ESME_ROK);
	ck_assert_str_eq(q.destination_addr, "x");
	/* Trailing bytes after a PDU without optional parameters. */
	memset(b, 0, 20);
	b[3] = 20;
	b[7] = 0x15;
	ck_assert_uint_eq(smpp_decode(b, 20, &q), SMPP_ESME_RINVCMDLEN);
}
END_TEST

/* Random bytes never crash the decoder and never read past the end. */
START_TEST(test_decode_garbage)
{
	uint64_t s = 0x9E3779B97F4A7C15u;
	static const uint32_t ids[] = {
		SMPP_BIND_TRANSCEIVER, SMPP_SUBMIT_SM, SMPP_DELIVER_SM,
		SMPP_DATA_SM, SMPP_QUERY_SM, SMPP_SUBMIT_SM | SMPP_RESP,
		SMPP_BIND_RECEIVER | SMPP_RESP, 0x12345678,
	};

	for (int iter = 0; iter < 20000; iter++) {
		uint8_t g[300];
		size_t n = 16 + (size_t)(iter % 280);
		struct smpp_pdu q;
		struct unit_guard map;
		uint8_t *at;

		for (size_t i = 0; i < n; i++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			g[i] = (uint8_t)s;
		}
		g[0] = (uint8_t)(n >> 24);
		g[1] = (uint8_t)(n >> 16);
		g[2] = (uint8_t)(n >> 8);
		g[3] = (uint8_t)n;
		memcpy(g + 4, &(uint32_t){ __builtin_bswap32(ids[iter % 8]) },
		    4);
		at = unit_guarded(g, n, &map);
		(void)smpp_decode(at, n, &q);
		unit_guard_free(&map);
	}
}
END_TEST

START_TEST(test_command_names)
{
	ck_assert_str_eq(smpp_command_name(SMPP_SUBMIT_SM), "submit_sm");
	ck_assert_str_eq(smpp_command_name(SMPP_DELIVER_SM | SMPP_RESP),
	    "deliver_sm_resp");
	ck_assert_str_eq(smpp_command_name(SMPP_GENERIC_NACK), "generic_nack");
	ck_assert_str_eq(smpp_command_name(0x4242), "unknown");
}
END_TEST

/* Each command's counter: its own, in the order the metrics list them. */
START_TEST(test_command_index)
{
	static const struct {
		uint32_t id;
		const char *name;
	} want[] = {
		{ 0x80000000, "generic_nack" },
		{ 0x00000001, "bind_receiver" },
		{ 0x80000001, "bind_receiver_resp" },
		{ 0x00000002, "bind_transmitter" },
		{ 0x80000002, "bind_transmitter_resp" },
		{ 0x00000003, "query_sm" },
		{ 0x80000003, "query_sm_resp" },
		{ 0x00000008, "cancel_sm" },
		{ 0x80000008, "cancel_sm_resp" },
		{ 0x00000007, "replace_sm" },
		{ 0x80000007, "replace_sm_resp" },
		{ 0x00000004, "submit_sm" },
		{ 0x80000004, "submit_sm_resp" },
		{ 0x00000005, "deliver_sm" },
		{ 0x80000005, "deliver_sm_resp" },
		{ 0x00000006, "unbind" },
		{ 0x80000006, "unbind_resp" },
		{ 0x00000009, "bind_transceiver" },
		{ 0x80000009, "bind_transceiver_resp" },
		{ 0x00000015, "enquire_link" },
		{ 0x80000015, "enquire_link_resp" },
		{ 0x00000103, "data_sm" },
		{ 0x80000103, "data_sm_resp" },
	};
	static const uint32_t other[] = { 0, 0x0000000A, 0x80000010,
	    0x00000021, 0x00000102, 0x80000104, 0x7FFFFFFF, 0xFFFFFFFF };

	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ck_assert_uint_eq(smpp_command_index(want[i].id), i);
		ck_assert_str_eq(smpp_command_label(i), want[i].name);
	}
	for (unsigned i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		ck_assert_uint_eq(smpp_command_index(other[i]),
		    COUNTER_SMPP_CMDS - 1);
		ck_assert_str_eq(smpp_command_name(other[i]), "unknown");
	}
}
END_TEST

/*
 * smpp_encode_resp writes what smpp_encode writes for a pdu holding only
 * the command, status, sequence number and message_id, for each answer
 * it takes (any status, ids of every length up to 64 and none), and
 * refuses every other command and an id of 65 characters.
 */
START_TEST(test_encode_resp_as_encode)
{
	static const uint32_t takes[] = { 0x80000004, 0x80000005, 0x80000103,
	    0x80000008, 0x80000007, 0x80000006, 0x80000015, 0x80000000 };
	static const uint32_t refuses[] = { 0x00000004, 0x00000005,
	    0x00000103, 0x80000001, 0x80000002, 0x80000009, 0x80000003,
	    0x00000015, 0x00000006, 0x80000021, 0, 0xFFFFFFFF };
	static const uint32_t statuses[] = { 0, 0x00000008, 0x00000058,
	    0x00000045, 0xFFFFFFFF };
	uint8_t mine[SMPP_RESP_MAX], theirs[256];
	char id[70];

	for (size_t c = 0; c < sizeof(takes) / sizeof(takes[0]); c++)
		for (size_t st = 0; st < sizeof(statuses) / sizeof(statuses[0]);
		    st++)
			for (int len = -1; len <= 65; len++) {
				struct smpp_pdu p;
				uint32_t seq = (uint32_t)(c * 7919 + st * 31 +
				    (size_t)(len + 1)) | 0x80000001u;
				ssize_t n, m;

				memset(id, 0, sizeof(id));
				for (int i = 0; i < len; i++)
					id[i] = (char)('0' + (i * 7 + len) % 43);
				n = smpp_encode_resp(mine, takes[c],
				    statuses[st], seq, len < 0 ? NULL : id);
				if (len == 65 && statuses[st] == 0 &&
				    (takes[c] == 0x80000004 ||
				    takes[c] == 0x80000005 ||
				    takes[c] == 0x80000103)) {
					ck_assert_int_eq(n, -1);
					continue;
				}
				memset(&p, 0, sizeof(p));
				p.command_id = takes[c];
				p.command_status = statuses[st];
				p.sequence_number = seq;
				if (len >= 0 && len < 65)
					memcpy(p.message_id, id, (size_t)len + 1);
				m = smpp_encode(&p, theirs, sizeof(theirs));
				ck_assert_int_gt(m, 0);
				ck_assert_int_eq(n, m);
				ck_assert_int_le(n, SMPP_RESP_MAX);
				ck_assert(memcmp(mine, theirs, (size_t)n) == 0);
			}
	for (size_t c = 0; c < sizeof(refuses) / sizeof(refuses[0]); c++)
		ck_assert_int_eq(smpp_encode_resp(mine, refuses[c], 0, 1, "7"),
		    -1);
}
END_TEST

/* The store's requests: cancel_sm, replace_sm, query_sm and answers. */
START_TEST(test_round_trip_store_requests)
{
	static const uint8_t text[] = "new text";
	struct smpp_pdu p, out;
	size_t n;

	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_CANCEL_SM;
	p.sequence_number = 9;
	strcpy(p.message_id, "12345");
	p.source_addr_ton = 1;
	strcpy(p.source_addr, "447700900001");
	p.dest_addr_ton = 5;
	strcpy(p.destination_addr, "bob");
	n = round_trip(&p, &out);
	ck_assert_str_eq(out.message_id, "12345");
	ck_assert_str_eq(out.source_addr, "447700900001");
	ck_assert_uint_eq(out.dest_addr_ton, 5);
	ck_assert_str_eq(out.destination_addr, "bob");
	/* Cut short anywhere: refused, never read past the end. */
	for (size_t cut = SMPP_HEADER_LEN; cut < n; cut++) {
		buf[0] = buf[1] = 0;
		buf[2] = (uint8_t)(cut >> 8);
		buf[3] = (uint8_t)cut;
		ck_assert_uint_ne(smpp_decode(buf, cut, &out), SMPP_ESME_ROK);
	}

	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_REPLACE_SM;
	p.sequence_number = 10;
	strcpy(p.message_id, "777");
	strcpy(p.schedule_delivery_time, "000000000010000R");
	strcpy(p.validity_period, "261124123000504+");
	p.registered_delivery = 1;
	p.sm_length = sizeof(text) - 1;
	p.short_message = text;
	round_trip(&p, &out);
	ck_assert_str_eq(out.message_id, "777");
	ck_assert_str_eq(out.schedule_delivery_time, "000000000010000R");
	ck_assert_str_eq(out.validity_period, "261124123000504+");
	ck_assert_uint_eq(out.registered_delivery, 1);
	ck_assert_uint_eq(out.sm_length, sizeof(text) - 1);
	ck_assert(memcmp(out.short_message, text, out.sm_length) == 0);

	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_QUERY_SM | SMPP_RESP;
	p.sequence_number = 11;
	strcpy(p.message_id, "777");
	strcpy(p.final_date, "261124010203000+");
	p.message_state = 2;
	round_trip(&p, &out);
	ck_assert_str_eq(out.message_id, "777");
	ck_assert_str_eq(out.final_date, "261124010203000+");
	ck_assert_uint_eq(out.message_state, 2);

	/* The answers to cancel and replace are a header only. */
	memset(&p, 0, sizeof(p));
	p.command_id = SMPP_CANCEL_SM | SMPP_RESP;
	ck_assert_uint_eq(round_trip(&p, &out), SMPP_HEADER_LEN);
	p.command_id = SMPP_REPLACE_SM | SMPP_RESP;
	p.command_status = SMPP_ESME_RREPLACEFAIL;
	ck_assert_uint_eq(round_trip(&p, &out), SMPP_HEADER_LEN);
	ck_assert_str_eq(smpp_command_name(SMPP_CANCEL_SM), "cancel_sm");
	ck_assert_str_eq(smpp_command_name(SMPP_REPLACE_SM | SMPP_RESP),
	    "replace_sm_resp");
}
END_TEST

Suite *
smpp_pdu_suite(void)
{
	Suite *s = suite_create("smpp_pdu");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_round_trip_bind);
	tcase_add_test(tc, test_round_trip_submit_deliver);
	tcase_add_test(tc, test_round_trip_payload_and_receipt);
	tcase_add_test(tc, test_round_trip_others);
	tcase_add_test(tc, test_round_trip_store_requests);
	tcase_add_test(tc, test_encode_refuses);
	tcase_add_test(tc, test_frame_bytewise);
	tcase_add_test(tc, test_frame_absurd_lengths);
	tcase_add_test(tc, test_decode_damage);
	tcase_add_test(tc, test_decode_unterminated_strings);
	tcase_add_test(tc, test_decode_unknown_and_skipped);
	tcase_add_test(tc, test_decode_garbage);
	tcase_add_test(tc, test_command_names);
	tcase_add_test(tc, test_command_index);
	tcase_add_test(tc, test_encode_resp_as_encode);
	suite_add_tcase(s, tc);
	return s;
}
