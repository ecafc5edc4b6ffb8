/* test_text.c: GSM 03.38 both ways, IA5, Latin-1, UCS-2 with surrogates, bad input, and the splitter's boundaries. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"
#include "text.h"
#include "util.h"

/*
 * The default alphabet of 3GPP TS 23.038 6.2.1, written out here apart
 * from the module's table so that a slip in either shows. Letters and
 * digits are filled in by gsm_expected(); 0x1B, the escape, has none.
 */
static const char *const gsm_marks[128] = {
	[0x00] = "@", [0x01] = "\u00A3", [0x02] = "$", [0x03] = "\u00A5",
	[0x04] = "\u00E8", [0x05] = "\u00E9", [0x06] = "\u00F9",
	[0x07] = "\u00EC", [0x08] = "\u00F2", [0x09] = "\u00C7",
	[0x0A] = "\n", [0x0B] = "\u00D8", [0x0C] = "\u00F8", [0x0D] = "\r",
	[0x0E] = "\u00C5", [0x0F] = "\u00E5",
	[0x10] = "\u0394", [0x11] = "_", [0x12] = "\u03A6", [0x13] = "\u0393",
	[0x14] = "\u039B", [0x15] = "\u03A9", [0x16] = "\u03A0",
	[0x17] = "\u03A8", [0x18] = "\u03A3", [0x19] = "\u0398",
	[0x1A] = "\u039E", [0x1C] = "\u00C6", [0x1D] = "\u00E6",
	[0x1E] = "\u00DF", [0x1F] = "\u00C9",
	[0x20] = " ", [0x21] = "!", [0x22] = "\"", [0x23] = "#",
	[0x24] = "\u00A4", [0x25] = "%", [0x26] = "&", [0x27] = "'",
	[0x28] = "(", [0x29] = ")", [0x2A] = "*", [0x2B] = "+", [0x2C] = ",",
	[0x2D] = "-", [0x2E] = ".", [0x2F] = "/",
	[0x3A] = ":", [0x3B] = ";", [0x3C] = "<", [0x3D] = "=", [0x3E] = ">",
	[0x3F] = "?",
	[0x40] = "\u00A1", [0x5B] = "\u00C4", [0x5C] = "\u00D6",
	[0x5D] = "\u00D1", [0x5E] = "\u00DC", [0x5F] = "\u00A7",
	[0x60] = "\u00BF", [0x7B] = "\u00E4", [0x7C] = "\u00F6",
	[0x7D] = "\u00F1", [0x7E] = "\u00FC", [0x7F] = "\u00E0",
};

/* The extension table (23.038 6.2.1.1). */
static const struct {
	uint8_t	code;
	const char *utf8;
} gsm_ext_expected[] = {
	{ 0x0A, "\f" }, { 0x14, "^" }, { 0x28, "{" }, { 0x29, "}" },
	{ 0x2F, "\\" }, { 0x3C, "[" }, { 0x3D, "~" }, { 0x3E, "]" },
	{ 0x40, "|" }, { 0x65, "\u20AC" },
};

/* The character of GSM code c as UTF-8 in buf; NULL for the escape. */
static const char *
gsm_expected(unsigned c, char *buf)
{
	if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) ||
	    (c >= 0x61 && c <= 0x7A)) {
		buf[0] = (char)c;
		buf[1] = '\0';
		return buf;
	}
	return gsm_marks[c];
}

/* Decodes n octets and checks the UTF-8 that comes out. */
static void
decodes_to(enum text_coding c, const void *in, size_t n, const char *want)
{
	char out[4096];
	ssize_t len = text_decode(c, in, n, out, sizeof(out));

	ck_assert_msg(len >= 0, "decode failed: %s", strerror(errno));
	ck_assert_int_eq(len, (ssize_t)strlen(want));
	ck_assert(memcmp(out, want, (size_t)len) == 0);
}

/* Encodes UTF-8 and checks the octets that come out. */
static void
encodes_to(enum text_coding c, const char *in, const void *want, size_t n)
{
	uint8_t out[4096];
	ssize_t len = text_encode(c, in, strlen(in), out, sizeof(out));

	ck_assert_msg(len >= 0, "encode of '%s' failed: %s", in,
	    strerror(errno));
	ck_assert_int_eq(len, (ssize_t)n);
	ck_assert(memcmp(out, want, n) == 0);
}

static void
decode_fails(enum text_coding c, const void *in, size_t n, int err)
{
	char out[4096];

	errno = 0;
	ck_assert_int_eq(text_decode(c, in, n, out, sizeof(out)), -1);
	ck_assert_int_eq(errno, err);
}

static void
encode_fails(enum text_coding c, const char *in, int err)
{
	uint8_t out[4096];

	errno = 0;
	ck_assert_int_eq(text_encode(c, in, strlen(in), out, sizeof(out)), -1);
	ck_assert_int_eq(errno, err);
}

START_TEST(test_gsm_default_table)
{
	char one[2], all[512] = "";
	uint8_t codes[128];
	size_t ncodes = 0;

	for (unsigned c = 0; c < 128; c++) {
		const char *want = gsm_expected(c, one);
		uint8_t b = (uint8_t)c;

		if (c == TEXT_GSM_ESC)
			continue;
		ck_assert_msg(want != NULL, "code %02x", c);
		decodes_to(TEXT_GSM, &b, 1, want);
		encodes_to(TEXT_GSM, want, &b, 1);
		ck_assert_int_eq(text_gsm_septets(want, strlen(want)), 1);
		strcat(all, want);
		codes[ncodes++] = b;
	}
	/* The whole table at once, both ways. */
	decodes_to(TEXT_GSM, codes, ncodes, all);
	encodes_to(TEXT_GSM, all, codes, ncodes);
	ck_assert_int_eq(text_gsm_septets(all, strlen(all)), 127);
}
END_TEST

/*
 * Every character at every place of a text longer than the encoder's
 * steps (sixteen at a time, then eight, then one): the octets are those
 * of its three pieces, one at a time, and a character GSM lacks fails
 * the whole wherever it is.
 */
START_TEST(test_gsm_any_place)
{
	enum { L = 40 };

	for (unsigned c = 1; c < 256; c++) {
		for (size_t p = 0; p < L; p++) {
			char t[L + 1], one[3] = { (char)c, '\0', '\0' };
			uint8_t got[64], want[64], co[4];
			ssize_t n, nc;

			memset(t, 'k', L);
			t[L] = '\0';
			t[p] = (char)c;
			n = text_encode(TEXT_GSM, t, L, got, sizeof(got));
			if (c >= 0x80) {
				/* Not UTF-8 alone: the whole is refused. */
				ck_assert_int_lt(n, 0);
				continue;
			}
			nc = text_encode(TEXT_GSM, one, 1, co, sizeof(co));
			if (nc < 0) {
				ck_assert_int_lt(n, 0);
				continue;
			}
			memset(want, 'k', p);
			memcpy(want + p, co, (size_t)nc);
			memset(want + p + nc, 'k', L - 1 - p);
			ck_assert_int_eq(n, L - 1 + nc);
			ck_assert_msg(memcmp(got, want, (size_t)n) == 0,
			    "character %u at %zu", c, p);
		}
	}
}
END_TEST

/*
 * What a line may carry, each octet at each place of a text longer than
 * the check's steps (sixteen, eight, one): printable ASCII and TAB alone;
 * and each of a few characters of two to four octets (a C1 control, a
 * surrogate, an overlong form and one past U+10FFFF refused) anywhere.
 */
START_TEST(test_line_valid_any_place)
{
	enum { L = 40 };
	static const struct { const char *c; bool ok; } many[] = {
		{ "\xc3\xa9", true }, { "\xe2\x82\xac", true },
		{ "\xf0\x9f\x98\x80", true }, { "\xc2\xa0", true },
		{ "\xc2\x85", false }, { "\xed\xa0\x80", false },
		{ "\xc0\xaf", false }, { "\xf4\x90\x80\x80", false },
		{ "\xe2\x82", false },
	};
	uint8_t t[L + 4];

	for (unsigned c = 0; c < 256; c++)
		for (size_t p = 0; p < L; p++) {
			memset(t, 'k', L);
			t[p] = (uint8_t)c;
			ck_assert_msg(text_line_valid(t, L) ==
			    ((c >= 0x20 && c < 0x7f) || c == '\t'),
			    "octet %u at %zu", c, p);
		}
	for (size_t k = 0; k < sizeof(many) / sizeof(many[0]); k++)
		for (size_t p = 0; p < L; p++) {
			size_t n = strlen(many[k].c);

			memset(t, 'k', L + n);
			memcpy(t + p, many[k].c, n);
			ck_assert_msg(text_line_valid(t, L + n) == many[k].ok,
			    "character %zu at %zu", k, p);
		}
	ck_assert(text_line_valid(t, 0));
}
END_TEST

/*
 * ASCII that GSM 03.38 has no code for (controls but LF, CR and FF,
 * the grave accent, DEL): not GSM, so UCS-2 when the choice is free; and
 * every other ASCII character one septet or an escape pair.
 */
START_TEST(test_gsm_lacks_some_ascii)
{
	const struct text_split_opts o = { .coding = TEXT_CODING_AUTO,
	    .max_parts = 16 };
	struct text_split s;
	uint8_t out[16];
	unsigned lacking = 0;

	for (unsigned c = 1; c < 128; c++) {
		const char t[4] = { 'a', (char)c, 'b', '\0' };
		bool none = (c < 0x20 && c != '\n' && c != '\r' && c != '\f') ||
		    c == '`' || c == 0x7F;

		if (none) {
			encode_fails(TEXT_GSM, t, ERANGE);
			lacking++;
		} else {
			ck_assert_int_ge(text_encode(TEXT_GSM, t, 3, out,
			    sizeof(out)), 3);
		}
		ck_assert_int_eq(text_split(t, 3, &o, out, sizeof(out), &s), 1);
		ck_assert_int_eq(s.coding, none ? TEXT_UCS2 : TEXT_GSM);
		ck_assert_uint_eq(s.part[0].len, none ? 6 :
		    (size_t)text_gsm_septets(t, 3));
		/* Latin-1 and UCS-2 take any ASCII as it is. */
		encodes_to(TEXT_LATIN1, t, t, 3);
		encodes_to(TEXT_UCS2, t, (const uint8_t[]){ 0, 'a', 0,
		    (uint8_t)c, 0, 'b' }, 6);
	}
	ck_assert_uint_eq(lacking, 30);
	/* One octet short: no room, nothing past it written. */
	memset(out, 0xEE, sizeof(out));
	errno = 0;
	ck_assert_int_eq(text_encode(TEXT_GSM, "hello", 5, out, 4), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_eq(out[4], 0xEE);
	errno = 0;
	ck_assert_int_eq(text_encode(TEXT_UCS2, "hi", 2, out, 3), -1);
	ck_assert_int_eq(errno, ENOSPC);
}
END_TEST

START_TEST(test_gsm_extension_table)
{
	for (size_t i = 0; i < ARRAY_LEN(gsm_ext_expected); i++) {
		const uint8_t in[2] = { TEXT_GSM_ESC,
		    gsm_ext_expected[i].code };
		const char *want = gsm_ext_expected[i].utf8;

		decodes_to(TEXT_GSM, in, 2, want);
		encodes_to(TEXT_GSM, want, in, 2);
		/* The escape counts as a septet. */
		ck_assert_int_eq(text_gsm_septets(want, strlen(want)), 2);
	}
}
END_TEST

START_TEST(test_gsm_at_and_escapes)
{
	static const uint8_t at_a_euro[] = { 0x00, 0x41, 0x1B, 0x65 };
	static const uint8_t nul_at[] = { 0x00, 0x00 };
	static const uint8_t esc_end[] = { 0x41, 0x1B };
	static const uint8_t esc_high[] = { 0x1B, 0x80 };
	static const uint8_t high[] = { 0x41, 0x80 };
	static const uint8_t esc_undef[] = { 0x1B, 0x41, 0x42 };
	static const uint8_t esc_esc[] = { 0x1B, 0x1B, 0x42 };

	/* The issue's case: @A€ as SMPP clients send it. */
	decodes_to(TEXT_GSM, at_a_euro, sizeof(at_a_euro), "@A\u20AC");
	encodes_to(TEXT_GSM, "@A\u20AC", at_a_euro, sizeof(at_a_euro));
	decodes_to(TEXT_GSM, nul_at, 2, "@@");
	decode_fails(TEXT_GSM, esc_end, sizeof(esc_end), EILSEQ);
	decode_fails(TEXT_GSM, esc_high, sizeof(esc_high), EILSEQ);
	decode_fails(TEXT_GSM, high, sizeof(high), EILSEQ);
	/* 23.038: a code missing from the extension table shows as the
	 * default table's, a second escape as a space. */
	decodes_to(TEXT_GSM, esc_undef, sizeof(esc_undef), "AB");
	decodes_to(TEXT_GSM, esc_esc, sizeof(esc_esc), " B");
}
END_TEST

START_TEST(test_gsm_septets)
{
	ck_assert_int_eq(text_gsm_septets("", 0), 0);
	ck_assert_int_eq(text_gsm_septets("hello", 5), 5);
	ck_assert_int_eq(text_gsm_septets("a[b]", 4), 6);
	ck_assert_int_eq(text_gsm_septets("\u20AC5", 4), 3);
	ck_assert_int_eq(text_gsm_septets("\u00C9t\u00E9", 5), 3);
	/* Not in either table: the text needs UCS-2. */
	errno = 0;
	ck_assert_int_eq(text_gsm_septets("ol\u00E1", 4), -1);
	ck_assert_int_eq(errno, ERANGE);
	ck_assert_int_eq(text_gsm_septets("`", 1), -1);
	ck_assert_int_eq(text_gsm_septets("\u00E7", 2), -1);
	ck_assert_int_eq(text_gsm_septets("\u00A0", 2), -1);
	ck_assert_int_eq(text_gsm_septets("\u2603", 3), -1);
	ck_assert_int_eq(text_gsm_septets("\U0001F600", 4), -1);
	ck_assert_int_eq(errno, ERANGE);
	errno = 0;
	ck_assert_int_eq(text_gsm_septets("\xC3", 1), -1);
	ck_assert_int_eq(errno, EILSEQ);
	encode_fails(TEXT_GSM, "ol\u00E1 \u20AC \u2603", ERANGE);
	encode_fails(TEXT_GSM, "\x1B", ERANGE);
}
END_TEST

START_TEST(test_ucs2)
{
	static const uint8_t privet[] = { 0x04, 0x1F, 0x04, 0x40, 0x04, 0x38,
	    0x04, 0x32, 0x04, 0x35, 0x04, 0x42 };
	static const uint8_t mixed[] = { 0x00, 0x6F, 0x00, 0x6C, 0x00, 0xE1,
	    0x00, 0x20, 0x20, 0xAC, 0x00, 0x20, 0x26, 0x03 };
	static const uint8_t grin[] = { 0xD8, 0x3D, 0xDE, 0x00 };
	static const uint8_t top[] = { 0xDB, 0xFF, 0xDF, 0xFF, 0xFF, 0xFF };

	decodes_to(TEXT_UCS2, privet, sizeof(privet),
	    "\u041F\u0440\u0438\u0432\u0435\u0442");
	encodes_to(TEXT_UCS2, "\u041F\u0440\u0438\u0432\u0435\u0442", privet,
	    sizeof(privet));
	decodes_to(TEXT_UCS2, mixed, sizeof(mixed), "ol\u00E1 \u20AC \u2603");
	encodes_to(TEXT_UCS2, "ol\u00E1 \u20AC \u2603", mixed, sizeof(mixed));
	/* Emoji travel as surrogate pairs. */
	decodes_to(TEXT_UCS2, grin, sizeof(grin), "\U0001F600");
	encodes_to(TEXT_UCS2, "\U0001F600", grin, sizeof(grin));
	decodes_to(TEXT_UCS2, top, sizeof(top), "\U0010FFFF\uFFFF");
	encodes_to(TEXT_UCS2, "\U0010FFFF\uFFFF", top, sizeof(top));
	ck_assert_int_eq(text_ucs2_units("a\U0001F600\u00E9", 7), 4);
	decodes_to(TEXT_UCS2, "", 0, "");
}
END_TEST

START_TEST(test_ucs2_bad_surrogates)
{
	static const uint8_t high_end[] = { 0x00, 0x41, 0xD8, 0x3D };
	static const uint8_t high_then_a[] = { 0xD8, 0x3D, 0x00, 0x41 };
	static const uint8_t low_alone[] = { 0xDE, 0x00, 0x00, 0x41 };
	static const uint8_t swapped[] = { 0xDE, 0x00, 0xD8, 0x3D };
	static const uint8_t two_high[] = { 0xD8, 0x3D, 0xD8, 0x3D };
	static const uint8_t odd[] = { 0x00, 0x41, 0x00 };

	decode_fails(TEXT_UCS2, high_end, sizeof(high_end), EILSEQ);
	decode_fails(TEXT_UCS2, high_then_a, sizeof(high_then_a), EILSEQ);
	decode_fails(TEXT_UCS2, low_alone, sizeof(low_alone), EILSEQ);
	decode_fails(TEXT_UCS2, swapped, sizeof(swapped), EILSEQ);
	decode_fails(TEXT_UCS2, two_high, sizeof(two_high), EILSEQ);
	decode_fails(TEXT_UCS2, odd, sizeof(odd), EILSEQ);
}
END_TEST

START_TEST(test_latin1_and_ia5)
{
	uint8_t all[256];
	char one[4], out[600];
	size_t len;

	for (unsigned c = 0; c < 256; c++) {
		uint8_t b = (uint8_t)c;

		/* The expected UTF-8 of U+00xx, built by hand. */
		if (c < 0x80) {
			one[0] = (char)c, len = 1;
		} else {
			one[0] = (char)(0xC0 | c >> 6);
			one[1] = (char)(0x80 | (c & 0x3F));
			len = 2;
		}
		one[len] = '\0';
		all[c] = b;
		if (c == 0)
			continue;	/* "" cannot say NUL; below */
		decodes_to(TEXT_LATIN1, &b, 1, one);
		encodes_to(TEXT_LATIN1, one, &b, 1);
		if (c < 0x80) {
			decodes_to(TEXT_IA5, &b, 1, one);
			encodes_to(TEXT_IA5, one, &b, 1);
		} else {
			decode_fails(TEXT_IA5, &b, 1, EILSEQ);
			encode_fails(TEXT_IA5, one, ERANGE);
		}
	}
	ck_assert_int_eq(text_decode(TEXT_LATIN1, all, 256, out, sizeof(out)),
	    128 + 256);
	ck_assert_int_eq(out[0], 0);
	ck_assert_int_eq(text_decode(TEXT_IA5, all, 128, out, sizeof(out)),
	    128);
	ck_assert(memcmp(out, all, 128) == 0);
	encodes_to(TEXT_LATIN1, "ol\u00E1", "ol\xE1", 3);
	encode_fails(TEXT_LATIN1, "ol\u00E1 \u20AC", ERANGE);
	encode_fails(TEXT_LATIN1, "\u0100", ERANGE);
}
END_TEST

/* UTF-8 that no encoder accepts. */
static const char *const bad_utf8[] = {
	"\x80", "a\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80",
	"\xE0\x9F\xBF", "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x8F\xBF\xBF",
	"\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xE2\x82",
	"\xE2\x82\x41", "\xF0\x9F\x98", "\xC3", "ok\xC3", "\xC3\x41",
	"\xC3\xC3\xA9",
};

START_TEST(test_bad_utf8)
{
	static const enum text_coding all[] = { TEXT_GSM, TEXT_IA5,
	    TEXT_LATIN1, TEXT_UCS2 };

	for (size_t i = 0; i < ARRAY_LEN(bad_utf8); i++) {
		for (size_t k = 0; k < ARRAY_LEN(all); k++)
			encode_fails(all[k], bad_utf8[i], EILSEQ);
		errno = 0;
		ck_assert_int_eq(text_ucs2_units(bad_utf8[i],
		    strlen(bad_utf8[i])), -1);
		ck_assert_int_eq(errno, EILSEQ);
	}
	/* The edges that are valid. */
	encodes_to(TEXT_UCS2, "\uD7FF\uE000", "\xD7\xFF\xE0\x00", 4);
}
END_TEST

START_TEST(test_unknown_coding)
{
	uint8_t b = 'a';
	char out[8];
	uint8_t o8[8];

	errno = 0;
	ck_assert_int_eq(text_decode((enum text_coding)4, &b, 1, out, 8), -1);
	ck_assert_int_eq(errno, ENOTSUP);
	errno = 0;
	ck_assert_int_eq(text_encode((enum text_coding)2, "a", 1, o8, 8), -1);
	ck_assert_int_eq(errno, ENOTSUP);
}
END_TEST

/*
 * Output that ends at a PROT_NONE page: an exact fit works, one octet
 * less is ENOSPC, and neither writes past the end.
 */
static const uint8_t room[16];

static void
check_room_decode(enum text_coding c, const void *in, size_t n, size_t need)
{
	struct unit_guard g;
	char *out = (char *)unit_guarded(room, need, &g);

	ck_assert_int_eq(text_decode(c, in, n, out, need), (ssize_t)need);
	errno = 0;
	ck_assert_int_eq(text_decode(c, in, n, out + 1, need - 1), -1);
	ck_assert_int_eq(errno, ENOSPC);
	unit_guard_free(&g);
}

static void
check_room_encode(enum text_coding c, const char *in, size_t need)
{
	struct unit_guard g;
	uint8_t *out = unit_guarded(room, need, &g);

	ck_assert_int_eq(text_encode(c, in, strlen(in), out, need),
	    (ssize_t)need);
	errno = 0;
	ck_assert_int_eq(text_encode(c, in, strlen(in), out + 1, need - 1),
	    -1);
	ck_assert_int_eq(errno, ENOSPC);
	unit_guard_free(&g);
}

START_TEST(test_out_of_room)
{
	static const uint8_t euro[] = { 0x41, 0x1B, 0x65 };
	static const uint8_t grin[] = { 0x00, 0x41, 0xD8, 0x3D, 0xDE, 0x00 };
	static const uint8_t e_acute[] = { 0x41, 0xE9 };

	check_room_decode(TEXT_GSM, euro, sizeof(euro), 4);
	check_room_decode(TEXT_UCS2, grin, sizeof(grin), 5);
	check_room_decode(TEXT_LATIN1, e_acute, sizeof(e_acute), 3);
	check_room_decode(TEXT_IA5, "ab", 2, 2);
	check_room_encode(TEXT_GSM, "a\u20AC", 3);
	check_room_encode(TEXT_UCS2, "a\U0001F600", 6);
	check_room_encode(TEXT_LATIN1, "a\u00E9", 2);
	check_room_encode(TEXT_IA5, "ab", 2);
	/* The bounds the header promises hold for the worst cases. */
	ck_assert_uint_ge(TEXT_UTF8_MAX(2), strlen("\u20AC"));
	ck_assert_uint_ge(TEXT_UTF8_MAX(2), strlen("\uFFFF"));
	ck_assert_uint_ge(TEXT_ENC_MAX(1), 2);
}
END_TEST

/*
 * Every prefix of some tricky inputs, placed right before a PROT_NONE
 * page: a decoder or encoder that looks one byte too far faults.
 */
START_TEST(test_guard_page)
{
	static const uint8_t gsm[] = { 0x41, 0x1B, 0x65, 0x1B, 0x1B, 0x1B };
	static const uint8_t ucs2[] = { 0x00, 0x41, 0xD8, 0x3D, 0xDE, 0x00,
	    0xD8, 0x3D };
	static const uint8_t latin[] = { 0xFF, 0x80, 0x41 };
	static const char utf8[] = "a\u20AC\U0001F600\u00E9\xF0\x9F\x98";
	char out[64];
	uint8_t o8[64];
	struct unit_guard g;
	const uint8_t *p;

	for (size_t n = 0; n <= sizeof(gsm); n++) {
		p = unit_guarded(gsm, n, &g);
		(void)text_decode(TEXT_GSM, p, n, out, sizeof(out));
		unit_guard_free(&g);
	}
	for (size_t n = 0; n <= sizeof(ucs2); n++) {
		p = unit_guarded(ucs2, n, &g);
		(void)text_decode(TEXT_UCS2, p, n, out, sizeof(out));
		unit_guard_free(&g);
	}
	for (size_t n = 0; n <= sizeof(latin); n++) {
		p = unit_guarded(latin, n, &g);
		(void)text_decode(TEXT_LATIN1, p, n, out, sizeof(out));
		(void)text_decode(TEXT_IA5, p, n, out, sizeof(out));
		unit_guard_free(&g);
	}
	for (size_t n = 0; n < sizeof(utf8); n++) {
		p = unit_guarded(utf8, n, &g);
		(void)text_encode(TEXT_GSM, (const char *)p, n, o8, 64);
		(void)text_encode(TEXT_UCS2, (const char *)p, n, o8, 64);
		(void)text_gsm_septets((const char *)p, n);
		(void)text_ucs2_units((const char *)p, n);
		unit_guard_free(&g);
	}
	/* The cut emoji at the very end is refused, not read past. */
	p = unit_guarded(utf8, sizeof(utf8) - 1, &g);
	errno = 0;
	ck_assert_int_eq(text_encode(TEXT_UCS2, (const char *)p,
	    sizeof(utf8) - 1, o8, 64), -1);
	ck_assert_int_eq(errno, EILSEQ);
	unit_guard_free(&g);
}
END_TEST

/* n copies of the UTF-8 character c, then tail, in a static buffer. */
static const char *
repeat(const char *c, size_t n, const char *tail)
{
	static char buf[70000];
	size_t cl = strlen(c), o = 0;

	ck_assert_uint_lt(n * cl + strlen(tail), sizeof(buf));
	for (size_t i = 0; i < n; i++, o += cl)
		memcpy(buf + o, c, cl);
	strcpy(buf + o, tail);
	return buf;
}

static uint8_t sout[65536 + 2048];

static int
split(const char *in, int coding, enum text_long how, unsigned max,
    struct text_split *s)
{
	const struct text_split_opts o = { .coding = coding, .how = how,
	    .max_parts = max, .ref = 0x1234 };

	return text_split(in, strlen(in), &o, sout, sizeof(sout), s);
}

/* Part k's UDH is 05 00 03 34 total k+1, and its text length is len. */
static const uint8_t *
udh_part(const struct text_split *s, unsigned k, size_t len)
{
	const uint8_t *p = sout + s->part[k].off;

	ck_assert_uint_eq(s->part[k].len, 6 + len);
	ck_assert_int_eq(p[0], 0x05);
	ck_assert_int_eq(p[1], 0x00);
	ck_assert_int_eq(p[2], 0x03);
	ck_assert_int_eq(p[3], 0x34);
	ck_assert_int_eq(p[4], s->nparts);
	ck_assert_int_eq(p[5], k + 1);
	return p + 6;
}

/* Decodes the parts' texts (after UDH) in order and compares with in. */
static void
parts_join_to(const struct text_split *s, const char *in)
{
	static char joined[65536 * 3];
	size_t o = 0, skip = s->udhi ? 6 : 0;
	ssize_t len;

	for (unsigned k = 0; k < s->nparts; k++) {
		len = text_decode(s->coding, sout + s->part[k].off + skip,
		    s->part[k].len - skip, joined + o, sizeof(joined) - o);
		ck_assert_msg(len >= 0, "part %u: %s", k + 1, strerror(errno));
		o += (size_t)len;
	}
	ck_assert_uint_eq(o, strlen(in));
	ck_assert(memcmp(joined, in, o) == 0);
}

START_TEST(test_split_gsm_160_161)
{
	struct text_split s;
	const char *t;
	const uint8_t *p;

	t = repeat("a", 160, "");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 1);
	ck_assert_int_eq(s.coding, TEXT_GSM);
	ck_assert(!s.udhi && !s.payload);
	ck_assert_uint_eq(s.part[0].len, 160);
	parts_join_to(&s, t);

	t = repeat("a", 161, "");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	ck_assert(s.udhi);
	udh_part(&s, 0, 153);
	p = udh_part(&s, 1, 8);
	ck_assert_int_eq(p[0], 'a');
	parts_join_to(&s, t);

	/* 153 septets a part: 306 make two, 307 three. */
	ck_assert_int_eq(split(repeat("a", 306, ""), -1, TEXT_LONG_UDH, 16,
	    &s), 2);
	ck_assert_int_eq(split(repeat("a", 307, ""), -1, TEXT_LONG_UDH, 16,
	    &s), 3);
	udh_part(&s, 2, 1);
	/* An escape counts twice: 158 + € is 160, 159 + € is 161. */
	ck_assert_int_eq(split(repeat("a", 158, "\u20AC"), -1, TEXT_LONG_UDH,
	    16, &s), 1);
	ck_assert_int_eq(split(repeat("a", 159, "\u20AC"), -1, TEXT_LONG_UDH,
	    16, &s), 2);
}
END_TEST

START_TEST(test_split_escape_at_part_end)
{
	struct text_split s;
	const char *t;
	const uint8_t *p;

	/* 152 + € would be 154 septets: the € starts part 2. */
	t = repeat("a", 152, "\u20AC0123456789");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	p = udh_part(&s, 0, 152);
	ck_assert_int_eq(p[151], 'a');
	p = udh_part(&s, 1, 12);
	ck_assert_int_eq(p[0], TEXT_GSM_ESC);
	ck_assert_int_eq(p[1], 0x65);
	parts_join_to(&s, t);

	/* 151 + € is exactly 153: the pair ends part 1. */
	t = repeat("a", 151, "\u20AC0123456789");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	p = udh_part(&s, 0, 153);
	ck_assert_int_eq(p[151], TEXT_GSM_ESC);
	ck_assert_int_eq(p[152], 0x65);
	udh_part(&s, 1, 10);
	parts_join_to(&s, t);

	/* All escapes: 80 of them are 160 septets, one SMS; 81 split 76/5. */
	ck_assert_int_eq(split(repeat("[", 80, ""), -1, TEXT_LONG_UDH, 16,
	    &s), 1);
	t = repeat("[", 81, "");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	udh_part(&s, 0, 152);
	udh_part(&s, 1, 10);
	parts_join_to(&s, t);
}
END_TEST

START_TEST(test_split_ucs2_70_71)
{
	struct text_split s;
	const char *t;
	const uint8_t *p;

	t = repeat("\u0436", 70, "");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 1);
	ck_assert_int_eq(s.coding, TEXT_UCS2);
	ck_assert_uint_eq(s.part[0].len, 140);
	parts_join_to(&s, t);

	t = repeat("\u0436", 71, "");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	udh_part(&s, 0, 134);
	udh_part(&s, 1, 8);
	parts_join_to(&s, t);

	/* One character outside GSM makes the whole text UCS-2. */
	t = repeat("a", 100, "\u00E1");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	ck_assert_int_eq(s.coding, TEXT_UCS2);
	parts_join_to(&s, t);

	/* A surrogate pair that would straddle 67 units starts part 2. */
	t = repeat("\u0436", 66, "\U0001F600\u0436\u0436\u0436\u0436");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	udh_part(&s, 0, 132);
	p = udh_part(&s, 1, 12);
	ck_assert_int_eq(p[0], 0xD8);
	ck_assert_int_eq(p[2], 0xDE);
	parts_join_to(&s, t);

	/* 65 + pair is exactly 67: the pair ends part 1. */
	t = repeat("\u0436", 65, "\U0001F600\u0436\u0436\u0436\u0436");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_UDH, 16, &s), 2);
	p = udh_part(&s, 0, 134);
	ck_assert_int_eq(p[130], 0xD8);
	ck_assert_int_eq(p[132], 0xDE);
	parts_join_to(&s, t);

	/* 35 emoji are 70 units: one SMS. */
	ck_assert_int_eq(split(repeat("\U0001F600", 35, ""), -1,
	    TEXT_LONG_UDH, 16, &s), 1);
	ck_assert_int_eq(split(repeat("\U0001F600", 36, ""), -1,
	    TEXT_LONG_UDH, 16, &s), 2);
}
END_TEST

START_TEST(test_split_forced)
{
	struct text_split s;
	const char *t;

	ck_assert_int_eq(split("abc", TEXT_UCS2, TEXT_LONG_UDH, 16, &s), 1);
	ck_assert_int_eq(s.coding, TEXT_UCS2);
	ck_assert_uint_eq(s.part[0].len, 6);
	ck_assert_int_eq(split("ol\u00E1", TEXT_LATIN1, TEXT_LONG_UDH, 16,
	    &s), 1);
	ck_assert(memcmp(sout, "ol\xE1", 3) == 0);
	t = repeat("\u00E9", 141, "");
	ck_assert_int_eq(split(t, TEXT_LATIN1, TEXT_LONG_UDH, 16, &s), 2);
	udh_part(&s, 0, 134);
	udh_part(&s, 1, 7);
	parts_join_to(&s, t);
	ck_assert_int_eq(split(repeat("\u00E9", 140, ""), TEXT_LATIN1,
	    TEXT_LONG_UDH, 16, &s), 1);
	errno = 0;
	ck_assert_int_eq(split("\u2603", TEXT_GSM, TEXT_LONG_UDH, 16, &s), -1);
	ck_assert_int_eq(errno, ERANGE);
	errno = 0;
	ck_assert_int_eq(split("\u20AC", TEXT_LATIN1, TEXT_LONG_UDH, 16, &s),
	    -1);
	ck_assert_int_eq(errno, ERANGE);
	/* The issue's first case: olá € ☃ goes as UCS-2. */
	ck_assert_int_eq(split("ol\u00E1 \u20AC \u2603", -1, TEXT_LONG_UDH,
	    16, &s), 1);
	ck_assert_int_eq(s.coding, TEXT_UCS2);
	parts_join_to(&s, "ol\u00E1 \u20AC \u2603");
}
END_TEST

START_TEST(test_split_max_parts)
{
	struct text_split s;

	ck_assert_int_eq(split(repeat("a", 16 * 153, ""), -1, TEXT_LONG_UDH,
	    16, &s), 16);
	udh_part(&s, 15, 153);
	memset(sout, 0xEE, 4096);
	errno = 0;
	ck_assert_int_eq(split(repeat("a", 16 * 153 + 1, ""), -1,
	    TEXT_LONG_UDH, 16, &s), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	/* Refused before anything was written. */
	for (size_t i = 0; i < 4096; i++)
		ck_assert_int_eq(sout[i], 0xEE);
	ck_assert_int_eq(split(repeat("a", 161, ""), -1, TEXT_LONG_UDH, 1,
	    &s), -1);
	ck_assert_int_eq(split(repeat("a", 160, ""), -1, TEXT_LONG_UDH, 1,
	    &s), 1);
	ck_assert_int_eq(split(repeat("a", 255 * 153, ""), -1, TEXT_LONG_SAR,
	    TEXT_PARTS_MAX, &s), 255);
	/*
	 * Escape pairs are never cut, so a part may hold 152 septets: 306
	 * septets of '{' take 3 parts (refused at 2, before anything was
	 * written), while 'a' and 152 '{' (305) fill exactly 2.
	 */
	memset(sout, 0xEE, 4096);
	errno = 0;
	ck_assert_int_eq(split(repeat("{", 153, ""), -1, TEXT_LONG_UDH, 2,
	    &s), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_int_eq(sout[i], 0xEE);
	ck_assert_int_eq(split(repeat("{", 153, ""), -1, TEXT_LONG_UDH, 3,
	    &s), 3);
	udh_part(&s, 0, 152);
	udh_part(&s, 2, 2);
	ck_assert_int_eq(split(repeat("{", 152, "a"), -1, TEXT_LONG_UDH, 2,
	    &s), 2);
	udh_part(&s, 0, 152);
	udh_part(&s, 1, 153);
	parts_join_to(&s, repeat("{", 152, "a"));
	errno = 0;
	ck_assert_int_eq(split("a", -1, TEXT_LONG_UDH, 0, &s), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(split("a", -1, TEXT_LONG_UDH, 256, &s), -1);
	ck_assert_int_eq(split("a", 2, TEXT_LONG_UDH, 16, &s), -1);
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_split_sar_and_payload)
{
	struct text_split s;
	const char *t = repeat("a", 161, "");

	ck_assert_int_eq(split(t, -1, TEXT_LONG_SAR, 16, &s), 2);
	ck_assert(!s.udhi && !s.payload);
	ck_assert_uint_eq(s.ref, 0x1234);
	ck_assert_uint_eq(s.part[0].len, 153);
	ck_assert_uint_eq(s.part[1].len, 8);
	parts_join_to(&s, t);

	t = repeat("a", 400, "");
	ck_assert_int_eq(split(t, -1, TEXT_LONG_PAYLOAD, 1, &s), 1);
	ck_assert(s.payload && !s.udhi);
	ck_assert_uint_eq(s.part[0].len, 400);
	parts_join_to(&s, t);
	/* Short text goes in short_message even in payload mode. */
	ck_assert_int_eq(split("hi", -1, TEXT_LONG_PAYLOAD, 1, &s), 1);
	ck_assert(!s.payload);
	/* message_payload's length is 16 bits. */
	ck_assert_int_eq(split(repeat("\u0436", 32767, ""), -1,
	    TEXT_LONG_PAYLOAD, 1, &s), 1);
	ck_assert_uint_eq(s.part[0].len, 65534);
	errno = 0;
	ck_assert_int_eq(split(repeat("\u0436", 32768, ""), -1,
	    TEXT_LONG_PAYLOAD, 1, &s), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
}
END_TEST

START_TEST(test_split_errors)
{
	const struct text_split_opts o = { .coding = TEXT_CODING_AUTO,
	    .max_parts = 16 };
	struct text_split s;
	const char *t = repeat("a", 161, "");
	uint8_t small[168];

	/* 161 septets need 161 + 2 UDHs = 173 octets. */
	errno = 0;
	ck_assert_int_eq(text_split(t, 161, &o, small, sizeof(small), &s), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_le(173, TEXT_SPLIT_MAX(161, 2));
	errno = 0;
	ck_assert_int_eq(text_split("a\xC3", 2, &o, small, sizeof(small), &s),
	    -1);
	ck_assert_int_eq(errno, EILSEQ);
	ck_assert_int_eq(text_split("", 0, &o, small, sizeof(small), &s), 1);
	ck_assert_uint_eq(s.part[0].len, 0);
}
END_TEST

/* Texts of every kind and length through split and back. */
START_TEST(test_split_round_trips)
{
	static const char *const pieces[] = { "a", "\u20AC", "[", "@",
	    "\u0436", "\U0001F600", "\u00E9", " " };
	struct text_split s;
	char t[8192];
	unsigned seed = 29;

	for (int round = 0; round < 300; round++) {
		size_t o = 0, want = (size_t)(round * 7 % 1200);

		while (o < want) {
			const char *p = pieces[(seed = seed * 1103515245 +
			    12345) >> 16 & 7];

			/* Some rounds only GSM, some with UCS-2 text. */
			if (round % 2 == 0 && (p[0] & 0x80) && strcmp(p,
			    "\u20AC") != 0 && strcmp(p, "\u00E9") != 0)
				p = "b";
			memcpy(t + o, p, strlen(p));
			o += strlen(p);
		}
		t[o] = '\0';
		ck_assert_int_gt(split(t, -1, round % 3 == 0 ? TEXT_LONG_SAR :
		    TEXT_LONG_UDH, TEXT_PARTS_MAX, &s), 0);
		parts_join_to(&s, t);
	}
}
END_TEST

/* data_coding to a coding: 0 as the account says, the text ones, no binary. */
START_TEST(test_coding_of)
{
	static const uint8_t refused[] = { 2, 4, 5, 6, 7, 9, 0x0A, 0x0E,
	    0xF0, 0xF4, 0xFF };

	ck_assert_int_eq(text_coding_of(0, TEXT_GSM), TEXT_GSM);
	ck_assert_int_eq(text_coding_of(0, TEXT_LATIN1), TEXT_LATIN1);
	ck_assert_int_eq(text_coding_of(0, TEXT_IA5), TEXT_IA5);
	ck_assert_int_eq(text_coding_of(1, TEXT_LATIN1), TEXT_IA5);
	ck_assert_int_eq(text_coding_of(3, TEXT_GSM), TEXT_LATIN1);
	ck_assert_int_eq(text_coding_of(8, TEXT_GSM), TEXT_UCS2);
	for (size_t i = 0; i < sizeof(refused); i++) {
		errno = 0;
		ck_assert_int_eq(text_coding_of(refused[i], TEXT_GSM), -1);
		ck_assert_int_eq(errno, ENOTSUP);
	}
}
END_TEST

static int
pick(const char *t, int want)
{
	return text_pick(t, strlen(t), want);
}

/*
 * The coding a line text goes out in: GSM while every character is in its
 * tables (extension ones too), else UCS-2; Latin-1 when asked and it fits.
 */
START_TEST(test_pick)
{
	ck_assert_int_eq(pick("", TEXT_CODING_AUTO), TEXT_GSM);
	ck_assert_int_eq(pick("@A\u20AC hi", TEXT_CODING_AUTO), TEXT_GSM);
	ck_assert_int_eq(pick("{[~]}|^\\", TEXT_CODING_AUTO), TEXT_GSM);
	ck_assert_int_eq(pick("ol\u00E1", TEXT_CODING_AUTO), TEXT_UCS2);
	ck_assert_int_eq(pick("\u00E9\u00E8", TEXT_CODING_AUTO), TEXT_GSM);
	ck_assert_int_eq(pick("a\u2603", TEXT_CODING_AUTO), TEXT_UCS2);
	ck_assert_int_eq(pick("\xF0\x9F\x98\x80", TEXT_CODING_AUTO),
	    TEXT_UCS2);
	ck_assert_int_eq(pick("ol\u00E1", TEXT_LATIN1), TEXT_LATIN1);
	ck_assert_int_eq(pick("\u00FF", TEXT_LATIN1), TEXT_LATIN1);
	ck_assert_int_eq(pick("\u0100", TEXT_LATIN1), TEXT_UCS2);
	ck_assert_int_eq(pick("1 \u20AC", TEXT_LATIN1), TEXT_UCS2);
	ck_assert_int_eq(pick("hi", TEXT_UCS2), TEXT_UCS2);
	errno = 0;
	ck_assert_int_eq(pick("a\xC3", TEXT_CODING_AUTO), -1);
	ck_assert_int_eq(errno, EILSEQ);
	errno = 0;
	ck_assert_int_eq(pick("a\xC3", TEXT_UCS2), -1);
	ck_assert_int_eq(errno, EILSEQ);
	errno = 0;
	ck_assert_int_eq(pick("hi", TEXT_IA5), -1);
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

Suite *
text_suite(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("codecs");
	TCase *ts = tcase_create("split");

	tcase_add_test(tc, test_gsm_default_table);
	tcase_add_test(tc, test_gsm_lacks_some_ascii);
	tcase_add_test(tc, test_gsm_any_place);
	tcase_add_test(tc, test_line_valid_any_place);
	tcase_add_test(tc, test_gsm_extension_table);
	tcase_add_test(tc, test_gsm_at_and_escapes);
	tcase_add_test(tc, test_gsm_septets);
	tcase_add_test(tc, test_ucs2);
	tcase_add_test(tc, test_ucs2_bad_surrogates);
	tcase_add_test(tc, test_latin1_and_ia5);
	tcase_add_test(tc, test_bad_utf8);
	tcase_add_test(tc, test_unknown_coding);
	tcase_add_test(tc, test_out_of_room);
	tcase_add_test(tc, test_guard_page);
	tcase_add_test(tc, test_coding_of);
	tcase_add_test(tc, test_pick);
	suite_add_tcase(s, tc);
	tcase_add_test(ts, test_split_gsm_160_161);
	tcase_add_test(ts, test_split_escape_at_part_end);
	tcase_add_test(ts, test_split_ucs2_70_71);
	tcase_add_test(ts, test_split_forced);
	tcase_add_test(ts, test_split_max_parts);
	tcase_add_test(ts, test_split_sar_and_payload);
	tcase_add_test(ts, test_split_errors);
	tcase_add_test(ts, test_split_round_trips);
	suite_add_tcase(s, ts);
	return s;
}
