/*
 * fuzz_cluster_wire.c: what other nodes send (anyone on the NATS server
 * can publish on our subjects): a message must decode only when well
 * formed, and encode back to the same bytes (a bundle of them too; but
 * for the line-text flag, which decoding drops); a
 * subject token only to a valid address that encodes back to it; a batch
 * of verdicts only when whole.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster_wire.h"
#include "msg.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The one thing decoding changes on purpose: the sender's "text fit for a
 * line" flag is dropped (the recipient checks for itself). Put back from
 * the message's bytes (version, id, then the flags), so that the same
 * bytes must come back.
 */
static void
restore_line_text(struct msg *m, const uint8_t *item)
{
	uint32_t flags = (uint32_t)item[9] << 24 | (uint32_t)item[10] << 16 |
	    (uint32_t)item[11] << 8 | item[12];

	m->flags |= flags & MSG_F_LINE_TEXT;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char addr[ROUTE_ADDR_MAX + 1], tok[CLUSTER_TOKEN_MAX + 1];
	struct msg *m = cluster_msg_decode(data, size);
	struct msg *ms[CLUSTER_BUNDLE_MAX];
	size_t k = cluster_bundle_decode(data, size, ms, CLUSTER_BUNDLE_MAX);
	long nv = cluster_verdicts_count(data, size);

	if (m != NULL) {
		uint8_t *out = malloc(cluster_msg_size(m));
		size_t n;

		if (m->flags & MSG_F_LINE_TEXT)
			abort();
		restore_line_text(m, data);
		n = cluster_msg_encode(m, out);

		/* One encoding per message: the same bytes come back. */
		if (n != size || memcmp(out, data, n) != 0)
			abort();
		free(out);
		free(m);
	}
	if (k > 0) {
		uint8_t *out = malloc(size);
		size_t n = cluster_bundle_head(out), at = CLUSTER_BUNDLE_HEAD;

		for (size_t i = 0; i < k; i++) {
			/* Each item: its length (4 bytes), then the message. */
			restore_line_text(ms[i], data + at + 4);
			at += 4 + ((size_t)data[at] << 24 | (size_t)data[at + 1] << 16 |
			    (size_t)data[at + 2] << 8 | data[at + 3]);
			out = realloc(out, n + cluster_bundle_item_size(ms[i]));
			n += cluster_bundle_put(ms[i], out + n);
			free(ms[i]);
		}
		if (n != size || memcmp(out, data, n) != 0)
			abort();
		free(out);
	}
	if (nv >= 0) {
		uint64_t req;
		uint8_t v;

		if ((size_t)nv * CLUSTER_VERDICT_SIZE + CLUSTER_VERDICTS_HEAD !=
		    size || nv == 0)
			abort();
		cluster_verdict_get(data, (size_t)nv - 1, &req, &v);
	}
	if (size <= CLUSTER_TOKEN_MAX &&
	    cluster_token_decode((const char *)data, size, addr)) {
		if (!route_addr_valid(addr, strlen(addr)) ||
		    cluster_token_encode(addr, tok) != size ||
		    memcmp(tok, data, size) != 0)
			abort();
	}
	return 0;
}
