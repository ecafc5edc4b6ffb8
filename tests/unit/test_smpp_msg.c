/* test_smpp_msg.c: a message made from the SMPP PDU that brings it in (submit_sm, deliver_sm). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "msg.h"
#include "smpp_msg.h"
#include "smpp_pdu.h"
#include "suites.h"

/* A deliver_sm with short_message "hi" from +4470 to 12345. */
static void
pdu_init(struct smpp_pdu *p)
{
	static const uint8_t text[] = "hi";

	memset(p, 0, sizeof(*p));
	p->command_id = SMPP_DELIVER_SM;
	p->sequence_number = 77;
	p->source_addr_ton = 1;
	p->source_addr_npi = 1;
	snprintf(p->source_addr, sizeof(p->source_addr), "4470");
	p->dest_addr_ton = 3;
	p->dest_addr_npi = 9;
	snprintf(p->destination_addr, sizeof(p->destination_addr), "12345");
	p->esm_class = 0x40 | 0x80 | 0x04;
	p->data_coding = 8;
	p->short_message = text;
	p->sm_length = 2;
}

START_TEST(test_fields)
{
	struct smpp_pdu p;
	uint64_t before = (uint64_t)time(NULL);
	struct msg *m;

	pdu_init(&p);
	m = smpp_msg_new(&p, "+4470", "12345");
	ck_assert_uint_eq(m->len, 2);
	ck_assert_mem_eq(m->text, "hi", 3);
	ck_assert_uint_eq(m->sender_ref, 77);
	ck_assert_uint_eq(m->sender_cmd, SMPP_DELIVER_SM);
	ck_assert_uint_ge(m->submitted, before);
	ck_assert_uint_le(m->submitted, (uint64_t)time(NULL));
	ck_assert_uint_eq(m->src_ton, 1);
	ck_assert_uint_eq(m->src_npi, 1);
	ck_assert_uint_eq(m->dst_ton, 3);
	ck_assert_uint_eq(m->dst_npi, 9);
	/* The UDH indicator and reply path only, not the message type. */
	ck_assert_uint_eq(m->esm_class, 0xC0);
	ck_assert_uint_eq(m->data_coding, 8);
	ck_assert_str_eq(m->src_addr, "4470");
	ck_assert_str_eq(m->dst_addr, "12345");
	ck_assert_str_eq(m->from, "+4470");
	ck_assert_str_eq(m->to, "12345");
	/* No sar_* TLVs: no SAR flag, and nothing else is the helper's. */
	ck_assert_uint_eq(m->flags, 0);
	ck_assert_uint_eq(m->id, 0);
	free(m);
}
END_TEST

START_TEST(test_sar)
{
	struct smpp_pdu p;
	struct msg *m;

	pdu_init(&p);
	p.tlvs = SMPP_TLV_SAR;
	p.sar_msg_ref_num = 0xBEEF;
	p.sar_total_segments = 3;
	p.sar_segment_seqnum = 2;
	m = smpp_msg_new(&p, "a", "b");
	ck_assert_uint_eq(m->flags, MSG_F_SAR);
	ck_assert_uint_eq(m->sar_ref, 0xBEEF);
	ck_assert_uint_eq(m->sar_total, 3);
	ck_assert_uint_eq(m->sar_seq, 2);
	free(m);
}
END_TEST

START_TEST(test_payload_wins)
{
	static const uint8_t payload[300] = { 'P' };
	struct smpp_pdu p;
	const uint8_t *t;
	size_t len;
	struct msg *m;

	pdu_init(&p);
	t = smpp_msg_text(&p, &len);
	ck_assert_ptr_eq(t, p.short_message);
	ck_assert_uint_eq(len, 2);
	/* message_payload, when there is one, is the text. */
	p.tlvs = SMPP_TLV_MESSAGE_PAYLOAD;
	p.message_payload = payload;
	p.message_payload_len = sizeof(payload);
	t = smpp_msg_text(&p, &len);
	ck_assert_ptr_eq(t, payload);
	ck_assert_uint_eq(len, sizeof(payload));
	m = smpp_msg_new(&p, "a", "b");
	ck_assert_uint_eq(m->len, sizeof(payload));
	ck_assert_mem_eq(m->text, payload, sizeof(payload));
	ck_assert_uint_eq(m->text[m->len], 0);
	free(m);
}
END_TEST

START_TEST(test_long_addresses_cut)
{
	struct smpp_pdu p;
	char to[100];
	struct msg *m;

	pdu_init(&p);
	/* data_sm's addresses may be 64 characters; a message keeps 20. */
	memset(p.source_addr, '7', 64);
	p.source_addr[64] = '\0';
	memset(to, 'x', sizeof(to) - 1);
	to[sizeof(to) - 1] = '\0';
	m = smpp_msg_new(&p, "a", to);
	ck_assert_uint_eq(strlen(m->src_addr), 20);
	ck_assert_uint_eq(strlen(m->to), 64);
	free(m);
}
END_TEST

START_TEST(test_addresses)
{
	char out[22];

	/* International (TON 1): the '+' the route table writes. */
	ck_assert(smpp_msg_addr("4470", 1, out, sizeof(out)));
	ck_assert_str_eq(out, "+4470");
	ck_assert(smpp_msg_addr("+4470", 1, out, sizeof(out)));
	ck_assert_str_eq(out, "+4470");
	/* Any other TON as it is. */
	ck_assert(smpp_msg_addr("12345", 3, out, sizeof(out)));
	ck_assert_str_eq(out, "12345");
	ck_assert(smpp_msg_addr("alice", 5, out, sizeof(out)));
	ck_assert_str_eq(out, "alice");
	/* Not an address the route table takes. */
	ck_assert(!smpp_msg_addr("", 0, out, sizeof(out)));
	ck_assert(!smpp_msg_addr("a b", 0, out, sizeof(out)));
}
END_TEST

START_TEST(test_coding_flags)
{
	ck_assert_uint_eq(smpp_msg_coding_flags(CONFIG_ALPHABET_LATIN1),
	    MSG_F_CODED | MSG_F_DC0_LATIN1);
	ck_assert_uint_eq(smpp_msg_coding_flags(CONFIG_ALPHABET_ASCII),
	    MSG_F_CODED | MSG_F_DC0_IA5);
	ck_assert_uint_eq(smpp_msg_coding_flags(CONFIG_ALPHABET_GSM),
	    MSG_F_CODED);
}
END_TEST

Suite *
smpp_msg_suite(void)
{
	Suite *s = suite_create("smpp_msg");
	TCase *tc = tcase_create("new");

	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_sar);
	tcase_add_test(tc, test_payload_wins);
	tcase_add_test(tc, test_long_addresses_cut);
	tcase_add_test(tc, test_addresses);
	tcase_add_test(tc, test_coding_flags);
	suite_add_tcase(s, tc);
	return s;
}
