/* test_smpp_long.c: a line text made into deliver_sm parts (UDH, SAR, payload, max_parts) and the one status their answers make. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "helpers.h"
#include "msg.h"
#include "smpp_long.h"
#include "smpp_pdu.h"
#include "suites.h"

/* A line client's message: UTF-8 text, not coded. */
static struct msg *
line_msg(const char *text)
{
	size_t n = strlen(text);
	struct msg *m = msg_new(n);

	memcpy(m->text, text, n);
	m->len = n;
	m->id = 77;
	m->flags = MSG_F_PREFIX_FIRST;
	return m;
}

/* n copies of the UTF-8 character ch. */
static char *
repeat(const char *ch, unsigned n)
{
	size_t k = strlen(ch);
	char *s = malloc(k * n + 1);

	for (unsigned i = 0; i < n; i++)
		memcpy(s + i * k, ch, k);
	s[k * n] = '\0';
	return s;
}

static const struct smpp_long_opts udh16 = {
	.coding = TEXT_CODING_AUTO, .how = TEXT_LONG_UDH, .max_parts = 16,
	.ref = 0x1234,
};

START_TEST(test_short_is_one_message)
{
	struct msg *m = line_msg("@A\xE2\x82\xAC"), *d;
	struct smpp_long *lp;
	unsigned needed;

	ck_assert_int_eq(smpp_long_make(m, &udh16, &d, &lp, &needed), 1);
	ck_assert_ptr_null(lp);
	ck_assert_uint_eq(d->data_coding, 0);
	ck_assert_uint_eq(d->esm_class & 0x40, 0);
	ck_assert(d->flags & MSG_F_CODED);
	ck_assert_uint_eq(d->len, 4);
	ck_assert_mem_eq(d->text, "\x00\x41\x1B\x65", 4);
	ck_assert_uint_eq(d->id, 77);
	free(d);
	free(m);
}
END_TEST

/*
 * The coded copy takes what the parts need, not the splitter's room for
 * 255 UDHs: a 64-octet text's copy stays under glibc's thread-cache limit
 * (1,032 octets), which a copy of 2 KiB missed on every message.
 */
START_TEST(test_coded_copy_is_its_size)
{
	char *t = repeat("a", 64);
	struct msg *m = line_msg(t), *d;
	struct smpp_long *lp;
	struct smpp_long_opts o = udh16;
	unsigned needed;

	o.max_parts = 255;
	ck_assert_int_eq(smpp_long_make(m, &o, &d, &lp, &needed), 1);
	ck_assert_ptr_null(lp);
	ck_assert_uint_eq(d->len, 64);
	ck_assert_uint_le(malloc_usable_size(d), msg_size(d) + 32);
	ck_assert_uint_lt(malloc_usable_size(d), 1032);
	free(d);
	free(m);
	free(t);
}
END_TEST

/* A text whose room is over the splitter's stack buffer: the same parts. */
START_TEST(test_long_text_past_the_stack_buffer)
{
	char *t = repeat("b", 1200);
	struct msg *m = line_msg(t), *d;
	struct smpp_long *lp;
	unsigned needed;
	size_t sum = 0;

	ck_assert_int_eq(smpp_long_make(m, &udh16, &d, &lp, &needed), 8);
	ck_assert_ptr_nonnull(lp);
	for (unsigned i = 0; i < lp->nparts; i++)
		sum += lp->part[i].len;
	/* 7 parts of 153 septets and one of 129, each behind a 6-octet UDH. */
	ck_assert_uint_eq(d->len, sum);
	ck_assert_uint_eq(lp->part[7].off + lp->part[7].len, d->len);
	ck_assert_uint_le(malloc_usable_size(d), msg_size(d) + 32);
	smpp_long_free(lp);
	free(d);
	free(m);
	free(t);
}
END_TEST

/* Checks part i of a UDH set: its header and that its body is body. */
static void
check_udh_part(const struct smpp_long *lp, unsigned i, unsigned total,
    const uint8_t *body, size_t blen)
{
	struct smpp_pdu pdu;

	memset(&pdu, 0, sizeof(pdu));
	smpp_long_part(lp, i, &pdu);
	ck_assert_uint_eq(pdu.esm_class & 0x40, 0x40);
	ck_assert_uint_eq(pdu.tlvs & (SMPP_TLV_SAR | SMPP_TLV_MESSAGE_PAYLOAD),
	    0);
	ck_assert_uint_eq(pdu.sm_length, 6 + blen);
	ck_assert_uint_eq(pdu.short_message[0], 5);
	ck_assert_uint_eq(pdu.short_message[1], 0);
	ck_assert_uint_eq(pdu.short_message[2], 3);
	ck_assert_uint_eq(pdu.short_message[3], 0x34);
	ck_assert_uint_eq(pdu.short_message[4], total);
	ck_assert_uint_eq(pdu.short_message[5], i + 1);
	ck_assert_mem_eq(pdu.short_message + 6, body, blen);
}

START_TEST(test_gsm_400_is_three_udh_parts)
{
	char *t = repeat("a", 400);
	struct msg *m = line_msg(t), *d;
	struct smpp_long *lp;
	unsigned needed;
	uint8_t body[153];

	memset(body, 'a', sizeof(body));
	ck_assert_int_eq(smpp_long_make(m, &udh16, &d, &lp, &needed), 3);
	ck_assert_ptr_nonnull(lp);
	ck_assert_ptr_eq(lp->m, d);
	ck_assert(!lp->sar && !lp->payload);
	ck_assert_uint_eq(d->data_coding, 0);
	check_udh_part(lp, 0, 3, body, 153);
	check_udh_part(lp, 1, 3, body, 153);
	check_udh_part(lp, 2, 3, body, 400 - 306);
	smpp_long_free(lp);
	free(d);
	free(m);
	free(t);
}
END_TEST

START_TEST(test_ucs2_200_is_three_parts)
{
	char *t = repeat("\xD0\x96", 200);	/* Cyrillic Zhe, U+0416 */
	struct msg *m = line_msg(t), *d;
	struct smpp_long *lp;
	unsigned needed;
	uint8_t body[134];

	for (unsigned i = 0; i < sizeof(body); i += 2) {
		body[i] = 0x04;
		body[i + 1] = 0x16;
	}
	ck_assert_int_eq(smpp_long_make(m, &udh16, &d, &lp, &needed), 3);
	ck_assert_uint_eq(d->data_coding, 8);
	check_udh_part(lp, 0, 3, body, 134);
	check_udh_part(lp, 2, 3, body, (200 - 134) * 2);
	smpp_long_free(lp);
	free(d);
	free(m);
	free(t);
}
END_TEST

START_TEST(test_sar_parts)
{
	struct smpp_long_opts o = udh16;
	char *t = repeat("b", 200);
	struct msg *m = line_msg(t), *d;
	struct smpp_long *lp;
	struct smpp_pdu pdu;
	unsigned needed;

	o.how = TEXT_LONG_SAR;
	ck_assert_int_eq(smpp_long_make(m, &o, &d, &lp, &needed), 2);
	ck_assert(lp->sar);
	ck_assert_uint_eq(d->esm_class & 0x40, 0);
	for (unsigned i = 0; i < 2; i++) {
		memset(&pdu, 0, sizeof(pdu));
		smpp_long_part(lp, i, &pdu);
		ck_assert(pdu.tlvs & SMPP_TLV_SAR);
		ck_assert_uint_eq(pdu.sar_msg_ref_num, 0x1234);
		ck_assert_uint_eq(pdu.sar_total_segments, 2);
		ck_assert_uint_eq(pdu.sar_segment_seqnum, i + 1);
		ck_assert_uint_eq(pdu.sm_length, i == 0 ? 153 : 47);
		ck_assert_uint_eq(pdu.short_message[0], 'b');
	}
	smpp_long_free(lp);
	free(d);
	free(m);
	free(t);
}
END_TEST

START_TEST(test_payload_is_one)
{
	struct smpp_long_opts o = udh16;
	char *t = repeat("c", 400);
	struct msg *m = line_msg(t), *d;
	struct smpp_long *lp;
	struct smpp_pdu pdu;
	unsigned needed;

	o.how = TEXT_LONG_PAYLOAD;
	o.max_parts = 1;
	ck_assert_int_eq(smpp_long_make(m, &o, &d, &lp, &needed), 1);
	ck_assert_ptr_nonnull(lp);
	ck_assert(lp->payload);
	memset(&pdu, 0, sizeof(pdu));
	smpp_long_part(lp, 0, &pdu);
	ck_assert(pdu.tlvs & SMPP_TLV_MESSAGE_PAYLOAD);
	ck_assert_uint_eq(pdu.sm_length, 0);
	ck_assert_uint_eq(pdu.message_payload_len, 400);
	ck_assert_uint_eq(pdu.esm_class & 0x40, 0);
	smpp_long_free(lp);
	free(d);
	free(m);
	free(t);
}
END_TEST

START_TEST(test_over_max_parts)
{
	struct smpp_long_opts o = udh16;
	char *t = repeat("d", 153 * 19 + 1);
	struct msg *m = line_msg(t), *d = NULL;
	struct smpp_long *lp = NULL;
	unsigned needed;

	ck_assert_int_eq(smpp_long_make(m, &o, &d, &lp, &needed), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	ck_assert_uint_eq(needed, 20);
	o.max_parts = 20;
	ck_assert_int_eq(smpp_long_make(m, &o, &d, &lp, &needed), 20);
	smpp_long_free(lp);
	free(d);
	free(m);
	free(t);
}
END_TEST

START_TEST(test_not_utf8)
{
	struct msg *m = line_msg("bad \xC3 text"), *d = NULL;
	struct smpp_long *lp = NULL;
	unsigned needed;

	ck_assert_int_eq(smpp_long_make(m, &udh16, &d, &lp, &needed), -1);
	ck_assert_int_eq(errno, EILSEQ);
	ck_assert_ptr_null(d);
	free(m);
}
END_TEST

/* A set of n parts, all sent, none answered. */
static struct smpp_long *
sent_parts(unsigned n)
{
	struct smpp_long *lp = calloc(1, sizeof(*lp) +
	    n * sizeof(lp->part[0]));

	lp->nparts = lp->next = lp->unanswered = n;
	return lp;
}

START_TEST(test_answers_all_ok)
{
	struct smpp_long *lp = sent_parts(3);

	ck_assert(!smpp_long_answered(lp, SMPP_ESME_ROK));
	ck_assert(!smpp_long_answered(lp, SMPP_ESME_ROK));
	ck_assert(smpp_long_answered(lp, SMPP_ESME_ROK));
	ck_assert_uint_eq(smpp_long_status(lp), SMPP_ESME_ROK);
	smpp_long_free(lp);
}
END_TEST

START_TEST(test_answers_one_fails)
{
	struct smpp_long *lp = sent_parts(3);

	ck_assert(!smpp_long_answered(lp, SMPP_ESME_RMSGQFUL));
	ck_assert(!smpp_long_answered(lp, SMPP_ESME_RSYSERR));
	ck_assert(smpp_long_answered(lp, SMPP_ESME_RTHROTTLED));
	/* The permanent error decides, wherever it came. */
	ck_assert_uint_eq(smpp_long_status(lp), SMPP_ESME_RSYSERR);
	smpp_long_free(lp);
	lp = sent_parts(2);
	ck_assert(!smpp_long_answered(lp, SMPP_ESME_ROK));
	ck_assert(smpp_long_answered(lp, SMPP_ESME_RMSGQFUL));
	ck_assert_uint_eq(smpp_long_status(lp), SMPP_ESME_RMSGQFUL);
	ck_assert(smpp_status_temporary(smpp_long_status(lp)));
	smpp_long_free(lp);
}
END_TEST

START_TEST(test_answers_wait_for_unsent)
{
	struct smpp_long *lp = sent_parts(3);

	/* Two sent and answered, the third not sent yet: not done. */
	lp->next = 2;
	lp->unanswered = 2;
	ck_assert(!smpp_long_answered(lp, SMPP_ESME_ROK));
	ck_assert(!smpp_long_answered(lp, SMPP_ESME_ROK));
	lp->next = 3;
	lp->unanswered = 1;
	ck_assert(smpp_long_answered(lp, SMPP_ESME_ROK));
	smpp_long_free(lp);
}
END_TEST

/* An account's coding, long and max_parts, else the smpp group's. */
START_TEST(test_opts_of_account_and_group)
{
	struct config *cf = unit_config("listeners = ( { name = \"l\";"
	    " address = \"127.0.0.1\"; port = 0; protocol = \"smpp\"; } );\n"
	    "smpp = { long = \"sar\"; max_parts = 4; coding = \"ucs2\"; };\n"
	    "accounts = (\n"
	    "  { id = \"own\"; password = \"p\"; long = \"payload\";"
	    " max_parts = 200; coding = \"latin1\"; },\n"
	    "  { id = \"dflt\"; password = \"p\"; }\n);\n");
	struct smpp_long_opts o;

	smpp_long_opts_of(cf, "own", &o);
	ck_assert_int_eq(o.how, TEXT_LONG_PAYLOAD);
	ck_assert_uint_eq(o.max_parts, 200);
	ck_assert_int_eq(o.coding, TEXT_LATIN1);
	smpp_long_opts_of(cf, "dflt", &o);
	ck_assert_int_eq(o.how, TEXT_LONG_SAR);
	ck_assert_uint_eq(o.max_parts, 4);
	ck_assert_int_eq(o.coding, TEXT_UCS2);
	/* A bind without an account: the group's. */
	smpp_long_opts_of(cf, "nobody", &o);
	ck_assert_int_eq(o.how, TEXT_LONG_SAR);
	config_unref(cf);
	cf = unit_config("listeners = ( { name = \"l\";"
	    " address = \"127.0.0.1\"; port = 0; protocol = \"smpp\"; } );\n");
	smpp_long_opts_of(cf, "x", &o);
	ck_assert_int_eq(o.how, TEXT_LONG_UDH);
	ck_assert_uint_eq(o.max_parts, 16);
	ck_assert_int_eq(o.coding, TEXT_CODING_AUTO);
	config_unref(cf);
}
END_TEST

Suite *
smpp_long_suite(void)
{
	Suite *s = suite_create("smpp_long");
	TCase *tc = tcase_create("make");

	tcase_add_test(tc, test_short_is_one_message);
	tcase_add_test(tc, test_coded_copy_is_its_size);
	tcase_add_test(tc, test_long_text_past_the_stack_buffer);
	tcase_add_test(tc, test_gsm_400_is_three_udh_parts);
	tcase_add_test(tc, test_ucs2_200_is_three_parts);
	tcase_add_test(tc, test_sar_parts);
	tcase_add_test(tc, test_payload_is_one);
	tcase_add_test(tc, test_over_max_parts);
	tcase_add_test(tc, test_not_utf8);
	tcase_add_test(tc, test_opts_of_account_and_group);
	suite_add_tcase(s, tc);
	tc = tcase_create("answers");
	tcase_add_test(tc, test_answers_all_ok);
	tcase_add_test(tc, test_answers_one_fails);
	tcase_add_test(tc, test_answers_wait_for_unsent);
	suite_add_tcase(s, tc);
	return s;
}
