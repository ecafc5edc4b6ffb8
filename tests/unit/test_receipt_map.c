/* test_receipt_map.c: SMS centres' message ids in their forms, the receipt id map's bounds, and receipt texts made and read. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "msg.h"
#include "receipt_map.h"
#include "smpp_receipt.h"
#include "helpers.h"
#include "suites.h"
#include "util.h"

#define METRICS								\
	"listeners = ( { name = \"m\"; address = \"127.0.0.1\"; port = 0; "	\
	"protocol = \"metrics\"; } );\n"

static const struct receipt_limits big = { .limit = 1000, .expiry = 0 };

/* Files id as from a submit_sm_resp, for our message our. */
static void
file(struct receipt_map *map, const char *up, unsigned form, const char *id,
    uint64_t our, uint64_t now, const struct receipt_limits *lim)
{
	struct receipt_orig o = { .id = our };
	struct receipt_key k[RECEIPT_KEYS_MAX];
	unsigned n = receipt_id_keys(form, false, id, strlen(id), k);

	snprintf(o.reply_to, sizeof(o.reply_to), "sub%llu",
	    (unsigned long long)our);
	ck_assert_int_eq(receipt_map_add(map, up, k, n, &o, now, lim), 0);
}

/* A receipt's lookup of id (final: it takes the entry), its record in o. */
static bool
find(struct receipt_map *map, const char *up, unsigned form, const char *id,
    bool final, uint64_t now, const struct receipt_limits *lim,
    struct receipt_orig *o)
{
	struct receipt_key k[RECEIPT_KEYS_MAX];
	unsigned n = receipt_id_keys(form, true, id, strlen(id), k);

	return n > 0 && receipt_map_find(map, up, k, n, final, now, lim, o);
}

/* Our id the receipt naming id finds, or 0; an intermediate lookup. */
static uint64_t
peek(struct receipt_map *map, const char *up, unsigned form, const char *id,
    uint64_t now, const struct receipt_limits *lim)
{
	struct receipt_orig o;

	if (!find(map, up, form, id, false, now, lim, &o))
		return 0;
	return o.id;
}

/* Whether a receipt with rid finds the message filed under sid in form. */
static bool
matches(unsigned form, const char *sid, const char *rid)
{
	struct receipt_map *map = receipt_map_new();
	uint64_t got;

	file(map, "opA", form, sid, 42, 1, &big);
	got = peek(map, "opA", form, rid, 1, &big);
	receipt_map_free(map);
	return got == 42;
}

/* "auto" matches every form a centre uses for the same id. */
START_TEST(auto_matches_every_form)
{
	/* The same string; zero-padded; hex of the decimal id. */
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "12345", "12345"));
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "12345", "0000012345"));
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "12345", "3039"));
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "0000012345", "3039"));
	/* Decimal of a hex id, either case of its digits. */
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "3039", "12345"));
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "ABCDEF", "abcdef"));
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "abcdef", "00ABCDEF"));
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "ABCDEF", "11259375"));
	/* Ids that are no number match as text, case aside. */
	ck_assert(matches(UPSTREAM_RECEIPT_AUTO, "msg-7Qz", "MSG-7qz"));
	ck_assert(!matches(UPSTREAM_RECEIPT_AUTO, "msg-7Qz", "msg-7Q"));
	ck_assert(!matches(UPSTREAM_RECEIPT_AUTO, "12345", "12346"));
}
END_TEST

/* A fixed form matches its own relation only. */
START_TEST(fixed_forms)
{
	ck_assert(matches(UPSTREAM_RECEIPT_SAME, "AbC123", "AbC123"));
	ck_assert(!matches(UPSTREAM_RECEIPT_SAME, "AbC123", "abc123"));
	ck_assert(!matches(UPSTREAM_RECEIPT_SAME, "12345", "0000012345"));
	ck_assert(!matches(UPSTREAM_RECEIPT_SAME, "12345", "3039"));

	ck_assert(matches(UPSTREAM_RECEIPT_HEX, "12345", "3039"));
	ck_assert(matches(UPSTREAM_RECEIPT_HEX, "0000012345", "00003039"));
	ck_assert(matches(UPSTREAM_RECEIPT_HEX, "255", "FF"));
	ck_assert(matches(UPSTREAM_RECEIPT_HEX, "255", "ff"));
	ck_assert(!matches(UPSTREAM_RECEIPT_HEX, "12345", "12345"));

	ck_assert(matches(UPSTREAM_RECEIPT_DEC, "3039", "12345"));
	ck_assert(matches(UPSTREAM_RECEIPT_DEC, "3039", "0012345"));
	ck_assert(matches(UPSTREAM_RECEIPT_DEC, "ff", "255"));
	ck_assert(matches(UPSTREAM_RECEIPT_DEC, "FF", "255"));
	ck_assert(!matches(UPSTREAM_RECEIPT_DEC, "3039", "3039"));

	/* An id with no value in the form's sense falls back to its text. */
	ck_assert(matches(UPSTREAM_RECEIPT_HEX, "x-1", "x-1"));
	ck_assert(matches(UPSTREAM_RECEIPT_DEC, "x-1", "x-1"));
}
END_TEST

/* The keys themselves: values within 64 bits, text up to 64 characters. */
START_TEST(keys_bounds)
{
	struct receipt_key k[RECEIPT_KEYS_MAX];
	char long_id[RECEIPT_ID_MAX + 2];

	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "", 0,
	    k), 0);
	memset(long_id, '7', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false,
	    long_id, RECEIPT_ID_MAX + 1, k), 0);
	/* 64 digits: text only (no value fits 64 bits). */
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false,
	    long_id, RECEIPT_ID_MAX, k), 1);
	ck_assert_int_eq(k[0].kind, RECEIPT_KEY_STR);
	/* The largest values fit; one more digit does not. */
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_DEC, true,
	    "18446744073709551615", 20, k), 1);
	ck_assert_int_eq(k[0].kind, RECEIPT_KEY_VAL);
	ck_assert(k[0].val == UINT64_MAX);
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_DEC, true,
	    "18446744073709551616", 20, k), 1);
	ck_assert_int_eq(k[0].kind, RECEIPT_KEY_STR);
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_HEX, true,
	    "0000FFFFFFFFFFFFFFFF", 20, k), 1);
	ck_assert(k[0].kind == RECEIPT_KEY_VAL && k[0].val == UINT64_MAX);
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_HEX, true,
	    "1FFFFFFFFFFFFFFFF", 17, k), 1);
	ck_assert_int_eq(k[0].kind, RECEIPT_KEY_STR);
	/* "0" is the same value in both bases: one value key. */
	ck_assert_uint_eq(receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "0", 1,
	    k), 2);
}
END_TEST

/*
 * The auto form reads the text, the decimal and the hexadecimal value in
 * one pass: each key as the forms give it one at a time.
 */
START_TEST(keys_auto_each)
{
	static const struct {
		const char *id, *str;
		bool dec, hex;
		uint64_t dv, hv;
	} c[] = {
		{ "12345", "12345", true, true, 12345, 0x12345 },
		{ "0A3f", "0a3f", false, true, 0, 0xa3f },
		{ "7", "7", true, false, 7, 0 },	/* one value */
		{ "FFFFFFFFFFFFFFFF", "ffffffffffffffff", false, true, 0,
		    UINT64_MAX },
		{ "1FFFFFFFFFFFFFFFF", "1ffffffffffffffff", false, false, 0,
		    0 },
		{ "1234567890123456789", "1234567890123456789", true, false,
		    1234567890123456789ull, 0 },
		{ "18446744073709551615", "18446744073709551615", true,
		    false, UINT64_MAX, 0 },
		{ "18446744073709551616", "18446744073709551616", false,
		    false, 0, 0 },
		{ "0000FFFFFFFFFFFFFFFF", "0000ffffffffffffffff", false, true,
		    0, UINT64_MAX },
		{ "00000000000000000012", "00000000000000000012", true, true,
		    12, 0x12 },
		{ "Ab-1", "ab-1", false, false, 0, 0 },
		{ "0g", "0g", false, false, 0, 0 },
		{ "00000000000000000000000000000001", NULL, true, false, 1,
		    0 },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct receipt_key k[RECEIPT_KEYS_MAX];
		unsigned n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, true,
		    c[i].id, strlen(c[i].id), k), at = 1;

		ck_assert_int_eq(k[0].kind, RECEIPT_KEY_STR);
		ck_assert_uint_eq(k[0].len, strlen(c[i].id));
		if (c[i].str != NULL)
			ck_assert_str_eq(k[0].str, c[i].str);
		if (c[i].dec) {
			ck_assert_uint_gt(n, at);
			ck_assert_int_eq(k[at].kind, RECEIPT_KEY_VAL);
			ck_assert(k[at].val == c[i].dv);
			at++;
		}
		if (c[i].hex) {
			ck_assert_uint_gt(n, at);
			ck_assert_int_eq(k[at].kind, RECEIPT_KEY_VAL);
			ck_assert(k[at].val == c[i].hv);
			at++;
		}
		ck_assert_msg(n == at, "%s: %u keys, not %u", c[i].id, n, at);
	}
}
END_TEST

/*
 * The auto form's one pass against the fixed forms' readers (dec and hex
 * as a receipt gives them read each base alone), over random ids of
 * digits, hex letters in both cases, and other bytes, up to 64 long. No
 * ck_assert per id: each one costs Check a write to its pipe, and 200,000
 * of them ran past the case's timeout under ThreadSanitizer.
 */
START_TEST(keys_auto_as_fixed)
{
	static const char alpha[] = "0123456789abcdefABCDEF0000-xZ9";
	uint64_t x = 0x9E3779B97F4A7C15u;

	for (int k = 0; k < 200000; k++) {
		struct receipt_key a[RECEIPT_KEYS_MAX], d[RECEIPT_KEYS_MAX],
		    h[RECEIPT_KEYS_MAX];
		char id[RECEIPT_ID_MAX + 1], low[RECEIPT_ID_MAX + 1];
		size_t len;
		unsigned n, at = 1;
		bool dv, hv;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		len = 1 + x % (k % 4 == 0 ? RECEIPT_ID_MAX : 22);
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* Mostly one base, so that values often parse. */
			id[i] = alpha[x % (k % 3 == 0 ? 10 : k % 3 == 1 ? 22 :
			    sizeof(alpha) - 1)];
			low[i] = id[i] >= 'A' && id[i] <= 'Z' ?
			    (char)(id[i] + 32) : id[i];
		}
		id[len] = low[len] = '\0';
		n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, true, id, len, a);
		receipt_id_keys(UPSTREAM_RECEIPT_DEC, true, id, len, d);
		receipt_id_keys(UPSTREAM_RECEIPT_HEX, true, id, len, h);
		dv = d[0].kind == RECEIPT_KEY_VAL;
		hv = h[0].kind == RECEIPT_KEY_VAL && !(dv && h[0].val == d[0].val);
		if (a[0].kind != RECEIPT_KEY_STR || strcmp(a[0].str, low) != 0)
			ck_abort_msg("%s: not its lower-case string first", id);
		if (dv && !(a[at].kind == RECEIPT_KEY_VAL &&
		    a[at++].val == d[0].val))
			ck_abort_msg("%s: decimal", id);
		if (hv && !(a[at].kind == RECEIPT_KEY_VAL &&
		    a[at++].val == h[0].val))
			ck_abort_msg("%s: hex", id);
		if (n != at)
			ck_abort_msg("%s: %u keys, not %u", id, n, at);
	}
}
END_TEST

/* An upstream's ids are its own: another's same id is another message. */
START_TEST(map_per_upstream)
{
	struct receipt_map *map = receipt_map_new();

	file(map, "opA", UPSTREAM_RECEIPT_AUTO, "100", 1, 1, &big);
	file(map, "opB", UPSTREAM_RECEIPT_AUTO, "100", 2, 1, &big);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "100", 1,
	    &big), 1);
	ck_assert_uint_eq(peek(map, "opB", UPSTREAM_RECEIPT_AUTO, "0100", 1,
	    &big), 2);
	ck_assert_uint_eq(peek(map, "opC", UPSTREAM_RECEIPT_AUTO, "100", 1,
	    &big), 0);
	receipt_map_free(map);
}
END_TEST

/* A final receipt takes the entry; an intermediate one leaves it. */
START_TEST(map_final_takes)
{
	struct receipt_map *map = receipt_map_new();
	struct receipt_orig o;

	file(map, "opA", UPSTREAM_RECEIPT_AUTO, "3039", 7, 1, &big);
	ck_assert(find(map, "opA", UPSTREAM_RECEIPT_AUTO, "12345", false, 1,
	    &big, &o));
	ck_assert_uint_eq(o.id, 7);
	ck_assert_str_eq(o.reply_to, "sub7");
	ck_assert_uint_eq(receipt_map_count(map), 1);
	ck_assert(find(map, "opA", UPSTREAM_RECEIPT_AUTO, "3039", true, 1,
	    &big, &o));
	ck_assert_uint_eq(receipt_map_count(map), 0);
	/* Each of its keys went with it. */
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "12345", 1,
	    &big), 0);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "3039", 1,
	    &big), 0);
	receipt_map_free(map);
}
END_TEST

/* Past limit the oldest go first; the count never passes limit. */
START_TEST(map_limit_evicts_oldest)
{
	struct receipt_map *map = receipt_map_new();
	const struct receipt_limits lim = { .limit = 100, .expiry = 0 };
	char id[32];

	for (unsigned i = 1; i <= 250; i++) {
		snprintf(id, sizeof(id), "%u", 1000 + i);
		file(map, "opA", UPSTREAM_RECEIPT_AUTO, id, i, 1, &lim);
		ck_assert_uint_le(receipt_map_count(map), 100);
	}
	ck_assert_uint_eq(receipt_map_count(map), 100);
	/* 1..150 were evicted, 151..250 are there. */
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "1150", 1,
	    &lim), 0);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "1151", 1,
	    &lim), 151);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "1250", 1,
	    &lim), 250);
	receipt_map_free(map);
}
END_TEST

/*
 * A limit lowered (a reload) under a full map: each call drops a bounded
 * step of the oldest, the map never grows meanwhile, and it comes down
 * to the new limit; the newest are the ones kept.
 */
START_TEST(map_limit_lowered_comes_down)
{
	struct receipt_map *map = receipt_map_new();
	const struct receipt_limits was = { .limit = 5000, .expiry = 0 };
	const struct receipt_limits now = { .limit = 100, .expiry = 0 };
	size_t before;
	char id[32];
	unsigned i;

	for (i = 1; i <= 5000; i++) {
		snprintf(id, sizeof(id), "%u", 100000 + i);
		file(map, "opA", UPSTREAM_RECEIPT_AUTO, id, i, 1, &was);
	}
	for (; receipt_map_count(map) > 100; i++) {
		before = receipt_map_count(map);
		snprintf(id, sizeof(id), "%u", 100000 + i);
		file(map, "opA", UPSTREAM_RECEIPT_AUTO, id, i, 1, &now);
		/* Not all at once, and never more than before. */
		ck_assert_uint_ge(receipt_map_count(map), before > 1100 ?
		    before - 1100 : 100);
		ck_assert_uint_le(receipt_map_count(map), before);
		ck_assert_uint_lt(i, 5100);
	}
	ck_assert_uint_eq(receipt_map_count(map), 100);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "100001", 1,
	    &now), 0);
	snprintf(id, sizeof(id), "%u", 100000 + i - 1);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, id, 1,
	    &now), i - 1);
	receipt_map_free(map);
}
END_TEST

/* Entries older than expiry are not found, and go as time passes. */
START_TEST(map_expiry)
{
	struct receipt_map *map = receipt_map_new();
	const struct receipt_limits lim = { .limit = 1000, .expiry = 60 };

	file(map, "opA", UPSTREAM_RECEIPT_AUTO, "1", 1, 100, &lim);
	file(map, "opA", UPSTREAM_RECEIPT_AUTO, "2", 2, 130, &lim);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "1", 159,
	    &lim), 1);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "1", 160,
	    &lim), 0);
	ck_assert_uint_eq(receipt_map_count(map), 1);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_AUTO, "2", 160,
	    &lim), 2);
	/* Adding drops the expired too. */
	file(map, "opA", UPSTREAM_RECEIPT_AUTO, "3", 3, 500, &lim);
	ck_assert_uint_eq(receipt_map_count(map), 1);
	receipt_map_free(map);
}
END_TEST

/* The newest of two entries with one key is found, and many keys hash apart. */
START_TEST(map_many)
{
	struct receipt_map *map = receipt_map_new();
	const struct receipt_limits lim = { .limit = 50000, .expiry = 0 };
	char id[32];

	for (unsigned i = 1; i <= 50000; i++) {
		snprintf(id, sizeof(id), "%x", i * 7919);
		file(map, "opA", UPSTREAM_RECEIPT_DEC, id, i, 1, &lim);
	}
	for (unsigned i = 1; i <= 50000; i += 97) {
		snprintf(id, sizeof(id), "%u", i * 7919);
		ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_DEC, id,
		    1, &lim), i);
	}
	file(map, "opA", UPSTREAM_RECEIPT_DEC, "a", 99, 1, &lim);
	file(map, "opA", UPSTREAM_RECEIPT_DEC, "A", 100, 1, &lim);
	ck_assert_uint_eq(peek(map, "opA", UPSTREAM_RECEIPT_DEC, "10", 1,
	    &lim), 100);
	receipt_map_free(map);
}
END_TEST

/* A receipt's text: its fields in any case, whatever is absent empty. */
START_TEST(receipt_text_parsed)
{
	const char *t = "id:0000012345 sub:001 dlvrd:001 "
	    "submit date:2611261830 done date:2611261831 stat:DELIVRD err:000 text:Hello there";
	struct smpp_receipt_text f;

	ck_assert_int_eq(smpp_receipt_parse((const uint8_t *)t, strlen(t), &f),
	    0);
	ck_assert_str_eq(f.id, "0000012345");
	ck_assert_str_eq(f.sub, "001");
	ck_assert_str_eq(f.dlvrd, "001");
	ck_assert_str_eq(f.submit_date, "2611261830");
	ck_assert_str_eq(f.done_date, "2611261831");
	ck_assert_str_eq(f.stat, "DELIVRD");
	ck_assert_str_eq(f.err, "000");
	ck_assert_str_eq(f.text, "Hello there");
	t = "ID:3039 STAT:UNDELIV ERR:012";
	ck_assert_int_eq(smpp_receipt_parse((const uint8_t *)t, strlen(t), &f),
	    0);
	ck_assert_str_eq(f.id, "3039");
	ck_assert_str_eq(f.stat, "UNDELIV");
	ck_assert_str_eq(f.err, "012");
	ck_assert_str_eq(f.done_date, "");
	/* No id, an empty one, or "id:" inside a word: none. */
	t = "stat:DELIVRD err:000";
	ck_assert_int_eq(smpp_receipt_parse((const uint8_t *)t, strlen(t), &f),
	    -1);
	t = "id: stat:DELIVRD";
	ck_assert_int_eq(smpp_receipt_parse((const uint8_t *)t, strlen(t), &f),
	    -1);
	t = "valid:7 stat:DELIVRD";
	ck_assert_int_eq(smpp_receipt_parse((const uint8_t *)t, strlen(t), &f),
	    -1);
	/* A field too long for its place is left out. */
	t = "id:1 stat:DELIVEREDXX err:000";
	ck_assert_int_eq(smpp_receipt_parse((const uint8_t *)t, strlen(t), &f),
	    0);
	ck_assert_str_eq(f.stat, "");
}
END_TEST

/* Parsing never reads past the text (it ends at a PROT_NONE page). */
START_TEST(receipt_text_bounded)
{
	const char *t = "id:12 stat:DELIVRD err:0";
	struct unit_guard g;
	struct smpp_receipt_text f;

	for (size_t n = 0; n <= strlen(t); n++) {
		uint8_t *p = unit_guarded(t, n, &g);

		smpp_receipt_parse(p, n, &f);
		unit_guard_free(&g);
	}
	ck_assert_str_eq(f.err, "0");
}
END_TEST

/*
 * The reader as it was first written, one search of t per label: the
 * one-pass reader must find what it found, field by field.
 */
static bool
ref_field(const uint8_t *t, size_t n, const char *label, bool rest,
    char *out, size_t cap)
{
	size_t ll = strlen(label), i, v;

	for (i = 0; i + ll <= n; i++) {
		if ((i > 0 && t[i - 1] != ' ') ||
		    strncasecmp((const char *)t + i, label, ll) != 0)
			continue;
		i += ll;
		for (v = i; v < n && (rest || t[v] != ' ') && t[v] != '\0'; v++)
			;
		if (v - i >= cap) {
			if (!rest)
				return false;
			v = i + cap - 1;
		}
		memcpy(out, t + i, v - i);
		out[v - i] = '\0';
		return true;
	}
	return false;
}

static int
ref_parse(const uint8_t *t, size_t n, struct smpp_receipt_text *f)
{
	memset(f, 0, sizeof(*f));
	ref_field(t, n, "sub:", false, f->sub, sizeof(f->sub));
	ref_field(t, n, "dlvrd:", false, f->dlvrd, sizeof(f->dlvrd));
	ref_field(t, n, "submit date:", false, f->submit_date,
	    sizeof(f->submit_date));
	ref_field(t, n, "done date:", false, f->done_date,
	    sizeof(f->done_date));
	ref_field(t, n, "stat:", false, f->stat, sizeof(f->stat));
	ref_field(t, n, "err:", false, f->err, sizeof(f->err));
	ref_field(t, n, "text:", true, f->text, sizeof(f->text));
	if (!ref_field(t, n, "id:", false, f->id, sizeof(f->id)) ||
	    f->id[0] == '\0')
		return -1;
	return 0;
}

/* Texts made of labels, values, spaces and NULs, in any order and case. */
START_TEST(receipt_text_as_reference)
{
	static const char *const bits[] = { "id:", "ID:", "sub:", "Sub:",
	    "dlvrd:", "submit date:", "SUBMIT DATE:", "done date:", "stat:",
	    "err:", "text:", "Text:", " ", " ", " ", "x", "7", "001",
	    "DELIVRD", "2611261830", "DELIVEREDXX", "submit", "date:", "d",
	    "s", "\0", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaa" };
	uint64_t x = 88172645463325252u;

	for (int k = 0; k < 20000; k++) {
		uint8_t t[400];
		size_t n = 0;
		struct smpp_receipt_text a, b;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		for (unsigned w = (unsigned)(x % 24); w > 0; w--) {
			const char *s;
			size_t l;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			s = bits[x % ARRAY_LEN(bits)];
			l = s[0] == '\0' ? 1 : strlen(s);
			if (n + l > sizeof(t))
				break;
			memcpy(t + n, s, l);
			n += l;
		}
		if (smpp_receipt_parse(t, n, &a) != ref_parse(t, n, &b) ||
		    memcmp(&a, &b, sizeof(a)) != 0)
			ck_abort_msg("text %d (%zu bytes) read otherwise", k, n);
		/* Read only as far as the outcome: the same outcome. */
		smpp_receipt_outcome(t, n, &a);
		if (strcmp(a.stat, b.stat) != 0 || strcmp(a.err, b.err) != 0 ||
		    strcmp(a.done_date, b.done_date) != 0)
			ck_abort_msg("text %d (%zu bytes): outcome read "
			    "otherwise", k, n);
	}
}
END_TEST

/* The outcome's reader stops there: a receipt's text is not copied. */
START_TEST(receipt_outcome_stops)
{
	const char *t = "id:77 sub:001 dlvrd:001 submit date:2611241345 "
	    "done date:2611241346 stat:DELIVRD err:000 text:hello stat:X";
	struct smpp_receipt_text f;

	smpp_receipt_outcome((const uint8_t *)t, strlen(t), &f);
	ck_assert_str_eq(f.stat, "DELIVRD");
	ck_assert_str_eq(f.err, "000");
	ck_assert_str_eq(f.done_date, "2611241346");
	ck_assert_str_eq(f.text, "");
	/* In another order: read on until it has all three. */
	t = "stat:UNDELIV text:hi there id:9 err:012 done date:2611241400";
	smpp_receipt_outcome((const uint8_t *)t, strlen(t), &f);
	ck_assert_str_eq(f.stat, "UNDELIV");
	ck_assert_str_eq(f.err, "012");
	ck_assert_str_eq(f.done_date, "2611241400");
	ck_assert_str_eq(f.text, "hi there id:9 err:01");	/* cut */
}
END_TEST

START_TEST(receipt_states)
{
	ck_assert_uint_eq(smpp_receipt_state("DELIVRD"), SMPP_STATE_DELIVERED);
	ck_assert_uint_eq(smpp_receipt_state("undeliv"),
	    SMPP_STATE_UNDELIVERABLE);
	ck_assert_uint_eq(smpp_receipt_state("REJECTD"), SMPP_STATE_REJECTED);
	ck_assert_uint_eq(smpp_receipt_state("ENROUTE"), SMPP_STATE_ENROUTE);
	ck_assert_uint_eq(smpp_receipt_state("bogus"), 0);
	ck_assert_str_eq(smpp_receipt_stat(SMPP_STATE_EXPIRED), "EXPIRED");
	ck_assert_str_eq(smpp_receipt_stat(200), "UNKNOWN");
	ck_assert(smpp_receipt_final(SMPP_STATE_DELIVERED));
	ck_assert(smpp_receipt_final(SMPP_STATE_REJECTED));
	ck_assert(!smpp_receipt_final(SMPP_STATE_ENROUTE));
	ck_assert(!smpp_receipt_final(SMPP_STATE_ACCEPTED));
	ck_assert(!smpp_receipt_final(0));
}
END_TEST

/*
 * A receipt quotes the first 20 bytes of the text (up to a NUL), not a
 * part's UDH.
 */
START_TEST(receipt_text_quoted)
{
	static const uint8_t udh[] = { 5, 0, 3, 0x2A, 2, 1 };
	const char *body = "first part of a long text";
	struct smpp_receipt_text f;
	struct msg *m = msg_new(sizeof(udh) + strlen(body)), *r;

	memcpy(m->text, udh, sizeof(udh));
	memcpy(m->text + sizeof(udh), body, strlen(body));
	m->len = sizeof(udh) + strlen(body);
	m->registered_delivery = 1;
	snprintf(m->reply_to, sizeof(m->reply_to), "esme");
	m->esm_class = 0x40;
	r = smpp_receipt_make(m, SMPP_STATE_DELIVERED, 7, 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(smpp_receipt_parse(r->text, r->len, &f), 0);
	ck_assert_str_eq(f.text, "first part of a long");
	free(r);
	/* Without UDHI the same octets are text, quoted up to the NUL. */
	m->esm_class = 0;
	r = smpp_receipt_make(m, SMPP_STATE_DELIVERED, 8, 0);
	ck_assert_int_eq(smpp_receipt_parse(r->text, r->len, &f), 0);
	ck_assert_int_eq(strlen(f.text), 1);
	free(r);
	free(m);
}
END_TEST

/* upstream_receipts: its defaults, values and bounds. */
/* Receipts' dates: YYMMDDhhmm in UTC. */
START_TEST(receipt_dates)
{
	char buf[11];

	/* 2026-11-24 13:45:59 UTC */
	smpp_receipt_date(1795478400ull + 13 * 3600 + 45 * 60 + 59, buf,
	    sizeof(buf));
	ck_assert_str_eq(buf, "2611241345");
	smpp_receipt_date(0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "7001010000");
	/* A thread reuses its last minute's text: the next minute, and back. */
	smpp_receipt_date(1795478400ull + 13 * 3600 + 46 * 60, buf,
	    sizeof(buf));
	ck_assert_str_eq(buf, "2611241346");
	smpp_receipt_date(1795478400ull + 13 * 3600 + 46 * 60 + 59, buf,
	    sizeof(buf));
	ck_assert_str_eq(buf, "2611241346");
	smpp_receipt_date(1795478400ull + 13 * 3600 + 45 * 60, buf,
	    sizeof(buf));
	ck_assert_str_eq(buf, "2611241345");
	/* A short buffer gets what fits. */
	smpp_receipt_date(0, buf, 5);
	ck_assert_str_eq(buf, "7001");
	/*
	 * Past INT64_MAX (a time_t before 1970), minutes do not begin at
	 * multiples of 60 of t: 23:58:44 and 23:59:43 UTC are two.
	 */
	smpp_receipt_date(UINT64_MAX - 75, buf, sizeof(buf));
	ck_assert_str_eq(buf, "6912312358");
	smpp_receipt_date(UINT64_MAX - 16, buf, sizeof(buf));
	ck_assert_str_eq(buf, "6912312359");
}
END_TEST

/* A receipt's text as SMS centres write it; cut at the buffer's end. */
START_TEST(receipt_text_written)
{
	struct smpp_receipt_parts p = { .id = "18446744073709551615",
	    .sub = "001", .dlvrd = "001", .submit_date = "2611241345",
	    .done_date = "2611241346", .stat = "DELIVRD", .err = "000",
	    .text = "hello there", .tl = 5 };
	const char *want = "id:18446744073709551615 sub:001 dlvrd:001 submit "
	    "date:2611241345 done date:2611241346 stat:DELIVRD err:000 "
	    "text:hello";
	char out[200];

	ck_assert_uint_eq(smpp_receipt_write(out, sizeof(out), &p),
	    strlen(want));
	ck_assert_str_eq(out, want);
	for (size_t cap = 1; cap <= strlen(want) + 1; cap++) {
		memset(out, 'x', sizeof(out));
		ck_assert_uint_eq(smpp_receipt_write(out, cap, &p), cap - 1);
		ck_assert(memcmp(out, want, cap - 1) == 0);
		ck_assert_int_eq(out[cap - 1], '\0');
		ck_assert_int_eq(out[cap], 'x');
	}
}
END_TEST

START_TEST(config_receipts)
{
	struct config *cf = unit_config(METRICS
	    "upstream_receipts = { limit = 10; expiry = 0; wait = 0; };\n");

	ck_assert_uint_eq(cf->upstream_receipts.limit, 10);
	ck_assert_uint_eq(cf->upstream_receipts.expiry, 0);
	ck_assert_uint_eq(cf->upstream_receipts.wait, 0);
	config_unref(cf);
	cf = unit_config(METRICS);
	ck_assert_uint_eq(cf->upstream_receipts.limit, 200000);
	ck_assert_uint_eq(cf->upstream_receipts.expiry, 172800);
	ck_assert_uint_eq(cf->upstream_receipts.wait, 2);
	config_unref(cf);
	unit_expect_one_error(METRICS
	    "upstream_receipts = { wait = 61; };\n", 2, "wait");
	unit_expect_one_error(METRICS
	    "upstream_receipts = { limit = 0; };\n", 2, "limit");
	unit_expect_one_error(METRICS
	    "upstream_receipts = { expiry = -1; };\n", 2, "expiry");
}
END_TEST

Suite *
receipt_map_suite(void)
{
	Suite *s = suite_create("receipt_map");
	TCase *tc = tcase_create("receipt_map");

	tcase_add_test(tc, auto_matches_every_form);
	tcase_add_test(tc, fixed_forms);
	tcase_add_test(tc, keys_bounds);
	tcase_add_test(tc, keys_auto_each);
	tcase_add_test(tc, keys_auto_as_fixed);
	tcase_add_test(tc, map_per_upstream);
	tcase_add_test(tc, map_final_takes);
	tcase_add_test(tc, map_limit_evicts_oldest);
	tcase_add_test(tc, map_limit_lowered_comes_down);
	tcase_add_test(tc, map_expiry);
	tcase_add_test(tc, map_many);
	tcase_add_test(tc, receipt_text_parsed);
	tcase_add_test(tc, receipt_text_bounded);
	tcase_add_test(tc, receipt_text_as_reference);
	tcase_add_test(tc, receipt_outcome_stops);
	tcase_add_test(tc, receipt_states);
	tcase_add_test(tc, receipt_text_quoted);
	tcase_add_test(tc, receipt_dates);
	tcase_add_test(tc, receipt_text_written);
	tcase_add_test(tc, config_receipts);
	suite_add_tcase(s, tc);
	return s;
}
