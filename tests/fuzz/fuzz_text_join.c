/* fuzz_text_join.c: parts, clock steps and expiries through a small joining table; caps and counts hold. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text_join.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct text_join_limits lim = {
	.max_pending = 4, .max_bytes = 64,
	.max_pending_owner = 3, .max_bytes_owner = 40,
	.timeout_ms = 1000,
};

static void
check(const struct text_join *j)
{
	if (text_join_pending(j) > lim.max_pending ||
	    text_join_bytes(j) > lim.max_bytes)
		abort();
}

static void
on_expired(void *arg, struct text_join_msg *m)
{
	unsigned *n = arg;

	if (m->received == 0 || m->received >= m->concat.total)
		abort();
	(*n)++;
	text_join_msg_free(m);
}

/* One part: len octets at p starting with a UDH, from the op's choices. */
static void
add(struct text_join *j, uint8_t op, const uint8_t *p, size_t len,
    uint64_t now)
{
	static const char *const who[] = { "bob", "eve" };
	struct text_join_part part = { .owner = who[op >> 2 & 1],
	    .sender = who[op >> 3 & 1], .recipient = "alice",
	    .data_coding = (op >> 4 & 1) ? 8 : 0, .id = now + 1 };
	struct text_join_msg *m = NULL;
	size_t hl, before = text_join_bytes(j);
	unsigned pending = text_join_pending(j);
	int r;

	if (text_udh_concat(p, len, &part.concat, &hl) != 1)
		return;
	/* Some parts bring their owner's own caps and timeout (a reload). */
	if (op & 0x20) {
		part.max_pending_owner = 1 + (op >> 6 & 1);
		part.max_bytes_owner = 8 + (size_t)(op >> 7 & 1) * 16;
		part.timeout_ms = 200 + (uint64_t)(op >> 6 & 3) * 300;
	}
	if (hl > len)
		abort();
	part.data = p + hl;
	part.len = len - hl;
	r = text_join_add(j, &part, now, &m);
	if (r == TEXT_JOIN_DONE) {
		if (m->received != m->concat.total || m->len > before +
		    part.len)
			abort();
		text_join_msg_free(m);
	} else if (r == TEXT_JOIN_PENDING) {
		if (text_join_bytes(j) != before + part.len)
			abort();
	} else if (text_join_bytes(j) != before ||
	    text_join_pending(j) != pending) {
		abort();	/* a duplicate or a refusal keeps nothing */
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct text_join *j = text_join_new(&lim);
	uint64_t now = 0;
	unsigned expired = 0;
	size_t i = 0, len;
	uint8_t op;

	while (i < size) {
		op = data[i++];
		if ((op & 3) < 2 && i < size) {
			len = data[i++] % 40;
			len = len < size - i ? len : size - i;
			add(j, op, data + i, len, now);
			i += len;
		} else if ((op & 3) == 2) {
			now += (uint64_t)(op >> 2) * 50;
		} else {
			text_join_expire(j, now, on_expired, &expired);
			if (text_join_next_expiry(j) <= now)
				abort();
		}
		check(j);
	}
	text_join_expire(j, UINT64_MAX, on_expired, &expired);
	if (text_join_pending(j) != 0 || text_join_bytes(j) != 0)
		abort();
	text_join_free(j);
	return 0;
}
