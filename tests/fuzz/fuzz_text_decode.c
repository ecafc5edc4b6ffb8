/* fuzz_text_decode.c: any octets as UTF-8 and in any data_coding: decoded, encoded back alike, split and joined back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IN_MAX	8192

static bool
known(int coding)
{
	return coding == TEXT_GSM || coding == TEXT_IA5 ||
	    coding == TEXT_LATIN1 || coding == TEXT_UCS2;
}

/* The parts of s, decoded and put together, must be the text t[0..n). */
static void
check_parts(const struct text_split *s, const uint8_t *out, const char *t,
    size_t n)
{
	static char joined[TEXT_UTF8_MAX(TEXT_SPLIT_MAX(IN_MAX * 3, 255))];
	size_t o = 0, skip = s->udhi ? 6 : 0;
	ssize_t len;

	for (unsigned k = 0; k < s->nparts; k++) {
		if (s->part[k].len < skip)
			abort();
		len = text_decode(s->coding, out + s->part[k].off + skip,
		    s->part[k].len - skip, joined + o, sizeof(joined) - o);
		if (len < 0)
			abort();
		o += (size_t)len;
	}
	if (o != n || memcmp(joined, t, n) != 0)
		abort();
}

/*
 * Splits t the way the first octet asks. Decoded text must split; raw
 * input may be refused as invalid UTF-8, but what is taken must come
 * back byte for byte (an overlong form or an encoded surrogate would
 * not).
 */
static void
split(uint8_t how, const char *t, size_t n, bool raw)
{
	static uint8_t out[TEXT_SPLIT_MAX(IN_MAX * 3, 255)];
	static struct text_split s;
	const struct text_split_opts o = { .coding = TEXT_CODING_AUTO,
	    .how = (enum text_long)(how % 3), .max_parts = TEXT_PARTS_MAX,
	    .ref = how };

	if (text_split(t, n, &o, out, sizeof(out), &s) < 0) {
		if (errno != EMSGSIZE && !(raw && errno == EILSEQ))
			abort();
		return;
	}
	check_parts(&s, out, t, n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char utf8[TEXT_UTF8_MAX(IN_MAX)], again[TEXT_UTF8_MAX(IN_MAX)];
	static uint8_t enc[TEXT_ENC_MAX(TEXT_UTF8_MAX(IN_MAX))];
	const uint8_t *in = data + 1;
	ssize_t len, elen, len2;
	size_t n = size - 1;
	int coding;

	if (size < 1 || n > IN_MAX)
		return 0;
	split(data[0] >> 4, (const char *)in, n, true);
	coding = data[0] & 0x0F;
	len = text_decode((enum text_coding)coding, in, n, utf8,
	    TEXT_UTF8_MAX(n));
	if (len < 0) {
		/* TEXT_UTF8_MAX is enough, and every known coding decodes. */
		if (errno == ENOSPC || (known(coding) && errno != EILSEQ))
			abort();
		return 0;
	}
	elen = text_encode((enum text_coding)coding, utf8, (size_t)len, enc,
	    sizeof(enc));
	if (elen < 0)
		abort();
	/* Only GSM normalises (an undefined escape, a double escape). */
	if (coding != TEXT_GSM &&
	    ((size_t)elen != n || memcmp(enc, in, n) != 0))
		abort();
	len2 = text_decode((enum text_coding)coding, enc, (size_t)elen, again,
	    sizeof(again));
	if (len2 != len || memcmp(again, utf8, (size_t)len) != 0)
		abort();
	split(data[0] >> 4, utf8, (size_t)len, false);
	return 0;
}
