/* smpp_receipt.c: SMPP delivery receipts: their text and fields (deliver_receipt sends them). */
#include "smpp_receipt.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "msg.h"

/* "YYMMDDhhmm" in UTC, as receipts write dates. */
static void
receipt_date(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%y%m%d%H%M", &tm);
}

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

struct msg *
smpp_receipt_make(const struct msg *orig, uint8_t state, uint64_t id,
    uint64_t done_at)
{
	char sub[16], done[16], text[200];
	struct msg *m;
	bool ok = state == SMPP_STATE_DELIVERED;
	int n;

	if (!(orig->registered_delivery & 0x01) || orig->reply_to[0] == '\0')
		return NULL;
	receipt_date(orig->submitted, sub, sizeof(sub));
	receipt_date(done_at, done, sizeof(done));
	n = snprintf(text, sizeof(text), "id:%llu sub:001 dlvrd:%s submit "
	    "date:%s done date:%s stat:%s err:%s text:%.20s",
	    (unsigned long long)orig->id, ok ? "001" : "000", sub, done,
	    state_stat(state), ok ? "000" : "001",
	    orig->flags & MSG_F_RECEIPT ? "" : (const char *)orig->text);
	m = msg_new((size_t)n);
	memcpy(m->text, text, (size_t)n);
	m->len = (size_t)n;
	m->id = id;
	m->submitted = done_at;
	m->flags = MSG_F_EXACT | MSG_F_RECEIPT;
	m->esm_class = SMPP_ESM_RECEIPT;
	m->message_state = state;
	snprintf(m->receipted_id, sizeof(m->receipted_id), "%llu",
	    (unsigned long long)orig->id);
	/* The receipt travels back: from the recipient to the submitter. */
	snprintf(m->from, sizeof(m->from), "%s", orig->to);
	snprintf(m->to, sizeof(m->to), "%s", orig->reply_to);
	memcpy(m->src_addr, orig->dst_addr, sizeof(m->src_addr));
	memcpy(m->dst_addr, orig->src_addr, sizeof(m->dst_addr));
	m->src_ton = orig->dst_ton;
	m->src_npi = orig->dst_npi;
	m->dst_ton = orig->src_ton;
	m->dst_npi = orig->src_npi;
	return m;
}
