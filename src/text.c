/* text.c: UTF-8 <-> GSM 03.38, IA5, Latin-1 and UCS-2, and splitting long text into SMS parts. */
#include "text.h"

#include <errno.h>
#include <string.h>

#include "util.h"

/* gsm_from_cp's mark for a character of the extension table. */
#define GSM_EXT		0x100

/* Septets in one SMS; no GSM character takes over 2 bytes of UTF-8 a septet. */
#define GSM_SMS		160

/* The GSM 03.38 default alphabet (3GPP TS 23.038 6.2.1), code -> Unicode. */
static const uint16_t gsm_default[128] = {
	0x0040, 0x00A3, 0x0024, 0x00A5, 0x00E8, 0x00E9, 0x00F9, 0x00EC,
	0x00F2, 0x00C7, 0x000A, 0x00D8, 0x00F8, 0x000D, 0x00C5, 0x00E5,
	0x0394, 0x005F, 0x03A6, 0x0393, 0x039B, 0x03A9, 0x03A0, 0x03A8,
	0x03A3, 0x0398, 0x039E, 0x00A0, 0x00C6, 0x00E6, 0x00DF, 0x00C9,
	0x0020, 0x0021, 0x0022, 0x0023, 0x00A4, 0x0025, 0x0026, 0x0027,
	0x0028, 0x0029, 0x002A, 0x002B, 0x002C, 0x002D, 0x002E, 0x002F,
	0x0030, 0x0031, 0x0032, 0x0033, 0x0034, 0x0035, 0x0036, 0x0037,
	0x0038, 0x0039, 0x003A, 0x003B, 0x003C, 0x003D, 0x003E, 0x003F,
	0x00A1, 0x0041, 0x0042, 0x0043, 0x0044, 0x0045, 0x0046, 0x0047,
	0x0048, 0x0049, 0x004A, 0x004B, 0x004C, 0x004D, 0x004E, 0x004F,
	0x0050, 0x0051, 0x0052, 0x0053, 0x0054, 0x0055, 0x0056, 0x0057,
	0x0058, 0x0059, 0x005A, 0x00C4, 0x00D6, 0x00D1, 0x00DC, 0x00A7,
	0x00BF, 0x0061, 0x0062, 0x0063, 0x0064, 0x0065, 0x0066, 0x0067,
	0x0068, 0x0069, 0x006A, 0x006B, 0x006C, 0x006D, 0x006E, 0x006F,
	0x0070, 0x0071, 0x0072, 0x0073, 0x0074, 0x0075, 0x0076, 0x0077,
	0x0078, 0x0079, 0x007A, 0x00E4, 0x00F6, 0x00F1, 0x00FC, 0x00E0,
};

/* The extension table: the code after an escape, and its character. */
static const struct {
	uint8_t	code;
	uint16_t cp;
} gsm_ext[] = {
	{ 0x0A, 0x000C }, { 0x14, 0x005E }, { 0x28, 0x007B }, { 0x29, 0x007D },
	{ 0x2F, 0x005C }, { 0x3C, 0x005B }, { 0x3D, 0x007E }, { 0x3E, 0x005D },
	{ 0x40, 0x007C }, { 0x65, 0x20AC },
};

static ssize_t
fail(int e)
{
	errno = e;
	return -1;
}

/*
 * gsm_from_cp of ASCII, by table: most text is ASCII, and this runs per
 * character of every message bound for SMPP. -1 where GSM has none.
 */
#define X GSM_EXT
static const int16_t gsm_ascii[128] = {
	-1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, 0x0A, -1, X | 0x0A, 0x0D, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1,
	0x20, 0x21, 0x22, 0x23, 0x02, 0x25, 0x26, 0x27,
	0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x2D, 0x2E, 0x2F,
	0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
	0x38, 0x39, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F,
	0x00, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
	0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F,
	0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57,
	0x58, 0x59, 0x5A, X | 0x3C, X | 0x2F, X | 0x3E, X | 0x14, 0x11,
	-1, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67,
	0x68, 0x69, 0x6A, 0x6B, 0x6C, 0x6D, 0x6E, 0x6F,
	0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77,
	0x78, 0x79, 0x7A, X | 0x28, X | 0x40, X | 0x29, X | 0x3D, -1,
};
#undef X

/*
 * The GSM code of cp: 0..0x7F in the default table, GSM_EXT | code in
 * the extension table, -1 in neither. The inverse of the two tables
 * above (the unit tests walk both ways); a table and a switch, not a
 * search.
 */
static int
gsm_from_cp(uint32_t cp)
{
	if (cp < 0x80)
		return gsm_ascii[cp];
	switch (cp) {
	case 0x00A3: return 0x01;
	case 0x00A5: return 0x03;
	case 0x00E8: return 0x04;
	case 0x00E9: return 0x05;
	case 0x00F9: return 0x06;
	case 0x00EC: return 0x07;
	case 0x00F2: return 0x08;
	case 0x00C7: return 0x09;
	case 0x00D8: return 0x0B;
	case 0x00F8: return 0x0C;
	case 0x00C5: return 0x0E;
	case 0x00E5: return 0x0F;
	case 0x0394: return 0x10;
	case 0x03A6: return 0x12;
	case 0x0393: return 0x13;
	case 0x039B: return 0x14;
	case 0x03A9: return 0x15;
	case 0x03A0: return 0x16;
	case 0x03A8: return 0x17;
	case 0x03A3: return 0x18;
	case 0x0398: return 0x19;
	case 0x039E: return 0x1A;
	case 0x00C6: return 0x1C;
	case 0x00E6: return 0x1D;
	case 0x00DF: return 0x1E;
	case 0x00C9: return 0x1F;
	case 0x00A4: return 0x24;
	case 0x00A1: return 0x40;
	case 0x00C4: return 0x5B;
	case 0x00D6: return 0x5C;
	case 0x00D1: return 0x5D;
	case 0x00DC: return 0x5E;
	case 0x00A7: return 0x5F;
	case 0x00BF: return 0x60;
	case 0x00E4: return 0x7B;
	case 0x00F6: return 0x7C;
	case 0x00F1: return 0x7D;
	case 0x00FC: return 0x7E;
	case 0x00E0: return 0x7F;
	case 0x20AC: return GSM_EXT | 0x65;
	}
	return -1;
}

/*
 * The character of code b after an escape. 23.038 tells a receiver to
 * show the default table's character for a code the extension table
 * lacks, and a space for a second escape (reserved for another table).
 */
static uint32_t
gsm_ext_cp(uint8_t b)
{
	if (b == TEXT_GSM_ESC)
		return ' ';
	for (size_t i = 0; i < sizeof(gsm_ext) / sizeof(gsm_ext[0]); i++)
		if (gsm_ext[i].code == b)
			return gsm_ext[i].cp;
	return gsm_default[b];
}

/* utf8_next beyond ASCII. */
static int
utf8_next_multi(const uint8_t *s, size_t n, size_t *i, uint32_t *cp)
{
	size_t k = *i, len;
	uint8_t b = s[k];
	uint32_t c, min;

	if (b >= 0xC2 && b <= 0xDF) {
		/* Two bytes (Latin, Greek, Cyrillic, ...): no more checks. */
		if (n - k < 2 || (s[k + 1] & 0xC0) != 0x80)
			return -1;
		*cp = (uint32_t)(b & 0x1F) << 6 | (s[k + 1] & 0x3F);
		*i = k + 2;
		return 0;
	}
	if ((b & 0xF0) == 0xE0) {
		len = 3, c = b & 0x0F, min = 0x800;
	} else if (b >= 0xF0 && b <= 0xF4) {
		len = 4, c = b & 0x07, min = 0x10000;
	} else
		return -1;
	if (n - k < len)
		return -1;
	for (size_t j = 1; j < len; j++) {
		if ((s[k + j] & 0xC0) != 0x80)
			return -1;
		c = c << 6 | (s[k + j] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return -1;
	*cp = c;
	*i = k + len;
	return 0;
}

/*
 * Reads the UTF-8 character at s[*i], s being n bytes, into *cp and
 * moves *i past it. Strict: overlong forms, surrogates, values past
 * U+10FFFF and cut sequences are -1. ASCII, most text, is inlined.
 */
static inline int
utf8_next(const uint8_t *s, size_t n, size_t *i, uint32_t *cp)
{
	if (s[*i] < 0x80) {
		*cp = s[(*i)++];
		return 0;
	}
	return utf8_next_multi(s, n, i, cp);
}

/* Appends cp as UTF-8 at out[*o]; -1 (ENOSPC) if it does not fit. */
static int
utf8_put(uint32_t cp, uint8_t *out, size_t outsz, size_t *o)
{
	size_t len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
	uint8_t *p = out + *o;

	if (outsz - *o < len) {
		errno = ENOSPC;
		return -1;
	}
	switch (len) {
	case 1:
		p[0] = (uint8_t)cp;
		break;
	case 2:
		p[0] = (uint8_t)(0xC0 | cp >> 6);
		p[1] = (uint8_t)(0x80 | (cp & 0x3F));
		break;
	case 3:
		p[0] = (uint8_t)(0xE0 | cp >> 12);
		p[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
		p[2] = (uint8_t)(0x80 | (cp & 0x3F));
		break;
	default:
		p[0] = (uint8_t)(0xF0 | cp >> 18);
		p[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
		p[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
		p[3] = (uint8_t)(0x80 | (cp & 0x3F));
		break;
	}
	*o += len;
	return 0;
}

static ssize_t
gsm_decode(const uint8_t *in, size_t n, uint8_t *out, size_t outsz)
{
	size_t o = 0;
	uint32_t cp;

	for (size_t i = 0; i < n; i++) {
		if (in[i] > 0x7F)
			return fail(EILSEQ);
		if (in[i] != TEXT_GSM_ESC)
			cp = gsm_default[in[i]];
		else if (i + 1 == n || in[i + 1] > 0x7F)
			return fail(EILSEQ);
		else
			cp = gsm_ext_cp(in[++i]);
		if (utf8_put(cp, out, outsz, &o) < 0)
			return -1;
	}
	return (ssize_t)o;
}

/* IA5 (max 0x7F) and Latin-1 (max 0xFF): the octet is the code point. */
static ssize_t
octet_decode(const uint8_t *in, size_t n, uint8_t max, uint8_t *out,
    size_t outsz)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (in[i] > max)
			return fail(EILSEQ);
		if (utf8_put(in[i], out, outsz, &o) < 0)
			return -1;
	}
	return (ssize_t)o;
}

static ssize_t
ucs2_decode(const uint8_t *in, size_t n, uint8_t *out, size_t outsz)
{
	size_t o = 0;
	uint32_t u, lo;

	if (n % 2 != 0)
		return fail(EILSEQ);
	for (size_t i = 0; i < n; i += 2) {
		u = (uint32_t)in[i] << 8 | in[i + 1];
		if (u >= 0xDC00 && u <= 0xDFFF)
			return fail(EILSEQ);
		if (u >= 0xD800 && u <= 0xDBFF) {
			if (n - i < 4)
				return fail(EILSEQ);
			lo = (uint32_t)in[i + 2] << 8 | in[i + 3];
			if (lo < 0xDC00 || lo > 0xDFFF)
				return fail(EILSEQ);
			u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
			i += 2;
		}
		if (utf8_put(u, out, outsz, &o) < 0)
			return -1;
	}
	return (ssize_t)o;
}

ssize_t
text_decode(enum text_coding coding, const uint8_t *in, size_t n, char *out,
    size_t outsz)
{
	uint8_t *o = (uint8_t *)out;

	switch (coding) {
	case TEXT_GSM:
		return gsm_decode(in, n, o, outsz);
	case TEXT_IA5:
		return octet_decode(in, n, 0x7F, o, outsz);
	case TEXT_LATIN1:
		return octet_decode(in, n, 0xFF, o, outsz);
	case TEXT_UCS2:
		return ucs2_decode(in, n, o, outsz);
	}
	return fail(ENOTSUP);
}

/*
 * The units cp takes in coding (septets, octets or UTF-16 units), -1 if
 * the alphabet lacks it; *code is its GSM code (gsm_from_cp), so that
 * char_put does not look it up again.
 */
static inline int
char_units(enum text_coding coding, uint32_t cp, int *code)
{
	switch (coding) {
	case TEXT_GSM:
		*code = gsm_from_cp(cp);
		return *code < 0 ? -1 : (*code & GSM_EXT) ? 2 : 1;
	case TEXT_IA5:
		return cp < 0x80 ? 1 : -1;
	case TEXT_LATIN1:
		return cp <= 0xFF ? 1 : -1;
	case TEXT_UCS2:
		return cp > 0xFFFF ? 2 : 1;
	}
	return -1;
}

/* Octets per unit of char_units. */
static size_t
unit_octets(enum text_coding coding)
{
	return coding == TEXT_UCS2 ? 2 : 1;
}

/*
 * Writes cp, units long and of GSM code code by char_units, in coding at
 * out[*o].
 */
static inline int
char_put(enum text_coding coding, uint32_t cp, int code, int units,
    uint8_t *out, size_t outsz, size_t *o)
{
	size_t len = (size_t)units * unit_octets(coding);
	uint8_t *p = out + *o;

	if (outsz - *o < len) {
		errno = ENOSPC;
		return -1;
	}
	if (coding == TEXT_GSM) {
		if (code & GSM_EXT)
			*p++ = TEXT_GSM_ESC;
		*p = (uint8_t)(code & 0x7F);
	} else if (coding != TEXT_UCS2) {
		*p = (uint8_t)cp;
	} else if (units == 1) {
		p[0] = (uint8_t)(cp >> 8), p[1] = (uint8_t)cp;
	} else {
		cp -= 0x10000;
		p[0] = (uint8_t)(0xD8 | cp >> 18), p[1] = (uint8_t)(cp >> 10);
		p[2] = (uint8_t)(0xDC | (cp >> 8 & 0x03)), p[3] = (uint8_t)cp;
	}
	*o += len;
	return 0;
}

static bool
coding_known(int coding)
{
	return coding == TEXT_GSM || coding == TEXT_IA5 ||
	    coding == TEXT_LATIN1 || coding == TEXT_UCS2;
}

/*
 * Writes the ASCII at the start of s (n bytes) that is one unit in coding
 * (in GSM, one septet: no escape) to out, room octets; stops before
 * anything else and where out is full. Returns the bytes of s taken, *w
 * the octets written. Its own index, in a register: most text is ASCII.
 */
/*
 * GSM 03.38 gives most of ASCII its own code: 0x20 to 0x7A but for $ @
 * [ \ ] ^ _ and the grave accent (and LF and CR, left to the steps
 * below). Whether all sixteen characters at p are such, checked at once
 * (x16, util.h): such a run is copied as it is.
 */
static bool
gsm_same16(const uint8_t *p)
{
	x16 x = x16_load(p);

	return x16_all(x16_in(x, 0x20, 0x7A) & ~(x16_in(x, 0x5B, 0x60) |
	    (x == 0x24) | (x == 0x40)));
}

static size_t
ascii_put(enum text_coding coding, const uint8_t *s, size_t n, uint8_t *out,
    size_t room, size_t *w)
{
	size_t i = 0, m;

	if (coding == TEXT_UCS2) {
		for (m = n < room / 2 ? n : room / 2; i < m && s[i] < 0x80; i++)
			out[2 * i] = 0, out[2 * i + 1] = s[i];
		*w = 2 * i;
		return i;
	}
	m = n < room ? n : room;
	if (coding == TEXT_GSM) {
		for (; m - i >= 16 && gsm_same16(s + i); i += 16)
			memcpy(out + i, s + i, 16);
		/*
		 * Eight at a time while all eight are ASCII with a code of
		 * the default table (an escape, a character GSM lacks: the
		 * loop below stops there): a third of the instructions.
		 */
		for (; m - i >= 8; i += 8) {
			const uint8_t *p = s + i;
			uint64_t x;
			unsigned g0, g1, g2, g3, g4, g5, g6, g7;

			memcpy(&x, p, 8);
			if (x & 0x8080808080808080ull)
				break;
			g0 = (uint16_t)gsm_ascii[p[0]];
			g1 = (uint16_t)gsm_ascii[p[1]];
			g2 = (uint16_t)gsm_ascii[p[2]];
			g3 = (uint16_t)gsm_ascii[p[3]];
			g4 = (uint16_t)gsm_ascii[p[4]];
			g5 = (uint16_t)gsm_ascii[p[5]];
			g6 = (uint16_t)gsm_ascii[p[6]];
			g7 = (uint16_t)gsm_ascii[p[7]];
			if ((g0 | g1 | g2 | g3 | g4 | g5 | g6 | g7) >= 0x80)
				break;
			out[i] = (uint8_t)g0;
			out[i + 1] = (uint8_t)g1;
			out[i + 2] = (uint8_t)g2;
			out[i + 3] = (uint8_t)g3;
			out[i + 4] = (uint8_t)g4;
			out[i + 5] = (uint8_t)g5;
			out[i + 6] = (uint8_t)g6;
			out[i + 7] = (uint8_t)g7;
		}
		for (unsigned g; i < m && s[i] < 0x80 &&
		    (g = (unsigned)gsm_ascii[s[i]]) < 0x80; i++)
			out[i] = (uint8_t)g;
	} else {
		for (; i < m && s[i] < 0x80; i++)
			out[i] = s[i];
	}
	*w = i;
	return i;
}

ssize_t
text_encode(enum text_coding coding, const char *in, size_t n, uint8_t *out,
    size_t outsz)
{
	const uint8_t *s = (const uint8_t *)in;
	size_t i = 0, o = 0, w;
	uint32_t cp;
	int u, code = 0;

	if (!coding_known((int)coding))
		return fail(ENOTSUP);
	while (i < n) {
		i += ascii_put(coding, s + i, n - i, out + o, outsz - o, &w);
		o += w;
		if (i == n)
			break;
		/* Beyond ASCII, an escape pair, no such character or no room. */
		if (utf8_next(s, n, &i, &cp) < 0)
			return fail(EILSEQ);
		if ((u = char_units(coding, cp, &code)) < 0)
			return fail(ERANGE);
		if (char_put(coding, cp, code, u, out, outsz, &o) < 0)
			return -1;
	}
	return (ssize_t)o;
}

/* The units n bytes of UTF-8 take in coding; -1 EILSEQ or ERANGE. */
static ssize_t
units_of(enum text_coding coding, const char *in, size_t n)
{
	const uint8_t *s = (const uint8_t *)in;
	size_t i = 0, total = 0;
	uint32_t cp;
	int u, code;

	while (i < n) {
		if (utf8_next(s, n, &i, &cp) < 0)
			return fail(EILSEQ);
		if ((u = char_units(coding, cp, &code)) < 0)
			return fail(ERANGE);
		total += (size_t)u;
	}
	return (ssize_t)total;
}

ssize_t
text_gsm_septets(const char *in, size_t n)
{
	return units_of(TEXT_GSM, in, n);
}

ssize_t
text_ucs2_units(const char *in, size_t n)
{
	return units_of(TEXT_UCS2, in, n);
}

int
text_coding_of(uint8_t data_coding, enum text_coding dc0)
{
	switch (data_coding) {
	case 0:
		return (int)dc0;
	case TEXT_IA5:
	case TEXT_LATIN1:
	case TEXT_UCS2:
		return data_coding;
	default:
		return fail(ENOTSUP);
	}
}

int
text_pick(const char *in, size_t n, int want)
{
	enum text_coding first;

	if (want == TEXT_CODING_AUTO)
		first = TEXT_GSM;
	else if (want == TEXT_LATIN1 || want == TEXT_UCS2)
		first = (enum text_coding)want;
	else
		return fail(EINVAL);
	if (units_of(first, in, n) >= 0)
		return (int)first;
	if (errno != ERANGE)
		return -1;	/* EILSEQ: no coding carries it */
	return TEXT_UCS2;
}

/* Units in one SMS (single) and in one part after the 6-octet UDH. */
static unsigned
limit_single(enum text_coding coding)
{
	return coding == TEXT_UCS2 ? 70 : coding == TEXT_LATIN1 ? 140 : GSM_SMS;
}

static unsigned
limit_part(enum text_coding coding)
{
	return coding == TEXT_UCS2 ? 67 : coding == TEXT_LATIN1 ? 134 : 153;
}

static int
split_check(const struct text_split_opts *o)
{
	if (o->max_parts < 1 || o->max_parts > TEXT_PARTS_MAX ||
	    (o->coding != TEXT_CODING_AUTO && !coding_known(o->coding)) ||
	    (o->how != TEXT_LONG_UDH && o->how != TEXT_LONG_SAR &&
	    o->how != TEXT_LONG_PAYLOAD))
		return (int)fail(EINVAL);
	return 0;
}

/*
 * For TEXT_CODING_AUTO: the units the text takes in GSM if every
 * character is in it, else in UCS-2, in one pass (*coding says which).
 * -1 EILSEQ.
 */
static ssize_t
auto_units(const char *in, size_t n, enum text_coding *coding)
{
	const uint8_t *s = (const uint8_t *)in;
	size_t i = 0, gsm = 0, ucs2 = 0;
	bool in_gsm = true;
	uint32_t cp;
	int code;

	while (i < n) {
		/* A run of ASCII: a UCS-2 unit each; in GSM, by the table. */
		size_t k = i;

		for (; k < n && s[k] < 0x80; k++) {
			int g = gsm_ascii[s[k]];

			in_gsm &= g >= 0;
			gsm += (g & GSM_EXT) ? 2 : 1;
		}
		ucs2 += k - i;
		if ((i = k) == n)
			break;
		if (utf8_next(s, n, &i, &cp) < 0)
			return fail(EILSEQ);
		ucs2 += cp > 0xFFFF ? 2 : 1;
		if (in_gsm && (code = gsm_from_cp(cp)) >= 0)
			gsm += (code & GSM_EXT) ? 2 : 1;
		else
			in_gsm = false;
	}
	*coding = in_gsm ? TEXT_GSM : TEXT_UCS2;
	return (ssize_t)(in_gsm ? gsm : ucs2);
}

/*
 * The coding of opts, or, when it leaves the choice, GSM if it can; and
 * the units the text takes in it. -1 EILSEQ or ERANGE.
 */
static ssize_t
split_coding(const char *in, size_t n, const struct text_split_opts *o,
    enum text_coding *coding)
{
	if (o->coding != TEXT_CODING_AUTO) {
		*coding = (enum text_coding)o->coding;
		return units_of(*coding, in, n);
	}
	return auto_units(in, n, coding);
}

/*
 * Starts part s->nparts at out[*o], behind a UDH when s->udhi; with out
 * NULL, only counts.
 */
static int
part_open(struct text_split *s, unsigned max, uint8_t *out, size_t outsz,
    size_t *o)
{
	if (s->nparts == max)
		return (int)fail(EMSGSIZE);
	s->part[s->nparts].off = (uint32_t)*o;
	if (s->udhi) {
		/* The total is known at the end: split_write fills it in. */
		const uint8_t udh[6] = { 0x05, 0x00, 0x03, (uint8_t)s->ref,
		    0, (uint8_t)(s->nparts + 1) };

		if (out != NULL && outsz - *o < sizeof(udh))
			return (int)fail(ENOSPC);
		if (out != NULL)
			memcpy(out + *o, udh, sizeof(udh));
		*o += sizeof(udh);
	}
	s->nparts++;
	return 0;
}

/*
 * Cuts the (valid) text into parts of as many whole characters as fit,
 * so that an escape pair or a surrogate pair is never cut, and encodes
 * them in the same pass (with out NULL, only counts the parts). -1
 * EMSGSIZE over max parts, ENOSPC.
 */
static int
split_write(const char *in, size_t n, unsigned max, uint8_t *out,
    size_t outsz, struct text_split *s)
{
	const uint8_t *p = (const uint8_t *)in;
	const enum text_coding c = s->coding;
	const unsigned limit = limit_part(c);
	const size_t uo = unit_octets(c);
	unsigned used = limit;
	size_t i = 0, o = 0;
	uint32_t cp;
	int u, code = 0;

	s->nparts = 0;
	while (i < n) {
		/* UCS-2 of ASCII, most of such texts, written at once. */
		if (c == TEXT_UCS2 && p[i] < 0x80 && used < limit &&
		    out != NULL && outsz - o >= 2) {
			out[o] = 0, out[o + 1] = p[i];
			o += 2, i++, used++;
			continue;
		}
		(void)utf8_next(p, n, &i, &cp);
		u = char_units(c, cp, &code);
		if (used + (unsigned)u > limit) {
			if (s->nparts > 0)
				s->part[s->nparts - 1].len = (uint32_t)(o -
				    s->part[s->nparts - 1].off);
			if (part_open(s, max, out, outsz, &o) < 0)
				return -1;
			used = 0;
		}
		if (out == NULL)
			o += (size_t)u * uo;
		else if (char_put(c, cp, code, u, out, outsz, &o) < 0)
			return -1;
		used += (unsigned)u;
	}
	s->part[s->nparts - 1].len = (uint32_t)(o - s->part[s->nparts - 1].off);
	for (unsigned k = 0; out != NULL && s->udhi && k < s->nparts; k++)
		out[s->part[k].off + 4] = (uint8_t)s->nparts;
	return 0;
}

/*
 * Whether a text of units units, cut into parts, may need more than max
 * parts or more than outsz octets: a part holds limit units, or one less
 * when a two-unit character (an escape or surrogate pair) would not fit.
 * Over the bound for sure: -1 (nothing written); maybe: counted first.
 */
static int
split_fits(ssize_t units, unsigned max, size_t outsz, struct text_split *s,
    const char *in, size_t n)
{
	unsigned limit = limit_part(s->coding);
	size_t least = ((size_t)units + limit - 1) / limit,
	    most = ((size_t)units + limit - 2) / (limit - 1),
	    udh = s->udhi ? 6 : 0;

	if (least > max)
		return (int)fail(EMSGSIZE);
	if (most > max && split_write(in, n, max, NULL, 0, s) < 0)
		return -1;
	if ((size_t)units * unit_octets(s->coding) + udh * least > outsz)
		return (int)fail(ENOSPC);
	return 0;
}

int
text_split(const char *in, size_t n, const struct text_split_opts *o,
    uint8_t *out, size_t outsz, struct text_split *s)
{
	ssize_t units, len;
	size_t octets;

	if (split_check(o) < 0)
		return -1;
	s->ref = o->ref;
	s->udhi = false;
	s->payload = false;
	s->nparts = 1;
	s->part[0].off = 0;
	/*
	 * Most texts are one SMS of GSM: encoded in one pass (in GSM an
	 * octet is a septet, escapes included), then copied out. Anything
	 * else (not GSM, longer, not UTF-8, no room) is counted first, below.
	 */
	if (o->coding == TEXT_CODING_AUTO && n <= 2 * GSM_SMS) {
		uint8_t one[GSM_SMS];

		if ((len = text_encode(TEXT_GSM, in, n, one,
		    outsz < sizeof(one) ? outsz : sizeof(one))) >= 0) {
			memcpy(out, one, (size_t)len);
			s->coding = TEXT_GSM;
			s->part[0].len = (uint32_t)len;
			return 1;
		}
	}
	if ((units = split_coding(in, n, o, &s->coding)) < 0)
		return -1;
	octets = (size_t)units * unit_octets(s->coding);
	if ((size_t)units <= limit_single(s->coding) ||
	    o->how == TEXT_LONG_PAYLOAD) {
		if (octets > 65535)
			return (int)fail(EMSGSIZE);
		s->payload = (size_t)units > limit_single(s->coding);
		if (octets > outsz)
			return (int)fail(ENOSPC);
		/* Checked by split_coding and sized: it cannot fail. */
		len = text_encode(s->coding, in, n, out, outsz);
		s->part[0].len = (uint32_t)len;
		return 1;
	}
	s->udhi = o->how == TEXT_LONG_UDH;
	if (split_fits(units, o->max_parts, outsz, s, in, n) < 0 ||
	    split_write(in, n, o->max_parts, out, outsz, s) < 0)
		return -1;
	return (int)s->nparts;
}

/* ---- what a line may carry ---------------------------------------------- */

/*
 * The bytes of one UTF-8 character at p (n > 0 bytes there), or 0 if it
 * is not well-formed (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF) or is a control character: C0 but TAB, DEL, or C1
 * (U+0080-U+009F, whose encodings C2 80-C2 9F a line client may take for
 * a line break or a terminal command).
 */
static size_t
text_char(const uint8_t *p, size_t n)
{
	uint8_t b = p[0];
	size_t len;
	uint32_t cp;

	if (b < 0x80)
		return (b < 0x20 && b != '\t') || b == 0x7f ? 0 : 1;
	if (b >= 0xc2 && b <= 0xdf)
		len = 2, cp = b & 0x1f;
	else if (b >= 0xe0 && b <= 0xef)
		len = 3, cp = b & 0x0f;
	else if (b >= 0xf0 && b <= 0xf4)
		len = 4, cp = b & 0x07;
	else
		return 0;	/* a continuation byte, C0, C1, F5-FF */
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || cp <= 0x9f)
		return 0;
	return len;
}

bool
text_line_valid(const uint8_t *t, size_t n)
{
	const uint64_t ones = 0x0101010101010101ull, highs = ones * 0x80;
	size_t i = 0, k;

	/* Sixteen at a time while all are printable ASCII. */
	while (n - i >= 16 && u8x16_within(t + i, 0x20, 0x7E))
		i += 16;
	while (i < n) {
		uint64_t x;

		/*
		 * Eight bytes at a time while all are printable ASCII, 0x20
		 * to 0x7E (most text is): a byte below 0x20 or from 0x7F up
		 * sets a high bit here, and that word is done a character at
		 * a time. (Carries only ever add false alarms.)
		 */
		if (n - i >= 8) {
			memcpy(&x, t + i, 8);
			if ((((x - ones * 0x20) & ~x) | ((x + ones) | x)) &
			    highs) {
				if ((k = text_char(t + i, n - i)) == 0)
					return false;
				i += k;
			} else {
				i += 8;
			}
		} else if ((k = text_char(t + i, n - i)) == 0) {
			return false;
		} else {
			i += k;
		}
	}
	return true;
}
