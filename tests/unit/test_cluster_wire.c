/* test_cluster_wire.c: addresses as NATS tokens, messages as nodes send them. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cluster_wire.h"
#include "../../src/deliver.h"
#include "../../src/util.h"
#include "helpers.h"
#include "suites.h"

START_TEST(token_round_trip)
{
	static const char *addrs[] = {
		"alice", "+4912345", "a.b:c@d", "x_y-z", "=", "a",
		"1234567890123456789012345678901234567890123456789012345678901234",
	};
	char tok[CLUSTER_TOKEN_MAX + 1], back[ROUTE_ADDR_MAX + 1];

	for (size_t i = 0; i < ARRAY_LEN(addrs); i++) {
		size_t n;

		if (!route_addr_valid(addrs[i], strlen(addrs[i])))
			continue;
		n = cluster_token_encode(addrs[i], tok);
		ck_assert_uint_eq(n, strlen(tok));
		/* Nothing a subject token or KV key cannot hold. */
		ck_assert_ptr_null(strpbrk(tok, ".*> +:@"));
		ck_assert(cluster_token_decode(tok, n, back));
		ck_assert_str_eq(back, addrs[i]);
	}
	cluster_token_encode("+49.1", tok);
	ck_assert_str_eq(tok, "=2B49=2E1");
}
END_TEST

START_TEST(token_rejects)
{
	static const char *bad[] = {
		"", "=2", "=2b49", "=41", "a=", "=ZZ", "=20", "a.b",
	};
	char back[ROUTE_ADDR_MAX + 1];

	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		ck_assert_msg(!cluster_token_decode(bad[i], strlen(bad[i]),
		    back), "accepted \"%s\"", bad[i]);
}
END_TEST

static struct msg *
sample_msg(void)
{
	struct msg *m = msg_new(5);

	m->id = 0x0102030405060708ull;
	m->flags = MSG_F_RECEIPT | MSG_F_SAR | MSG_F_NO_VERDICT |
	    MSG_F_STORED | MSG_F_CODED | MSG_F_DC0_IA5;
	m->submitted = 1700000000;
	m->due = 1700000100;
	m->expires = 1700086400;
	m->src_ton = 1;
	m->dst_npi = 2;
	m->esm_class = 4;
	m->data_coding = 8;
	m->registered_delivery = 1;
	m->message_state = 2;
	m->umr = 65535;
	m->sar_ref = 513;
	m->sar_total = 3;
	m->sar_seq = 2;
	strcpy(m->src_addr, "12345678901234567890");
	strcpy(m->reply_to, "alice");
	strcpy(m->receipted_id, "abc");
	strcpy(m->from, "alice");
	strcpy(m->to, "bob");
	memcpy(m->text, "he\0lo", 5);
	m->len = 5;
	return m;
}

START_TEST(msg_round_trip)
{
	struct msg *m = sample_msg(), *d;
	uint8_t *buf = malloc(cluster_msg_size(m));
	size_t n = cluster_msg_encode(m, buf);

	ck_assert_uint_le(n, cluster_msg_size(m));
	d = cluster_msg_decode(buf, n);
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->id, m->id);
	/*
	 * Only what means something on the recipient's node travels: how to
	 * read the text does, as it is converted there.
	 */
	ck_assert_uint_eq(d->flags, MSG_F_RECEIPT | MSG_F_SAR | MSG_F_CODED |
	    MSG_F_DC0_IA5);
	ck_assert_uint_eq(d->submitted, m->submitted);
	ck_assert_uint_eq(d->due, m->due);
	ck_assert_uint_eq(d->expires, m->expires);
	ck_assert_uint_eq(d->src_ton, 1);
	ck_assert_uint_eq(d->dst_npi, 2);
	ck_assert_uint_eq(d->esm_class, 4);
	ck_assert_uint_eq(d->data_coding, 8);
	ck_assert_uint_eq(d->registered_delivery, 1);
	ck_assert_uint_eq(d->message_state, 2);
	ck_assert_uint_eq(d->umr, 65535);
	ck_assert_uint_eq(d->sar_ref, 513);
	ck_assert_uint_eq(d->sar_total, 3);
	ck_assert_uint_eq(d->sar_seq, 2);
	ck_assert_str_eq(d->src_addr, m->src_addr);
	ck_assert_str_eq(d->dst_addr, "");
	ck_assert_str_eq(d->reply_to, "alice");
	ck_assert_str_eq(d->receipted_id, "abc");
	ck_assert_str_eq(d->from, "alice");
	ck_assert_str_eq(d->to, "bob");
	ck_assert_uint_eq(d->len, 5);
	ck_assert_mem_eq(d->text, "he\0lo", 5);
	/* Every cut short, and one byte more, is refused. */
	for (size_t k = 0; k < n; k++)
		ck_assert_ptr_null(cluster_msg_decode(buf, k));
	free(d);
	buf = realloc(buf, n + 1);
	buf[n] = 0;
	ck_assert_ptr_null(cluster_msg_decode(buf, n + 1));
	free(buf);
	free(m);
}
END_TEST

/* A string longer than its field, or with a NUL in it, is refused. */
START_TEST(msg_rejects_bad_strings)
{
	struct msg *m = sample_msg();
	uint8_t *buf = malloc(cluster_msg_size(m) + 64);
	size_t n = cluster_msg_encode(m, buf);
	/* src_addr's length byte follows the 55 fixed bytes. */
	uint8_t *len = buf + 55;

	ck_assert_uint_eq(*len, 20);
	*len = 21;
	ck_assert_ptr_null(cluster_msg_decode(buf, n));
	*len = 20;
	buf[56] = '\0';
	ck_assert_ptr_null(cluster_msg_decode(buf, n));
	buf[56] = '1';
	buf[0] = 2;	/* another version */
	ck_assert_ptr_null(cluster_msg_decode(buf, n));
	free(buf);
	free(m);
}
END_TEST

/* What the wire says of a message's addresses and text is not trusted. */
START_TEST(msg_distrusts_the_wire)
{
	static const struct {
		const char *from, *to, *reply_to;
		bool	ok;
	} cases[] = {
		{ "alice", "bob", "alice", true },
		{ "", "bob", "", true },
		{ "a\nMSG 1 x", "bob", "", false },
		{ "a b", "bob", "", false },
		{ "alice", "", "", false },
		{ "alice", "b\rb", "", false },
		{ "alice", "bob", "x\ny", false },
	};
	struct msg *m = sample_msg(), *d;
	uint8_t *buf = malloc(cluster_msg_size(m));
	size_t n;

	/* The sender's "fit for a line" does not skip the recipient's check. */
	m->flags |= MSG_F_LINE_TEXT;
	n = cluster_msg_encode(m, buf);
	ck_assert_ptr_nonnull(d = cluster_msg_decode(buf, n));
	ck_assert_uint_eq(d->flags & MSG_F_LINE_TEXT, 0);
	free(d);
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		strcpy(m->from, cases[i].from);
		strcpy(m->to, cases[i].to);
		strcpy(m->reply_to, cases[i].reply_to);
		n = cluster_msg_encode(m, buf);
		d = cluster_msg_decode(buf, n);
		ck_assert_msg((d != NULL) == cases[i].ok, "case %zu", i);
		free(d);
	}
	free(buf);
	free(m);
}
END_TEST

/* Three messages in a bundle come out as they went in, in order. */
START_TEST(bundle_round_trip)
{
	struct msg *in[3], *out[4];
	uint8_t *buf;
	size_t cap = CLUSTER_BUNDLE_HEAD, n, k;

	for (size_t i = 0; i < 3; i++) {
		in[i] = sample_msg();
		in[i]->id = i + 1;
		cap += cluster_bundle_item_size(in[i]);
	}
	buf = malloc(cap + 1);
	n = cluster_bundle_head(buf);
	for (size_t i = 0; i < 3; i++)
		n += cluster_bundle_put(in[i], buf + n);
	ck_assert_uint_le(n, cap);
	k = cluster_bundle_decode(buf, n, out, 4);
	ck_assert_uint_eq(k, 3);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(out[i]->id, i + 1);
		ck_assert_str_eq(out[i]->to, "bob");
		ck_assert_mem_eq(out[i]->text, "he\0lo", 5);
		free(out[i]);
	}
	/* More messages than the caller has room for: none. */
	ck_assert_uint_eq(cluster_bundle_decode(buf, n, out, 2), 0);
	/* Cut anywhere but between messages, or a byte more: none. */
	for (size_t j = 0; j < n; j++) {
		k = cluster_bundle_decode(buf, j, out, 4);
		while (k > 0)
			free(out[--k]);
	}
	ck_assert_uint_eq(cluster_bundle_decode(buf, CLUSTER_BUNDLE_HEAD, out,
	    4), 0);
	ck_assert_uint_eq(cluster_bundle_decode(buf, 5, out, 4), 0);
	buf[n] = 0;
	ck_assert_uint_eq(cluster_bundle_decode(buf, n + 1, out, 4), 0);
	/* A lone message is not a bundle. */
	ck_assert_uint_eq(cluster_bundle_decode(buf + CLUSTER_BUNDLE_HEAD + 4,
	    n - CLUSTER_BUNDLE_HEAD - 4, out, 4), 0);
	free(buf);
	for (size_t i = 0; i < 3; i++)
		free(in[i]);
}
END_TEST

START_TEST(verdicts_round_trip)
{
	uint8_t buf[CLUSTER_VERDICTS_HEAD + 3 * CLUSTER_VERDICT_SIZE];
	size_t n = cluster_verdicts_head(buf);
	uint64_t req;
	uint8_t v;

	n += cluster_verdict_put(1, 0, buf + n);
	n += cluster_verdict_put(0x0102030405060708ull, 7, buf + n);
	n += cluster_verdict_put(UINT64_MAX, 255, buf + n);
	ck_assert_uint_eq(n, sizeof(buf));
	ck_assert_int_eq(cluster_verdicts_count(buf, n), 3);
	cluster_verdict_get(buf, 1, &req, &v);
	ck_assert_uint_eq(req, 0x0102030405060708ull);
	ck_assert_uint_eq(v, 7);
	cluster_verdict_get(buf, 2, &req, &v);
	ck_assert_uint_eq(req, UINT64_MAX);
	ck_assert_uint_eq(v, 255);
	/* Only whole verdicts, at least one, after the right first byte. */
	ck_assert_int_eq(cluster_verdicts_count(buf, n - 1), -1);
	ck_assert_int_eq(cluster_verdicts_count(buf, CLUSTER_VERDICTS_HEAD),
	    -1);
	buf[0] ^= 1;
	ck_assert_int_eq(cluster_verdicts_count(buf, n), -1);
}
END_TEST

START_TEST(foreign_formats)
{
	uint8_t b[CLUSTER_BUNDLE_HEAD + 8], v[CLUSTER_VERDICTS_HEAD];
	uint8_t later[] = { 0xB2, 1 }, later_v[] = { 0xA7 }, junk[] = "junk";

	cluster_bundle_head(b);
	cluster_verdicts_head(v);
	/* This version's own and garbage: not foreign. */
	ck_assert_uint_eq(cluster_wire_foreign(b, sizeof(b)), 0);
	ck_assert_uint_eq(cluster_wire_foreign(v, sizeof(v)), 0);
	ck_assert_uint_eq(cluster_wire_foreign(junk, 4), 0);
	ck_assert_uint_eq(cluster_wire_foreign(b, 0), 0);
	/* Another version's: its first byte, and ours of that kind. */
	ck_assert_uint_eq(cluster_wire_foreign(later, 2), 0xB2);
	ck_assert_uint_eq(cluster_wire_format(0xB2), b[0]);
	ck_assert_uint_eq(cluster_wire_foreign(later_v, 1), 0xA7);
	ck_assert_uint_eq(cluster_wire_format(0xA7), v[0]);
}
END_TEST

START_TEST(url_shown_without_userinfo)
{
	static const char *cases[][2] = {
		{ "nats://erd:s3cret@127.0.0.1:4222", "nats://127.0.0.1:4222" },
		{ "tls://token@nats.example:4443", "tls://nats.example:4443" },
		/* An '@' or a '/' in the password: the last '@' ends it. */
		{ "nats://u:p@ss@h:1", "nats://h:1" },
		{ "nats://u:p/s?s#@h:1", "nats://h:1" },
		{ "nats://127.0.0.1:4222", "nats://127.0.0.1:4222" },
		{ "u:pw@h:1", "h:1" },
		{ "", "" },
	};
	char out[256], small[8];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		cluster_url_shown(cases[i][0], out, sizeof(out));
		ck_assert_str_eq(out, cases[i][1]);
	}
	/* Truncated to fit, never the secret. */
	cluster_url_shown("nats://erd:s3cret@h:1", small, sizeof(small));
	ck_assert_str_eq(small, "nats://");
}
END_TEST

Suite *
cluster_wire_suite(void)
{
	Suite *s = suite_create("cluster_wire");
	TCase *tc = tcase_create("wire");

	tcase_add_test(tc, token_round_trip);
	tcase_add_test(tc, token_rejects);
	tcase_add_test(tc, msg_round_trip);
	tcase_add_test(tc, msg_rejects_bad_strings);
	tcase_add_test(tc, msg_distrusts_the_wire);
	tcase_add_test(tc, bundle_round_trip);
	tcase_add_test(tc, verdicts_round_trip);
	tcase_add_test(tc, foreign_formats);
	tcase_add_test(tc, url_shown_without_userinfo);
	suite_add_tcase(s, tc);
	return s;
}
