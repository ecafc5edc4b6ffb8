/*
 * fuzz_cluster_wire.c: what other nodes send (anyone on the NATS server
 * can publish on our subjects): a message must decode only when well
 * formed, and encode back to the same bytes (a bundle of them too); a
 * subject token only to a valid address that encodes back to it; a batch
 * of verdicts only when whole.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster_wire.h"
#include "deliver.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char addr[ROUTE_ADDR_MAX + 1], tok[CLUSTER_TOKEN_MAX + 1];
	struct deliver_msg *m = cluster_msg_decode(data, size);
	struct deliver_msg *ms[CLUSTER_BUNDLE_MAX];
	size_t k = cluster_bundle_decode(data, size, ms, CLUSTER_BUNDLE_MAX);
	long nv = cluster_verdicts_count(data, size);

	if (m != NULL) {
		uint8_t *out = malloc(cluster_msg_size(m));
		size_t n = cluster_msg_encode(m, out);

		/* One encoding per message: the same bytes come back. */
		if (n != size || memcmp(out, data, n) != 0)
			abort();
		free(out);
		free(m);
	}
	if (k > 0) {
		uint8_t *out = malloc(size);
		size_t n = cluster_bundle_head(out);

		for (size_t i = 0; i < k; i++) {
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
