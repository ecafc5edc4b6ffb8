/* text.h: UTF-8 <-> SMPP alphabets (GSM 03.38, IA5, Latin-1, UCS-2) and the long-message splitter. */
#ifndef ECHOROUTERD_TEXT_H
#define ECHOROUTERD_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Pure code, no I/O, no allocation, no global state: any thread. Every
 * function reads only in[0..n) and writes only out[0..outsz). Errors are
 * -1 with errno:
 *   EILSEQ   the input is not valid in its encoding: malformed or
 *            overlong UTF-8, a UTF-8 encoded surrogate, an unpaired
 *            UTF-16 surrogate, an odd UCS-2 length, an octet outside the
 *            alphabet, a GSM escape with nothing after it;
 *   ERANGE   valid text with a character the target alphabet lacks;
 *   ENOSPC   out is too small (what was written is then unspecified);
 *   ENOTSUP  a data_coding these functions do not convert (binary, ...);
 *   EMSGSIZE (the splitter) more parts than allowed, or a message_payload
 *            over 65535 octets.
 */

/* The SMPP data_coding values converted here (SMPP 3.4, 5.2.19). */
enum text_coding {
	TEXT_GSM = 0,		/* GSM 03.38, one septet per octet */
	TEXT_IA5 = 1,		/* IA5 / ASCII */
	TEXT_LATIN1 = 3,	/* ISO 8859-1 */
	TEXT_UCS2 = 8,		/* UCS-2, read and written as UTF-16BE */
};

/* The GSM 03.38 escape to the extension table; it counts as a septet. */
#define TEXT_GSM_ESC	0x1B

/*
 * Room that decoding n octets of any alphabet here to UTF-8 may need: an
 * octet or a pair of octets never becomes more than 3 UTF-8 bytes.
 */
#define TEXT_UTF8_MAX(n)	((size_t)(n) * 3)

/*
 * Room that encoding n bytes of UTF-8 may need in any alphabet here (one
 * ASCII byte can become a GSM escape pair or a UCS-2 unit).
 */
#define TEXT_ENC_MAX(n)		((size_t)(n) * 2)

/*
 * Decodes n octets in coding to UTF-8 at out. Returns the length written
 * (no NUL), or -1: EILSEQ, ENOSPC, ENOTSUP (coding not one of the above).
 * GSM: an escape followed by a code the extension table lacks gives the
 * default table's character, and two escapes a space, as 3GPP TS 23.038
 * tells a receiver to do.
 */
ssize_t	text_decode(enum text_coding coding, const uint8_t *in, size_t n,
	    char *out, size_t outsz);

/*
 * Encodes n bytes of UTF-8 at in to coding at out (GSM: unpacked
 * septets, extension characters as escape pairs; UCS-2: UTF-16BE with
 * surrogate pairs for characters beyond U+FFFF). Returns the octets
 * written, or -1: EILSEQ, ERANGE, ENOSPC, ENOTSUP.
 */
ssize_t	text_encode(enum text_coding coding, const char *in, size_t n,
	    uint8_t *out, size_t outsz);

/*
 * Whether n bytes at t are what a line of the router protocol may carry:
 * UTF-8 (RFC 3629) without control characters but TAB (no C0 but TAB,
 * no DEL, no C1). Anything else would forge or break lines, or reach a
 * terminal as a command.
 */
bool	text_line_valid(const uint8_t *t, size_t n);

/*
 * The septets n bytes of UTF-8 take in GSM 03.38, escapes counted; -1
 * with ERANGE when a character is in neither GSM table (then the text
 * needs UCS-2), EILSEQ when in is not valid UTF-8.
 */
ssize_t	text_gsm_septets(const char *in, size_t n);

/* The UTF-16 units n bytes of UTF-8 take; -1 with EILSEQ if invalid. */
ssize_t	text_ucs2_units(const char *in, size_t n);

/*
 * The coding that an SMPP data_coding names, reading data_coding 0 (the
 * SMSC default alphabet) as dc0, since gateways differ in what that is.
 * Returns a text_coding, or -1 with ENOTSUP: binary, or a coding not
 * converted here.
 */
int	text_coding_of(uint8_t data_coding, enum text_coding dc0);

/*
 * The coding to send n bytes of UTF-8 in, for a recipient that asks for
 * want: TEXT_CODING_AUTO gives GSM 03.38 when every character is in its
 * default or extension table, TEXT_LATIN1 gives Latin-1 when every
 * character is in it; either falls back to UCS-2, which carries any
 * text. TEXT_UCS2 gives UCS-2. Returns a text_coding, or -1: EILSEQ (in
 * is not UTF-8), EINVAL (another want).
 */
int	text_pick(const char *in, size_t n, int want);

/* How a message too long for one SMS goes out. */
enum text_long {
	TEXT_LONG_UDH = 0,	/* parts with UDH 05 00 03 ref total seq */
	TEXT_LONG_SAR,		/* parts with the sar_* TLVs, no UDH */
	TEXT_LONG_PAYLOAD,	/* one message_payload, not split */
};

/* UDH concatenation caps the count of parts at 255. */
#define TEXT_PARTS_MAX	255

/* text_split_opts.coding: let the splitter choose. */
#define TEXT_CODING_AUTO	(-1)

/* What the splitter is asked for. */
struct text_split_opts {
	int	coding;	/* TEXT_CODING_AUTO: GSM if every character
			   fits, else UCS-2; or a text_coding to force */
	enum text_long how;
	unsigned max_parts;	/* 1..TEXT_PARTS_MAX */
	uint16_t ref;		/* the reference (the UDH keeps its low 8
				   bits; SAR all 16) */
};

/* One part: its short_message is out[off..off+len), UDH included. */
struct text_part {
	uint32_t off;
	uint32_t len;
};

/* What the splitter made. */
struct text_split {
	enum text_coding coding; /* the data_coding to send */
	bool	udhi;		/* parts start with a UDH: set the
				   esm_class UDHI bit (0x40) */
	bool	payload;	/* one part, for message_payload */
	uint16_t ref;		/* for sar_msg_ref_num */
	unsigned nparts;	/* 1 when it fits one SMS */
	struct text_part part[TEXT_PARTS_MAX];
};

/*
 * Room the splitter's out may need for n bytes of UTF-8 and max_parts
 * parts: the encoded text and a 6-octet UDH per part.
 */
#define TEXT_SPLIT_MAX(n, max_parts) \
	(TEXT_ENC_MAX(n) + 6 * (size_t)(max_parts))

/*
 * Encodes n bytes of UTF-8 text for an SMPP recipient and splits it:
 * one part when it fits one SMS (160 septets, 70 UCS-2 units, 140
 * Latin-1 octets), else parts of 153 septets / 67 units / 134 octets,
 * never cutting an escape pair or a surrogate pair, numbered 1..nparts
 * in order. TEXT_LONG_PAYLOAD gives one part of any length instead.
 * Plans first, writes after: on any error nothing is written to out.
 * Returns nparts, or -1: EILSEQ, ERANGE (forced coding lacks a
 * character), EMSGSIZE (over o->max_parts, or a payload over 65535
 * octets), ENOSPC, EINVAL (bad options).
 */
int	text_split(const char *in, size_t n, const struct text_split_opts *o,
	    uint8_t *out, size_t outsz, struct text_split *s);

#endif
