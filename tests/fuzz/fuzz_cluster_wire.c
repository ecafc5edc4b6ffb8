/*
 * fuzz_cluster_wire.c: what other nodes send (anyone on the NATS server
 * can publish on our subjects): a message must decode only when well
 * formed, and encode back to the same bytes; a subject token only to a
 * valid address that encodes back to it.
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

	if (m != NULL) {
		uint8_t *out = malloc(cluster_msg_size(m));
		size_t n = cluster_msg_encode(m, out);

		/* One encoding per message: the same bytes come back. */
		if (n != size || memcmp(out, data, n) != 0)
			abort();
		free(out);
		free(m);
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
