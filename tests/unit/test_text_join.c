/* test_text_join.c: UDH concatenation IEs, and joining parts: out of order, duplicates, timeouts, caps. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"
#include "text.h"
#include "text_join.h"
#include "util.h"

START_TEST(test_udh_8bit)
{
	static const uint8_t sm[] = { 0x05, 0x00, 0x03, 0x2A, 0x03, 0x01,
	    'h', 'i' };
	struct text_concat c;
	size_t hl = 0;

	ck_assert_int_eq(text_udh_concat(sm, sizeof(sm), &c, &hl), 1);
	ck_assert_uint_eq(hl, 6);
	ck_assert_uint_eq(c.ref, 0x2A);
	ck_assert_uint_eq(c.total, 3);
	ck_assert_uint_eq(c.seq, 1);
	ck_assert(!c.ref16);
}
END_TEST

START_TEST(test_udh_16bit_among_other_ies)
{
	/* Language shift (25, 1 octet), ports (05, 4), then 16-bit concat. */
	static const uint8_t sm[] = { 0x0F, 0x25, 0x01, 0x02, 0x05, 0x04,
	    0x0B, 0x84, 0x23, 0xF0, 0x08, 0x04, 0x12, 0x34, 0x04, 0x02, 'x' };
	/* A 7-byte UDH with an unknown IE and the 8-bit one last. */
	static const uint8_t sm8[] = { 0x08, 0x70, 0x01, 0xFF, 0x00, 0x03,
	    0x99, 0x02, 0x02, 'y' };
	/* Two concat IEs: 23.040 says the last occurrence counts. */
	static const uint8_t twice[] = { 0x0B, 0x00, 0x03, 0x01, 0x02, 0x01,
	    0x08, 0x04, 0xAB, 0xCD, 0x05, 0x04, 'z' };
	struct text_concat c;
	size_t hl;

	ck_assert_int_eq(text_udh_concat(twice, sizeof(twice), &c, &hl), 1);
	ck_assert_uint_eq(hl, 12);
	ck_assert_uint_eq(c.ref, 0xABCD);
	ck_assert_uint_eq(c.total, 5);
	ck_assert_uint_eq(c.seq, 4);
	ck_assert_int_eq(text_udh_concat(sm, sizeof(sm), &c, &hl), 1);
	ck_assert_uint_eq(hl, 16);
	ck_assert_uint_eq(c.ref, 0x1234);
	ck_assert(c.ref16);
	ck_assert_uint_eq(c.total, 4);
	ck_assert_uint_eq(c.seq, 2);
	ck_assert_int_eq(text_udh_concat(sm8, sizeof(sm8), &c, &hl), 1);
	ck_assert_uint_eq(hl, 9);
	ck_assert_uint_eq(c.ref, 0x99);
	ck_assert(!c.ref16);
	ck_assert_uint_eq(c.seq, 2);
}
END_TEST

START_TEST(test_udh_refused)
{
	static const struct {
		uint8_t	b[12];
		size_t	n;
		int	want;
	} cases[] = {
		{ { 0x03, 0x70, 0x01, 0xFF }, 4, 0 }, /* no concat */
		{ { 0x00 }, 1, 0 }, /* empty UDH */
		{ { 0x05, 0x00, 0x03, 0x01, 0x02 }, 5, -1 }, /* past n */
		{ { 0x03, 0x70, 0x05, 0xFF, 0xAA }, 5, -1 }, /* IE past UDH */
		{ { 0x01, 0x70 }, 2, -1 }, /* IE cut */
		{ { 0x06, 0x00, 0x04, 1, 2, 1, 1 }, 7, -1 }, /* 00 len 4 */
		{ { 0x05, 0x08, 0x03, 1, 2, 1 }, 6, -1 }, /* 08 len 3 */
		{ { 0x05, 0x00, 0x03, 1, 0, 0 }, 6, -1 }, /* total 0 */
		{ { 0x05, 0x00, 0x03, 1, 2, 0 }, 6, -1 }, /* seq 0 */
		{ { 0x05, 0x00, 0x03, 1, 2, 3 }, 6, -1 }, /* seq > total */
		{ { 0 }, 0, -1 }, /* nothing */
	};
	struct text_concat c;
	size_t hl;
	struct unit_guard g;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		/* At a page's end: a read past n faults. */
		const uint8_t *p = unit_guarded(cases[i].b, cases[i].n, &g);

		errno = 0;
		ck_assert_msg(text_udh_concat(p, cases[i].n, &c, &hl) ==
		    cases[i].want, "case %zu", i);
		if (cases[i].want < 0)
			ck_assert_int_eq(errno, EILSEQ);
		unit_guard_free(&g);
	}
}
END_TEST

static const struct text_join_limits roomy = {
	.max_pending = 100, .max_bytes = 100000,
	.max_pending_owner = 100, .max_bytes_owner = 100000,
	.timeout_ms = 60000,
};

static struct text_join_part
part(const char *owner, const char *from, uint16_t ref, uint8_t total,
    uint8_t seq, const char *text)
{
	return (struct text_join_part){ .owner = owner, .sender = from,
	    .recipient = "alice", .concat = { .ref = ref, .total = total,
	    .seq = seq }, .data_coding = 0, .id = 1000u * ref + seq,
	    .data = (const uint8_t *)text, .len = strlen(text) };
}

static int
add(struct text_join *j, struct text_join_part p, uint64_t now,
    struct text_join_msg **m)
{
	*m = NULL;
	return text_join_add(j, &p, now, m);
}

static void
msg_is(const struct text_join_msg *m, const char *text)
{
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->len, strlen(text));
	ck_assert(memcmp(m->data, text, m->len) == 0);
}

START_TEST(test_join_in_and_out_of_order)
{
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m;

	ck_assert_int_eq(add(j, part("bob", "b", 7, 3, 1, "one "), 0, &m),
	    TEXT_JOIN_PENDING);
	ck_assert_int_eq(add(j, part("bob", "b", 7, 3, 2, "two "), 0, &m),
	    TEXT_JOIN_PENDING);
	ck_assert_int_eq(add(j, part("bob", "b", 7, 3, 3, "three"), 0, &m),
	    TEXT_JOIN_DONE);
	msg_is(m, "one two three");
	ck_assert_uint_eq(m->received, 3);
	ck_assert_uint_eq(m->ids[0], 7001);
	ck_assert_uint_eq(m->ids[2], 7003);
	ck_assert_str_eq(m->sender, "b");
	ck_assert_str_eq(m->owner, "bob");
	text_join_msg_free(m);
	ck_assert_uint_eq(text_join_pending(j), 0);
	ck_assert_uint_eq(text_join_bytes(j), 0);

	/* Reverse order, as the third case. */
	ck_assert_int_eq(add(j, part("bob", "b", 8, 3, 3, "C"), 0, &m), 0);
	ck_assert_int_eq(add(j, part("bob", "b", 8, 3, 2, "B"), 0, &m), 0);
	ck_assert_uint_eq(text_join_pending(j), 1);
	ck_assert_uint_eq(text_join_bytes(j), 2);
	ck_assert_int_eq(add(j, part("bob", "b", 8, 3, 1, "A"), 0, &m),
	    TEXT_JOIN_DONE);
	msg_is(m, "ABC");
	text_join_msg_free(m);
	/* A message of one part is done at once. */
	ck_assert_int_eq(add(j, part("bob", "b", 9, 1, 1, "solo"), 0, &m),
	    TEXT_JOIN_DONE);
	msg_is(m, "solo");
	text_join_msg_free(m);
	ck_assert_uint_eq(text_join_pending(j), 0);
	text_join_free(j);
}
END_TEST

START_TEST(test_join_duplicates)
{
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m;

	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 1, "first"), 0, &m),
	    TEXT_JOIN_PENDING);
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 1, "again"), 0, &m),
	    TEXT_JOIN_DUP);
	ck_assert_ptr_null(m);
	ck_assert_uint_eq(text_join_bytes(j), 5);
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 2, "+"), 0, &m),
	    TEXT_JOIN_DONE);
	msg_is(m, "first+");
	text_join_msg_free(m);
	/* The message is gone: the same part again starts a new one. */
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 2, "+"), 0, &m),
	    TEXT_JOIN_PENDING);
	text_join_free(j);
}
END_TEST

struct expired {
	unsigned n;
	struct text_join_msg *last;
};

static void
on_expired(void *arg, struct text_join_msg *m)
{
	struct expired *e = arg;

	e->n++;
	text_join_msg_free(e->last);
	e->last = m;
}

START_TEST(test_join_missing_part_times_out)
{
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m;
	struct expired ex = { 0 };

	ck_assert_uint_eq(text_join_next_expiry(j), UINT64_MAX);
	ck_assert_int_eq(add(j, part("bob", "b", 5, 3, 1, "A"), 1000, &m), 0);
	ck_assert_int_eq(add(j, part("bob", "b", 5, 3, 3, "C"), 5000, &m), 0);
	ck_assert_int_eq(add(j, part("bob", "b", 6, 2, 1, "x"), 2000, &m), 0);
	ck_assert_uint_eq(text_join_next_expiry(j), 61000);
	ck_assert_uint_eq(text_join_expire(j, 60999, on_expired, &ex), 0);
	ck_assert_uint_eq(text_join_expire(j, 61000, on_expired, &ex), 1);
	ck_assert_uint_eq(ex.n, 1);
	m = ex.last;
	ck_assert_uint_eq(m->concat.ref, 5);
	ck_assert_uint_eq(m->concat.total, 3);
	ck_assert_uint_eq(m->received, 2);
	ck_assert_uint_eq(m->ids[0], 5001);
	ck_assert_uint_eq(m->ids[1], 0);
	ck_assert_uint_eq(m->ids[2], 5003);
	msg_is(m, "AC");
	ck_assert_uint_eq(text_join_pending(j), 1);
	ck_assert_uint_eq(text_join_bytes(j), 1);
	ck_assert_uint_eq(text_join_next_expiry(j), 62000);
	/* The late part starts a new message rather than reviving it. */
	ck_assert_int_eq(add(j, part("bob", "b", 5, 3, 2, "B"), 61001, &m), 0);
	ck_assert_uint_eq(text_join_expire(j, UINT64_MAX, on_expired, &ex), 2);
	ck_assert_uint_eq(ex.n, 3);
	ck_assert_uint_eq(ex.last->received, 1);
	ck_assert_uint_eq(text_join_pending(j), 0);
	ck_assert_uint_eq(text_join_bytes(j), 0);
	text_join_msg_free(ex.last);
	text_join_free(j);
}
END_TEST

/* Each owner's own caps and timeouts, as a part gives them. */
START_TEST(test_join_owner_caps_and_timeouts)
{
	struct text_join *j = text_join_new(&roomy);
	struct text_join_part p;
	struct text_join_msg *m;
	struct expired ex = { 0 };

	p = part("bob", "b", 1, 2, 1, "AAAA");
	p.max_pending_owner = 1;
	p.timeout_ms = 2000;
	ck_assert_int_eq(add(j, p, 1000, &m), TEXT_JOIN_PENDING);
	/* bob's second message is over his cap of one; eve has the table's */
	p.concat.ref = 2;
	errno = 0;
	ck_assert_int_eq(add(j, p, 1000, &m), -1);
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_int_eq(add(j, part("eve", "e", 2, 2, 1, "x"), 1500, &m),
	    TEXT_JOIN_PENDING);
	ck_assert_int_eq(add(j, part("eve", "e", 3, 2, 1, "y"), 1500, &m),
	    TEXT_JOIN_PENDING);
	/* bob's octets: 4 held, a cap of 6 takes 2 more, not 3 */
	p = part("bob", "b", 1, 3, 2, "BBB");
	p.max_bytes_owner = 6;
	p.concat.total = 2;
	errno = 0;
	ck_assert_int_eq(add(j, p, 1100, &m), -1);
	ck_assert_int_eq(errno, ENOBUFS);
	/* (a cap lowered below what is held refuses, and wraps nothing) */
	p.max_bytes_owner = 2;
	ck_assert_int_eq(add(j, p, 1100, &m), -1);
	/* bob's message is due at 3000, eve's at 61500: not oldest first */
	ck_assert_uint_eq(text_join_next_expiry(j), 3000);
	ck_assert_uint_eq(text_join_expire(j, 2999, on_expired, &ex), 0);
	ck_assert_uint_eq(text_join_expire(j, 3000, on_expired, &ex), 1);
	ck_assert_str_eq(ex.last->owner, "bob");
	ck_assert_uint_eq(text_join_next_expiry(j), 61500);
	ck_assert_uint_eq(text_join_pending(j), 2);
	text_join_msg_free(ex.last);
	text_join_free(j);
}
END_TEST

START_TEST(test_join_keys)
{
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m;
	struct text_join_part p;

	/* Same reference, different sender, owner, recipient, total. */
	ck_assert_int_eq(add(j, part("bob", "b", 3, 2, 1, "b1"), 0, &m), 0);
	ck_assert_int_eq(add(j, part("bob", "c", 3, 2, 1, "c1"), 0, &m), 0);
	ck_assert_int_eq(add(j, part("eve", "b", 3, 2, 1, "e1"), 0, &m), 0);
	ck_assert_int_eq(add(j, part("bob", "b", 3, 3, 1, "t1"), 0, &m), 0);
	p = part("bob", "b", 3, 2, 1, "r1");
	p.recipient = "carol";
	ck_assert_int_eq(text_join_add(j, &p, 0, &m), 0);
	ck_assert_uint_eq(text_join_pending(j), 5);
	ck_assert_int_eq(add(j, part("bob", "c", 3, 2, 2, "c2"), 0, &m),
	    TEXT_JOIN_DONE);
	msg_is(m, "c1c2");
	text_join_msg_free(m);
	/* 8- and 16-bit references: 0x34 and 0x1234 are different. */
	p = part("bob", "b", 0x1234, 2, 2, "16");
	p.concat.ref16 = true;
	ck_assert_int_eq(text_join_add(j, &p, 0, &m), 0);
	p = part("bob", "b", 0x34, 2, 2, "8");
	ck_assert_int_eq(text_join_add(j, &p, 0, &m), 0);
	p = part("bob", "b", 0x1234, 2, 1, "x");
	p.concat.ref16 = true;
	ck_assert_int_eq(text_join_add(j, &p, 0, &m), TEXT_JOIN_DONE);
	msg_is(m, "x16");
	ck_assert(m->concat.ref16);
	ck_assert_uint_eq(m->concat.ref, 0x1234);
	text_join_msg_free(m);
	/* Freed with messages still waiting: ASan sees any leak. */
	text_join_free(j);
}
END_TEST

START_TEST(test_join_bad_parts)
{
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m;
	struct text_join_part p;

	errno = 0;
	ck_assert_int_eq(add(j, part("bob", "b", 1, 0, 1, "x"), 0, &m), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 0, "x"), 0, &m), -1);
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 3, "x"), 0, &m), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(text_join_pending(j), 0);
	/* A part in another coding than the first: refused, not mixed. */
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 1, "x"), 0, &m), 0);
	p = part("bob", "b", 1, 2, 2, "\x04\x10");
	p.data_coding = 8;
	errno = 0;
	ck_assert_int_eq(text_join_add(j, &p, 0, &m), -1);
	ck_assert_int_eq(errno, EILSEQ);
	ck_assert_uint_eq(text_join_bytes(j), 1);
	text_join_free(j);
}
END_TEST

START_TEST(test_join_caps_pending)
{
	const struct text_join_limits lim = { .max_pending = 3,
	    .max_bytes = 1000, .max_pending_owner = 2,
	    .max_bytes_owner = 1000, .timeout_ms = 100 };
	struct text_join *j = text_join_new(&lim);
	struct text_join_msg *m;

	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 1, "a"), 0, &m), 0);
	ck_assert_int_eq(add(j, part("bob", "b", 2, 2, 1, "a"), 0, &m), 0);
	/* bob's third message is over his cap; eve still has room. */
	errno = 0;
	ck_assert_int_eq(add(j, part("bob", "b", 3, 2, 1, "a"), 0, &m), -1);
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_int_eq(add(j, part("eve", "e", 3, 2, 1, "a"), 0, &m), 0);
	/* The table is full: nobody starts a message. */
	errno = 0;
	ck_assert_int_eq(add(j, part("ann", "a", 4, 2, 1, "a"), 0, &m), -1);
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_uint_eq(text_join_pending(j), 3);
	/* Parts of waiting messages still come in and complete them. */
	ck_assert_int_eq(add(j, part("bob", "b", 1, 2, 2, "z"), 0, &m),
	    TEXT_JOIN_DONE);
	text_join_msg_free(m);
	ck_assert_int_eq(add(j, part("bob", "b", 3, 2, 1, "a"), 0, &m), 0);
	text_join_free(j);
}
END_TEST

START_TEST(test_join_caps_bytes)
{
	const struct text_join_limits lim = { .max_pending = 10,
	    .max_bytes = 10, .max_pending_owner = 10,
	    .max_bytes_owner = 6, .timeout_ms = 100 };
	struct text_join *j = text_join_new(&lim);
	struct text_join_msg *m;
	struct expired ex = { 0 };

	ck_assert_int_eq(add(j, part("bob", "b", 1, 3, 1, "12345"), 0, &m), 0);
	/* Two more octets would take bob to 7 of his 6. */
	errno = 0;
	ck_assert_int_eq(add(j, part("bob", "b", 1, 3, 2, "67"), 0, &m), -1);
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_uint_eq(text_join_bytes(j), 5);
	ck_assert_int_eq(add(j, part("bob", "b", 1, 3, 2, "6"), 0, &m), 0);
	ck_assert_int_eq(add(j, part("eve", "e", 1, 3, 1, "abcd"), 0, &m), 0);
	/* 10 in all: eve's fifth octet is over the table's cap. */
	errno = 0;
	ck_assert_int_eq(add(j, part("eve", "e", 1, 3, 2, "e"), 0, &m), -1);
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_uint_eq(text_join_bytes(j), 10);
	/* Expiry gives the room back. */
	ck_assert_uint_eq(text_join_expire(j, 100, on_expired, &ex), 2);
	ck_assert_uint_eq(text_join_bytes(j), 0);
	ck_assert_int_eq(add(j, part("eve", "e", 1, 3, 2, "e"), 100, &m), 0);
	text_join_msg_free(ex.last);
	text_join_free(j);
}
END_TEST

/*
 * SAR parts carry their numbers in TLVs (sar_msg_ref_num is 16 bits);
 * the splitter's SAR mode, joined in reverse, gives the text back.
 */
START_TEST(test_join_sar_fields)
{
	const char *text = "@\u20AC and a GSM text long enough for two parts, "
	    "as a gateway that asks for SAR TLVs rather than a UDH gets it: "
	    "one hundred and sixty septets are too few for all of this.";
	const struct text_split_opts o = { .coding = TEXT_CODING_AUTO,
	    .how = TEXT_LONG_SAR, .max_parts = 16, .ref = 0xBEEF };
	static uint8_t out[1024];
	static char utf8[1024];
	struct text_split s;
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m = NULL;
	int n = text_split(text, strlen(text), &o, out, sizeof(out), &s);

	ck_assert_int_eq(n, 2);
	ck_assert(!s.udhi);
	for (int k = n - 1; k >= 0; k--) {
		struct text_join_part p = { .owner = "bob", .sender = "b",
		    .recipient = "a", .data_coding = (uint8_t)s.coding,
		    .concat = { .ref = s.ref, .ref16 = true,
		    .total = (uint8_t)s.nparts, .seq = (uint8_t)(k + 1) },
		    .id = (uint64_t)k + 1, .data = out + s.part[k].off,
		    .len = s.part[k].len };

		ck_assert_int_eq(text_join_add(j, &p, 0, &m),
		    k == 0 ? TEXT_JOIN_DONE : TEXT_JOIN_PENDING);
	}
	ck_assert_uint_eq(m->concat.ref, 0xBEEF);
	ck_assert_int_eq(text_decode(TEXT_GSM, m->data, m->len, utf8,
	    sizeof(utf8)), (ssize_t)strlen(text));
	ck_assert(memcmp(utf8, text, strlen(text)) == 0);
	text_join_msg_free(m);
	text_join_free(j);
}
END_TEST

/* The splitter's parts, read back through the UDH and joined in reverse. */
START_TEST(test_split_then_join)
{
	static const char text[] = "\u041F\u0440\u0438\u0432\u0435\u0442 "
	    "\U0001F600 with a long tail: "
	    "0123456789 0123456789 0123456789 0123456789 0123456789 "
	    "0123456789 0123456789 0123456789 0123456789 0123456789 "
	    "0123456789 0123456789 0123456789 0123456789";
	const struct text_split_opts o = { .coding = TEXT_CODING_AUTO,
	    .max_parts = 16, .ref = 0x77 };
	static uint8_t out[4096];
	static char utf8[4096];
	struct text_split s;
	struct text_join *j = text_join_new(&roomy);
	struct text_join_msg *m = NULL;
	int n = text_split(text, strlen(text), &o, out, sizeof(out), &s);

	/* 181 UTF-16 units: 67 + 67 + 47. */
	ck_assert_int_eq(n, 3);
	for (int k = n - 1; k >= 0; k--) {
		const uint8_t *sm = out + s.part[k].off;
		struct text_join_part p = { .owner = "bob", .sender = "b",
		    .recipient = "a", .data_coding = (uint8_t)s.coding,
		    .id = (uint64_t)k + 1 };
		size_t hl;

		ck_assert_int_eq(text_udh_concat(sm, s.part[k].len,
		    &p.concat, &hl), 1);
		p.data = sm + hl;
		p.len = s.part[k].len - hl;
		ck_assert_int_eq(text_join_add(j, &p, 0, &m),
		    k == 0 ? TEXT_JOIN_DONE : TEXT_JOIN_PENDING);
	}
	ck_assert_int_eq(m->data_coding, TEXT_UCS2);
	ck_assert_int_eq(text_decode(TEXT_UCS2, m->data, m->len, utf8,
	    sizeof(utf8)), (ssize_t)strlen(text));
	ck_assert(memcmp(utf8, text, strlen(text)) == 0);
	text_join_msg_free(m);
	text_join_free(j);
}
END_TEST

Suite *
text_join_suite(void)
{
	Suite *s = suite_create("text_join");
	TCase *tu = tcase_create("udh");
	TCase *tj = tcase_create("join");

	tcase_add_test(tu, test_udh_8bit);
	tcase_add_test(tu, test_udh_16bit_among_other_ies);
	tcase_add_test(tu, test_udh_refused);
	suite_add_tcase(s, tu);
	tcase_add_test(tj, test_join_in_and_out_of_order);
	tcase_add_test(tj, test_join_duplicates);
	tcase_add_test(tj, test_join_missing_part_times_out);
	tcase_add_test(tj, test_join_owner_caps_and_timeouts);
	tcase_add_test(tj, test_join_keys);
	tcase_add_test(tj, test_join_bad_parts);
	tcase_add_test(tj, test_join_caps_pending);
	tcase_add_test(tj, test_join_caps_bytes);
	tcase_add_test(tj, test_split_then_join);
	tcase_add_test(tj, test_join_sar_fields);
	suite_add_tcase(s, tj);
	return s;
}
