/* smpp_long.c: a line client's text for an SMPP recipient, encoded and split into deliver_sm parts, and the one outcome their answers make. */
#include "smpp_long.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "msg.h"
#include "smpp_pdu.h"
#include "util.h"

/* esm_class: the short_message starts with a user data header. */
#define SMPP_ESM_UDHI	0x40

bool
smpp_status_temporary(uint32_t status)
{
	return status == SMPP_ESME_RMSGQFUL || status == SMPP_ESME_RTHROTTLED ||
	    status == SMPP_ESME_RX_T_APPN;
}

void
smpp_long_opts_of(const struct config *cf, const char *id,
    struct smpp_long_opts *o)
{
	static const int want[] = {
		[CONFIG_CODING_SMPP] = TEXT_CODING_AUTO,
		[CONFIG_CODING_AUTO] = TEXT_CODING_AUTO,
		[CONFIG_CODING_UCS2] = TEXT_UCS2,
		[CONFIG_CODING_LATIN1] = TEXT_LATIN1,
	};
	static const enum text_long how[] = {
		[CONFIG_LONG_SMPP] = TEXT_LONG_UDH,
		[CONFIG_LONG_UDH] = TEXT_LONG_UDH,
		[CONFIG_LONG_SAR] = TEXT_LONG_SAR,
		[CONFIG_LONG_PAYLOAD] = TEXT_LONG_PAYLOAD,
	};
	const struct account_conf *a = config_find_account(cf, id);
	const struct smpp_conf *g = &cf->smpp;

	o->coding = want[a != NULL && a->coding != CONFIG_CODING_SMPP ?
	    a->coding : g->coding];
	o->how = how[a != NULL && a->long_how != CONFIG_LONG_SMPP ?
	    a->long_how : g->long_how];
	o->max_parts = a != NULL && a->max_parts != 0 ? a->max_parts :
	    g->max_parts;
	o->ref = 0;
}

/*
 * How many parts n bytes of UTF-8 take beyond o->max_parts, for the
 * sender's error: 0 when more than any account may allow.
 */
static unsigned
parts_needed(const char *in, size_t n, const struct smpp_long_opts *o,
    int coding)
{
	struct text_split_opts all = { .coding = coding, .how = o->how,
	    .max_parts = TEXT_PARTS_MAX, .ref = o->ref };
	size_t cap = TEXT_SPLIT_MAX(n, TEXT_PARTS_MAX);
	uint8_t *out = xmalloc(cap);
	struct text_split *s = xmalloc(sizeof(*s));
	int k;

	k = text_split(in, n, &all, out, cap, s);
	free(s);
	free(out);
	return k > 0 ? (unsigned)k : 0;
}

/* The parts of s (more than one, or a payload) as lp, for d. */
static struct smpp_long *
long_new(struct msg *d, const struct text_split *s)
{
	struct smpp_long *lp = xcalloc(1, sizeof(*lp) +
	    s->nparts * sizeof(lp->part[0]));

	lp->m = d;
	lp->payload = s->payload;
	lp->sar = !s->udhi && !s->payload;
	lp->ref = s->ref;
	lp->nparts = s->nparts;
	memcpy(lp->part, s->part, s->nparts * sizeof(lp->part[0]));
	return lp;
}

int
smpp_long_make(const struct msg *m, const struct smpp_long_opts *o,
    struct msg **dp, struct smpp_long **lp, unsigned *needed)
{
	const char *in = (const char *)m->text;
	size_t cap = TEXT_SPLIT_MAX(m->len, o->max_parts), len;
	struct text_split_opts so = { .how = o->how,
	    .max_parts = o->max_parts, .ref = o->ref };
	struct text_split s;
	/*
	 * The splitter writes into room for every part's UDH (1.5 KiB at
	 * 255 parts); d gets only what it wrote. A message of that size
	 * would pass glibc's thread cache by, and its free cost a lock and
	 * a merge of chunks, on every message of a line client.
	 */
	uint8_t stackbuf[2048], *out;
	struct msg *d;
	int k;

	*needed = 0;
	/*
	 * Latin-1 asked for falls back to UCS-2 as auto does to it; auto is
	 * text_split's own choice, made in the pass that counts the units.
	 */
	if (o->coding == TEXT_CODING_AUTO)
		so.coding = TEXT_CODING_AUTO;
	else if ((so.coding = text_pick(in, m->len, o->coding)) < 0)
		return -1;
	out = cap <= sizeof(stackbuf) ? stackbuf : xmalloc(cap);
	if ((k = text_split(in, m->len, &so, out, cap, &s)) < 0) {
		int e = errno;

		if (e == EMSGSIZE && o->how != TEXT_LONG_PAYLOAD)
			*needed = parts_needed(in, m->len, o,
			    (int)s.coding);
		if (out != stackbuf)
			free(out);
		errno = e;
		return -1;
	}
	len = s.part[s.nparts - 1].off + s.part[s.nparts - 1].len;
	d = msg_new(len);
	memcpy(d, m, offsetof(struct msg, len));
	memcpy(d->text, out, len);
	if (out != stackbuf)
		free(out);
	d->len = len;
	d->data_coding = (uint8_t)s.coding;
	d->flags = (d->flags & ~(uint32_t)MSG_F_CODING) | MSG_F_CODED;
	if (s.udhi)
		d->esm_class |= SMPP_ESM_UDHI;
	*dp = d;
	*lp = s.nparts > 1 || s.payload ? long_new(d, &s) : NULL;
	return k;
}

void
smpp_long_part(const struct smpp_long *lp, unsigned i, struct smpp_pdu *pdu)
{
	const struct text_part *p = &lp->part[i];

	pdu->esm_class = lp->m->esm_class;
	pdu->data_coding = lp->m->data_coding;
	if (lp->payload) {
		pdu->tlvs |= SMPP_TLV_MESSAGE_PAYLOAD;
		pdu->message_payload = lp->m->text + p->off;
		pdu->message_payload_len = (uint16_t)p->len;
		return;
	}
	pdu->sm_length = (uint8_t)p->len;
	pdu->short_message = lp->m->text + p->off;
	if (lp->sar) {
		pdu->tlvs |= SMPP_TLV_SAR;
		pdu->sar_msg_ref_num = lp->ref;
		pdu->sar_total_segments = (uint8_t)lp->nparts;
		pdu->sar_segment_seqnum = (uint8_t)(i + 1);
	}
}

bool
smpp_long_answered(struct smpp_long *lp, uint32_t status)
{
	/* A permanent error decides; a temporary one until then. */
	if (status != SMPP_ESME_ROK && (lp->status == SMPP_ESME_ROK ||
	    (smpp_status_temporary(lp->status) &&
	    !smpp_status_temporary(status))))
		lp->status = status;
	lp->unanswered--;
	return lp->unanswered == 0 && lp->next == lp->nparts;
}

void
smpp_long_free(struct smpp_long *lp)
{
	free(lp);
}
