/* smpp_receipt.c: SMPP delivery receipts: their text and fields (deliver_receipt sends them). */
#include "smpp_receipt.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "msg.h"
#include "util.h"

/* t as "YYMMDDhhmm" in UTC into out; "" where it has no such date. */
static void
date_text(uint64_t t, char out[11])
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(out, 11, "%y%m%d%H%M", &tm) == 0)
		out[0] = '\0';
}

void
smpp_receipt_date(uint64_t t, char *buf, size_t len)
{
	/* Receipts come by the thousand a second, all in the same minute. */
	static _Thread_local uint64_t last_min = UINT64_MAX;
	static _Thread_local char last[11];
	char once[11];

	/*
	 * Past INT64_MAX, t is a time_t before 1970 (a corrupt row, a peer's
	 * bad value): its minutes do not begin at multiples of 60 of t.
	 */
	if (t > INT64_MAX) {
		date_text(t, once);
		str_copy(buf, len, once);
		return;
	}
	if (t / 60 != last_min) {
		date_text(t, last);
		last_min = t / 60;
	}
	str_copy(buf, len, last);
}

/* Appends s (n bytes) to out at *at, as much as fits before cap - 1. */
static void
put(char *out, size_t cap, size_t *at, const char *s, size_t n)
{
	if (n > cap - 1 - *at)
		n = cap - 1 - *at;
	memcpy(out + *at, s, n);
	*at += n;
}

#define PUT(lit) put(out, cap, &at, lit, sizeof(lit) - 1)
#define PUTS(s) put(out, cap, &at, s, strlen(s))

size_t
smpp_receipt_write(char *out, size_t cap, const struct smpp_receipt_parts *p)
{
	size_t at = 0;

	PUT("id:");
	PUTS(p->id);
	PUT(" sub:");
	PUTS(p->sub);
	PUT(" dlvrd:");
	PUTS(p->dlvrd);
	PUT(" submit date:");
	PUTS(p->submit_date);
	PUT(" done date:");
	PUTS(p->done_date);
	PUT(" stat:");
	PUTS(p->stat);
	PUT(" err:");
	PUTS(p->err);
	PUT(" text:");
	put(out, cap, &at, p->text, p->tl);
	out[at] = '\0';
	return at;
}

#undef PUT
#undef PUTS

static const char *const stats[] = {
	[SMPP_STATE_ENROUTE] = "ENROUTE",
	[SMPP_STATE_DELIVERED] = "DELIVRD",
	[SMPP_STATE_EXPIRED] = "EXPIRED",
	[SMPP_STATE_DELETED] = "DELETED",
	[SMPP_STATE_UNDELIVERABLE] = "UNDELIV",
	[SMPP_STATE_ACCEPTED] = "ACCEPTD",
	[SMPP_STATE_UNKNOWN] = "UNKNOWN",
	[SMPP_STATE_REJECTED] = "REJECTD",
};

static const char *
state_stat(uint8_t state)
{
	switch (state) {
	case SMPP_STATE_DELIVERED:
		return "DELIVRD";
	case SMPP_STATE_EXPIRED:
		return "EXPIRED";
	case SMPP_STATE_DELETED:
		return "DELETED";
	default:
		return "UNDELIV";
	}
}

const char *
smpp_receipt_stat(uint8_t state)
{
	if (state < sizeof(stats) / sizeof(stats[0]) && stats[state] != NULL)
		return stats[state];
	return "UNKNOWN";
}

uint8_t
smpp_receipt_state(const char *stat)
{
	for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++)
		if (stats[i] != NULL && strcasecmp(stat, stats[i]) == 0)
			return (uint8_t)i;
	/* Some centres spell them out. */
	if (strcasecmp(stat, "DELIVERED") == 0)
		return SMPP_STATE_DELIVERED;
	if (strcasecmp(stat, "UNDELIVERABLE") == 0)
		return SMPP_STATE_UNDELIVERABLE;
	return 0;
}

bool
smpp_receipt_final(uint8_t state)
{
	return state != SMPP_STATE_ENROUTE && state != SMPP_STATE_ACCEPTED &&
	    state != SMPP_STATE_UNKNOWN && state != 0;
}

/*
 * The value at t[i..n) into out (cap bytes): up to the next space or NUL,
 * or, rest, to the end or a NUL, cut to fit; a value that is not the rest
 * and does not fit leaves out alone. Returns where the value stopped.
 */
static size_t
value_get(const uint8_t *t, size_t n, size_t i, bool rest, char *out,
    size_t cap)
{
	/* The rest is cut to fit: no need to look past that. */
	size_t end = rest && n - i > cap - 1 ? i + cap - 1 : n, v = i;

	/* A byte loop: values are a few characters, shorter than what a
	 * call to memchr costs, twice. */
	if (rest) {
		while (v < end && t[v] != '\0')
			v++;
	} else {
		while (v < end && t[v] != ' ' && t[v] != '\0')
			v++;
	}
	if (v - i >= cap)
		return v;
	memcpy(out, t + i, v - i);
	out[v - i] = '\0';
	return v;
}

/* The labels of a receipt's fields, and where each value goes. */
enum { F_ID, F_SUB, F_DLVRD, F_SUBMIT, F_DONE, F_STAT, F_ERR, F_TEXT, F_N };

static const struct {
	const char	*label;
	size_t		 len;
	size_t		 off, cap;
} fields[F_N] = {
#define FIELD(k, l, m) [k] = { l, sizeof(l) - 1, \
	offsetof(struct smpp_receipt_text, m), \
	sizeof(((struct smpp_receipt_text *)0)->m) }
	FIELD(F_ID, "id:", id),
	FIELD(F_SUB, "sub:", sub),
	FIELD(F_DLVRD, "dlvrd:", dlvrd),
	FIELD(F_SUBMIT, "submit date:", submit_date),
	FIELD(F_DONE, "done date:", done_date),
	FIELD(F_STAT, "stat:", stat),
	FIELD(F_ERR, "err:", err),
	FIELD(F_TEXT, "text:", text),
#undef FIELD
};

/* Whether w (n bytes) starts with label (small letters), in any case. */
static bool
label_is(const uint8_t *w, size_t n, const char *label, size_t len)
{
	if (n < len)
		return false;
	if (memcmp(w, label, len) == 0)
		return true;	/* most centres write them so */
	for (size_t j = 0; j < len; j++) {
		uint8_t c = w[j] >= 'A' && w[j] <= 'Z' ? w[j] + 32 : w[j];

		if (c != (uint8_t)label[j])
			return false;
	}
	return true;
}

/*
 * The field whose label starts w (n bytes), -1 if none: told apart by a
 * letter or two, then compared whole. Two per receipt, for every receipt
 * a centre sends: not a search of the eight.
 */
static int
label_at(const uint8_t *w, size_t n)
{
	int k;

	if (n < 3)
		return -1;
	switch (w[0] | 0x20) {
	case 'i':
		k = F_ID;
		break;
	case 's':
		k = (w[1] | 0x20) == 't' ? F_STAT :
		    n > 3 && (w[3] | 0x20) == 'm' ? F_SUBMIT : F_SUB;
		break;
	case 'd':
		k = (w[1] | 0x20) == 'l' ? F_DLVRD : F_DONE;
		break;
	case 'e':
		k = F_ERR;
		break;
	case 't':
		k = F_TEXT;
		break;
	default:
		return -1;
	}
	return label_is(w, n, fields[k].label, fields[k].len) ? k : -1;
}

/*
 * One pass over the words of t[0..n): a label (in any case) at a word's
 * start gives its field the value after it, the first time only. A value
 * that does not fit leaves its field "" (text is cut instead). Stops once
 * each field in want (bits of the F_ values) has its value.
 */
static void
parse_fields(const uint8_t *t, size_t n, struct smpp_receipt_text *f,
    unsigned want)
{
	unsigned seen = 0;
	size_t i = 0;
	const uint8_t *sp;
	int k;

	memset(f, 0, sizeof(*f));
	while (i < n) {
		if ((k = label_at(t + i, n - i)) >= 0 && !(seen & (1u << k))) {
			size_t v;

			seen |= 1u << k;
			if ((seen & want) == want)
				want = 0;	/* this value, then stop */
			v = value_get(t, n, i + fields[k].len, k == F_TEXT,
			    (char *)f + fields[k].off, fields[k].cap);
			if (want == 0)
				break;
			/* No word starts inside a value but the text. */
			if (k != F_TEXT)
				i = v;
		}
		/* The next word starts after the next space: most often the
		 * one a value stopped at. */
		if (i < n && t[i] == ' ') {
			i++;
			continue;
		}
		if ((sp = memchr(t + i, ' ', n - i)) == NULL)
			break;
		i = (size_t)(sp - t) + 1;
	}
}

int
smpp_receipt_parse(const uint8_t *t, size_t n, struct smpp_receipt_text *f)
{
	parse_fields(t, n, f, (1u << F_N) - 1);
	return f->id[0] == '\0' ? -1 : 0;
}

void
smpp_receipt_outcome(const uint8_t *t, size_t n, struct smpp_receipt_text *f)
{
	parse_fields(t, n, f, 1u << F_STAT | 1u << F_ERR | 1u << F_DONE);
}

struct msg *
smpp_receipt_make(const struct msg *orig, uint8_t state, uint64_t id,
    uint64_t done_at)
{
	char sub[16], done[16], text[200], oid[24];
	bool ok = state == SMPP_STATE_DELIVERED;
	size_t tl;
	/* A part's UDH is not text to quote; a receipt's text is not either. */
	const uint8_t *t = msg_text_after_udh(orig, &tl);
	size_t n;

	if (!(orig->registered_delivery & 0x01) || orig->reply_to[0] == '\0')
		return NULL;
	if (orig->flags & MSG_F_RECEIPT)
		tl = 0;
	smpp_receipt_date(orig->submitted, sub, sizeof(sub));
	smpp_receipt_date(done_at, done, sizeof(done));
	oid[u64_to_dec(oid, orig->id)] = '\0';
	n = smpp_receipt_write(text, sizeof(text), &(struct smpp_receipt_parts){
	    .id = oid, .sub = "001", .dlvrd = ok ? "001" : "000",
	    .submit_date = sub, .done_date = done, .stat = state_stat(state),
	    .err = ok ? "000" : "001", .text = (const char *)t,
	    .tl = strnlen((const char *)t, tl < 20 ? tl : 20) });
	return smpp_receipt_msg(text, n, id, done_at, state,
	    &(struct smpp_receipt_ends){ .id = oid, .to = orig->to,
	    .reply_to = orig->reply_to, .src_addr = orig->src_addr,
	    .dst_addr = orig->dst_addr, .src_ton = orig->src_ton,
	    .src_npi = orig->src_npi, .dst_ton = orig->dst_ton,
	    .dst_npi = orig->dst_npi });
}

struct msg *
smpp_receipt_msg(const char *text, size_t n, uint64_t id, uint64_t at,
    uint8_t state, const struct smpp_receipt_ends *e)
{
	struct msg *m = msg_new(n);

	memcpy(m->text, text, n);
	m->len = n;
	m->id = id;
	m->submitted = at;
	m->flags = MSG_F_EXACT | MSG_F_RECEIPT;
	m->esm_class = SMPP_ESM_RECEIPT;
	m->message_state = state;
	str_copy(m->receipted_id, sizeof(m->receipted_id), e->id);
	/* The receipt travels back: from the recipient to the submitter. */
	str_copy(m->from, sizeof(m->from), e->to);
	str_copy(m->to, sizeof(m->to), e->reply_to);
	memcpy(m->src_addr, e->dst_addr, sizeof(m->src_addr));
	memcpy(m->dst_addr, e->src_addr, sizeof(m->dst_addr));
	m->src_ton = e->dst_ton;
	m->src_npi = e->dst_npi;
	m->dst_ton = e->src_ton;
	m->dst_npi = e->src_npi;
	return m;
}
