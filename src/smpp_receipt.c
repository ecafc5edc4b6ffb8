/* smpp_receipt.c: SMPP delivery receipts: their text and fields (deliver_receipt sends them). */
#include "smpp_receipt.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "msg.h"

void
smpp_receipt_date(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%y%m%d%H%M", &tm);
}

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
 * The value after label in t[0..n) (at the start, or after a space),
 * into out (cap bytes): up to the next space, or, rest, to the end.
 * false when the label is absent or its value does not fit.
 */
static bool
field_get(const uint8_t *t, size_t n, const char *label, bool rest,
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

int
smpp_receipt_parse(const uint8_t *t, size_t n, struct smpp_receipt_text *f)
{
	memset(f, 0, sizeof(*f));
	field_get(t, n, "sub:", false, f->sub, sizeof(f->sub));
	field_get(t, n, "dlvrd:", false, f->dlvrd, sizeof(f->dlvrd));
	field_get(t, n, "submit date:", false, f->submit_date,
	    sizeof(f->submit_date));
	field_get(t, n, "done date:", false, f->done_date,
	    sizeof(f->done_date));
	field_get(t, n, "stat:", false, f->stat, sizeof(f->stat));
	field_get(t, n, "err:", false, f->err, sizeof(f->err));
	field_get(t, n, "text:", true, f->text, sizeof(f->text));
	if (!field_get(t, n, "id:", false, f->id, sizeof(f->id)) ||
	    f->id[0] == '\0')
		return -1;
	return 0;
}

struct msg *
smpp_receipt_make(const struct msg *orig, uint8_t state, uint64_t id,
    uint64_t done_at)
{
	char sub[16], done[16], text[200];
	bool ok = state == SMPP_STATE_DELIVERED;
	size_t tl;
	/* A part's UDH is not text to quote; a receipt's text is not either. */
	const uint8_t *t = msg_text_after_udh(orig, &tl);
	int n;

	if (!(orig->registered_delivery & 0x01) || orig->reply_to[0] == '\0')
		return NULL;
	if (orig->flags & MSG_F_RECEIPT)
		tl = 0;
	smpp_receipt_date(orig->submitted, sub, sizeof(sub));
	smpp_receipt_date(done_at, done, sizeof(done));
	n = snprintf(text, sizeof(text), "id:%llu sub:001 dlvrd:%s submit "
	    "date:%s done date:%s stat:%s err:%s text:%.*s",
	    (unsigned long long)orig->id, ok ? "001" : "000", sub, done,
	    state_stat(state), ok ? "000" : "001",
	    (int)strnlen((const char *)t, tl < 20 ? tl : 20), (const char *)t);
	return smpp_receipt_msg(text, (size_t)n, id, done_at, state,
	    &(struct smpp_receipt_ends){ .id = orig->id, .to = orig->to,
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
	snprintf(m->receipted_id, sizeof(m->receipted_id), "%llu",
	    (unsigned long long)e->id);
	/* The receipt travels back: from the recipient to the submitter. */
	snprintf(m->from, sizeof(m->from), "%s", e->to);
	snprintf(m->to, sizeof(m->to), "%s", e->reply_to);
	memcpy(m->src_addr, e->dst_addr, sizeof(m->src_addr));
	memcpy(m->dst_addr, e->src_addr, sizeof(m->dst_addr));
	m->src_ton = e->dst_ton;
	m->src_npi = e->dst_npi;
	m->dst_ton = e->src_ton;
	m->dst_npi = e->src_npi;
	return m;
}
