/* cluster_wire.c: addresses, messages and verdicts as nodes send them. */
#include "cluster_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

/*
 * A change of layout takes new first bytes (0xB2, 0xA2, ...), so that a
 * node of another version can tell "another format" from garbage and say
 * so (cluster_wire_foreign).
 */
#define WIRE_VERSION	1
#define WIRE_BUNDLE	0xB1	/* a bundle of messages (this version's) */
#define WIRE_VERDICTS	0xA1	/* a batch of verdicts (this version's) */

/* The flags that mean something to the recipient's node. */
#define WIRE_FLAGS	(MSG_F_PREFIX_FIRST | MSG_F_EXACT | \
	MSG_F_RECEIPT | MSG_F_UMR | MSG_F_SAR | MSG_F_LINE_TEXT | \
	MSG_F_CODING | MSG_F_NODE_HELD)

static const char hex[] = "0123456789ABCDEF";

static bool
token_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

size_t
cluster_token_encode(const char *addr, char *out)
{
	size_t n = 0;

	for (const uint8_t *p = (const uint8_t *)addr; *p != '\0' &&
	    n + 3 <= CLUSTER_TOKEN_MAX; p++) {
		if (token_char(*p)) {
			out[n++] = (char)*p;
		} else {
			out[n++] = '=';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	out[n] = '\0';
	return n;
}

static int
hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool
cluster_token_decode(const char *tok, size_t len, char *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		int hi, lo;

		if (n == ROUTE_ADDR_MAX)
			return false;
		if (token_char((uint8_t)tok[i])) {
			out[n++] = tok[i];
			continue;
		}
		/* Only the one encoding: =XX, upper case, of a byte that needs it. */
		if (tok[i] != '=' || i + 2 >= len ||
		    (hi = hex_val(tok[i + 1])) < 0 ||
		    (lo = hex_val(tok[i + 2])) < 0 ||
		    token_char((uint8_t)(hi << 4 | lo)))
			return false;
		out[n++] = (char)(hi << 4 | lo);
		i += 2;
	}
	out[n] = '\0';
	return route_addr_valid(out, n);
}

/* The strings of a message, in wire order, and their field sizes. */
#define WIRE_STRINGS(m) \
	{ (m)->src_addr, sizeof((m)->src_addr) }, \
	{ (m)->dst_addr, sizeof((m)->dst_addr) }, \
	{ (m)->reply_to, sizeof((m)->reply_to) }, \
	{ (m)->receipted_id, sizeof((m)->receipted_id) }, \
	{ (m)->from, sizeof((m)->from) }, \
	{ (m)->to, sizeof((m)->to) }

struct wire_str {
	char	*s;
	size_t	cap;
};

/* Fixed part: version, id, flags, 3 times, 8 bytes, umr, sar, text length. */
#define WIRE_FIXED	(1 + 8 + 4 + 3 * 8 + 8 + 2 + 4 + 4)

size_t
cluster_msg_size(const struct msg *m)
{
	/* Each string: a length byte and at most its field less its NUL. */
	return WIRE_FIXED + sizeof(m->src_addr) + sizeof(m->dst_addr) +
	    sizeof(m->reply_to) + sizeof(m->receipted_id) + sizeof(m->from) +
	    sizeof(m->to) + m->len;
}

static uint8_t *
put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = bytes; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
	return p + bytes;
}

size_t
cluster_msg_encode(const struct msg *m, uint8_t *out)
{
	const struct wire_str strs[] = { WIRE_STRINGS((struct msg *)m) };
	uint8_t *p = out;

	*p++ = WIRE_VERSION;
	p = put_be(p, m->id, 8);
	p = put_be(p, m->flags & WIRE_FLAGS, 4);
	p = put_be(p, m->submitted, 8);
	p = put_be(p, m->due, 8);
	p = put_be(p, m->expires, 8);
	*p++ = m->src_ton;
	*p++ = m->src_npi;
	*p++ = m->dst_ton;
	*p++ = m->dst_npi;
	*p++ = m->esm_class;
	*p++ = m->data_coding;
	*p++ = m->registered_delivery;
	*p++ = m->message_state;
	p = put_be(p, m->umr, 2);
	p = put_be(p, m->sar_ref, 2);
	*p++ = m->sar_total;
	*p++ = m->sar_seq;
	p = put_be(p, m->len, 4);
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		size_t n = strnlen(strs[i].s, strs[i].cap - 1);

		*p++ = (uint8_t)n;
		memcpy(p, strs[i].s, n);
		p += n;
	}
	memcpy(p, m->text, m->len);
	return (size_t)(p - out) + m->len;
}

/* Reads bytes big-endian bytes at *p, if that many are left. */
static bool
get_be(const uint8_t **p, const uint8_t *end, unsigned bytes, uint64_t *v)
{
	if ((size_t)(end - *p) < bytes)
		return false;
	*v = 0;
	for (unsigned i = 0; i < bytes; i++)
		*v = *v << 8 | (*p)[i];
	*p += bytes;
	return true;
}

struct msg *
cluster_msg_decode(const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n, *start;
	uint64_t id, flags, sub, due, exp, umr, sar, len;
	uint8_t b[8];
	struct msg *m;

	if (n < WIRE_FIXED || *p++ != WIRE_VERSION ||
	    !get_be(&p, end, 8, &id) || !get_be(&p, end, 4, &flags) ||
	    !get_be(&p, end, 8, &sub) || !get_be(&p, end, 8, &due) ||
	    !get_be(&p, end, 8, &exp))
		return NULL;
	/* Flags this version does not know: not a message it can carry. */
	if (flags & ~(uint64_t)WIRE_FLAGS)
		return NULL;
	memcpy(b, p, 8);
	p += 8;
	if (!get_be(&p, end, 2, &umr) || !get_be(&p, end, 2, &sar) ||
	    end - p < 2)
		return NULL;
	start = p;
	p += 2;
	if (!get_be(&p, end, 4, &len) || len > (size_t)(end - p))
		return NULL;
	m = msg_new(len);
	m->id = id;
	m->flags = (uint32_t)flags;
	m->submitted = sub;
	m->due = due;
	m->expires = exp;
	m->src_ton = b[0];
	m->src_npi = b[1];
	m->dst_ton = b[2];
	m->dst_npi = b[3];
	m->esm_class = b[4];
	m->data_coding = b[5];
	m->registered_delivery = b[6];
	m->message_state = b[7];
	m->umr = (uint16_t)umr;
	m->sar_ref = (uint16_t)sar;
	m->sar_total = start[0];
	m->sar_seq = start[1];

	const struct wire_str strs[] = { WIRE_STRINGS(m) };

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		size_t k;

		if (p == end || (k = *p++) >= strs[i].cap ||
		    (size_t)(end - p) < k || memchr(p, '\0', k) != NULL)
			goto bad;
		memcpy(strs[i].s, p, k);
		strs[i].s[k] = '\0';
		p += k;
	}
	if ((size_t)(end - p) != len)
		goto bad;
	/*
	 * Anyone on NATS can send this: the addresses must be addresses (a
	 * line break in one would forge lines at a router client), and the
	 * text is checked again where it becomes a line, whatever the sender
	 * says of it.
	 */
	if (!route_addr_valid(m->to, strlen(m->to)) ||
	    (m->from[0] != '\0' && !route_addr_valid(m->from,
	    strlen(m->from))) || (m->reply_to[0] != '\0' &&
	    !route_addr_valid(m->reply_to, strlen(m->reply_to))))
		goto bad;
	m->flags &= ~(uint32_t)MSG_F_LINE_TEXT;
	memcpy(m->text, p, len);
	m->len = len;
	return m;
bad:
	msg_free(m);
	return NULL;
}

size_t
cluster_bundle_head(uint8_t *out)
{
	out[0] = WIRE_BUNDLE;
	return CLUSTER_BUNDLE_HEAD;
}

size_t
cluster_bundle_item_size(const struct msg *m)
{
	return 4 + cluster_msg_size(m);
}

size_t
cluster_bundle_put(const struct msg *m, uint8_t *out)
{
	size_t n = cluster_msg_encode(m, out + 4);

	put_be(out, n, 4);
	return 4 + n;
}

size_t
cluster_bundle_decode(const uint8_t *p, size_t n, struct msg **ms,
    size_t max)
{
	const uint8_t *end = p + n;
	size_t k = 0;
	uint64_t len;

	if (n < CLUSTER_BUNDLE_HEAD || *p++ != WIRE_BUNDLE)
		return 0;
	while (p < end) {
		if (k == max || !get_be(&p, end, 4, &len) ||
		    len > (size_t)(end - p) ||
		    (ms[k] = cluster_msg_decode(p, len)) == NULL)
			goto bad;
		k++;
		p += len;
	}
	return k;
bad:
	while (k > 0)
		free(ms[--k]);
	return 0;
}

size_t
cluster_verdicts_head(uint8_t *out)
{
	out[0] = WIRE_VERDICTS;
	return CLUSTER_VERDICTS_HEAD;
}

size_t
cluster_verdict_put(uint64_t req, uint8_t v, uint8_t *out)
{
	put_be(out, req, 8);
	out[8] = v;
	return CLUSTER_VERDICT_SIZE;
}

long
cluster_verdicts_count(const uint8_t *p, size_t n)
{
	if (n <= CLUSTER_VERDICTS_HEAD || p[0] != WIRE_VERDICTS ||
	    (n - CLUSTER_VERDICTS_HEAD) % CLUSTER_VERDICT_SIZE != 0)
		return -1;
	return (long)((n - CLUSTER_VERDICTS_HEAD) / CLUSTER_VERDICT_SIZE);
}

void
cluster_verdict_get(const uint8_t *p, size_t i, uint64_t *req, uint8_t *v)
{
	const uint8_t *q = p + CLUSTER_VERDICTS_HEAD + i * CLUSTER_VERDICT_SIZE;

	(void)get_be(&q, q + 8, 8, req);
	*v = q[0];
}

unsigned
cluster_wire_foreign(const uint8_t *p, size_t n)
{
	if (n == 0 || p[0] == WIRE_BUNDLE || p[0] == WIRE_VERDICTS)
		return 0;
	if ((p[0] & 0xF0) == (WIRE_BUNDLE & 0xF0) ||
	    (p[0] & 0xF0) == (WIRE_VERDICTS & 0xF0))
		return p[0];
	return 0;
}

unsigned
cluster_wire_format(unsigned foreign)
{
	return (foreign & 0xF0) == (WIRE_BUNDLE & 0xF0) ? WIRE_BUNDLE :
	    WIRE_VERDICTS;
}

void
cluster_url_shown(const char *url, char *out, size_t n)
{
	const char *host = strstr(url, "://"), *at;

	host = host != NULL ? host + 3 : url;
	/* As libnats reads it: the last '@' ends the userinfo, '/' or not. */
	if ((at = strrchr(host, '@')) == NULL)
		snprintf(out, n, "%s", url);
	else
		snprintf(out, n, "%.*s%s", (int)(host - url), url, at + 1);
}
